"""docker-compose.yml, which no machine of this project can run (no Docker engine): parsed,
and its "ha" profile checked for what makes a failover work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from psycopg.conninfo import conninfo_to_dict

from jobq.settings import Settings
from tests.conftest import ROOT

HA = ("pg-primary", "pg-standby", "jobq-a", "jobq-b")


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def test_the_default_services_are_unchanged_and_ha_is_a_profile() -> None:
    services = _compose()["services"]
    assert "profiles" not in services["postgres"] and "profiles" not in services["jobq"]
    for name in HA:
        assert services[name]["profiles"] == ["ha"], name


def test_the_primary_waits_for_its_synchronous_standby() -> None:
    services = _compose()["services"]
    primary = services["pg-primary"]
    command = " ".join(primary["command"].split())
    for setting in ("wal_level=replica", "synchronous_commit=on", "synchronous_standby_names=pg_standby",
                    "max_wal_senders=10"):
        assert f"-c {setting}" in command, command
    init = [v for v in primary["volumes"] if "/docker-entrypoint-initdb.d/" in v]
    assert init, primary["volumes"]
    script = ROOT / init[0].split(":")[0]
    assert "REPLICATION" in script.read_text() and "host replication replicator" in script.read_text()


def test_the_standby_copies_the_primary_under_the_name_it_waits_for() -> None:
    services = _compose()["services"]
    standby = services["pg-standby"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in standby["volumes"] if v.startswith("./")}
    script_path = standby["entrypoint"][-1]
    script = (ROOT / mounted[script_path]).read_text()
    assert "pg_basebackup" in script and " -R " in script
    assert "application_name=pg_standby" in script
    assert "synchronous_standby_names" not in script.split("exec postgres")[1]
    assert standby["environment"]["PGDATA"].startswith("/var/lib/postgresql/data/")
    assert standby["depends_on"]["pg-primary"]["condition"] == "service_healthy"
    assert standby["user"] == "postgres"


def test_every_replica_takes_the_multi_host_url() -> None:
    services = _compose()["services"]
    ports = set()
    for name in ("jobq-a", "jobq-b"):
        replica = services[name]
        url = replica["environment"]["JOBQ_DATABASE_URL"]
        params = conninfo_to_dict(url)
        assert params["host"] == "pg-primary,pg-standby" and params["port"] == "5432,5432", params
        assert params["target_session_attrs"] == "read-write"
        assert Settings(database_url=url).database_url == url  # the service accepts it
        assert "JOBQ_ADMIN_TOKEN" in replica["environment"]  # it binds 0.0.0.0
        assert "--host 0.0.0.0" in replica["command"]
        assert set(replica["depends_on"]) == {"pg-primary", "pg-standby"}
        ports.update(replica["ports"])
    assert len(ports) == 2  # one host port each


def test_named_volumes_are_declared() -> None:
    compose = _compose()
    used = {v.split(":")[0] for s in compose["services"].values() for v in s.get("volumes", [])
            if not v.startswith(".")}
    assert used <= set(compose["volumes"]), (used, compose["volumes"])
    assert Path(ROOT / "deploy/ha/standby.sh").stat().st_mode & 0o111
