"""LISTEN/NOTIFY: one listening connection per process, shared by every waiting request.

``Wakeups`` is the process-wide switchboard: long-polling claims ``subscribe`` to the queues
they wait on; ``publish`` wakes local waiters at once and, after the enqueuing transaction
has committed, sends one coalesced NOTIFY so that waiters in other processes wake too. The
notification payload is ``<queue> <count> <origin>``, so a process ignores the echo of its own.

Waking is sized to the work: ``n`` new jobs wake idle waiters until their claim limits cover
``n``, not every waiter on the queue. Waking all of them for each job (a thundering herd)
made eight idle workers run eight claims per job, seven of them empty, and tripled pickup
latency. A rung waiter that will not answer its bell (its worker hung up, its claim failed,
it was rung during a claim that is returning, or its claim filled up from other queues)
passes it on. A count we do not know (``None``) wakes everyone. Jobs that idle waiters here
cover are not announced to other processes at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping

import psycopg

log = logging.getLogger("jobq.notify")

CHANNEL = "jobq_jobs"
_RECONNECT_S = 1.0
# Queues whose generation is remembered; past this the table starts over (see Wakeups.wake).
GENERATIONS_KEPT = 10_000


class Waiter:
    """One long-poll's doorbell. ``limit`` is how many jobs its claim takes; a waiter with a
    type filter may not want what was enqueued, so it counts for nothing and is always rung.
    ``rung_for`` holds, per queue it was rung for, how many new jobs it was counted for
    (``None``: unknown), so a claim that could not answer for them all knows what to pass on."""

    __slots__ = ("event", "limit", "filtered", "rung_for")

    def __init__(self, limit: int = 1, filtered: bool = False) -> None:
        self.event = asyncio.Event()
        self.limit = max(limit, 1)
        self.filtered = filtered
        self.rung_for: dict[str, int | None] = {}

    @property
    def rung(self) -> bool:
        return self.event.is_set()

    def ring(self, queue: str | None = None, count: int | None = None) -> None:
        if queue is not None:
            self.rung_for[queue] = count
        self.event.set()

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
        # Insertion-ordered, so the longest-waiting waiter is rung first.
        self._waiters: dict[str, dict[Waiter, None]] = defaultdict(dict)
        self._outbox: dict[str, int | None] = {}
        # Bumped by every bell for a queue: something there may have changed since a reading
        # taken at an older generation (see the long-poll's next-visible cache).
        self._generation: dict[str, int] = {}
        self._ticks = itertools.count(1)
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
    def subscribe(self, queues: Iterable[str], limit: int = 1, filtered: bool = False) -> Iterator[Waiter]:
        waiter = Waiter(limit, filtered)
        names = list(queues)
        for q in names:
            self._waiters[q][waiter] = None
        try:
            yield waiter
        finally:
            for q in names:
                bucket = self._waiters.get(q)
                if bucket is not None:
                    bucket.pop(waiter, None)
                    if not bucket:
                        del self._waiters[q]

    def generation(self, queue: str) -> int:
        return self._generation.get(queue, 0)

    def has_waiters(self, queue: str) -> bool:
        return bool(self._waiters.get(queue))

    def wake(self, queue: str, count: int | None = 1) -> int | None:
        """Ring this process's waiters on ``queue`` for ``count`` new jobs (``None``: all);
        returns how many of them no idle waiter here covers (``None``: maybe all).

        Waiters already rung are passed over: they will look anyway, and counting them would
        leave the new jobs to wait for a chain of full claims."""
        if len(self._generation) >= GENERATIONS_KEPT and queue not in self._generation:
            # Queue names come from clients. Forgetting is safe: generations only grow (a
            # process-wide counter), so a forgotten queue's next one matches no old reading.
            self._generation.clear()
        self._generation[queue] = next(self._ticks)
        wanted = count
        for waiter in list(self._waiters.get(queue, ())):
            if waiter.rung:
                continue
            if waiter.filtered or wanted is None:
                waiter.ring(queue, None)
            elif wanted > 0:
                waiter.ring(queue, min(wanted, waiter.limit))
                wanted -= waiter.limit
        return None if wanted is None else max(wanted, 0)

    def publish(self, counts: Mapping[str, int | None] | Iterable[str]) -> None:
        """Jobs became claimable (call after commit): ``{queue: how many}``, or queue names
        when the number is not known, which wakes every waiter on them.

        Other processes are told only of the jobs that idle waiters here do not cover: a job
        one of our waiters will claim needs no NOTIFY (a round trip on every single enqueue).
        A rung waiter that does not claim passes its bell on through here, so a job it
        leaves reaches other processes then."""
        items = counts.items() if isinstance(counts, Mapping) else ((q, None) for q in counts)
        for q, n in items:
            rest = self.wake(q, n)
            if rest != 0:
                self._outbox[q] = add_counts(self._outbox.get(q, 0), rest)
        if self._outbox:
            self._outbox_ready.set()

    async def _send(self) -> None:
        # Coalesces: while one NOTIFY is in flight, further queues gather in the outbox and
        # leave together, so a burst of enqueues costs a handful of NOTIFYs, not one each.
        conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready.clear()
            batch, self._outbox = self._outbox, {}
            payloads = [f"{q} {'*' if n is None else n} {self.origin}" for q, n in batch.items()]
            try:
                if conn is None or conn.closed:
                    conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                await conn.execute(
                    "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (CHANNEL, payloads))
            except asyncio.CancelledError:
                if conn is not None:
                    await conn.close()
                raise
            except Exception as exc:  # the database is away; local waiters were woken already
                log.warning("NOTIFY failed: %s", exc)
                for q, n in batch.items():  # keep them for the next try
                    self._outbox[q] = add_counts(self._outbox.get(q, 0), n)
                self._outbox_ready.set()
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
                        self.wake(q, None)
                    async for note in conn.notifies():
                        queue, count, origin = parse_payload(note.payload)
                        if origin != self.origin:
                            self.wake(queue, count)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.listening.clear()
                log.warning("LISTEN connection lost (%s); reconnecting", exc)
                await asyncio.sleep(_RECONNECT_S)


def add_counts(a: int | None, b: int | None) -> int | None:
    """Job counts of bells; ``None`` (unknown, wake everyone) absorbs any number."""
    return None if a is None or b is None else a + b


def parse_payload(payload: str) -> tuple[str, int | None, str]:
    """``<queue> <count> <origin>``; queue names hold no spaces. A count that is not a number
    (``*``, or a sender we do not understand) means: wake everyone."""
    head, _, origin = payload.rpartition(" ")
    queue, _, count = head.rpartition(" ")
    if not queue:
        return head, None, origin
    return queue, int(count) if count.isascii() and count.isdigit() else None, origin


@contextlib.asynccontextmanager
async def running(wakeups: Wakeups) -> AsyncIterator[Wakeups]:
    await wakeups.start()
    try:
        yield wakeups
    finally:
        await wakeups.stop()
