"""A lean keep-alive HTTP/1.1 transport for httpx, on h11: the SDK's default for ``http://``.

Why: httpx's own transport (httpcore + h11 + anyio) costs more CPU per request than the
service spends answering it. Measured on the 2-core test machine (shared, so latencies are
noisy; CPU per request is the steadier figure), sequential ``POST /v1/jobs`` against one
``jobq serve``, every candidate interleaved in one run (4 rounds x 300 requests, the first
round dropped):

=========================  ========  ============  ===================
candidate                  p50 (ms)  CPU/req (ms)  p50 vs http.client
=========================  ========  ============  ===================
http.client (stdlib)       1.08      0.17          1.00
httpx.Client               1.78      0.62          1.65
httpx.AsyncClient          1.97      1.04          1.83
httpx + httpx-aiohttp      1.75      0.64          1.63
aiohttp (direct)           1.32      0.28          1.22
httpx.Client + this        1.41      0.35          1.31
httpx.AsyncClient + this   1.41      0.40          1.31
=========================  ========  ============  ===================

(That table is of the first version, which parsed answers itself.) It now parses with h11,
the parser httpx itself uses, so that no HTTP framing rule is ours to get wrong (the
hand-made one read a chunk size ``0x1f`` as 31). h11 costs about 0.1 ms of CPU a request
(its state machine and header checks); what remains of the gain: sequential calls against
one ``jobq serve`` on loopback, 3 interleaved rounds of 1,500 calls each, median CPU per
call in ms (the machine was shared and loaded, load average 6-7 on 2 cores, so calls per
second varied two-fold between rounds and CPU is the figure to read):

===========================  ==========  ==========  ==============  ==============
transport                    Client.get  AsyncC.get  Client.enqueue  AsyncC.enqueue
===========================  ==========  ==========  ==============  ==============
hand-made parser (before)    0.18        0.24        0.29            0.34
h11 (this)                   0.31        0.35        0.37            0.44
httpx's own transport        0.40        0.90        0.59            1.31
===========================  ==========  ==========  ==============  ==============

so this transport stays: on h11 it spends 60-80% of httpx's CPU in a blocking client and
a third to a half in an async one.

Part of h11's cost was then won back, each step in its own commit with its measure: the
clients build requests with headers made once (``_base.Wire``), header sets h11 has checked
are remembered (``_HeaderCache``), answers reach httpx as ``stream=``, the async read
timeout is one timer whose deadline reads move, the idle check keeps one poll object per
connection and a socket's timeout is set only when it changes. Same loops, 5 interleaved
rounds of 1,000 calls, median CPU per call in ms (load average 5-7 on 2 cores again):

===========================  ==========  ==========  ==============  ==============
transport                    Client.get  AsyncC.get  Client.enqueue  AsyncC.enqueue
===========================  ==========  ==========  ==============  ==============
hand-made parser (before)    0.18        0.21        0.26            0.36
h11, first version           0.25        0.30        0.41            0.47
h11, trimmed (this)          0.24        0.26        0.35            0.40
===========================  ==========  ==========  ==============  ==============

httpx-aiohttp saves little because httpx's client layer stays; aiohttp alone is lean but
would be a second HTTP stack (and a C extension) in a base install that is meant to stay
httpx, typer, rich. The rest of the httpx cost was ``httpx.Client``'s per-request work
(URL merging, cookie jar, auth and redirect loop), which the clients skip too
(``_base.Wire``).

So this module keeps httpx's API (``httpx.Client(transport=...)``; requests, responses and
exceptions are httpx's) and replaces only the wire: one socket per connection, requests
written in one ``send``, responses parsed by h11 as bytes arrive, idle connections kept
for reuse. What it does not do it leaves to httpx: ``https://`` (TLS) and any URL a proxy
in the environment may apply to (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, with
``NO_PROXY``) go through ``httpx.Client``'s own transport (``lean_fits`` decides, for the
clients), and an ``AsyncClient`` driven by trio goes to ``httpx.AsyncHTTPTransport``.

Robustness rules, each tested in tests/sdk/test_transport.py:

- an idle connection the server has closed is noticed before reuse (it reads as EOF) and
  replaced by a fresh one. If the close races the request (the server's keep-alive
  timeout fired as we sent), the request goes once more on a fresh connection when nothing
  of it was written, or when its method is idempotent and no byte of an answer came back
  (Go's net/http rule): a ``POST`` the server may have read and acted on is not sent
  twice behind the caller's back, it raises ``httpx.RemoteProtocolError``;
- timeouts come from the request (``connect``, ``read``, ``write``, ``pool``; ``read`` is
  per read, as in httpx, in both halves) and raise
  ``httpx.ConnectTimeout`` / ``ReadTimeout`` / ``WriteTimeout`` / ``PoolTimeout``; every
  socket error raises the matching ``httpx.TransportError``, so the SDK maps it to
  ``jobq.client.TransportError`` as before;
- a connection is reused only after a complete answer with no ``Connection: close``;
  anything unexpected closes it;
- the idle check uses ``poll`` (``selectors`` where there is none), which works for any
  descriptor: ``select.select`` refused those past 1023, so a process with many files open
  lost keep-alive.
"""

