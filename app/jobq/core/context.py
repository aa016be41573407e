"""What every core operation needs: the database, the wakeup switchboard, the event sink,
the clock schedules are computed by, and the bell that wakes this process's scheduler."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from jobq.core.events import Events
from jobq.core.wakeups import Wakeups
from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.domain.rates import Bucket, Spreader
from jobq.domain.schedules import Clock, SystemClock
from jobq.store import records
from jobq.store.db import Database
from jobq.store.notify import SCHEDULES
from jobq.store.queries import Q

CAPS_TTL_S = 1.0
# Adaptive backpressure reads a queue's depth and lag at most this often per process.
PRESSURE_TTL_S = 0.25
# Queues whose pressure readings and spreaders are kept; past this the tables start over.
PRESSURE_KEEP = 10_000


@dataclass(frozen=True, slots=True)
class ClaimSettings:
    """The settings, cached per queue, that choose the statements of its claims and enqueues:
    a queue with none of them costs no statement more than before they existed."""

    max_running: int | None = None
    aging_ms: int | None = None
    paced: bool = False  # rate_limit set: claims run JobClaimPaced, alone
    enqueue_rate: Bucket | None = None
    soft_depth: int | None = None
    soft_lag_ms: int | None = None

    @property
    def alone(self) -> bool:
        """Claimed in a statement of its own, not with other queues (JobClaimMany)."""
        return self.max_running is not None or self.paced

    @property
    def soft(self) -> bool:
        return self.soft_depth is not None or self.soft_lag_ms is not None


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
    # The settings that choose a claim's statements (max_running, aging_ms, rate_limit) and an
    # enqueue's (enqueue_rate, soft thresholds), re-read at most every CAPS_TTL_S: a capped
    # queue's claims take a lock and count, a paced one's run JobClaimPaced, a plain one's
    # neither; a change made on another replica applies within the TTL.
    claim_settings: dict[str, ClaimSettings] = field(default_factory=dict)
    _caps_read_at: dict[str, float] = field(default_factory=dict)
    # Adaptive backpressure: per queue with soft thresholds, its (depth, lag_ms) as last read
    # (and when), and the spreader that refuses its share of enqueues evenly.
    _pressure: dict[str, tuple[float, int, int | None]] = field(default_factory=dict)
    _spreaders: dict[str, Spreader] = field(default_factory=dict)
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
            self.claim_settings[caps.name] = ClaimSettings(
                caps.max_running, caps.aging_ms, caps.paced, Bucket.of(caps.enqueue_rate),
                caps.soft_depth, caps.soft_lag_ms)
        for n in stale:
            self._caps_read_at[n] = now

    async def pressure(self, names: list[str]) -> dict[str, tuple[int, int | None]]:
        """Waiting depth and oldest claimable lag (ms) of queues with soft thresholds, read
        again when older than PRESSURE_TTL_S: backpressure needs a trend, not every job."""
        now = time.monotonic()
        stale = [n for n in names if now - self._pressure.get(n, (-PRESSURE_TTL_S, 0, None))[0]
                 >= PRESSURE_TTL_S]
        if stale:
            if len(self._pressure) >= PRESSURE_KEEP:  # names come from clients: keep it bounded
                self._pressure.clear()
            for p in map(records.queue_pressure, await self.db.fetch(Q.QueuePressure, {"queues": stale})):
                self._pressure[p.queue] = (now, p.depth, p.lag_ms)
        return {n: self._pressure[n][1:] for n in names if n in self._pressure}

    def spreader(self, name: str) -> Spreader:
        found = self._spreaders.get(name)
        if found is None:
            if len(self._spreaders) >= PRESSURE_KEEP:
                self._spreaders.clear()
            found = self._spreaders[name] = Spreader()
        return found

    def forget_caps(self, name: str) -> None:
        self._caps_read_at.pop(name, None)

    def forget_queue(self, name: str) -> None:
        """The queue was deleted (or found missing): the next enqueue creates it again."""
        self.known_queues.discard(name)
        self.claim_settings.pop(name, None)
        self.forget_caps(name)

    async def schema_revision(self) -> str | None:
        return await self.db.schema_revision()
