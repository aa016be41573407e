"""What ``Client`` and ``AsyncClient`` share: request bodies, error mapping, retry timing.

Nothing here does I/O, so the two clients differ only in how they send and sleep.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from enum import Enum
from importlib import metadata
from typing import Any, Final
from urllib.parse import quote

import httpx

from jobq.client._exceptions import APIError, RetryableError, TransportError, error_class
from jobq.client._models import NewJob


def _version() -> str:
    # pyproject.toml holds the one version; the installed metadata carries it (as for
    # jobq.__version__, which cannot be imported here: jobq's __init__ imports this package).
    try:
        return metadata.version("jobq")
    except metadata.PackageNotFoundError:  # imported from a tree that was never installed
        return "0+unknown"


USER_AGENT: Final = f"jobq-python/{_version()}"
# Where the clients, the worker and the CLI find the access token when none is passed.
TOKEN_ENV: Final = "JOBQ_TOKEN"
DEFAULT_TIMEOUT: Final = 30.0
# A long-poll claim holds the request open for wait_ms; the read timeout must outlast it.
CLAIM_TIMEOUT_MARGIN_S: Final = 10.0
# Retry-After is optional on a 503 from a proxy; a second is a polite first guess.
DEFAULT_RETRY_AFTER_S: Final = 1.0
# wait() polls GET /v1/jobs/{id}: quickly at first (most jobs are short), then calmer.
WAIT_POLL_FIRST_S: Final = 0.05
WAIT_POLL_MAX_S: Final = 1.0


class _Unset(Enum):
    UNSET = "UNSET"


UNSET: Final = _Unset.UNSET
"""Marks an argument that was not given, where ``None`` is a meaningful value (``null``)."""

Duration = float | timedelta


def as_payload(payload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A job's payload is a JSON object: a list or a number is refused here, in words, rather
    than by dict()'s "cannot convert dictionary update sequence element"."""
    if payload is None:
        return None
    if not isinstance(payload, Mapping):
        raise TypeError(f"payload must be a JSON object (a dict), not {type(payload).__name__}")
    return dict(payload)


def seconds(value: Duration) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def to_ms(value: Duration) -> int:
    return round(seconds(value) * 1000)


def rfc3339(value: datetime) -> str:
    # A naive datetime could be local time or UTC; guessing would shift jobs by hours.
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("run_at must be timezone-aware (for example datetime.now(UTC))")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def path(*parts: str) -> str:
    """``/v1/...`` with each id percent-encoded: ids are opaque and may hold any character."""
    return "/v1/" + "/".join(quote(str(p), safe="") for p in parts)


def encode(body: Any) -> bytes:
    # allow_nan=False: NaN is not JSON, and the service would rightly refuse it as 422.
    return json.dumps(body, allow_nan=False, separators=(",", ":")).encode()


def drop_unset(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not UNSET}


def job_body(job: NewJob) -> dict[str, Any]:
    if job.delay is not None and job.run_at is not None:
        raise ValueError("give delay or run_at, not both")
    body: dict[str, Any] = {"type": job.type}
    optional = {
        "payload": job.payload,
        "queue": job.queue,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.idempotency_key,
        "delay_ms": to_ms(job.delay) if job.delay is not None else None,
        "run_at": rfc3339(job.run_at) if job.run_at is not None else None,
    }
    # Absent fields take the service's (or the queue's) defaults.
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def publish_body(job: NewJob) -> dict[str, Any]:
    """A publish's body: a job's, without the queue (the topic's subscriptions name them)."""
    body = job_body(job)
    body.pop("queue", None)
    return body


def _names(names: Iterable[str]) -> list[str]:
    # list("email") would claim from queues "e", "m", "a", ...; a lone string means one name.
    return [names] if isinstance(names, str) else list(names)


def claim_body(
    queues: Iterable[str],
    *,
    worker_id: str,
    types: Iterable[str] | None,
    limit: int,
    lease_ms: int | None,
    wait_ms: int,
) -> dict[str, Any]:
    body: dict[str, Any] = {"worker_id": worker_id, "queues": _names(queues), "limit": limit}
    if types is not None:
        body["types"] = _names(types)
    if lease_ms is not None:
        body["lease_ms"] = lease_ms
    if wait_ms:
        body["wait_ms"] = wait_ms
    return body


def claim_timeout(base: httpx.Timeout, wait_ms: int) -> httpx.Timeout:
    read = base.read
    if read is None:
        return base
    return httpx.Timeout(
        connect=base.connect,
        read=read + wait_ms / 1000 + CLAIM_TIMEOUT_MARGIN_S,
        write=base.write,
        pool=base.pool,
    )