from __future__ import annotations

import asyncio
import select
import selectors
import socket
import threading
import urllib.request
from collections.abc import Iterable
from contextlib import suppress
from typing import Any, Final, cast

import h11
import httpx

# Reads are this big: a jobq answer is usually one segment, a large page a few.
RECV_SIZE: Final = 65536
# Limits on what we accept: a jobq answer's head is a few hundred bytes.
MAX_HEAD: Final = 65536
# Like httpx's default pool: more concurrent requests than this wait for a connection.
DEFAULT_MAX_CONNECTIONS: Final = 100
# Idle connections kept per transport; more are closed when returned.
MAX_IDLE: Final = 100
# Sets of request headers whose check by h11 is remembered, per transport (_HeaderCache).
HEADER_CACHE_SIZE: Final = 256
# A loop timer may fire this much before its time (the loop's clock resolution); the read
# timer does not count that as a read deadline not yet reached.
_TIMER_SLACK: Final = 0.001


def _h11_connection() -> h11.Connection:
    return h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)


class _Answer:
    """One HTTP/1.1 response, parsed by h11 from bytes as they arrive.

    h11 holds the connection's state, so it also says whether the connection may carry
    another request (``reusable``) and knows framings by the request it sent (a ``HEAD``
    answer has no body, a ``304`` neither, no length means until close).
    """

    __slots__ = ("_h11", "status", "reason", "version", "headers", "_chunks")

    def __init__(self, connection: h11.Connection) -> None:
        self._h11 = connection
        self.status = 0
        self.reason = b""
        self.version = b"1.1"
        self.headers: list[tuple[bytes, bytes]] = []
        self._chunks: list[bytes] = []

    def feed(self, data: bytes) -> bool:
        """True once the whole answer is in; ``b""`` means the server closed the
        connection. Raises ``httpx.RemoteProtocolError`` on anything h11 refuses."""
        connection = self._h11
        try:
            connection.receive_data(data)
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    return False
                if isinstance(event, h11.Response):
                    self.status = event.status_code
                    self.reason = event.reason
                    self.version = event.http_version
                    self.headers = event.headers.raw_items()
                elif isinstance(event, h11.Data):
                    self._chunks.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return True
                elif isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError(
                        "server closed the connection before the answer ended")
                # h11.InformationalResponse (1xx): the real answer follows.
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(f"malformed answer: {exc}") from exc

    @property
    def reusable(self) -> bool:
        """The answer is complete, neither side asked to close, and no byte came after it
        (bytes nobody asked for mean the connection cannot be trusted with a request)."""
        connection = self._h11
        if connection.our_state is not h11.DONE or connection.their_state is not h11.DONE:
            return False
        if connection.trailing_data[0]:
            return False
        connection.start_next_cycle()
        return True

    def response(self, request: httpx.Request) -> httpx.Response:
        # stream=, as transports hand answers to httpx: the headers stay as received (content=
        # would add a Content-Length, and costs an encoding step and a read here); the client
        # reads the body from the stream (Response.read / aread), decoding it as usual.
        chunks = self._chunks
        return httpx.Response(
            self.status,
            headers=self.headers,
            stream=httpx.ByteStream(chunks[0] if len(chunks) == 1 else b"".join(chunks)),
            request=request,
            extensions={"http_version": b"HTTP/" + self.version, "reason_phrase": self.reason},
        )


