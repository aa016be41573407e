"""docker-compose.yml, which no machine of this project can run (no Docker engine): checked by
Debian's `docker-compose config` (Compose 1.29, which .ci/run installs), parsed, and the
"ha" profile's scripts run outside their containers for what makes a failover work."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

from jobq.settings import Settings
from tests.conftest import ROOT

HA = ("pg-primary", "pg-standby", "jobq-a", "jobq-b")
JOBQ = ("jobq", "jobq-a", "jobq-b")
# The secrets the file takes from the environment, with no default.
REQUIRED = {"JOBQ_ADMIN_TOKEN": "an-admin-token-of-32-characters-", "POSTGRES_PASSWORD": "pw-Of_the-db-1"}
SECRETS = (*REQUIRED, "REPLICATION_PASSWORD")


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def _script(compose: dict[str, Any], service: str) -> str:
    """A service's inline entrypoint script (`sh -c SCRIPT`), as the container's shell reads it."""
    entrypoint = compose["services"][service]["entrypoint"]
    assert entrypoint[:2] == ["/bin/sh", "-c"], entrypoint
    return str(entrypoint[2]).replace("$$", "$")


def _docker_compose(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`docker-compose ARGS` on the checkout's file, from a shell without the secrets (plus
    ``env``), with an empty env file so that a developer's .env cannot stand in for them."""
    docker_compose = shutil.which("docker-compose")
    assert docker_compose, "docker-compose is missing: apt-get install docker-compose (.ci/run does)"
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith("COMPOSE_")}
    return subprocess.run(
        [
            docker_compose,
            "--project-directory",
            str(ROOT),
            "-f",
            str(ROOT / "docker-compose.yml"),
            "--env-file",
            str(env_file),
            *args,
        ],
        cwd=tmp_path,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- docker-compose config ------------------------------------------------------------------


@pytest.mark.parametrize("profile", [(), ("--profile", "ha")], ids=["default", "ha"])
def test_docker_compose_config_accepts_the_file_with_its_secrets_set(tmp_path: Path, profile: tuple[str, ...]) -> None:
    out = _docker_compose(tmp_path, *profile, "config", **REQUIRED)
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)["services"]
    assert set(resolved) == {"postgres", "jobq", *HA}
    assert resolved["postgres"]["environment"]["POSTGRES_PASSWORD"] == REQUIRED["POSTGRES_PASSWORD"]
    assert resolved["pg-primary"]["environment"]["POSTGRES_PASSWORD"] == REQUIRED["POSTGRES_PASSWORD"]
    for name in JOBQ:
        service = resolved[name]
        assert service["build"]["context"] == str(ROOT) and "image" not in service, service
        assert "volumes" not in service  # no source mount: the image holds the installed wheel
        env = service["environment"]
        assert env["JOBQ_ADMIN_TOKEN"] == REQUIRED["JOBQ_ADMIN_TOKEN"]
        assert conninfo_to_dict(env["JOBQ_DATABASE_URL"])["password"] == REQUIRED["POSTGRES_PASSWORD"]
    # Passed through from the shell, never given a value by the file.
    for name in ("pg-primary", "pg-standby"):
        assert resolved[name]["environment"]["REPLICATION_PASSWORD"] is None


@pytest.mark.parametrize("missing", list(REQUIRED))
def test_docker_compose_config_refuses_a_missing_secret_by_name(tmp_path: Path, missing: str) -> None:
    given = {k: v for k, v in REQUIRED.items() if k != missing}
    out = _docker_compose(tmp_path, "config", **given)
    assert out.returncode != 0 and out.stdout == ""
    assert f"set {missing} to a long random secret" in out.stderr, out.stderr
    # The message of 1.29 quotes the environment block; the secret that was given stays out of it.
    for value in given.values():
        assert value not in out.stderr


def test_no_secret_has_a_default() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for name in SECRETS:
        assert f"${{{name}:-" not in text and f"${{{name}-" not in text, name
    for service in _compose()["services"].values():
        for key, value in (service.get("environment") or {}).items():
            if key in SECRETS:
                assert value is None or str(value).startswith(f"${{{key}:?"), (key, value)


# --- the file's structure ---------------------------------------------------------------------


def test_the_default_services_are_unchanged_and_ha_is_a_profile() -> None:
    services = _compose()["services"]
    assert "profiles" not in services["postgres"] and "profiles" not in services["jobq"]
    for name in HA:
        assert services[name]["profiles"] == ["ha"], name


def test_every_jobq_container_runs_the_image_built_here_with_its_own_command() -> None:
    services = _compose()["services"]
    for name in JOBQ:
        service = services[name]
        # Built here, under a name of its own (two builds to one name at once fail in Compose 2).
        assert service["build"] == "." and "image" not in service, name
        # The image's CMD (jobq serve --host 0.0.0.0 --port 8000, tests/test_docker.py) runs:
        # nothing here replaces it, or installs anything at start.
        assert "command" not in service and "entrypoint" not in service and "volumes" not in service, name
        assert service["ports"][0].endswith(":8000"), name


