"""The upkeep of ``jobs_history`` (migration 0010): range partitions by expiry, made ahead and
dropped whole once their range has passed. Run by the duties leader (jobq.core.duties).

Partitions are named ``jobs_history_p<from>_<to>`` (epoch seconds) and cover one
``history_partition_s`` each, aligned to multiples of it. They are made ahead as far as the
longest retention of any queue reaches, at most ``AHEAD_MAX`` of them: expiries beyond land in
the DEFAULT partition, and each new partition takes its rows from there before it is attached.

Each step is its own transaction with a short ``lock_timeout``: attaching and dropping lock
``jobs_history`` briefly, and a step that would wait behind a long read (and make every ack
wait behind it) gives up and is tried again at the next round instead.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.rows import dict_row

from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.store.db import Database
from jobq.store.queries import Q
from jobq.store.sessions import connect

PARTITION = re.compile(r"^jobs_history_p(\d+)_(\d+)$")
# Most partitions made ahead of now (with daily ones: 64 days, past the default 30-day
# dead_retention_ms). Each one costs every lookup by id one index probe.
AHEAD_MAX = 64
# Queues spring into existence with the default retentions: partitions for those exist ahead
# even before any queue does, so that a new queue's finished jobs need no partition made (nor
# moved out of the DEFAULT partition) later.
DEFAULT_HORIZON_MS = max(QUEUE_DEFAULTS.retention_ms, QUEUE_DEFAULTS.dead_retention_ms)
# A DDL step waits at most this long for its lock before trying again next round.
LOCK_TIMEOUT = "1s"
# Counting a day's partition before its drop reads all of it: more than a request's deadline.
STATEMENT_TIMEOUT = "10min"
# The DDL can fail with these and be tried again at the next round.
_AGAIN = (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected,
          psycopg.errors.QueryCanceled,
          # The ATTACH found a row of the new range in the DEFAULT partition: not expected,
          # since the rows are taken under the write lock, but the next round would take it.
          psycopg.errors.CheckViolation)


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    lo: int  # epoch seconds, inclusive
    hi: int  # epoch seconds, exclusive


@dataclass(frozen=True, slots=True)
class Upkeep:
    dropped: int = 0  # partitions
    dropped_jobs: int = 0
    deleted_jobs: int = 0  # one by one: DEFAULT partition, lowered retention
    created: int = 0  # partitions


def partition_name(lo: int, hi: int) -> str:
    return f"jobs_history_p{lo}_{hi}"


async def partitions(db: Database) -> list[Partition]:
    found = []
    for row in await db.fetch(Q.HistoryPartitions):
        m = PARTITION.match(row["name"])
        if m:
            found.append(Partition(row["name"], int(m[1]), int(m[2])))
    return sorted(found, key=lambda p: p.lo)


async def _horizon(db: Database) -> tuple[float, int]:
    """The database's now and the longest retention of any queue, in seconds."""
    row = await db.fetch_one(Q.HistoryHorizon, {"default_ms": DEFAULT_HORIZON_MS})
    assert row is not None
    return float(row["now_s"]), int(row["ms"]) // 1000


def _fill(template: str, name: str, lo: int | None = None, hi: int | None = None) -> sql.Composed:
    """A {part} statement for one partition; bounds as timestamptz literals."""
    def at(s: int | None) -> sql.Composable:
        return sql.SQL("to_timestamp({})").format(sql.Literal(s)) if s is not None else sql.SQL("")
    return sql.SQL(template).format(part=sql.Identifier(name), lo=at(lo), hi=at(hi))  # type: ignore[arg-type]


