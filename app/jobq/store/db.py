"""The connection pool, and the one place where driver errors become domain errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg.errors
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from jobq.descriptors import exhausted
from jobq.domain import jsontext
from jobq.domain.errors import InvalidInput, Unavailable
from jobq.store.pooling import probe
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


def _configure_json(conn: psycopg.AsyncConnection[Any]) -> None:
    # jsonb columns (payload, result, errors) through orjson where it is exact: the standard
    # library's parser was the largest single cost of reading a claim of 100 jobs.
    set_json_loads(jsontext.loads, conn)
    conn.adapters.register_loader(_TIMESTAMPTZ, _ClampedTimestamptzLoader)
    conn.prepared_max = PREPARED_MAX


class _Configure:
    """Readies each new pooled connection for how the pool reaches PostgreSQL.

    Settings are made with a statement, never with the startup packet's ``options``, which
    pgbouncer refuses ("unsupported startup parameter: options"). Timestamps leave the database
    in UTC: pgbouncer carries TimeZone to every server session it lends this connection, in
    either pooling mode. A stuck statement must not outlive the answer's deadline: on a
    session of its own, the server's statement_timeout says so; behind a transaction pooler a
    session setting would stay on a server session that other clients borrow next, so the
    deadline is kept here instead (``_run`` cancels the statement when it passes)."""

    def __init__(self, *, timeout_s: float, transaction_pooled: bool, prepare: bool) -> None:
        self.timeout_s = timeout_s
        self.transaction_pooled = transaction_pooled
        self.prepare = prepare

    async def __call__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        _configure_json(conn)
        if isinstance(conn, _Connection):
            conn.prepare_statements = self.prepare
            conn.deadline_s = self.timeout_s if self.transaction_pooled else None
        if self.transaction_pooled:
            await conn.execute("SELECT set_config('TimeZone', 'UTC', false)", prepare=False)
        else:
            await conn.execute(
                "SELECT set_config('TimeZone', 'UTC', false), set_config('statement_timeout', %s, false)",
                (str(int(self.timeout_s * 1000)),), prepare=False)


async def _probe_or_assume(url: str) -> str:
    """What ``url`` reaches, probed; a database that cannot be reached now is taken for one
    that gives sessions (what `jobq serve` probes, and refuses on, before it gets here)."""
    try:
        return await probe(url)
    except psycopg.Error as exc:
        log.warning("could not probe the database for a transaction pooler (%s); assuming "
                    "connections keep their session (set JOBQ_DATABASE_POOLING to say)", exc)
        return "session"


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

    def __init__(self, url: str, *, pool_size: int, timeout_s: float, retry_after_s: int,
                 direct_url: str | None = None, pool_min_size: int = 1, idle_s: float = 30.0,
                 pooling: str = "session", prepare: bool | None = None) -> None:
        """``url`` is the pool's (perhaps a pooler's); ``direct_url`` that of the sessions the
        service keeps besides (``jobq.store.sessions``), ``url`` when not given. ``pooling``
        says what ``url`` reaches (``session``, ``transaction``, or ``auto``: probed when the
        pool opens, ``jobq.store.pooling``); ``prepare`` whether statements are prepared on
        the server (None: unless behind a transaction pooler)."""
        self.url = url
        self.direct_url = direct_url or url
        self.pooling = pooling
        self.prepare = prepare
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self.pool_size = pool_size
        self.pool_min_size = min(pool_min_size, pool_size)
        self.idle_s = idle_s
        self._translate = _Translate(retry_after_s)  # stateless: one for every statement
        self._sweep: asyncio.Task[None] | None = None
        self._pool: _Pool | None = None

    @property
    def pool(self) -> _Pool:
        if self._pool is None:
            raise RuntimeError("the database's pool is not open yet")
        return self._pool

    def _make_pool(self, pooling: str, prepare: bool) -> _Pool:
        return _Pool(
            self.url,
            min_size=self.pool_min_size,
            max_size=self.pool_size,
            # psycopg's pool closes one connection above min_size per max_idle seconds in
            # which at least one sat unused: spread over the room above the minimum, the last
            # idle connection goes back about idle_s after the load ended.
            max_idle=max(1.0, self.idle_s / max(1, self.pool_size - self.pool_min_size)),
            open=False,
            timeout=self.timeout_s,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": max(1, int(self.timeout_s)),
                "application_name": "jobq",
                # No statement prepared behind psycopg's back either (it prepares one run
                # five times by default) when the pool may not prepare.
                **({} if prepare else {"prepare_threshold": None}),
                **KEEPALIVE,
            },
            configure=_Configure(timeout_s=self.timeout_s,
                                 transaction_pooled=pooling == "transaction", prepare=prepare),
            connection_class=_Connection,
            reconnect_timeout=0,  # keep trying to reconnect for ever while the database is away
            name="jobq",
        )

    async def open(self, wait: bool = False) -> None:
        if self._pool is None:
            if self.pooling == "auto":
                self.pooling = await _probe_or_assume(self.url)
            if self.prepare is None:
                self.prepare = self.pooling != "transaction"
            self._pool = self._make_pool(self.pooling, self.prepare)
        await self._pool.open(wait=wait, timeout=self.timeout_s)

    async def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        if self._pool is not None:
            await self._pool.close()

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
        # This request fails either way; it answers once the check has the pool's idle
        # connections in hand, so the request after it cannot be handed another dead one
        # in the moment before the check starts. Shielded: a cancelled request leaves the
        # check running; bounded: a check stuck on a silent network delays no answer long.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._sweep), self.timeout_s)

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
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def savepoint(self, conn: psycopg.AsyncConnection[Row]) -> AsyncIterator[None]:
        """A savepoint inside ``transaction``: an error rolls back to it, and the transaction
        goes on."""
        async with conn.transaction():
            yield

    async def fetch(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        # The hot path of every request: the pool's getconn/putconn without the layers of
        # context managers ``connection`` stacks (about 5% of the service's CPU in single
        # mode). The retry is inside the translation, not under it: translated, a deadlock
        # (an OperationalError) was already a 503 "unreachable" when the retry looked for it.
        with self.translate():
            for attempt in range(_RETRIES):
                try:
                    return await self._fetch_once(sql, params)
                except _RETRYABLE:
                    if attempt == _RETRIES - 1:
                        raise
                    await asyncio.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    async def _fetch_once(self, sql: str, params: Mapping[str, Any] | None) -> list[Row]:
        conn = await self.pool.getconn(self.timeout_s)
        try:
            return await _run(conn, sql, params)
        except _CONNECTION_ERRORS as exc:
            await self._lost(conn, exc)
            raise
        finally:
            await self.pool.putconn(conn)

    async def run(self, conn: psycopg.AsyncConnection[Row], sql: str,
                  params: Mapping[str, Any] | None = None) -> list[Row]:
        """A statement's rows on a connection of ``connection`` or ``transaction``, the way
        ``fetch`` runs it."""
        return await _run(conn, sql, params)

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


# Statements prepared on one connection, at most (psycopg's ``prepared_max``): past this,
# psycopg deallocates the least recently used one. SQL built at request time, such as a
# listing's, comes in a bounded number of shapes.
PREPARED_MAX = 200


class _Connection(psycopg.AsyncConnection[Row]):
    """A pooled connection that keeps one cursor for ``_run``: a cursor made per statement
    (``conn.execute``) cost about 15 us more. Only one task uses a connection at a time (the
    pool's), and a statement's rows are read before the next one runs on it. The pool's
    ``_Configure`` says whether its statements are prepared, and gives it a deadline when no
    server setting can."""

    statements: psycopg.AsyncCursor[Row] | None = None
    prepare_statements: bool = True
    deadline_s: float | None = None


async def _run(conn: psycopg.AsyncConnection[Row], sql: str,
               params: Mapping[str, Any] | None) -> list[Row]:
    """A statement's rows, prepared on the connection at its first run (``prepare=True``):
    the server plans it once, later runs send only the parameters. psycopg keeps the
    bookkeeping: a statement per text and parameter types, deallocation past
    ``prepared_max``, and forgetting them all after a rollback, DISCARD or DEALLOCATE."""
    prepare, deadline = True, None
    if isinstance(conn, _Connection):
        cur = conn.statements
        if cur is None or cur.closed:
            cur = conn.statements = conn.cursor()
        prepare, deadline = conn.prepare_statements, conn.deadline_s
    else:  # a connection the caller opened itself
        cur = conn.cursor()
    if deadline is None:
        await cur.execute(sql, params, prepare=prepare)
    else:
        # Behind a transaction pooler: past the deadline psycopg cancels the statement on
        # the server (as it does for any cancelled task) and the caller gets TimeoutError,
        # a 503 like the server's statement_timeout.
        async with asyncio.timeout(deadline):
            await cur.execute(sql, params, prepare=prepare)
    # pgresult.nfields rather than description: description builds a Column per column on
    # every read (about 20 us for a job row's 22 columns).
    result = cur.pgresult
    return await cur.fetchall() if result is not None and result.nfields else []


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
        if isinstance(exc, _RETRYABLE):
            # Retried already where a statement can be (``fetch``); a transaction's body
            # cannot be run again from here. Either way the database is there.
            raise Unavailable("the database ended this request's transaction in a conflict with "
                              "another (a deadlock or serialization failure); try again",
                              self.retry_after_s) from exc
        if exhausted(exc):
            # EMFILE/ENFILE: the process is out of descriptors (as an OSError, or in libpq's
            # words); load to come back after, not a bug and not the database's fault.
            raise Unavailable("the service has no file descriptor left to reach the database "
                              "(too many open connections)", self.retry_after_s) from exc
        if isinstance(exc, (psycopg.errors.QueryCanceled, TimeoutError)):
            # The server's statement_timeout, or the deadline ``_run`` keeps behind a
            # transaction pooler.
            raise Unavailable("the database did not answer in time", self.retry_after_s) from exc
        if isinstance(exc, (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError)):
            raise Unavailable("the database is unreachable", self.retry_after_s) from exc
        return
