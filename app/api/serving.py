"""uvicorn's HTTP protocol with one socket write per response instead of two.

uvicorn writes a response's status line and headers when the app sends
``http.response.start``, and the body when it sends ``http.response.body``: two ``send``
calls, two TCP segments and two wake-ups of the client for every answer. A send on loopback
costs about as much CPU as a small handler (the kernel delivers the segment to the reader in
the writer's time). The transport here holds a write until the next write or the end of the
event loop's current iteration, whichever comes first: an app sends the start and the body
of a response one after the other without yielding in between, so they leave together; a
write with nothing after it leaves one iteration later, before the loop waits on any I/O.

``jobq serve`` names ``HttpProtocol`` as uvicorn's ``http`` class (``PROTOCOL``).
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - uvicorn without httptools parses with h11
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

PROTOCOL = "jobq.api.serving:HttpProtocol"


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
