"""The worker runner against the real service and PostgreSQL: crashes (SIGKILL, SIGSTOP),
graceful SIGTERM, heartbeats past the lease, retries, discards and concurrency.

One ``jobq serve`` per module (its own fresh database) keeps the module fast; every test
works in a queue of its own, so tests never see each other's jobs. Workers run either as
``jobq worker`` subprocesses (for signals) or in-process in a thread (``running``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from handlers_live import RUNS_ENV, Run, read_runs, running

from jobq.client import Client, Job, JobFailed, NewJob
from jobq.worker import Discard, Retry, Worker
from tests import pg
from tests.conftest import ROOT, LiveServer
from tests.waiting import eventually

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def server(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    name = pg.clone(admin_url, template_db)
    live = LiveServer(pg.with_database(admin_url, name))
    try:
        live.start()
        yield live
    finally:
        live.stop()
        pg.drop(admin_url, name)


@pytest.fixture
def jobq(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, timeout=30) as c:
        yield c


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


class WorkerProcess:
    """``python -m jobq.cli worker handlers_live:handlers`` in its own process."""

    def __init__(self, url: str, queue: str, runs: Path, worker_id: str, concurrency: int = 1,
                 args: Sequence[str] = ()) -> None:
        self.log_path = runs.with_name(f"{worker_id}.log")
        env = {
            **os.environ,
            RUNS_ENV: str(runs),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        }
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jobq.cli",
                    "worker",
                    "handlers_live:handlers",
                    "--queues",
                    queue,
                    "--concurrency",
                    str(concurrency),
                    "--url",
                    url,
                    "--worker-id",
                    worker_id,
                    *args,
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.pid = self.proc.pid
        self.worker_id = worker_id

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # a SIGSTOPped process dies of SIGKILL too
            self.proc.wait(10)


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Every worker process a test starts goes in here and is killed afterwards."""
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        w.kill()


def start(workers: list[WorkerProcess], *args: Any, **kwargs: Any) -> WorkerProcess:
    w = WorkerProcess(*args, **kwargs)
    workers.append(w)
    return w


def starts(runs: Path, job_id: str | None = None) -> list[Run]:
    return [r for r in read_runs(runs) if r.event == "start" and job_id in (None, r.job_id)]


def ends(runs: Path, job_id: str | None = None) -> list[Run]:
    return [r for r in read_runs(runs) if r.event == "end" and job_id in (None, r.job_id)]


# Crashes


