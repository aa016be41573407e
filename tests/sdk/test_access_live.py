"""The SDK, the worker and ``jobq worker`` against a real service that has access tokens:
the token from ``token=`` or ``JOBQ_TOKEN``, and 401/403 as typed errors that stop, once,
rather than retry.

One ``jobq serve`` per module on its own fresh database, with a worker, a producer and an
admin token made in that database before it starts (so it is never in local mode).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from jobq.client import AsyncClient, Client, Forbidden, NotFound, Unauthorized
from jobq.core import tokens as core_tokens
from jobq.domain.access import Role
from jobq.store.db import Database
from jobq.worker import Worker
from tests import pg
from tests.conftest import ROOT, LiveServer

HERE = Path(__file__).resolve().parent
WRONG = "jq_000000000000_" + "x" * 43  # well-formed, unknown


@dataclass
class Tokens:
    worker: str
    producer: str  # queues tenant-a.*
    admin: str


async def _make_tokens(url: str) -> Tokens:
    db = Database(url, pool_size=1, timeout_s=5, retry_after_s=1)
    await db.open(wait=True)
    try:
        _, worker = await core_tokens.create(db, Role.WORKER, "*", "worker")
        _, producer = await core_tokens.create(db, Role.PRODUCER, "tenant-a.*", "producer")
        _, admin = await core_tokens.create(db, Role.ADMIN)
    finally:
        await db.close()
    return Tokens(worker, producer, admin)


@pytest.fixture(scope="module")
def live(admin_url: str, template_db: str) -> Iterator[tuple[LiveServer, Tokens]]:
    name = pg.clone(admin_url, template_db)
    url = pg.with_database(admin_url, name)
    tokens = asyncio.run(_make_tokens(url))
    server = LiveServer(url, env={"JOBQ_ADMIN_TOKEN": "", "JOBQ_TOKEN": ""})
    try:
        server.start()
        yield server, tokens
    finally:
        server.stop()
        pg.drop(admin_url, name)


@pytest.fixture
def server(live: tuple[LiveServer, Tokens]) -> LiveServer:
    return live[0]


@pytest.fixture
def tokens(live: tuple[LiveServer, Tokens]) -> Tokens:
    return live[1]


@pytest.fixture
def queue() -> str:
    return f"tenant-a.{uuid.uuid4().hex[:10]}"


class Counting(httpx.HTTPTransport):
    """The network transport, counting the requests that reach the service."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