@asynccontextmanager
async def _own_connection(db: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection of the upkeep's own for its DDL, outside the pool: a round's steps (one
    per partition, 32 at a first start with the defaults) then take no connection a request
    could use, and leave the pool's sessions as the requests left them."""
    # The direct URL: DDL needs no session, but a connection of ours through a transaction
    # pooler would borrow one of the pool's server sessions for the whole round.
    conn = await connect(db.direct_url, "jobq-history", row_factory=dict_row)
    try:
        yield conn
    finally:
        await conn.close()


async def _step(conn: psycopg.AsyncConnection[Any], *statements: sql.Composed) -> list[dict[str, Any]] | None:
    """Run statements in one transaction with the upkeep's timeouts; the rows of the last one
    that returns rows, or None when a lock was not granted in time (try again next round)."""
    rows: list[dict[str, Any]] = []
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            await conn.execute(f"SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT}'")
            for statement in statements:
                cur = await conn.execute(statement)
                if cur.description:
                    rows = list(await cur.fetchall())
    except _AGAIN:
        return None
    return rows


async def _make(conn: psycopg.AsyncConnection[Any], name: str, lo: int, hi: int) -> bool | None:
    """Make and attach one partition, taking its rows from the DEFAULT partition; None when a
    lock was not granted in time (try again next round).

    jobs_history is locked first, so that every statement sees the partitions and the rows
    of one side of the ATTACH's commit. Writes always: an insert that routed its row by the
    partitions it saw before the commit would put it in the DEFAULT partition after it, which
    PostgreSQL refuses (an ack failing with a partition constraint violation, seen in
    test_duties). Reads too when rows move out of the DEFAULT partition: a read that listed
    the partitions before the commit, and read rows after it, would miss them (a 404 on GET of
    a job just completed, seen in test_concurrency and test_cli_views). Whether rows move is
    read under the write lock, so no finish can add one after the look (it did, when the look
    was a transaction of its own). Held for the making of one empty partition, or the move."""
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            await conn.execute(f"SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT}'")
            await conn.execute(_fill(Q.HistoryLockWrites, name))
            cur = await conn.execute(_fill(Q.HistoryDefaultHolds, name, lo, hi))
            row = await cur.fetchone()
            if row is not None and row["holds"]:
                await conn.execute(_fill(Q.HistoryLockAll, name))
            await conn.execute(_fill(Q.HistoryPartitionNew, name))
            await conn.execute(_fill(Q.HistoryDefaultTake, name, lo, hi))
            await conn.execute(_fill(Q.HistoryPartitionAttach, name, lo, hi))
    except _AGAIN:
        return None
    return True


async def drop_expired(db: Database) -> tuple[int, int]:
    """Drop the partitions whose range has passed. Returns (partitions, jobs) dropped.

    Two transactions each: DETACH (a brief lock of jobs_history, no scan), then the
    counters, the keys and the DROP of the detached table together, all or nothing. The
    counting reads the whole partition: done detached, it holds up no ack or read (a SHARE
    lock on an attached partition would, and deadlock with the writes that lock every
    partition). Between the two, the counters still hold the detached jobs; a second step
    that did not run (the leader died) runs at the next round."""
    now, _ = await _horizon(db)
    expired = [p for p in await partitions(db) if p.hi <= now]
    detached = [str(row["name"]) for row in await db.fetch(Q.HistoryDetached)]
    if not expired and not detached:
        return 0, 0
    dropped = jobs = 0
    async with _own_connection(db) as conn:
        for p in expired:
            if await _step(conn, _fill(Q.HistoryPartitionDetach, p.name)) is not None:
                detached.append(p.name)
        for name in detached:
            m = PARTITION.match(name)
            if m is None or int(m[2]) > now:
                continue
            counted = await _step(conn, _fill(Q.HistoryPartitionUnkey, name),
                                  _fill(Q.HistoryPartitionUncount, name),
                                  _fill(Q.HistoryPartitionDrop, name))
            if counted is not None:
                dropped += 1
                jobs += int(counted[0]["jobs"]) if counted else 0
    return dropped, jobs


async def create_ahead(db: Database, width_s: int) -> int:
    """Make the partitions from now to the longest retention ahead (at most AHEAD_MAX),
    contiguous with the last one made. Returns how many were made."""
    now, horizon_s = await _horizon(db)
    existing = await partitions(db)
    target = now + horizon_s + width_s
    start = int(now // width_s) * width_s
    if existing and existing[-1].hi > start:
        start = existing[-1].hi
    ahead = sum(1 for p in existing if p.hi > now)
    if start >= target or ahead >= AHEAD_MAX:
        return 0
    made = 0
    async with _own_connection(db) as conn:
        while start < target and ahead < AHEAD_MAX:
            # Aligned to the width, even after the width setting changed.
            hi = (start // width_s + 1) * width_s
            name = partition_name(start, hi)
            done = await _make(conn, name, start, hi)
            if done is None:
                break  # next round
            made += 1
            ahead += 1
            start = hi
    return made


async def delete_expired(db: Database, limit: int) -> int:
    """One batch of the jobs retention deletes one by one (see HistoryDeleteExpired)."""
    return len(await db.fetch(Q.HistoryDeleteExpired, {"limit": limit}))


async def sizes(db: Database) -> dict[str, int]:
    """Bytes of jobs and of the history (partitions and keys), and the partitions' number."""
    row = await db.fetch_one(Q.HistorySizes)
    assert row is not None
    return {k: int(v) for k, v in row.items()}
