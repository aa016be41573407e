"""The SDK's own translation, against httpx.MockTransport: request shapes and error mapping.

These do not exercise the server; they pin what the SDK sends and how it reads answers.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

import jobq.client as jobq
from jobq.client import AsyncClient, Client, NewJob

URL = "http://jobq.test"


def job_json(**overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "id": "17",
        "queue": "default",
        "type": "email.welcome",
        "payload": {"user_id": 42},
        "priority": 0,
        "status": "pending",
        "attempt": 0,
        "max_attempts": 25,
        "idempotency_key": None,
        "created_at": "2030-01-02T03:04:05.123456Z",
        "visible_at": "2030-01-02T03:04:05Z",
        "locked_until": None,
        "worker_id": None,
        "completed_at": None,
        "last_error": None,
        "errors": [],
        "result": None,
    }
    job.update(overrides)
    return job


def problem(status: int, code: str | None, **extra: Any) -> httpx.Response:
    headers = {"content-type": "application/problem+json", **extra.pop("headers", {})}
    body = {"type": "about:blank", "title": "t", "status": status, "detail": "d", **extra}
    if code is not None:
        body["code"] = code
    return httpx.Response(status, content=json.dumps(body).encode(), headers=headers)


class Recorder:
    """A MockTransport handler that answers from a list and records the requests."""

    def __init__(self, *answers: httpx.Response | Callable[[httpx.Request], httpx.Response]):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer(request) if callable(answer) else answer

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


def client(rec: Recorder, **kwargs: Any) -> Client:
    return Client(URL, transport=httpx.MockTransport(rec), **kwargs)


def ok(body: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body)


def test_the_user_agent_names_the_installed_version() -> None:
    import jobq as package

    rec = Recorder(ok(job_json()))
    with client(rec) as c:
        c.get("17")
    # One version, pyproject.toml's, read from the installed metadata as jobq.__version__ is.
    assert rec.last.headers["user-agent"] == f"jobq-python/{package.__version__}"
    assert package.__version__ == importlib.metadata.version("jobq")


# Producers


def test_enqueue_sends_the_contract_body_and_bearer_token() -> None:
    rec = Recorder(ok(job_json(), 201))
    with client(rec, token="s3cret") as c:
        job = c.enqueue(
            "email.welcome",
            {"user_id": 42},
            queue="email",
            priority=5,
            delay=timedelta(seconds=1.5),
            max_attempts=3,
            idempotency_key="welcome:42",
        )
    req = rec.last
    assert (req.method, req.url.path) == ("POST", "/v1/jobs")
    assert req.headers["authorization"] == "Bearer s3cret"
    assert req.headers["content-type"] == "application/json"
    assert rec.body() == {
        "type": "email.welcome",
        "payload": {"user_id": 42},
        "queue": "email",
        "priority": 5,
        "delay_ms": 1500,
        "max_attempts": 3,
        "idempotency_key": "welcome:42",
    }
    assert job.id == "17" and job.payload == {"user_id": 42}
    assert job.created_at == datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


def test_enqueue_omits_what_was_not_given_and_sends_no_token_when_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JOBQ_TOKEN", raising=False)
    rec = Recorder(ok(job_json(), 201))
    client(rec).enqueue("t")
    assert rec.body() == {"type": "t"}
    assert "authorization" not in rec.last.headers


def test_delay_in_seconds_and_run_at_in_utc() -> None:
    rec = Recorder(ok(job_json(), 201))
    c = client(rec)
    c.enqueue("t", delay=0.25)
    assert rec.body()["delay_ms"] == 250
    c.enqueue("t", run_at=datetime(2030, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))))
    assert rec.body()["run_at"] == "2030-01-01T10:00:00Z"


def test_naive_run_at_and_delay_with_run_at_are_refused_before_sending() -> None:
    rec = Recorder(ok(job_json(), 201))
    c = client(rec)
    with pytest.raises(ValueError, match="timezone-aware"):
        c.enqueue("t", run_at=datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="not both"):
        c.enqueue("t", delay=1, run_at=datetime(2030, 1, 1, tzinfo=UTC))
    assert rec.requests == []


def test_nan_is_not_sent_as_json() -> None:
    rec = Recorder(ok(job_json(), 201))
    with pytest.raises(ValueError):
        client(rec).enqueue("t", {"x": float("nan")})


def test_enqueue_many_wraps_jobs_in_order() -> None:
    rec = Recorder(ok({"jobs": [job_json(id="1"), job_json(id="2")]}, 201))
    jobs = client(rec).enqueue_many(
        [NewJob(type="a", payload={"n": 1}), NewJob(type="b", queue="q", delay=2)]
    )
    assert rec.last.url.path == "/v1/jobs/batch"
    assert rec.body() == {
        "jobs": [{"type": "a", "payload": {"n": 1}}, {"type": "b", "queue": "q", "delay_ms": 2000}]
    }
    assert [j.id for j in jobs] == ["1", "2"]


def test_unknown_fields_are_kept_not_fatal() -> None:
    rec = Recorder(
        ok(
            job_json(
                tenant="acme",
                errors=[
                    {
                        "attempt": 1,
                        "error": "x",
                        "kind": "failed",
                        "at": "2030-01-01T00:00:00Z",
                        "new": 1,
                    }
                ],
            )
        )
    )
    job = client(rec).get("17")
    assert job.extra == {"tenant": "acme"}
    assert job.errors[0].attempt == 1 and job.errors[0].kind == "failed"


def test_ids_are_percent_encoded_in_paths() -> None:
    rec = Recorder(ok(job_json()))
    client(rec).get("a/b c")
    assert rec.last.url.raw_path == b"/v1/jobs/a%2Fb%20c"


def test_base_url_path_prefix_is_kept() -> None:
    rec = Recorder(ok(job_json()))
    Client(URL + "/jobq", transport=httpx.MockTransport(rec)).get("1")
    assert rec.last.url.path == "/jobq/v1/jobs/1"


# Errors


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (422, "validation_error", jobq.ValidationError),
        (401, "unauthorized", jobq.Unauthorized),
        (403, "forbidden", jobq.Forbidden),
        (404, "not_found", jobq.NotFound),
        (405, "method_not_allowed", jobq.MethodNotAllowed),
        (409, "lease_lost", jobq.LeaseLost),
        (409, "idempotency_conflict", jobq.IdempotencyConflict),
        (409, "invalid_state", jobq.InvalidState),
        (409, "queue_not_empty", jobq.QueueNotEmpty),
        (413, "payload_too_large", jobq.PayloadTooLarge),
        (429, "queue_full", jobq.QueueFull),
        (503, "unavailable", jobq.Unavailable),
        # No code (a proxy, say): the status decides.
        (409, None, jobq.Conflict),
        (429, None, jobq.RetryableError),
        (502, None, jobq.ServerError),
        (418, None, jobq.APIError),
    ],
)
def test_problem_code_maps_to_its_class(status: int, code: str | None, cls: type) -> None:
    rec = Recorder(problem(status, code))
    with pytest.raises(cls) as info:
        client(rec).get("1")
    err = info.value
    assert type(err) is cls
    assert isinstance(err, jobq.JobqError)
    assert (err.status, err.code, err.detail) == (status, code, "d")


def test_conflicts_share_a_parent() -> None:
    for cls in (jobq.LeaseLost, jobq.IdempotencyConflict, jobq.InvalidState):
        assert issubclass(cls, jobq.Conflict)
    for cls in (jobq.QueueFull, jobq.Unavailable):
        assert issubclass(cls, jobq.RetryableError)


def test_validation_error_carries_errors() -> None:
    errors = [{"loc": ["body", "type"], "msg": "field required"}]
    rec = Recorder(problem(422, "validation_error", errors=errors))
    with pytest.raises(jobq.ValidationError) as info:
        client(rec).enqueue("t")
    assert info.value.errors == errors


def test_queue_full_carries_retry_after() -> None:
    rec = Recorder(problem(429, "queue_full", headers={"Retry-After": "7"}))
    with pytest.raises(jobq.QueueFull) as info:
        client(rec).enqueue("t")
    assert info.value.retry_after == 7.0
    assert len(rec.requests) == 1  # no retry unless asked for


def test_unavailable_reads_an_http_date_retry_after() -> None:
    when = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    rec = Recorder(problem(503, "unavailable", headers={"Retry-After": when}))
    with pytest.raises(jobq.Unavailable) as info:
        client(rec).get("1")
    assert info.value.retry_after is not None and 25 < info.value.retry_after <= 30


def test_non_json_error_body_still_maps_by_status() -> None:
    rec = Recorder(httpx.Response(503, text="<html>bad gateway</html>"))
    with pytest.raises(jobq.Unavailable) as info:
        client(rec).get("1")
    assert info.value.code is None and info.value.retry_after is None


def test_connection_failure_is_a_transport_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(jobq.TransportError) as info:
        client(Recorder(refuse)).get("1")
    assert isinstance(info.value.__cause__, httpx.ConnectError)


# Access tokens


async def test_the_token_comes_from_jobq_token_unless_one_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBQ_TOKEN", "from-the-environment")
    rec = Recorder(lambda _: ok(job_json()))
    client(rec).get("17")
    assert rec.last.headers["authorization"] == "Bearer from-the-environment"
    client(rec, token="given").get("17")
    assert rec.last.headers["authorization"] == "Bearer given"
    client(rec, token="").get("17")  # "": no token at all, whatever the environment says
    assert "authorization" not in rec.last.headers
    async with AsyncClient(URL, transport=httpx.MockTransport(rec)) as c:
        await c.get("17")
    assert rec.last.headers["authorization"] == "Bearer from-the-environment"


@pytest.mark.parametrize(
    "answer, cls",
    [
        (lambda _: problem(401, "unauthorized",
                           headers={"WWW-Authenticate": 'Bearer realm="jobq"'}), jobq.Unauthorized),
        (lambda _: problem(403, "forbidden"), jobq.Forbidden),
        # A proxy's own refusal, not problem+json: still the typed error, by status.
        (lambda _: httpx.Response(401, text="<html>401</html>"), jobq.Unauthorized),
        (lambda _: httpx.Response(403, text="denied"), jobq.Forbidden),
    ],
)
async def test_401_and_403_raise_at_once_and_are_never_retried(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[httpx.Request], httpx.Response], cls: type
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("jobq.client._client.time.sleep", slept.append)
    rec = Recorder(answer, lambda _: ok(job_json(), 201))
    with pytest.raises(cls) as info:
        client(rec, token="t", retry_overload=60).enqueue("t")
    assert len(rec.requests) == 1 and slept == []
    assert info.value.status in (401, 403)
    assert not isinstance(info.value, jobq.RetryableError)

    rec = Recorder(answer, lambda _: ok({"leases": []}))
    async with AsyncClient(URL, transport=httpx.MockTransport(rec), retry_overload=60) as c:
        with pytest.raises(cls):
            await c.claim(["q"], worker_id="w", wait_ms=0)
    assert len(rec.requests) == 1


# Waiting out overload


def test_retry_overload_waits_out_429_and_503(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("jobq.client._client.time.sleep", slept.append)
    rec = Recorder(
        problem(429, "queue_full", headers={"Retry-After": "2"}),
        problem(503, "unavailable", headers={"Retry-After": "1"}),
        ok(job_json(), 201),
    )
    job = client(rec, retry_overload=timedelta(seconds=10)).enqueue("t")
    assert job.id == "17"
    assert len(rec.requests) == 3
    assert 2 <= slept[0] <= 2.2 and 1 <= slept[1] <= 1.1


def test_retry_overload_follows_the_rate_limits_wait_to_the_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rate limits' 429s say the wait in ms (the header rounds it up to a second)."""
    slept: list[float] = []
    monkeypatch.setattr("jobq.client._client.time.sleep", slept.append)
    rec = Recorder(
        problem(429, "queue_rate_limited", retry_after_ms=20, headers={"Retry-After": "1"}),
        problem(429, "token_rate_limited", retry_after_ms=350, headers={"Retry-After": "1"}),
        problem(429, "queue_overloaded", retry_after_ms=1500, headers={"Retry-After": "2"}),
        ok(job_json(), 201),
    )
    job = client(rec, retry_overload=10).enqueue("t")
    assert job.id == "17" and len(rec.requests) == 4
    assert 0.02 <= slept[0] <= 0.022 and 0.35 <= slept[1] <= 0.385 and 1.5 <= slept[2] <= 1.65


