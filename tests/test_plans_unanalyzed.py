"""Plans that do not need statistics: on a jobs table that was never analyzed, with 20,000
jobs waiting in one queue, every statement run per request or per tick reads its intended
index and a number of rows and pages bounded by what it returns, not by the queue's depth.

Without statistics the planner guesses row counts, and its guesses make every plan look
cheap: the claim walked ``jobs_waiting_idx``, read all 20,000 waiting jobs of its queue and
sorted them (76.9 ms for a claim of 100, against 4.8 ms after ANALYZE). Migration 0011 and
the statements' shapes (queries.sql, JobClaim's note) leave each statement a single index
that can serve it in its order. The database is a clone of the migrated template, which
nothing analyzes (checked below); autovacuum is switched off for its tables so that a server
running it cannot analyze them under the test either."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from jobq.store.queries import Q
from tests import pg
from tests.test_sql_plans import _nodes, analyzed

DEPTH = 20_000
TABLES = ("jobs", "queues", "job_counts", "tokens", "schedules", "topic_subscriptions")

_FILL = f"""
INSERT INTO queues (name) VALUES ('deep');
INSERT INTO queues (name, aging_ms) VALUES ('aged', 60000);
INSERT INTO queues (name) SELECT 'small' || g FROM generate_series(1, 20) AS g;
INSERT INTO jobs (queue, type, priority, max_attempts, visible_at)
SELECT 'deep', 't' || (g % 3), g % 3, 25, now() - interval '1 hour' + g * interval '1 ms'
  FROM generate_series(1, {DEPTH}) AS g;
INSERT INTO jobs (queue, type, max_attempts, visible_at, aged_key)
SELECT 'aged', 't', 25, v, jobq_aged_key(v, 0, 60000)
  FROM generate_series(1, {DEPTH}) AS g, LATERAL (SELECT now() - interval '1 hour' + g * interval '1 ms' AS v) AS t;
INSERT INTO jobs (queue, type, status, max_attempts, attempt, lease_token, locked_until, claimed_at, worker_id)
SELECT 'deep', 't', 'running', 25, 1, g, now() + interval '1 hour', now(), 'w' FROM generate_series(1, 200) AS g;
-- Leases past their end, as after an outage of the workers: the reaper takes them a batch at a time.
INSERT INTO jobs (queue, type, status, max_attempts, attempt, lease_token, locked_until, claimed_at, worker_id)
SELECT 'deep', 't', 'running', 25, 1, g, now() - interval '1 minute', now(), 'w' FROM generate_series(1, 5000) AS g;
INSERT INTO jobs (queue, type, status, max_attempts, attempt, completed_at)
SELECT 'deep', 't', s, 25, 1, now() - interval '1 minute'
  FROM generate_series(1, 1000) AS g, (VALUES ('completed'), ('dead')) AS v(s);
-- Worker tokens the claims are made under, the last one revoked.
INSERT INTO tokens (id, role, hash, revoked_at)
SELECT 'a0000000000' || g, 'worker', repeat('0', 64), CASE WHEN g = 9 THEN now() END
  FROM generate_series(1, 9) AS g
