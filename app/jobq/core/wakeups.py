"""Long-poll wake-ups: who a new job wakes, how idle long-polls learn of work without asking
the database each on its own, and how a bell a claim does not answer reaches someone who will.

Waiting costs memory, not work. A claim that finds nothing waits in
``Wakeups.wait_for_work`` on a doorbell (``Waiter``) subscribed to its queues, and sleeps
until a bell rings it or its wait ends; a wait that ends unrung answers ``[]`` without
another claim (nothing told it there was work, so there is none to find). 5,000 idle
long-polls used to re-run their claim every 5 s each (1,200 transactions/s and 30% of a core
doing nothing); now they cost no statement at all while nothing happens.

Who rings. Whatever makes jobs claimable calls ``publish`` (after commit), or ``jobs_added``
for new jobs that may be delayed: local waiters are rung at once, and what they do not cover
goes out by NOTIFY (``jobq.store.notify``) to the other processes, whose boards ring their
own waiters. Waking is sized to the work: ``n`` new jobs ring idle waiters, longest waiting
first, until their claim limits cover ``n``; never all of them (a thundering herd: eight idle
workers ran eight claims per job, seven of them empty). A count we do not know (``None``:
unpausing, an older peer) wakes everyone. Waiters with a type filter are kept in groups by
their types: each group is rung like the unfiltered waiters (the board does not know the new
job's type), and none of them covers a job for the unfiltered ones.

Every wake-up is O(rung): per queue and group, the waiters not rung yet sit in an
insertion-ordered dict and a bell pops them from its front; a rung waiter leaves every queue's
dict at once. Idle counts, revocation (by token) and the checks below are kept per queue or
per token, never found by walking all waiters.

One path to the database for all waiters: the watcher. A single task per process asks the
database, in one statement (``QueueWakeCheck``) for all the queues that have idle waiters,
how many jobs each could hand out now and when its next delayed job becomes visible, and
rings only that many waiters. It runs every SAFETY_RECHECK_S (the safety net for a NOTIFY
lost when another process died between its commit and its NOTIFY: O(queues with waiters) per
period, not O(waiters)), at a delayed job's visible time, BLOCKED_RECHECK_S after it saw jobs
that a full ``max_running`` holds back (an ack frees a slot without ringing), at the moment a
full ``rate_limit`` window has room again (``paced``: claims and readings of a paced queue say
when, by the database's clock), and when a
long-poll that found nothing is the first to wait on a queue it has not read lately (what it
knows of delayed jobs may be old) or after a bell whose jobs it could not see (a count from
another process, or none). What a reading finds may be of types the type-filtered waiters do
not take, so it rings one waiter of each such group, counted for all the jobs (a full claim
passes the rest on). Jobs delayed by at most DELAYED_WAKE_MAX_S also get a timer at enqueue
that rings for them when they become visible.

A long-poll does not even look when it need not: if an idle waiter that looked and was not
rung since already waits on each of its queues (unfiltered, or with the same types), any job
it could take would ring that waiter first, so the newcomer goes straight to sleep. A worker
fleet re-polling after each timeout costs nothing then.

A rung waiter that will not answer its bell (its worker hung up, its claim failed, it was rung
during a claim that is returning, or its claim filled up from other queues) passes it on.
Jobs that idle waiters here cover are not announced to other processes at all: a NOTIFY is a
round trip.

The hand-off. An enqueue of one job that is claimable at once, into a queue claimed one
statement at a time (no ``max_running``, no ``rate_limit``), does not ring the idle waiter it
would ring: it ``reserve``s it, and its insert leases the job to that waiter's worker (JobInsert,
as JobClaim would lease it), so the job goes out in the enqueue's commit, with no bell, no
claim statement and no second commit in between (a pickup's path was an insert, a bell, a
claim and its commit). ``settle`` then hands the waiter that lease, or, when the insert leased
nothing (a paused queue, a revoked token, no insert), puts it back in its queues' ring order
(last), still asleep. A reserved waiter waits for that even past the end of its own wait: the
lease it is being handed must reach its worker. Bells that come for its queues meanwhile are
its own, as if it were still in the ring order: it answers them (looks, once settled) or
passes them on. What an idle waiter means makes this the claim it would have run: it sleeps
only while nothing it could take is known to be waiting; and only when every queue it lists
before the job's is claimed one statement at a time (a full ``max_running`` of an earlier
queue frees a slot without a bell: its claim would take that queue's job first).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from jobq.store import records
from jobq.store.db import Database
from jobq.store.notify import Notifications, add_counts
from jobq.store.queries import Q

log = logging.getLogger("jobq.wakeups")

# The watcher reads every queue with idle waiters at least this often. A safety net, not the
# mechanism: wake-ups come from bells, timers and the watcher's own readings.
SAFETY_RECHECK_S = 5.0
# Jobs visible now that a full max_running holds back: nothing rings when a slot frees up, so
# the watcher looks at that queue again this soon (not at once: that would spin).
BLOCKED_RECHECK_S = 0.1
# A long-poll that found nothing and is the first to wait on a queue asks the watcher for a
# reading when the last one is older than this (it may not know of a job delayed since).
NEXT_VISIBLE_TTL_S = 1.0
# Queues whose last reading is remembered; past this the table starts over (a new reading).
NEXT_VISIBLE_KEEP = 10_000
# Jobs delayed by at most this long get a timer that rings a bell when they become visible
# (see Wakeups.jobs_added); later ones are found by the watcher's readings.
DELAYED_WAKE_MAX_S = 6.0
# visible_at is the database's clock, "now" this process's: a job due within this much is
# rung for at once (the database's clock may be ahead: it is visible there already), and
# again by its timer if it was not yet.
CLOCK_SLACK_S = 0.25
# A reading schedules a look at a queue's next delayed job when it is due within this long;
# later ones are seen by the periodic readings before then (twice the period: one is missed
# at most).
LOOKAHEAD_S = 2 * SAFETY_RECHECK_S
# The most waiting jobs a reading counts per queue (it rings no more waiters than there are).
CHECK_COUNT_MAX = 10_000
# Queues whose generation is remembered; past this the table starts over (see Wakeups._wake).
GENERATIONS_KEPT = 10_000

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who a long-poll claims for, for the hand-off: the worker, the lease's length (None: the
    queue's), the access token the claim runs under (None: none that can be revoked), whether
    this process still takes it (None: nothing to ask), the event set when its client hung
    up, and how to give back leases it was handed and will never answer (its task cancelled
    in between: they go back, their attempts not spent)."""

    worker_id: str
    lease_ms: int | None
    token_id: str | None
    allowed: Callable[[], bool] | None = None
    hung_up: asyncio.Event | None = None
    give_back: Callable[[list[Any]], None] | None = None

