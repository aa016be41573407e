"""The worker runner: claim → run the handler → ack or fail, with heartbeats and shutdown.

One asyncio loop does all the talking to the service, through two ``AsyncClient``s: one
for claims, one for reports (acks, fails, heartbeats), so a report never waits behind a
long-poll for a connection and a claim never waits behind a report.

- the claim loop keeps one long-poll outstanding whenever it holds fewer than
  ``concurrency + prefetch`` jobs; it never waits for acks (a job whose handler has
  returned no longer takes a slot) and backs off with jitter when the service cannot be
  reached;
- a claimed job starts in the same loop turn that decoded its lease (a sync handler is
  handed to the thread pool, an async one gets its task) before the claim loop asks again;
  jobs beyond ``concurrency`` wait, prefetched, and the next one starts in the turn a
  handler returns;
- ``async def`` handlers run on the loop, each in its own task; plain functions run in a
  thread pool with no task of their own: the threads' outcomes come back to the loop in
  batches, as callbacks, and go straight to the acker (what a task and two futures per job
  did cost about a third of the worker's CPU in a drain of no-op jobs);
- every handler runs in its own copy of the context ``run_async`` was called in (context
  variables set before it are seen; what one handler sets is not seen by the next);
- one heartbeat task extends every held lease, prefetched ones too, at a third of its
  length (the contract has no batch heartbeat, so the calls go out concurrently);
- one acker task batches acks: whatever finishes while an ack is in flight goes out
  together in the next ``POST /v1/leases/ack``, and each answer is handed to the job's
  callback; a releaser does the same for the jobs a stop hands back
  (``POST /v1/leases/release``); a fail goes out from a task of its own;
- one task reports the worker process itself (``POST /v1/workers/{id}/beat``) at start,
  every ``WORKER_BEAT_S`` and as it stops, so the service lists it even while idle; a beat
  that fails is logged at DEBUG and forgotten (an older service answers 404).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import os
import random
import secrets
import signal
import socket
import threading
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final, Generic, TypeVar

import httpx

from jobq.client import (
    APIError,
    AsyncClient,
    Forbidden,
    Job,
    Lease,
    LeaseLost,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RetryableError,
    ServerError,
    TransportError,
    Unauthorized,
)
from jobq.client._base import check_url
from jobq.limits import MAX_BATCH, MAX_WAIT_MS
from jobq.worker._control import Discard, Retry
from jobq.worker._threads import DaemonThreadPool

log = logging.getLogger("jobq.worker")

Handler = Callable[[Job], Any]
"""A job handler: gets the ``Job``, returns (or, if ``async def``, resolves to) its result."""

T = TypeVar("T")
_Item = TypeVar("_Item")  # what a _Batcher sends: an ack (lease_id, result) or a lease_id

DEFAULT_CONCURRENCY: Final = 10
DEFAULT_WAIT_MS: Final = 10_000
# Jobs claimed ahead of free slots; see Worker's docstring for the trade-off.
DEFAULT_PREFETCH: Final = 0
# 25 s, as Sidekiq's: inside the 30 s an orchestrator (Kubernetes' default
# terminationGracePeriodSeconds) allows before SIGKILL, with time left to release what did not
# finish; a worker killed before it releases spends those jobs' attempts.
DEFAULT_GRACE_PERIOD_S: Final = 25.0
# Beat at a third of the lease: two beats can fail before the lease runs out.
HEARTBEAT_FRACTION: Final = 1 / 3
# Without lease_ms the lease length is read off the first locked_until; this floor keeps a
# skewed clock from turning that into a heartbeat storm.
MIN_LEASE_ESTIMATE_S: Final = 1.0
FALLBACK_LEASE_S: Final = 30.0
# After the grace period, the acks and fails still owed get this long before we exit.
FINAL_REPORT_S: Final = 10.0
# Claim and report retries when the service is unreachable: exponential, full jitter.
BACKOFF_FIRST_S: Final = 0.5
BACKOFF_MAX_S: Final = 30.0
# The code of a claim refused because the service holds its cap of waiting claims.
LONG_POLLS_FULL: Final = "too_many_long_polls"
# A claim that comes back empty sooner than this (no long-poll: wait_ms=0, or an older
# service) is followed by a pause, so an idle worker never spins.
MIN_EMPTY_POLL_S: Final = 0.25
# Error texts are stored with the job; keep them well under the service's body limit.
MAX_ERROR_CHARS: Final = 16_000
# The process's own beat (POST /v1/workers/{id}/beat): its rhythm, and how long one may take
# before it is dropped (a beat never holds up a stop).
WORKER_BEAT_S: Final = 10.0
WORKER_BEAT_TIMEOUT_S: Final = 5.0
# A service that predates release (404 or 405 to it) gets the old hand-back: a fail with
# retry_in_ms 0, which spends the attempt. These are its error texts.
SHUTDOWN_ERROR: Final = (
    "worker shut down before the job finished; handed back as a failed attempt "
    "(this service cannot release)"
)
UNSTARTED_ERROR: Final = (
    "worker shut down before the prefetched job started; handed back as a failed attempt "
    "(this service cannot release)"
)
# What the releaser answers when the service has no release endpoint.
NO_RELEASE: Final = "no_release"


@dataclass(frozen=True)
class _Ack:
    result: Any


@dataclass(frozen=True)
class _Fail:
    error: str
    retry: bool | None = None
    retry_in_ms: int | None = None


@dataclass(frozen=True)
class _Release:
    """Hand the job back without spending its attempt (the worker is stopping)."""

    why: str  # for the log line: "released (shutdown)"
    fallback_error: str  # the fail sent instead to a service that cannot release


@dataclass(eq=False, slots=True)
class _Running:
    """A job this worker holds a lease on, from claim until its ack or fail is answered.

    No task per job for a plain-function handler: its thread's outcome comes back to the
    loop in a callback (``_thread_returned``), and an ack is a callback of the acker too
    (``_acked``). An ``async def`` handler runs in its own task; a fail (and the old
    service's hand-back) is sent from a task of its own (``report``).
    """

    lease: Lease
    is_async: bool
    lease_s: float
    next_beat: float  # loop time
    task: asyncio.Task[None] | None = None  # an async handler's, once started
    report: asyncio.Task[None] | None = None  # the task sending its fail, if it fails
    beating: bool = False
    reporting: bool = False  # the handler is done; its ack or fail is under way
    lost: bool = False  # the service says the lease is gone: never ack or fail it
    abandoned: bool = False  # the grace period ran out: release it
    started: float | None = None  # loop time the handler started (None while prefetched)
    ran_s: float | None = None  # how long the handler ran, once it returned (or was given up)

    def duration(self, now: float) -> float:
        """The handler's run time, or so far when it has not returned: for the log."""
        if self.ran_s is not None:
            return self.ran_s
        return 0.0 if self.started is None else now - self.started

    def tasks(self) -> list[asyncio.Task[None]]:
        return [t for t in (self.task, self.report) if t is not None]


@dataclass
class _Backoff:
    failures: int = 0

    def next(self, retry_after: float | None = None) -> float:
        self.failures += 1
        if retry_after is not None:
            return retry_after * random.uniform(1.0, 1.1)
        ceiling = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (self.failures - 1))
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0


