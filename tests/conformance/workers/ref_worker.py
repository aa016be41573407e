"""A conforming jobq worker in plain httpx, without the SDK: the reference that `jobq
conformance` is tested against, and an example of the rules in openapi/GUIDE.md ("What every
worker must do") for anyone writing a worker in another language:

1. Claim with a long-poll (``wait_ms`` 20000), never spin; one claim loop.
2. Take the queue's lease (no ``lease_ms``), read its length off ``locked_until`` and
   heartbeat every third of it; ``409 lease_lost`` on a heartbeat: the job is not ours any
   more, so stop it and report nothing.
3. Ack with the result; fail with ``error`` (``retry: false`` when retrying cannot help);
   never ack a failure.
4. On SIGTERM or SIGINT: stop claiming at once (a waiting claim is aborted), give the running
   job ``GRACE_S`` to finish, release it if it did not (and anything claimed but not
   started), then exit.
5. On 429 or 503 wait ``Retry-After`` before the next call of that kind; on a connection
   error or another error answer, back off with jitter. Never hammer.

It reads ``JOBQ_URL``, ``JOBQ_TOKEN`` (when the service has tokens) and ``JOBQ_QUEUES``
(comma-separated), and handles the kit's job types: ``conformance.echo`` (the payload is the
result), ``conformance.fail`` (fail with ``payload.message``, not to be retried) and
``conformance.sleep`` (sleep ``payload.ms``, then ``{"slept": ms}``). One job at a time.

``JOBQ_BROKEN`` makes it break one rule, so that the kit's tests see each check fail:
``wrong-result``, ``double-ack``, ``ack-failures``, ``no-heartbeat``, ``spin``,
``ignore-retry-after``, ``exit-without-release``, ``claim-after-term``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import sys
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

URL = os.environ.get("JOBQ_URL", "http://127.0.0.1:8000")
TOKEN = os.environ.get("JOBQ_TOKEN")
QUEUES = [q for q in os.environ.get("JOBQ_QUEUES", "default").split(",") if q]
BROKEN = os.environ.get("JOBQ_BROKEN", "")
WORKER_ID = f"ref-py-{socket.gethostname()}-{os.getpid()}"
WAIT_MS = 20_000  # the long-poll: an idle worker makes one claim per 20 s
GRACE_S = 2.0  # how long a running job may go on after SIGTERM before it is released
REPORT_TRIES = 5  # an ack, fail or release is sent again this many times through 429/503
T = TypeVar("T")


def log(message: str) -> None:
    print(f"ref_worker: {message}", file=sys.stderr, flush=True)


class Permanent(Exception):
    """A failure retrying cannot fix: the job is failed with ``retry: false``."""


class Refused(Exception):
    """A 429 or 503: the service asks to come back after ``retry_after`` seconds."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"{response.status_code} {response.text[:200]}")
        self.retry_after = retry_after(response)


async def handle(job: dict[str, Any]) -> Any:
    payload = job["payload"]
    if job["type"] == "conformance.echo":
        return {"echoed": payload} if BROKEN == "wrong-result" else payload
    if job["type"] == "conformance.fail":
        raise Permanent(payload["message"])
    if job["type"] == "conformance.sleep":
        await asyncio.sleep(payload["ms"] / 1000)
        return {"slept": payload["ms"]}
    raise Permanent(f"no handler for job type {job['type']!r}")


def retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (the service sends whole seconds); None without."""
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def backoff(failures: int) -> float:
    """1, 2, 4 … up to 30 s, each spread over its upper half so that workers refused together
    do not come back together."""
    return min(30.0, 2.0 ** max(0, failures - 1)) * random.uniform(0.5, 1.0)


async def done_or_stopping(task: asyncio.Future[Any], stopping: asyncio.Event) -> None:
    """Wait until ``task`` is done or ``stopping`` is set."""
    stop = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    stop.cancel()


async def unless_stopped(call: Awaitable[T], stopping: asyncio.Event) -> T | None:
    """``call``'s result, or None when ``stopping`` is set first: the call is cancelled then,
    which closes its connection, so a waiting long-poll ends at once and claims nothing."""
    task = asyncio.ensure_future(call)
    await done_or_stopping(task, stopping)
    if not task.done():
        task.cancel()
    try:
        return await task  # when both came at once, what was claimed is returned (and released)
    except asyncio.CancelledError:
        return None


async def pause(seconds: float, stopping: asyncio.Event) -> None:
    """Sleep, unless the worker is told to stop meanwhile."""
    await unless_stopped(asyncio.sleep(seconds), stopping)


async def claim(http: httpx.AsyncClient, wait_ms: int) -> list[dict[str, Any]]:
    # No lease_ms: the queue's lease applies, and it is read off locked_until.
    r = await http.post("/v1/leases", json={"worker_id": WORKER_ID, "queues": QUEUES, "wait_ms": wait_ms},
                        timeout=httpx.Timeout(10.0, read=wait_ms / 1000 + 10))
    if r.status_code in (429, 503):
        raise Refused(r)
    r.raise_for_status()
    return r.json()["leases"]


async def report(http: httpx.AsyncClient, lease_id: str, verb: str, body: dict[str, Any]) -> None:
    """Ack, fail, or release a lease; through 429/503 and connection errors it is sent again
    (the lease id fences it: a repeat can never touch another claim of the job)."""
    for tries in range(1, REPORT_TRIES + 1):
        try:
            r = await http.post(f"/v1/leases/{lease_id}/{verb}", json=body)
        except httpx.TransportError as exc:
            log(f"{verb} {lease_id}: {exc!r}; again")
            await asyncio.sleep(backoff(tries))
            continue
        if r.status_code not in (429, 503):
            if r.status_code == 409:
                log(f"{verb} {lease_id}: the lease was lost (another claim owns the job now)")
            elif r.is_error:
                log(f"{verb} {lease_id}: {r.status_code} {r.text[:200]}")
            return
        await asyncio.sleep(retry_after(r) or backoff(tries))
    log(f"{verb} {lease_id}: gave up after {REPORT_TRIES} tries; the lease will run out")


def lease_seconds(locked_until: str) -> float:
    until = datetime.fromisoformat(locked_until)
    return max(0.3, (until - datetime.now(UTC)).total_seconds())


async def heartbeat(http: httpx.AsyncClient, lease: dict[str, Any], work: asyncio.Task[Any]) -> None:
    """Extend the lease every third of its length while the job runs; once the lease is lost,
    the job is not ours: stop it."""
    every = lease_seconds(lease["locked_until"]) / 3
    while True:
        await asyncio.sleep(every)
        if BROKEN == "no-heartbeat":
            continue
        try:
            r = await http.post(f"/v1/leases/{lease['lease_id']}/heartbeat", json={})
        except httpx.TransportError as exc:
            log(f"heartbeat: {exc!r}; again at the next beat")
            continue
        if r.status_code == 409:
            log(f"job {lease['job']['id']}: lease lost; stopping it, nothing to report")
            work.cancel()
            return


async def run_job(http: httpx.AsyncClient, lease: dict[str, Any], stopping: asyncio.Event) -> None:
    job, lease_id = lease["job"], lease["lease_id"]
    log(f"job {job['id']} ({job['type']}), lease {lease_id}")
    work = asyncio.ensure_future(handle(job))
    beats = asyncio.ensure_future(heartbeat(http, lease, work))
    await done_or_stopping(work, stopping)
    if not work.done():
        # Told to stop: the job gets a grace period, then goes back to the queue unfinished.
        await asyncio.wait({work}, timeout=GRACE_S)
    beats.cancel()
    if not work.done():
        work.cancel()
        if BROKEN == "exit-without-release":
            log(f"job {job['id']}: not finished; exiting without releasing it")
            return
        log(f"job {job['id']}: not finished within {GRACE_S:g} s of the stop; releasing it")
        await report(http, lease_id, "release", {})
        return
    if work.cancelled():
        return  # its lease was lost
    try:
        result = work.result()
    except Permanent as exc:
        error, retry = str(exc), False
    except Exception as exc:
        error, retry = f"{type(exc).__name__}: {exc}", True
    else:
        await report(http, lease_id, "ack", {"result": result})
        if BROKEN == "double-ack":
            await report(http, lease_id, "ack", {"result": result})
        return
    if BROKEN == "ack-failures":
        await report(http, lease_id, "ack", {"result": {"error": error}})
        return
    await report(http, lease_id, "fail", {"error": error, "retry": retry})


async def main() -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    async with httpx.AsyncClient(base_url=URL, headers=headers, timeout=10.0) as http:
        failures = 0
        while not stopping.is_set():
            try:
                leases = await unless_stopped(claim(http, 0 if BROKEN == "spin" else WAIT_MS), stopping)
            except Refused as exc:
                failures += 1
                wait = exc.retry_after if exc.retry_after is not None else backoff(failures)
                if BROKEN == "ignore-retry-after":
                    wait = 0.1
                log(f"claim refused ({exc}); next claim in {wait:.1f} s")
                await pause(wait, stopping)
                continue
            except httpx.HTTPError as exc:
                failures += 1
                wait = backoff(failures)
                log(f"claim failed ({exc!r}); next claim in {wait:.1f} s")
                await pause(wait, stopping)
                continue
            failures = 0
            for lease in leases or []:
                if stopping.is_set():
                    await report(http, lease["lease_id"], "release", {})  # claimed, not started
                else:
                    await run_job(http, lease, stopping)
        if BROKEN == "claim-after-term":
            # The broken variant looks for work once more after being told to stop.
            for lease in await claim(http, 0):
                await report(http, lease["lease_id"], "release", {})
    log("stopped")


if __name__ == "__main__":
    asyncio.run(main())
