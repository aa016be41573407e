"""What every core operation needs: the database, the wakeup switchboard, the event sink,
the clock schedules are computed by, and the bell that wakes this process's scheduler."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from jobq.core.events import Events
from jobq.core.wakeups import Wakeups
from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.domain.schedules import Clock, SystemClock
from jobq.store import records
from jobq.store.db import Database
from jobq.store.notify import SCHEDULES
from jobq.store.queries import Q

CAPS_TTL_S = 1.0


@dataclass(frozen=True, slots=True)
class ClaimSettings:
    max_running: int | None = None
    aging_ms: int | None = None


@dataclass
class Context:
    db: Database
    wakeups: Wakeups
    events: Events = field(default_factory=Events)
    # Queues this process created or saw, so that an enqueue can skip the upsert that creates
    # one. Only a hint: a queue may be deleted (here or on another replica) after it was
    # seen; an enqueue then inserts nothing (JobInsert finds no queue), forgets the name and
    # creates the queue again (core/enqueue.py).
    known_queues: set[str] = field(default_factory=set)
    # The settings that choose a claim's statement (max_running, aging_ms), re-read at most
    # every CAPS_TTL_S: a capped queue's claims take a lock and count, an uncapped one's do
    # not, and a change made on another replica applies within the TTL.
    claim_settings: dict[str, ClaimSettings] = field(default_factory=dict)
    _caps_read_at: dict[str, float] = field(default_factory=dict)
    # True while this process holds the background duties' lock (see duties.py).
    is_leader: bool = False
    # What "now" is for schedules: real time in a service, a hand-driven clock in tests.
    clock: Clock = field(default_factory=SystemClock)
    # Rung when a schedule was created or changed, here or (by NOTIFY) on another replica:
    # the scheduler then re-reads when it next has something to do (core/schedules.py).
    schedule_bell: asyncio.Event = field(default_factory=asyncio.Event)
    # The width of a partition of the finished jobs' history (settings.history_partition_s).
    history_partition_s: int = 86_400

    def __post_init__(self) -> None:
        self.wakeups.notifications.on_signal(SCHEDULES, self.schedule_bell.set)

    def schedules_changed(self) -> None:
        """A schedule changed (call after commit): every replica's scheduler looks again."""
        self.schedule_bell.set()
        self.wakeups.notifications.signal(SCHEDULES)

    async def ensure_queues(self, names: list[str], *, fresh: bool = False) -> None:
        """Create the queues that do not exist yet. ``fresh``: ask the database even for
        queues this process saw before (a settings call or a subscription, which must not
        act on a queue deleted since)."""
        missing = [n for n in dict.fromkeys(names) if fresh or n not in self.known_queues]
        if not missing:
            return
        # One transaction, so one commit (a WAL flush) for all: a first claim naming 100 new
        # queues took 615 ms as 100 commits. Sorted, so that two processes creating
        # overlapping sets take the rows' locks in the same order and never deadlock.
        async with self.db.transaction() as conn:
            for name in sorted(missing):
                await self.db.run(conn, Q.QueueEnsure, {**QUEUE_DEFAULTS.as_params(), "queue": name})
        self.known_queues.update(missing)

    async def refresh_caps(self, names: list[str]) -> None:
        now = time.monotonic()
        stale = [n for n in names if now - self._caps_read_at.get(n, -CAPS_TTL_S) >= CAPS_TTL_S]
        if not stale:
            return
        for caps in map(records.queue_caps, await self.db.fetch(Q.QueueCaps, {"queues": stale})):
            self.claim_settings[caps.name] = ClaimSettings(caps.max_running, caps.aging_ms)
        for n in stale:
            self._caps_read_at[n] = now

    def forget_caps(self, name: str) -> None:
        self._caps_read_at.pop(name, None)

    def forget_queue(self, name: str) -> None:
        """The queue was deleted (or found missing): the next enqueue creates it again."""
        self.known_queues.discard(name)
        self.claim_settings.pop(name, None)
        self.forget_caps(name)

    async def schema_revision(self) -> str | None:
        return await self.db.schema_revision()
