"""The recording proxy: the worker under test talks to the service through it.

A small threaded HTTP/1.1 server (keep-alive, long-polls pass through, each request in its own
thread) forwards every request to the service, Authorization and body unchanged, and answers
with the service's status, headers and body. When the worker hangs up on a waiting claim (as
it aborts its long-poll to stop), the proxy hangs up on the service too, so that the claim
ends without taking a job, exactly as if the worker had called the service itself. It records each exchange (method,
path, JSON body, when it came, when and how it was answered), so that the checks see what the
worker did: its claims, heartbeats, acks, fails and releases.

While ``refuse_claims`` is on, it answers every claim itself, as the service does when it
cannot take one (``503`` ``unavailable`` or ``too_many_long_polls``) or a rate limiter in
front of it would (``429``), with ``Retry-After``: no queue setting makes the service refuse
a claim, so this is the only way the kit can show a worker those answers on demand.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import itertools
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

# A claim waits up to 30 s at the service: room for that and a slow answer.
UPSTREAM_TIMEOUT_S = 70.0
# Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection, not to the message; the
# framing is redone on each side (bodies pass as they are, compressed or not).
_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
    "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect",
    # The answer's own; BaseHTTPRequestHandler writes these.
    "date", "server",
})


@dataclass
class Exchange:
    """One request of the worker and its answer. Times are ``time.monotonic()``."""

    method: str
    path: str  # without the query string, percent-decoded
    body: Any  # the JSON the worker sent; None without a body (or one that is not JSON)
    started: float  # when the whole request had arrived
    ended: float | None = None  # when the answer was written; None while in flight
    status: int | None = None
    answer: Any = None  # the JSON answer
    refused: bool = False  # answered by the proxy itself (refuse_claims)
    retry_after: str | None = None  # the answer's Retry-After header

    @property
    def is_claim(self) -> bool:
        return self.method == "POST" and self.path.rstrip("/") == "/v1/leases"

    def call(self) -> tuple[str, str | None]:
        """What the request does to a lease: ``("ack", lease_id)``, ``("heartbeat", id)``,
        ``("fail", id)``, ``("release", id)``, ``("ack", None)`` for a batch ack,
        ``("release", None)`` for a batch release, ``("claim", None)``; ``("", None)`` for
        anything else."""
        if self.method != "POST":
            return "", None
        parts = self.path.strip("/").split("/")
        if parts[:2] != ["v1", "leases"]:
            return "", None
        if len(parts) == 2:
            return "claim", None
        if len(parts) == 3 and parts[2] in ("ack", "release"):
            return parts[2], None
        if len(parts) == 4 and parts[3] in ("ack", "heartbeat", "fail", "release"):
            return parts[3], parts[2]
        return "", None

    def lease_ids(self, verb: str) -> list[str]:
        """The leases this request acks (``verb`` "ack") or releases ("release"), one entry
        per time it names one: a batch names several."""
        kind, lease_id = self.call()
        if kind != verb:
            return []
        if lease_id is not None:
            return [lease_id]
        key = "acks" if verb == "ack" else "releases"
        items = self.body.get(key) if isinstance(self.body, dict) else None
        return [str(i.get("lease_id")) for i in items or [] if isinstance(i, dict)]

    def leases(self) -> list[dict[str, Any]]:
        """The leases a claim was answered with (none unless it was answered 200)."""
        if not self.is_claim or self.status != 200 or not isinstance(self.answer, dict):
            return []
        return [le for le in self.answer.get("leases") or [] if isinstance(le, dict)]


# What the proxy answers a claim with while refusing, in turn: the service's two 503s (the
# database not answering; a process at its cap of waiting claims, which also closes the
# connection) and a rate limiter's 429 in front of it (RFC 9457's generic problem, no code).
_REFUSALS = (
    (503, "unavailable", "Service unavailable",
     "the database did not answer in time (jobq conformance: a refusal on purpose)", False),
    (429, None, "Too Many Requests",
     "rate limited in front of the service (jobq conformance: a refusal on purpose)", False),
    (503, "too_many_long_polls", "Too many long-polls",
     "this service process holds its limit of waiting claims (jobq conformance: a refusal "
     "on purpose); claim again after Retry-After", True),
)


@dataclass
class _Refusing:
    retry_after_s: int
    turns: Iterator[tuple[int, str | None, str, str, bool]] = field(
        default_factory=lambda: itertools.cycle(_REFUSALS))


class RecordingProxy:
    """Forwards to ``upstream`` from ``http://127.0.0.1:<port>`` (``url``), recording each
    exchange. ``start()`` it, ``close()`` it (or use it as a context manager)."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._scheme, self._host, self._port = parts.scheme, parts.hostname or "", parts.port
        self._prefix = parts.path.rstrip("/")  # a service behind a path (http://host/jobq)
        self._lock = threading.Condition()
        self._exchanges: list[Exchange] = []
        self._refusing: _Refusing | None = None
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="conformance-proxy",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RecordingProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # What the checks read

    def exchanges(self) -> list[Exchange]:
        """Every exchange so far, in the order the requests arrived (a copy)."""
        with self._lock:
            return list(self._exchanges)

    def claims(self, since: float = 0.0) -> list[Exchange]:
        return [x for x in self.exchanges() if x.is_claim and x.started >= since]

    def wait_for(self, predicate: Callable[[], Any], timeout_s: float) -> Any:
        """Wait until ``predicate()`` is truthy (it is tried again after each exchange
        changes) and return it; its last value when ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                value = predicate()
                left = deadline - time.monotonic()
                if value or left <= 0:
                    return value
                self._lock.wait(min(left, 0.1))

    # Refusing claims

    def refuse_claims(self, retry_after_s: int) -> None:
        """Answer every claim from now on with a refusal carrying ``Retry-After``."""
        with self._lock:
            self._refusing = _Refusing(retry_after_s)

    def forward_claims(self) -> None:
        with self._lock:
            self._refusing = None

    # Used by the request handler

    def _record(self, exchange: Exchange) -> _Refusing | None:
        with self._lock:
            self._exchanges.append(exchange)
            self._lock.notify_all()
            return self._refusing if exchange.is_claim else None

    def _answered(self, exchange: Exchange, status: int, headers: list[tuple[str, str]], content: bytes) -> None:
        named = {k.lower(): v for k, v in headers}
        if named.get("content-encoding", "").lower() == "gzip":
            with contextlib.suppress(OSError, EOFError):
                content = gzip.decompress(content)
        with self._lock:
            exchange.status, exchange.retry_after = status, named.get("retry-after")
            exchange.answer = _json_or_none(content)
            exchange.ended = time.monotonic()
            self._lock.notify_all()

    def _forward(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes,
                 hung_up: Callable[[], bool] | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send the request on to the service on a connection of its own and return its answer.
        With ``hung_up`` (a claim, which may wait), the service's connection is shut as soon
        as the worker hangs up: the service then ends the waiting claim without claiming, as
        it would for the worker itself, instead of handing a job to nobody."""
        upstream = self._connection()
        finished = threading.Event()
        try:
            upstream.request(method, self._prefix + target, body=body or None, headers=dict(headers))
            if hung_up is not None:
                threading.Thread(target=self._hang_up_with, args=(upstream, hung_up, finished),
                                 name="conformance-proxy-watch", daemon=True).start()
            response = upstream.getresponse()
            content = response.read()
        except (OSError, http.client.HTTPException) as exc:
            # What a gateway says when the service does not answer: 502, no Retry-After.
            return _problem(502, None, "Bad Gateway",
                            f"jobq conformance could not reach the service: {type(exc).__name__}: {exc}")
        finally:
            finished.set()
            upstream.close()
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _NOT_FORWARDED]
        if response.getheader("connection", "").lower() == "close":
            kept.append(("Connection", "close"))
        return response.status, kept, content

    def _connection(self) -> http.client.HTTPConnection:
        # A connection per request, not a pool: only a socket the proxy holds can be shut
        # from another thread (httpx gives no handle on a request that is still waiting).
        kind = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        return kind(self._host, self._port, timeout=UPSTREAM_TIMEOUT_S)

    @staticmethod
    def _hang_up_with(upstream: http.client.HTTPConnection, hung_up: Callable[[], bool],
                      finished: threading.Event) -> None:
        while not finished.wait(0.05):
            if hung_up():
                if upstream.sock is not None:
                    with contextlib.suppress(OSError):
                        upstream.sock.shutdown(socket.SHUT_RDWR)
                return


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content) if content else None
    except ValueError:
        return None


