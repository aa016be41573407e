"""docker-compose.yml, which no machine of this project can run (no Docker engine): parsed,
and its "ha" profile checked for what makes a failover work."""

from __future__ import annotations

from typing import Any

import yaml
from psycopg.conninfo import conninfo_to_dict

from jobq.settings import Settings
from tests.conftest import ROOT

HA = ("pg-primary", "pg-standby", "jobq-a", "jobq-b")


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def _script(compose: dict[str, Any], service: str, target: str) -> str:
    """The text of the inline config a service mounts at ``target``, as the container sees it."""
    mounts = [c for c in compose["services"][service]["configs"] if c["target"] == target]
    assert mounts, compose["services"][service]["configs"]
    assert mounts[0]["mode"] & 0o111  # executable
    return str(compose["configs"][mounts[0]["source"]]["content"]).replace("$$", "$")


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
    script = _script(_compose(), "pg-primary", "/docker-entrypoint-initdb.d/10-replication.sh")
    assert script.startswith("#!/bin/sh\n")
    assert '"$REPLICATION_PASSWORD"' in script and "host replication replicator" in script


def test_the_standby_copies_the_primary_under_the_name_it_waits_for() -> None:
    services = _compose()["services"]
    standby = services["pg-standby"]
    script = _script(_compose(), "pg-standby", standby["entrypoint"][-1])
    assert '"$PGDATA/PG_VERSION"' in script
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
