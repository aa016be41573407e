"""Producers (contract § Producers): POST /v1/jobs and POST /v1/jobs/batch."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import httpx
import psycopg
import pytest

from tests.helpers import (
    JOB_FIELDS,
    claim,
    counts,
    enqueue,
    now,
    patch_queue,
    problem,
    retry_after,
    total,
    ts,
    validation,
)
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(60)


async def fail_lease(c: httpx.AsyncClient, lease_id: str, **body: Any) -> dict[str, Any]:
    r = await c.post(f"/v1/leases/{lease_id}/fail", json={"error": "boom", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def ack_lease(c: httpx.AsyncClient, lease_id: str) -> dict[str, Any]:
    r = await c.post(f"/v1/leases/{lease_id}/ack", json={"result": {"ok": True}})
    assert r.status_code == 200, r.text
    return dict(r.json())


# --- POST /v1/jobs: 201, Location, defaults --------------------------------------------------


async def test_enqueue_answers_201_with_location_and_every_default(client: httpx.AsyncClient) -> None:
    before = now()
    r = await client.post("/v1/jobs", json={"type": "email.welcome"})
    after = now()
    assert r.status_code == 201, r.text
    assert r.headers["content-type"].startswith("application/json")
    job = r.json()
    assert set(job) == JOB_FIELDS
    assert isinstance(job["id"], str) and job["id"]
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["queue"] == "default"
    assert job["type"] == "email.welcome"
    assert job["payload"] == {}
    assert job["priority"] == 0
    assert job["status"] == "pending"
    assert job["attempt"] == 0
    assert job["max_attempts"] == 25
    assert job["idempotency_key"] is None
    assert job["errors"] == []
    for name in ("locked_until", "worker_id", "completed_at", "last_error", "result"):
        assert job[name] is None, name
    created, visible = ts(job["created_at"]), ts(job["visible_at"])
    slack = timedelta(seconds=2)  # the database's clock against ours
    assert before - slack <= created <= after + slack
    assert abs(visible - created) < timedelta(seconds=1)  # no delay: visible at once

    # The Location names the job.
    got = await client.get(r.headers["location"])
    assert got.status_code == 200
    assert got.json() == job


async def test_enqueue_keeps_every_field_given(client: httpx.AsyncClient) -> None:
    payload = {"user": {"id": 42, "tags": ["a", "b"]}, "n": 1.5, "ok": True, "none": None,
               "text": "héllo ✓ 日本"}
    job = await enqueue(client, "report.build", payload=payload, queue="reports-1", priority=7,
                        max_attempts=3, idempotency_key="order-17")
    assert (job["queue"], job["type"], job["payload"], job["priority"], job["max_attempts"],
            job["idempotency_key"]) == ("reports-1", "report.build", payload, 7, 3, "order-17")
    got = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert got["payload"] == payload
    assert (await counts(client, "reports-1"))["pending"] == 1
    assert await total(client, "default") == 0


async def test_enqueue_ids_are_distinct_strings(client: httpx.AsyncClient) -> None:
    ids = [(await enqueue(client))["id"] for _ in range(5)]
    assert len(set(ids)) == 5 and all(isinstance(i, str) for i in ids)


async def test_max_attempts_defaults_from_the_queue_including_a_patched_queue(
    client: httpx.AsyncClient,
) -> None:
    assert (await enqueue(client, queue="q-plain"))["max_attempts"] == 25
    await patch_queue(client, "q-few", max_attempts=3)
    assert (await enqueue(client, queue="q-few"))["max_attempts"] == 3
    # An explicit max_attempts wins over the queue's.
    assert (await enqueue(client, queue="q-few", max_attempts=9))["max_attempts"] == 9
    # Changing the queue later changes the default for new jobs only.
    first = await enqueue(client, queue="q-few")
    await patch_queue(client, "q-few", max_attempts=4)
    assert (await enqueue(client, queue="q-few"))["max_attempts"] == 4
    assert (await client.get(f"/v1/jobs/{first['id']}")).json()["max_attempts"] == 3
    # And the default really is the attempt budget: with max_attempts 1 one failure is dead.
    await patch_queue(client, "q-once", max_attempts=1)
    await enqueue(client, queue="q-once")
    [lease] = await claim(client, "q-once")
    assert (await fail_lease(client, lease["lease_id"]))["status"] == "dead"


async def test_payload_must_be_an_object(client: httpx.AsyncClient) -> None:
    for bad in ([1, 2], "text", 3, True):
        validation(await client.post("/v1/jobs", json={"type": "t", "payload": bad}),
                   "body", "payload")
    # null is not an object either (the default is {} only when the field is left out).
    r = await client.post("/v1/jobs", json={"type": "t", "payload": None})
    validation(r, "body", "payload")
    assert await total(client) == 0


async def test_type_is_required(client: httpx.AsyncClient) -> None:
    validation(await client.post("/v1/jobs", json={"payload": {"a": 1}}), "body", "type")
    validation(await client.post("/v1/jobs", json={"type": ""}), "body", "type")
    assert await total(client) == 0


async def test_priority_must_be_an_integer(client: httpx.AsyncClient) -> None:
    for bad in (1.5, "high", [1], {"p": 1}):
        validation(await client.post("/v1/jobs", json={"type": "t", "priority": bad}),
                   "body", "priority")
    assert (await enqueue(client, priority=-5))["priority"] == -5
    assert await total(client) == 1


# --- delay_ms and run_at ---------------------------------------------------------------------


async def test_delay_ms_hides_the_job_until_it_has_passed(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "later", delay_ms=1500)
    assert job["status"] == "pending"
    delay = ts(job["visible_at"]) - ts(job["created_at"])
    assert timedelta(milliseconds=1400) <= delay <= timedelta(milliseconds=1700), delay
    assert await claim(client) == []
    started = time.monotonic()
    leases = await aeventually(lambda: claim(client), poll_s=0.1, what="the delayed job claimable")
    waited = time.monotonic() - started
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert waited >= 1.0, waited  # not claimable early
    assert ts(leases[0]["job"]["visible_at"]) <= now() + timedelta(seconds=1)


async def test_delay_ms_zero_is_visible_now(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, delay_ms=0)
    assert [le["job"]["id"] for le in await claim(client)] == [job["id"]]


async def test_run_at_in_the_future_hides_the_job_until_then(client: httpx.AsyncClient) -> None:
    at = now() + timedelta(milliseconds=1500)
    job = await enqueue(client, "at", run_at=at.isoformat())
    assert abs(ts(job["visible_at"]) - at) < timedelta(milliseconds=5)
    assert await claim(client) == []
    leases = await aeventually(lambda: claim(client), poll_s=0.1, what="the job run_at claimable")
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert now() >= at - timedelta(milliseconds=200)  # not claimed early (clock slack)


async def test_run_at_with_an_offset_comes_back_in_utc(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, run_at="2099-06-01T14:00:00+02:00")
    assert ts(job["visible_at"]).isoformat() == "2099-06-01T12:00:00+00:00"
    assert await claim(client) == []


async def test_run_at_in_the_past_is_visible_now(client: httpx.AsyncClient) -> None:
    past = now() - timedelta(hours=3)
    job = await enqueue(client, run_at=past.isoformat().replace("+00:00", "Z"))
    assert ts(job["visible_at"]) <= now() + timedelta(seconds=1)
    assert [le["job"]["id"] for le in await claim(client)] == [job["id"]]


async def test_delay_ms_and_run_at_together_are_refused(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", json={"type": "t", "delay_ms": 1000,
                                            "run_at": now().isoformat()})
    validation(r)
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "delay_ms": 0, "run_at": now().isoformat()}]})
    validation(r, "body", "jobs", 0)
    assert await total(client) == 0


async def test_bad_delays_are_refused(client: httpx.AsyncClient) -> None:
    for body in ({"delay_ms": -1}, {"delay_ms": 1.5}, {"delay_ms": "soon"},
                 {"run_at": "tomorrow"}, {"run_at": "2030-01-01T00:00:00"},  # no offset
                 {"run_at": "2030-01-01"}, {"run_at": "2030-01-01T25:00:00Z"}, {"run_at": ""},
                 {"run_at": True}):
        r = await client.post("/v1/jobs", json={"type": "t", **body})
        validation(r, "body", next(iter(body)))
    assert await total(client) == 0


# --- priority --------------------------------------------------------------------------------


async def test_higher_priority_is_claimed_first(client: httpx.AsyncClient) -> None:
    order = [0, 5, -3, 10, 5, 1]
    jobs = [await enqueue(client, f"p{i}", priority=p) for i, p in enumerate(order)]
    claimed = []
    for _ in order:
        [lease] = await claim(client)
        claimed.append(lease["job"]["id"])
    assert await claim(client) == []
    # priority descending; the two 5s in creation order
    expect = [jobs[i]["id"] for i in (3, 1, 4, 5, 0, 2)]
    assert claimed == expect


async def test_priority_beats_age_and_batches_obey_it_too(client: httpx.AsyncClient) -> None:
    old = await enqueue(client, "old", priority=0)
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "low", "priority": -1}, {"type": "high", "priority": 3}]})
    assert r.status_code == 201
    low, high = r.json()["jobs"]
    leases = await claim(client, limit=3)
    assert [le["job"]["id"] for le in leases] == [high["id"], old["id"], low["id"]]


# --- idempotency -----------------------------------------------------------------------------


async def test_idempotent_replay_answers_200_with_the_same_job(client: httpx.AsyncClient) -> None:
    body = {"type": "charge", "payload": {"order": 17, "amount": "9.99"}, "idempotency_key": "o-17"}
    first = await client.post("/v1/jobs", json=body)
    assert first.status_code == 201
    for _ in range(3):
        again = await client.post("/v1/jobs", json=body)
        assert again.status_code == 200, again.text
        assert again.json() == first.json()
    # Key order inside the payload does not make it a different payload.
    reordered = {**body, "payload": {"amount": "9.99", "order": 17}}
    again = await client.post("/v1/jobs", json=reordered)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    c = await counts(client)
    assert c["pending"] == 1 and sum(c.values()) == 1
    assert len((await client.get("/v1/jobs")).json()["jobs"]) == 1


async def test_idempotent_replay_ignores_other_fields(client: httpx.AsyncClient) -> None:
    # Only type and payload decide between replay and conflict.
    first = await enqueue(client, "t", payload={"a": 1}, idempotency_key="k", priority=1)
    r = await client.post("/v1/jobs", json={"type": "t", "payload": {"a": 1},
                                            "idempotency_key": "k", "priority": 9,
                                            "delay_ms": 60000, "max_attempts": 2})
    assert r.status_code == 200, r.text
    assert r.json() == first
    assert await total(client) == 1


async def test_idempotent_replay_of_a_running_or_completed_job(client: httpx.AsyncClient) -> None:
    body = {"type": "t", "payload": {"x": 1}, "idempotency_key": "done-once"}
    job = await enqueue(client, **body)
    [lease] = await claim(client)
    r = await client.post("/v1/jobs", json=body)
    assert r.status_code == 200 and r.json()["id"] == job["id"]
    assert r.json()["status"] == "running"
    await ack_lease(client, lease["lease_id"])
    r = await client.post("/v1/jobs", json=body)
    assert r.status_code == 200 and r.json()["id"] == job["id"]
    assert r.json()["status"] == "completed"
    assert await claim(client) == []  # nothing new to run
    assert await total(client) == 1


async def test_idempotency_conflict_on_another_type_or_payload(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "charge", payload={"order": 17}, idempotency_key="o-17")
    for body in ({"type": "refund", "payload": {"order": 17}},
                 {"type": "charge", "payload": {"order": 18}},
                 {"type": "charge", "payload": {"order": 17, "extra": 1}},
                 {"type": "charge", "payload": {"order": "17"}},
                 {"type": "charge"}):  # payload {} by default
        r = await client.post("/v1/jobs", json={**body, "idempotency_key": "o-17"})
        problem(r, 409, "idempotency_conflict")
    assert await total(client) == 1
    assert (await client.get(f"/v1/jobs/{job['id']}")).json() == job


async def test_same_key_in_another_queue_is_another_job(client: httpx.AsyncClient) -> None:
    a = await enqueue(client, "t", queue="tenant-a", idempotency_key="k1")
    b = await client.post("/v1/jobs", json={"type": "other", "queue": "tenant-b",
                                            "idempotency_key": "k1"})
    assert b.status_code == 201, b.text
    assert b.json()["id"] != a["id"]
    assert await total(client, "tenant-a") == 1
    assert await total(client, "tenant-b") == 1


async def test_no_key_means_no_dedup(client: httpx.AsyncClient) -> None:
    body = {"type": "t", "payload": {"a": 1}}
    for _ in range(3):
        assert (await client.post("/v1/jobs", json=body)).status_code == 201
    assert (await counts(client))["pending"] == 3


async def test_concurrent_replays_make_one_job(client: httpx.AsyncClient) -> None:
    body = {"type": "t", "payload": {"a": 1}, "idempotency_key": "race"}
    rs = await asyncio.gather(*(client.post("/v1/jobs", json=body) for _ in range(20)))
    assert sorted(r.status_code for r in rs) == [200] * 19 + [201]
    assert len({r.json()["id"] for r in rs}) == 1
    assert await total(client) == 1


# --- max_depth -------------------------------------------------------------------------------


async def test_queue_full_answers_429_with_retry_after_and_enqueues_nothing(
    client: httpx.AsyncClient,
) -> None:
    await patch_queue(client, "default", max_depth=2)
    await enqueue(client)
    await enqueue(client)
    r = await client.post("/v1/jobs", json={"type": "t", "payload": {"a": 1}})
    problem(r, 429, "queue_full")
    retry_after(r)
    assert (await counts(client))["pending"] == 2
    # Other queues are not affected.
    await enqueue(client, queue="elsewhere")


async def test_max_depth_zero_refuses_everything(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "closed", max_depth=0)
    problem(await client.post("/v1/jobs", json={"type": "t", "queue": "closed"}), 429, "queue_full")
    assert await total(client, "closed") == 0


async def test_depth_already_above_a_lowered_max_depth_is_full(client: httpx.AsyncClient) -> None:
    for _ in range(3):
        await enqueue(client)
    await patch_queue(client, "default", max_depth=1)
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")
    # Lifting the limit opens the queue again.
    await patch_queue(client, "default", max_depth=None)
    await enqueue(client)
    assert (await counts(client))["pending"] == 4


async def test_delayed_jobs_count_towards_depth(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "default", max_depth=1)
    await enqueue(client, delay_ms=3_600_000)
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")


async def test_failed_jobs_count_towards_depth(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "default", max_depth=1)
    await enqueue(client)
    [lease] = await claim(client)
    assert (await fail_lease(client, lease["lease_id"], retry_in_ms=3_600_000))["status"] == "failed"
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")
    assert (await counts(client))["failed"] == 1


async def test_running_and_completed_jobs_do_not_count_towards_depth(
    client: httpx.AsyncClient,
) -> None:
    await patch_queue(client, "default", max_depth=1)
    await enqueue(client)
    [lease] = await claim(client)  # running
    second = await enqueue(client)  # the waiting count is 0 again
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")
    await ack_lease(client, lease["lease_id"])  # completed
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")
    [lease2] = await claim(client)
    assert lease2["job"]["id"] == second["id"]
    await ack_lease(client, lease2["lease_id"])
    await enqueue(client)  # two completed, zero waiting
    c = await counts(client)
    assert (c["completed"], c["pending"]) == (2, 1)


async def test_dead_and_cancelled_jobs_do_not_count_towards_depth(
    client: httpx.AsyncClient,
) -> None:
    await patch_queue(client, "default", max_depth=1)
    job = await enqueue(client)
    assert (await client.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 200
    await enqueue(client)
    [lease] = await claim(client)
    assert (await fail_lease(client, lease["lease_id"], retry=False))["status"] == "dead"
    await enqueue(client)
    c = await counts(client)
    assert (c["cancelled"], c["dead"], c["pending"]) == (1, 1, 1)


async def test_idempotent_replay_on_a_full_queue_is_still_a_replay(client: httpx.AsyncClient) -> None:
    # Nothing would be enqueued, so the replay answers the existing job rather than 429.
    job = await enqueue(client, idempotency_key="k")
    await patch_queue(client, "default", max_depth=1)
    r = await client.post("/v1/jobs", json={"type": "t", "idempotency_key": "k"})
    assert r.status_code == 200, r.text
    assert r.json()["id"] == job["id"]
    # A new key on the full queue is refused.
    problem(await client.post("/v1/jobs", json={"type": "t", "idempotency_key": "k2"}), 429,
            "queue_full")


async def test_concurrent_enqueues_respect_max_depth_roughly(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "default", max_depth=10)
    rs = await asyncio.gather(*(client.post("/v1/jobs", json={"type": "t"}) for _ in range(40)))
    ok = [r for r in rs if r.status_code == 201]
    full = [r for r in rs if r.status_code == 429]
    assert len(ok) + len(full) == 40
    assert all(problem(r, 429, "queue_full") for r in full)
    pending = (await counts(client))["pending"]
    assert pending == len(ok)
    # The documented slack: at most the enqueues in flight. With 40 at once, far fewer than 40
    # may get through, and after they settle the queue is full.
    assert 10 <= pending < 40
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")


# --- batch -----------------------------------------------------------------------------------


async def test_batch_answers_201_with_the_jobs_in_request_order(client: httpx.AsyncClient) -> None:
    bodies: list[dict[str, Any]] = [
        {"type": f"t{i}", "queue": ("qa", "qb", "default")[i % 3], "payload": {"i": i},
         "priority": i % 4}
        for i in range(30)
    ]
    bodies[4]["delay_ms"] = 60000
    bodies[5]["run_at"] = "2099-01-01T00:00:00Z"
    bodies[6]["max_attempts"] = 2
    bodies[7]["idempotency_key"] = "seven"
    r = await client.post("/v1/jobs/batch", json={"jobs": bodies})
    assert r.status_code == 201, r.text
    jobs = r.json()["jobs"]
    assert set(r.json()) == {"jobs"}
    assert [j["type"] for j in jobs] == [b["type"] for b in bodies]
    assert [j["queue"] for j in jobs] == [b["queue"] for b in bodies]
    assert [j["payload"] for j in jobs] == [b["payload"] for b in bodies]
    assert len({j["id"] for j in jobs}) == 30
    for j in jobs:
        assert set(j) == JOB_FIELDS
        assert j["status"] == "pending" and j["attempt"] == 0 and j["errors"] == []
    assert jobs[0]["max_attempts"] == 25 and jobs[6]["max_attempts"] == 2
    assert jobs[7]["idempotency_key"] == "seven"
    assert ts(jobs[4]["visible_at"]) - ts(jobs[4]["created_at"]) >= timedelta(seconds=59)
    assert ts(jobs[5]["visible_at"]).year == 2099
    assert abs(ts(jobs[0]["visible_at"]) - ts(jobs[0]["created_at"])) < timedelta(seconds=1)
    for j in jobs:  # each one is stored as answered
        assert (await client.get(f"/v1/jobs/{j['id']}")).json() == j
    assert [await total(client, q) for q in ("qa", "qb", "default")] == [10, 10, 10]


async def test_batch_uses_each_queues_default_max_attempts(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "few", max_attempts=2)
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "queue": "few"}, {"type": "t"}, {"type": "t", "queue": "few",
                                                       "max_attempts": 5}]})
    assert r.status_code == 201
    assert [j["max_attempts"] for j in r.json()["jobs"]] == [2, 25, 5]


async def test_batch_with_one_invalid_job_enqueues_nothing(client: httpx.AsyncClient) -> None:
    bodies: list[dict[str, Any]] = [{"type": "t", "payload": {"i": i}} for i in range(5)]
    bodies[3] = {"type": "t", "priority": "high"}
    validation(await client.post("/v1/jobs/batch", json={"jobs": bodies}),
               "body", "jobs", 3, "priority")
    bodies[3] = {"type": "t", "unknown": 1}
    validation(await client.post("/v1/jobs/batch", json={"jobs": bodies}), "body", "jobs", 3)
    # A value only the database refuses (NUL in the payload) also rolls the whole batch back.
    bodies[3] = {"type": "t", "payload": {"s": "a\u0000b"}}
    validation(await client.post("/v1/jobs/batch", json={"jobs": bodies}))
    assert await total(client) == 0
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_batch_past_max_depth_is_refused_whole(client: httpx.AsyncClient) -> None:
    await patch_queue(client, "default", max_depth=5)
    for _ in range(3):
        await enqueue(client)
    r = await client.post("/v1/jobs/batch", json={"jobs": [{"type": "b"}] * 3})
    problem(r, 429, "queue_full")
    retry_after(r)
    assert (await counts(client))["pending"] == 3
    # Exactly up to max_depth is fine.
    r = await client.post("/v1/jobs/batch", json={"jobs": [{"type": "b"}] * 2})
    assert r.status_code == 201, r.text
    assert (await counts(client))["pending"] == 5


async def test_batch_is_refused_whole_when_any_queue_would_overflow(
    client: httpx.AsyncClient,
) -> None:
    await patch_queue(client, "small", max_depth=1)
    jobs = [{"type": "t", "queue": "big"}] * 5 + [{"type": "t", "queue": "small"}] * 2
    problem(await client.post("/v1/jobs/batch", json={"jobs": jobs}), 429, "queue_full")
    assert await total(client, "big") == 0
    assert await total(client, "small") == 0


async def test_batch_replays_do_not_count_towards_max_depth(client: httpx.AsyncClient) -> None:
    # Only new jobs can take a queue past its max_depth; a replay enqueues nothing.
    existing = await enqueue(client, idempotency_key="a")
    await patch_queue(client, "default", max_depth=2)
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "idempotency_key": "a"}, {"type": "t", "idempotency_key": "b"},
        {"type": "t", "idempotency_key": "b"}]})
    assert r.status_code == 201, r.text
    assert [j["id"] for j in r.json()["jobs"]][0] == existing["id"]
    assert (await counts(client))["pending"] == 2
    # The queue is now full: a batch of replays alone is still answered, a new job is not.
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "idempotency_key": "b"}, {"type": "t", "idempotency_key": "a"}]})
    assert r.status_code == 201, r.text
    problem(await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "idempotency_key": "a"}, {"type": "t", "idempotency_key": "c"}]}),
        429, "queue_full")
    assert (await counts(client))["pending"] == 2


async def test_batch_replays_existing_jobs_and_duplicate_keys(client: httpx.AsyncClient) -> None:
    existing = await enqueue(client, "t", payload={"a": 1}, idempotency_key="a")
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "payload": {"a": 1}, "idempotency_key": "a"},   # replay of a committed job
        {"type": "t", "payload": {"b": 1}, "idempotency_key": "b"},   # new
        {"type": "t", "payload": {"b": 1}, "idempotency_key": "b"},   # same key in this batch
        {"type": "t", "payload": {"b": 1}, "idempotency_key": "b", "queue": "other"},  # new
        {"type": "t"},                                                 # new, no key
    ]})
    assert r.status_code == 201, r.text
    jobs = r.json()["jobs"]
    assert len(jobs) == 5
    assert jobs[0] == existing
    assert jobs[1]["id"] == jobs[2]["id"] and jobs[1] == jobs[2]
    assert jobs[3]["id"] != jobs[1]["id"] and jobs[3]["queue"] == "other"
    assert len({j["id"] for j in jobs}) == 4
    assert (await counts(client))["pending"] == 3  # a, b and the keyless one
    assert await total(client, "other") == 1
    # Replaying the whole batch enqueues nothing new and answers the same jobs.
    again = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "payload": {"b": 1}, "idempotency_key": "b"},
        {"type": "t", "payload": {"a": 1}, "idempotency_key": "a"}]})
    assert again.status_code == 201
    assert [j["id"] for j in again.json()["jobs"]] == [jobs[1]["id"], jobs[0]["id"]]
    assert (await counts(client))["pending"] == 3


async def test_batch_with_a_conflicting_key_enqueues_nothing(client: httpx.AsyncClient) -> None:
    await enqueue(client, "t", payload={"a": 1}, idempotency_key="a")
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "new"}, {"type": "t", "payload": {"a": 2}, "idempotency_key": "a"}]})
    problem(r, 409, "idempotency_conflict")
    assert await total(client) == 1
    # Two jobs of one batch with one key and different payloads conflict with each other.
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "idempotency_key": "z"}, {"type": "u", "idempotency_key": "z"}]})
    problem(r, 409, "idempotency_conflict")
    assert await total(client) == 1


async def test_batch_of_1000_is_accepted_and_1001_refused(client: httpx.AsyncClient) -> None:
    jobs = [{"type": "bulk", "payload": {"i": i}} for i in range(1000)]
    r = await client.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text[:500]
    out = r.json()["jobs"]
    assert [j["payload"]["i"] for j in out] == list(range(1000))
    assert (await counts(client))["pending"] == 1000
    r = await client.post("/v1/jobs/batch", json={"jobs": jobs + [{"type": "bulk"}]})
    validation(r, "body", "jobs")
    assert (await counts(client))["pending"] == 1000


async def test_batch_body_must_be_a_jobs_list(client: httpx.AsyncClient) -> None:
    for body in ({}, {"jobs": {"type": "t"}}, {"jobs": "t"}, [{"type": "t"}],
                 {"jobs": [{"type": "t"}], "extra": 1}, {"jobs": [None]}):
        validation(await client.post("/v1/jobs/batch", json=body))
    assert await total(client) == 0


# --- committed before the answer -------------------------------------------------------------


async def _stored(database_url: str, job_id: str) -> dict[str, Any] | None:
    # A connection of its own, opened after the answer: it sees only committed rows.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT type, status, payload FROM jobs WHERE id = %s",
                                 (int(job_id),))
        row = await cur.fetchone()
    return None if row is None else {"type": row[0], "status": row[1], "payload": row[2]}


async def test_answered_jobs_are_committed(client: httpx.AsyncClient, database_url: str) -> None:
    r = await client.post("/v1/jobs", json={"type": "durable", "payload": {"k": 1},
                                            "idempotency_key": "d"})
    assert r.status_code == 201
    assert await _stored(database_url, r.json()["id"]) == {
        "type": "durable", "status": "pending", "payload": {"k": 1}}
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "b0"}, {"type": "b1", "payload": {"x": [1]}}]})
    assert r.status_code == 201
    for j, want in zip(r.json()["jobs"], ("b0", "b1"), strict=True):
        stored = await _stored(database_url, j["id"])
        assert stored is not None and stored["type"] == want
    # The replay's job is the committed one.
    r = await client.post("/v1/jobs", json={"type": "durable", "payload": {"k": 1},
                                            "idempotency_key": "d"})
    assert r.status_code == 200
    assert await _stored(database_url, r.json()["id"]) is not None


async def test_refused_jobs_are_not_stored(client: httpx.AsyncClient, database_url: str) -> None:
    await patch_queue(client, "default", max_depth=0)
    problem(await client.post("/v1/jobs", json={"type": "t"}), 429, "queue_full")
    problem(await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t"}]}), 429, "queue_full")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM jobs")
        row = await cur.fetchone()
    assert row is not None and row[0] == 0
