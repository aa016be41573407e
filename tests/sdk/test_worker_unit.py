"""The worker runner against an in-memory fake of the worker endpoints (sdk_fakes)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sdk_fakes import FakeService

import jobq.client as jobq
from jobq.worker import Discard, Retry, Worker, load_handlers, run_worker
from jobq.worker import _worker as worker_module
from tests.waiting import aeventually

URL = "http://jobq.test"
HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def make_worker(fake: FakeService, handlers: dict[str, Any], **kwargs: Any) -> Worker:
    kwargs.setdefault("wait_ms", 200)
    return Worker(URL, queues=["default"], handlers=handlers, transport=fake.transport, **kwargs)


async def run_until(worker: Worker, done: Callable[[], bool]) -> None:
    """Start the worker, wait for ``done()``, ask it to stop and wait for it to end."""
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: done() or task.done(), what="the worker done, or ended")
    assert not task.done(), task.exception()
    worker.stop()
    await asyncio.wait_for(task, 5)


async def test_sync_and_async_handlers_ack_their_return_values() -> None:
    fake = FakeService()
    ids = [fake.add("sync", {"n": 1}), fake.add("async", {"n": 2})]
    seen_threads: list[str] = []

    def sync_handler(job: jobq.Job) -> dict[str, Any]:
        seen_threads.append(threading.current_thread().name)
        return {"doubled": job.payload["n"] * 2}

    async def async_handler(job: jobq.Job) -> dict[str, Any]:
        return {"doubled": job.payload["n"] * 2, "attempt": job.attempt}

    worker = make_worker(fake, {"sync": sync_handler, "async": async_handler})
    await run_until(worker, lambda: len(fake.acks) == 2)
    assert fake.acks == {ids[0]: {"doubled": 2}, ids[1]: {"doubled": 4, "attempt": 1}}
    assert seen_threads and seen_threads[0].startswith("jobq-handler")
    assert fake.claims[0]["types"] == ["async", "sync"]
    assert fake.claims[0]["worker_id"] == worker.worker_id
    assert fake.claims[0]["wait_ms"] == 200


async def test_many_sync_handlers_finishing_together_each_ack_their_own_result() -> None:
    # Threads hand their outcomes back in batches (one loop wake-up for all that finished):
    # none may be lost or given to another job, and the pool never outgrows concurrency.
    fake = FakeService()
    ids = {fake.add("sync", {"n": n}): n for n in range(300)}
    threads: set[str] = set()
    results = [None, "text", 7, True, {"n": None}]  # plain ones skip the trial encoding

    def handler(job: jobq.Job) -> Any:
        threads.add(threading.current_thread().name)
        n = job.payload["n"]
        if n % 50 == 1:
            raise ValueError(f"job {n} fails")
        result = results[n % len(results)]
        return {"n": n} if isinstance(result, dict) else result

    worker = make_worker(fake, {"sync": handler}, concurrency=8)
    await run_until(worker, lambda: len(fake.acks) + len(fake.fails) == len(ids))
    expected = {job_id: ({"n": n} if n % len(results) == 4 else results[n % len(results)])
                for job_id, n in ids.items() if n % 50 != 1}
    assert fake.acks == expected
    assert sorted(ids[job_id] for job_id in fake.fails) == list(range(1, 300, 50))
    assert all("ValueError: job" in fail["error"] for fail in fake.fails.values())
    assert 1 <= len(threads) <= 8


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def test_handlers_see_the_callers_context_and_not_each_others() -> None:
    # Each handler runs in its own copy of the context run_async was called in, sync ones
    # in their threads as async ones in their tasks; one job's changes stay its own.
    fake = FakeService()
    for n in range(6):
        fake.add("sync" if n % 2 else "async", {"n": n})
    seen: list[str] = []

    def sync_handler(job: jobq.Job) -> None:
        seen.append(REQUEST_ID.get())
        REQUEST_ID.set(f"set by job {job.id}")

    async def async_handler(job: jobq.Job) -> None:
        seen.append(REQUEST_ID.get())
        REQUEST_ID.set(f"set by job {job.id}")

    REQUEST_ID.set("the caller's")
    worker = make_worker(fake, {"sync": sync_handler, "async": async_handler},
                         concurrency=1, prefetch=2)
    await run_until(worker, lambda: len(fake.acks) == 6)
    assert seen == ["the caller's"] * 6
    assert REQUEST_ID.get() == "the caller's"


async def test_types_without_a_handler_are_not_claimed() -> None:
    fake = FakeService()
    fake.add("other")
    handled = fake.add("mine")
    worker = make_worker(fake, {"mine": lambda job: None})
    await run_until(worker, lambda: handled in fake.acks)
    assert [j["type"] for j in fake.waiting] == ["other"]


async def test_claims_ask_only_for_free_slots() -> None:
    fake = FakeService()
    for _ in range(5):
        fake.add("slow")

    async def slow(job: jobq.Job) -> None:
        await asyncio.sleep(0.05)  # a slow handler, so that claims come while slots are taken

    await run_until(make_worker(fake, {"slow": slow}, concurrency=2), lambda: len(fake.acks) == 5)
    limits = [c["limit"] for c in fake.claims]
    assert limits[0] == 2 and max(limits) <= 2


async def test_prefetch_claims_ahead_but_never_holds_more_than_slots_plus_prefetch() -> None:
    fake = FakeService()
    for _ in range(10):
        fake.add("t")
    release = asyncio.Event()
    started: list[str] = []

    async def handler(job: jobq.Job) -> None:
        started.append(job.id)
        await release.wait()

    worker = make_worker(fake, {"t": handler}, concurrency=2, prefetch=3)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.leased) == 5, what="five jobs leased")
    await aeventually(lambda: len(started) == 2, what="two handlers started")
    claims_then = len(fake.claims)
    # Everything held: the worker waits for a slot instead of asking again, and only two
    # handlers run while three jobs wait. An absence has no event to wait for: the window's
    # length is the test.
    await asyncio.sleep(0.3)
    assert len(fake.claims) == claims_then and len(fake.leased) == 5
    assert len(started) == 2
    release.set()
    await aeventually(lambda: len(fake.acks) == 10, what="ten acks")
    worker.stop()
    await asyncio.wait_for(task, 5)
    assert max(c["limit"] for c in fake.claims) <= 5 and fake.claims[0]["limit"] == 5


async def test_prefetched_leases_are_heartbeated_before_they_start() -> None:
    fake = FakeService()
    first, second = fake.add("t"), fake.add("t")
    beaten_before_start: list[bool] = []

    async def handler(job: jobq.Job) -> None:
        if job.id == first:
            # The second job waits prefetched behind this one; its lease must be kept.
            await aeventually(lambda: f"L{second}.1" in fake.heartbeats, what="the prefetched lease beaten")
        else:
            beaten_before_start.append(f"L{second}.1" in fake.heartbeats)

    worker = make_worker(fake, {"t": handler}, concurrency=1, prefetch=1, lease_ms=150)
    await run_until(worker, lambda: len(fake.acks) == 2)
    assert beaten_before_start == [True]


async def test_a_job_arriving_while_an_ack_is_in_flight_starts_without_waiting_for_it() -> None:
    fake = FakeService()
    fake.ack_gate = asyncio.Event()  # every ack hangs until the gate opens
    first = fake.add("t")
    ran: list[str] = []

    async def handler(job: jobq.Job) -> str:
        ran.append(job.id)
        return job.id

    # One slot: the second job can only run if the first one's slot is free while its ack
    # is still unanswered.
    worker = make_worker(fake, {"t": handler}, concurrency=1)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: fake.claims_open_at_ack != [], what="an ack sent while a claim is open")
    second = fake.add("t")
    await aeventually(lambda: ran == [first, second], what="both jobs run")
    assert fake.acks == {} and not fake.ack_gate.is_set()
    fake.ack_gate.set()
    await aeventually(lambda: len(fake.acks) == 2, what="two acks")
    worker.stop()
    await asyncio.wait_for(task, 5)


async def test_acks_go_out_while_a_long_poll_is_open() -> None:
    fake = FakeService()
    for _ in range(3):
        fake.add("t")
    worker = make_worker(fake, {"t": lambda job: job.id}, wait_ms=2000)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.acks) == 3, what="three acks")
    worker.stop()
    await asyncio.wait_for(task, 5)
    # The next long-poll went out before (and stayed open during) the acks.
    assert fake.claims_open_at_ack and all(n == 1 for n in fake.claims_open_at_ack)


async def test_stop_releases_prefetched_jobs_at_once_in_one_batch() -> None:
    fake = FakeService()
    running = fake.add("t")
    last = fake.add("t", max_attempts=1)  # the claim makes this attempt 1 of 1
    spare = fake.add("t")
    stopping = asyncio.Event()

    async def handler(job: jobq.Job) -> str:
        if job.id == running:
            await stopping.wait()
            # Released while this job still runs, not after the grace period.
            await aeventually(lambda: {last, spare} <= set(fake.releases),
                              what="the prefetched jobs released")
        return job.id

    worker = make_worker(fake, {"t": handler}, concurrency=1, prefetch=2, grace_period=5)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.leased) == 3, what="three jobs leased")
    worker.stop()
    stopping.set()
    await asyncio.wait_for(task, 5)
    # Released, not failed: a release spends no attempt, so the last attempt goes back too,
    # and both in one request.
    assert set(fake.releases) == {last, spare} and fake.release_batches == [2]
    assert fake.fails == {}
    assert fake.acks == {running: running}
    assert fake.leased == {}
    assert {j["id"]: j["attempt"] for j in fake.waiting} == {last: 0, spare: 0}


async def test_jobs_finishing_together_are_acked_in_one_batch() -> None:
    fake = FakeService(ack_latency=0.05)
    for _ in range(20):
        fake.add("t")
    release = asyncio.Event()

    async def handler(job: jobq.Job) -> str:
        await release.wait()
        return job.id

    worker = make_worker(fake, {"t": handler}, concurrency=20)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.leased) == 20, what="twenty jobs leased")
    release.set()
    await aeventually(lambda: len(fake.acks) == 20, what="twenty acks")
    worker.stop()
    await asyncio.wait_for(task, 5)
    assert sum(fake.ack_batches) == 20
    assert len(fake.ack_batches) <= 3 and max(fake.ack_batches) >= 10
    assert all(fake.acks[i] == i for i in fake.acks)


async def test_failures_report_message_traceback_retry_and_discard() -> None:
    fake = FakeService()
    boom, later, never, odd = (fake.add(t) for t in ("boom", "later", "never", "odd"))

    def raise_boom(job: jobq.Job) -> None:
        raise ValueError("bad input")

    async def retry_later(job: jobq.Job) -> None:
        raise Retry("rate limited", in_ms=500)

    def discard(job: jobq.Job) -> None:
        raise Discard("customer deleted")

    handlers = {"boom": raise_boom, "later": retry_later, "never": discard, "odd": lambda j: {1, 2}}
    await run_until(make_worker(fake, handlers), lambda: len(fake.fails) == 4)

    error = fake.fails[boom]["error"]
    assert error.startswith("ValueError: bad input\n")
    assert "Traceback (most recent call last)" in error and "raise_boom" in error
    assert "retry" not in fake.fails[boom] and "retry_in_ms" not in fake.fails[boom]
    assert fake.fails[later]["retry_in_ms"] == 500 and "rate limited" in fake.fails[later]["error"]
    assert fake.fails[never]["retry"] is False and "customer deleted" in fake.fails[never]["error"]
    assert fake.fails[odd]["retry"] is False and "JSON-serialisable" in fake.fails[odd]["error"]
    assert fake.acks == {}


async def test_a_retry_delay_is_sent_as_whole_milliseconds() -> None:
    # The service refuses 1500.0 for an integer field (no coercion), so the worker rounds.
    fake = FakeService()
    job = fake.add("later")

    def retry_later(job: jobq.Job) -> None:
        raise Retry("computed", in_ms=1.5 * 1000.4)

    await run_until(make_worker(fake, {"later": retry_later}), lambda: len(fake.fails) == 1)
    sent = fake.fails[job]["retry_in_ms"]
    assert sent == 1501 and type(sent) is int


async def test_lost_lease_cancels_async_handlers_and_drops_sync_results() -> None:
    fake = FakeService()
    fake.add("async")
    fake.add("sync")
    fake.lose_all_leases = True
    cancelled = asyncio.Event()
    sync_done = threading.Event()

    async def long_async(job: jobq.Job) -> str:
        try:
            await asyncio.sleep(10)  # a handler that outlives its lease, to be cancelled
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    def long_sync(job: jobq.Job) -> str:
        time.sleep(0.3)  # a sync handler that outlives its lease (it cannot be cancelled)
        sync_done.set()
        return "dropped"

    worker = make_worker(fake, {"async": long_async, "sync": long_sync}, lease_ms=150)
    await run_until(worker, lambda: cancelled.is_set() and sync_done.is_set())
    assert fake.acks == {} and fake.fails == {}


async def test_heartbeats_come_well_before_the_lease_ends() -> None:
    fake = FakeService()
    fake.add("t")

    async def handler(job: jobq.Job) -> None:
        await asyncio.sleep(0.5)  # the length of the work is what the beats are counted over

    await run_until(make_worker(fake, {"t": handler}, lease_ms=300), lambda: len(fake.acks) == 1)
    # Every 100 ms over 500 ms of work.
    assert 3 <= len(fake.heartbeats) <= 6


async def test_stop_aborts_the_long_poll() -> None:
    fake = FakeService()
    worker = make_worker(fake, {"t": lambda j: None}, wait_ms=10_000)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: bool(fake.claims), what="a claim")
    started = time.monotonic()
    worker.stop()
    await asyncio.wait_for(task, 2)
    assert time.monotonic() - started < 0.5


async def test_graceful_stop_acks_what_finishes_and_releases_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeService()
    quick, stuck_async, stuck_sync = fake.add("quick"), fake.add("stuck"), fake.add("blocking")
    unblock = threading.Event()

    async def quick_handler(job: jobq.Job) -> str:
        await asyncio.sleep(0.1)  # work that ends within the grace period
        return "done"

    async def stuck_handler(job: jobq.Job) -> None:
        await asyncio.sleep(60)  # work that outlasts the grace period

    def blocking_handler(job: jobq.Job) -> None:
        unblock.wait(10)

    handlers = {"quick": quick_handler, "stuck": stuck_handler, "blocking": blocking_handler}
    worker = make_worker(fake, handlers, grace_period=0.4)
    caplog.set_level(logging.INFO, logger="jobq")
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.leased) == 3, what="three jobs leased")
    started = time.monotonic()
    worker.stop()
    await asyncio.wait_for(task, 5)
    unblock.set()
    assert 0.35 < time.monotonic() - started < 1.5
    assert fake.acks == {quick: "done"}
    # Both outlasting jobs go back in one batch release, their attempts not spent.
    assert set(fake.releases) == {stuck_async, stuck_sync} and fake.release_batches == [2]
    assert fake.fails == {}
    messages = [r.getMessage() for r in caplog.records]
    for job_id in (stuck_async, stuck_sync):
        line = next(m for m in messages if m.startswith(f"job {job_id} "))
        assert ": released (shutdown) (ran " in line, line
    assert "grace period over: releasing 2 jobs" in messages
    assert "waiting up to 0.4s for 3 jobs" in messages
    assert not any("handed back" in m for m in messages), messages


async def test_one_job_left_is_one_job_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeService()
    stuck = fake.add("t")

    async def handler(job: jobq.Job) -> None:
        await asyncio.sleep(60)

    caplog.set_level(logging.INFO, logger="jobq")
    worker = make_worker(fake, {"t": handler}, grace_period=0.1)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.leased) == 1, what="the job leased")
    worker.stop()
    await asyncio.wait_for(task, 5)
    messages = [r.getMessage() for r in caplog.records]
    assert "waiting up to 0.1s for 1 job" in messages
    assert "grace period over: releasing 1 job" in messages
    assert set(fake.releases) == {stuck} and fake.release_batches == [1]


async def test_a_service_without_release_gets_the_old_hand_back() -> None:
    """An older service answers 404 to release: the jobs go back as before (a fail with
    retry_in_ms 0), not left to expire."""
    fake = FakeService()
    fake.old_service = True
    running, spare = fake.add("t"), fake.add("t")

    async def handler(job: jobq.Job) -> None:
        await asyncio.sleep(60)

    worker = make_worker(fake, {"t": handler}, concurrency=1, prefetch=1, grace_period=0.2)
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: len(fake.leased) == 2, what="two jobs leased")
    worker.stop()
    await asyncio.wait_for(task, 5)
    assert fake.releases == {}
    assert {k: v["retry_in_ms"] for k, v in fake.fails.items()} == {running: 0, spare: 0}
    assert "prefetched" in fake.fails[spare]["error"] and "shut down" in fake.fails[running]["error"]


async def test_the_worker_reports_itself_at_start_while_running_and_as_it_stops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "WORKER_BEAT_S", 0.1)
    fake = FakeService()
    gate = asyncio.Event()

    async def handler(job: jobq.Job) -> None:
        await gate.wait()

    worker = make_worker(fake, {"t": handler}, concurrency=3, worker_id="w-beat")
    task = asyncio.create_task(worker.run_async())
    await aeventually(lambda: bool(fake.beats), what="the first beat")
    first = fake.beats[0]
    assert first["worker_id"] == "w-beat" and first["state"] == "running"
    assert first["host"] == socket.gethostname() and first["pid"] == os.getpid()
    assert first["concurrency"] == 3 and first["queues"] == ["default"] and first["in_flight"] == 0
    assert datetime.fromisoformat(first["started_at"]).utcoffset() == timedelta(0)
    fake.add("t")
    # Idle or busy, it keeps beating, and says how many jobs it holds.
    await aeventually(lambda: fake.beats[-1]["in_flight"] == 1, what="a beat with a job in flight")
    gate.set()
    worker.stop()
    await asyncio.wait_for(task, 5)
    states = [b["state"] for b in fake.beats]
    assert states[-2:] == ["stopping", "stopped"] and set(states[:-2]) == {"running"}, states
    assert len({b["started_at"] for b in fake.beats}) == 1


async def test_beats_refused_or_slow_never_hold_up_the_jobs(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(worker_module, "WORKER_BEAT_TIMEOUT_S", 0.2)
    caplog.set_level(logging.DEBUG, logger="jobq")
    # A service that predates beats: 404 to every one.
    fake = FakeService()
    fake.old_service = True
    job_id = fake.add("t")
    await run_until(make_worker(fake, {"t": lambda j: "done"}), lambda: job_id in fake.acks)
    loud = [r.getMessage() for r in caplog.records if r.levelno > logging.INFO]
    assert not loud, loud
    assert any("worker beat (running) not sent" in r.getMessage() and r.levelno == logging.DEBUG
               for r in caplog.records)
    # A service that does not answer beats at all: jobs are done all the same.
    fake = FakeService()
    fake.beat_gate = asyncio.Event()
    job_id = fake.add("t")
    await run_until(make_worker(fake, {"t": lambda j: "done"}), lambda: job_id in fake.acks)
    assert fake.beats == []


async def test_backs_off_while_the_service_is_down() -> None:
    fake = FakeService()
    fake.down = True
    worker = make_worker(fake, {"t": lambda j: None})
    task = asyncio.create_task(worker.run_async())
    await asyncio.sleep(1.0)  # the attempts are counted over this length: it is the test
    worker.stop()
    await asyncio.wait_for(task, 2)
    # No hot loop: exponential backoff from 0.25-0.5 s.
    assert 1 <= fake.refused <= 4


async def test_quick_empty_answers_do_not_spin() -> None:
    fake = FakeService()
    worker = make_worker(fake, {"t": lambda j: None}, wait_ms=0)
    task = asyncio.create_task(worker.run_async())
    await asyncio.sleep(0.6)  # the claims are counted over this length: it is the test
    worker.stop()
    await asyncio.wait_for(task, 2)
    assert 1 <= len(fake.claims) <= 4


async def test_a_refused_claim_stops_the_worker_with_the_error() -> None:
    fake = FakeService()
    fake.claim_status = (401, "unauthorized")
    with pytest.raises(jobq.Unauthorized):
        await asyncio.wait_for(make_worker(fake, {"t": lambda j: None}).run_async(), 2)


async def test_a_refused_heartbeat_stops_the_worker_instead_of_beating_again() -> None:
    fake = FakeService()
    job_id = fake.add("t")
    # A token revoked while the job runs: every call of this worker is refused from now on.
    fake.refuse = {"heartbeat": (401, "unauthorized"), "release": (401, "unauthorized")}

    async def long_job(job: jobq.Job) -> None:
        await asyncio.sleep(60)  # runs until the refused heartbeat stops the worker

    worker = make_worker(fake, {"t": long_job}, lease_ms=150, concurrency=1, grace_period=0.3)
    with pytest.raises(jobq.Unauthorized):
        await asyncio.wait_for(worker.run_async(), 5)
    # One beat refused, then the release of the job (refused too); no retry of either, and
    # no more claims once refused.
    assert fake.refused_calls == ["heartbeat", "release"]
    assert len(fake.claims) == 1 and job_id not in fake.acks


async def test_a_refused_ack_stops_the_worker_and_sends_no_fail() -> None:
    fake = FakeService()
    fake.add("t")
    fake.refuse = {"ack": (403, "forbidden")}
    worker = make_worker(fake, {"t": lambda j: "done"})
    with pytest.raises(jobq.Forbidden):
        await asyncio.wait_for(worker.run_async(), 5)
    assert fake.refused_calls == ["ack"]
    assert fake.fails == {} and fake.acks == {}


@pytest.mark.parametrize("status", [(401, "unauthorized"), (403, "forbidden")])
def test_run_worker_logs_a_refusal_once(status: tuple[int, str], tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """What `jobq worker` runs: a claim refused for the token is one ERROR line naming the
    call and the remedy, and exit status 1; not the same refusal said twice."""
    (tmp_path / "refused_jobs.py").write_text("handlers = {'t': print}\n")
    fake = FakeService()
    fake.claim_status = status
    caplog.set_level(logging.INFO, logger="jobq")
    code = run_worker(URL, "refused_jobs:handlers", "default", app_dir=str(tmp_path),
                      transport=fake.transport, wait_ms=200)
    assert code == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert errors[0].startswith("claim refused by the service") and status[1] in errors[0].lower()


def test_worker_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="queues"):
        Worker(URL, queues=[], handlers={"t": print})
    with pytest.raises(ValueError, match="handlers"):
        Worker(URL, queues=["q"], handlers={})
    with pytest.raises(TypeError, match="not callable"):
        Worker(URL, queues=["q"], handlers={"t": 42})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="concurrency"):
        Worker(URL, queues=["q"], handlers={"t": print}, concurrency=0)
    with pytest.raises(ValueError, match="prefetch"):
        Worker(URL, queues=["q"], handlers={"t": print}, prefetch=-1)
    with pytest.raises(ValueError, match="wait_ms"):
        Worker(URL, queues=["q"], handlers={"t": print}, wait_ms=60_000)


# load_handlers


def test_load_handlers_reads_a_mapping_or_a_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "myjobs_sdk_test.py").write_text(
        textwrap.dedent(
            """
            def welcome(job):
                return "hi"

            handlers = {"email.welcome": welcome}

            class Registry:
                handlers = handlers

            def build():
                return {"built": welcome}

            not_a_mapping = 3
            bad_entry = {"t": 3}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert list(load_handlers("myjobs_sdk_test:handlers")) == ["email.welcome"]
    assert list(load_handlers("myjobs_sdk_test:Registry.handlers")) == ["email.welcome"]
    assert list(load_handlers("myjobs_sdk_test:build")) == ["built"]
    for spec, message in [
        ("myjobs_sdk_test", "expected 'package.module:attribute'"),
        ("no_such_module_xyz:handlers", "cannot import"),
        ("myjobs_sdk_test:missing", "'missing' not found"),
        ("myjobs_sdk_test:not_a_mapping", "expected a mapping"),
        ("myjobs_sdk_test:bad_entry", "not a job type"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_handlers(spec)


# Signals, in a child process so they do not reach pytest


CHILD = """
import asyncio, sys, time
from sdk_fakes import FakeService
from jobq.worker import Worker

fake = FakeService()
fake.add("slow")

async def slow(job):
    print("started", flush=True)
    await asyncio.sleep(float(sys.argv[1]))
    return "finished"

def sync_slow(job):
    print("started", flush=True)
    time.sleep(float(sys.argv[1]))

handlers = {"slow": slow if sys.argv[2] == "async" else sync_slow}
Worker("http://jobq.test", queues=["default"], handlers=handlers, transport=fake.transport,
       grace_period=5, wait_ms=200).run()
print("acks", fake.acks, "fails", {k: v.get("retry_in_ms") for k, v in fake.fails.items()},
      flush=True)
"""


def start_child(seconds: float, kind: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(seconds), kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "started"
    return child


def said_on_stderr(child: subprocess.Popen[str], text: str) -> str:
    """The child's stderr up to the line holding ``text`` (or to its end, if it never says
    it: a child that exits closes it, so this does not hang)."""
    assert child.stderr is not None
    heard = ""
    for line in iter(child.stderr.readline, ""):
        heard += line
        if text in line:
            break
    return heard


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_lets_the_running_job_finish_and_exits_zero() -> None:
    child = start_child(0.5, "async")
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=10)
    assert child.returncode == 0, err
    assert "acks {'1': 'finished'}" in out


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_signal_exits_at_once() -> None:
    child = start_child(30, "sync")
    child.send_signal(signal.SIGINT)
    # The second signal only after the first was handled (two pending signals of a kind
    # merge into one): the worker says, on stderr, that it is stopping.
    heard = said_on_stderr(child, "stopping")
    assert "SIGINT: stopping" in heard, heard
    started = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=5)
    assert child.returncode == 128 + signal.SIGINT, err
    assert time.monotonic() - started < 2
    assert "acks" not in out
