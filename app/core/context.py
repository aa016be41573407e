"""What every core operation needs: the database, the wakeup switchboard, the event sink."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobq.core.events import Events
from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.store.db import Database
from jobq.store.notify import Wakeups
from jobq.store.queries import Q

CAPS_TTL_S = 1.0
# How long an idle long-poll trusts a reading of when the next waiting job becomes visible,
# while no bell has rung for its queues; and how many such readings are kept.
NEXT_VISIBLE_TTL_S = 1.0
NEXT_VISIBLE_KEEP = 10_000
# Jobs delayed by at most this long get a timer that rings a bell when they become visible
# (see Context.wake_when_visible); later ones are found by the waiters' periodic re-checks.
DELAYED_WAKE_MAX_S = 6.0


@dataclass(frozen=True, slots=True)
class ClaimSettings:
    max_running: int | None = None
    aging_ms: int | None = None


@dataclass(frozen=True, slots=True)
class NextVisible:
    value: datetime | None
    generations: tuple[int, ...]
    read_at: float


@dataclass
class Context:
    db: Database
    wakeups: Wakeups
    events: Events = field(default_factory=Events)
    # Queues never disappear, so once a queue row is known to exist this process can skip
    # the upsert that creates it.
    known_queues: set[str] = field(default_factory=set)
    # The settings that choose a claim's statement (max_running, aging_ms), re-read at most
    # every CAPS_TTL_S: a capped queue's claims take a lock and count, an uncapped one's do
    # not, and a change made on another replica applies within the TTL.
    claim_settings: dict[str, ClaimSettings] = field(default_factory=dict)
    _caps_read_at: dict[str, float] = field(default_factory=dict)
    # Readings of QueueNextVisible by (queues, types): see core.leases.
    next_visible: dict[tuple[tuple[str, ...], tuple[str, ...] | None], NextVisible] = field(default_factory=dict)
    # True while this process holds the background duties' lock (see duties.py).
    is_leader: bool = False

    def wake_when_visible(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Ring a bell when delayed jobs become visible. The enqueue's bell reached only the
        waiters counted for these jobs; if those leave before the jobs are due (their wait
        ends, they take other work), the others would learn of them only at their next
        re-check, up to SAFETY_RECHECK_S (5 s) late."""
        now = datetime.now(UTC)
        due: dict[str, tuple[datetime, int]] = {}
        for row in rows:
            at = row["visible_at"]
            if at > now and (at - now).total_seconds() <= DELAYED_WAKE_MAX_S:
                first, n = due.get(row["queue"], (at, 0))
                due[row["queue"]] = (min(first, at), n + 1)
        if not due:
            return
        loop = asyncio.get_running_loop()
        for queue, (at, n) in due.items():
            loop.call_later((at - now).total_seconds() + 0.001, self.wakeups.publish, {queue: n})

    async def ensure_queues(self, names: list[str]) -> None:
        missing = [n for n in dict.fromkeys(names) if n not in self.known_queues]
        if not missing:
            return
        async with self.db.connection() as conn:
            for name in sorted(missing):
                await conn.execute(Q.QueueEnsure, {**QUEUE_DEFAULTS.as_params(), "queue": name})
        self.known_queues.update(missing)

    async def refresh_caps(self, names: list[str]) -> None:
        now = time.monotonic()
        stale = [n for n in names if now - self._caps_read_at.get(n, -CAPS_TTL_S) >= CAPS_TTL_S]
        if not stale:
            return
        rows = await self.db.fetch(Q.QueueCaps, {"queues": stale})
        for row in rows:
            self.claim_settings[row["name"]] = ClaimSettings(row["max_running"], row["aging_ms"])
        for n in stale:
            self._caps_read_at[n] = now

    def forget_caps(self, name: str) -> None:
        self._caps_read_at.pop(name, None)

    async def schema_revision(self) -> str | None:
        return await self.db.schema_revision()
