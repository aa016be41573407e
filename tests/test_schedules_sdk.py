"""The SDK's schedule calls and ``jobq schedules`` against a real service (issue 13): the
server and the SDK agree on every field and on the listing's shape; /metrics counts fires."""

from __future__ import annotations

import json

import httpx
import pytest

from jobq.client import AsyncClient, Client, NotFound, ValidationError
from tests.conftest import LiveServer
from tests.test_cli import jobq
from tests.waiting import eventually


def test_sync_sdk_round_trip(live_server: LiveServer) -> None:
    with Client(live_server.url) as c:
        s = c.put_schedule("nightly", cron="0 2 * * *", type="report", payload={"f": "pdf"},
                           queue="reports", priority=3, max_attempts=4, timezone="Europe/Berlin",
                           misfire="skip")
        assert (s.name, s.cron, s.timezone, s.misfire, s.enabled) == (
            "nightly", "0 2 * * *", "Europe/Berlin", "skip", True)
        assert (s.job.type, s.job.queue, s.job.payload, s.job.priority, s.job.max_attempts) == (
            "report", "reports", {"f": "pdf"}, 3, 4)
        assert s.next_fire_at is not None and s.last_fired_at is None and s.last_job_id is None
        assert set(s.extra) == {"pending_fire_at", "created_at", "updated_at"}
        assert c.get_schedule("nightly") == s
        assert [x.name for x in c.list_schedules()] == ["nightly"]
        off = c.update_schedule("nightly", enabled=False, payload={"f": "csv"}, priority=None)
        assert off.enabled is False and off.next_fire_at is None
        assert off.job.payload == {"f": "csv"} and off.job.priority == 0 and off.job.queue == "reports"
        on = c.update_schedule("nightly", enabled=True, cron="@daily")
        assert on.enabled and on.cron == "@daily" and on.next_fire_at is not None
        with pytest.raises(ValidationError) as bad:
            c.put_schedule("nightly", cron="not cron", type="x")
        assert "cron" in str(bad.value)
        c.delete_schedule("nightly")
        with pytest.raises(NotFound):
            c.get_schedule("nightly")
        assert c.list_schedules() == []


async def test_async_sdk_round_trip(live_server: LiveServer) -> None:
    async with AsyncClient(live_server.url) as c:
        s = await c.put_schedule("hourly", cron="@hourly", type="t")
        assert s.job.queue == "default" and s.misfire == "run_once" and s.timezone == "UTC"
        assert (await c.update_schedule("hourly", misfire="skip")).misfire == "skip"
        assert [x.name for x in await c.list_schedules()] == ["hourly"]
        await c.delete_schedule("hourly")
        with pytest.raises(NotFound):
            await c.delete_schedule("hourly")


@pytest.mark.slow
def test_fires_show_in_the_schedule_and_in_metrics(live_server: LiveServer) -> None:
    with Client(live_server.url) as c:
        c.put_schedule("ticker", cron="* * * * * *", type="tick", queue="tq")
        s = eventually(lambda: (now := c.get_schedule("ticker")).last_job_id is not None and now,
                       poll_s=0.1, what="a first fire of ticker")
        assert c.get(s.last_job_id).idempotency_key.startswith("schedule:ticker:")  # type: ignore[union-attr]
    text = httpx.get(live_server.url + "/metrics").text
    fires = [ln for ln in text.splitlines() if ln.startswith('jobq_schedule_fires_total{schedule="ticker"}')]
    assert fires and float(fires[0].split()[-1]) >= 1
    lag = [ln for ln in text.splitlines() if ln.startswith('jobq_schedule_last_fire_lag_seconds{schedule="ticker"}')]
    assert lag and 0 <= float(lag[0].split()[-1]) < 1


def test_cli_schedules(live_server: LiveServer) -> None:
    out = jobq(live_server, "schedules", "set", "backup", "--cron", "30 3 * * *", "--type", "backup.run",
               "--payload", '{"db": "main"}', "--queue", "ops", "--timezone", "America/New_York",
               "--json")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["name"] == "backup" and made["job"]["payload"] == {"db": "main"}
    assert made["timezone"] == "America/New_York" and made["next_fire_at"].endswith("Z")
    listed = json.loads(jobq(live_server, "schedules", "list", "--json").stdout)
    assert [s["name"] for s in listed["schedules"]] == ["backup"]
    table = jobq(live_server, "schedules")
    assert table.returncode == 0 and "backup" in table.stdout and "30 3 * * *" in table.stdout
    assert json.loads(jobq(live_server, "schedules", "disable", "backup", "--json").stdout)["enabled"] is False
    assert json.loads(jobq(live_server, "schedules", "enable", "backup", "--json").stdout)["enabled"] is True
    assert json.loads(jobq(live_server, "schedules", "get", "backup", "--json").stdout)["cron"] == "30 3 * * *"
    bad = jobq(live_server, "schedules", "set", "backup", "--cron", "99 * * * *", "--type", "x")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1 and "cron" in bad.stderr
    assert jobq(live_server, "schedules", "delete", "backup").returncode == 0
    gone = jobq(live_server, "schedules", "get", "backup")
    assert gone.returncode == 1 and "not_found" in gone.stderr + gone.stdout
    assert len(gone.stderr.strip().splitlines()) == 1