def _problem(status: int, code: str | None, title: str, detail: str,
             headers: Sequence[tuple[str, str]] = ()) -> tuple[int, list[tuple[str, str]], bytes]:
    body: dict[str, Any] = {"type": f"/problems/{code}" if code else "about:blank", "title": title,
                            "status": status, "detail": detail}
    if code:
        body["code"] = code
    return status, [("Content-Type", "application/problem+json"), *headers], json.dumps(body).encode()


class _Server(ThreadingHTTPServer):
    # A worker blocked in a long-poll must not keep the kit from exiting.
    daemon_threads = True
    proxy: RecordingProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a worker's HTTP client expects
    server: _Server

    def do_GET(self) -> None:
        self._proxy()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the checks report what matters."""

    def _proxy(self) -> None:
        body = self._read_body()
        proxy = self.server.proxy
        exchange = Exchange(method=self.command, path=unquote(urlsplit(self.path).path),
                            body=_json_or_none(body), started=time.monotonic())
        refusing = proxy._record(exchange)
        if refusing is not None:
            status, code, title, detail, close = next(refusing.turns)
            extra = [("Retry-After", str(refusing.retry_after_s))]
            if close:
                extra.append(("Connection", "close"))
            answer = _problem(status, code, title, detail, extra)
            exchange.refused = True
        else:
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _NOT_FORWARDED]
            answer = proxy._forward(self.command, self.path, headers, body,
                                    self._hung_up if exchange.is_claim else None)
        status, headers, content = answer
        try:
            self._write(status, headers, content)
        finally:
            proxy._answered(exchange, status, headers, content)

    def _hung_up(self) -> bool:
        """Whether the worker closed its connection (it sends nothing else while it waits)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _write(self, status: int, headers: list[tuple[str, str]], content: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
                if name.lower() == "connection" and value.lower() == "close":
                    self.close_connection = True
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(content)
            self.wfile.flush()
        except OSError:
            # The worker hung up (it aborted a long-poll as it stopped, say): nothing to answer.
            self.close_connection = True

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        # Some HTTP clients (Go's, for a body of unknown length) send chunks.
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()
