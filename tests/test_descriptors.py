"""Descriptors are budgeted (issue 24, item 2): the service raises its soft descriptor limit
at start and says what it got; long-polls past a cap derived from it are answered at once
(the jobs found, or 503 ``too_many_long_polls`` with Retry-After), so that waiting workers
never take the descriptors enqueues, acks and heartbeats need; running out of descriptors
(EMFILE) is a 503, never a 500; the SDK's worker waits the refusal out quietly.

Measured before: started with ``ulimit -n 1024`` and 1,500 long-polls, the service filled
its descriptors with them, all 999 enqueues failed, a claim answered 500, and 1 job of
1,000 was picked up.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from jobq.api.longpolls import LongPolls
from jobq.client import Client, Unavailable
from jobq.descriptors import current, default_max_long_polls, exhausted, raise_soft_limit
from jobq.domain import errors as e
from jobq.settings import Settings
from jobq.store.db import Database
from jobq.worker import Worker
from tests.conftest import LiveServer, make_settings, running_app
from tests.helpers import counts, enqueue, problem, retry_after
from tests.waiting import aeventually, eventually

# --- the default cap and the setting ------------------------------------------------------


def test_the_default_cap_keeps_room_for_the_pool_and_ordinary_requests() -> None:
    # (limit - pool - 3 sessions - 64 of the process's own) // 2
    assert default_max_long_polls(1024, 10) == (1024 - 10 - 3 - 64) // 2 == 473
    assert default_max_long_polls(256, 10) == 89
    assert default_max_long_polls(65536, 50) == (65536 - 50 - 67) // 2
    # A bigger pool leaves fewer descriptors to long-polls.
    assert default_max_long_polls(1024, 100) < default_max_long_polls(1024, 10)
    # Whatever the limit, at least one long-poll may wait, and never more than half of it.
    assert default_max_long_polls(16, 10) == 1
    for limit in (128, 256, 1024, 4096, 1 << 20):
        assert 1 <= default_max_long_polls(limit, 10) <= limit // 2


def test_the_setting_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().max_long_polls is None
    assert Settings().long_poll_cap(1024) == 473
    monkeypatch.setenv("JOBQ_MAX_LONG_POLLS", "300")
    assert Settings().max_long_polls == 300 and Settings().long_poll_cap(1024) == 300
    monkeypatch.setenv("JOBQ_MAX_LONG_POLLS", "")  # compose's way of leaving it unset
    assert Settings().max_long_polls is None
    for bad in ("0", "-5", "many", "1.5", "2000000"):
        monkeypatch.setenv("JOBQ_MAX_LONG_POLLS", bad)
        with pytest.raises(ValidationError) as info:
            Settings()
        assert info.value.errors()[0]["loc"] == ("max_long_polls",), bad


async def test_the_start_log_names_the_limit_and_the_cap(
        database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobq.api")
    limit = current().usable  # the test process's, raised to its hard limit by the app
    async with running_app(make_settings(database_url, max_long_polls=1_000_000)) as app:
        assert app.state.long_polls.cap == 1_000_000
    said = [r.getMessage() for r in caplog.records if r.name == "jobq.api"]
    assert any("descriptor limit" in m and "long-polls capped at 1000000 (JOBQ_MAX_LONG_POLLS)" in m
               for m in said), said
    if limit < 1_000_000:  # more than the limit holds: said at start, not at the first EMFILE
        assert any(r.levelno == logging.WARNING and "leaves no room" in r.getMessage()
                   for r in caplog.records), said


def test_raising_the_soft_limit_reaches_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        lower = min(soft, 256) if hard == resource.RLIM_INFINITY else min(soft, hard, 256) - 1
        resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
        got = raise_soft_limit()
        assert got.before == lower
        assert got.soft == current().soft and got.soft is not None and got.soft > lower
        if hard != resource.RLIM_INFINITY:
            assert got.soft == hard
        assert f"raised from {lower}" in got.describe()
        assert raise_soft_limit().describe() == current().describe()  # nothing left to raise
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_out_of_descriptors_is_told_apart() -> None:
    assert exhausted(OSError(errno.EMFILE, "Too many open files"))
    assert exhausted(OSError(errno.ENFILE, "Too many open files in system"))
    # libpq says it in words: psycopg's error for a socket it could not create.
    assert exhausted(psycopg.OperationalError(
        "connection failed: could not create socket: Too many open files"))
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert exhausted(outer)
    assert not exhausted(OSError(errno.ENOENT, "No such file or directory"))
    assert not exhausted(psycopg.OperationalError("connection refused"))


def test_the_counter_holds_a_place_only_while_a_long_poll_waits() -> None:
    gate = LongPolls(cap=2)
    with gate.admit(0, ["q"], None) as may:  # no wait asked: never counted, never refused
        assert may and gate.waiting == 0
    with gate.admit(100, ["q"], None) as a, gate.admit(100, ["q"], None) as b, \
            gate.admit(100, ["q"], None) as c, gate.admit(0, ["q"], None) as d:
        assert (a, b, c, d) == (True, True, False, True) and gate.waiting == 2
    assert gate.waiting == 0 and not gate.watched(["q"], None)
    with pytest.raises(RuntimeError), gate.admit(100, ["q"], None):
        raise RuntimeError("a claim that failed gives its place back")
    assert gate.waiting == 0 and not gate.watched(["q"], None)


def test_a_refused_claim_looks_itself_unless_waiting_claims_take_its_jobs() -> None:
    gate = LongPolls(cap=10)
    with gate.admit(100, ["a", "b"], None), gate.admit(100, ["c"], ["x", "y"]):
        assert gate.watched(["a"], None) and gate.watched(["b", "a"], ["z"])
        assert not gate.watched(["a", "d"], None)  # nobody waits on d
        assert gate.watched(["c"], ["y", "x"])  # the same types
        assert not gate.watched(["c"], ["x"]) and not gate.watched(["c"], None)
    assert not gate.watched(["a"], None)


# --- in-process: the cap's answers ---------------------------------------------------------


@pytest.fixture
async def capped(database_url: str) -> AsyncIterator[FastAPI]:
    async with running_app(make_settings(database_url, max_long_polls=1)) as application:
        yield application


@pytest.fixture
async def c(capped: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=capped)
    async with httpx.AsyncClient(transport=transport, base_url="http://jobq", timeout=30) as client:
        yield client


def _claim(queue: str, wait_ms: int, **more: Any) -> dict[str, Any]:
    return {"worker_id": "w", "queues": [queue], "wait_ms": wait_ms, **more}


async def _hold_the_cap(c: httpx.AsyncClient, app: FastAPI) -> asyncio.Task[httpx.Response]:
    held = asyncio.create_task(c.post("/v1/leases", json=_claim("elsewhere", 30_000)))
    await aeventually(lambda: app.state.long_polls.waiting == 1, what="the long-poll waiting")
    return held


async def test_a_long_poll_past_the_cap_is_answered_at_once(
        c: httpx.AsyncClient, capped: FastAPI) -> None:
    held = await _hold_the_cap(c, capped)
    r = await c.post("/v1/leases", json=_claim("q", 30_000))
    body = problem(r, 503, "too_many_long_polls")
    # Spread over 1 to 5 times JOBQ_RETRY_AFTER_S (1 s): a fleet refused together does not
    # come back together.
    assert 1 <= retry_after(r) <= 5
    assert r.headers["connection"] == "close"  # its descriptor goes back at once
    assert "JOBQ_MAX_LONG_POLLS" in body["detail"]
    assert not held.done()  # refused while the one in the cap still waits: not made to wait
    # A claim that does not wait is not counted, and acks, heartbeats, enqueues go on.
    job = await enqueue(c, queue="q")
    r = await c.post("/v1/leases", json=_claim("q", 0))
    assert r.status_code == 200 and r.json()["leases"][0]["job"]["id"] == job["id"]
    lease = r.json()["leases"][0]["lease_id"]
    assert (await c.post(f"/v1/leases/{lease}/heartbeat")).status_code == 200
    assert (await c.post(f"/v1/leases/{lease}/ack")).status_code == 200
    # Past the cap, a long-poll that finds a job at once gets it rather than a 503.
    job = await enqueue(c, queue="q")
    r = await c.post("/v1/leases", json=_claim("q", 30_000))
    assert r.status_code == 200, r.text
    assert [le["job"]["id"] for le in r.json()["leases"]] == [job["id"]]
    assert not held.done()
    # The place is given back when the waiting claim ends: the next long-poll waits.
    await enqueue(c, queue="elsewhere")
    assert (await held).status_code == 200
    assert capped.state.long_polls.waiting == 0
    waiting = asyncio.create_task(c.post("/v1/leases", json=_claim("q", 30_000)))
    await aeventually(lambda: capped.state.long_polls.waiting == 1, what="the next long-poll waiting")
    job = await enqueue(c, queue="q")
    r = await waiting
    assert r.status_code == 200 and r.json()["leases"][0]["job"]["id"] == job["id"]


async def test_out_of_descriptors_is_a_503_never_a_500(database_url: str) -> None:
    """EMFILE met anywhere in a request is load, to be retried; any other OSError is still
    a bug, a 500 with its traceback logged."""
    async with running_app(make_settings(database_url)) as application:
        @application.post("/test/raise/{which}")
        async def fail(which: str) -> None:
            raise OSError(errno.EMFILE if which == "emfile" else errno.ENOENT, "from the test")

        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq") as client:
            r = await client.post("/test/raise/emfile")
            body = problem(r, 503, "unavailable")
            assert retry_after(r) == 1 and "file descriptor" in body["detail"]
            r = await client.post("/test/raise/enoent")
            assert r.status_code == 500 and r.json()["code"] == "internal", r.text
    # The store's translation: a connection that could not be opened for want of descriptors.
    db = Database(database_url, pool_size=1, timeout_s=1, retry_after_s=3)
    with pytest.raises(e.Unavailable) as info:
        with db.translate():
            raise psycopg.OperationalError("could not create socket: Too many open files")
    assert info.value.retry_after_s == 3 and "file descriptor" in info.value.detail


# --- for real: jobq serve with 256 descriptors ---------------------------------------------

SOFT, HARD = 128, 256
POOL = 10  # jobq serve's default JOBQ_POOL_SIZE
CAP = default_max_long_polls(HARD, POOL)  # 89
WAVE, WAVES = 100, 3  # 300 long-polls: more than the process has descriptors
JOBS = 50


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, HARD))


@pytest.fixture
def fd_server(database_url: str) -> Iterator[LiveServer]:
    server = LiveServer(database_url, preexec_fn=_few_descriptors)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_long_polls_past_the_descriptor_budget_leave_work_going(fd_server: LiveServer) -> None:
    log = await asyncio.to_thread(Path(fd_server.log.name).read_text)
    assert f"descriptor limit {HARD} (raised from {SOFT} to the hard limit {HARD})" in log, log
    assert f"long-polls capped at {CAP} " in log, log
    queue = f"q-{uuid.uuid4().hex[:8]}"
    answers: list[httpx.Response] = []
    failures: list[BaseException] = []
    # A connection per long-poll, as a fleet's workers each hold one.
    polls = httpx.AsyncClient(base_url=fd_server.url, timeout=60,
                              limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))

    async def long_poll() -> None:
        try:
            answers.append(await polls.post("/v1/leases", json=_claim(queue, 30_000)))
        except httpx.HTTPError as exc:
            failures.append(exc)

    tasks: list[asyncio.Task[None]] = []
    try:
        async with httpx.AsyncClient(base_url=fd_server.url, timeout=30) as c:
            # In waves, as workers come up: each wave past the cap is refused at once, and
            # its connections closed, before the next. Without the cap the waiting
            # long-polls take every descriptor by the third wave.
            for wave in range(1, WAVES + 1):
                tasks += [asyncio.create_task(long_poll()) for _ in range(WAVE)]
                want = wave * WAVE - CAP
                await aeventually(lambda want=want: len(answers) + len(failures) >= want,
                                  what=lambda want=want: f"{want} long-polls refused at once, got "
                                  f"{len(answers)} answers and {failures[:3]}")
            refused = list(answers)
            assert not failures, failures[:5]
            assert len(refused) == WAVES * WAVE - CAP
            for r in refused:
                problem(r, 503, "too_many_long_polls")
                assert retry_after(r) >= 1 and r.headers["connection"] == "close"
            # Meanwhile enqueues, heartbeats and acks work, and every job is picked up by
            # the long-polls that wait.
            jobs = {(await enqueue(c, queue=queue))["id"] for _ in range(JOBS)}
            await aeventually(lambda: len(answers) >= len(refused) + JOBS,
                              what=lambda: f"{JOBS} jobs claimed by waiting long-polls "
                              f"({len(answers) - len(refused)} so far)")
            claimed = answers[len(refused):]
            leases = [le for r in claimed for le in r.json()["leases"]]
            assert all(r.status_code == 200 for r in claimed), [r.text for r in claimed][:3]
            assert {le["job"]["id"] for le in leases} == jobs
            for le in leases:
                r = await c.post(f"/v1/leases/{le['lease_id']}/heartbeat")
                assert r.status_code == 200, r.text
                r = await c.post(f"/v1/leases/{le['lease_id']}/ack", json={"result": 1})
                assert r.status_code == 200, r.text
            assert (await counts(c, queue))["completed"] == JOBS
            assert len(answers) == len(refused) + JOBS  # the rest still wait, undisturbed
            assert not failures, failures[:5]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await polls.aclose()
    log = await asyncio.to_thread(Path(fd_server.log.name).read_text)
    for sign in ("Too many open files", "Traceback", "Exception in ASGI"):
        assert sign not in log, log[-3000:]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_accept_out_of_descriptors_neither_kills_nor_spins(database_url: str) -> None:
    """More connections than descriptors, none sending anything (the header timeout is long
    here): the process sits at its limit, where accept() fails with EMFILE. The event loop
    (uvloop, as libuv does) closes what it cannot take instead of retrying in a loop: the
    process stays up and idle, and serves again once the connections go. (This held before
    the descriptor budget too; it is what the budget relies on.)"""
    server = LiveServer(database_url, env={"JOBQ_HEADER_TIMEOUT_S": "60"},
                        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (HARD, HARD)))
    server.start()
    assert server.proc is not None
    idle: list[socket.socket] = []
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(HARD + 100)]
        await aeventually(lambda: len(os.listdir(f"/proc/{server.proc.pid}/fd")) >= HARD - 1,  # type: ignore[union-attr]
                          what="the process at its descriptor limit")
        before = _cpu_seconds(server.proc.pid)
        await asyncio.sleep(3)
        # A loop retrying accept() would burn the whole 3 s; a second is far above idle.
        assert _cpu_seconds(server.proc.pid) - before < 1.0
        assert server.proc.poll() is None
    finally:
        for s in idle:
            s.close()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            await aeventually(lambda: _enqueued(c), what="an enqueue answered 201 again")
        log = await asyncio.to_thread(Path(server.log.name).read_text)
    finally:
        server.stop()
    assert "Traceback" not in log, log[-3000:]


async def _enqueued(c: httpx.AsyncClient) -> bool:
    try:
        return (await c.post("/v1/jobs", json={"type": "t"})).status_code == 201
    except httpx.TransportError:
        return False


# --- the SDK and the worker wait the refusal out ------------------------------------------


@pytest.fixture
def capped_server(database_url: str) -> Iterator[LiveServer]:
    server = LiveServer(database_url, env={"JOBQ_MAX_LONG_POLLS": "1"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_the_worker_waits_out_the_cap_quietly(
        capped_server: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="jobq.worker")
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=capped_server.url, timeout=60) as c:
        async def hold() -> httpx.Response:
            while True:  # until it waits, should a probe below have had the place first
                r = await c.post("/v1/leases", json=_claim("elsewhere", 30_000))
                if r.status_code != 503:
                    return r
                await asyncio.sleep(0.05)

        held = asyncio.create_task(hold())

        def refused() -> Unavailable | None:
            with Client(capped_server.url, timeout=30) as sdk:
                try:
                    sdk.claim([queue], worker_id="probe", wait_ms=1)
                except Unavailable as exc:
                    return exc
            return None

        # The SDK: a RetryableError with the code and the Retry-After to wait.
        exc = await aeventually(lambda: asyncio.to_thread(refused), what="the cap full")
        assert exc.code == "too_many_long_polls" and exc.retry_after in (1, 2, 3, 4, 5)
        done: list[str] = []
        worker = Worker(capped_server.url, queues=[queue], handlers={"t": lambda j: done.append(j.id)},
                        wait_ms=20_000, concurrency=1)
        running = asyncio.create_task(worker.run_async())
        try:
            def quiet(r: logging.LogRecord) -> bool:
                return r.name == "jobq.worker" and "limit of waiting claims" in r.getMessage()

            await aeventually(lambda: sum(r.levelno == logging.DEBUG for r in caplog.records if quiet(r)) >= 2,
                              what="the worker refused twice and asking again")
            said = [r for r in caplog.records if quiet(r)]
            assert [r.levelno for r in said if r.levelno > logging.DEBUG] == [logging.INFO], said
            # Past the cap the worker still gets work: its next claim finds the job.
            job = await enqueue(c, queue=queue)
            await aeventually(lambda: done == [job["id"]], what="the job run by the worker")
            await aeventually(lambda: _completed(c, job["id"]), what="the job acked")
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
    loud = [r for r in caplog.records if r.name == "jobq.worker" and r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]


async def _completed(c: httpx.AsyncClient, job_id: str) -> bool:
    r = await c.get(f"/v1/jobs/{job_id}")
    return r.status_code == 200 and r.json()["status"] == "completed"


def test_a_long_poll_whose_client_hangs_up_gives_its_place_back_at_once(database_url: str) -> None:
    """A worker that aborts its long-poll (a graceful stop does) or dies: its claim stops
    waiting the moment the connection closes, not when its wait_ms runs out, so the place
    it held under JOBQ_MAX_LONG_POLLS is free for the next worker at once (and a stopping
    service has no claim left to wait for)."""
    server = LiveServer(database_url, env={"JOBQ_MAX_LONG_POLLS": "1"})
    server.start()
    try:
        body = b'{"worker_id": "gone", "queues": ["nobody-enqueues"], "wait_ms": 30000}'
        held = socket.create_connection(("127.0.0.1", server.port))
        held.sendall(b"POST /v1/leases HTTP/1.1\r\nHost: jobq\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

        def probe() -> int:
            # wait_ms 500: admitted, it waits half a second and answers 200; refused, 503.
            return httpx.post(server.url + "/v1/leases", timeout=10,
                              json={"worker_id": "probe", "queues": ["q"], "wait_ms": 500}).status_code

        eventually(lambda: probe() == 503, what="the held long-poll filling the cap of 1")
        held.close()
        eventually(lambda: probe() == 200, timeout_s=5, what="the place given back after the hang-up")
    finally:
        server.stop()