class _HeaderCache:
    """Request headers h11 has already checked, by what they were made from.

    h11 checks every header of every request against its grammar (two regular expressions
    a header), a fifth of the transport's CPU per request; a client sends the same headers
    again and again (all of them for a ``GET``; for a ``POST`` all but a ``Content-Length``
    that changes with the body). Handing h11 the ``headers`` of a ``Request`` it checked
    before skips the check, as h11 does for headers it parsed itself. Bounded: cleared when
    full, so a client whose headers keep changing pays only a dictionary lookup more.
    """

    __slots__ = ("_checked",)

    def __init__(self) -> None:
        self._checked: dict[tuple[tuple[tuple[bytes, bytes], ...], int], Any] = {}

    def request(self, request: httpx.Request, body: bytes) -> h11.Request:
        raw = request.headers.raw
        key = (tuple(raw), len(body))
        # raw_path: path and query, already percent-encoded.
        target = request.url.raw_path
        checked = self._checked.get(key)
        if checked is not None:
            return h11.Request(method=request.method, target=target, headers=checked)
        event = h11.Request(method=request.method, target=target, headers=_sent_headers(raw, body))
        if len(self._checked) >= HEADER_CACHE_SIZE:
            self._checked.clear()
        self._checked[key] = event.headers
        return event


def _sent_headers(raw: list[tuple[bytes, bytes]], body: bytes) -> list[tuple[bytes, bytes]]:
    """The request's headers as sent: the body whole, with its length (never chunked)."""
    headers = []
    has_length = False
    for name, value in raw:
        lower = name.lower()
        if lower == b"transfer-encoding":
            continue  # we always send the body whole, with its length
        if lower == b"content-length":
            has_length = True
            value = str(len(body)).encode("ascii")
        headers.append((name, value))
    if body and not has_length:
        headers.append((b"Content-Length", str(len(body)).encode("ascii")))
    return headers


def _request_bytes(connection: h11.Connection, cache: _HeaderCache, request: httpx.Request,
                   body: bytes) -> bytes:
    """The request as h11 writes it, the body whole with its length (never chunked)."""
    try:
        data = connection.send(cache.request(request, body))
        if body:
            data += connection.send(h11.Data(data=body))
        data += connection.send(_END)
    except h11.LocalProtocolError as exc:
        raise httpx.LocalProtocolError(str(exc), request=request) from exc
    return data


# Events are immutable: one end-of-message serves every request.
_END: Final = h11.EndOfMessage()


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None, float | None, float | None]:
    t = request.extensions.get("timeout") or {}
    return t.get("connect"), t.get("read"), t.get("write"), t.get("pool")


def _is_lean(request: httpx.Request) -> bool:
    return request.url.scheme == "http"


def _origin(request: httpx.Request) -> tuple[str, int]:
    url = request.url
    return url.host, url.port or 80


class _IdleCheck:
    """Whether an idle connection is still quiet: nothing to read. Readable means the server
    closed it (EOF) or sent something unasked, and either way it must not carry a request.

    poll, not select.select: select refuses a descriptor >= 1024 (ValueError), and in a
    process with that many files open every connection would be dropped after one request.
    One poll object per connection, registered once: the check runs before every reuse, and
    making and registering a poller each time was a third of its cost.
    """

    __slots__ = ("_sock", "_poller")

    def __init__(self, sock: socket.socket | None) -> None:
        self._sock = sock
        self._poller: select.poll | None = None

    def quiet(self) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            poller = self._poller
            if poller is None:
                fd = sock.fileno()
                if fd < 0:
                    return False
                if not _HAS_POLL:
                    with selectors.DefaultSelector() as selector:  # Windows: no poll()
                        selector.register(fd, selectors.EVENT_READ)
                        return not selector.select(0)
                poller = self._poller = select.poll()
                poller.register(fd, select.POLLIN | select.POLLPRI)
            elif sock.fileno() < 0:  # closed since: its number may name another file now
                return False
            # POLLHUP, POLLERR and POLLNVAL come back whatever was asked: not quiet either.
            return not poller.poll(0)
        except (OSError, ValueError):
            return False


_HAS_POLL: Final = hasattr(select, "poll")


# Blocking


