"""The SDK (``Client``, ``AsyncClient``) against the real service and PostgreSQL: what each
call returns, the typed errors the service's answers turn into, and waiting out 429.

One ``jobq serve`` per module on its own fresh database; each test works in a queue of
its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from handlers_live import running

from jobq.client import (
    AsyncClient,
    Client,
    IdempotencyConflict,
    InvalidState,
    Job,
    JobFailed,
    LeaseLost,
    NewJob,
    NotFound,
    QueueFull,
    QueueNotEmpty,
    ValidationError,
    WaitTimeout,
)
from jobq.worker import Worker
from tests import pg
from tests.conftest import LiveServer
from tests.waiting import eventually


@pytest.fixture(scope="module")
def server(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    name = pg.clone(admin_url, template_db)
    live = LiveServer(pg.with_database(admin_url, name))
    try:
        live.start()
        yield live
    finally:
        live.stop()
        pg.drop(admin_url, name)


@pytest.fixture
def jobq(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, timeout=30) as c:
        yield c


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


# Producing and waiting


def test_enqueue_get_and_wait_for_the_handler_result(server: LiveServer, jobq: Client, queue: str) -> None:
    job = jobq.enqueue("add", {"a": 2, "b": 3}, queue=queue, priority=5, max_attempts=4)
    assert (job.queue, job.type, job.payload, job.priority) == (queue, "add", {"a": 2, "b": 3}, 5)
    assert (job.status, job.attempt, job.max_attempts, job.result) == ("pending", 0, 4, None)
    assert job.created_at is not None and job.created_at.tzinfo is not None
    assert jobq.get(job.id) == job

    def add(j: Job) -> dict[str, int]:
        return {"sum": j.payload["a"] + j.payload["b"]}

    with running(Worker(server.url, queues=[queue], handlers={"add": add}, wait_ms=1000)):
        done = jobq.wait(job.id, timeout=20)
    assert (done.id, done.status, done.result, done.attempt) == (job.id, "completed", {"sum": 5}, 1)
    assert done.completed_at is not None and done.completed_at >= job.created_at
    assert jobq.get(job.id).result == {"sum": 5}


def test_wait_times_out_on_an_idle_job_and_raises_job_failed_on_a_cancelled_one(jobq: Client, queue: str) -> None:
    job = jobq.enqueue("nobody.works.this", queue=queue)
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as timed_out:
        jobq.wait(job.id, timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 5.0
    assert timed_out.value.job_id == job.id and isinstance(timed_out.value, TimeoutError)
    jobq.cancel(job.id)
    with pytest.raises(JobFailed) as failed:
        jobq.wait(job.id, timeout=5)
    assert failed.value.job.status == "cancelled" and failed.value.job.id == job.id


def test_enqueue_many_returns_jobs_in_order_and_is_all_or_nothing(jobq: Client, queue: str) -> None:
    run_at = datetime.now(UTC) + timedelta(hours=1)
    jobs = jobq.enqueue_many(
        [
            NewJob(type="a", payload={"i": 0}, queue=queue),
            NewJob(type="b", payload={"i": 1}, queue=queue, priority=-3, delay=60),
            NewJob(type="c", payload={"i": 2}, queue=queue, run_at=run_at, idempotency_key="k-c"),
        ]
    )
    assert [(j.type, j.payload["i"]) for j in jobs] == [("a", 0), ("b", 1), ("c", 2)]
    assert len({j.id for j in jobs}) == 3
    assert jobs[1].priority == -3 and jobs[2].idempotency_key == "k-c"
    assert jobs[1].visible_at is not None and jobs[1].created_at is not None
    assert jobs[1].visible_at - jobs[1].created_at >= timedelta(seconds=59)
    assert jobs[2].visible_at is not None and abs(jobs[2].visible_at - run_at) < timedelta(milliseconds=1)
    assert [jobq.get(j.id) for j in jobs] == jobs
    # One bad job refuses the whole batch, and nothing of it is enqueued.
    with pytest.raises(ValidationError) as invalid:
        jobq.enqueue_many([NewJob(type="ok", queue=queue), NewJob(type="bad", queue=queue, priority="high")])  # type: ignore[arg-type]
    assert any("priority" in e["loc"] for e in invalid.value.errors), invalid.value.errors
    assert sorted(j.id for j in jobq.iter_jobs(queue=queue)) == sorted(j.id for j in jobs)


# Typed errors


def test_unknown_job_and_lease_raise_not_found(jobq: Client) -> None:
    for call in (
        lambda: jobq.get("999999999"),
        lambda: jobq.cancel("999999999"),
        lambda: jobq.retry("no-such-job"),
        lambda: jobq.ack("999999999.1"),
        lambda: jobq.heartbeat("not-a-lease"),
        lambda: jobq.fail("1.999", "x"),
    ):
        with pytest.raises(NotFound) as missing:
            call()
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        assert missing.value.detail


def test_idempotency_key_replays_the_job_and_conflicts_on_other_content(jobq: Client, queue: str) -> None:
    first = jobq.enqueue("charge", {"cents": 500}, queue=queue, idempotency_key="order-7")
    again = jobq.enqueue("charge", {"cents": 500}, queue=queue, idempotency_key="order-7")
    assert again.id == first.id and again.idempotency_key == "order-7"
    with pytest.raises(IdempotencyConflict) as conflict:
        jobq.enqueue("charge", {"cents": 999}, queue=queue, idempotency_key="order-7")
    assert (conflict.value.status, conflict.value.code) == (409, "idempotency_conflict")
    with pytest.raises(IdempotencyConflict):
        jobq.enqueue("refund", {"cents": 500}, queue=queue, idempotency_key="order-7")
    # The same key in another queue is another job.
    other = jobq.enqueue("charge", {"cents": 500}, queue=queue + "-b", idempotency_key="order-7")
    assert other.id != first.id
    assert [j.id for j in jobq.iter_jobs(queue=queue)] == [first.id]


def test_invalid_requests_raise_validation_error_with_field_errors(jobq: Client, queue: str) -> None:
    with pytest.raises(ValidationError) as bad_body:
        jobq.enqueue("t", queue=queue, priority="high")  # type: ignore[arg-type]
    assert (bad_body.value.status, bad_body.value.code) == (422, "validation_error")
    assert [e["loc"] for e in bad_body.value.errors] == [["body", "priority"]]
    assert all(e["msg"] for e in bad_body.value.errors)
    with pytest.raises(ValidationError) as bad_query:
        jobq.list_jobs(queue=queue, limit=0)
    assert [e["loc"] for e in bad_query.value.errors] == [["query", "limit"]]
    with pytest.raises(ValidationError) as bad_claim:
        jobq.claim([queue], worker_id="w", limit=0)
    assert any("limit" in e["loc"] for e in bad_claim.value.errors), bad_claim.value.errors
    assert jobq.list_jobs(queue=queue).jobs == []


def test_acking_twice_raises_lease_lost_and_batch_ack_reports_each_lease(jobq: Client, queue: str) -> None:
    jobq.enqueue_many([NewJob(type="t", payload={"i": i}, queue=queue) for i in range(2)])
    one, two = jobq.claim([queue], worker_id="w-ack", limit=2)
    assert jobq.ack(one.lease_id, {"ok": 1}).status == "completed"
    for call in (
        lambda: jobq.ack(one.lease_id, {"ok": 2}),
        lambda: jobq.heartbeat(one.lease_id),
        lambda: jobq.fail(one.lease_id, "too late"),
    ):
        with pytest.raises(LeaseLost) as lost:
            call()
        assert (lost.value.status, lost.value.code) == (409, "lease_lost")
    assert jobq.get(one.job.id).result == {"ok": 1}

    results = jobq.ack_many([(two.lease_id, "two"), (one.lease_id, "again"), ("98765.4", "x")])
    assert [(r.lease_id, r.ok, r.code) for r in results] == [
        (two.lease_id, True, None),
        (one.lease_id, False, "lease_lost"),
        ("98765.4", False, "not_found"),
    ]
    assert jobq.get(two.job.id).result == "two"


def test_lease_taken_over_after_expiry_fences_out_the_first_holder(jobq: Client, queue: str) -> None:
    job = jobq.enqueue("t", queue=queue)
    (stale,) = jobq.claim([queue], worker_id="slow", lease_ms=1000)
    # Long-polls until the expiry is processed and the job is claimable again.
    (fresh,) = jobq.claim([queue], worker_id="fast", wait_ms=15_000)
    assert fresh.job.id == job.id and fresh.lease_id != stale.lease_id
    assert fresh.job.attempt == 2
    with pytest.raises(LeaseLost):
        jobq.ack(stale.lease_id, "stale")
    with pytest.raises(LeaseLost):
        jobq.heartbeat(stale.lease_id)
    done = jobq.ack(fresh.lease_id, "fresh")
    assert (done.status, done.result, done.worker_id) == ("completed", "fresh", "fast")
    assert [(e.attempt, e.kind) for e in done.errors] == [(1, "lease_expired")]


# Operators


def test_cancel_and_retry_move_jobs_between_states(jobq: Client, queue: str) -> None:
    job = jobq.enqueue("t", queue=queue, max_attempts=2)
    assert jobq.cancel(job.id).status == "cancelled"
    with pytest.raises(InvalidState) as invalid:
        jobq.cancel(job.id)
    assert (invalid.value.status, invalid.value.code) == (409, "invalid_state")
    retried = jobq.retry(job.id)
    assert (retried.status, retried.attempt) == ("pending", 0)
    with pytest.raises(InvalidState):
        jobq.retry(job.id)  # pending: nothing to retry

    (lease,) = jobq.claim([queue], worker_id="w-cancel")
    assert lease.job.id == job.id and lease.job.attempt == 1
    assert jobq.cancel(job.id).status == "cancelled"  # while running: its lease dies
    with pytest.raises(LeaseLost):
        jobq.heartbeat(lease.lease_id)
    with pytest.raises(LeaseLost):
        jobq.ack(lease.lease_id)
    assert jobq.get(job.id).status == "cancelled"

    jobq.retry(job.id)
    (again,) = jobq.claim([queue], worker_id="w-cancel")
    failed = jobq.fail(again.lease_id, "permanent", retry=False)
    assert (failed.status, failed.last_error) == ("dead", "permanent")
    assert jobq.retry(job.id).status == "pending"


def test_iter_jobs_follows_the_cursor_across_pages(jobq: Client, queue: str) -> None:
    jobs = jobq.enqueue_many([NewJob(type="t", payload={"i": i}, queue=queue) for i in range(5)])
    first = jobq.list_jobs(queue=queue, limit=3)
    assert len(first.jobs) == 3 and first.next_cursor is not None
    second = jobq.list_jobs(queue=queue, limit=3, cursor=first.next_cursor)
    assert len(second.jobs) == 2 and second.next_cursor is None
    newest_first = [j.id for j in reversed(jobs)]
    assert [j.id for j in first.jobs + second.jobs] == newest_first
    assert [j.id for j in jobq.iter_jobs(queue=queue, page_size=3)] == newest_first
    assert [j.id for j in jobq.iter_jobs(queue=queue, type="other", page_size=3)] == []


def test_iter_queues_pages_through_every_queue_and_searches_by_prefix(jobq: Client, queue: str) -> None:
    names = [f"{queue}-{i:02d}" for i in range(7)]
    for name in names:
        jobq.update_queue(name, max_depth=10)
    first = jobq.list_queues(prefix=queue, limit=3)
    assert [q.name for q in first.queues] == names[:3] and first.next_cursor is not None
    assert [q.name for q in jobq.iter_queues(prefix=queue, page_size=3)] == names
    assert [q.name for q in jobq.queues(prefix=queue)] == names
    everyone = [q.name for q in jobq.iter_queues(page_size=2)]
    assert everyone == sorted(set(everyone)) and set(names) <= set(everyone)


# Overload


def test_producer_waits_out_queue_full_while_a_worker_drains_the_queue(
    server: LiveServer, jobq: Client, queue: str
) -> None:
    # Paused, the full queue cannot drain: the first enqueue below must meet a 429.
    jobq.update_queue(queue, max_depth=5, paused=True)
    jobq.enqueue_many([NewJob(type="t", queue=queue) for _ in range(5)])
    with pytest.raises(QueueFull) as full:
        jobq.enqueue("t", queue=queue)
    assert (full.value.status, full.value.code) == (429, "queue_full")
    assert full.value.retry_after is not None and full.value.retry_after >= 1
    with pytest.raises(QueueFull):
        jobq.enqueue_many([NewJob(type="t", queue=queue)])

    def slow(j: Job) -> None:
        time.sleep(0.1)  # a slow handler: the queue drains at a pace

    refused = threading.Event()

    class NoticesRefusals(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            if response.status_code == 429:
                refused.set()
            return response

    def resume_once_refused() -> None:
        # The queue drains only after the patient producer has met it full.
        if refused.wait(30):
            jobq.update_queue(queue, paused=False)

    resume = threading.Thread(target=resume_once_refused, daemon=True)
    worker = Worker(server.url, queues=[queue], handlers={"t": slow}, wait_ms=500)
    with running(worker), Client(server.url, retry_overload=10, transport=NoticesRefusals()) as patient:
        resume.start()
        try:
            started = time.monotonic()
            job = patient.enqueue("t", {"patient": True}, queue=queue)
            waited = time.monotonic() - started
        finally:
            refused.set()  # lets the resumer end, whatever happened
            resume.join(30)
        # Pending, or running when the worker's long-poll waited for it: the enqueue handed it over.
        assert job.payload == {"patient": True} and job.status in ("pending", "running")
        # It slept the Retry-After (at least 1 s) of the 429 it met, then got in.
        assert 0.9 <= waited < 10.0, waited
        eventually(lambda: jobq.queue(queue).counts.completed == 6, poll_s=0.05,
                   what=lambda: f"6 completed; counts {jobq.queue(queue).counts}")
    assert jobq.get(job.id).status == "completed"


# Deleting a queue


def test_delete_queue_refuses_a_queue_with_jobs_and_purges_on_request(jobq: Client, queue: str) -> None:
    jobq.enqueue("t", queue=queue)
    jobq.enqueue("t", queue=queue)
    with pytest.raises(QueueNotEmpty) as refused:
        jobq.delete_queue(queue)
    assert refused.value.counts == {"pending": 2}
    assert (refused.value.schedules, refused.value.topics) == ([], [])
    assert jobq.queue(queue).counts.pending == 2
    assert jobq.delete_queue(queue, purge=True) is None
    with pytest.raises(NotFound):
        jobq.queue(queue)
    with pytest.raises(NotFound):
        jobq.delete_queue(queue)


async def test_async_delete_queue(server: LiveServer, queue: str) -> None:
    async with AsyncClient(server.url) as jobq:
        await jobq.update_queue(queue, paused=True)
        await jobq.delete_queue(queue)
        with pytest.raises(NotFound):
            await jobq.queue(queue)
        await jobq.enqueue("t", queue=queue)
        with pytest.raises(QueueNotEmpty):
            await jobq.delete_queue(queue)
        await jobq.delete_queue(queue, purge=True)
        assert queue not in [q.name for q in await jobq.queues()]


# AsyncClient


async def test_async_client_enqueues_claims_fails_and_raises_typed_errors(server: LiveServer, queue: str) -> None:
    async with AsyncClient(server.url) as jobq:
        job = await jobq.enqueue("async.t", {"x": 1}, queue=queue)
        assert (await jobq.get(job.id)) == job
        (lease,) = await jobq.claim([queue], worker_id="aw", wait_ms=1000)
        assert lease.job.id == job.id
        until = await jobq.heartbeat(lease.lease_id, extend_ms=60_000)
        assert until is not None and until - datetime.now(UTC) > timedelta(seconds=50)
        failed = await jobq.fail(lease.lease_id, "try again", retry_in_ms=0)
        assert (failed.status, failed.attempt, failed.last_error) == ("failed", 1, "try again")
        (again,) = await jobq.claim([queue], worker_id="aw", wait_ms=5000)
        assert again.job.attempt == 2
        done = await jobq.ack(again.lease_id, [1, 2, 3])
        assert (done.status, done.result) == ("completed", [1, 2, 3])
        assert (await jobq.wait(job.id, timeout=5)).result == [1, 2, 3]
        with pytest.raises(LeaseLost):
            await jobq.ack(again.lease_id)
        with pytest.raises(NotFound):
            await jobq.get("999999999")
        with pytest.raises(ValidationError) as invalid:
            await jobq.enqueue("t", queue=queue, priority="high")  # type: ignore[arg-type]
        assert invalid.value.errors[0]["loc"] == ["body", "priority"]
        assert [j.id async for j in jobq.iter_jobs(queue=queue, page_size=1)] == [job.id]
