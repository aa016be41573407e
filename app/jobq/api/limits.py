"""Request body size limit, enforced while the body streams in (Content-Length may lie or be
absent with chunked encoding)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobq.api.problems import problem


class BodyTooLarge(HTTPException):
    """An HTTPException, so that FastAPI's body parsing passes it on as it is (it turns other
    exceptions into a 400) and the problem table answers 413."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request bodies are limited to {max_bytes} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._refuse(scope, receive, send)
                    return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(413, "payload_too_large", "Payload too large",
                           f"request bodies are limited to {self.max_bytes} bytes")
        await response(scope, receive, send)
