"""uvicorn's HTTP protocol with one socket write per response instead of two.

uvicorn writes a response's status line and headers when the app sends
``http.response.start``, and the body when it sends ``http.response.body``: two ``send``
calls, two TCP segments and two wake-ups of the client for every answer. A send on loopback
costs about as much CPU as a small handler (the kernel delivers the segment to the reader in
the writer's time). The transport here holds a write until the next write or the end of the
event loop's current iteration, whichever comes first: an app sends the start and the body
of a response one after the other without yielding in between, so they leave together; a
write with nothing after it leaves one iteration later, before the loop waits on any I/O.

``jobq serve`` names ``HttpProtocol`` as uvicorn's ``http`` class (``PROTOCOL``). It also
does three things uvicorn does not:

- **Stopping.** uvicorn asks every open connection to shut down (``shutdown``) as soon as the
  stop signal is handled, but runs the app's lifespan shutdown only once every request has
  been answered: idle long-polls would sit out their wait (then be cancelled into a
  plain-text 500). The first connection asked to shut down runs the callbacks registered
  with ``on_stop`` (the app's ``Wakeups.drain``): idle long-polls answer their empty claim
  at once, each with ``connection: close``. This works alike under ``--workers N``, where
  uvicorn's supervisor, not ``jobq serve``, runs each process's server.
- **Header timeout.** A connection that has not finished its request line and headers
  within ``JOBQ_HEADER_TIMEOUT_S`` of opening (or of its request's first byte, on a
  kept-alive connection) is closed, with a ``408`` problem+json when part of a request came.
  uvicorn keeps such a connection forever, and a few hundred of them use up the process's
  file descriptors: nobody else is served.
- **Malformed HTTP.** uvicorn's ``400`` for a request it cannot parse is plain text; ours is
  problem+json (``bad_request``).

Why a subclass, when uvicorn's protocol class is not its public API: no public setting or
ASGI middleware does any of the three (checked on uvicorn 0.55). An ASGI app sees a request
only once its headers are whole and parsed, and is not told when the server starts to stop
(the lifespan's shutdown comes after the last response). ``timeout_graceful_shutdown``
cancels requests still running after that many seconds, into a 500 or a dropped
connection, instead of answering long-polls now; ``timeout_keep_alive`` times only the idle
time between requests, not a request whose line or headers trickle in;
``h11_max_incomplete_event_size`` bounds their size, not their time; ``limit_concurrency``
answers 503 to connections past a count, without closing the slow ones that fill it; and
uvicorn writes its 400 for unparsable HTTP itself, before any app runs. The ``http=`` setting
that takes this class is public; what it overrides (``shutdown``, ``send_400_response``, the
parser's ``on_message_begin``/``on_headers_complete``, ``cycle``, ``server_state``) is not,
so pyproject.toml pins uvicorn to the releases tests/test_serving.py,
tests/test_slow_clients.py and tests/test_shutdown.py passed on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson

from jobq.api.problems import PROBLEM, TYPE_BASE

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base

    # The header timeout hooks the httptools parser's callbacks (on_message_begin,
    # on_headers_complete); h11's protocol has none, so there it is off.
    _HOOKS = True
except ImportError:  # pragma: no cover - uvicorn without httptools parses with h11
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

    _HOOKS = False

PROTOCOL = "jobq.api.serving:HttpProtocol"

log = logging.getLogger("jobq.api")

# What to run once when the process starts to stop (see the module's docstring).
_stop_callbacks: list[Callable[[], None]] = []


def on_stop(callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` when the server starts to stop; returns what unregisters it (an app's
    lifespan registers at start and unregisters at its end, so apps made in tests do not
    pile up)."""
    _stop_callbacks.append(callback)

    def remove() -> None:
        if callback in _stop_callbacks:
            _stop_callbacks.remove(callback)

    return remove


def stopping() -> None:
    """The server is stopping: run (once) what ``on_stop`` registered."""
    callbacks = list(_stop_callbacks)
    _stop_callbacks.clear()
    for callback in callbacks:
        try:
            callback()
        except Exception:  # one failing must not keep the others from running
            log.exception("shutdown: a stop callback failed")


@cache
def header_timeout_s() -> float:
    from jobq.settings import get_settings

    return get_settings().header_timeout_s


def problem_bytes(status: int, reason: str, code: str, title: str, detail: str,
                  default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole problem+json answer that closes the connection, for answers given before any
    request reached the app."""
    body = orjson.dumps({"type": TYPE_BASE + code, "title": title, "status": status,
                         "detail": detail, "code": code})
    head = [f"HTTP/1.1 {status} {reason}\r\n".encode()]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head.append(f"content-type: {PROBLEM}\r\ncontent-length: {len(body)}\r\n"
                "connection: close\r\n\r\n".encode())
    return b"".join(head) + body


class _JoinedWrites:
    """A transport whose writes within one loop iteration leave as one."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self._flush)
        else:
            self._held = None
            self._transport.write(held + data)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's own
        return getattr(self._transport, name)


class HttpProtocol(_Base):  # type: ignore[misc, valid-type]
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_JoinedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_begun = False
        # From the connection's opening: one that never sends a byte is closed too.
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        stopping()
        super().shutdown()

    # The header timeout

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True
        if self._header_timer is None:  # a connection's first request: timed from its opening
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        self._request_begun = False
        super().on_headers_complete()

    def _arm_header_timer(self) -> None:
        if _HOOKS:
            self._header_timer = self.loop.call_later(header_timeout_s(), self._header_timed_out)

    def _disarm_header_timer(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined request is still being answered: close once it is.
            self.cycle.keep_alive = False
            return
        if self._request_begun:
            self.transport.write(problem_bytes(
                408, "Request Timeout", "request_timeout", "Request timeout",
                f"the request line and headers did not arrive within {header_timeout_s():g} s",
                self.server_state.default_headers))
        self.transport.close()

    # uvicorn's plain-text 400, as problem+json

    def send_400_response(self, msg: str) -> None:
        self._disarm_header_timer()
        self.transport.write(problem_bytes(
            400, "Bad Request", "bad_request", "Bad request",
            f"{msg} (not an HTTP/1.1 request this service can parse)",
            self.server_state.default_headers))
        self.transport.close()