class _GaveUp(Exception):
    """A report could not reach the service before the shutdown deadline."""


_TRANSIENT = (TransportError, RetryableError, ServerError)
# Results JSON takes as they are (exact types: a subclass may encode otherwise).
_PLAIN: Final = (str, int, bool)
# What the acker answers for a lease whose job it had already completed (a lease_lost with
# already_completed: the retry of an ack whose answer was lost), as opposed to a lost lease.
ALREADY_STORED = "already_completed"
# The token is missing, unknown, revoked, or its role or queues do not allow the call: no
# retry can change that, so the worker stops rather than ask again and again.
_REFUSED = (Unauthorized, Forbidden)


def describe(exc: BaseException) -> str:
    """The ``error`` text for a failed attempt: the message first, then the traceback."""
    message = f"{type(exc).__qualname__}: {exc}"
    text = f"{message}\n\n{''.join(traceback.format_exception(exc))}"
    return truncate(text)


def truncate(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Keep the head (the message) and the tail (where it was raised) of a long text."""
    if len(text) <= limit:
        return text
    marker = f"\n… {len(text) - limit} characters cut …\n"
    head = limit // 4
    return text[:head] + marker + text[-(limit - head - len(marker)) :]


def _is_async(fn: Callable[..., Any]) -> bool:
    # An instance whose __call__ is `async def` is an async handler too.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


class Worker:
    """Runs handlers for jobs claimed from ``queues``.

    ``handlers`` maps a job type to a function. The function gets the ``Job`` (``id``,
    ``queue``, ``type``, ``payload``, ``attempt``, ``max_attempts``, ...) and its return
    value, which must be JSON-serialisable, becomes the job's ``result``. Delivery is at
    least once: pass ``job.id`` to downstream systems as their idempotency key, so a
    retried job does not charge a card or send an e-mail twice.

    - ``async def`` handlers run on the event loop, plain functions in a thread pool of
      ``concurrency`` threads. At most ``concurrency`` jobs run at once.
    - Raising ``Retry(in_ms=...)`` retries after that delay; ``Discard(reason)`` sends
      the job dead; any other exception fails the attempt with its message and traceback
      and the queue's backoff applies.
    - If the lease is lost (the job was cancelled, or the lease expired and another worker
      took it), an async handler is cancelled and a sync handler's result is dropped.
    - Only job types in ``handlers`` are claimed.
    - ``prefetch`` (default 0) claims up to that many jobs beyond the free slots, so the
      next job is already here when a handler returns and a claim's round trip overlaps
      the work. Prefetched jobs are leased (and heartbeated) but wait; a busy worker
      holding them keeps them from an idle one, so keep it small (about the number of jobs
      one slot finishes during a round trip to the service). On shutdown, prefetched jobs
      not yet started are released at once (``POST /v1/leases/release``: pending again,
      the attempt not counted) for another worker to take.

    ``url_source`` says what chose ``url`` (``jobq worker`` passes ``"--url"`` or
    ``"JOBQ_URL"``); the start line and every connection error in the log name both;
    ``queues_source``, when given, is said after the queues in the start line (``jobq
    worker`` says ``no --queues or JOBQ_QUEUES given``). Each job's outcome is one INFO line: id, type,
    attempt, what happened and how long it ran.

    The worker reports itself to the service (``POST /v1/workers/{worker_id}/beat``: host,
    pid, concurrency, queues, jobs in flight, start time, state) at start, every 10 s and
    as it stops, so ``GET /v1/workers`` lists it even while it holds no job.

    Without ``lease_ms`` the queue's lease length applies; the heartbeat rhythm is then read
    off the first ``locked_until``, which assumes the clocks agree to within seconds.

    ``token`` is the access token (a ``worker`` token whose queues cover ``queues``);
    without it ``JOBQ_TOKEN`` from the environment is used. An answer ``401`` or ``403`` to
    any call (a wrong or revoked token, another role) stops the worker gracefully, and
    ``run``/``run_async`` raise that ``Unauthorized`` or ``Forbidden``.
    """

    def __init__(
        self,
        url: str,
        *,
        queues: Sequence[str],
        handlers: Mapping[str, Handler],
        concurrency: int = DEFAULT_CONCURRENCY,
        lease_ms: int | None = None,
        token: str | None = None,
        worker_id: str | None = None,
        grace_period: float = DEFAULT_GRACE_PERIOD_S,
        wait_ms: int = DEFAULT_WAIT_MS,
        transport: httpx.AsyncBaseTransport | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        url_source: str = "the url argument",
        queues_source: str | None = None,
    ) -> None:
        check_url(url)  # ValueError now, not a transport error at the first claim
        if isinstance(queues, str):
            queues = [queues]
        if not queues:
            raise ValueError("queues: give at least one queue name")
        if not handlers:
            raise ValueError("handlers: give at least one job type and its handler")
        for job_type, fn in handlers.items():
            if not callable(fn):
                raise TypeError(f"handlers[{job_type!r}] is not callable: {fn!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if lease_ms is not None and lease_ms < 1:
            raise ValueError(f"lease_ms must be positive, not {lease_ms}")
        if not 0 <= wait_ms <= MAX_WAIT_MS:
            raise ValueError(f"wait_ms must be between 0 and {MAX_WAIT_MS}, not {wait_ms}")
        if not 0 <= prefetch <= MAX_BATCH:
            raise ValueError(f"prefetch must be between 0 and {MAX_BATCH}, not {prefetch}")
        if grace_period < 0:
            raise ValueError(f"grace_period must not be negative, not {grace_period}")
        self.url = url
        self.url_source = url_source
        self.queues_source = queues_source
        self.queues = list(queues)
        self.handlers = dict(handlers)
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.lease_ms = lease_ms
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.grace_period = grace_period
        self.wait_ms = wait_ms
        self._token = token
        self._transport = transport
        self._is_async = {job_type: _is_async(fn) for job_type, fn in self.handlers.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._fatal: APIError | None = None

    # Running and stopping

    def run(self) -> None:
        """Run until SIGTERM or SIGINT, then shut down gracefully (see ``run_async``).

        A second signal exits the process at once with status 128 + signal number
        (130 for SIGINT, 143 for SIGTERM); leases still held then expire on the service.
        """
        asyncio.run(self.run_async(handle_signals=True))

    async def run_async(self, *, handle_signals: bool = False) -> None:
        """Work until ``stop()`` (or, with ``handle_signals``, SIGTERM/SIGINT).

        Stopping aborts the claim in flight, releases prefetched jobs, gives running
        jobs ``grace_period`` seconds to finish and be acked, then releases the rest
        (pending again, the attempt not counted) so another worker takes them at once.
        Returns normally after a graceful stop; re-raises the
        ``APIError`` if the service refused to hand out work (bad token, forbidden queue).
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._beats_changed = asyncio.Event()
        # Every lease held, from claim until its ack or fail is answered.
        self._running: dict[str, _Running] = {}
        # Claimed beyond the free slots, in claim order; each is also in _running.
        self._ready: deque[_Running] = deque()
        self._active = 0  # handlers not yet returned: what concurrency bounds
        self._claiming = False  # the claim loop is awaiting a claim (safe to cancel)
        self._claim_aborted = False
        self._claimer: asyncio.Task[None] | None = None
        self._beat_tasks: set[asyncio.Task[None]] = set()
        self._beat_wake = float("inf")  # loop time the heartbeat loop wakes up next, at the latest
        self._report_deadline = float("inf")
        self._signals = 0
        self._fatal: APIError | None = None
        if self._stop_requested:  # stop() came before the loop existed
            self._stop.set()
            self._stop_requested = False
        installed = self._install_signal_handlers() if handle_signals else []
        self._pool = DaemonThreadPool(self.concurrency, self._thread_returned)
        # Set when the last lease held is settled: what a stop waits for.
        self._emptied = asyncio.Event()
        # Each handler runs in a copy of this: the caller's context vars, as asyncio.to_thread
        # and create_task give them.
        self._context = contextvars.copy_context()
        self._acker = _Acker(self)
        self._releaser = _Releaser(self)
        self._started_at = datetime.now(UTC)
        log.info(
            "worker %s: serving queues=%s%s at %s (from %s) types=%s concurrency=%d prefetch=%d",
            self.worker_id,
            ",".join(self.queues),
            f" ({self.queues_source})" if self.queues_source else "",
            self.url,
            self.url_source,
            ",".join(sorted(self.handlers)),
            self.concurrency,
            self.prefetch,
        )
        try:
            # Two clients, two sets of connections: claims and reports never queue together.
            async with (
                AsyncClient(self.url, token=self._token, transport=self._transport,
                            url_source=self.url_source) as claims,
                AsyncClient(self.url, token=self._token, transport=self._transport,
                            url_source=self.url_source) as reports,
            ):
                self._client = claims
                self._reports = reports
                beats = asyncio.create_task(self._worker_beats(), name="jobq-worker-beats")
                helpers = [
                    asyncio.create_task(self._heartbeat_loop(), name="jobq-heartbeats"),
                    asyncio.create_task(self._acker.run(), name="jobq-acker"),
                    asyncio.create_task(self._releaser.run(), name="jobq-releaser"),
                    asyncio.create_task(self._watch_stop(), name="jobq-stop"),
                    beats,
                ]
                try:
                    self._claimer = asyncio.create_task(self._claim_loop(), name="jobq-claims")
                    await self._claimer
                    await self._drain()
                    # After the "stopping" beat, so the last word the service gets is this.
                    await asyncio.wait([beats], timeout=WORKER_BEAT_TIMEOUT_S)
                    await self._beat_worker("stopped")
                finally:
                    # Nothing more may start (prefetched leases expire on the service).
                    self._ready.clear()
                    # Normally only the helpers are left; after a cancel, the jobs too.
                    jobs = [t for r in self._running.values() for t in r.tasks()]
                    leftovers = [*helpers, *self._beat_tasks, *jobs]
                    for task in leftovers:
                        task.cancel()
                    await asyncio.gather(*leftovers, return_exceptions=True)
        finally:
            self._pool.shutdown()
            for sig in installed:
                loop.remove_signal_handler(sig)
            self._loop = None
        log.info("worker %s: stopped", self.worker_id)
        if self._fatal is not None:
            raise self._fatal

    @property
    def refusal(self) -> APIError | None:
        """The refusal that stopped the worker (``Unauthorized``, ``Forbidden``, or another
        answer no retry changes), logged once as an ERROR when it came; else None."""
        return self._fatal

    def stop(self) -> None:
        """Begin a graceful shutdown. Safe to call from any thread."""
        loop = self._loop
        if loop is None:
            self._stop_requested = True
            return
        if _on_loop_thread(loop):
            self._stop.set()
        else:
            loop.call_soon_threadsafe(self._stop.set)

    def _install_signal_handlers(self) -> list[signal.Signals]:
        if threading.current_thread() is not threading.main_thread():
            log.warning("not on the main thread: SIGTERM/SIGINT handlers not installed")
            return []
        loop = self._loop
        assert loop is not None
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except NotImplementedError:  # Windows event loops have no add_signal_handler
                signal.signal(sig, lambda s, _f: loop.call_soon_threadsafe(self._on_signal, s))
        return installed

    def _on_signal(self, sig: int) -> None:
        self._signals += 1
        name = signal.Signals(sig).name
        if self._signals == 1:
            log.warning(
                "%s: stopping; running jobs get %gs to finish (send it again to exit at once)",
                name,
                self.grace_period,
            )
            self._stop.set()
            return
        status = 128 + sig
        log.critical(
            "second %s: exiting now with status %d; %s left to expire on the service",
            name,
            status,
            _count(len(self._running), "lease"),
        )
        logging.shutdown()
        # At once means at once: no await, no thread join (a sync handler may be stuck).
        os._exit(status)

    # Claiming

    async def _claim_loop(self) -> None:
        assert self._loop is not None
        backoff = _Backoff()
        capped = False  # the last claim was refused for the service's long-poll cap
        types = sorted(self.handlers)
        most = self.concurrency + self.prefetch
        while not self._stop.is_set():
            # Jobs whose handler returned do not count: their ack is the acker's business.
            want = min(MAX_BATCH, most - self._active - len(self._ready))
            if want <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()  # _watch_stop sets it too
                continue
            started = self._loop.time()
            try:
                self._claiming = True
                try:
                    leases = await self._client.claim(
                        self.queues,
                        worker_id=self.worker_id,
                        types=types,
                        limit=want,
                        lease_ms=self.lease_ms,
                        wait_ms=self.wait_ms,
                    )
                finally:
                    self._claiming = False
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if self._claim_aborted and current is not None and current.uncancel() == 0:
                    return  # _watch_stop aborted the long-poll
                raise
            except _TRANSIENT as exc:
                if isinstance(exc, RetryableError) and exc.code == LONG_POLLS_FULL:
                    # Not a failure: the service holds as many waiting claims as it may and
                    # had no job for this one. Ask again after Retry-After, without a warning
                    # a second from each of a fleet's workers; the first says it once.
                    pause = (exc.retry_after or BACKOFF_FIRST_S) * random.uniform(1.0, 1.1)
                    (log.debug if capped else log.info)(
                        "the service holds its limit of waiting claims; claiming again in "
                        "%.1fs (and so on, quietly, until it has room)", pause)
                    capped = True
                    await self._pause(pause)
                    continue
                retry_after = exc.retry_after if isinstance(exc, RetryableError) else None
                pause = backoff.next(retry_after)
                log.warning("claim failed (%s); retrying in %.1fs", exc, pause)
                await self._pause(pause)
                continue
            except APIError as exc:
                # 401, 403, 422...: asking again will not help. Finish what we hold, then stop.
                self._refused("claim", exc)
                return
            except Exception:
                # A bug or a surprising answer must not kill a worker that holds leases.
                pause = backoff.next()
                log.exception("claim crashed; retrying in %.1fs", pause)
                await self._pause(pause)
                continue
            backoff.reset()
            capped = False
            # In the turn that decoded them: a claim answered just as the stop came is
            # kept too (the drain runs it).
            if leases:
                self._take_all(leases)
            elapsed = self._loop.time() - started
            if not leases and elapsed < MIN_EMPTY_POLL_S:
                await self._pause((MIN_EMPTY_POLL_S - elapsed) * random.uniform(1.0, 1.5))

    async def _watch_stop(self) -> None:
        """On stop: abort the long-poll in flight (not an answer being handled)."""
        await self._stop.wait()
        self._slot_freed.set()
        claimer = self._claimer
        if self._claiming and claimer is not None and not claimer.done():
            self._claim_aborted = True
            claimer.cancel()

    def _refused(self, call: str, exc: APIError) -> None:
        """The service refused a call for good: stop (once), and let run_async raise it."""
        if self._fatal is None:
            self._fatal = exc
            log.error("%s refused by the service (%s)%s; stopping", call, exc, _hint(exc))
        self._stop.set()

    async def _pause(self, seconds: float) -> None:
        await _wait_event(self._stop, seconds)

    def _take_all(self, leases: list[Lease]) -> None:
        """Hold claimed leases: start each now if a slot is free, else keep it prefetched."""
        assert self._loop is not None
        loop_now = self._loop.time()
        debug = log.isEnabledFor(logging.DEBUG)
        # The leases of one claim share their locked_until (one parsed datetime, see
        # jobq.client._models): their length is worked out once.
        locked_until: datetime | None | bool = False
        lease_s = 0.0
        beat_wake = self._beat_wake
        for lease in leases:
            if lease.locked_until is not locked_until or self.lease_ms is not None:
                locked_until = lease.locked_until
                lease_s = self._lease_length(lease)
            job = lease.job
            r = _Running(lease, self._is_async.get(job.type, False), lease_s,
                         loop_now + lease_s * HEARTBEAT_FRACTION)
            self._running[lease.lease_id] = r
            if r.next_beat < beat_wake:  # else the heartbeat loop wakes in time for it
                self._beats_changed.set()
            if debug:
                log.debug("job %s (%s): claimed, attempt %d", job.id, job.type, job.attempt)
            if self._active < self.concurrency:
                self._start(r)
            else:
                self._ready.append(r)

    def _start(self, r: _Running) -> None:
        assert self._loop is not None
        self._active += 1
        r.started = self._loop.time()
        job = r.lease.job
        handler = self.handlers.get(job.type)
        if handler is not None and not r.is_async:
            # Into the thread pool now; its outcome comes back in _thread_returned.
            self._pool.submit(handler, job, r, self._context.copy())
        else:
            # Each job in a copy of the worker's context, as a sync handler's thread is:
            # what one handler sets is not seen by the next.
            r.task = asyncio.create_task(
                self._process(r), name=f"jobq-job-{job.id}", context=self._context.copy()
            )

    def _start_prefetched(self) -> None:
        while self._ready and self._active < self.concurrency:
            self._start(self._ready.popleft())

    def _lease_length(self, lease: Lease) -> float:
        if self.lease_ms is not None:
            return self.lease_ms / 1000
        if lease.locked_until is None:
            return FALLBACK_LEASE_S
        remaining = (lease.locked_until - datetime.now(UTC)).total_seconds()
        return max(MIN_LEASE_ESTIMATE_S, remaining)

    # Running one job

    async def _process(self, r: _Running) -> None:
        """An async handler's task (or the failure of a job type without a handler)."""
        job = r.lease.job
        handler = self.handlers.get(job.type)
        outcome: _Ack | _Fail | _Release
        try:
            if handler is None:  # the types filter should make this impossible
                outcome = _Fail(f"this worker has no handler for job type {job.type!r}")
            else:
                try:
                    value = await handler(job)
                # The reason is the job's error word for word, as the JavaScript and Go
                # workers send it (see _failure).
                except Exception as exc:
                    outcome = _failure(exc)
                else:
                    outcome = _judge(job, value)
        except asyncio.CancelledError:
            if not (r.lost or r.abandoned):
                self._torn_down(r)  # the worker itself is being torn down
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            outcome = _Release("shutdown", SHUTDOWN_ERROR)
        except BaseException:  # SystemExit, KeyboardInterrupt: on their way out
            self._torn_down(r)
            raise
        self._handler_done(r, outcome)

    def _torn_down(self, r: _Running) -> None:
        if r.ran_s is None:
            self._returned(r)
        self._forget(r)

    def _thread_returned(self, r: _Running, ok: bool, value: Any) -> None:
        """A sync handler's outcome, back on the loop (the pool's callback)."""
        if r.ran_s is not None:
            return  # given up when the grace period ran out, and released: dropped
        if not ok:
            outcome: _Ack | _Fail | _Release = _failure(value)
        elif value is None or type(value) in _PLAIN:
            outcome = _Ack(value)  # JSON as it is: no trial encoding (most handlers return None)
        else:
            outcome = _judge(r.lease.job, value)
        self._handler_done(r, outcome)

    def _give_up_thread(self, r: _Running) -> None:
        """The grace period ran out on a sync handler: its thread cannot be stopped, so its
        job is released now and what the thread returns later is dropped."""
        if r.ran_s is None:  # else it returned meanwhile and reports as usual
            self._handler_done(r, _Release("shutdown", SHUTDOWN_ERROR))

    def _returned(self, r: _Running) -> None:
        """The handler is done: its slot is free before its ack, so the next prefetched job
        starts now and the claim loop may ask again."""
        assert self._loop is not None and r.started is not None
        r.ran_s = self._loop.time() - r.started
        self._active -= 1
        if self._ready:
            self._start_prefetched()
        self._slot_freed.set()

    def _handler_done(self, r: _Running, outcome: _Ack | _Fail | _Release) -> None:
        if r.ran_s is None:
            self._returned(r)
        job = r.lease.job
        if r.lost:
            log.debug("job %s: lease was lost; its outcome is dropped", job.id)
            self._forget(r)
            return
        r.reporting = True
        kind = type(outcome)
        if kind is _Ack:
            self._acker.add((r.lease.lease_id, outcome.result), partial(self._acked, r))  # type: ignore[union-attr]
        elif kind is _Release:
            self._releaser.add(r.lease.lease_id, partial(self._released, r, outcome))
        else:
            self._send_fail_soon(r, outcome)  # type: ignore[arg-type]

    def _forget(self, r: _Running) -> None:
        """The job is settled (or never will be, by us): drop its lease.

        No wake for the heartbeat loop: a lease gone needs no beat, and waking it to find
        that out costs a pass over every lease held, per job."""
        running = self._running
        running.pop(r.lease.lease_id, None)
        if not running:
            self._emptied.set()

    def _send_fail_soon(self, r: _Running, failure: _Fail) -> None:
        r.report = asyncio.create_task(self._fail_task(r, failure), name=f"jobq-fail-{r.lease.job.id}")

    async def _fail_task(self, r: _Running, failure: _Fail) -> None:
        try:
            await self._send_fail(r, failure)
        except Exception:
            log.exception("job %s: reporting its outcome failed; the lease will expire", r.lease.job.id)
        finally:
            self._forget(r)

    def _released(self, r: _Running, release: _Release, answer: str | BaseException) -> None:
        """The releaser's answer for one job."""
        job = r.lease.job
        try:
            if isinstance(answer, BaseException):
                raise answer
            if answer == "ok":
                self._outcome(r, f"released ({release.why})")
            elif answer == NO_RELEASE:
                self._send_fail_soon(r, _Fail(release.fallback_error, retry_in_ms=0))
                return  # that task forgets the job once the fail is answered
            else:
                log.warning("job %s: release answered %s; nothing more to do", job.id, answer)
        except _REFUSED as exc:
            self._refused(f"release of job {job.id}", exc)
        except _GaveUp:
            log.error("job %s: could not release before exit; the lease will expire", job.id)
        except APIError as exc:
            log.error("job %s: the service refused the release: %s", job.id, exc)
        except Exception:
            log.exception("job %s: reporting its outcome failed; the lease will expire", job.id)
        self._forget(r)

    def _acked(self, r: _Running, answer: str | BaseException) -> None:
        """The acker's answer for one job; a result the service refuses is failed instead."""
        if answer == "ok":  # the common case first: one comparison, then the log line
            self._outcome(r, "completed")
            self._forget(r)
            return
        job = r.lease.job
        failure: _Fail | None = None
        try:
            if isinstance(answer, BaseException):
                raise answer
            if answer == ALREADY_STORED:
                # The ack was sent again after its answer was lost; the first one committed.
                log.info("job %s: acked (a retried ack: the first one had stored the result)", job.id)
            else:
                log.warning("job %s: ack answered %s; the result is dropped", job.id, answer)
        except PayloadTooLarge as exc:
            failure = _Fail(f"the service refused the result as too large: {exc}", retry=False)
        except _REFUSED as exc:
            # A fail would be refused alike: the lease expires and the job runs again.
            self._refused(f"ack of job {job.id}", exc)
        except _GaveUp:
            log.error("job %s: could not ack before exit; the lease will expire", job.id)
        except APIError as exc:
            failure = _Fail(f"the service refused the ack: {exc}", retry=False)
        except Exception:
            log.exception("job %s: reporting its outcome failed; the lease will expire", job.id)
        if failure is None:
            self._forget(r)
        else:
            self._send_fail_soon(r, failure)

    async def _send_fail(self, r: _Running, failure: _Fail) -> None:
        job = r.lease.job
        try:
            answered = await self._retrying(
                lambda: self._reports.fail(
                    r.lease.lease_id,
                    failure.error,
                    retry=failure.retry,
                    retry_in_ms=failure.retry_in_ms,
                )
            )
        except (LeaseLost, NotFound) as exc:
            log.warning("job %s: fail answered %s; nothing more to do", job.id, exc.code)
        except _REFUSED as exc:
            self._refused(f"failure report of job {job.id}", exc)
        except _GaveUp:
            log.error("job %s: could not report the failure before exit", job.id)
        except APIError as exc:
            log.error("job %s: the service refused the failure report: %s", job.id, exc)
        else:
            self._outcome(r, _fail_outcome(failure, answered), failure.error)

    def _outcome(self, r: _Running, what: str, error: str | None = None) -> None:
        """The one INFO line per job outcome an operator reads: id, type, attempt, time."""
        if not log.isEnabledFor(logging.INFO):
            return
        assert self._loop is not None
        job = r.lease.job
        reason = f": {_first_line(error)}" if error else ""
        log.info(
            "job %s (%s) attempt %d/%s: %s (ran %.3fs)%s",
            job.id,
            job.type,
            job.attempt,
            job.max_attempts or "-",
            what,
            r.duration(self._loop.time()),
            reason,
        )


    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """Retry a report through outages. Safe: the lease id fences every retry, so a
        duplicate is answered ``lease_lost`` and changes nothing."""
        assert self._loop is not None
        backoff = _Backoff()
        while True:
            try:
                return await call()
            except _TRANSIENT as exc:
                retry_after = exc.retry_after if isinstance(exc, RetryableError) else None
                pause = backoff.next(retry_after)
                if self._loop.time() + pause > self._report_deadline:
                    raise _GaveUp from exc
                log.warning("report failed (%s); retrying in %.1fs", exc, pause)
                await asyncio.sleep(pause)

    # Heartbeats

    async def _heartbeat_loop(self) -> None:
        assert self._loop is not None
        while True:
            now = self._loop.time()
            waiting = [r for r in self._running.values() if not (r.lost or r.beating)]
            for r in waiting:
                if r.next_beat <= now:
                    r.beating = True
                    task = asyncio.create_task(self._beat(r))
                    self._beat_tasks.add(task)
                    task.add_done_callback(self._beat_tasks.discard)
            # A lease whose beat was refused (next_beat = inf) waits for nothing.
            upcoming = [r.next_beat for r in waiting if not r.beating and r.next_beat != float("inf")]
            self._beats_changed.clear()
            timeout = max(0.0, min(upcoming) - now) if upcoming else None
            self._beat_wake = float("inf") if timeout is None else now + timeout
            await _wait_event(self._beats_changed, timeout)

    async def _beat(self, r: _Running) -> None:
        assert self._loop is not None
        job = r.lease.job
        try:
            await self._reports.heartbeat(r.lease.lease_id, extend_ms=self.lease_ms)
            r.next_beat = self._loop.time() + r.lease_s * HEARTBEAT_FRACTION
        except (LeaseLost, NotFound) as exc:
            self._lose(r, exc)
        except _REFUSED as exc:
            # No more beats for this lease: asking again would be refused alike.
            r.next_beat = float("inf")
            self._refused(f"heartbeat of job {job.id}", exc)
        except Exception as exc:
            # The lease may well still be held: try again soon, well before it runs out.
            retry_in = min(2.0, r.lease_s * HEARTBEAT_FRACTION / 2) * random.uniform(0.8, 1.2)
            log.warning("job %s: heartbeat failed (%s); retrying in %.1fs", job.id, exc, retry_in)
            r.next_beat = self._loop.time() + retry_in
        finally:
            r.beating = False
            self._beats_changed.set()

    # The worker process's own beat

    async def _worker_beats(self) -> None:
        """Beat at start and every WORKER_BEAT_S while running; "stopping" once the stop
        begins. Its own task: a slow or failing beat holds up no job."""
        await self._beat_worker("running")
        while not self._stop.is_set():
            await _wait_event(self._stop, WORKER_BEAT_S)
            if not self._stop.is_set():
                await self._beat_worker("running")
        await self._beat_worker("stopping")

    async def _beat_worker(self, state: str) -> None:
        try:
            async with asyncio.timeout(WORKER_BEAT_TIMEOUT_S):
                await self._reports.worker_beat(
                    self.worker_id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    concurrency=self.concurrency,
                    queues=self.queues,
                    in_flight=len(self._running),
                    started_at=self._started_at,
                    state=state,
                )
        except Exception as exc:
            # An older service has no such endpoint (404), a token may lack it: the beat is
            # for the operator's page, and the claims will say what matters about the token.
            log.debug("worker beat (%s) not sent: %s", state, exc)

    def _lose(self, r: _Running, exc: APIError) -> None:
        if r.lost or r.lease.lease_id not in self._running:
            return
        r.lost = True
        job = r.lease.job
        now = self._loop.time() if self._loop is not None else 0.0
        log.warning(
            "job %s (%s) attempt %d/%s: lease lost after %.3fs (%s): cancelled, or expired "
            "and taken by another worker",
            job.id,
            job.type,
            job.attempt,
            job.max_attempts or "-",
            r.duration(now),
            exc.code,
        )
        if r.started is None and not r.reporting:  # prefetched, never started: just forget it
            with suppress(ValueError):
                self._ready.remove(r)
            self._forget(r)
            self._slot_freed.set()
            return
        # An async handler can be stopped; a thread cannot, so its result is dropped later.
        if r.task is not None and not r.reporting:
            r.task.cancel()

    # Shutdown

    async def _drain(self) -> None:
        assert self._loop is not None
        # Prefetched jobs not started yet go back at once, for another worker to take now:
        # a release does not spend their attempt, so a last attempt goes back too.
        while self._ready:
            self._hand_back(self._ready.popleft())
        deadline = self._loop.time() + self.grace_period
        if self._running:
            log.info("waiting up to %gs for %s", self.grace_period, _count(len(self._running), "job"))
        # Every job held leaves _running once its handler is done and its report answered.
        await self._until_none_held(deadline)
        self._report_deadline = self._loop.time() + FINAL_REPORT_S
        late = [r for r in self._running.values() if not (r.reporting or r.lost)]
        if late:
            log.warning("grace period over: releasing %s", _count(len(late), "job"))
        while self._ready:
            self._hand_back(self._ready.popleft())
        for r in late:
            if r.started is not None and not r.abandoned:
                r.abandoned = True
                if r.task is not None:
                    r.task.cancel()
                else:
                    # In the next loop turn, as the cancelled tasks' handling: all of them
                    # reach the releaser before it sends, as one batch.
                    self._loop.call_soon(self._give_up_thread, r)
        await self._until_none_held(self._loop.time() + FINAL_REPORT_S + 1.0)
        # Left: lost sync jobs whose threads are still busy, handlers deaf to their cancel.
        tasks = [t for r in self._running.values() for t in r.tasks() if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _until_none_held(self, deadline: float) -> None:
        assert self._loop is not None
        while self._running and (remaining := deadline - self._loop.time()) > 0:
            self._emptied.clear()
            await _wait_event(self._emptied, remaining)

    def _hand_back(self, r: _Running) -> None:
        """Give a prefetched, never started job back (release: pending again at once)."""
        r.abandoned = True
        r.reporting = True  # so a lost lease does not cancel the report itself
        release = _Release("shutdown, never started", UNSTARTED_ERROR)
        self._releaser.add(r.lease.lease_id, partial(self._released, r, release))


def _fail_outcome(failure: _Fail, answered: Job) -> str:
    """What a fail did to the job, in words, from the service's answer."""
    status = getattr(answered.status, "value", answered.status)
    if failure.error in (SHUTDOWN_ERROR, UNSTARTED_ERROR):
        return "failed, retried at once (shutdown; this service cannot release)"
    if status == "dead":
        return "discarded (dead)" if failure.retry is False else "failed for good (dead)"
    if status in ("pending", "failed"):
        when = answered.visible_at
        if when is None:
            return "failed, retried"
        delay = max(0.0, (when - datetime.now(UTC)).total_seconds())
        return f"failed, retried in {delay:.1f}s"
    return f"failed ({status})"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:200] + "…"


def _count(n: int, noun: str) -> str:
    """``1 job``, ``2 jobs``: the log's counts in English."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class _Batcher(Generic[_Item]):
    """Sends reports of one kind, batching the ones that pile up while a request is in
    flight. No timer: a lone report goes out at once, and under load the batches grow by
    themselves. Each report's answer, ``"ok"`` or a code that says why not (or the
    exception that stopped the request), goes to the callback that came with it."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._pending: list[tuple[_Item, Callable[[str | BaseException], None]]] = []
        self._wake = asyncio.Event()

    def add(self, item: _Item, on_answer: Callable[[str | BaseException], None]) -> None:
        self._pending.append((item, on_answer))
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                await self._send(batch)

    async def _send(self, batch: list[tuple[_Item, Callable[[str | BaseException], None]]]) -> None:
        raise NotImplementedError


