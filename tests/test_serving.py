"""The HTTP protocol ``jobq serve`` runs (jobq.api.serving): a response's head and body leave
in one write, and nothing a client can see changes: keep-alive, pipelining, streamed bodies
and closing connections answer as with uvicorn's own protocol."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.types import Receive, Scope, Send

from jobq.api.serving import HttpProtocol
from tests.conftest import free_port
from tests.waiting import aeventually


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/stream":  # three chunks with a pause between them: each must arrive
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(3):
            await send({"type": "http.response.body", "body": b"chunk%d;" % i, "more_body": True})
            await asyncio.sleep(0.01)  # a slow handler, by design
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    body = path.encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    if path == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def served() -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, http=HttpProtocol,
                                           log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    try:
        await aeventually(lambda: server.started or task.done(), timeout_s=30, poll_s=0.005,
                          what="uvicorn started")
        if task.done():
            task.result()
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        await task


async def test_keep_alive_and_streamed_answers_arrive_whole() -> None:
    async with served() as (host, port), httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
        for i in range(5):  # one connection, one answer after another
            r = await client.get(f"/n{i}")
            assert (r.status_code, r.text) == (200, f"/n{i}")
        r = await client.get("/stream")
        assert r.text == "chunk0;chunk1;chunk2;"
        r = await client.get("/close")
        assert (r.status_code, r.text, r.headers["connection"]) == (200, "/close", "close")


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with served() as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\nGET /bb HTTP/1.1\r\nhost: x\r\n\r\n"
                     b"GET /close HTTP/1.1\r\nhost: x\r\n\r\n")
        await writer.drain()
        async with asyncio.timeout(10):
            raw = await reader.read()  # until the server closes after /close
        writer.close()
        answers = raw.split(b"HTTP/1.1 200 OK\r\n")[1:]
        assert [a.rsplit(b"\r\n\r\n", 1)[1] for a in answers] == [b"/a", b"/bb", b"/close"]
