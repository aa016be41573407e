"""The hot statements stay on their indexes whatever PostgreSQL believes about the table.

psycopg prepares a statement after a few executions and PostgreSQL may then cache one generic
plan for it. A plan made from statistics taken while the jobs table was empty (ANALYZE on a
fresh or just-emptied table) used to seq-scan every row of ``jobs`` on each claim: at 20,000
waiting jobs a one-job claim cost 15 ms of database CPU. These tests build exactly that
situation and read the generic plans. (The seq scan itself came from the statistics of a
database the bench had used all day; a fresh test database gives the planner other numbers
and a better plan for the old statement. So the claim tests pin the shape that rules the scan
out, the UPDATE reaching its rows only through ``id = ANY(array)``, and fail on the old one.)"""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
import pytest

from jobq.store.queries import Q

QUEUE = "plans"


def _numbered(sql: str) -> tuple[str, list[str]]:
    """``%(name)s`` placeholders as ``$n`` (a name used twice is one parameter)."""
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql), names


@pytest.fixture
def stale_stats(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO queues (name) VALUES (%s) ON CONFLICT DO NOTHING", (QUEUE,))
        # Statistics of a just-emptied table, as after a quiet night or a test run...
        conn.execute("INSERT INTO jobs (queue, type, max_attempts) SELECT %s, 't', 3 "
                     "FROM generate_series(1, 20000)", (QUEUE,))
        conn.execute("DELETE FROM jobs")
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute(  # ...then it fills up, with nothing to analyze it again
            "INSERT INTO jobs (queue, type, max_attempts) SELECT %s, 't', 3 FROM generate_series(1, 20000)",
            (QUEUE,))
        conn.execute(
            "INSERT INTO jobs (queue, type, max_attempts, status, lease_token, locked_until) "
            "SELECT %s, 't', 3, 'running', g, now() + interval '1 hour' FROM generate_series(1, 2000) AS g",
            (QUEUE,))
        conn.execute("SET plan_cache_mode = force_generic_plan")
        yield conn


def generic_plan(conn: psycopg.Connection[tuple[object, ...]], sql: str, args: dict[str, object]) -> str:
    text, names = _numbered(sql)
    conn.execute("DEALLOCATE ALL")
    conn.execute(f"PREPARE s AS {text}")
    values = ", ".join(conn.execute("SELECT quote_nullable(%s::text)", (args[n],)).fetchone()[0]  # type: ignore[index]
                       for n in names)
    with conn.transaction(force_rollback=True):
        rows = conn.execute(f"EXPLAIN (COSTS OFF) EXECUTE s({values})").fetchall()
    return "\n".join(str(r[0]) for r in rows)


CLAIM = {"queue": QUEUE, "types": None, "limit": 1, "lease_ms": None, "worker_id": "w"}


@pytest.mark.parametrize("name", ["JobClaim", "JobClaimAged"])
def test_a_claim_never_scans_the_whole_jobs_table(stale_stats: psycopg.Connection[tuple[object, ...]],
                                                  name: str) -> None:
    plan = generic_plan(stale_stats, getattr(Q, name), CLAIM)
    assert "Seq Scan on jobs" not in plan, plan
    # The UPDATE finds the picked rows through the array of their ids, by primary key: no
    # join is left for a plan to turn into a scan of the table.
    assert re.search(r"jobs_pkey[^\n]*\n\s+Index Cond: \(id = ANY", plan), plan


def test_a_batch_ack_fetches_its_jobs_by_primary_key(stale_stats: psycopg.Connection[tuple[object, ...]]) -> None:
    acks = '[{"job_id": 2, "token": 2, "result": null}, {"job_id": 4, "token": 4, "result": null}]'
    plan = generic_plan(stale_stats, Q.LeaseAckMany, {"acks": acks})
    assert "Seq Scan on jobs" not in plan, plan
    assert re.search(r"Index Cond: .*id = ANY", plan), plan  # probes its ids, not every running job


def test_the_reaper_never_scans_the_whole_jobs_table(stale_stats: psycopg.Connection[tuple[object, ...]]) -> None:
    plan = generic_plan(stale_stats, Q.JobReapExpired, {"limit": 500})
    assert "Seq Scan on jobs" not in plan, plan
