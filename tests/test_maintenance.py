"""The service keeps its own tables in shape where autovacuum does not (core/maintenance.py):
with autovacuum off for jobq's tables, the duties leader ANALYZEs a table that changed and
VACUUMs one full of dead row versions, so a table under churn keeps its size; it warns once
that autovacuum is off, and /metrics exports each table's dead row versions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from psycopg.rows import dict_row

from jobq.core import maintenance
from tests.conftest import make_settings, running_app
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(120)

QUEUE = "churn"


async def table_stats(url: str, table: str = "jobs") -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn:
        cur = await conn.execute(
            "SELECT n_live_tup, n_dead_tup, n_mod_since_analyze, last_analyze, last_vacuum, "
            "pg_relation_size(relid) AS size FROM pg_stat_user_tables WHERE relname = %s", (table,))
        row = await cur.fetchone()
        assert row is not None
        return row


async def churn(url: str, rows: int) -> None:
    """What a burst of jobs leaves behind, written directly: each job inserted, claimed (an
    update) and deleted, as retention does. Every row version is dead at the end."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("INSERT INTO jobs (queue, type, max_attempts) SELECT %s, 't', 3 "
                           "FROM generate_series(1, %s)", (QUEUE, rows))
        await conn.execute("UPDATE jobs SET status = 'running', attempt = 1 WHERE queue = %s", (QUEUE,))
        await conn.execute("DELETE FROM jobs WHERE queue = %s", (QUEUE,))


@pytest.fixture
def autovacuum_off(database_url: str) -> str:
    """autovacuum off for jobq's tables, whatever the server's setting (this project's test
    server has it off globally; a CI server may not)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO queues (name) VALUES (%s)", (QUEUE,))
        for table in maintenance.tables():
            # A partitioned table (jobs_history) takes no storage options: its partitions do.
            kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", (table,)).fetchone()
            if kind != ("p",):
                conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    return database_url


@pytest.fixture
async def app(autovacuum_off: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FastAPI]:
    # Checks every 0.2 s rather than 10, so the test waits less; the thresholds stay.
    monkeypatch.setattr(maintenance, "EVERY_S", 0.2)
    async with running_app(make_settings(autovacuum_off)) as application:
        yield application


async def test_the_leader_analyzes_and_vacuums_after_churn(app: FastAPI, autovacuum_off: str) -> None:
    url = autovacuum_off
    rows = maintenance.VACUUM_MIN_ROWS + 5000
    before = await table_stats(url)
    assert before["last_analyze"] is None and before["last_vacuum"] is None
    await churn(url, rows)

    async def tended() -> dict[str, Any] | None:
        stats = await table_stats(url)
        done = (stats["last_analyze"] is not None and stats["last_vacuum"] is not None
                and stats["n_dead_tup"] < rows and stats["n_mod_since_analyze"] < maintenance.ANALYZE_MIN_ROWS)
        return stats if done else None

    await aeventually(tended, poll_s=0.2, what="jobs analyzed and vacuumed by the leader")


async def test_a_table_under_churn_keeps_its_size(app: FastAPI, autovacuum_off: str) -> None:
    url = autovacuum_off
    rows = maintenance.VACUUM_MIN_ROWS + 5000
    sizes = []
    for _ in range(5):
        await churn(url, rows)

        async def vacuumed() -> bool:
            stats = await table_stats(url)
            return bool(stats["n_dead_tup"] < maintenance.VACUUM_MIN_ROWS)

        await aeventually(vacuumed, poll_s=0.2, what="the churned rows vacuumed")
        sizes.append((await table_stats(url))["size"])
    # The first round sets the size; the later ones reuse its space (a few pages of slack for
    # where the free space map puts rows). Without VACUUM each round adds its rows' size.
    assert sizes[-1] <= sizes[0] * 1.1, sizes


async def test_autovacuum_off_is_warned_once(autovacuum_off: str, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobq")
    monkeypatch.setattr(maintenance, "EVERY_S", 0.05)

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.name == "jobq.maintenance" and "autovacuum is off" in r.getMessage()]

    # Dated partitions of the history, as a service that ran a while has them (32 with the
    # defaults): counted in the line, not listed.
    with psycopg.connect(autovacuum_off, autocommit=True) as conn:
        for lo in (0, 86_400, 172_800):
            conn.execute(f"CREATE TABLE jobs_history_p{lo}_{lo + 86_400} PARTITION OF jobs_history "
                         f"FOR VALUES FROM (to_timestamp({lo})) TO (to_timestamp({lo + 86_400}))")
            conn.execute(f"ALTER TABLE jobs_history_p{lo}_{lo + 86_400} SET (autovacuum_enabled = off)")
    async with running_app(make_settings(autovacuum_off)):
        await aeventually(warnings, poll_s=0.05, what="a warning that autovacuum is off")
        await asyncio.sleep(1.0)  # about twenty more checks
    assert len(warnings()) == 1, warnings()
    assert "jobs" in warnings()[0]
    assert "jobs_history_p" not in warnings()[0] and " dated partitions of jobs_history" in warnings()[0], warnings()


async def test_metrics_export_dead_row_versions(app: FastAPI, autovacuum_off: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maintenance, "VACUUM_MIN_ROWS", 10**12)  # nothing vacuums them here
    await churn(autovacuum_off, 3000)

    async def dead() -> dict[str, float]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq") as c:
            r = await c.get("/metrics")
        assert r.status_code == 200
        found = {s.labels["table"]: s.value for f in text_string_to_metric_families(r.text)
                 if f.name == "jobq_table_dead_tuples" for s in f.samples}
        return found if found.get("jobs", 0) >= 3000 else {}

    found = await aeventually(dead, poll_s=0.2, what="the jobs table's dead row versions in /metrics")
    assert set(maintenance.tables()) <= set(found)