def test_rate_limit_answers_have_classes_of_their_own() -> None:
    for code, cls in (("queue_rate_limited", jobq.RateLimited),
                      ("token_rate_limited", jobq.RateLimited),
                      ("queue_overloaded", jobq.Overloaded)):
        rec = Recorder(problem(429, code, retry_after_ms=250, headers={"Retry-After": "1"}))
        with pytest.raises(cls) as info:
            client(rec).enqueue("t")
        assert isinstance(info.value, jobq.RetryableError)
        assert info.value.code == code and info.value.retry_after == 0.25


def test_retry_overload_gives_up_when_the_wait_would_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("jobq.client._client.time.sleep", slept.append)
    rec = Recorder(problem(429, "queue_full", headers={"Retry-After": "30"}))
    with pytest.raises(jobq.QueueFull):
        client(rec, retry_overload=5).enqueue("t")
    assert slept == [] and len(rec.requests) == 1


def test_retry_overload_does_not_retry_other_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jobq.client._client.time.sleep", lambda s: None)
    rec = Recorder(problem(409, "idempotency_conflict"))
    with pytest.raises(jobq.IdempotencyConflict):
        client(rec, retry_overload=60).enqueue("t", idempotency_key="k")
    assert len(rec.requests) == 1


# wait()


def test_wait_polls_until_completed() -> None:
    rec = Recorder(
        ok(job_json(status="pending")),
        ok(job_json(status="running")),
        ok(job_json(status="completed", result={"sent": True})),
    )
    job = client(rec).wait("17", timeout=5)
    assert job.result == {"sent": True} and len(rec.requests) == 3