"""
LIVE_TOKEN = "a00000000001"
REVOKED_TOKEN = "a00000000009"


@pytest.fixture(scope="module")
def never_analyzed(admin_url: str, template_db: str) -> Iterator[str]:
    name = pg.clone(admin_url, template_db)
    url = pg.with_database(admin_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        for table in TABLES:
            # A partitioned table (jobs_history) takes no storage options: its partitions do.
            kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", (table,)).fetchone()
            if kind != ("p",):
                conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
        with conn.transaction():
            for statement in _FILL.split(";\n"):
                conn.execute(statement)
        # Never analyzed, here or in the template it was cloned from.
        stats = conn.execute("SELECT count(*) FROM pg_statistic WHERE starelid = ANY(%s::regclass[])",
                             (list(TABLES),)).fetchone()
        assert stats == (0,)
        assert conn.execute("SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'jobs' "
                            "AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)").fetchone() == (0,)
    yield url
    pg.drop(admin_url, name)


@pytest.fixture(scope="module")
def args(never_analyzed: str) -> dict[str, Any]:
    with psycopg.connect(never_analyzed) as conn:
        leases = conn.execute("SELECT id, lease_token FROM jobs WHERE status = 'running' "
                              "AND locked_until > now() ORDER BY id LIMIT 10").fetchall()
    job_id, token = leases[0]
    return {
        "queue": "deep", "queues": ["deep", "aged"], "types": None, "limit": 100, "lease_ms": None,
        "worker_id": "w", "job_id": job_id, "token": token, "extend_ms": None, "result": None,
        "acks": json.dumps([{"job_id": i, "token": t, "result": None} for i, t in leases]),
        "releases": json.dumps([{"job_id": i, "token": t, "delay_ms": 0} for i, t in leases]),
        "job_ids": [i for i, _ in leases], "retry": True, "error": "boom", "delay_ms": 0,
        "type": "t", "payload": "{}", "priority": 0, "max_attempts": None, "idempotency_key": None,
        "run_at": None, "jobs": json.dumps([{"queue": "deep", "type": "t"} for _ in range(10)]),
        "seen": [], "now": None,
    }


# Per statement: the values it is run with, the index it must read jobs through (None: it
# reads no jobs), and how many rows of jobs its scans may read at most (returned or filtered
# out). The claims read one index entry per job they hand out (100).
CLAIM_ROWS = 150
CASES: list[tuple[str, dict[str, Any], str | None, int]] = [
    ("JobClaim", {}, "jobs_claim_idx", CLAIM_ROWS),
    ("JobClaim", {"limit": 1}, "jobs_claim_idx", 5),
    ("JobClaimAged", {"queue": "aged"}, "jobs_claim_aged_idx", CLAIM_ROWS),
    ("JobClaimAged", {"queue": "aged", "limit": 1}, "jobs_claim_aged_idx", 5),
    # Both branches of the pick are in the plan; each queue runs the one of its order.
    ("JobClaimMany", {"queues": ["small1", "deep", "aged"]}, "jobs_claim_aged_idx,jobs_claim_idx", CLAIM_ROWS),
    ("JobClaimMany", {"queues": ["small1", "aged", "deep"]}, "jobs_claim_aged_idx,jobs_claim_idx", CLAIM_ROWS),
    # Under a database token (above, the environment's admin token: NULL), checked in the claim.
    ("JobClaim", {"token_id": LIVE_TOKEN}, "jobs_claim_idx", CLAIM_ROWS),
    ("JobClaimAged", {"queue": "aged", "token_id": LIVE_TOKEN}, "jobs_claim_aged_idx", CLAIM_ROWS),
    ("JobClaimMany", {"queues": ["small1", "deep", "aged"], "token_id": LIVE_TOKEN},
     "jobs_claim_aged_idx,jobs_claim_idx", CLAIM_ROWS),
    ("QueueWakeCheck", {"queues": ["deep", "aged"], "caps": [100, 100]}, "jobs_waiting_idx", 2 * CLAIM_ROWS),
    ("QueueOldestWaiting", {"queue": None}, "jobs_waiting_idx", 30),
    ("QueueOldestWaiting", {}, "jobs_waiting_idx", 5),
    ("QueuePageOldestWaiting", {"queues": ["deep", "aged"]}, "jobs_waiting_idx", 5),
    ("MetricsOldestWaitingShown", {"shown": ["deep"]}, "jobs_waiting_idx", 30),
    ("JobReapExpired", {"limit": 100}, "jobs_lease_expiry_idx", 150),
    ("LeaseHeartbeat", {}, "jobs_pkey", 5),
    ("LeaseAck", {}, "jobs_pkey", 5),
    ("LeaseAckMany", {}, "jobs_pkey", 30),
    ("LeaseBackoffInputs", {}, "jobs_pkey", 5),
    ("LeaseFail", {}, "jobs_pkey", 5),
    ("LeaseRelease", {}, "jobs_pkey", 5),
    ("LeaseReleaseMany", {}, "jobs_pkey", 30),
    ("LeaseState", {}, "jobs_pkey", 5),
    ("LeaseStateMany", {}, "jobs_pkey", 30),
    ("JobGet", {}, "jobs_pkey", 5),
    # Enqueue: the depth check reads the counters, never jobs.
    ("JobInsert", {}, None, 0),
    ("JobInsertMany", {}, None, 0),
    ("JobEnqueueMany", {}, None, 0),
    ("QueueDepths", {}, None, 0),
    ("QueueCaps", {}, None, 0),
    ("QueueRunningSlots", {}, None, 0),
    ("ScheduleDueLock", {"limit": 10}, None, 0),
    ("ScheduleNextWake", {}, None, 0),
    ("TokensLive", {}, None, 0),
    ("MetricsDepths", {}, None, 0),
]
# The batch writes of ten jobs (the acks, releases and jobs in ``args``).
BATCH = {"LeaseAckMany": 10, "LeaseReleaseMany": 10, "JobInsertMany": 10, "JobEnqueueMany": 10}
# Not here: JobDeleteExpired (retention, once per 10 s on the leader), which the move of
# finished jobs to their own table rewrites; test_sql_plans covers it on an analyzed table.


def _jobs_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The scans of jobs, each with the index it reads (a bitmap scan's, from its children)."""
    scans = []
    for n in _nodes(plan):
        if n.get("Relation Name") == "jobs" and "Scan" in n["Node Type"]:
            names = {c["Index Name"] for c in _nodes(n) if c.get("Index Name")}
            scans.append(n | {"Index Name": ",".join(sorted(names)) or None})
    return scans


