"""The raw-SQL baseline: the service's own named statements straight on PostgreSQL with sync
psycopg, in 1, 2 and 4 connections (one thread each), the best count kept per figure. The
HTTP figures are reported as ratios to these ceilings.

The batch ceiling inserts batches with JobInsertMany and drains with JobClaim + LeaseAckMany;
the single ceiling runs each job's whole life, JobInsert, JobClaim (limit 1), LeaseAck, each
statement its own transaction as in the service.

Next to the batch ceiling, interleaved with it connection count by connection count, runs the
physical reference: a minimal job table (id, queue, status, payload, visible_at; its primary
key and one partial claim index) drained with the same shape, claim 100 with ``SKIP LOCKED``
and one batch ack. The named statements are reported as ratios to it, so what the jobs table's
indexes, counters and columns cost shows, not only what HTTP adds on top of them."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobq.bench.config import JOB_TYPE, LEASE_MS, BenchError, shares
from jobq.bench.cpu import CpuMeter
from jobq.bench.phases import Phase, Tally, timed_sync
from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.store.db import dumps_json
from jobq.store.enqueue import NOT_LEASED
from jobq.store.queries import Q


def _in_threads(connections: Sequence[Any], target: Callable[[Any, int], None], timeout_s: float) -> None:
    """Run ``target(conn, index)`` in one thread per connection; re-raise the first failure."""
    errors: list[BaseException] = []

    def run(conn: Any, index: int) -> None:
        try:
            target(conn, index)
        except BaseException as exc:  # handed to the main thread, which re-raises it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, i), daemon=True) for i, c in enumerate(connections)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in threads):
        # The targets watch the same deadline, so they are about to stop.
        raise BenchError(f"raw SQL: not done after {timeout_s:.0f} s")


def _job(queue: str) -> dict[str, Any]:
    """JobInsert's parameters for one no-op job (JobInsertMany takes a JSON list of them)."""
    return {"queue": queue, "type": JOB_TYPE, "payload": {}, "priority": 0, "max_attempts": None,
            "idempotency_key": None, "run_at": None, "delay_ms": 0}


def _claim(queue: str, limit: int) -> dict[str, Any]:
    # No access token: the raw ceiling claims as the environment's admin token would.
    return {"queue": queue, "types": None, "limit": limit, "lease_ms": LEASE_MS, "worker_id": "raw",
            "token_id": None}


class RawSql:
    """The service's own statements straight on PostgreSQL, with no HTTP in between."""

    def __init__(self, database_url: str, batch: int, timeout_s: float, meter: CpuMeter) -> None:
        self.url = database_url
        self.batch = batch
        self.timeout_s = timeout_s
        self.meter = meter

    @contextlib.contextmanager
    def _connections(self, n: int, queue: str) -> Iterator[list[Any]]:
        with contextlib.ExitStack() as stack:
            conns = [stack.enter_context(psycopg.connect(
                self.url, autocommit=True, row_factory=dict_row, application_name="jobq-bench-raw",
                options="-c TimeZone=UTC")) for _ in range(n)]
            conns[0].execute(Q.QueueEnsure, {**QUEUE_DEFAULTS.as_params(), "queue": queue})
            yield conns

    def _claim_and_ack(self, conn: Any, queue: str, tally: Tally, deadline: float) -> None:
        """Drain with batch claims and batch acks until the goal is reached by any thread."""
        claim = _claim(queue, self.batch)
        while not tally.complete and time.monotonic() < deadline:
            rows = conn.execute(Q.JobClaim, claim).fetchall()
            if not rows:
                time.sleep(0.001)  # the rest is held by the other threads' claims
                continue
            acks = [{"job_id": r["id"], "token": r["lease_token"], "result": None, "scope": None} for r in rows]
            conn.execute(Q.LeaseAckMany, {"acks": dumps_json(acks), "scope": None})
            tally.add(len(rows))

    def batch_ceiling(self, jobs: int, connections: int, queue: str) -> tuple[Phase, Phase]:
        row = _job(queue)
        with self._connections(connections, queue) as conns:
            per_thread = shares(jobs, connections)

            def insert(tally: Tally) -> None:
                deadline = time.monotonic() + self.timeout_s

                def target(conn: Any, index: int) -> None:
                    left = per_thread[index]
                    while left > 0 and time.monotonic() < deadline:
                        n = min(self.batch, left)
                        conn.execute(Q.JobInsertMany, {"jobs": dumps_json([row] * n)})
                        left -= n
                        tally.add(n)

                _in_threads(conns, target, self.timeout_s)

            def drain(tally: Tally) -> None:
                deadline = time.monotonic() + self.timeout_s
                _in_threads(conns, lambda c, _: self._claim_and_ack(c, queue, tally, deadline), self.timeout_s)

            label = f"raw batch ×{connections}"
            enqueue = timed_sync(f"{label} insert", Tally(jobs), self.meter, insert)
            drained = timed_sync(f"{label} drain", Tally(jobs), self.meter, drain)
        return enqueue, drained

    def single_ceiling(self, jobs: int, connections: int, queue: str) -> Phase:
        insert = {**_job(queue), **NOT_LEASED, "payload": "{}"}  # one job's payload goes in as JSON text
        claim = _claim(queue, 1)
        with self._connections(connections, queue) as conns:
            per_thread = shares(jobs, connections)

            def whole_lives(tally: Tally) -> None:
                deadline = time.monotonic() + self.timeout_s

                def target(conn: Any, index: int) -> None:
                    # Each thread enqueues its share and claims after each enqueue; a claim may
                    # take another thread's job, or none while the others hold the rest: the
                    # goal is the total, so whoever is left finishes it.
                    left = per_thread[index]
                    while not tally.complete and time.monotonic() < deadline:
                        if left > 0:
                            conn.execute(Q.JobInsert, insert)
                            left -= 1
                        rows = conn.execute(Q.JobClaim, claim).fetchall()
                        for r in rows:
                            conn.execute(Q.LeaseAck, {"job_id": r["id"], "token": r["lease_token"],
                                                      "result": None, "scope": None})
                        tally.add(len(rows))
                        if not rows and left == 0:
                            time.sleep(0.001)

                _in_threads(conns, target, self.timeout_s)

            return timed_sync(f"raw single ×{connections} whole life", Tally(jobs), self.meter, whole_lives)


