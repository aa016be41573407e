"""A deadlock is the database asking us to try again: Database.fetch retries the statement
PostgreSQL chose as the victim, and the caller gets its answer, not a 503 (issue 23)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from jobq.store.db import Database
from tests.waiting import aeventually

# Locks row 2, then row 1: the opposite order to the other transaction's.
_BOTH_ROWS_FROM_THE_TOP = """
WITH locked AS MATERIALIZED (
    SELECT id FROM pair WHERE id IN (1, 2) ORDER BY id DESC FOR UPDATE
)
UPDATE pair SET n = n + 1 FROM locked WHERE pair.id = locked.id
RETURNING pair.id, pair.n
"""


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url, pool_size=1, timeout_s=30, retry_after_s=1)
    await database.open(wait=True)
    try:
        await database.fetch("CREATE TABLE pair (id int PRIMARY KEY, n int NOT NULL)")
        await database.fetch("INSERT INTO pair VALUES (1, 0), (2, 0)")
        yield database
    finally:
        await database.close()


async def _deadlocks(conn: psycopg.AsyncConnection[tuple[int]]) -> int:
    cur = await conn.execute(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def _store_waits_on_a_lock(watcher: psycopg.AsyncConnection[tuple[int]]) -> bool:
    cur = await watcher.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'jobq' AND wait_event_type = 'Lock'")
    row = await cur.fetchone()
    return row is not None and row[0] > 0


async def test_a_statement_chosen_as_a_deadlock_victim_is_retried_and_answers(
        database: Database, database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watcher:
        before = await _deadlocks(watcher)
        async with await psycopg.AsyncConnection.connect(database_url) as other:
            # The other transaction looks for a deadlock long after the store's statement
            # (1 s by default): the store's is the one PostgreSQL ends.
            await other.execute("SET deadlock_timeout = '60s'")
            await other.execute("SELECT 1 FROM pair WHERE id = 1 FOR UPDATE")
            store = asyncio.create_task(database.fetch(_BOTH_ROWS_FROM_THE_TOP))
            # The store's statement holds row 2 and waits for row 1...
            await aeventually(lambda: _store_waits_on_a_lock(watcher), what="the store's statement waits")
            # ...and this transaction now waits for row 2: a deadlock. The store's statement
            # is ended; its retry waits for this transaction, which commits when this returns.
            await other.execute("SELECT 1 FROM pair WHERE id = 2 FOR UPDATE")
        rows = await asyncio.wait_for(store, 30)
        assert sorted((r["id"], r["n"]) for r in rows) == [(1, 1), (2, 1)]
        await database.close()  # a backend's statistics reach pg_stat_database when it ends

        async def counted() -> bool:
            return await _deadlocks(watcher) > before

        await aeventually(counted, what="PostgreSQL counted the deadlock")
