"""Handlers for workers that the live tests start as subprocesses
(``python -m jobq.cli worker handlers_live:handlers ...`` with tests/sdk on PYTHONPATH),
and ``running``, which runs an in-process ``Worker`` for the tests that need none.

Every run is recorded as lines in the file named by ``JOBQ_LIVE_RUNS`` (opened with
O_APPEND, one ``os.write`` per line, so lines from several processes never interleave):
``start <job id> <attempt> <pid>`` when the handler begins and ``end ...`` just before it
returns. A process killed mid-job leaves a ``start`` without an ``end``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobq.client import Job
from jobq.worker import Worker

RUNS_ENV = "JOBQ_LIVE_RUNS"


def _record(event: str, job: Job) -> None:
    path = os.environ.get(RUNS_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {job.id} {job.attempt} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def sleep(job: Job) -> dict[str, Any]:
    """Sleeps ``payload["s"]`` seconds; on later attempts ``payload["retry_s"]`` (default
    the same), so a job whose first runner was killed can finish quickly elsewhere."""
    _record("start", job)
    seconds = job.payload.get("s", 0) if job.attempt == 1 else job.payload.get("retry_s", job.payload.get("s", 0))
    time.sleep(float(seconds))
    _record("end", job)
    return {"pid": os.getpid(), "attempt": job.attempt}


async def async_sleep(job: Job) -> dict[str, Any]:
    _record("start", job)
    await asyncio.sleep(float(job.payload.get("s", 0)))
    _record("end", job)
    return {"pid": os.getpid(), "attempt": job.attempt}


def noop(job: Job) -> None:
    return None


async def async_noop(job: Job) -> None:
    return None


def slow_once(job: Job) -> dict[str, Any]:
    """Sleeps ``payload["s"]`` seconds, unless a stopping worker released the job before
    (``job.releases``): then it returns at once. A release does not count the claim, so the
    next run has the same ``attempt`` and only ``releases`` tells the runs apart."""
    _record("start", job)
    if not job.releases:
        time.sleep(float(job.payload.get("s", 0)))
    _record("end", job)
    return {"pid": os.getpid(), "attempt": job.attempt, "releases": len(job.releases)}


handlers = {"sleep": sleep, "async_sleep": async_sleep, "noop": noop, "async_noop": async_noop,
            "slow_once": slow_once}


@dataclass(frozen=True)
class Run:
    event: str
    job_id: str
    attempt: int
    pid: int


def read_runs(path: Path) -> list[Run]:
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        event, job_id, attempt, pid = line.split()
        runs.append(Run(event, job_id, int(attempt), int(pid)))
    return runs


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Run ``worker`` in a thread with its own event loop; stop it and wait for it on exit.

    A thread, not a task on the test's loop: sync handlers and the tests' blocking
    ``Client`` calls must not hold up the worker's heartbeats.
    """
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(worker.run_async())
        except BaseException as exc:  # reported in the test, not lost in the thread
            failure.append(exc)

    thread = threading.Thread(target=target, name="jobq-live-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive(), "the worker did not stop within 30 s"
    if failure:
        raise failure[0]