def test_wait_raises_job_failed_for_dead_or_cancelled() -> None:
    rec = Recorder(ok(job_json(status="dead", last_error="boom")))
    with pytest.raises(jobq.JobFailed) as info:
        client(rec).wait("17", timeout=5)
    assert info.value.job.status == "dead"


def test_wait_times_out() -> None:
    rec = Recorder(ok(job_json(status="running")))
    with pytest.raises(jobq.WaitTimeout) as info:
        client(rec).wait("17", timeout=0.15)
    assert isinstance(info.value, TimeoutError)


# Operators


def test_list_jobs_filters_and_iter_jobs_follows_the_cursor() -> None:
    rec = Recorder(
        ok({"jobs": [job_json(id="3"), job_json(id="2")], "next_cursor": "c2"}),
        ok({"jobs": [job_json(id="1")], "next_cursor": None}),
    )
    ids = [j.id for j in client(rec).iter_jobs(queue="q", status="dead", page_size=2)]
    assert ids == ["3", "2", "1"]
    first, second = (dict(r.url.params) for r in rec.requests)
    assert first == {"queue": "q", "status": "dead", "limit": "2"}
    assert second == {"queue": "q", "status": "dead", "limit": "2", "cursor": "c2"}


def test_list_queues_pages_and_queues_reads_every_page() -> None:
    rec = Recorder(
        ok({"queues": [QUEUE, {**QUEUE, "name": "email2"}], "next_cursor": "c2"}),
        ok({"queues": [{**QUEUE, "name": "email3"}], "next_cursor": None}),
    )
    c = client(rec)
    page = c.list_queues(prefix="email", limit=2)
    assert [q.name for q in page.queues] == ["email", "email2"] and page.next_cursor == "c2"
    assert dict(rec.last.url.params) == {"prefix": "email", "limit": "2"}
    page = c.list_queues(prefix="email", limit=2, cursor=page.next_cursor)
    assert [q.name for q in page.queues] == ["email3"] and page.next_cursor is None
    assert dict(rec.last.url.params) == {"prefix": "email", "limit": "2", "cursor": "c2"}

    rec.answers = [ok({"queues": [QUEUE], "next_cursor": "c2"}),
                   ok({"queues": [{**QUEUE, "name": "email3"}], "next_cursor": None})]
    assert [q.name for q in c.iter_queues(page_size=1)] == ["email", "email3"]
    # queues(), as before pagination, is every queue: it follows the cursor to the end
    rec.answers = [ok({"queues": [QUEUE], "next_cursor": "c2"}),
                   ok({"queues": [{**QUEUE, "name": "email3"}], "next_cursor": None})]
    assert [q.name for q in c.queues()] == ["email", "email3"]
    second = rec.requests[-1].url.params
    assert second["cursor"] == "c2" and second["limit"] == "1000"