class _Conn:
    __slots__ = ("sock", "h11", "idle_check")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.h11 = _h11_connection()
        self.idle_check = _IdleCheck(sock)

    def usable(self) -> bool:
        return self.idle_check.quiet()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class LeanTransport(httpx.BaseTransport):
    """``httpx.BaseTransport`` over plain sockets with keep-alive, for ``http://`` URLs.

    Other schemes go to a plain ``httpx.HTTPTransport`` (created on first use, reading no
    proxy from the environment: the clients send those URLs through ``httpx.Client``
    instead, see ``lean_fits``). Thread-safe: each request takes its own connection out of
    the idle pool.
    """

    def __init__(self, *, max_idle: int = MAX_IDLE) -> None:
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._lock = threading.Lock()
        self._max_idle = max_idle
        self._fallback: httpx.HTTPTransport | None = None
        self._closed = False
        self._headers = _HeaderCache()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not _is_lean(request):
            if self._fallback is None:
                self._fallback = httpx.HTTPTransport()
            return self._fallback.handle_request(request)
        origin = _origin(request)
        body = request.read()
        connect_t, read_t, write_t, _ = _timeouts(request)
        while True:
            conn = self._take(origin)
            reused = conn is not None
            if conn is None:
                conn = self._connect(origin, connect_t, request)
            try:
                data = _request_bytes(conn.h11, self._headers, request, body)
                answer = self._exchange(conn, data, request, read_t, write_t, reused)
            except _Stale as stale:
                conn.close()
                _resend(stale, request)
                continue
            except BaseException:
                conn.close()
                raise
            if answer.reusable:
                self._give_back(origin, conn)
            else:
                conn.close()
            return answer.response(request)

    def _take(self, origin: tuple[str, int]) -> _Conn | None:
        with self._lock:
            idle = self._idle.get(origin)
            while idle:
                conn = idle.pop()
                if conn.usable():
                    return conn
                conn.close()
        return None

    def _give_back(self, origin: tuple[str, int], conn: _Conn) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if self._closed or len(idle) >= self._max_idle:
                conn.close()
            else:
                idle.append(conn)

    @staticmethod
    def _connect(origin: tuple[str, int], timeout: float | None, request: httpx.Request) -> _Conn:
        try:
            sock = socket.create_connection(origin, timeout=timeout)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect to {origin[0]}:{origin[1]}: {exc}",
                                       request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"connect to {origin[0]}:{origin[1]}: {exc}",
                                     request=request) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(sock)

    @staticmethod
    def _exchange(conn: _Conn, data: bytes, request: httpx.Request, read_t: float | None,
                  write_t: float | None, reused: bool) -> _Answer:
        sock = conn.sock
        try:
            _set_timeout(sock, write_t)
            sock.sendall(data)
        except TimeoutError as exc:
            raise httpx.WriteTimeout(f"write: {exc}", request=request) from exc
        except OSError as exc:
            if reused:
                raise _Stale(written=False) from exc
            raise httpx.WriteError(f"write: {exc}", request=request) from exc
        answer = _Answer(conn.h11)
        got_any = False
        _set_timeout(sock, read_t)  # per read, as httpx: each recv may wait read_t
        while True:
            try:
                chunk = sock.recv(RECV_SIZE)
            except TimeoutError as exc:
                raise httpx.ReadTimeout(f"read: {exc}", request=request) from exc
            except OSError as exc:
                if reused and not got_any:
                    raise _Stale from exc
                raise httpx.ReadError(f"read: {exc}", request=request) from exc
            if chunk:
                got_any = True
            elif reused and not got_any:
                raise _Stale
            try:
                if answer.feed(chunk):
                    return answer
            except httpx.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if not chunk:  # h11 ends or refuses an answer at EOF; never wait past one
                raise httpx.RemoteProtocolError(
                    "server closed the connection before the answer ended", request=request)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [c for conns in self._idle.values() for c in conns]
            self._idle.clear()
        for conn in idle:
            conn.close()
        if self._fallback is not None:
            self._fallback.close()


def _set_timeout(sock: socket.socket, timeout: float | None) -> None:
    # settimeout is a system call (it sets the descriptor's blocking mode) even when nothing
    # changes; the read and write timeouts are usually equal and the same request after request.
    if sock.gettimeout() != timeout:
        sock.settimeout(timeout)


class _Stale(Exception):
    """A reused keep-alive connection turned out closed before any answer came back."""

    def __init__(self, written: bool = True) -> None:
        super().__init__("connection closed by the server")
        self.written = written


# Methods that may be sent twice without changing the outcome (RFC 9110, 9.2.2).
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})


def _resend(stale: _Stale, request: httpx.Request) -> None:
    """Return if the request may go again on a fresh connection, else raise."""
    if stale.written and request.method not in _IDEMPOTENT:
        raise httpx.RemoteProtocolError(
            "server closed a kept-alive connection without answering; not sending "
            f"{request.method} again (it may have been handled)", request=request)