# The physical reference (see the module docstring). A table of the bench's own, created and
# dropped in the service's database by each run, named after the run so that two runs on one
# database never share it.
MINIMAL_DDL = """
CREATE TABLE {table} (
    id         bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    queue      text        NOT NULL,
    status     text        NOT NULL DEFAULT 'pending',
    payload    jsonb       NOT NULL DEFAULT '{{}}'::jsonb,
    visible_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX {table}_claim ON {table} (queue, visible_at, id) WHERE status = 'pending'
"""
MINIMAL_INSERT = """
INSERT INTO {table} (queue, payload)
SELECT s.queue, s.payload FROM jsonb_to_recordset(%(jobs)s::jsonb) AS s(queue text, payload jsonb)
"""
MINIMAL_CLAIM = """
WITH picked AS (
    SELECT id FROM {table}
     WHERE queue = %(queue)s AND status = 'pending' AND visible_at <= now()
     ORDER BY visible_at, id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE {table} SET status = 'running' WHERE id = ANY (ARRAY(SELECT id FROM picked))
RETURNING id
"""
MINIMAL_ACK = "UPDATE {table} SET status = 'completed' WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'"


class MinimalTable:
    """The physical reference: the least a job table can be and still be claimed with
    ``SKIP LOCKED`` and acked in batches, measured like the named statements."""

    def __init__(self, raw: RawSql, base: str) -> None:
        self.raw = raw
        self.table = "jobq_bench_minimal_" + re.sub(r"[^a-z0-9]", "_", base.lower())[-40:]
        sql = {k: v.format(table=self.table) for k, v in
               (("ddl", MINIMAL_DDL), ("insert", MINIMAL_INSERT), ("claim", MINIMAL_CLAIM), ("ack", MINIMAL_ACK))}
        self.ddl, self.insert, self.claim, self.ack = sql["ddl"], sql["insert"], sql["claim"], sql["ack"]

    def _admin(self, statement: str) -> None:
        with psycopg.connect(self.raw.url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(statement)

    def create(self) -> None:
        self._admin(f"DROP TABLE IF EXISTS {self.table}")
        self._admin(self.ddl)

    def drop(self) -> None:
        self._admin(f"DROP TABLE IF EXISTS {self.table}")

    def tidy(self) -> None:
        # As the jobs table is tidied (jobq.bench.database.Tidy): the rows go, and their dead
        # versions too when the server has autovacuum off.
        with psycopg.connect(self.raw.url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DELETE FROM {self.table}")
            if conn.execute("SHOW autovacuum").fetchone() != ("on",):
                conn.execute(f"VACUUM {self.table}")

    def batch_ceiling(self, jobs: int, connections: int, queue: str) -> Phase:
        raw = self.raw
        with contextlib.ExitStack() as stack:
            conns = [stack.enter_context(psycopg.connect(
                raw.url, autocommit=True, application_name="jobq-bench-minimal",
                options="-c TimeZone=UTC")) for _ in range(connections)]
            rows = dumps_json([{"queue": queue, "payload": {}}] * raw.batch)
            per_thread = shares(jobs, connections)

            def fill(conn: Any, index: int) -> None:
                left = per_thread[index]
                while left > 0:
                    n = min(raw.batch, left)
                    conn.execute(self.insert, {"jobs": rows if n == raw.batch else
                                               dumps_json([{"queue": queue, "payload": {}}] * n)})
                    left -= n

            _in_threads(conns, fill, raw.timeout_s)

            def drain(tally: Tally) -> None:
                deadline = time.monotonic() + raw.timeout_s

                def target(conn: Any, _: int) -> None:
                    claim = {"queue": queue, "limit": raw.batch}
                    while not tally.complete and time.monotonic() < deadline:
                        ids = [r[0] for r in conn.execute(self.claim, claim).fetchall()]
                        if not ids:
                            time.sleep(0.001)
                            continue
                        conn.execute(self.ack, {"ids": ids})
                        tally.add(len(ids))

                _in_threads(conns, target, raw.timeout_s)

            return timed_sync(f"minimal table ×{connections} drain", Tally(jobs), raw.meter, drain)


def _best(by_connections: dict[int, dict[str, Phase]], figure: str) -> tuple[Phase, int]:
    count = max(by_connections, key=lambda c: by_connections[c][figure].rate)
    return by_connections[count][figure], count


def _raw_figures(phases: dict[str, Phase]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, phase in phases.items():
        out[f"{name}_rate"] = round(phase.rate)
        out[f"{name}_db_cpu_ms_per_1000_jobs"] = phase.cpu_ms_per_1000("database")
    return out


def _least_db_cpu(by_connections: dict[int, dict[str, Phase]], figure: str) -> float | None:
    """The least database CPU per 1,000 jobs over the connection counts (best of, as the rates)."""
    spent = [p[figure].cpu_ms_per_1000("database") for p in by_connections.values()]
    return min((s for s in spent if s is not None), default=None)


def raw_batch(raw: RawSql, jobs: int, counts: Sequence[int], base: str,
              tidy: Callable[[], None]) -> dict[str, Any]:
    """The named statements' batch ceiling and, interleaved count by count so that both see the
    same moment of a shared machine, the minimal table's drain."""
    by: dict[int, dict[str, Phase]] = {}
    minimal_by: dict[int, dict[str, Phase]] = {}
    minimal = MinimalTable(raw, base)
    minimal.create()
    try:
        for c in counts:
            tidy()
            enqueue, drain = raw.batch_ceiling(jobs, c, f"{base}.raw-batch-{c}")
            by[c] = {"enqueue": enqueue, "drain": drain}
            minimal.tidy()
            minimal_by[c] = {"drain": minimal.batch_ceiling(jobs, c, f"{base}.minimal-{c}")}
    finally:
        minimal.drop()
    enqueue, enqueue_c = _best(by, "enqueue")
    drain, drain_c = _best(by, "drain")
    minimal_drain, minimal_c = _best(minimal_by, "drain")
    return {
        "batch_enqueue_rate": round(enqueue.rate), "batch_enqueue_connections": enqueue_c,
        "batch_drain_rate": round(drain.rate), "batch_drain_connections": drain_c,
        "batch_drain_db_cpu_ms_per_1000_jobs": _least_db_cpu(by, "drain"),
        "batch_by_connections": {str(c): _raw_figures(f) for c, f in by.items()},
        "minimal_drain_rate": round(minimal_drain.rate), "minimal_drain_connections": minimal_c,
        "minimal_drain_db_cpu_ms_per_1000_jobs": _least_db_cpu(minimal_by, "drain"),
        "minimal_by_connections": {str(c): _raw_figures(f) for c, f in minimal_by.items()},
    }


def raw_single(raw: RawSql, jobs: int, counts: Sequence[int], base: str,
               tidy: Callable[[], None]) -> dict[str, Any]:
    by: dict[int, dict[str, Phase]] = {}
    for c in counts:
        tidy()
        by[c] = {"whole_life": raw.single_ceiling(jobs, c, f"{base}.raw-single-{c}")}
    best, count = _best(by, "whole_life")
    return {
        "single_whole_life_rate": round(best.rate), "single_whole_life_connections": count,
        "single_by_connections": {str(c): _raw_figures(f) for c, f in by.items()},
    }