async def test_async_iter_queues_follows_the_cursor() -> None:
    rec = Recorder(ok({"queues": [QUEUE], "next_cursor": "c2"}),
                   ok({"queues": [{**QUEUE, "name": "email3"}], "next_cursor": None}))
    async with AsyncClient(URL, transport=httpx.MockTransport(rec)) as c:
        assert [q.name async for q in c.iter_queues(prefix="e")] == ["email", "email3"]
    assert dict(rec.requests[-1].url.params) == {"prefix": "e", "cursor": "c2"}


def test_cancel_retry_and_dead_letter_calls() -> None:
    rec = Recorder(ok(job_json(status="cancelled")))
    c = client(rec)
    assert c.cancel("9").status == "cancelled"
    assert (rec.last.method, rec.last.url.path) == ("POST", "/v1/jobs/9/cancel")
    c.retry("9")
    assert rec.last.url.path == "/v1/jobs/9/retry"

    rec.answers = [ok({"replayed": 4})]
    assert c.replay_dead(queue="q", limit=10) == 4
    assert (rec.last.url.path, rec.body()) == ("/v1/dead/replay", {"queue": "q", "limit": 10})

    rec.answers = [ok({"purged": 2})]
    assert c.purge_dead(type="t") == 2
    assert (rec.last.method, rec.last.url.path) == ("DELETE", "/v1/dead")
    assert dict(rec.last.url.params) == {"type": "t"}