# Bells by queue: how many new jobs (None: not known, wake everyone).
Counts = Mapping[str, int | None]
# Waiters are grouped by their type filter: None for none.
Group = tuple[str, ...] | None
# The group of a waiter filtered by types that are not known to the board (tests).
_FILTERED: Group = ("",)


class Waiter:
    """One long-poll's doorbell. ``limit`` is how many jobs its claim takes; a waiter with a
    type filter may not want what was enqueued, so it covers nothing for the unfiltered ones
    (its ``group`` is its types). ``rung_for`` holds, per queue it was rung for, how many new
    jobs it was counted for (``None``: unknown), so a claim that could not answer for them all
    knows what to pass on. ``idle`` is true while it sleeps between claims. ``owner`` is the
    access token id the long-poll runs under (None: none that can be revoked), for
    ``Wakeups.revoked``. ``ready``: not rung yet, so in its queues' ring order. ``claimant``:
    whom an enqueue may lease a job to (the hand-off; None: not this one); ``reserved`` while
    one does, ``settled`` set when it is done, and ``handed`` the leases it handed over."""

    __slots__ = ("event", "limit", "filtered", "rung_for", "idle", "owner", "queues", "group", "ready",
                 "claimant", "reserved", "settled", "handed")

    def __init__(self, limit: int = 1, filtered: bool = False, owner: str | None = None,
                 queues: tuple[str, ...] = (), group: Group = None,
                 claimant: Claimant | None = None) -> None:
        self.event = asyncio.Event()
        self.limit = max(limit, 1)
        self.filtered = filtered or group is not None
        self.group: Group = group if group is not None else (_FILTERED if filtered else None)
        self.rung_for: dict[str, int | None] = {}
        self.idle = False
        self.owner = owner
        self.queues = queues
        self.ready = False
        self.claimant = claimant
        self.reserved = False
        self.settled: asyncio.Event | None = None
        self.handed: list[Any] | None = None

    @property
    def rung(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout_s: float, hung_up: asyncio.Event | None = None) -> bool:
        """Sleep until rung or ``timeout_s`` passes, or until ``hung_up`` is set (the
        caller's client went away: nobody is left to hand a job to). Whether it was rung."""
        if timeout_s <= 0:
            return self.event.is_set()
        if hung_up is None:
            try:
                async with asyncio.timeout(timeout_s):
                    await self.event.wait()
            except TimeoutError:
                return self.event.is_set()
            return True
        if hung_up.is_set():
            return self.event.is_set()
        rung, gone = asyncio.ensure_future(self.event.wait()), asyncio.ensure_future(hung_up.wait())
        try:
            await asyncio.wait((rung, gone), timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            rung.cancel()
            gone.cancel()
        return self.event.is_set()


async def _never() -> bool:
    return False


def _forget(index: dict[T, dict[Waiter, None]], key: T, waiter: Waiter) -> None:
    """Take ``waiter`` out of ``index[key]``, and the key out once it holds none."""
    members = index.get(key)
    if members is not None:
        members.pop(waiter, None)
        if not members:
            del index[key]


def _bump(counter: dict[T, int], key: T, delta: int) -> None:
    n = counter.get(key, 0) + delta
    if n:
        counter[key] = n
    else:
        counter.pop(key, None)


class Wakeups:
    """The process-wide switchboard between long-polls and what makes jobs claimable."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.notifications = Notifications(db, heard=self._heard, missed=self._wake_all)
        # Per queue, per group: the waiters not rung yet, insertion-ordered so that the
        # longest waiting is rung first.
        self._ready: dict[str, dict[Group, dict[Waiter, None]]] = {}
        # Per queue: the claim limits of its ready waiters (what a reading counts up to).
        self._ready_limits: dict[str, int] = {}
        # Per queue: subscribed waiters; idle ones; and, per (queue, group), idle ones not
        # rung since they went idle (a newcomer behind one of them need not look).
        self._subscribed: dict[str, int] = {}
        self._idle: dict[str, int] = {}
        self._quiet: dict[tuple[str, Group], int] = {}
        self._by_owner: dict[str, dict[Waiter, None]] = {}
        self._all: dict[Waiter, None] = {}
        # Bumped by every bell for a queue.
        self._generation: dict[str, int] = {}
        self._ticks = itertools.count(1)
        # The watcher: when each queue is due a reading (loop time), when each was last read,
        # the queues whose jobs a bell announced that a reading must look at, its wake-up
        # call, and its task.
        self._due: dict[str, float] = {}
        # Per queue: the waiters a hand-off has reserved (out of the ring order, see reserve).
        self._reserved: dict[str, dict[Waiter, None]] = {}
        self._read_at: dict[str, float] = {}
        self._unseen: set[str] = set()
        self._poke = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        # How many readings the watcher took (a probe for tests and the bench).
        self.readings = 0
        # Set whenever a long-poll goes idle: what until_idle waits on.
        self._went_idle = asyncio.Event()
        # Set by drain(): the process is stopping, long-polls answer what they have now.
        self._draining = False

    async def start(self) -> None:
        await self.notifications.start()
        self._watcher = asyncio.create_task(self._watch(), name="jobq-wakeups")

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
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
        for waiter in list(self._all):
            self._ring(waiter)  # no queue: rung for nothing, so nothing to pass on

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
        hung_up: asyncio.Event | None = None,
        claimant: Claimant | None = None,
    ) -> list[T]:
        """Run ``take`` (one claim of up to ``limit`` jobs from ``queues``) until it takes
        something or ``wait_s`` has passed, sleeping in between until a bell rings for these
        queues. Answers what the last ``take`` took; a wait that ends with no bell answers
        ``[]`` without another ``take``.

        ``gone`` tells whether the caller has hung up: a long-poll whose worker died must not
        go on to lease a job to nobody (it would sit out a whole lease and count as an expiry).
        ``hung_up``, set when the caller's client disconnects, ends a wait at once: a
        long-poll left waiting for a client that is gone would hold a place under the
        long-poll cap, and keep a graceful stop of the service waiting until its time is up.
        ``owner``: the access token the caller used; ``revoked`` wakes the long-poll when it
        is revoked, so that its next ``take`` (which checks the token, and raises) runs now.
        ``claimant``: whom an enqueue may lease a new job to while this sleeps (the hand-off;
        its leases are answered as ``take``'s would be); None: every job comes by ``take``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        group: Group = tuple(sorted(set(types))) if types else None
        # The bells that woke us (queue -> jobs counted on us), to be answered by the next take.
        woken_for: dict[str, int | None] = {}
        first = True
        while True:
            # Subscribe before looking, so a job enqueued between the look and the wait still
            # rings the bell.
            with self._subscribe(queues, limit, owner=owner, group=group, claimant=claimant) as waiter:
                try:
                    if first and wait_s > 0 and not self._draining and self._behind_quiet(waiter):
                        got: list[T] = []  # whatever it could take would ring one ahead first
                        looked = False
                    else:
                        got = await take()
                        looked = True
                    first = False
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
                    if looked and not waiter.rung:
                        self._looked(waiter)
                    self._set_idle(waiter, True)
                    self._went_idle.set()
                    try:
                        rung = await waiter.wait(remaining, hung_up)
                    finally:
                        self._set_idle(waiter, False)
                    if waiter.reserved:
                        # An enqueue is leasing it a job (the hand-off), which its worker must
                        # get even past the end of its wait: it is due in a statement's time.
                        assert waiter.settled is not None
                        await waiter.settled.wait()
                        rung = waiter.rung
                    if waiter.handed:
                        handed = waiter.handed
                        self._pass_on(waiter, dict(waiter.rung_for))  # bells it will not answer
                        return handed
                    if not rung:
                        return []  # nothing rang: there is nothing to look for
                    caller_gone = await gone()
                    woken_for = dict(waiter.rung_for)  # after gone(): a bell may ring meanwhile
                    if caller_gone or self._draining:
                        # Nobody here will claim what we were rung for: other waiters (or,
                        # through NOTIFY, other processes) will.
                        self._pass_on(waiter, woken_for)
                        return []
                except BaseException:
                    if waiter.handed and claimant is not None and claimant.give_back is not None:
                        claimant.give_back(waiter.handed)  # handed over, never to be answered
                    waiter.handed = None
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
            if n is None:
                self._mark_unseen(q)  # what became claimable is not known: read it again
            left = self._wake(q, n)
            if left != 0:
                rest[q] = add_counts(rest.get(q, 0), left)
        if rest:
            self.notifications.send(rest)

    def jobs_added(self, jobs: Iterable[tuple[str, datetime]]) -> None:
        """New jobs were committed, as ``(queue, visible_at)``: ring for those visible now;
        set a timer for those due within DELAYED_WAKE_MAX_S, whose bell goes out (here, and
        to other processes for what waiters here do not cover) when they become visible;
        and have the watcher look when a later one is due, if it is soon."""
        now = datetime.now(UTC)
        visible: Counter[str] = Counter()
        due: dict[str, tuple[datetime, int]] = {}
        later: dict[str, datetime] = {}
        for queue, at in jobs:
            if (at - now).total_seconds() <= CLOCK_SLACK_S:
                visible[queue] += 1
            if at <= now:
                continue
            if (at - now).total_seconds() <= DELAYED_WAKE_MAX_S:
                first, n = due.get(queue, (at, 0))
                due[queue] = (min(first, at), n + 1)
            elif (at - now).total_seconds() <= LOOKAHEAD_S:  # later ones: the rounds see them
                later[queue] = min(later.get(queue, at), at)
        if visible:
            self.publish(visible)
        if not due and not later:
            return
        loop = asyncio.get_running_loop()
        for queue, (at, n) in due.items():
            loop.call_later((at - now).total_seconds() + 0.001, self.publish, {queue: n})
        for queue, at in later.items():
            self._look_at(queue, loop.time() + (at - now).total_seconds() + 0.001)

    def reserve(self, queue: str, job_type: str, plain: Callable[[str], bool]) -> Waiter | None:
        """The hand-off (see the module): the idle waiter a new job of ``job_type`` in
        ``queue`` would ring first, taken out of the ring order for an enqueue to lease the
        job to; None when there is none, or when it is not one a job can be handed to (it
        is rung as usual then): its client is gone, its token refused, or a queue it lists
        before ``queue`` is not ``plain`` (claimed one statement at a time). ``settle`` must
        follow, whatever the insert does."""
        groups = self._ready.get(queue)
        if not groups or self._draining:
            return None
        for group, members in groups.items():
            if group is not None and job_type not in group:
                continue
            waiter = next(iter(members))
            claimant = waiter.claimant
            if (not waiter.idle or claimant is None
                    or (claimant.hung_up is not None and claimant.hung_up.is_set())
                    or (claimant.allowed is not None and not claimant.allowed())
                    or not all(plain(q) for q in waiter.queues[:waiter.queues.index(queue)])):
                return None
            self._unready(waiter)
            waiter.reserved = True
            waiter.settled = asyncio.Event()
            for q in waiter.queues:
                self._reserved.setdefault(q, {})[waiter] = None
            return waiter
        return None

    def settle(self, waiter: Waiter, leases: list[Any] | None) -> bool:
        """The end of a hand-off to a ``reserve``d waiter: the ``leases`` its enqueue's insert
        leased to it are handed to it; with none, it goes back to its queues' ring order,
        still asleep (unless something rang it meanwhile). Whether the leases reached a
        waiting long-poll: False when it has left (its task was cancelled), and the caller
        must give them back."""
        if not waiter.reserved:
            return not leases
        self._unreserve(waiter)
        present = waiter in self._all
        if leases and present:
            waiter.handed = leases
            waiter.event.set()
        elif not leases and present and not waiter.rung:
            if waiter.rung_for:
                waiter.event.set()  # bells came meanwhile (see _wake): it looks for them now
            else:
                self._reready(waiter)
        if waiter.settled is not None:
            waiter.settled.set()
        return present or not leases

    def paced(self, queue: str, free_in_ms: int) -> None:
        """A claim or a reading found ``queue``'s rate_limit window full, with room again in
        ``free_in_ms`` (the database's clock, so no skew): the watcher reads the queue then,
        and rings as many waiters as the window has room for. Nothing rings in between: a
        full window is a timer, not a reason to poll."""
        loop_time = _loop_time()
        if loop_time is not None:
            self._look_at(queue, loop_time + max(free_in_ms, 0) / 1000 + 0.001)

    def revoked(self, owners: Set[str]) -> None:
        """Access tokens were revoked: wake the long-polls waiting under them, so they end
        (their claim checks the token) within the token table's refresh, not at the end of
        their wait. Rung for no queue: a bell that comes after is passed over to others,
        and the ones they were rung for before are passed on when they leave."""
        for owner in owners:
            for waiter in list(self._by_owner.get(owner, ())):
                self._ring(waiter)

    # ------------------------------------------------------------------------ probes

    def has_waiters(self, queue: str) -> bool:
        return queue in self._subscribed

    def idle(self, queue: str) -> int:
        """How many long-polls on ``queue`` are sleeping between claims."""
        return self._idle.get(queue, 0)

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
                   owner: str | None = None, group: Group = None,
                   claimant: Claimant | None = None) -> Iterator[Waiter]:
        names = tuple(dict.fromkeys(queues))
        waiter = Waiter(limit, filtered, owner, names, group, claimant)
        for q in names:
            _bump(self._subscribed, q, 1)
        self._reready(waiter)
        self._all[waiter] = None
        if owner is not None:
            self._by_owner.setdefault(owner, {})[waiter] = None
        try:
            yield waiter
        finally:
            self._set_idle(waiter, False)
            self._unready(waiter)
            self._unreserve(waiter)
            for q in names:
                _bump(self._subscribed, q, -1)
            self._all.pop(waiter, None)
            if owner is not None:
                _forget(self._by_owner, owner, waiter)

    def _unreserve(self, waiter: Waiter) -> None:
        if not waiter.reserved:
            return
        waiter.reserved = False
        for q in waiter.queues:
            _forget(self._reserved, q, waiter)

    def _reready(self, waiter: Waiter) -> None:
        """Put a waiter in its queues' ring order (last): a new one, or one a hand-off reserved
        and leased nothing to."""
        waiter.ready = True
        for q in waiter.queues:
            self._ready.setdefault(q, {}).setdefault(waiter.group, {})[waiter] = None
            _bump(self._ready_limits, q, waiter.limit)
            if waiter.idle:
                _bump(self._quiet, (q, waiter.group), 1)

    def _unready(self, waiter: Waiter) -> None:
        """Take a waiter out of its queues' ring order (it was rung, or it leaves)."""
        if not waiter.ready:
            return
        waiter.ready = False
        for q in waiter.queues:
            groups = self._ready.get(q)
            if groups is not None:
                _forget(groups, waiter.group, waiter)
                if not groups:
                    del self._ready[q]
            _bump(self._ready_limits, q, -waiter.limit)
            if waiter.idle:
                _bump(self._quiet, (q, waiter.group), -1)

    def _set_idle(self, waiter: Waiter, idle: bool) -> None:
        if waiter.idle == idle:
            return
        waiter.idle = idle
        delta = 1 if idle else -1
        for q in waiter.queues:
            _bump(self._idle, q, delta)
            if waiter.ready:
                _bump(self._quiet, (q, waiter.group), delta)

    def _ring(self, waiter: Waiter, queue: str | None = None, count: int | None = None) -> None:
        if queue is not None:
            waiter.rung_for[queue] = count
        self._unready(waiter)
        waiter.event.set()

    def _behind_quiet(self, waiter: Waiter) -> bool:
        """Whether each of its queues has an idle waiter that looked (or was itself behind
        one) and was not rung since, unfiltered or of the same types: a job this one could
        take would ring that one first, so looking would find nothing."""
        return all(self._quiet.get((q, None), 0) > 0
                   or (waiter.group is not None and self._quiet.get((q, waiter.group), 0) > 0)
                   for q in waiter.queues)

    def _wake(self, queue: str, count: int | None = 1, scout: bool = False) -> int | None:
        """Ring this process's waiters on ``queue`` for ``count`` new jobs (``None``: all);
        returns how many of them no idle waiter here covers (``None``: maybe all).

        Waiters already rung are not in the ring order: they will look anyway, and counting
        them would leave the new jobs to wait for a chain of full claims.

        ``scout``: the jobs were found by a reading, not just made, and may be of types that
        the type-filtered waiters do not take (why they still wait): ring one of each such
        group, counted for all of them, so that a full claim passes the rest on and one that
        finds nothing costs one claim, not one per job."""
        if len(self._generation) >= GENERATIONS_KEPT and queue not in self._generation:
            # Queue names come from clients. Forgetting is safe: generations only grow (a
            # process-wide counter), so a forgotten queue's next one is newer than any before.
            self._generation.clear()
        self._generation[queue] = next(self._ticks)
        wanted = count
        groups = self._ready.get(queue)
        if groups:
            for group, members in list(groups.items()):
                want = count
                if scout and group is not None and count is not None:
                    self._ring(next(iter(members)), queue, count)
                    continue
                while members and (want is None or want > 0):
                    waiter = next(iter(members))
                    self._ring(waiter, queue, None if want is None else min(want, waiter.limit))
                    if want is not None:
                        want -= waiter.limit
                if group is None:
                    wanted = want
        held = self._reserved.get(queue)
        if held and (wanted is None or wanted > 0):
            # Waiters a hand-off holds out of the ring order are awake for this bell once it is
            # settled: theirs to answer (they look then) or to pass on, as if it rang them.
            for waiter in list(held):
                if wanted is not None and wanted <= 0:
                    break
                share = None if wanted is None else min(wanted, waiter.limit)
                waiter.rung_for[queue] = add_counts(waiter.rung_for.get(queue, 0), share)
                if wanted is not None and waiter.group is None:
                    wanted -= waiter.limit
        return None if wanted is None else max(wanted, 0)

    def _heard(self, queue: str, count: int | None) -> None:
        """A bell from another process: its jobs may be delayed ones, which the waiters it
        rings do not see; the watcher reads the queue if they find nothing."""
        self._mark_unseen(queue)
        self._wake(queue, count)

    def _mark_unseen(self, queue: str) -> None:
        if len(self._unseen) >= NEXT_VISIBLE_KEEP:  # names come from clients: keep it bounded
            self._unseen.clear()  # what is forgotten, the next safety round reads
        self._unseen.add(queue)

    def _wake_all(self) -> None:
        """Notifications may have been missed (the listening connection was away, or another
        process greeted us): one waiter per queue looks at once, and the watcher reads every
        queue with waiters and rings as many as there are jobs."""
        loop_time = _loop_time()
        for q in list(self._ready):
            self._mark_unseen(q)
            self._wake(q, 1)
            if loop_time is not None:
                self._look_at(q, loop_time)

    def _pass_on(self, waiter: Waiter, owed: dict[str, int | None]) -> None:
        """Hand the jobs of bells this claim will not answer to other waiters (here or, through
        NOTIFY, in another process): as many as we were counted for (``None``: everyone)."""
        if owed:
            self._ring(waiter)  # out of the ring order, so the bell goes to someone else
            self.publish(owed)

    # ------------------------------------------------------------------------ the watcher

    def _looked(self, waiter: Waiter) -> None:
        """A take found nothing and the waiter is about to sleep: have the watcher read a
        queue now if what it knows of that queue may be old (nobody waited there lately) or a
        bell announced jobs a take cannot see yet (from another process, or not counted)."""
        now = asyncio.get_running_loop().time()
        for q in waiter.queues:
            if q in self._unseen or (self._idle.get(q, 0) == 0
                                     and self._read_at.get(q, -math.inf) < now - NEXT_VISIBLE_TTL_S):
                self._unseen.discard(q)
                self._look_at(q, now)

    def _look_at(self, queue: str, at: float) -> None:
        """Have the watcher read ``queue`` at loop time ``at`` (or earlier)."""
        if at < self._due.get(queue, math.inf):
            self._due[queue] = at
            self._poke.set()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        next_round = loop.time() + SAFETY_RECHECK_S
        while True:
            now = loop.time()
            soonest = min(next_round, min(self._due.values(), default=math.inf))
            if soonest > now:
                self._poke.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(soonest - now):
                        await self._poke.wait()
                continue
            queues = {q for q, at in self._due.items() if at <= now}
            for q in queues:
                del self._due[q]
            if next_round <= now:
                queues.update(self._ready)
                next_round = now + SAFETY_RECHECK_S
            # Only where somebody waits (or is being handed a job, and then answers what is
            # found): the others will ask when they look.
            names = sorted(q for q in queues if q in self._ready or q in self._reserved)
            if not names:
                continue
            try:
                await self.read(names)
            except Exception as exc:  # the database is away: the next round tries again
                log.warning("long-poll wake check failed: %s", exc)

    async def read(self, queues: list[str]) -> None:
        """One reading of ``queues``: ring as many of their waiters as jobs could be claimed
        now, and look again when the next delayed job is due or a full max_running holds
        visible jobs back."""
        caps = [min(max(self._ready_limits.get(q, 0), 1), CHECK_COUNT_MAX) for q in queues]
        rows = await self._db.fetch(Q.QueueWakeCheck, {"queues": queues, "caps": caps})
        self.readings += 1
        loop = asyncio.get_running_loop()
        now, wall = loop.time(), datetime.now(UTC)
        if len(self._read_at) >= NEXT_VISIBLE_KEEP:  # keys come from clients: keep it bounded
            self._read_at.clear()
        for q in queues:
            self._read_at[q] = now
        for row in rows:
            queue, ready, visible, nxt, free_in_ms = records.wake_reading(row)
            if ready > 0:
                self._wake(queue, ready, scout=True)
            elif visible > 0 and free_in_ms is not None:
                self.paced(queue, free_in_ms)  # a full rate_limit window: its timer, no polling
            elif visible > 0:
                self._look_at(queue, now + BLOCKED_RECHECK_S)
            if nxt is not None:
                until = (nxt - wall).total_seconds()
                if until <= LOOKAHEAD_S:
                    self._look_at(queue, now + max(until, 0.0) + 0.001)


def _loop_time() -> float | None:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # called outside a loop (a test driving the board by hand)
        return None


def _merged(a: dict[str, int | None], b: dict[str, int | None]) -> dict[str, int | None]:
    out = dict(a)
    for q, n in b.items():
        out[q] = add_counts(out.get(q, 0), n)
    return out