def test_sigkilled_worker_job_is_completed_by_another_after_the_lease_expires(
    server: LiveServer, jobq: Client, queue: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    runs = tmp_path / "runs"
    jobq.update_queue(queue, lease_ms=1000)
    job = jobq.enqueue("sleep", {"s": 120, "retry_s": 0}, queue=queue)
    doomed = start(workers, server.url, queue, runs, "doomed")
    eventually(lambda: starts(runs, job.id), what=lambda: f"first run; log:\n{doomed.log()}")
    rescuer = start(workers, server.url, queue, runs, "rescuer")
    eventually(lambda: "serving queues=" in rescuer.log(), what=lambda: f"the rescuer up; log:\n{rescuer.log()}")
    # Two lease lengths of the rescuer asking for work: the doomed worker's heartbeats keep
    # the job from it. The length is the behaviour: without heartbeats the lease would end.
    time.sleep(2.0)
    held = jobq.get(job.id)
    assert held.status == "running" and held.worker_id == "doomed", held
    assert held.attempt == 1 and held.errors == []
    assert len(starts(runs)) == 1

    doomed.proc.send_signal(signal.SIGKILL)
    assert doomed.proc.wait(10) == -signal.SIGKILL
    done = jobq.wait(job.id, timeout=30)

    assert done.worker_id == "rescuer", rescuer.log()
    assert done.attempt == 2
    assert done.result == {"pid": rescuer.pid, "attempt": 2}
    assert [(e.attempt, e.kind) for e in done.errors] == [(1, "lease_expired")]
    assert done.errors[0].at is not None and done.completed_at is not None
    assert done.completed_at > done.errors[0].at
    # Two runs began, one on each worker; only the rescuer's finished.
    assert [(r.pid, r.attempt) for r in starts(runs)] == [(doomed.pid, 1), (rescuer.pid, 2)]
    assert [(r.pid, r.attempt) for r in ends(runs)] == [(rescuer.pid, 2)]
    counts = jobq.queue(queue).counts
    assert (counts.completed, counts.running, counts.pending, counts.dead) == (1, 0, 0, 0)


def test_frozen_worker_that_wakes_up_late_cannot_overwrite_the_winner(
    server: LiveServer, jobq: Client, queue: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    # SIGSTOP stops the heartbeats but, unlike SIGKILL, lets the worker come back, its
    # handler's result in hand, after another worker completed the job. Whether it learns
    # from its next heartbeat or its ack, the service must answer lease_lost and keep the
    # winner's completion.
    runs = tmp_path / "runs"
    jobq.update_queue(queue, lease_ms=1000)
    job = jobq.enqueue("sleep", {"s": 1.5, "retry_s": 0}, queue=queue)
    sleeper = start(workers, server.url, queue, runs, "sleeper")
    eventually(lambda: starts(runs, job.id), what=lambda: f"first run; log:\n{sleeper.log()}")
    sleeper.proc.send_signal(signal.SIGSTOP)
    try:
        winner = start(workers, server.url, queue, runs, "winner")
        done = jobq.wait(job.id, timeout=30)
    finally:
        sleeper.proc.send_signal(signal.SIGCONT)
    assert done.worker_id == "winner" and done.result == {"pid": winner.pid, "attempt": 2}
    # The woken sleeper finishes its handler (its "end" line) and is turned away.
    eventually(
        lambda: [r for r in ends(runs) if r.pid == sleeper.pid],
        what=lambda: f"the sleeper's late finish; log:\n{sleeper.log()}",
    )
    eventually(
        lambda: "lease_lost" in sleeper.log(),
        what=lambda: f"the sleeper learning its lease is lost; log:\n{sleeper.log()}",
    )
    after = jobq.get(job.id)
    assert after.status == "completed" and after.result == done.result
    assert after.completed_at == done.completed_at and after.worker_id == "winner"
    assert [(e.attempt, e.kind) for e in after.errors] == [(1, "lease_expired")]
    assert jobq.queue(queue).counts.completed == 1


# Graceful shutdown


def test_sigterm_lets_running_jobs_finish_without_duplicates_and_exits_0(
    server: LiveServer, jobq: Client, queue: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    runs = tmp_path / "runs"
    jobs = jobq.enqueue_many([NewJob(type="sleep", payload={"s": 2.0}, queue=queue) for _ in range(8)])
    first = start(workers, server.url, queue, runs, "first", concurrency=4)
    eventually(lambda: len(starts(runs)) == 4, what=lambda: f"4 runs; log:\n{first.log()}")
    assert ends(runs) == [], "the jobs finished before SIGTERM: the test proves nothing"
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(30) == 0, first.log()

    ran = {r.job_id for r in starts(runs)}
    assert len(ran) == 4 and len(starts(runs)) == 4, read_runs(runs)
    assert sorted(r.job_id for r in ends(runs)) == sorted(ran), read_runs(runs)
    by_id = {j.id: jobq.get(j.id) for j in jobs}
    for job_id in ran:
        assert by_id[job_id].status == "completed", by_id[job_id]
        assert by_id[job_id].attempt == 1 and by_id[job_id].errors == []
    # Nothing was claimed after the signal: the rest were never leased.
    for job_id in set(by_id) - ran:
        assert (by_id[job_id].status, by_id[job_id].attempt) == ("pending", 0), by_id[job_id]

    second = start(workers, server.url, queue, runs, "second", concurrency=4)
    eventually(lambda: jobq.queue(queue).counts.completed == 8, poll_s=0.05, what=second.log)
    assert sorted(Counter(r.job_id for r in starts(runs)).values()) == [1] * 8
    second.proc.send_signal(signal.SIGTERM)
    assert second.proc.wait(30) == 0, second.log()


def test_a_stop_releases_running_and_prefetched_jobs_without_spending_their_attempt(
    server: LiveServer, jobq: Client, queue: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """Ctrl-C on `jobq worker --grace-period 1` while a job with max_attempts 1 runs and
    another waits prefetched: both go back pending, attempt 0, nothing in `errors`, and
    another worker runs them. Before, the hand-back was a fail that spent the last attempt:
    both ended dead."""
    runs = tmp_path / "runs"
    running_job = jobq.enqueue("slow_once", {"s": 60}, queue=queue, max_attempts=1)
    first = start(workers, server.url, queue, runs, "first", concurrency=1,
                  args=["--grace-period", "1", "--prefetch", "1"])
    eventually(lambda: starts(runs, running_job.id), what=lambda: f"the job started; log:\n{first.log()}")
    waiting_job = jobq.enqueue("slow_once", {"s": 60}, queue=queue, max_attempts=1)
    eventually(lambda: jobq.get(waiting_job.id).worker_id == "first", poll_s=0.05,
               what=lambda: f"the second job prefetched; log:\n{first.log()}")
    assert starts(runs, waiting_job.id) == []  # held, not started: the slot is taken

    first.proc.send_signal(signal.SIGINT)
    assert first.proc.wait(30) == 0, first.log()
    log = first.log()
    for job, why in ((running_job, "shutdown"), (waiting_job, "shutdown, never started")):
        line = next((x for x in log.splitlines() if f"job {job.id} (slow_once)" in x), log)
        assert f"attempt 1/1: released ({why}) (ran " in line, log
        now = jobq.get(job.id)
        assert (now.status, now.attempt, now.errors, now.worker_id) == ("pending", 0, [], None), now
        assert [(r.attempt, r.worker_id) for r in now.releases] == [(1, "first")], now
    assert "handed back" not in log and "grace period over: releasing 1 job" in log, log
    shown = subprocess.run([sys.executable, "-m", "jobq.cli", "job", running_job.id, "--url", server.url],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "100"})
    assert shown.returncode == 0, shown.stderr
    assert "releases (1, not counted as attempts)" in shown.stdout and "first" in shown.stdout, shown.stdout
    assert ends(runs) == []  # the running job was given up, not finished

    second = start(workers, server.url, queue, runs, "second", concurrency=2)
    for job in (running_job, waiting_job):
        done = jobq.wait(job.id, timeout=30)
        # The same attempt 1 of 1 again, run to the end this time.
        assert done.result == {"pid": second.pid, "attempt": 1, "releases": 1}, done
    second.proc.send_signal(signal.SIGINT)
    assert second.proc.wait(30) == 0, second.log()


# The worker process's own beat


def _listed(server: LiveServer, worker_id: str) -> dict[str, Any] | None:
    """The entry of GET /v1/workers for ``worker_id``, if it is listed."""
    with httpx.Client(base_url=server.url) as http:
        answer = http.get("/v1/workers")
    assert answer.status_code == 200, answer.text
    return next((w for w in answer.json()["workers"] if w["worker_id"] == worker_id), None)


def test_an_idle_jobq_worker_is_listed_with_its_process_and_shows_stopped_after_exit(
    server: LiveServer, queue: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """A worker that has had no job is known to the service all the same (it beats), with
    what an operator needs to find it; once it exits it says so."""
    worker_id = f"idle-{queue}"
    idle = start(workers, server.url, queue, tmp_path / "runs", worker_id, concurrency=3)
    entry = eventually(lambda: _listed(server, worker_id), poll_s=0.1,
                       what=lambda: f"the idle worker listed; log:\n{idle.log()}")
    assert (entry["host"], entry["pid"], entry["concurrency"]) == (socket.gethostname(), idle.pid, 3), entry
    assert (entry["state"], entry["in_flight"]) == ("running", 0), entry
    assert entry["started_at"] is not None, entry
    idle.proc.send_signal(signal.SIGINT)
    assert idle.proc.wait(30) == 0, idle.log()
    after = _listed(server, worker_id)
    assert after is not None and after["state"] == "stopped", after


# Heartbeats


def test_handler_running_three_leases_long_is_kept_by_heartbeats_and_runs_once(
    server: LiveServer, jobq: Client, queue: str
) -> None:
    jobq.update_queue(queue, lease_ms=1000)
    job = jobq.enqueue("slow", queue=queue)
    calls: list[int] = []

    def slow(j: Job) -> str:
        calls.append(j.attempt)
        time.sleep(3.0)  # a slow handler: three lease lengths
        return "slept"

    seen: set[Any] = set()

    def lease_moved_twice() -> bool:
        now = jobq.get(job.id)
        assert (now.status, now.attempt, now.errors) == ("running", 1, []), now
        seen.add(now.locked_until)
        return len(seen) >= 3

    with running(Worker(server.url, queues=[queue], handlers={"slow": slow}, wait_ms=1000)):
        eventually(lambda: calls, what=lambda: "the handler starting")
        # Heartbeats move locked_until while the handler runs: the first lease and two more.
        eventually(lease_moved_twice, poll_s=0.05,
                   what=lambda: f"locked_until moving twice; seen {sorted(seen)}")
        done = jobq.wait(job.id, timeout=20)
    assert calls == [1]
    assert (done.status, done.attempt, done.result, done.errors) == ("completed", 1, "slept", [])


# Failures, Retry and Discard


def test_handler_that_always_raises_ends_dead_with_every_error_and_traceback(
    server: LiveServer, jobq: Client, queue: str
) -> None:
    jobq.update_queue(queue, max_attempts=3, backoff_base_ms=10)
    job = jobq.enqueue("boom", {"n": 1}, queue=queue)
    assert job.max_attempts == 3
    calls: list[int] = []

    def always_fails(j: Job) -> None:
        calls.append(j.attempt)
        raise ValueError(f"boom on attempt {j.attempt}")

    with running(Worker(server.url, queues=[queue], handlers={"boom": always_fails}, wait_ms=1000)):
        with pytest.raises(JobFailed) as failed:
            jobq.wait(job.id, timeout=20)
    dead = failed.value.job
    assert (dead.status, dead.attempt) == ("dead", 3)
    assert calls == [1, 2, 3]
    assert [(e.attempt, e.kind) for e in dead.errors] == [(1, "failed"), (2, "failed"), (3, "failed")]
    for n, err in enumerate(dead.errors, start=1):
        assert err.error.startswith(f"ValueError: boom on attempt {n}\n"), err.error
        assert "Traceback (most recent call last)" in err.error
        assert "in always_fails" in err.error and 'raise ValueError(f"boom' in err.error
    assert dead.last_error == dead.errors[-1].error


def test_retry_in_ms_runs_again_after_about_that_delay(server: LiveServer, jobq: Client, queue: str) -> None:
    # The queue's own backoff would wait a minute: only in_ms can bring the retry back soon.
    jobq.update_queue(queue, backoff_base_ms=60_000)
    job = jobq.enqueue("later", queue=queue)
    started: list[float] = []

    def later(j: Job) -> str:
        started.append(time.monotonic())
        if j.attempt == 1:
            raise Retry("not yet", in_ms=1500)
        return "now"

    with running(Worker(server.url, queues=[queue], handlers={"later": later}, wait_ms=1000)):
        done = jobq.wait(job.id, timeout=20)
    assert (done.status, done.attempt, done.result) == ("completed", 2, "now")
    assert len(started) == 2
    gap = started[1] - started[0]
    assert 1.4 <= gap <= 1.5 + 4.0, gap
    assert [(e.attempt, e.kind) for e in done.errors] == [(1, "failed")]
    assert "not yet" in done.errors[0].error


def test_discard_sends_the_job_dead_at_once_with_the_reason(server: LiveServer, jobq: Client, queue: str) -> None:
    job = jobq.enqueue("bad", queue=queue)
    assert job.max_attempts == 25  # attempts are left: only the Discard ends it
    calls: list[int] = []

    def reject(j: Job) -> None:
        calls.append(j.attempt)
        raise Discard("payload lacks an e-mail address")

    with running(Worker(server.url, queues=[queue], handlers={"bad": reject}, wait_ms=1000)):
        with pytest.raises(JobFailed) as failed:
            jobq.wait(job.id, timeout=20)
        # A window in which nothing may happen: a wrongly scheduled retry would be claimed
        # in it. An absence has no event to wait for, so its length is the test.
        time.sleep(0.5)
    dead = failed.value.job
    assert (dead.status, dead.attempt) == ("dead", 1)
    assert calls == [1]
    assert "payload lacks an e-mail address" in (dead.last_error or "")
    assert [(e.attempt, e.kind) for e in dead.errors] == [(1, "failed")]
    assert jobq.get(job.id).status == "dead"


# Concurrency


def test_sync_and_async_handlers_at_concurrency_16_run_every_job_exactly_once(
    server: LiveServer, jobq: Client, queue: str
) -> None:
    per_kind = 200
    lock = threading.Lock()
    active: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    runs: Counter[str] = Counter()

    def enter(kind: str, job_id: str) -> None:
        with lock:
            runs[job_id] += 1
            active[kind] += 1
            active["all"] += 1
            peak[kind] = max(peak[kind], active[kind])
            peak["all"] = max(peak["all"], active["all"])

    def leave(kind: str) -> None:
        with lock:
            active[kind] -= 1
            active["all"] -= 1

    def sync_job(j: Job) -> dict[str, Any]:
        enter("sync", j.id)
        try:
            time.sleep(0.02)  # a handler's work, so that handlers overlap
        finally:
            leave("sync")
        return {"n": j.payload["n"]}

    async def async_job(j: Job) -> dict[str, Any]:
        enter("async", j.id)
        try:
            await asyncio.sleep(0.02)  # a handler's work, so that handlers overlap
        finally:
            leave("async")
        return {"n": j.payload["n"]}

    jobs = jobq.enqueue_many(
        [NewJob(type=kind, payload={"n": n}, queue=queue) for n in range(per_kind) for kind in ("sync", "async")]
    )
    worker = Worker(
        server.url, queues=[queue], handlers={"sync": sync_job, "async": async_job}, concurrency=16, wait_ms=1000
    )
    with running(worker):
        eventually(
            lambda: jobq.queue(queue).counts.completed == 2 * per_kind,
            timeout_s=60,
            poll_s=0.05,
            what=lambda: f"all completed; counts {jobq.queue(queue).counts}",
        )
    counts = jobq.queue(queue).counts
    assert (counts.completed, counts.pending, counts.running, counts.failed, counts.dead) == (2 * per_kind, 0, 0, 0, 0)
    assert set(runs) == {j.id for j in jobs}
    assert set(runs.values()) == {1}, "some job ran twice"
    assert peak["all"] <= 16, peak
    assert peak["sync"] > 1 and peak["async"] > 1, peak
    sample = jobq.get(jobs[-1].id)
    assert sample.result == {"n": jobs[-1].payload["n"]} and sample.attempt == 1
