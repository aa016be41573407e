"""What sits between the pool and PostgreSQL: the server itself (or a session pooler, which
gives each client connection one server session for its life), or a transaction pooler
(pgbouncer's ``pool_mode = transaction``), which may run each transaction of one client
connection on a different server session.

Behind a transaction pooler nothing may rely on a session: no named prepared statements (a
statement prepared on one server session is unknown, or another statement, on the next), no
session settings, no LISTEN, no session advisory lock. The pool then does without them
(``jobq.store.db``), and what needs a session goes through JOBQ_DIRECT_DATABASE_URL.

The probe asks the question directly. Connection A asks for its server's process id; B
opens a transaction (which holds a server session until it ends) and asks for its own; A
asks again. A connection that owns its session always gets the same id, and B another. Behind
a transaction pooler A's session was free between its statements: B's transaction took it
(pgbouncer reuses the most recently freed session), so A's second statement runs on another
session, or waits for one (a pool of one session).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal

import psycopg

from jobq.store.sessions import connect

Pooling = Literal["session", "transaction"]

APPLICATION_NAME = "jobq-probe"
# Longer than any healthy pid query, shorter than a patient operator: a statement of A that
# waits this long is waiting for a server session, which a session of its own never does.
_WAIT_S = 2.0


async def _pid(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT pg_backend_pid()")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def probe(url: str) -> Pooling:
    """``transaction`` when ``url`` reaches PostgreSQL through a transaction pooler. Raises
    psycopg's errors when it cannot connect (the caller says why, or waits for a slot)."""
    a = await connect(url, APPLICATION_NAME)
    try:
        b = await connect(url, APPLICATION_NAME)
        try:
            first = await _pid(a)
            try:
                async with asyncio.timeout(_WAIT_S):
                    await b.set_autocommit(False)  # its statement opens a transaction
                    other = await _pid(b)
            except TimeoutError:
                # B found no session while A holds one: a session pooler with a full pool.
                return "session"
            try:
                try:
                    async with asyncio.timeout(_WAIT_S):
                        again = await _pid(a)
                except TimeoutError:
                    return "transaction"  # A had to wait for a session: it owns none
            finally:
                with contextlib.suppress(psycopg.Error):
                    await b.rollback()
            return "transaction" if other == first or again != first else "session"
        finally:
            await b.close()
    finally:
        await a.close()
