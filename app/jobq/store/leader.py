"""Leadership for background duties: a session-level advisory lock on a connection of its
own. The lock lives exactly as long as that session, so when the leader's process dies or
loses the database, PostgreSQL releases it and another replica's next try takes over. That
connection must own its server session: it is made to JOBQ_DIRECT_DATABASE_URL, never through
a transaction pooler (where two replicas could each believe they held the lock)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator

import psycopg

from jobq.store.sessions import connect

log = logging.getLogger("jobq.leader")

DUTIES_LOCK_KEY = 0x6A6F6271_0002  # "jobq" + 2

# Which process holds (or tries for) the duties lock, for an operator reading
# pg_stat_activity: the client's address says little behind NAT, or nothing over a socket.
APPLICATION_NAME = f"jobq-leader {socket.gethostname()[:40]}:{os.getpid()}"


class Leadership:
    def __init__(self, url: str, key: int = DUTIES_LOCK_KEY) -> None:
        self.url = url
        self.key = key
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def try_acquire(self) -> bool:
        if self._conn is None or self._conn.closed:
            self._conn = await connect(self.url, APPLICATION_NAME)
        cur = await self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
        row = await cur.fetchone()
        return bool(row and row[0])

    async def check(self) -> None:
        """Raises when the session holding the lock is gone (the lock went with it)."""
        if self._conn is None:
            raise RuntimeError("not the leader")
        await self._conn.execute("SELECT 1")

    async def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None


@contextlib.asynccontextmanager
async def leadership(url: str) -> AsyncIterator[Leadership]:
    lead = Leadership(url)
    try:
        yield lead
    finally:
        await lead.release()
