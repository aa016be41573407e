"""The connection pool, and the one place where driver errors become domain errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg.errors
from psycopg import generators
from psycopg._queries import PostgresQuery
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import AdaptersMap, Loader, Transformer
from psycopg.pq import ExecStatus, Format, TransactionStatus
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from jobq.domain import jsontext
from jobq.domain.errors import InvalidInput, Unavailable
from jobq.store.sessions import KEEPALIVE

log = logging.getLogger("jobq.store")

Row = dict[str, Any]
# A pooled connection, as ``Database.connection`` and ``transaction`` hand it out.
Connection = psycopg.AsyncConnection[Row]

# Deadlocks and serialization failures are the database asking us to try again.
_RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
_RETRIES = 3
# SQLSTATE 25006: the server no longer takes writes (a standby, or a primary being fenced or
# demoted for a failover): its connections are of no use until a primary is found again.
_READ_ONLY = psycopg.errors.ReadOnlySqlTransaction
# Errors after which a connection may be gone, or on a server that takes no writes: the
# pool's other connections are likely the same (see ``Database._lost``).
_CONNECTION_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, _READ_ONLY)


def dumps_json(value: Any) -> str:
    """JSON text for a jsonb parameter. NaN and Infinity are not JSON: refuse them here, with
    a 422, rather than let PostgreSQL refuse them later. ASCII escapes keep lone surrogates
    visible to PostgreSQL, which rejects them (mapped to 422 by ``translate``)."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:
        raise InvalidInput("JSON values must be finite numbers (no NaN or Infinity)") from exc


_TIMESTAMPTZ = psycopg.adapters.types["timestamptz"].oid
# psycopg's own loader for timestamptz text: the C one when psycopg's C part is installed.
_DatetimeLoader = psycopg.adapters.get_loader(_TIMESTAMPTZ, Format.TEXT)
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


class _ClampedTimestamptzLoader(Loader):
    """Reads a timestamptz that no Python datetime can hold (after year 9999 in UTC, before
    year 1, or +-infinity) as the latest or earliest one that can, instead of failing.

    The API refuses such times, but a row written before it did, or by hand, would otherwise
    make every read of it fail: a GET, a listing, and, worst, each claim on its queue, which
    commits its leases and then cannot answer them. Valid times go through psycopg's own
    loader unchanged; the wrapper costs a Python call per time read (about 0.2 us)."""

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        self._load = _DatetimeLoader(oid, context).load

    def load(self, data: Buffer) -> datetime:
        try:
            value: datetime = self._load(data)
            return value
        except psycopg.DataError:
            # PostgreSQL writes "-infinity", and years before 1 with a " BC" suffix.
            text = bytes(data)
            return _EARLIEST if text.startswith(b"-") or text.endswith(b"BC") else _LATEST


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    # jsonb columns (payload, result, errors) through orjson where it is exact: the standard
    # library's parser was the largest single cost of reading a claim of 100 jobs.
    set_json_loads(jsontext.loads, conn)
    conn.adapters.register_loader(_TIMESTAMPTZ, _ClampedTimestamptzLoader)


class _Pool(AsyncConnectionPool):  # type: ignore[type-arg]
    """The pool, whose ``check()`` also discards connections to a server that takes no writes."""

    @staticmethod
    async def check_connection(conn: psycopg.AsyncConnection[Any]) -> None:
        # One round trip; raises on a connection that is gone. A read-only answer means the
        # server is a standby or being fenced: reconnecting lets target_session_attrs (of a
        # multi-host URL) find the primary.
        async with conn.cursor(row_factory=tuple_row) as cur:
            await cur.execute("SELECT current_setting('transaction_read_only') = 'on'")
            row = await cur.fetchone()
        if row is not None and row[0]:
            await conn.close()
            raise psycopg.OperationalError("the server takes no writes (read-only)")