QUEUE = {
    "name": "email",
    "settings": {
        "max_depth": None,
        "paused": False,
        "lease_ms": 30000,
        "max_attempts": 25,
        "backoff_base_ms": 1000,
        "backoff_max_ms": 3600000,
        "max_lease_expiries": 5,
        "aging_ms": None,
        "max_running": None,
        "future_knob": 1,
    },
    "counts": {"pending": 3, "running": 1, "failed": 0, "completed": 9, "dead": 0, "cancelled": 0},
    "waiting_by_type": {"email.welcome": 3},
    "oldest_waiting_ms": 1200,
}


def test_queues_parse_and_update_queue_sends_only_what_is_given() -> None:
    rec = Recorder(ok({"queues": [QUEUE], "next_cursor": None}))
    c = client(rec)
    [q] = c.queues()
    assert q.settings.lease_ms == 30000 and q.settings.extra == {"future_knob": 1}
    assert q.counts.pending == 3 and q.waiting_by_type == {"email.welcome": 3}
    assert q.oldest_waiting_ms == 1200

    rec.answers = [ok(QUEUE)]
    assert c.queue("email").name == "email"
    assert rec.last.url.path == "/v1/queues/email"
    c.update_queue("email", paused=True, max_depth=None, extra={"retention_ms": 1000})
    assert rec.last.method == "PATCH"
    assert rec.body() == {"paused": True, "max_depth": None, "retention_ms": 1000}


