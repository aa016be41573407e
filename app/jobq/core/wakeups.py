"""Long-poll wake-ups: who a new job wakes, when an idle long-poll looks again, and how a bell
a claim does not answer reaches someone who will.

A claim that finds nothing waits in ``Wakeups.wait_for_work`` on a doorbell (``Waiter``)
subscribed to its queues. Whatever makes jobs claimable calls ``publish`` (after commit),
or ``jobs_added`` for new jobs that may be delayed: local waiters are rung at once, and what
they do not cover goes out by NOTIFY (``jobq.store.notify``) to the other processes, whose
boards ring their own waiters.

Waking is sized to the work: ``n`` new jobs wake idle waiters until their claim limits cover
``n``, not every waiter on the queue. Waking all of them for each job (a thundering herd)
made eight idle workers run eight claims per job, seven of them empty, and tripled pickup
latency. A rung waiter that will not answer its bell (its worker hung up, its claim failed,
it was rung during a claim that is returning, or its claim filled up from other queues)
passes it on. A count we do not know (``None``) wakes everyone. Jobs that idle waiters here
cover are not announced to other processes at all: a NOTIFY is a round trip.

An idle long-poll sleeps until the next waiting job it could take becomes visible, a bell
rings, or SAFETY_RECHECK_S passes (in case a NOTIFY was lost: another process died between
its commit and its NOTIFY). That reading is cached while no bell rings for its queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from jobq.store import records
from jobq.store.db import Database
from jobq.store.notify import Notifications, add_counts
from jobq.store.queries import Q

# An idle long-poll re-checks the table at least this often. It is a safety net, not the
# mechanism: wake-ups come from bells and from the next delayed job's visible_at.
SAFETY_RECHECK_S = 5.0
# A job visible now that the claim did not get is behind a full running cap or held by a
# concurrent claimer: neither rings the bell when it frees up, so look again soon (not at
# once: that would spin for the whole wait).
BLOCKED_RECHECK_S = 0.1
# How long an idle long-poll trusts a reading of when the next waiting job becomes visible,
# while no bell has rung for its queues; and how many such readings are kept.
NEXT_VISIBLE_TTL_S = 1.0
NEXT_VISIBLE_KEEP = 10_000
# Jobs delayed by at most this long get a timer that rings a bell when they become visible
# (see Wakeups.jobs_added); later ones are found by the waiters' own readings and re-checks.
DELAYED_WAKE_MAX_S = 6.0
# Queues whose generation is remembered; past this the table starts over (see Wakeups._wake).
GENERATIONS_KEPT = 10_000

T = TypeVar("T")
# Bells by queue: how many new jobs (None: not known, wake everyone).
Counts = Mapping[str, int | None]


class Waiter:
    """One long-poll's doorbell. ``limit`` is how many jobs its claim takes; a waiter with a
    type filter may not want what was enqueued, so it counts for nothing and is always rung.
    ``rung_for`` holds, per queue it was rung for, how many new jobs it was counted for
    (``None``: unknown), so a claim that could not answer for them all knows what to pass on.
    ``idle`` is true while it sleeps between claims. ``owner`` is the access token id the
    long-poll runs under (None: none that can be revoked), for ``Wakeups.revoked``."""

    __slots__ = ("event", "limit", "filtered", "rung_for", "idle", "owner")

    def __init__(self, limit: int = 1, filtered: bool = False, owner: str | None = None) -> None:
        self.event = asyncio.Event()
        self.limit = max(limit, 1)
        self.filtered = filtered
        self.rung_for: dict[str, int | None] = {}
        self.idle = False
        self.owner = owner

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


@dataclass(frozen=True, slots=True)
class NextVisible:
    value: datetime | None
    generations: tuple[int, ...]
    read_at: float


async def _never() -> bool:
    return False


class Wakeups:
    """The process-wide switchboard between long-polls and what makes jobs claimable."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.notifications = Notifications(db.url, heard=self._wake, missed=self._wake_all)
        # Insertion-ordered, so the longest-waiting waiter is rung first.
        self._waiters: dict[str, dict[Waiter, None]] = defaultdict(dict)
        # Bumped by every bell for a queue: something there may have changed since a reading
        # taken at an older generation (see _next_visible).
        self._generation: dict[str, int] = {}
        self._ticks = itertools.count(1)
        # Readings of QueueNextVisible by (queues, types).
        self._readings: dict[tuple[tuple[str, ...], tuple[str, ...] | None], NextVisible] = {}
        # Set whenever a long-poll goes idle: what until_idle waits on.
        self._went_idle = asyncio.Event()
        # Set by drain(): the process is stopping, long-polls answer what they have now.
        self._draining = False

    async def start(self) -> None:
        await self.notifications.start()

    async def stop(self) -> None:
        await self.notifications.stop()

    def drain(self) -> None:
        """The process is stopping: every idle long-poll answers at once with what it has
        (nothing), and claims from now on take once and do not wait. A claim in the middle of
        its statement finishes it: what it leased is answered to its client. Idempotent.

        Called when the stop signal arrives, not at the lifespan's end: the server runs that
        only once every request is answered, so long-polls would sit out their wait first."""
        if self._draining:
            return
        self._draining = True
        for bucket in list(self._waiters.values()):
            for waiter in list(bucket):
                waiter.event.set()  # no queue: rung for nothing, so nothing to pass on

    @property
    def draining(self) -> bool:
        return self._draining

    # ------------------------------------------------------------------ the claim's side

    async def wait_for_work(
        self,
        queues: list[str],
        types: list[str] | None,
        limit: int,
        wait_s: float,
        take: Callable[[], Awaitable[list[T]]],
        queue_of: Callable[[T], str],
        gone: Callable[[], Awaitable[bool]] = _never,
        owner: str | None = None,
    ) -> list[T]:
        """Run ``take`` (one claim of up to ``limit`` jobs from ``queues``) until it takes
        something or ``wait_s`` has passed, sleeping in between until a bell rings for these
        queues or a waiting job becomes visible. Answers what the last ``take`` took.

        ``gone`` tells whether the caller has hung up: a long-poll whose worker died must not
        go on to lease a job to nobody (it would sit out a whole lease and count as an expiry).
        ``owner``: the access token the caller used; ``revoked`` wakes the long-poll when it
        is revoked, so that its next ``take`` (which checks the token, and raises) runs now.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        # The bells that woke us (queue -> jobs counted on us), to be answered by the next take.
        woken_for: dict[str, int | None] = {}
        while True:
            # Subscribe before looking, so a job enqueued between the look and the wait still
            # rings the bell.
            with self._subscribe(queues, limit, filtered=bool(types), owner=owner) as waiter:
                try:
                    got = await take()
                    remaining = deadline - loop.time()
                    if got or remaining <= 0 or self._draining:
                        # Bells that rang during this take may be for jobs it did not see; a
                        # bell that woke it is short of what it was counted for if the take
                        # filled up from a queue listed before.
                        unanswered: dict[str, int | None] = {}
                        if len(got) == limit:
                            taken = Counter(queue_of(x) for x in got)
                            unanswered = {q: None if n is None else n - taken[q] for q, n in woken_for.items()}
                            unanswered = {q: n for q, n in unanswered.items() if n is None or n > 0}
                        self._pass_on(waiter, _merged(waiter.rung_for, unanswered))
                        return got
                    sleep = min(remaining, SAFETY_RECHECK_S)
                    nxt = await self._next_visible(queues, types)
                    if nxt is not None:
                        until = (nxt - datetime.now(nxt.tzinfo)).total_seconds()
                        sleep = min(sleep, until + 0.001 if until > 0 else BLOCKED_RECHECK_S)
                    waiter.idle = True
                    self._went_idle.set()
                    try:
                        await waiter.wait(sleep)
                    finally:
                        waiter.idle = False
                    hung_up = await gone()
                    woken_for = dict(waiter.rung_for)  # after gone(): a bell may ring meanwhile
                    if hung_up or self._draining:
                        # Nobody here will claim what we were rung for: other waiters (or,
                        # through NOTIFY, other processes) will.
                        self._pass_on(waiter, woken_for)
                        return []
                except BaseException:
                    self._pass_on(waiter, _merged(woken_for, waiter.rung_for))
                    raise

    # ------------------------------------------------------- the side that makes work

    def publish(self, counts: Counts | Iterable[str]) -> None:
        """Jobs became claimable (call after commit): ``{queue: how many}``, or queue names
        when the number is not known, which wakes every waiter on them.

        Other processes are told only of the jobs that idle waiters here do not cover. A rung
        waiter that does not claim passes its bell on through here, so a job it leaves
        reaches other processes then."""
        items = counts.items() if isinstance(counts, Mapping) else ((q, None) for q in counts)
        rest: dict[str, int | None] = {}
        for q, n in items:
            left = self._wake(q, n)
            if left != 0:
                rest[q] = add_counts(rest.get(q, 0), left)
        if rest:
            self.notifications.send(rest)

    def jobs_added(self, jobs: Iterable[tuple[str, datetime]]) -> None:
        """New jobs were committed, as ``(queue, visible_at)``: ring for each (a waiter rung
        for a delayed job re-reads when the next job becomes visible), and set a timer for
        those due within DELAYED_WAKE_MAX_S. The first bell reached only the waiters counted
        for these jobs; if those leave before the jobs are due (their wait ends, they take
        other work), the others would learn of them only at their next re-check, up to
        SAFETY_RECHECK_S late."""
        now = datetime.now(UTC)
        added: Counter[str] = Counter()
        due: dict[str, tuple[datetime, int]] = {}
        for queue, at in jobs:
            added[queue] += 1
            if at > now and (at - now).total_seconds() <= DELAYED_WAKE_MAX_S:
                first, n = due.get(queue, (at, 0))
                due[queue] = (min(first, at), n + 1)
        self.publish(added)
        if not due:
            return
        loop = asyncio.get_running_loop()
        for queue, (at, n) in due.items():
            loop.call_later((at - now).total_seconds() + 0.001, self.publish, {queue: n})

    def revoked(self, owners: Set[str]) -> None:
        """Access tokens were revoked: wake the long-polls waiting under them, so they end
        (their claim checks the token) within the token table's refresh, not at the end of
        their wait. Rung for no queue: a bell that comes after is passed over to others,
        and the ones they were rung for before are passed on when they leave."""
        for bucket in list(self._waiters.values()):
            for waiter in bucket:
                if waiter.owner is not None and waiter.owner in owners:
                    waiter.ring()

    # ------------------------------------------------------------------------ probes

    def has_waiters(self, queue: str) -> bool:
        return bool(self._waiters.get(queue))

    def idle(self, queue: str) -> int:
        """How many long-polls on ``queue`` are sleeping between claims."""
        return sum(1 for w in self._waiters.get(queue, ()) if w.idle)

    async def until_idle(self, queue: str, n: int = 1) -> None:
        """Return once ``n`` long-polls on ``queue`` sleep between claims: a test's way to
        know they looked and found nothing, without guessing how long that takes."""
        while self.idle(queue) < n:
            self._went_idle.clear()
            await self._went_idle.wait()

    def generation(self, queue: str) -> int:
        return self._generation.get(queue, 0)

    # --------------------------------------------------------------------- internals

    @contextlib.contextmanager
    def _subscribe(self, queues: Iterable[str], limit: int = 1, filtered: bool = False,
                   owner: str | None = None) -> Iterator[Waiter]:
        waiter = Waiter(limit, filtered, owner)
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

    def _wake(self, queue: str, count: int | None = 1) -> int | None:
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

    def _wake_all(self) -> None:
        """Notifications may have been missed (the listening connection was away): every
        waiter re-checks."""
        for q in list(self._waiters):
            self._wake(q, None)

    def _pass_on(self, waiter: Waiter, owed: dict[str, int | None]) -> None:
        """Hand the jobs of bells this claim will not answer to other waiters (here or, through
        NOTIFY, in another process): as many as we were counted for (``None``: everyone)."""
        if owed:
            waiter.ring()  # marks it rung, so the bell goes to someone else
            self.publish(owed)

    async def _next_visible(self, queues: list[str], types: list[str] | None) -> datetime | None:
        """When the next waiting job this long-poll could take becomes visible (None: no job).

        Every idle re-poll of a busy worker used to ask the database (a query per job in a
        one-job-per-call workload). A reading stands for NEXT_VISIBLE_TTL_S while no bell rings
        for these queues and its time is still ahead: new jobs, retries, expiries and unpausing
        all ring a bell here or, through NOTIFY, in the process that changed them."""
        key = (tuple(queues), tuple(types) if types else None)
        generations = tuple(self.generation(q) for q in queues)
        now = time.monotonic()
        hit = self._readings.get(key)
        if (hit is not None and hit.generations == generations and now - hit.read_at < NEXT_VISIBLE_TTL_S
                and (hit.value is None or hit.value > datetime.now(hit.value.tzinfo))):
            return hit.value
        row = await self._db.fetch_one(Q.QueueNextVisible, {"queues": queues, "types": types})
        value: datetime | None = records.scalar(row)
        if len(self._readings) >= NEXT_VISIBLE_KEEP:  # keys come from clients: keep it bounded
            self._readings.clear()
        self._readings[key] = NextVisible(value, generations, now)
        return value


def _merged(a: dict[str, int | None], b: dict[str, int | None]) -> dict[str, int | None]:
    out = dict(a)
    for q, n in b.items():
        out[q] = add_counts(out.get(q, 0), n)
    return out
