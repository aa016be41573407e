"""LISTEN/NOTIFY: how service processes tell each other that jobs became claimable.

One listening connection per process hands every notification from another process to a
callback; what ``send`` gathered leaves through the pool. LISTEN needs a server session of
its own (a transaction pooler would hand its notifications to whichever client next borrows
that session), so the listening connection is made to JOBQ_DIRECT_DATABASE_URL; a NOTIFY is
delivered at its transaction's commit, which any pooled connection can carry. Who is woken by what is not
decided here (see ``jobq.core.wakeups``): this module only carries ``(queue, count)`` pairs.

The payload is ``<queue> <count> <origin>``: ``count`` is how many jobs (``*``: not known,
wake everyone), and ``origin`` names the sending process, so a process ignores its own echo.

A process that knows of no other sends nothing: one ``jobq serve`` alone spent a round trip
on a NOTIFY nobody heard for every other enqueue. Processes learn of each other by a
greeting: each time a listening connection starts, its process sends ``HELLO``; a process
hearing one answers ``HERE``, and one hearing from a process it did not know answers
``HERE`` too. Whoever hears either wakes all its waiters (``missed``), as jobs committed
before the other side knew of it were not announced: a greeting is sent after its sender
counts the other process, so what it committed unannounced is committed by then. Both are
``<word> * <origin>``, a queue no name can be (names start with a letter or digit), which a
process predating them takes for a bell on an empty queue.

Signals are words of the same form for other news: ``SCHEDULES`` says a schedule was
created or changed, so every scheduler re-reads when it next fires (``signal`` and
``on_signal``); they follow the same rule (nobody known, nothing sent).

The database sends too: ``jobq.enqueue()`` (migration 0009) notifies at its caller's commit
with origin ``sql.<random>``. That is a bell for the queue, not a process: it is not greeted
nor counted as a peer (a peer would make this process NOTIFY for every enqueue).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping

from jobq.store.db import Database
from jobq.store.sessions import connect

log = logging.getLogger("jobq.notify")

CHANNEL = "jobq_jobs"
_RECONNECT_S = 1.0
HELLO = "*hello"
HERE = "*here"
SCHEDULES = "*schedules"
# The origin prefix of notifications sent by the SQL functions (process origins are hex).
SQL_ORIGIN = "sql."
APPLICATION_NAME = "jobq-listen"
# One NOTIFY per queue gathered, in one statement.
_NOTIFY = "SELECT pg_notify(%(channel)s, p) FROM unnest(%(payloads)s::text[]) AS p"


class Notifications:
    """``heard(queue, count)`` is called for each notification another process sent;
    ``missed()`` each time the listening connection (re)connects, since notifications sent
    while it was away are lost."""

    def __init__(self, db: Database, heard: Callable[[str, int | None], None],
                 missed: Callable[[], None]) -> None:
        self.db = db
        self.origin = uuid.uuid4().hex[:12]
        self._heard = heard
        self._missed = missed
        # Counts not sent yet, by queue (None: wake everyone).
        self.outbox: dict[str, int | None] = {}
        # The other processes heard from: while there is none, nothing is sent. A process
        # that stops is not forgotten (sending to nobody is only a wasted round trip).
        self.peers: set[str] = set()
        self._outbox_ready = asyncio.Event()
        # Signal word -> what to call when another process sends it; and more to call
        # whenever notifications may have been missed.
        self._signals: dict[str, Callable[[], None]] = {}
        self._also_missed: list[Callable[[], None]] = []
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

    def send(self, counts: Mapping[str, int | None]) -> None:
        """Tell the other processes (call after commit). Counts for a queue add up until they
        leave: while one NOTIFY is in flight, further queues gather and leave together, so a
        burst of enqueues costs a handful of NOTIFYs, not one each. Nothing while no other
        process is known: it will ask for a look at everything when it greets us."""
        if not self.peers:
            return
        self._queue(counts)

    def signal(self, word: str) -> None:
        """Send a signal word (``SCHEDULES``) to the other processes (call after commit)."""
        self.send({word: None})

    def on_signal(self, word: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` when another process sends ``word``, and whenever notifications
        may have been missed (the news may have been among them)."""
        self._signals[word] = callback
        self._also_missed.append(callback)

    def _all_missed(self) -> None:
        self._missed()
        for callback in self._also_missed:
            callback()

    def _queue(self, counts: Mapping[str, int | None]) -> None:
        for q, n in counts.items():
            self.outbox[q] = add_counts(self.outbox.get(q, 0), n)
        if self.outbox:
            self._outbox_ready.set()

    async def _send(self) -> None:
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready.clear()
            batch, self.outbox = self.outbox, {}
            payloads = [format_payload(q, n, self.origin) for q, n in batch.items()]
            try:
                await self.db.fetch(_NOTIFY, {"channel": CHANNEL, "payloads": payloads})
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is away; local waiters were woken already
                log.warning("NOTIFY failed: %s", exc)
                self._queue(batch)  # keep them for the next try
                await asyncio.sleep(_RECONNECT_S)

    async def _listen(self) -> None:
        while True:
            try:
                async with await connect(self.db.direct_url, APPLICATION_NAME) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    self._all_missed()
                    # Heard by every process listening now, including those started while
                    # this connection was away.
                    self._queue({HELLO: None})
                    async for note in conn.notifies():
                        queue, count, origin = parse_payload(note.payload)
                        if origin != self.origin:
                            self._from(origin, queue, count)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.listening.clear()
                log.warning("LISTEN connection lost (%s); reconnecting", exc)
                await asyncio.sleep(_RECONNECT_S)


    def _from(self, origin: str, queue: str, count: int | None) -> None:
        if origin.startswith(SQL_ORIGIN):
            self._heard(queue, count)
            return
        new = origin not in self.peers
        self.peers.add(origin)
        if queue == HELLO or new:
            self._queue({HERE: None})  # so that it knows of us (again)
        if queue in (HELLO, HERE) or new:
            self._all_missed()  # what it committed before it knew of us was not announced
        if queue in (HELLO, HERE):
            return
        signalled = self._signals.get(queue)
        if signalled is not None:
            signalled()
        else:
            self._heard(queue, count)


def add_counts(a: int | None, b: int | None) -> int | None:
    """Job counts of notifications; ``None`` (unknown, wake everyone) absorbs any number."""
    return None if a is None or b is None else a + b


def format_payload(queue: str, count: int | None, origin: str) -> str:
    return f"{queue} {'*' if count is None else count} {origin}"


def parse_payload(payload: str) -> tuple[str, int | None, str]:
    """``<queue> <count> <origin>``; queue names hold no spaces. A count that is not a number
    (``*``, or a sender we do not understand) means: wake everyone."""
    head, _, origin = payload.rpartition(" ")
    queue, _, count = head.rpartition(" ")
    if not queue:
        return head, None, origin
    return queue, int(count) if count.isascii() and count.isdigit() else None, origin