SCHEDULE = {
    "name": "nightly",
    "cron": "0 3 * * *",
    "timezone": "Europe/Paris",
    "misfire": "skip",
    "enabled": True,
    "job": {"queue": "default", "type": "report", "payload": {}, "priority": 0, "max_attempts": 25},
    "next_fire_at": "2030-01-02T02:00:00Z",
    "last_fired_at": None,
    "last_job_id": None,
}


def test_schedule_crud() -> None:
    rec = Recorder(ok(SCHEDULE))
    c = client(rec)
    s = c.put_schedule(
        "nightly", cron="0 3 * * *", type="report", timezone="Europe/Paris", misfire="skip"
    )
    assert (rec.last.method, rec.last.url.path) == ("PUT", "/v1/schedules/nightly")
    assert rec.body() == {
        "cron": "0 3 * * *",
        "timezone": "Europe/Paris",
        "misfire": "skip",
        "job": {"type": "report"},
    }
    assert s.next_fire_at == datetime(2030, 1, 2, 2, tzinfo=UTC) and s.job.type == "report"

    c.update_schedule("nightly", enabled=False, payload={"full": True})
    assert rec.last.method == "PATCH"
    assert rec.body() == {"enabled": False, "job": {"payload": {"full": True}}}

    assert c.get_schedule("nightly").cron == "0 3 * * *"
    rec.answers = [ok({"schedules": [SCHEDULE]})]
    assert [s.name for s in c.list_schedules()] == ["nightly"]
    rec.answers = [httpx.Response(204)]
    assert c.delete_schedule("nightly") is None
    assert rec.last.method == "DELETE"


# Workers


def test_claim_body_and_long_poll_timeout() -> None:
    lease = {"lease_id": "L1", "locked_until": "2030-01-01T00:00:30Z", "job": job_json()}
    rec = Recorder(ok({"leases": [lease]}))
    [got] = client(rec, timeout=5).claim(
        ["high", "default"], worker_id="w1", types=["email.welcome"], limit=4, wait_ms=20000
    )
    assert rec.body() == {
        "worker_id": "w1",
        "queues": ["high", "default"],
        "limit": 4,
        "types": ["email.welcome"],
        "wait_ms": 20000,
    }
    # The read timeout outlasts the long-poll.
    assert rec.last.extensions["timeout"]["read"] >= 25
    assert got.lease_id == "L1" and got.job.id == "17"


def test_claim_treats_a_lone_string_as_one_queue() -> None:
    rec = Recorder(ok({"leases": []}))
    client(rec).claim("email", worker_id="w1")
    assert rec.body()["queues"] == ["email"]


def test_heartbeat_ack_fail_and_ack_many() -> None:
    rec = Recorder(ok({"locked_until": "2030-01-01T00:01:00Z"}))
    c = client(rec)
    assert c.heartbeat("L 1", extend_ms=60000) == datetime(2030, 1, 1, 0, 1, tzinfo=UTC)
    assert rec.last.url.raw_path == b"/v1/leases/L%201/heartbeat"
    assert rec.body() == {"extend_ms": 60000}
    c.heartbeat("L1")
    assert rec.body() == {}

    rec.answers = [ok(job_json(status="completed"))]
    c.ack("L1", {"n": 1})
    assert (rec.last.url.path, rec.body()) == ("/v1/leases/L1/ack", {"result": {"n": 1}})
    c.fail("L1", "boom", retry=False)
    assert (rec.last.url.path, rec.body()) == (
        "/v1/leases/L1/fail",
        {"error": "boom", "retry": False},
    )
    c.fail("L1", "later", retry_in_ms=0)
    assert rec.body() == {"error": "later", "retry_in_ms": 0}

    rec.answers = [
        ok(
            {
                "results": [
                    {"lease_id": "L1", "ok": True},
                    {"lease_id": "L2", "ok": False, "code": "lease_lost"},
                ]
            }
        )
    ]
    results = c.ack_many([("L1", 1), ("L2", None)])
    assert rec.body() == {
        "acks": [{"lease_id": "L1", "result": 1}, {"lease_id": "L2", "result": None}]
    }
    assert [(r.ok, r.code) for r in results] == [(True, None), (False, "lease_lost")]