def _answer(on_answer: Callable[[str | BaseException], None], value: str | BaseException) -> None:
    try:
        on_answer(value)
    except Exception:  # a bug there must not stop the batcher, which every job needs
        log.exception("handling a report's answer failed")


class _Acker(_Batcher[tuple[str, Any]]):
    """Acks: (lease_id, result); ``lease_lost`` or ALREADY_STORED when not ok."""

    async def _send(self, batch: list[tuple[tuple[str, Any], Callable[[str | BaseException], None]]]) -> None:
        client = self._worker._reports
        if len(batch) == 1:
            (lease_id, result), on_answer = batch[0]
            try:
                await self._worker._retrying(lambda: client.ack(lease_id, result))
            except LeaseLost as exc:
                _answer(on_answer, ALREADY_STORED if exc.already_completed else exc.code or "lease_lost")
            except NotFound as exc:
                _answer(on_answer, exc.code or "not_found")
            except Exception as exc:
                _answer(on_answer, exc)
            else:
                _answer(on_answer, "ok")
            return
        try:
            results = await self._worker._retrying(lambda: client.ack_many([item for item, _ in batch]))
        except PayloadTooLarge:
            # Each result fits but together they do not: send them one by one.
            await asyncio.gather(*(self._send([entry]) for entry in batch))
            return
        except Exception as exc:
            for _, on_answer in batch:
                _answer(on_answer, exc)
            return
        by_id = {r.lease_id: r for r in results}
        for (lease_id, _), on_answer in batch:
            answer = by_id.get(lease_id)
            if answer is None:
                _answer(on_answer, "missing from the batch answer")
            elif answer.ok:
                try:  # _answer inline: once per job
                    on_answer("ok")
                except Exception:
                    log.exception("handling a report's answer failed")
            else:
                _answer(on_answer, ALREADY_STORED if answer.already_completed else answer.code or "not ok")