# asyncio


class _Protocol(asyncio.Protocol):
    """One connection; at most one request on it at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.idle_check = _IdleCheck(None)
        self.h11 = _h11_connection()
        self.closed = False
        # Bytes came while no request was out: the connection cannot be trusted with one.
        self.unasked = False
        self.got_any = False
        self._answer: _Answer | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        # The read timeout of the request under way, per read (as httpx and the blocking
        # half: a slow but steady answer is not cut off). Each read only moves the deadline;
        # the one timer, when it fires early, waits on to the deadline (rescheduling a timer
        # at every read cost a cancel and a new heap entry per answer).
        self._read_timer: asyncio.TimerHandle | None = None
        self._read_t: float | None = None
        self._read_deadline = 0.0
        self._timed_out = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport is not registered as an asyncio.Transport subclass, so
        # no isinstance check here: both loops hand a stream transport to a stream protocol.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        self.idle_check = _IdleCheck(sock)
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        answer = self._answer
        if answer is None:
            self.unasked = True
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            return
        self.got_any = True
        if self._read_t is not None:
            self._read_deadline = self.loop.time() + self._read_t
        try:
            done = answer.feed(data)
        except httpx.RemoteProtocolError as exc:
            self._finish(exc)
            return
        if done:
            self._finish(None)

    def eof_received(self) -> bool | None:
        self.closed = True
        answer = self._answer
        if answer is not None:
            if not self.got_any:
                self._finish(_Stale())
            else:
                try:
                    answer.feed(b"")
                except httpx.RemoteProtocolError as exc:
                    self._finish(exc)
                else:
                    self._finish(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is not None and self._waiter is not None and not self._waiter.done():
            if not self.got_any:
                self._finish(_Stale())
            else:
                self._finish(OSError(f"connection lost: {exc}"))

    def _finish(self, error: BaseException | None) -> None:
        waiter = self._waiter
        self._answer = None
        if error is not None:
            self._error = error
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _read_timer_fired(self) -> None:
        self._read_timer = None
        if self._waiter is None or self._waiter.done():
            return
        left = self._read_deadline - self.loop.time()
        if left > _TIMER_SLACK:  # a read came since the timer was set: wait on
            self._read_timer = self.loop.call_later(left, self._read_timer_fired)
            return
        self._timed_out = True
        self._waiter.set_result(None)

    async def exchange(self, body: bytes, request: httpx.Request, headers: _HeaderCache,
                       read_t: float | None, reused: bool) -> _Answer:
        assert self.transport is not None
        if self.unasked or self.closed:  # closed meanwhile, or bytes nobody asked for
            if reused:
                raise _Stale(written=False)
            raise httpx.RemoteProtocolError("connection closed at once", request=request)
        data = _request_bytes(self.h11, headers, request, body)
        answer = _Answer(self.h11)
        self._answer = answer
        self._error = None
        self.got_any = False
        loop = self.loop
        waiter = loop.create_future()
        self._waiter = waiter
        self._read_t = read_t
        self._timed_out = False
        if read_t is not None:
            self._read_deadline = loop.time() + read_t
            self._read_timer = loop.call_later(read_t, self._read_timer_fired)
        try:
            self.transport.write(data)
            await waiter
        finally:
            self._waiter = None
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None
        if self._timed_out:
            self.close()
            raise httpx.ReadTimeout("read timed out", request=request)
        error = self._error
        if error is not None:
            self.close()
            if isinstance(error, _Stale):
                if reused:
                    raise error
                raise httpx.RemoteProtocolError(
                    "server closed the connection without an answer", request=request)
            if isinstance(error, httpx.RemoteProtocolError):
                raise httpx.RemoteProtocolError(str(error), request=request) from error
            raise httpx.ReadError(str(error), request=request) from error
        if self._answer is not None:  # not finished: must not happen; be safe
            self.close()
        return answer

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class LeanAsyncTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncBaseTransport`` over asyncio protocols with keep-alive, for ``http://``.

    At most ``max_connections`` requests are on the wire at once; more wait up to the
    ``pool`` timeout. Other schemes, and any event loop other than asyncio's (trio), go to
    ``httpx.AsyncHTTPTransport``.
    """

    def __init__(self, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_idle: int = MAX_IDLE) -> None:
        self._idle: dict[tuple[str, int], list[_Protocol]] = {}
        self._max_connections = max_connections
        self._max_idle = max_idle
        self._in_use = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._fallback: httpx.AsyncHTTPTransport | None = None
        self._closed = False
        self._headers = _HeaderCache()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or not _is_lean(request):
            if self._fallback is None:
                self._fallback = httpx.AsyncHTTPTransport()
            return await self._fallback.handle_async_request(request)
        origin = _origin(request)
        body = await request.aread()
        connect_t, read_t, _, pool_t = _timeouts(request)
        await self._acquire(pool_t, request)
        try:
            while True:
                proto = self._take(origin, loop)
                reused = proto is not None
                if proto is None:
                    proto = await self._connect(loop, origin, connect_t, request)
                try:
                    answer = await proto.exchange(body, request, self._headers, read_t, reused)
                except _Stale as stale:
                    proto.close()
                    _resend(stale, request)
                    continue
                except BaseException:
                    proto.close()  # a cancel mid-answer leaves the connection unusable
                    raise
                if not proto.closed and answer.reusable:
                    self._give_back(origin, proto)
                else:
                    proto.close()
                return answer.response(request)
        finally:
            self._release()

    async def _acquire(self, pool_t: float | None, request: httpx.Request) -> None:
        if self._in_use < self._max_connections and not self._waiters:
            self._in_use += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(pool_t):
                await waiter
        except TimeoutError as exc:
            raise httpx.PoolTimeout("no connection free in time", request=request) from exc
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed to us: pass it on
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _release(self) -> None:
        # Hand the slot straight to the next waiter, so the count never drops and rises.
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return
        self._in_use -= 1

    def _take(self, origin: tuple[str, int], loop: asyncio.AbstractEventLoop) -> _Protocol | None:
        idle = self._idle.get(origin)
        while idle:
            proto = idle.pop()
            if proto.loop is not loop:
                # Made by an earlier event loop (asyncio.run twice): it cannot serve this one.
                with suppress(RuntimeError):
                    proto.close()
                continue
            # The loop may not have read the server's close yet: ask the socket itself.
            if not proto.closed and not proto.unasked and proto.idle_check.quiet():
                return proto
            proto.close()
        return None

    def _give_back(self, origin: tuple[str, int], proto: _Protocol) -> None:
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= self._max_idle:
            proto.close()
        else:
            idle.append(proto)

    @staticmethod
    async def _connect(loop: asyncio.AbstractEventLoop, origin: tuple[str, int],
                       connect_t: float | None, request: httpx.Request) -> _Protocol:
        try:
            async with asyncio.timeout(connect_t):
                _, proto = await loop.create_connection(lambda: _Protocol(loop), *origin)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect to {origin[0]}:{origin[1]} timed out",
                                       request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"connect to {origin[0]}:{origin[1]}: {exc}",
                                     request=request) from exc
        return proto

    async def aclose(self) -> None:
        self._closed = True
        idle = [p for protos in self._idle.values() for p in protos]
        self._idle.clear()
        for proto in idle:
            proto.close()
        if self._fallback is not None:
            await self._fallback.aclose()


def lean_fits(url: str) -> bool:
    """Whether the lean transport may carry requests to ``url``: plain ``http://`` with no
    proxy in the environment that could apply to it.

    Everything else goes through httpx's own transport, reached through ``httpx.Client``,
    which reads ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` and decides
    as httpx does (``NO_PROXY`` included): ``https://`` always (the lean transport has no
    TLS), ``http://`` when ``HTTP_PROXY`` or ``ALL_PROXY`` is set.
    """
    if httpx.URL(url).scheme != "http":
        return False
    # The same reading of the environment httpx makes (urllib's getproxies).
    proxies = urllib.request.getproxies()
    return not (proxies.get("http") or proxies.get("all"))


def default_transport(url: str) -> httpx.BaseTransport | None:
    """The transport ``Client`` uses for ``url`` when none is given (None: httpx's own)."""
    return LeanTransport() if lean_fits(url) else None


def default_async_transport(url: str) -> httpx.AsyncBaseTransport | None:
    """The transport ``AsyncClient`` uses for ``url`` when none is given (None: httpx's own)."""
    return LeanAsyncTransport() if lean_fits(url) else None


__all__: Iterable[str] = ["LeanAsyncTransport", "LeanTransport"]