def test_client_takes_jobq_token_from_the_environment(
        server: LiveServer, tokens: Tokens, queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_TOKEN", tokens.producer)
    with Client(server.url) as c:
        job = c.enqueue("t", queue=queue)
        assert c.get(job.id).queue == queue
    monkeypatch.delenv("JOBQ_TOKEN")
    with Client(server.url) as c, pytest.raises(Unauthorized) as info:
        c.get(job.id)
    assert "access token" in str(info.value)


def test_refusals_are_typed_and_sent_once(server: LiveServer, tokens: Tokens, queue: str) -> None:
    transport = Counting()
    with Client(server.url, token=WRONG, retry_overload=30, transport=transport) as c:
        with pytest.raises(Unauthorized) as info:
            c.enqueue("t", queue=queue)
    assert transport.sent == 1 and info.value.status == 401
    assert info.value.code == "unauthorized"

    transport = Counting()
    with Client(server.url, token=tokens.producer, retry_overload=30, transport=transport) as c:
        with pytest.raises(Forbidden):
            c.enqueue("t", queue="tenant-b.mail")  # outside tenant-a.*
        with pytest.raises(Forbidden):
            c.queues()  # an admin's call
    assert transport.sent == 2

    # A job of a queue outside the token's pattern does not exist for it.
    with Client(server.url, token=tokens.admin) as admin:
        other = admin.enqueue("t", queue="tenant-b.mail")
    with Client(server.url, token=tokens.producer) as c, pytest.raises(NotFound):
        c.get(other.id)


async def test_async_client_refusal(server: LiveServer, queue: str) -> None:
    async with AsyncClient(server.url, token=WRONG, retry_overload=30) as c:
        with pytest.raises(Unauthorized):
            await c.claim([queue], worker_id="w", wait_ms=0)


async def test_worker_with_a_wrong_token_stops_at_its_first_claim(server: LiveServer,
                                                                   queue: str) -> None:
    worker = Worker(server.url, queues=[queue], handlers={"t": lambda j: None}, token=WRONG)
    with pytest.raises(Unauthorized):
        await asyncio.wait_for(worker.run_async(), 15)


async def test_worker_with_a_producer_token_is_forbidden(server: LiveServer, tokens: Tokens,
                                                          queue: str) -> None:
    worker = Worker(server.url, queues=[queue], handlers={"t": lambda j: None},
                    token=tokens.producer)
    with pytest.raises(Forbidden):
        await asyncio.wait_for(worker.run_async(), 15)


async def test_worker_reads_jobq_token_and_works(server: LiveServer, tokens: Tokens, queue: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_TOKEN", tokens.worker)
    async with AsyncClient(server.url, token=tokens.producer) as producer:
        job = await producer.enqueue("t", {"n": 2}, queue=queue)
        worker = Worker(server.url, queues=[queue], handlers={"t": lambda j: j.payload["n"] * 21},
                        wait_ms=200)
        task = asyncio.create_task(worker.run_async())
        try:
            done = await producer.wait(job.id, timeout=15)
        finally:
            worker.stop()
            await asyncio.wait_for(task, 10)
    assert done.result == 42


async def test_a_token_revoked_while_a_job_runs_stops_the_worker(
        admin_url: str, template_db: str, queue: str) -> None:
    """Heartbeats refused: the worker stops (once) instead of beating for ever."""
    name = pg.clone(admin_url, template_db)
    url = pg.with_database(admin_url, name)
    tokens = await _make_tokens(url)
    server = LiveServer(url, env={"JOBQ_ADMIN_TOKEN": "", "JOBQ_TOKEN": ""})
    started = asyncio.Event()

    async def long_job(job: object) -> None:
        started.set()
        await asyncio.sleep(60)  # runs until the revoked token stops the worker

    try:
        await asyncio.to_thread(server.start)
        async with AsyncClient(server.url, token=tokens.admin) as admin:
            await admin.enqueue("t", queue=queue)
            # A one-job worker: while the job runs it only heartbeats (every 0.33 s).
            worker = Worker(server.url, queues=[queue], handlers={"t": long_job},
                            token=tokens.worker, concurrency=1, lease_ms=1000, grace_period=0.5)
            task = asyncio.create_task(worker.run_async())
            await asyncio.wait_for(started.wait(), 15)
            worker_id = tokens.worker.split("_")[1]
            async with httpx.AsyncClient(base_url=server.url) as http:
                revoked = await http.delete(f"/v1/tokens/{worker_id}",
                                            headers={"Authorization": f"Bearer {tokens.admin}"})
            assert revoked.status_code == 200, revoked.text
            with pytest.raises(Unauthorized):
                await asyncio.wait_for(task, 15)
    finally:
        await asyncio.to_thread(server.stop)
        pg.drop(admin_url, name)


def _jobq_worker(server: LiveServer, queue: str, *args: str, token: str | None = None,
                 **popen: object) -> subprocess.Popen[str]:
    """``jobq worker`` with the token in JOBQ_TOKEN (as the README shows), or none."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_TOKEN", "JOBQ_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    if token is not None:
        env["JOBQ_TOKEN"] = token
    return subprocess.Popen(
        [sys.executable, "-m", "jobq.cli", "worker", "handlers_live:handlers", "--queues", queue,
         "--url", server.url, *args],
        cwd=ROOT, env=env, text=True, **popen)  # type: ignore[call-overload]


@pytest.mark.parametrize("how", ["JOBQ_TOKEN", "--token"])
def test_jobq_worker_command_exits_1_with_one_clear_line(server: LiveServer, queue: str,
                                                         how: str) -> None:
    args, token = (["--token", WRONG], None) if how == "--token" else ([], WRONG)
    proc = _jobq_worker(server, queue, *args, token=token,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "401 unauthorized" in stderr and "mistyped or revoked: check JOBQ_TOKEN, --token" in stderr
    assert "Traceback" not in stderr
    # The refusal is said once, as the one ERROR line.
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, stderr
    assert "claim refused by the service" in errors[0], errors


def test_jobq_worker_takes_its_token_from_jobq_token(server: LiveServer, tokens: Tokens,
                                                     queue: str, tmp_path: Path) -> None:
    """The README's form, JOBQ_TOKEN=$WORKER jobq worker ...: no token on the command line."""
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = _jobq_worker(server, queue, token=tokens.worker, stdout=out, stderr=out)
    try:
        with Client(server.url, token=tokens.producer) as producer:
            job = producer.enqueue("noop", queue=queue)
            done = producer.wait(job.id, timeout=30)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert done.status == "completed", log.read_text()
    assert proc.returncode == 0, log.read_text()
