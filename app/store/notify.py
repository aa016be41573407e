"""LISTEN/NOTIFY: one listening connection per process, shared by every waiting request.

``Wakeups`` is the process-wide switchboard: long-polling claims ``subscribe`` to the queues
they wait on; ``publish`` wakes the local waiters at once and, after the enqueuing transaction
has committed, sends one coalesced NOTIFY so that waiters in other processes wake too. The
notification payload is ``<queue> <origin>``, so a process ignores the echo of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable

import psycopg

log = logging.getLogger("jobq.notify")

CHANNEL = "jobq_jobs"
_RECONNECT_S = 1.0


class Waiter:
    """One long-poll's doorbell."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def wait(self, timeout_s: float) -> bool:
        if timeout_s <= 0:
            return self.event.is_set()
        try:
            async with asyncio.timeout(timeout_s):
                await self.event.wait()
        except TimeoutError:
            return False
        return True


class Wakeups:
    def __init__(self, url: str) -> None:
        self.url = url
        self.origin = uuid.uuid4().hex[:12]
        self._waiters: dict[str, set[Waiter]] = defaultdict(set)
        self._outbox: set[str] = set()
        self._outbox_ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.listening = asyncio.Event()

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._listen(), name="jobq-listen"),
            asyncio.create_task(self._send(), name="jobq-notify"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # Bounded: a connection stuck in a dead network must not hold up shutdown.
            await asyncio.wait(self._tasks, timeout=2.0)
        self._tasks = []

    @contextlib.contextmanager
    def subscribe(self, queues: Iterable[str]) -> Iterable[Waiter]:
        waiter = Waiter()
        names = list(queues)
        for q in names:
            self._waiters[q].add(waiter)
        try:
            yield waiter
        finally:
            for q in names:
                bucket = self._waiters.get(q)
                if bucket is not None:
                    bucket.discard(waiter)
                    if not bucket:
                        del self._waiters[q]

    def has_waiters(self, queue: str) -> bool:
        return bool(self._waiters.get(queue))

    def wake_local(self, queue: str) -> None:
        for waiter in self._waiters.get(queue, ()):
            waiter.event.set()

    def publish(self, queues: Iterable[str]) -> None:
        """Jobs became claimable in ``queues`` (call after commit)."""
        for q in queues:
            self.wake_local(q)
            self._outbox.add(q)
        if self._outbox:
            self._outbox_ready.set()

    async def _send(self) -> None:
        # Coalesces: while one NOTIFY is in flight, further queues gather in the outbox and
        # leave together, so a burst of enqueues costs a handful of NOTIFYs, not one each.
        conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready.clear()
            batch, self._outbox = list(self._outbox), set()
            try:
                if conn is None or conn.closed:
                    conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                await conn.execute(
                    "SELECT pg_notify(%s, q || ' ' || %s) FROM unnest(%s::text[]) AS q",
                    (CHANNEL, self.origin, batch),
                )
            except asyncio.CancelledError:
                if conn is not None:
                    await conn.close()
                raise
            except Exception as exc:  # the database is away; local waiters were woken already
                log.warning("NOTIFY failed: %s", exc)
                if conn is not None:
                    await conn.close()
                conn = None
                await asyncio.sleep(_RECONNECT_S)

    async def _listen(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    # Missed notifications while disconnected: wake everyone to re-check.
                    for q in list(self._waiters):
                        self.wake_local(q)
                    async for note in conn.notifies():
                        queue, _, origin = note.payload.rpartition(" ")
                        if origin != self.origin:
                            self.wake_local(queue)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.listening.clear()
                log.warning("LISTEN connection lost (%s); reconnecting", exc)
                await asyncio.sleep(_RECONNECT_S)


@contextlib.asynccontextmanager
async def running(wakeups: Wakeups) -> AsyncIterator[Wakeups]:
    await wakeups.start()
    try:
        yield wakeups
    finally:
        await wakeups.stop()
