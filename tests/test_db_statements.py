"""Database.fetch prepares its statements on each connection (psycopg's ``prepare=True``, in
jobq.store.db): what could unsettle that bookkeeping still answers as a plain execute would."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobq.store import db as store_db
from jobq.store.db import Database


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url, pool_size=1, timeout_s=5, retry_after_s=1)
    await database.open(wait=True)
    try:
        yield database
    finally:
        await database.close()


async def test_statements_prepared_before_a_discard_answer_after_it(database: Database) -> None:
    sql = "SELECT %(n)s::int + 1 AS m"
    assert await database.fetch(sql, {"n": 1}) == [{"m": 2}]
    await database.fetch("DEALLOCATE ALL")  # what a pooler's DISCARD ALL does
    assert await database.fetch(sql, {"n": 2}) == [{"m": 3}]
    assert await database.fetch(sql, {"n": 3}) == [{"m": 4}]


async def test_past_the_prepared_limit_statements_still_answer(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_db, "PREPARED_MAX", 3)  # read when a connection is made
    database = Database(database_url, pool_size=1, timeout_s=5, retry_after_s=1)
    await database.open(wait=True)
    try:
        # Six shapes on one connection, twice: past three, the least recently used goes.
        for _ in range(2):
            for i in range(6):
                assert await database.fetch(f"SELECT %(n)s::int * {i} AS m", {"n": 2}) == [{"m": 2 * i}]
        # Three kept, and this count's own (psycopg deallocates the oldest after it runs).
        assert await database.fetch(
            "SELECT count(*) AS c FROM pg_prepared_statements WHERE NOT from_sql") == [{"c": 4}]
    finally:
        await database.close()


async def test_parameters_of_other_types_get_their_own_statement(database: Database) -> None:
    sql = "SELECT %(v)s AS v, pg_typeof(%(v)s)::text AS t"
    assert await database.fetch(sql, {"v": 7}) == [{"v": 7, "t": "smallint"}]
    assert await database.fetch(sql, {"v": 2**40}) == [{"v": 2**40, "t": "bigint"}]
    assert await database.fetch(sql, {"v": 1.5}) == [{"v": 1.5, "t": "double precision"}]
    assert await database.fetch(sql, {"v": 7}) == [{"v": 7, "t": "smallint"}]


async def test_statements_in_a_transaction_roll_back_with_it(database: Database) -> None:
    await database.fetch("CREATE TEMP TABLE t (n int)")
    with pytest.raises(RuntimeError):
        async with database.transaction() as conn:
            await database.run(conn, "INSERT INTO t VALUES (%(n)s)", {"n": 1})
            assert await database.run(conn, "SELECT count(*) AS c FROM t") == [{"c": 1}]
            raise RuntimeError("roll back")
    assert await database.fetch("SELECT count(*) AS c FROM t") == [{"c": 0}]


async def _psycopg_prepares_its_own(database: Database) -> None:
    async with database.connection() as conn:
        for _ in range(6):  # psycopg prepares a query a cursor ran five times (prepare_threshold)
            await conn.execute("SELECT 41 + 1")


async def test_a_rolled_back_transaction_does_not_leave_the_next_one_a_deallocated_statement(
        database: Database) -> None:
    """psycopg answers a rollback with DEALLOCATE ALL when it prepared statements of its own:
    ours went too, and the next transaction to run one failed (a 500 for its request)."""
    sql = "SELECT %(n)s::int + 1 AS m"
    await _psycopg_prepares_its_own(database)
    async with database.transaction() as conn:
        assert await database.run(conn, sql, {"n": 1}) == [{"m": 2}]
    with pytest.raises(RuntimeError):
        async with database.transaction() as conn:
            await database.run(conn, sql, {"n": 1})
            raise RuntimeError("roll back")
    async with database.transaction() as conn:
        assert await database.run(conn, sql, {"n": 2}) == [{"m": 3}]


async def test_a_savepoint_rolled_back_leaves_the_transaction_usable(database: Database) -> None:
    sql = "SELECT %(n)s::int + 1 AS m"
    await _psycopg_prepares_its_own(database)
    async with database.transaction() as conn:
        assert await database.run(conn, sql, {"n": 1}) == [{"m": 2}]
        with pytest.raises(RuntimeError):
            async with database.savepoint(conn):
                raise RuntimeError("roll back to the savepoint")
        assert await database.run(conn, sql, {"n": 2}) == [{"m": 3}]