def test_release_and_release_many() -> None:
    released = job_json(
        status="pending",
        releases=[{"attempt": 1, "at": "2030-01-01T00:00:00Z", "worker_id": "w1", "delay_ms": 0}],
    )
    rec = Recorder(ok(released))
    c = client(rec)
    job = c.release("L 1")
    assert (rec.last.method, rec.last.url.raw_path, rec.body()) == ("POST", b"/v1/leases/L%201/release", {})
    assert job.status == "pending" and job.attempt == 0
    assert [(r.attempt, r.worker_id, r.delay_ms) for r in job.releases] == [(1, "w1", 0)]
    assert job.releases[0].at == datetime(2030, 1, 1, tzinfo=UTC) and "releases" not in job.extra
    c.release("L1", delay_ms=5000)
    assert rec.body() == {"delay_ms": 5000}

    rec.answers = [
        ok({"results": [{"lease_id": "L1", "ok": True},
                        {"lease_id": "L2", "ok": False, "code": "lease_lost"},
                        {"lease_id": "L3", "ok": False, "code": "not_found"}]})
    ]
    results = c.release_many(["L1", ("L2", 100), "L3"])
    assert (rec.last.url.path, rec.body()) == ("/v1/leases/release", {"releases": [
        {"lease_id": "L1"}, {"lease_id": "L2", "delay_ms": 100}, {"lease_id": "L3"}]})
    assert [(r.lease_id, r.ok, r.code) for r in results] == [
        ("L1", True, None), ("L2", False, "lease_lost"), ("L3", False, "not_found")]
    c.release_many({"L1": 0, "L2": 7})
    assert rec.body() == {"releases": [{"lease_id": "L1"}, {"lease_id": "L2", "delay_ms": 7}]}


def test_a_job_from_a_service_without_releases_has_none() -> None:
    body = job_json()
    del body["errors"]
    job = client(Recorder(ok(body))).get("17")
    assert job.releases == [] and job.errors == []
    # A malformed value is neutral too, never a crash in a worker.
    assert client(Recorder(ok(job_json(releases="?")))).get("17").releases == []


def test_release_of_a_lost_lease_raises_lease_lost() -> None:
    rec = Recorder(problem(409, "lease_lost"))
    with pytest.raises(jobq.LeaseLost):
        client(rec).release("L1")


