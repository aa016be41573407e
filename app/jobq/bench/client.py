"""The bench's HTTP client: one keep-alive HTTP/1.1 connection, JSON in and out, nothing else.

Why not httpx: on this 2-core machine httpx's async client spent about 2 ms of CPU per
request, more than the service spent answering it, so the bench measured itself. This client
writes each request as one buffer and parses answers with httptools (the C parser uvicorn
uses), at a fraction of that cost. It serves the bench only: no redirects, proxies, TLS or
pooling, and a request that is cancelled or times out closes its connection (the answer
would otherwise arrive as the reply to the next one).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import orjson


class HttpError(Exception):
    """The connection failed or the answer could not be read."""


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.body: list[bytes] = []
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpError(f"unreadable answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(HttpError(f"connection closed{f': {exc}' if exc else ''}"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        status, body = self.parser.get_status_code(), b"".join(self.body)
        self.body = []
        if not self.parser.should_keep_alive():
            self.close()
        if self.answer is not None and not self.answer.done():
            self.answer.set_result((status, body))

    def _fail(self, exc: Exception) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class BenchClient:
    def __init__(self, url: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the bench speaks plain http to a host: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.timeout_s = timeout_s
        self._head = f"Host: {parts.netloc}\r\nUser-Agent: jobq-bench\r\n"
        if token:
            self._head += f"Authorization: Bearer {token}\r\n"
        self._conn: _Connection | None = None

    async def __aenter__(self) -> BenchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connection(self) -> _Connection:
        if self._conn is None or self._conn.closed:
            loop = asyncio.get_running_loop()
            _, conn = await loop.create_connection(_Connection, self.host, self.port)
            self._conn = conn
        return self._conn

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\n{self._head}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        message = (head + "\r\n").encode() + (body or b"")
        conn = await self._connection()
        answer = asyncio.get_running_loop().create_future()
        conn.answer = answer
        assert conn.transport is not None
        conn.transport.write(message)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await answer
        except BaseException:
            # Cancelled, timed out or failed mid-answer: the connection's state is unknown.
            conn.close()
            self._conn = None
            raise
        finally:
            conn.answer = None

    async def get(self, path: str) -> tuple[int, bytes]:
        return await self.request("GET", path)

    async def post(self, path: str, payload: Any) -> tuple[int, bytes]:
        return await self.request("POST", path, orjson.dumps(payload))