class _Releaser(_Batcher[str]):
    """Releases, by lease_id: a stop hands back its prefetched jobs, and later the ones the
    grace period ran out on, in the same loop turn, so they go out as one
    ``POST /v1/leases/release``. Not ok: ``lease_lost``, ``not_found``, or NO_RELEASE when the
    service has no release endpoint."""

    async def _send(self, batch: list[tuple[str, Callable[[str | BaseException], None]]]) -> None:
        client = self._worker._reports
        if len(batch) == 1:
            lease_id, on_answer = batch[0]
            try:
                await self._worker._retrying(lambda: client.release(lease_id))
            except LeaseLost as exc:
                _answer(on_answer, exc.code or "lease_lost")
            except (NotFound, MethodNotAllowed):
                # Either the lease is unknown or (far likelier for a lease this worker
                # holds) the service predates release: the fallback fail settles which.
                _answer(on_answer, NO_RELEASE)
            except Exception as exc:
                _answer(on_answer, exc)
            else:
                _answer(on_answer, "ok")
            return
        try:
            results = await self._worker._retrying(
                lambda: client.release_many([lease_id for lease_id, _ in batch])
            )
        except (NotFound, MethodNotAllowed):
            # Unknown leases are answered inside the results: this is a service without
            # the batch release, so without release at all.
            for _, on_answer in batch:
                _answer(on_answer, NO_RELEASE)
            return
        except Exception as exc:
            for _, on_answer in batch:
                _answer(on_answer, exc)
            return
        by_id = {r.lease_id: r for r in results}
        for lease_id, on_answer in batch:
            answer = by_id.get(lease_id)
            if answer is None:
                _answer(on_answer, "missing from the batch answer")
            else:
                _answer(on_answer, "ok" if answer.ok else answer.code or "not ok")


