"""A service that answers the SDK's enqueues without doing anything, for bench/peers.py's
``--floors``: what the HTTP hop alone costs (the SDK's ``Client``, loopback TCP, uvicorn with
the HTTP protocol and event loop ``jobq serve`` runs), measured in the same minutes as the
systems. No database, no validation, no FastAPI: a bare ASGI function.

    python noop_service.py PORT

``POST /v1/jobs`` answers ``201`` with a job as ``jobq serve`` writes one; ``POST
/v1/jobs/batch`` answers ``201`` with as many as the body's ``jobs`` holds (it parses the
body, as any service must, to count them); ``GET /readyz`` answers ``200``. Everything else
is a 404.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
import uvicorn

from jobq.api.serving import PROTOCOL

JOB = orjson.dumps({
    "id": "1", "queue": "peers", "type": "noop", "payload": {"k": 1}, "priority": 0, "status": "pending",
    "attempt": 0, "max_attempts": 25, "idempotency_key": None, "created_at": "2026-12-06T12:00:00.000000Z",
    "visible_at": "2026-12-06T12:00:00.000000Z", "locked_until": None, "worker_id": None,
    "completed_at": None, "last_error": None, "errors": [], "result": None, "releases": []})
JSON = [(b"content-type", b"application/json")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    status, answer = 404, b'{"title":"Not Found"}'
    if scope["path"] == "/readyz":
        status, answer = 200, b'{"status":"ready"}'
    elif scope["method"] == "POST" and scope["path"] == "/v1/jobs":
        orjson.loads(body)
        status, answer = 201, JOB
    elif scope["method"] == "POST" and scope["path"] == "/v1/jobs/batch":
        n = len(orjson.loads(body)["jobs"])
        status, answer = 201, b'{"jobs":[' + b",".join([JOB] * n) + b"]}"
    # Content-Length, as jobq serve's answers have (without it uvicorn would chunk the body).
    headers = [*JSON, (b"content-length", str(len(answer)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="auto", http=PROTOCOL, log_level="warning",
                lifespan="on")
