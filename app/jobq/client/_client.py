# Generated from _async_client.py by _unasync.py: do not edit. Change the async client
# and run `python -m jobq.client._unasync` (tests/sdk/test_unasync.py checks this file).
"""``Client``: the blocking SDK, call for call the ``AsyncClient`` it is generated from."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

from jobq.client import _base as b
from jobq.client._base import UNSET, Duration, _Unset, as_payload
from jobq.client._exceptions import APIError, JobFailed, WaitTimeout
from jobq.client._models import (
    AckResult,
    Job,
    JobPage,
    JobStatus,
    Lease,
    NewJob,
    Queue,
    QueuePage,
    ReleaseResult,
    Schedule,
    Subscription,
    Topic,
    parse_time,
)
from jobq.client._transport import default_transport


class Client:
    """A blocking client for one jobq service.

    ``retry_overload`` (seconds or timedelta) lets a call wait out a ``429`` (``queue_full``,
    ``queue_rate_limited``, ``token_rate_limited``, ``queue_overloaded``) and ``503
    unavailable`` by sleeping for the wait the service asks for (the body's ``retry_after_ms``
    to the millisecond, else ``Retry-After``, plus up to 10% of jitter) and sending again,
    for at most that much time in total per call; without it those answers raise at once. An answer
    ``401`` (``Unauthorized``) or ``403`` (``Forbidden``) is never retried. ``token`` is
    sent as ``Authorization: Bearer``; without it, ``JOBQ_TOKEN`` from the environment is
    (``token=""`` sends none). ``transport`` replaces the network transport
    (``httpx.MockTransport`` in tests); by default ``http://`` URLs go through the SDK's
    own keep-alive transport (``jobq.client._transport``: less CPU per request than httpx's,
    figures there), and ``https://`` URLs, or ``http://`` ones when ``HTTP_PROXY`` or
    ``ALL_PROXY`` is set, through httpx's, which honours ``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY`` and ``NO_PROXY`` from the environment as httpx does. ``url`` must be an
    absolute ``http://`` or ``https://`` URL (else ``ValueError``); a ``TransportError``
    names it and ``url_source``, what chose it (the CLI passes ``"--url"`` or
    ``"JOBQ_URL"``).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float | httpx.Timeout | None = b.DEFAULT_TIMEOUT,
        retry_overload: Duration | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        url_source: str = "the url argument",
    ) -> None:
        # A connection error names the URL and url_source (the CLI passes "--url" or
        # "JOBQ_URL"): a wrong URL is the usual cause, and the user must know where it came from.
        self._url = b.check_url(url)
        self._url_source = url_source
        self._timeout = b.make_timeout(timeout)
        self._retry_budget = b.seconds(retry_overload) if retry_overload is not None else 0.0
        sent = b.make_headers(b.resolve_token(token), headers)
        # None for https:// or a proxied URL: then httpx's own transport, reached through
        # the httpx client, which does TLS and knows the proxy rules (lean_fits).
        self._transport = transport if transport is not None else default_transport(url)
        self._wire = b.Wire(url, sent, self._timeout)
        self._http = httpx.Client(
            base_url=url, headers=sent, timeout=self._timeout, transport=self._transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _request(
        self,
        method: str,
        url: str,
        *,
        body: Any = UNSET,
        params: Mapping[str, Any] | None = None,
        http_timeout: httpx.Timeout | None = None,
    ) -> Any:
        content = b.encode(body) if body is not UNSET else None
        deadline = time.monotonic() + self._retry_budget
        while True:
            try:
                response = self._send(method, url, content, params, http_timeout)
            except httpx.TransportError as exc:
                raise b.transport_error(self._url, self._url_source, method, url, exc) from exc
            try:
                return b.decode(response)
            except APIError as error:
                pause = b.overload_pause(error, deadline - time.monotonic())
                if pause is None:
                    raise
                time.sleep(pause)

    def _send(
        self,
        method: str,
        url: str,
        content: bytes | None,
        params: Mapping[str, Any] | None,
        http_timeout: httpx.Timeout | None,
    ) -> httpx.Response:
        if self._transport is None:
            return self._http.request(
                method,
                url,
                content=content,
                headers={"Content-Type": "application/json"} if content is not None else None,
                params=params,
                timeout=http_timeout or self._timeout,
            )
        request = self._wire.build(method, url, content, params, http_timeout)
        response = self._transport.handle_request(request)
        try:
            response.read()
        finally:
            response.close()
        response.request = request
        return response

    # Producers

    def enqueue(
        self,
        type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        delay: Duration | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """Enqueue one job. ``delay`` (seconds or timedelta) or ``run_at`` (aware datetime)
        postpones it; with ``idempotency_key`` a repeat returns the existing job."""
        job = NewJob(
            type=type,
            payload=as_payload(payload),
            queue=queue,
            priority=priority,
            delay=delay,
            run_at=run_at,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
        )
        return Job.from_json(self._request("POST", b.path("jobs"), body=b.job_body(job)))

    def enqueue_many(self, jobs: Iterable[NewJob]) -> list[Job]:
        """Enqueue up to 1000 jobs in one transaction: all are enqueued or none."""
        body = {"jobs": [b.job_body(job) for job in jobs]}
        data = self._request("POST", b.path("jobs", "batch"), body=body)
        return [Job.from_json(j) for j in data["jobs"]]

    def get(self, job_id: str) -> Job:
        return Job.from_json(self._request("GET", b.path("jobs", job_id)))

    def wait(self, job_id: str, timeout: Duration) -> Job:
        """Poll until the job finishes. Returns it when ``completed`` (its ``result`` is the
        handler's return value); raises ``JobFailed`` when it ends ``dead`` or ``cancelled``
        and ``WaitTimeout`` when ``timeout`` passes first."""
        limit = b.seconds(timeout)
        deadline = time.monotonic() + limit
        pause = b.WAIT_POLL_FIRST_S
        while True:
            job = self.get(job_id)
            if job.status == JobStatus.COMPLETED:
                return job
            if job.finished:
                raise JobFailed(job)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(job_id, limit)
            time.sleep(min(pause, remaining))
            pause = b.next_poll(pause)

    # Operators

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """One page of jobs, newest first. ``iter_jobs`` follows the cursor for you."""
        params = {"queue": queue, "status": status, "type": type, "limit": limit, "cursor": cursor}
        data = self._request(
            "GET", b.path("jobs"), params={k: v for k, v in params.items() if v is not None}
        )
        return JobPage.from_json(data)

    def iter_jobs(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        type: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Job]:
        """Every matching job, newest first, fetching pages as it goes."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(
                queue=queue, status=status, type=type, limit=page_size, cursor=cursor
            )
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def cancel(self, job_id: str) -> Job:
        return Job.from_json(self._request("POST", b.path("jobs", job_id, "cancel")))

    def retry(self, job_id: str) -> Job:
        return Job.from_json(self._request("POST", b.path("jobs", job_id, "retry")))

    def replay_dead(
        self, *, queue: str | None = None, type: str | None = None, limit: int | None = None
    ) -> int:
        """Send matching dead jobs back to ``pending``; returns how many."""
        body = b.dead_filter(queue, type, limit)
        data = self._request("POST", b.path("dead", "replay"), body=body)
        return int(data["replayed"])

    def purge_dead(
        self, *, queue: str | None = None, type: str | None = None, limit: int | None = None
    ) -> int:
        """Delete matching dead jobs; returns how many."""
        params = b.dead_filter(queue, type, limit)
        data = self._request("DELETE", b.path("dead"), params=params)
        return int(data["purged"])

    def list_queues(
        self,
        *,
        prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> QueuePage:
        """One page of queues by name (the service's default: 100, at most 1000), only those
        whose name starts with ``prefix`` if given. ``iter_queues`` follows the cursor for you."""
        params = {"prefix": prefix, "limit": limit, "cursor": cursor}
        data = self._request(
            "GET", b.path("queues"), params={k: v for k, v in params.items() if v is not None}
        )
        return QueuePage.from_json(data)

    def iter_queues(
        self, *, prefix: str | None = None, page_size: int | None = None
    ) -> Iterator[Queue]:
        """Every queue (whose name starts with ``prefix``), by name, fetching pages as it goes."""
        cursor: str | None = None
        while True:
            page = self.list_queues(prefix=prefix, limit=page_size, cursor=cursor)
            yield from page.queues
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def queues(self, *, prefix: str | None = None) -> list[Queue]:
        """Every queue (whose name starts with ``prefix``), all pages read: with many
        queues prefer ``iter_queues`` or ``list_queues``."""
        return [q for q in self.iter_queues(prefix=prefix, page_size=1000)]

    def queue(self, name: str) -> Queue:
        return Queue.from_json(self._request("GET", b.path("queues", name)))

    def update_queue(
        self,
        name: str,
        *,
        max_depth: int | None | _Unset = UNSET,
        paused: bool | _Unset = UNSET,
        lease_ms: int | _Unset = UNSET,
        max_attempts: int | _Unset = UNSET,
        backoff_base_ms: int | _Unset = UNSET,
        backoff_max_ms: int | _Unset = UNSET,
        max_lease_expiries: int | _Unset = UNSET,
        aging_ms: int | None | _Unset = UNSET,
        max_running: int | None | _Unset = UNSET,
        retention_ms: int | _Unset = UNSET,
        dead_retention_ms: int | _Unset = UNSET,
        rate_limit: Mapping[str, Any] | None | _Unset = UNSET,
        enqueue_rate: Mapping[str, Any] | None | _Unset = UNSET,
        soft_depth: int | None | _Unset = UNSET,
        soft_lag_ms: int | None | _Unset = UNSET,
        extra: Mapping[str, Any] | None = None,
    ) -> Queue:
        """Change the settings given; ``None`` means "no limit" / "off" where allowed.
        ``rate_limit`` (``{"jobs": 10, "per_ms": 1000, "key": "payload.tenant"}``: the pace of
        claims) and ``enqueue_rate`` (``{"jobs": 50, "per_ms": 1000, "burst": 100}``) are sent
        as given. ``extra`` carries settings this SDK does not name, sent as they are."""
        body = b.drop_unset(
            {
                "rate_limit": dict(rate_limit) if isinstance(rate_limit, Mapping) else rate_limit,
                "enqueue_rate": dict(enqueue_rate) if isinstance(enqueue_rate, Mapping) else enqueue_rate,
                "soft_depth": soft_depth,
                "soft_lag_ms": soft_lag_ms,
                "max_depth": max_depth,
                "paused": paused,
                "lease_ms": lease_ms,
                "max_attempts": max_attempts,
                "backoff_base_ms": backoff_base_ms,
                "backoff_max_ms": backoff_max_ms,
                "max_lease_expiries": max_lease_expiries,
                "aging_ms": aging_ms,
                "max_running": max_running,
                "retention_ms": retention_ms,
                "dead_retention_ms": dead_retention_ms,
            }
        )
        body.update(extra or {})
        return Queue.from_json(self._request("PATCH", b.path("queues", name), body=body))

    def delete_queue(self, name: str, purge: bool = False) -> None:
        """Delete a queue, with its settings and its completed and cancelled jobs. Refused
        with ``QueueNotEmpty`` (its ``counts``, ``schedules`` and ``topics`` say why) while it
        holds jobs waiting, running, failed or dead, or schedules or topic subscriptions name
        it; ``purge=True`` deletes those jobs too (running ones lose their leases). An unknown
        queue is ``NotFound``."""
        params = {"purge": "true"} if purge else None
        self._request("DELETE", b.path("queues", name), params=params)

    def put_schedule(
        self,
        name: str,
        *,
        cron: str,
        type: str,
        payload: Mapping[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        timezone: str | None = None,
        misfire: str | None = None,
        enabled: bool | None = None,
    ) -> Schedule:
        """Create or replace a recurring job. Arguments left None take the service default."""
        job = b.schedule_job(
            type=type,
            queue=queue if queue is not None else UNSET,
            payload=payload if payload is not None else UNSET,
            priority=priority if priority is not None else UNSET,
            max_attempts=max_attempts if max_attempts is not None else UNSET,
        )
        options = {"timezone": timezone, "misfire": misfire, "enabled": enabled}
        body = {"cron": cron, "job": job, **{k: v for k, v in options.items() if v is not None}}
        data = self._request("PUT", b.path("schedules", name), body=body)
        return Schedule.from_json(data, name)

    def get_schedule(self, name: str) -> Schedule:
        return Schedule.from_json(self._request("GET", b.path("schedules", name)), name)

    def list_schedules(self) -> list[Schedule]:
        data = self._request("GET", b.path("schedules"))
        items = data["schedules"] if isinstance(data, dict) else data
        return [Schedule.from_json(s) for s in items]

    def update_schedule(
        self,
        name: str,
        *,
        cron: str | _Unset = UNSET,
        timezone: str | _Unset = UNSET,
        misfire: str | _Unset = UNSET,
        enabled: bool | _Unset = UNSET,
        type: str | _Unset = UNSET,
        payload: Mapping[str, Any] | None | _Unset = UNSET,
        queue: str | None | _Unset = UNSET,
        priority: int | None | _Unset = UNSET,
        max_attempts: int | None | _Unset = UNSET,
    ) -> Schedule:
        """Change what is given. Job fields go in a partial ``job`` object (merge-patch)."""
        body = b.drop_unset(
            {"cron": cron, "timezone": timezone, "misfire": misfire, "enabled": enabled}
        )
        job = b.schedule_job(
            type=type, queue=queue, payload=payload, priority=priority, max_attempts=max_attempts
        )
        if job:
            body["job"] = job
        data = self._request("PATCH", b.path("schedules", name), body=body)
        return Schedule.from_json(data, name)

    def delete_schedule(self, name: str) -> None:
        self._request("DELETE", b.path("schedules", name))

    # Topics

    def publish(
        self,
        topic: str,
        type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        delay: Duration | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        idempotency_key: str | None = None,
    ) -> list[Job]:
        """Enqueue one job in every queue subscribed to ``topic``, in one transaction: all
        or none (``QueueFull`` if any of those queues is full, ``Forbidden`` if the token
        misses one). Returns the jobs, by queue name; none for a topic without
        subscriptions. With ``idempotency_key`` a repeat returns the same jobs."""
        job = NewJob(
            type=type,
            payload=as_payload(payload),
            priority=priority,
            delay=delay,
            run_at=run_at,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
        )
        data = self._request(
            "POST", b.path("topics", topic, "publish"), body=b.publish_body(job)
        )
        return [Job.from_json(j) for j in data["jobs"]]

    def subscribe(self, topic: str, queue: str, type: str | None = None) -> Subscription:
        """Subscribe ``queue`` to ``topic`` (or replace its ``type`` override)."""
        body = {"type": type} if type is not None else {}
        data = self._request(
            "PUT", b.path("topics", topic, "subscriptions", queue), body=body
        )
        return Subscription.from_json(data, topic)

    def unsubscribe(self, topic: str, queue: str) -> None:
        """``NotFound`` if ``queue`` is not subscribed to ``topic``."""
        self._request("DELETE", b.path("topics", topic, "subscriptions", queue))

    def list_topics(self) -> list[Topic]:
        data = self._request("GET", b.path("topics"))
        return [Topic.from_json(t) for t in data["topics"]]

    def get_topic(self, topic: str) -> Topic:
        """A topic nobody subscribed to comes back with no subscriptions."""
        return Topic.from_json(self._request("GET", b.path("topics", topic)), topic)

    # Workers

    def claim(
        self,
        queues: Iterable[str],
        *,
        worker_id: str,
        types: Iterable[str] | None = None,
        limit: int = 1,
        lease_ms: int | None = None,
        wait_ms: int = 0,
    ) -> list[Lease]:
        """Lease up to ``limit`` jobs; with ``wait_ms`` the call long-polls until one is ready."""
        body = b.claim_body(
            queues,
            worker_id=worker_id,
            types=types,
            limit=limit,
            lease_ms=lease_ms,
            wait_ms=wait_ms,
        )
        data = self._request(
            "POST",
            b.path("leases"),
            body=body,
            http_timeout=b.claim_timeout(self._timeout, wait_ms),
        )
        return [Lease.from_json(lease) for lease in data["leases"]]

    def heartbeat(self, lease_id: str, extend_ms: int | None = None) -> datetime | None:
        """Extend a lease; returns the new ``locked_until``. Raises ``LeaseLost`` if it is gone."""
        body = {"extend_ms": extend_ms} if extend_ms is not None else {}
        data = self._request("POST", b.path("leases", lease_id, "heartbeat"), body=body)
        return parse_time(data.get("locked_until"))

    def ack(self, lease_id: str, result: Any = None) -> Job:
        """Complete the job with ``result`` (any JSON). Raises ``LeaseLost`` if it is gone."""
        url = b.path("leases", lease_id, "ack")
        data = self._request("POST", url, body={"result": result})
        return Job.from_json(data)

    def ack_many(
        self, acks: Iterable[tuple[str, Any]] | Mapping[str, Any]
    ) -> list[AckResult]:
        """Ack many leases at once (``{lease_id: result}`` or pairs); a lost lease does not
        fail the others, so check each ``AckResult.ok``."""
        data = self._request("POST", b.path("leases", "ack"), body=b.ack_many_body(acks))
        return [AckResult.from_json(r) for r in data["results"]]

    def fail(
        self,
        lease_id: str,
        error: str,
        *,
        retry: bool | None = None,
        retry_in_ms: int | None = None,
    ) -> Job:
        """Report a failed attempt. ``retry=False`` sends the job dead; ``retry_in_ms``
        overrides the queue's backoff."""
        body = b.fail_body(error, retry, retry_in_ms)
        data = self._request("POST", b.path("leases", lease_id, "fail"), body=body)
        return Job.from_json(data)

    def release(self, lease_id: str, delay_ms: int = 0) -> Job:
        """Hand the job back unfinished: it is ``pending`` again (visible after
        ``delay_ms``) and the claim does not count against ``max_attempts``; nothing goes
        into ``errors``. The job's ``releases`` records it. Raises ``LeaseLost`` if the
        lease is gone."""
        url = b.path("leases", lease_id, "release")
        return Job.from_json(self._request("POST", url, body=b.release_body(delay_ms)))

    def release_many(
        self, releases: Iterable[str | tuple[str, int]] | Mapping[str, int]
    ) -> list[ReleaseResult]:
        """Release many leases at once (up to 1000): lease ids, ``(lease_id, delay_ms)``
        pairs or ``{lease_id: delay_ms}``. A lost lease does not fail the others, so check
        each ``ReleaseResult.ok``."""
        body = b.release_many_body(releases)
        data = self._request("POST", b.path("leases", "release"), body=body)
        return [ReleaseResult.from_json(r) for r in data["results"]]

    def worker_beat(
        self,
        worker_id: str,
        *,
        host: str | None = None,
        pid: int | None = None,
        concurrency: int | None = None,
        queues: Iterable[str] | None = None,
        in_flight: int | None = None,
        started_at: datetime | None = None,
        state: str | None = None,
    ) -> dict[str, Any]:
        """Report a worker process as alive (``state``: ``running``, ``stopping`` or
        ``stopped``), so ``GET /v1/workers`` lists it even while it holds no job. Returns
        the service's entry for it. ``Worker`` does this by itself every 10 seconds."""
        body = b.worker_beat_body(
            host=host,
            pid=pid,
            concurrency=concurrency,
            queues=queues,
            in_flight=in_flight,
            started_at=started_at,
            state=state,
        )
        data = self._request("POST", b.path("workers", worker_id, "beat"), body=body)
        return data if isinstance(data, dict) else {}
