"""Connections that never finish their request line and headers are closed after
JOBQ_HEADER_TIMEOUT_S, and do not keep anyone else from being served, even when there are
more of them than the process has file descriptors. Malformed HTTP is a problem+json 400."""

from __future__ import annotations

import asyncio
import resource
import select
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer

TIMEOUT_S = 1.0


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setblocking(False)
    return s


async def _closed_by_peer(s: socket.socket, within_s: float) -> bytes:
    """What the server sent before closing ``s`` (b"" for nothing); fails if it stays open."""
    loop = asyncio.get_running_loop()
    got = b""
    async with asyncio.timeout(within_s):
        while True:
            chunk = await loop.sock_recv(s, 65536)
            if not chunk:
                return got
            got += chunk


@pytest.fixture
def slow_server(database_url: str):  # type: ignore[no-untyped-def]
    server = LiveServer(database_url, env={"JOBQ_HEADER_TIMEOUT_S": str(TIMEOUT_S)})
    server.start()
    yield server
    server.stop()


async def test_unfinished_headers_are_closed_and_others_served(slow_server: LiveServer) -> None:
    silent = [_connect(slow_server.port) for _ in range(20)]
    trickling = [_connect(slow_server.port) for _ in range(50)]
    for s in trickling:
        s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")

    async def trickle() -> None:
        # One header byte per tenth of a second each, forever: never finishes. Not once the
        # server has answered (readable): a byte sent after its close would draw a reset,
        # and a reset discards the 408 that this test is waiting to read.
        while True:
            answered, _, _ = select.select(trickling, [], [], 0)
            for s in trickling:
                if s in answered:
                    continue
                try:
                    s.send(b"X")
                except OSError:
                    pass
            await asyncio.sleep(0.1)

    dripping = asyncio.create_task(trickle())
    try:
        async with httpx.AsyncClient(base_url=slow_server.url, timeout=5) as c:
            for _ in range(5):  # served meanwhile
                assert (await c.get("/healthz")).status_code == 200
        bound = TIMEOUT_S + 5  # the bound plus a generous margin for a loaded machine
        for s in silent:
            assert await _closed_by_peer(s, bound) == b""
        for s in trickling:
            answer = await _closed_by_peer(s, bound)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 "), answer
            assert b"content-type: application/problem+json" in head.lower(), answer
            assert b'"code":"request_timeout"' in body, answer
    finally:
        dripping.cancel()
        for s in silent + trickling:
            s.close()


async def test_a_kept_alive_connection_is_timed_per_request(slow_server: LiveServer) -> None:
    """A whole request, then the start of another that never ends: the first is answered, the
    second closed after the bound, with a 408."""
    s = _connect(slow_server.port)
    try:
        s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHo")
        answer = await _closed_by_peer(s, TIMEOUT_S + 5)
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert b"HTTP/1.1 408 " in answer, answer


async def test_a_long_poll_is_no_slow_client(slow_server: LiveServer) -> None:
    """The bound is on the request line and headers only: a long-poll waits its whole time."""
    async with httpx.AsyncClient(base_url=slow_server.url, timeout=10) as c:
        started = time.monotonic()
        r = await c.post("/v1/leases", json={"worker_id": "w", "queues": ["q"],
                                             "wait_ms": int(TIMEOUT_S * 2500)})
        assert r.status_code == 200 and r.json() == {"leases": []}
        assert time.monotonic() - started >= TIMEOUT_S * 2.5


@pytest.mark.parametrize("request_bytes", [
    b"NOT HTTP AT ALL\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nBad Header Without Colon\r\n\r\n",
    b"GET /\x01 HTTP/1.1\r\n\r\n",
], ids=["request-line", "header", "control-byte"])
async def test_malformed_http_is_a_problem(slow_server: LiveServer, request_bytes: bytes) -> None:
    s = _connect(slow_server.port)
    try:
        s.send(request_bytes)
        answer = await _closed_by_peer(s, 5)
    finally:
        s.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer
    assert b"content-type: application/problem+json" in head.lower(), answer
    assert b'"code":"bad_request"' in body and b'"status":400' in body, answer


def _few_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.mark.slow
async def test_more_idle_sockets_than_descriptors(database_url: str) -> None:
    """With 256 descriptors and 300 connections that send nothing, the server serves again
    once the timeout reaps them. (Before, those it had accepted stayed forever and it served
    nobody: uvloop, like libuv, accepts and at once closes what it has no descriptor for, and
    asyncio's loop stops accepting for a second at a time.)"""
    server = LiveServer(database_url, env={"JOBQ_HEADER_TIMEOUT_S": str(TIMEOUT_S)},
                        preexec_fn=_few_fds)
    server.start()
    idle: list[socket.socket] = []
    try:
        idle = [_connect(server.port) for _ in range(300)]
        for s in idle:  # each is closed: reaped, or turned away while descriptors ran out
            await _closed_by_peer(s, 30)
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            for _ in range(3):
                assert (await c.get("/healthz")).status_code == 200
        log = await asyncio.to_thread(Path(server.log.name).read_text)
    finally:
        for s in idle:
            s.close()
        server.stop()
    assert server.proc is not None and server.proc.returncode == 0, log