@pytest.mark.parametrize("mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize(("name", "overrides", "index", "max_rows"), CASES,
                         ids=[f"{n}-{i}" for i, (n, *_) in enumerate(CASES)])
def test_each_hot_statement_reads_its_index_without_statistics(
        never_analyzed: str, args: dict[str, Any], name: str, overrides: dict[str, Any],
        index: str | None, max_rows: int, mode: str) -> None:
    with psycopg.connect(never_analyzed, autocommit=True) as conn:
        # Twice, measuring the second: a connection's first statement on a table also reads
        # the catalog for it (and for each partition and index it writes), which the buffer
        # counts would otherwise charge to the statement.
        analyzed(conn, getattr(Q, name), args | overrides, mode)
        doc = analyzed(conn, getattr(Q, name), args | overrides, mode)
    plan = json.dumps(doc["Plan"], indent=1)
    scans = _jobs_scans(doc["Plan"])
    assert not [s for s in scans if s["Node Type"] == "Seq Scan"], plan
    # The row-picking scans (not the UPDATE's fetch of the picked ids by primary key).
    picking = [s for s in scans if index == "jobs_pkey" or s.get("Index Name") != "jobs_pkey"]
    if index is None:
        assert not picking, plan
    else:
        assert picking and ",".join(sorted({s["Index Name"] for s in picking})) == index, plan
        if index != "jobs_pkey":
            # Walked in the statement's order (an index scan), not gathered and sorted (a bitmap).
            assert all(s["Node Type"] in ("Index Scan", "Index Only Scan") for s in picking), plan
    read = sum(s.get("Actual Rows", 0) * s.get("Actual Loops", 1) + s.get("Rows Removed by Filter", 0)
               for s in picking)
    assert read <= max_rows, (read, plan)
    pages = max(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0) for n in _nodes(doc["Plan"]))
    # Pages: a few, and those of the rows written (each a write of the row and its indexes).
    written = (args | overrides)["limit"] if "Claim" in name or name == "JobReapExpired" else BATCH.get(name, 0)
    assert pages <= 100 + 40 * written, (pages, plan)


@pytest.mark.parametrize("mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize(("name", "overrides"), [
    ("JobClaim", {}), ("JobClaimAged", {"queue": "aged"}),
    ("JobClaimMany", {"queues": ["small1", "deep", "aged"]})])
def test_a_claim_under_a_revoked_token_reads_no_jobs_and_says_so(
        never_analyzed: str, args: dict[str, Any], name: str, overrides: dict[str, Any],
        mode: str) -> None:
    """The token is checked once, before the pick: a revoked one costs a probe of tokens,
    not a walk of the queue, and its one row says why nothing came back."""
    values = args | overrides | {"token_id": REVOKED_TOKEN}
    with psycopg.connect(never_analyzed, autocommit=True) as conn:
        doc = analyzed(conn, getattr(Q, name), values, mode)
        with conn.transaction(force_rollback=True):
            rows = conn.execute(getattr(Q, name), values).fetchall()
    plan = json.dumps(doc["Plan"], indent=1)
    assert sum(s.get("Actual Rows", 0) for s in _jobs_scans(doc["Plan"])) == 0, plan
    assert doc["Plan"]["Actual Rows"] == 1, plan
    assert len(rows) == 1 and rows[0][-1] is True and rows[0][0] is None, rows
