"""Stopping `jobq serve` while workers hold idle long-polls (the normal state of a fleet): the
long-polls are answered at once with the empty claim answer, never a 5xx, and the process
exits in about a second, with one process or with `--workers N`."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path

import httpx
import pytest

from jobq.worker import Worker
from tests.conftest import LiveServer
from tests.helpers import claim_looked_since, clients_connected, database_now
from tests.waiting import aeventually

LONG_POLLS = 8
WAIT_MS = 25_000
# Before: uvicorn waited out its graceful timeout (5 s), then cancelled the long-polls into
# plain-text 500s, and exited after about 7 s. The bound is far below the wait and that.
EXIT_WITHIN_S = 4.0


async def _long_poll(url: str, queue: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_MS / 1000 + 10) as c:
        return await c.post("/v1/leases", json={"worker_id": "w", "queues": [queue],
                                                "wait_ms": WAIT_MS})


async def _attached(server: LiveServer, queue: str) -> list[asyncio.Task[httpx.Response]]:
    since = database_now(server.database_url)
    polls = [asyncio.create_task(_long_poll(server.url, queue)) for _ in range(LONG_POLLS)]
    # Until they are connected and a claim has looked and found nothing; one that has not
    # looked yet is answered alike (it claims once and finds nothing).
    await aeventually(lambda: clients_connected(server) >= LONG_POLLS and claim_looked_since(server, since),
                      poll_s=0.02, what=f"{LONG_POLLS} long-polls attached")
    assert not any(p.done() for p in polls)
    return polls


async def _stop_and_time(server: LiveServer, sig: signal.Signals) -> float:
    assert server.proc is not None
    started = time.monotonic()
    server.proc.send_signal(sig)
    await asyncio.to_thread(server.proc.wait, 30)
    return time.monotonic() - started


def _check_answers(answers: list[httpx.Response | BaseException]) -> None:
    for a in answers:
        assert isinstance(a, httpx.Response), a
        assert a.status_code == 200, (a.status_code, a.text)
        assert a.json() == {"leases": []}
        assert a.headers.get("connection") == "close"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_stop_answers_idle_long_polls_at_once(database_url: str, sig: signal.Signals) -> None:
    server = LiveServer(database_url)
    server.start()
    try:
        polls = await _attached(server, "stopping")
        took = await _stop_and_time(server, sig)
        answers = await asyncio.gather(*polls, return_exceptions=True)
        log = await asyncio.to_thread(Path(server.log.name).read_text)
    finally:
        server.stop()
    _check_answers(answers)
    assert server.proc is not None and server.proc.returncode == 0, log
    assert took < EXIT_WITHIN_S, (took, log)
    assert "Traceback" not in log and "CancelledError" not in log, log


@pytest.mark.slow
async def test_stop_with_several_worker_processes(database_url: str) -> None:
    server = LiveServer(database_url, args=["--workers", "2"])
    server.start()
    try:
        polls = await _attached(server, "stopping-workers")
        took = await _stop_and_time(server, signal.SIGTERM)
        answers = await asyncio.gather(*polls, return_exceptions=True)
        log = await asyncio.to_thread(Path(server.log.name).read_text)
    finally:
        server.stop()
    _check_answers(answers)
    assert took < EXIT_WITHIN_S, (took, log)
    assert "Traceback" not in log and "CancelledError" not in log, log


async def test_a_claim_in_flight_is_answered_and_later_jobs_stay(database_url: str) -> None:
    """Jobs enqueued while long-polls are attached and the stop comes: each is either leased
    to a client that got the answer, or still pending afterwards; none leased and dropped."""
    server = LiveServer(database_url)
    server.start()
    try:
        polls = await _attached(server, "racing")
        async with httpx.AsyncClient(base_url=server.url) as c:
            ids = [(await c.post("/v1/jobs", json={"type": "t", "queue": "racing"})).json()["id"]
                   for _ in range(3)]
        await _stop_and_time(server, signal.SIGTERM)
        answers = await asyncio.gather(*polls, return_exceptions=True)
    finally:
        server.stop()
    leased: set[str] = set()
    for a in answers:
        assert isinstance(a, httpx.Response) and a.status_code == 200, a
        leased |= {le["job"]["id"] for le in a.json()["leases"]}
    again = LiveServer(database_url)
    again.start()
    try:
        async with httpx.AsyncClient(base_url=again.url) as c:
            for job_id in ids:
                status = (await c.get(f"/v1/jobs/{job_id}")).json()["status"]
                assert status == ("running" if job_id in leased else "pending"), (job_id, status)
    finally:
        again.stop()


async def test_a_worker_takes_the_stop_as_ask_again(database_url: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The SDK's worker, long-polling when its service stops, logs no error: the empty answer
    is an ordinary one, and the refused connections after it a warning while it backs off."""
    server = LiveServer(database_url)
    server.start()
    worker = Worker(server.url, queues=["quiet"], handlers={"t": lambda job: None},
                    concurrency=2, wait_ms=WAIT_MS)
    caplog.set_level(logging.INFO, logger="jobq")
    since = database_now(server.database_url)
    running = asyncio.create_task(worker.run_async())
    try:
        await aeventually(lambda: claim_looked_since(server, since), poll_s=0.02,
                          what="the worker's long-poll attached and idle")
        took = await _stop_and_time(server, signal.SIGTERM)
        # It asks again, and finds nobody: a warning while it backs off.
        await aeventually(lambda: any("claim failed" in r.getMessage() for r in caplog.records),
                          what="the worker's claim refused after the stop")
    finally:
        worker.stop()
        await asyncio.wait_for(running, 30)
        server.stop()
    assert took < EXIT_WITHIN_S
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]