def _failure(exc: Exception) -> _Fail:
    """What a handler's exception reports. The reason is the job's error word for word, as
    the JavaScript and Go workers send it: it is what the handler chose to say (jobq
    conformance's fail check wants it so)."""
    if isinstance(exc, Retry):
        return _Fail(exc.reason, retry_in_ms=exc.in_ms)
    if isinstance(exc, Discard):
        return _Fail(exc.reason, retry=False)
    return _Fail(describe(exc))


def _judge(job: Job, value: Any) -> _Ack | _Fail:
    """What a handler's return value reports: an ack of it, or why it cannot be one."""
    if value is None or type(value) in _PLAIN:
        return _Ack(value)  # JSON as it is: no trial encoding (most handlers return None)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited; close it so Python does not warn later
        return _Fail(
            f"the handler for {job.type!r} returned an awaitable instead of a result; "
            "declare it `async def` so the worker awaits it",
            retry=False,
        )
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        # Retrying would run the side effects again only to fail the same way: dead.
        return _Fail(
            f"the handler for {job.type!r} returned a value that is not JSON-serialisable "
            f"({type(value).__name__}): {exc}",
            retry=False,
        )
    return _Ack(value)



def _hint(exc: APIError) -> str:
    if isinstance(exc, Unauthorized):
        return " (no token, or one mistyped or revoked: check JOBQ_TOKEN, --token or token=)"
    if isinstance(exc, Forbidden):
        return " (use a worker token whose queues cover this worker's)"
    return ""


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def _wait_event(event: asyncio.Event, seconds: float | None) -> None:
    """Wait for ``event``, at most ``seconds`` (None: no limit).

    Not ``asyncio.wait_for``: on 3.11 it can swallow a cancel that lands just as the event
    fires, and a helper task would then never end.
    """
    with suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