def test_worker_beat_sends_what_is_given() -> None:
    entry = {"worker_id": "w 1", "host": "h", "pid": 7, "state": "running"}
    rec = Recorder(ok(entry))
    started = datetime(2030, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    got = client(rec).worker_beat("w 1", host="h", pid=7, concurrency=4, queues="email",
                                  in_flight=0, started_at=started, state="running")
    assert got == entry
    assert rec.last.url.raw_path == b"/v1/workers/w%201/beat"
    assert rec.body() == {"host": "h", "pid": 7, "concurrency": 4, "queues": ["email"],
                          "in_flight": 0, "started_at": "2030-01-01T00:00:00Z", "state": "running"}
    client(rec).worker_beat("w1", state="stopped")
    assert rec.body() == {"state": "stopped"}


async def test_async_release_mirrors_the_blocking_one() -> None:
    rec = Recorder(ok(job_json(status="pending")), ok({"results": [{"lease_id": "L1", "ok": True}]}))
    async with AsyncClient(URL, transport=httpx.MockTransport(rec)) as c:
        assert (await c.release("L1", delay_ms=10)).status == "pending"
        assert rec.body() == {"delay_ms": 10}
        assert [r.ok for r in await c.release_many(["L1"])] == [True]
        assert (rec.last.url.path, rec.body()) == ("/v1/leases/release", {"releases": [{"lease_id": "L1"}]})


def test_lost_lease_on_ack() -> None:
    rec = Recorder(problem(409, "lease_lost"))
    with pytest.raises(jobq.LeaseLost):
        client(rec).ack("L1")


# AsyncClient mirrors Client


async def test_async_client_enqueue_and_errors() -> None:
    rec = Recorder(ok(job_json(), 201), problem(404, "not_found"))
    async with AsyncClient(URL, token="t", transport=httpx.MockTransport(rec)) as c:
        job = await c.enqueue("email.welcome", {"user_id": 42}, delay=timedelta(milliseconds=5))
        assert job.id == "17"
        assert rec.body(0) == {"type": "email.welcome", "payload": {"user_id": 42}, "delay_ms": 5}
        assert rec.requests[0].headers["authorization"] == "Bearer t"
        with pytest.raises(jobq.NotFound):
            await c.get("nope")


async def test_async_client_iterates_pages_and_waits_out_overload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("jobq.client._async_client.asyncio.sleep", fake_sleep)
    rec = Recorder(
        problem(503, "unavailable", headers={"Retry-After": "1"}),
        ok({"jobs": [job_json(id="2")], "next_cursor": "c"}),
        ok({"jobs": [job_json(id="1")], "next_cursor": None}),
    )
    async with AsyncClient(URL, transport=httpx.MockTransport(rec), retry_overload=5) as c:
        assert [j.id async for j in c.iter_jobs()] == ["2", "1"]
    assert len(slept) == 1 and len(rec.requests) == 3


async def test_async_client_worker_calls() -> None:
    rec = Recorder(ok({"leases": []}), ok({"results": []}))
    async with AsyncClient(URL, transport=httpx.MockTransport(rec)) as c:
        assert await c.claim(["q"], worker_id="w", wait_ms=0) == []
        assert rec.body() == {"worker_id": "w", "queues": ["q"], "limit": 1}
        assert await c.ack_many({}) == []
        assert rec.body() == {"acks": []}


def test_async_client_mirrors_client() -> None:
    def api(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(fn)
            for name, fn in vars(cls).items()
            if callable(fn) and not name.startswith("_") and name not in ("close", "aclose")
        }

    sync, asynchronous = api(Client), api(AsyncClient)
    assert sync.keys() == asynchronous.keys()
    for name, signature in sync.items():
        assert str(signature) == str(asynchronous[name]).replace("AsyncIterator", "Iterator"), name


def test_a_payload_that_is_not_a_mapping_is_refused_in_words() -> None:
    with Client("http://127.0.0.1:1") as c, pytest.raises(TypeError) as refused:
        c.enqueue("t", [1])  # type: ignore[arg-type]
    assert str(refused.value) == "payload must be a JSON object (a dict), not list"


@pytest.mark.parametrize(
    ("method", "content"),
    [("GET", None), ("DELETE", None), ("POST", None), ("POST", b'{"a":1}'), ("PUT", b""),
     ("PATCH", b"{}")],
)
@pytest.mark.parametrize(
    "headers",
    [{"User-Agent": "jobq-python/1", "Accept": "application/json"},
     {"Authorization": "Bearer t", "X-Extra": "v", "Content-Type": "text/plain"},
     {"Host": "other.test:81", "Accept": "application/json"}],
)
def test_requests_are_built_as_httpx_builds_them(
    method: str, content: bytes | None, headers: dict[str, str]
) -> None:
    # The clients build requests themselves (Wire), for less CPU; what goes out must be what
    # httpx.Request(content=...) would send: the same headers, in the same order, and body.
    from jobq.client._base import Wire

    wire = Wire("http://jobq.test:8080/base/", headers, httpx.Timeout(5))
    built = wire.build(method, "/v1/jobs/a%2Fb", content, None, None)
    sent = dict(headers)
    if content is not None:
        sent["Content-Type"] = "application/json"
    expected = httpx.Request(method, "http://jobq.test:8080/base/v1/jobs/a%2Fb", headers=sent,
                             content=content)
    assert built.method == expected.method
    assert built.url == expected.url
    assert built.headers.raw == expected.headers.raw
    assert built.read() == expected.read()
    assert built.extensions["timeout"] == httpx.Timeout(5).as_dict()
