"""How the pool talks to PostgreSQL in each pooling mode, checked on PostgreSQL itself (the
pgbouncer tests, tests/test_pgbouncer.py, put a real pooler in between): behind a transaction
pooler nothing may be left in the server session, so the pool prepares nothing and keeps
its statement deadline itself; with sessions of its own it prepares and lets the server
time statements out. Also the settings that choose, and the start-up's words for a server
with no free connection slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import psycopg
import pytest

from jobq.domain.errors import Unavailable
from jobq.settings import Settings
from jobq.store.db import Database
from jobq.store.pooling import probe
from jobq.store.sessions import no_free_slot
from tests.test_cli_errors import jobq, one_line


@pytest.fixture
async def transaction_pooled(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url, pool_size=1, timeout_s=1.5, retry_after_s=1,
                        pooling="transaction")
    await database.open(wait=True)
    try:
        yield database
    finally:
        await database.close()


async def _session_state(database: Database) -> dict[str, object]:
    rows = await database.fetch(
        "SELECT (SELECT count(*) FROM pg_prepared_statements) AS prepared, "
        "current_setting('statement_timeout') AS timeout, current_setting('TimeZone') AS tz")
    return rows[0]


async def test_behind_a_transaction_pooler_nothing_is_left_in_the_session(
        transaction_pooled: Database) -> None:
    for _ in range(10):  # psycopg would prepare a statement run five times, by default
        assert await transaction_pooled.fetch("SELECT %(n)s::int AS n", {"n": 1}) == [{"n": 1}]
    state = await _session_state(transaction_pooled)
    # No prepared statement for the next borrower of this session to trip on, and no
    # statement_timeout of ours left for it either; timestamps still come out in UTC.
    assert state == {"prepared": 0, "timeout": "0", "tz": "UTC"}


async def test_with_sessions_of_its_own_statements_are_prepared_and_timed_by_the_server(
        database_url: str) -> None:
    database = Database(database_url, pool_size=1, timeout_s=1.5, retry_after_s=1)
    await database.open(wait=True)
    try:
        await database.fetch("SELECT %(n)s::int AS n", {"n": 1})
        state = await _session_state(database)
        assert state["prepared"] >= 1 and state["timeout"] == "1500ms" and state["tz"] == "UTC"
    finally:
        await database.close()


async def test_behind_a_transaction_pooler_a_stuck_statement_is_cancelled_at_the_deadline(
        database_url: str, transaction_pooled: Database) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as locker:
        await locker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")  # held until rollback
        started = time.monotonic()
        # Bounded here too: without the deadline the statement would wait for the lock.
        async with asyncio.timeout(10):
            with pytest.raises(Unavailable, match="did not answer in time"):
                await transaction_pooled.fetch("SELECT count(*) AS n FROM jobs")
        took = time.monotonic() - started
        # Cancelled on the server, not left waiting there: the lock has no other waiter.
        cur = await locker.execute(
            "SELECT count(*) FROM pg_locks WHERE relation = 'jobs'::regclass AND NOT granted")
        waiting = await cur.fetchone()
        await locker.rollback()
    assert 1.4 <= took < 4, took
    assert waiting == (0,)
    # The connection it ran on serves the next statement.
    assert await transaction_pooled.fetch("SELECT 1 AS one") == [{"one": 1}]


async def test_the_probe_finds_sessions_of_their_own_on_postgresql_itself(database_url: str) -> None:
    assert await probe(database_url) == "session"


async def test_auto_pooling_probes_when_the_pool_opens(database_url: str) -> None:
    database = Database(database_url, pool_size=1, timeout_s=2, retry_after_s=1, pooling="auto")
    await database.open(wait=True)
    try:
        assert (database.pooling, database.prepare) == ("session", True)
    finally:
        await database.close()


@pytest.mark.parametrize(("pooling", "prepared", "prepares"), [
    ("session", "auto", True), ("transaction", "auto", False),
    ("transaction", "on", True), ("session", "off", False)])
def test_prepared_statements_follow_the_pooling_unless_set(
        pooling: str, prepared: str, prepares: bool) -> None:
    settings = Settings(database_url="postgresql://x@127.0.0.1/x", prepared_statements=prepared)  # type: ignore[arg-type]
    assert settings.prepare(pooling) is prepares


@pytest.mark.parametrize("message", [
    'FATAL:  sorry, too many clients already',
    'FATAL:  remaining connection slots are reserved for non-replication superuser connections',
    'FATAL:  too many connections for role "jobq"',
    'FATAL:  too many connections for database "jobq"',
    'ERROR:  no more connections allowed (max_client_conn)'])
def test_a_server_with_no_free_slot_is_told_apart(message: str) -> None:
    assert no_free_slot(message)


@pytest.mark.parametrize("message", [
    "connection refused", 'FATAL:  database "x" does not exist',
    'FATAL:  password authentication failed for user "jobq"'])
def test_other_connection_failures_are_not_a_missing_slot(message: str) -> None:
    assert not no_free_slot(message)


@pytest.mark.parametrize(("env", "words"), [
    ({"JOBQ_POOL_MIN_SIZE": "11"}, "JOBQ_POOL_MIN_SIZE (11) must not exceed JOBQ_POOL_SIZE (10)"),
    ({"JOBQ_DATABASE_POOLING": "statement"}, "JOBQ_DATABASE_POOLING"),
    ({"JOBQ_PREPARED_STATEMENTS": "maybe"}, "JOBQ_PREPARED_STATEMENTS"),
    ({"JOBQ_DIRECT_DATABASE_URL": "mysql://x"}, "JOBQ_DIRECT_DATABASE_URL must start with postgresql://"),
    ({"JOBQ_DIRECT_DATABASE_URL": "postgresql://h:99999/x"}, "JOBQ_DIRECT_DATABASE_URL: port"),
    ({"JOBQ_POOL_IDLE_S": "0"}, "JOBQ_POOL_IDLE_S")])
def test_bad_pool_settings_are_one_line_naming_the_variable(env: dict[str, str], words: str) -> None:
    line = one_line(jobq("migrate", env={"JOBQ_DATABASE_URL": "postgresql://x@127.0.0.1:1/x", **env}), 2)
    assert words in line, line


def test_words_of_the_pooling_settings_are_read_in_any_case() -> None:
    settings = Settings(database_url="postgresql://x@127.0.0.1/x", database_pooling="Transaction",  # type: ignore[arg-type]
                        prepared_statements="")  # type: ignore[arg-type]
    assert (settings.database_pooling, settings.prepared_statements) == ("transaction", "auto")


async def test_a_pool_behind_a_transaction_pooler_serves_concurrent_statements(
        database_url: str) -> None:
    database = Database(database_url, pool_size=4, timeout_s=3, retry_after_s=1, pooling="transaction")
    await database.open(wait=True)
    try:
        rows = await asyncio.gather(*(database.fetch("SELECT %(n)s::bigint * 2 AS m", {"n": i})
                                      for i in range(200)))
        assert [r[0]["m"] for r in rows] == [i * 2 for i in range(200)]
    finally:
        await database.close()