class Database:
    """An async psycopg pool with autocommit connections: a statement outside ``transaction``
    commits on its own, which is what makes a 201 mean committed.

    When the database goes away (killed backends, a restart, a failover to a standby), every
    idle connection of the pool is dead, but the pool only learns it of each on its next
    use: a fleet would answer one 503 per pooled connection after the database is back. So
    the first statement that finds its connection gone (or on a read-only server) has the
    pool check all its idle ones at once (``_lost``); in steady state this costs nothing."""

    def __init__(self, url: str, *, pool_size: int, timeout_s: float, retry_after_s: int) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._translate = _Translate(retry_after_s)  # stateless: one for every statement
        self._sweep: asyncio.Task[None] | None = None
        self.pool = _Pool(
            url,
            min_size=min(2, pool_size),
            max_size=pool_size,
            open=False,
            timeout=timeout_s,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": max(1, int(timeout_s)),
                # Timestamps leave the database in UTC; a stuck statement cannot outlive the
                # answer deadline.
                "options": f"-c TimeZone=UTC -c statement_timeout={int(timeout_s * 1000)}",
                "application_name": "jobq",
                **KEEPALIVE,
            },
            configure=_configure,
            reconnect_timeout=0,  # keep trying to reconnect for ever while the database is away
            name="jobq",
        )

    async def open(self, wait: bool = False) -> None:
        await self.pool.open(wait=wait, timeout=self.timeout_s)

    async def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        await self.pool.close()

    async def _lost(self, conn: psycopg.AsyncConnection[Any], exc: BaseException) -> None:
        """After a statement failed with ``exc`` on ``conn``: when the connection is gone,
        or on a server that takes no writes, have the pool check its idle connections (a
        server that died or turned read-only did so for all of them) and replace the bad
        ones before they are handed out. A read-only connection is closed, so that the pool
        replaces it too. A statement timeout (an OperationalError too) leaves a working
        connection: nothing to do."""
        if isinstance(exc, _READ_ONLY):
            with contextlib.suppress(Exception):
                await conn.close()
        if not conn.closed:
            return
        if self._sweep is None or self._sweep.done():
            self._sweep = asyncio.create_task(self._check_pool(), name="jobq-pool-check")

    async def _check_pool(self) -> None:
        try:
            await self.pool.check()
        except Exception as exc:  # a pool being closed; the next error starts another check
            log.debug("pool check failed: %s", exc)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        with self.translate():
            async with self.pool.connection(timeout=self.timeout_s) as conn:
                try:
                    yield conn
                except _CONNECTION_ERRORS as exc:
                    await self._lost(conn, exc)
                    raise

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        async with self.connection() as conn:
            try:
                async with conn.transaction():
                    yield conn
            except BaseException:
                _forget_prepared(conn)
                raise

    @asynccontextmanager
    async def savepoint(self, conn: psycopg.AsyncConnection[Row]) -> AsyncIterator[None]:
        """A savepoint inside ``transaction``: an error rolls back to it, and the transaction
        goes on."""
        try:
            async with conn.transaction():
                yield
        except BaseException:
            _forget_prepared(conn)
            raise

    async def fetch(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        # The hot path of every request: the pool's getconn/putconn without the layers of
        # context managers ``connection`` stacks (about 5% of the service's CPU in single
        # mode), and the statement run by ``_Prepared`` rather than a cursor.
        for attempt in range(_RETRIES):
            try:
                with self.translate():
                    conn = await self.pool.getconn(self.timeout_s)
                    try:
                        return await _prepared(conn).fetch(conn, sql, params)
                    except _CONNECTION_ERRORS as exc:
                        await self._lost(conn, exc)
                        raise
                    finally:
                        await self.pool.putconn(conn)
            except _RETRYABLE:
                if attempt == _RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    async def run(self, conn: psycopg.AsyncConnection[Row], sql: str,
                  params: Mapping[str, Any] | None = None) -> list[Row]:
        """A statement's rows on a connection of ``connection`` or ``transaction``, the way
        ``fetch`` runs it."""
        return await _prepared(conn).fetch(conn, sql, params)

    async def fetch_one(self, sql: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = await self.fetch(sql, params)
        return rows[0] if rows else None

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at; None before the first migration."""
        try:
            row = await self.fetch_one("SELECT version_num FROM alembic_version")
        except psycopg.errors.UndefinedTable:
            return None
        return row["version_num"] if row else None

    def translate(self) -> _Translate:
        return self._translate


# Statements prepared on one connection, at most; past this, statements run as psycopg runs
# them (SQL built at request time, such as a listing's, comes in a bounded number of shapes).
PREPARED_MAX = 200
_OK = (ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK)
# Idle, or in a transaction of ``Database.transaction`` (see ``Database.run``).
_USABLE = (TransactionStatus.IDLE, TransactionStatus.INTRANS)


class _Statement:
    __slots__ = ("name", "columns")

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.columns: list[str] | None = None  # read from the first result


class _Prepared:
    """One connection's server-side prepared statements, run on libpq's connection directly.

    A cursor's ``execute`` and ``fetchall`` cost about 90 us of Python per statement; this
    way about half. It is what psycopg does for a statement it has prepared (its own
    parameter conversion and dumpers, its loaders, ``wait`` with its cancellation), without
    the cursor, the prepare-threshold bookkeeping and the result's re-selection. Statements
    are keyed by text and parameter types, as psycopg keys its own; the names (``_jobq_N``)
    do not collide with psycopg's (``_pg3_N``). Only one task uses a connection at a time
    (the pool's), so the state here needs no lock."""

    __slots__ = ("statements", "named", "tx", "conn", "__weakref__")

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.statements: dict[tuple[str, tuple[int, ...]], _Statement] = {}
        self.named = 0  # names are never reused: one could outlive our record of it
        self.conn = conn
        # One transformer per connection: its dumpers and loaders are looked up once. Times
        # load with psycopg's own (C) loader, a Python call less per time read; a result
        # holding one no datetime can hold is loaded again the clamping way (``_load``).
        adapters = AdaptersMap(conn.adapters)
        adapters.register_loader(_TIMESTAMPTZ, _DatetimeLoader)
        self.tx = Transformer(_AdaptContext(adapters, conn))

    async def fetch(self, conn: psycopg.AsyncConnection[Any], sql: str,
                    params: Mapping[str, Any] | None) -> list[Row]:
        pgconn = conn.pgconn
        if pgconn.transaction_status not in _USABLE or (
                params is not None and not isinstance(params, Mapping)):
            return await _cursor_fetch(conn, sql, params)  # let psycopg say what is wrong
        tx = self.tx
        pgq = PostgresQuery(tx)
        pgq.convert(sql, params)
        key = (sql, pgq.types)
        statement = self.statements.get(key)
        if statement is None:
            if len(self.statements) >= PREPARED_MAX:
                return await _cursor_fetch(conn, sql, params)
            self.named += 1
            statement = _Statement(b"_jobq_%d" % self.named)
            pgconn.send_prepare(statement.name, pgq.query, param_types=pgq.types)
            _check(conn, (await conn.wait(generators.execute(pgconn)))[-1])
            self.statements[key] = statement
        pgconn.send_query_prepared(statement.name, pgq.params, param_formats=pgq.formats)
        result = (await conn.wait(generators.execute(pgconn)))[-1]
        try:
            _check(conn, result)
        except psycopg.errors.InvalidSqlStatementName:
            # Deallocated behind our back (DISCARD ALL, a pooler): prepare again next time.
            # A transaction is aborted by the error: it stands, as any statement's would.
            self.statements.clear()
            if pgconn.transaction_status != TransactionStatus.IDLE:
                raise
            return await _cursor_fetch(conn, sql, params)
        nfields = result.nfields
        if not nfields:
            return []
        columns = statement.columns
        if columns is None:
            encoding = conn.info.encoding
            columns = statement.columns = [
                (result.fname(i) or b"").decode(encoding) for i in range(nfields)]
        return self._load(result, columns)

    def _load(self, result: Any, columns: list[str]) -> list[Row]:
        def row(values: list[Any]) -> Row:
            return dict(zip(columns, values, strict=True))

        tx = self.tx
        tx.set_pgresult(result)
        try:
            return tx.load_rows(0, result.ntuples, row)  # type: ignore[no-any-return]
        except psycopg.DataError:
            clamped = Transformer(self.conn)  # the connection's loaders: _ClampedTimestamptzLoader
            clamped.set_pgresult(result)
            return clamped.load_rows(0, result.ntuples, row)  # type: ignore[no-any-return]


class _AdaptContext:
    """Adapters of a connection with some loaders replaced (psycopg's AdaptContext)."""

    def __init__(self, adapters: AdaptersMap, connection: psycopg.AsyncConnection[Any]) -> None:
        self.adapters = adapters
        self.connection = connection


def _check(conn: psycopg.AsyncConnection[Any], result: Any) -> None:
    if result.status not in _OK:
        if result.status == ExecStatus.FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
        raise psycopg.errors.InternalError(f"unexpected result status {result.status}")


async def _cursor_fetch(conn: psycopg.AsyncConnection[Any], sql: str,
                        params: Mapping[str, Any] | None) -> list[Row]:
    cur = await conn.execute(sql, params)
    result = cur.pgresult
    rows: list[Row] = await cur.fetchall() if result is not None and result.nfields else []
    return rows


_BY_CONNECTION: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], _Prepared] = (
    weakref.WeakKeyDictionary())


def _forget_prepared(conn: psycopg.AsyncConnection[Any]) -> None:
    """After psycopg rolled back a transaction or savepoint: when it had prepared statements
    of its own (a query run five times through a cursor), it sent DEALLOCATE ALL, which took
    ours too. The next statement that ran one of ours inside a transaction failed it (a 500)."""
    prepared = _BY_CONNECTION.get(conn)
    if prepared is not None:
        prepared.statements.clear()


def _prepared(conn: psycopg.AsyncConnection[Any]) -> _Prepared:
    prepared = _BY_CONNECTION.get(conn)
    if prepared is None:
        prepared = _BY_CONNECTION[conn] = _Prepared(conn)
    return prepared


class _Translate:
    """Context manager turning driver errors into domain errors (sync and async ``with``)."""

    def __init__(self, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            return
        if isinstance(exc, psycopg.errors.DataError):
            # Values PostgreSQL cannot store: NUL characters, unpaired surrogates, numbers out
            # of range. The client sent them, so it is their 4xx.
            raise InvalidInput(f"value not accepted by the database: {exc.diag.message_primary or exc}") from exc
        if isinstance(exc, psycopg.errors.ProgramLimitExceeded):
            raise InvalidInput("value too large to store") from exc
        if isinstance(exc, _READ_ONLY):
            raise Unavailable("the database takes no writes now (read-only: a standby, or a "
                              "failover under way)", self.retry_after_s) from exc
        if isinstance(exc, psycopg.errors.QueryCanceled):
            raise Unavailable("the database did not answer in time", self.retry_after_s) from exc
        if isinstance(exc, (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError)):
            raise Unavailable("the database is unreachable", self.retry_after_s) from exc
        return