def test_the_primary_waits_for_its_synchronous_standby() -> None:
    services = _compose()["services"]
    primary = services["pg-primary"]
    command = " ".join(primary["command"].split())
    for setting in (
        "wal_level=replica",
        "synchronous_commit=on",
        "synchronous_standby_names=pg_standby",
        "max_wal_senders=10",
    ):
        assert f"-c {setting}" in command, command
    assert command.startswith("postgres ")


def _fake(bin_dir: Path, name: str) -> None:
    """A command that prints its name and arguments, one per line, instead of doing its work."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho {name}; for a in "$@"; do echo "$a"; done\n')
    path.chmod(0o755)


def test_the_primary_writes_its_replication_init_script_then_runs_the_images_entrypoint(tmp_path: Path) -> None:
    compose = _compose()
    initdb = tmp_path / "initdb"
    initdb.mkdir()
    script = _script(compose, "pg-primary")
    assert "/docker-entrypoint-initdb.d/10-replication.sh" in script
    script = script.replace("/docker-entrypoint-initdb.d", str(initdb))
    _fake(tmp_path / "bin", "docker-entrypoint.sh")
    argv = [
        "/bin/sh",
        "-c",
        script,
        *compose["services"]["pg-primary"]["entrypoint"][3:],
        *compose["services"]["pg-primary"]["command"].split(),
    ]
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "REPLICATION_PASSWORD": "secret"}

    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    # The image's entrypoint gets the service's command, word for word.
    assert ran.stdout.split() == ["docker-entrypoint.sh", *compose["services"]["pg-primary"]["command"].split()]
    init = initdb / "10-replication.sh"
    assert init.stat().st_mode & stat.S_IXOTH  # run (not sourced) by the postgres user
    text = init.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert '-v password="$REPLICATION_PASSWORD"' in text and "PASSWORD :'password'" in text
    assert 'echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"' in text
    assert subprocess.run(["/bin/sh", "-n", str(init)], timeout=30).returncode == 0

    # Without the secret it stops before anything, naming it.
    init.unlink()
    env.pop("REPLICATION_PASSWORD")
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode != 0 and "REPLICATION_PASSWORD" in ran.stderr and ran.stdout == ""
    assert not init.exists()


def test_the_standby_copies_the_primary_under_the_name_it_waits_for(tmp_path: Path) -> None:
    compose = _compose()
    standby = compose["services"]["pg-standby"]
    script = _script(compose, "pg-standby")
    assert '"$PGDATA/PG_VERSION"' in script
    assert "pg_basebackup" in script and " -R " in script
    assert "application_name=pg_standby" in script
    assert standby["environment"]["PGDATA"].startswith("/var/lib/postgresql/data/")
    assert standby["depends_on"]["pg-primary"]["condition"] == "service_healthy"
    assert standby["user"] == "postgres"

    # Run it on a data directory that is already a copy: it starts PostgreSQL as a hot standby,
    # without synchronous_standby_names (a promoted standby must not wait for one of its own).
    pgdata = tmp_path / "standby"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("17\n")
    for name in ("postgres", "pg_basebackup", "pg_isready"):
        _fake(tmp_path / "bin", name)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "PGDATA": str(pgdata), "REPLICATION_PASSWORD": "secret"}
    ran = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    words = ran.stdout.split()
    assert words[0] == "postgres" and "hot_standby=on" in words, words
    assert not any(w.startswith("synchronous_standby_names") for w in words)

    env.pop("REPLICATION_PASSWORD")
    ran = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode != 0 and "REPLICATION_PASSWORD" in ran.stderr and ran.stdout == ""


def test_every_replica_takes_the_multi_host_url() -> None:
    services = _compose()["services"]
    ports = set()
    for name in ("jobq-a", "jobq-b"):
        replica = services[name]
        url = replica["environment"]["JOBQ_DATABASE_URL"].replace(
            "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD to a long random secret of URL-safe characters}", "pw"
        )
        params = conninfo_to_dict(url)
        assert params["host"] == "pg-primary,pg-standby" and params["port"] == "5432,5432", params
        assert params["target_session_attrs"] == "read-write"
        assert Settings(database_url=url).database_url == url  # the service accepts it
        assert "JOBQ_ADMIN_TOKEN" in replica["environment"]  # it binds 0.0.0.0
        assert set(replica["depends_on"]) == {"pg-primary", "pg-standby"}
        ports.update(replica["ports"])
    assert len(ports) == 2  # one host port each


def test_named_volumes_are_declared() -> None:
    compose = _compose()
    used = {
        v.split(":")[0] for s in compose["services"].values() for v in s.get("volumes", []) if not v.startswith(".")
    }
    assert used <= set(compose["volumes"]), (used, compose["volumes"])