def fail_body(error: str, retry: bool | None, retry_in_ms: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": error}
    if retry is not None:
        body["retry"] = retry
    if retry_in_ms is not None:
        body["retry_in_ms"] = retry_in_ms
    return body


def ack_many_body(acks: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> dict[str, Any]:
    pairs = acks.items() if isinstance(acks, Mapping) else acks
    return {"acks": [{"lease_id": lease_id, "result": result} for lease_id, result in pairs]}


def release_body(delay_ms: int) -> dict[str, Any]:
    # No delay is the service's default: an empty body is what an older caller sends too.
    return {"delay_ms": delay_ms} if delay_ms else {}


def release_many_body(
    releases: Iterable[str | tuple[str, int]] | Mapping[str, int],
) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    pairs = releases.items() if isinstance(releases, Mapping) else releases
    for item in pairs:
        lease_id, delay_ms = (item, 0) if isinstance(item, str) else item
        items.append({"lease_id": lease_id, **release_body(delay_ms)})
    return {"releases": items}


def worker_beat_body(
    *,
    host: str | None,
    pid: int | None,
    concurrency: int | None,
    queues: Iterable[str] | None,
    in_flight: int | None,
    started_at: datetime | None,
    state: str | None,
) -> dict[str, Any]:
    fields = {
        "host": host,
        "pid": pid,
        "concurrency": concurrency,
        "queues": _names(queues) if queues is not None else None,
        "in_flight": in_flight,
        "started_at": rfc3339(started_at) if started_at is not None else None,
        "state": state,
    }
    return {k: v for k, v in fields.items() if v is not None}


def dead_filter(queue: str | None, type: str | None, limit: int | None) -> dict[str, Any]:
    return {
        k: v for k, v in {"queue": queue, "type": type, "limit": limit}.items() if v is not None
    }


def schedule_job(
    *,
    type: str | _Unset,
    queue: str | None | _Unset,
    payload: Mapping[str, Any] | None | _Unset,
    priority: int | None | _Unset,
    max_attempts: int | None | _Unset,
) -> dict[str, Any]:
    return drop_unset(
        {
            "type": type,
            "queue": queue,
            "payload": dict(payload) if isinstance(payload, Mapping) else payload,
            "priority": priority,
            "max_attempts": max_attempts,
        }
    )


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP-date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(response: httpx.Response) -> APIError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    code = body.get("code") if isinstance(body.get("code"), str) else None
    cls = error_class(response.status_code, code)
    args: dict[str, Any] = {
        "status": response.status_code,
        "code": code,
        "title": body.get("title") or response.reason_phrase or None,
        "detail": body.get("detail"),
        "body": body,
    }
    if issubclass(cls, RetryableError):
        return cls(**args, retry_after=_retry_after(body, response))
    return cls(**args)


def _retry_after(body: dict[str, Any], response: httpx.Response) -> float | None:
    """The wait an overload answer asks for, in seconds: the body's ``retry_after_ms``
    (the rate limits' exact wait) when present, else the ``Retry-After`` header."""
    ms = body.get("retry_after_ms")
    if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0:
        return ms / 1000
    return parse_retry_after(response.headers.get("retry-after"))


def decode(response: httpx.Response) -> Any:
    """The JSON body of a success answer, or the typed error for a failure."""
    if response.is_error:
        raise error_from_response(response)
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError as exc:
        raise APIError(
            response.status_code, title="the service answered with a body that is not JSON"
        ) from exc


def overload_pause(error: APIError, remaining: float) -> float | None:
    """How long to sleep before retrying an overload answer, or None to give up now.

    Only ``RetryableError`` (429 and 503) is waited out: the service promises nothing was
    done, so sending again is safe. We never sleep past the caller's budget; a wait that
    would not fit is refused at once, so the caller learns sooner.
    """
    if not isinstance(error, RetryableError):
        return None
    pause = error.retry_after if error.retry_after is not None else DEFAULT_RETRY_AFTER_S
    # A little jitter, so producers told "1 s" at the same moment do not return in lock-step.
    pause *= 1 + random.uniform(0, 0.1)
    return pause if pause <= remaining else None


def next_poll(previous: float) -> float:
    return min(previous * 1.5, WAIT_POLL_MAX_S)


def resolve_token(token: str | None) -> str | None:
    """The token given, else ``JOBQ_TOKEN`` from the environment; ``""`` means none at all
    (a way to send no token even when ``JOBQ_TOKEN`` is set)."""
    if token is None:
        token = os.environ.get(TOKEN_ENV)
    return token or None


def make_headers(token: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(extra or {})
    return headers


# Built URLs kept for reuse (``/v1/jobs``, ``/v1/leases``...); a path with an id is seldom
# asked twice, so the cache is simply emptied when full.
URL_CACHE_SIZE: Final = 64


def check_url(url: str) -> str:
    """The service's base URL, refused at once (``ValueError``) when it is not an absolute
    http(s) URL: ``localhost:8100`` would otherwise fail on the first call, as a transport
    error about a ``localhost://`` protocol."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"url {url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(
            f"url {url!r} is not an http:// or https:// URL (for example http://{url.split('://')[-1]})"
        )
    if parsed.path.rstrip("/").endswith("/v1"):
        # Every call adds /v1/... itself: this URL would answer 404 to all of them.
        root = str(parsed.copy_with(path=parsed.path.rstrip("/")[: -len("/v1")] or "/")).rstrip("/")
        raise ValueError(f"url {url!r} names the API's /v1: give the service's root, {root}")
    return url


def transport_error(
    base_url: str, source: str, method: str, path: str, exc: httpx.TransportError
) -> TransportError:
    """The SDK's error for a request that got no answer: it names the URL tried and what
    chose it, since a wrong URL is the usual cause."""
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    what = "cannot reach" if isinstance(exc, httpx.ConnectError) else "no answer from"
    error = TransportError(f"{what} {base_url} (from {source}): {method} {path}: {reason}")
    error.url = base_url
    return error


class Wire:
    """Builds each request as ``httpx.Client`` would for this SDK, minus the per-request
    work the SDK never uses (base-URL merging, cookie jar, auth flow, redirect loop): that
    machinery cost more CPU than the service spends answering a request.

    The headers are made once, in the order ``httpx.Request(content=...)`` gives them
    (``Host`` first unless given, then ``Content-Length: 0`` for a bodiless ``POST``; a body's
    ``Content-Length`` last), and each request is ``httpx.Request(stream=...)``, which takes them as they are: the
    ``content=`` form parsed and rebuilt the header list twice a request and read the body
    into the request at once. tests/sdk/test_client_unit.py checks both forms give the same.

    The request goes straight to the transport (``send`` in each client), which reads the
    body from the stream; the response is an ``httpx.Response`` and transport failures are
    ``httpx.TransportError`` as before.
    """

    def __init__(self, url: str, headers: Mapping[str, str], timeout: httpx.Timeout) -> None:
        parsed = httpx.URL(url)
        self._base = str(parsed).rstrip("/")
        given = httpx.Headers(headers)
        self._host = [] if "Host" in given else [(b"Host", parsed.netloc)]
        self._json_raw = httpx.Headers({**headers, "Content-Type": "application/json"}).raw
        self._headers = self._bodiless("GET", given.raw)
        self._post_headers = self._bodiless("POST", given.raw)
        self._timeout = timeout.as_dict()
        self._urls: dict[str, httpx.URL] = {}

    def _url(self, path: str, params: Mapping[str, Any] | None) -> httpx.URL:
        if params:
            return httpx.URL(self._base + path, params=params)
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= URL_CACHE_SIZE:
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self._base + path)
        return url

    def _bodiless(self, method: str, given: list[tuple[bytes, bytes]]) -> httpx.Headers:
        length = [(b"Content-Length", b"0")] if method in _BODY_METHODS else []
        return httpx.Headers([*self._host, *length, *given])

    def build(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Mapping[str, Any] | None,
        timeout: httpx.Timeout | None,
    ) -> httpx.Request:
        if content:
            length = (b"Content-Length", str(len(content)).encode("ascii"))
            headers = httpx.Headers([*self._host, *self._json_raw, length])
        elif content is not None:  # b"": as httpx, no body and so no length of its own
            headers = self._bodiless(method, self._json_raw)
        elif method in _BODY_METHODS:
            headers = self._post_headers
        else:
            headers = self._headers
        return httpx.Request(
            method,
            self._url(path, params),
            headers=headers,
            stream=httpx.ByteStream(b"" if content is None else content),
            extensions={"timeout": self._timeout if timeout is None else timeout.as_dict()},
        )


# httpx sends "Content-Length: 0" with these when they have no body.
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


def make_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout if timeout is not None else DEFAULT_TIMEOUT)
