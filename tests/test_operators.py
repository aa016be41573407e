"""Operators (issue 4): listing jobs, cancel, retry, the dead-letter queue, and /metrics.

Everything goes through the HTTP API; direct SQL is only used to read what the service
committed, never to fake a state a test checks.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(60)


# --- helpers ---------------------------------------------------------------------------------


def problem_code(r: httpx.Response) -> str:
    assert r.headers["content-type"].startswith("application/problem+json"), r.text
    body = r.json()
    assert body["status"] == r.status_code, body
    return str(body["code"])


def ts(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() == timedelta(0), value
    return parsed


async def enqueue(c: httpx.AsyncClient, type_: str = "t", **body: Any) -> dict[str, Any]:
    r = await c.post("/v1/jobs", json={"type": type_, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def enqueue_batch(c: httpx.AsyncClient, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = await c.post("/v1/jobs/batch", json={"jobs": bodies})
    assert r.status_code == 201, r.text
    return list(r.json()["jobs"])


async def claim(c: httpx.AsyncClient, queue: str, limit: int = 1, **body: Any) -> list[dict[str, Any]]:
    r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [queue], "limit": limit,
                                         **body})
    assert r.status_code == 200, r.text
    return list(r.json()["leases"])


async def claim_job(c: httpx.AsyncClient, job: dict[str, Any], **body: Any) -> dict[str, Any]:
    """Claim exactly this job (the test gives each job it claims this way a type of its own)."""
    leases = await claim(c, job["queue"], types=[job["type"]], **body)
    assert [le["job"]["id"] for le in leases] == [job["id"]], leases
    return leases[0]


async def get_job(c: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    r = await c.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def ack(c: httpx.AsyncClient, lease_id: str) -> dict[str, Any]:
    r = await c.post(f"/v1/leases/{lease_id}/ack", json={"result": {"ok": True}})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def fail(c: httpx.AsyncClient, lease_id: str, **body: Any) -> dict[str, Any]:
    r = await c.post(f"/v1/leases/{lease_id}/fail", json={"error": "boom", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def make_dead(c: httpx.AsyncClient, queue: str, type_: str, error: str = "fatal") -> dict[str, Any]:
    job = await enqueue(c, type_, queue=queue)
    lease = await claim_job(c, job)
    dead = await fail(c, lease["lease_id"], error=error, retry=False)
    assert dead["status"] == "dead", dead
    return dead


async def make_completed(c: httpx.AsyncClient, queue: str, type_: str) -> dict[str, Any]:
    job = await enqueue(c, type_, queue=queue)
    lease = await claim_job(c, job)
    return await ack(c, lease["lease_id"])


async def list_page(c: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    r = await c.get("/v1/jobs", params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"jobs", "next_cursor"}, body
    return dict(body)


async def list_all(c: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await list_page(c, **params, **({"cursor": cursor} if cursor else {}))
        jobs.extend(page["jobs"])
        cursor = page["next_cursor"]
        if cursor is None:
            return jobs


def ids(jobs: list[dict[str, Any]]) -> list[str]:
    return [j["id"] for j in jobs]


# --- GET /v1/jobs ----------------------------------------------------------------------------


async def test_list_walks_250_jobs_in_three_pages_newest_first(client: httpx.AsyncClient) -> None:
    made = await enqueue_batch(client, [{"type": "walk", "queue": "walk", "payload": {"i": i}}
                                        for i in range(250)])
    await enqueue(client, "walk", queue="elsewhere")  # other queues stay out of the listing
    newest_first = list(reversed(ids(made)))

    first = await list_page(client, queue="walk", limit=100)
    assert ids(first["jobs"]) == newest_first[:100]
    assert first["next_cursor"] is not None
    # New jobs between pages are newer than everything already listed: later pages must not
    # shift to show them, nor repeat or skip anything.
    late = [await enqueue(client, "walk", queue="walk") for _ in range(5)]
    second = await list_page(client, queue="walk", limit=100, cursor=first["next_cursor"])
    assert ids(second["jobs"]) == newest_first[100:200]
    assert second["next_cursor"] is not None
    await enqueue(client, "walk", queue="walk")
    third = await list_page(client, queue="walk", limit=100, cursor=second["next_cursor"])
    assert ids(third["jobs"]) == newest_first[200:250]
    assert third["next_cursor"] is None

    walked = ids(first["jobs"]) + ids(second["jobs"]) + ids(third["jobs"])
    assert len(walked) == len(set(walked)) == 250
    assert set(walked) == set(ids(made))
    assert not set(walked) & set(ids(late))
    # A fresh walk from the top shows the late jobs first.
    top = await list_page(client, queue="walk", limit=6)
    assert ids(top["jobs"])[1:] == list(reversed(ids(late)))
    assert top["jobs"][0]["payload"] == {}


async def test_list_exactly_full_last_page_has_null_cursor(client: httpx.AsyncClient) -> None:
    await enqueue_batch(client, [{"type": "full", "queue": "exact"} for _ in range(200)])
    first = await list_page(client, queue="exact", limit=100)
    second = await list_page(client, queue="exact", limit=100, cursor=first["next_cursor"])
    assert len(second["jobs"]) == 100
    assert second["next_cursor"] is None


async def test_list_is_newest_first_across_separate_enqueues(client: httpx.AsyncClient) -> None:
    made = []
    for i in range(3):
        made.append(await enqueue(client, "order", queue="order", payload={"i": i}))
        # Each enqueue at a later instant than the one before: until the clock has moved on.
        await aeventually(lambda: datetime.now(UTC) > ts(made[-1]["created_at"]), poll_s=0.001,
                          what="the clock past the last job's created_at")
    listed = (await list_page(client, queue="order"))["jobs"]
    assert ids(listed) == list(reversed(ids(made)))
    created = [ts(j["created_at"]) for j in listed]
    assert created == sorted(created, reverse=True)


async def test_list_filters_by_queue_status_and_type(client: httpx.AsyncClient) -> None:
    a_pending = [await enqueue(client, "a", queue="fq") for _ in range(3)]
    b_pending = [await enqueue(client, "b", queue="fq") for _ in range(2)]
    done = await make_completed(client, "fq", "c")
    dead = await make_dead(client, "fq", "a.dead")
    other = await enqueue(client, "a", queue="fq2")

    assert set(ids(await list_all(client, queue="fq"))) == set(
        ids(a_pending + b_pending) + [done["id"], dead["id"]])
    assert set(ids(await list_all(client, type="a"))) == set(ids(a_pending) + [other["id"]])
    assert set(ids(await list_all(client, queue="fq", type="a"))) == set(ids(a_pending))
    assert ids(await list_all(client, status="completed")) == [done["id"]]
    assert ids(await list_all(client, status="dead", queue="fq")) == [dead["id"]]
    assert set(ids(await list_all(client, status="pending", queue="fq"))) == set(
        ids(a_pending + b_pending))
    assert ids(await list_all(client, status="pending", queue="fq", type="b")) == list(
        reversed(ids(b_pending)))
    assert await list_all(client, status="running") == []
    assert await list_all(client, queue="nosuchqueue") == []
    for job in await list_all(client, status="pending"):
        assert job["status"] == "pending"
    # Filtered pages paginate too.
    page = await list_page(client, queue="fq", type="a", limit=2)
    assert len(page["jobs"]) == 2 and page["next_cursor"]
    rest = await list_page(client, queue="fq", type="a", limit=2, cursor=page["next_cursor"])
    assert ids(page["jobs"]) + ids(rest["jobs"]) == list(reversed(ids(a_pending)))
    assert rest["next_cursor"] is None


async def test_list_limit_bounds(client: httpx.AsyncClient) -> None:
    await enqueue_batch(client, [{"type": "lim", "queue": "lim"} for _ in range(3)])
    assert len((await list_page(client, queue="lim", limit=1))["jobs"]) == 1
    assert len((await list_page(client, queue="lim", limit=1000))["jobs"]) == 3
    assert len((await list_page(client, queue="lim"))["jobs"]) == 3  # default 100
    for bad in ("0", "1001", "-1", "abc", "1.5"):
        r = await client.get("/v1/jobs", params={"limit": bad})
        assert r.status_code == 422, (bad, r.text)
        assert problem_code(r) == "validation_error"
        assert r.json()["errors"] and r.json()["errors"][0]["loc"][-1] == "limit"


async def test_list_default_limit_is_100(client: httpx.AsyncClient) -> None:
    await enqueue_batch(client, [{"type": "dl", "queue": "dl"} for _ in range(101)])
    page = await list_page(client, queue="dl")
    assert len(page["jobs"]) == 100 and page["next_cursor"] is not None


@pytest.mark.parametrize("cursor", [
    "garbage",
    "!!!!",
    "é",
    base64.urlsafe_b64encode(b"id:abc").decode(),
    base64.urlsafe_b64encode(b"id:-5").decode(),
    base64.urlsafe_b64encode(b"xx:5").decode(),
    base64.urlsafe_b64encode(b"id:99999999999999999999999").decode(),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    "x" * 500,
])
async def test_list_garbage_cursor_is_422(client: httpx.AsyncClient, cursor: str) -> None:
    r = await client.get("/v1/jobs", params={"cursor": cursor})
    assert r.status_code == 422, r.text
    assert problem_code(r) == "validation_error"
    assert r.json()["errors"], r.json()


async def test_list_unknown_status_is_422(client: httpx.AsyncClient) -> None:
    for bad in ("bogus", "PENDING", ""):
        r = await client.get("/v1/jobs", params={"status": bad})
        assert r.status_code == 422, (bad, r.text)
        assert problem_code(r) == "validation_error"


# --- cancel ----------------------------------------------------------------------------------


async def test_cancel_waiting_jobs(client: httpx.AsyncClient) -> None:
    pending = await enqueue(client, "p", queue="cw")
    delayed = await enqueue(client, "d", queue="cw", delay_ms=3_600_000)
    failed_job = await enqueue(client, "f", queue="cw")
    lease = await claim_job(client, failed_job)
    assert (await fail(client, lease["lease_id"], retry_in_ms=3_600_000))["status"] == "failed"

    for job in (pending, delayed, failed_job):
        r = await client.post(f"/v1/jobs/{job['id']}/cancel")
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "cancelled"
        assert r.json()["id"] == job["id"]
        assert (await get_job(client, job["id"]))["status"] == "cancelled"
    # Cancelled jobs are not claimable.
    assert await claim(client, "cw", limit=10) == []
    counts = (await client.get("/v1/queues/cw")).json()["counts"]
    assert counts["cancelled"] == 3 and counts["pending"] == 0 and counts["failed"] == 0


async def test_cancel_running_job_kills_its_lease(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "run", queue="cr")
    lease = await claim_job(client, job)
    r = await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    lid = lease["lease_id"]
    for resp in (await client.post(f"/v1/leases/{lid}/heartbeat", json={}),
                 await client.post(f"/v1/leases/{lid}/ack", json={"result": 1}),
                 await client.post(f"/v1/leases/{lid}/fail", json={"error": "late"})):
        assert resp.status_code == 409, resp.text
        assert problem_code(resp) == "lease_lost"
    r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": lid}]})
    assert r.status_code == 200 and r.json()["results"] == [
        {"lease_id": lid, "ok": False, "code": "lease_lost"}], r.text
    after = await get_job(client, job["id"])
    assert after["status"] == "cancelled" and after["result"] is None and after["errors"] == []
    assert await claim(client, "cr") == []
    counts = (await client.get("/v1/queues/cr")).json()["counts"]
    assert counts["running"] == 0 and counts["cancelled"] == 1


async def test_cancel_finished_job_is_409(client: httpx.AsyncClient) -> None:
    done = await make_completed(client, "cf", "done")
    dead = await make_dead(client, "cf", "dead")
    cancelled = await enqueue(client, "c", queue="cf")
    assert (await client.post(f"/v1/jobs/{cancelled['id']}/cancel")).status_code == 200
    for job, status in ((done, "completed"), (dead, "dead"), (cancelled, "cancelled")):
        r = await client.post(f"/v1/jobs/{job['id']}/cancel")
        assert r.status_code == 409, r.text
        assert problem_code(r) == "invalid_state"
        assert (await get_job(client, job["id"]))["status"] == status


async def test_cancel_and_retry_unknown_job_is_404(client: httpx.AsyncClient) -> None:
    for job_id in ("999999999", "abc", "0", "-1", "99999999999999999999999"):
        for verb in ("cancel", "retry"):
            r = await client.post(f"/v1/jobs/{job_id}/{verb}")
            assert r.status_code == 404, (job_id, verb, r.text)
            assert problem_code(r) == "not_found"
        r = await client.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 404 and problem_code(r) == "not_found"


# --- retry -----------------------------------------------------------------------------------


async def test_retry_dead_job(client: httpx.AsyncClient) -> None:
    dead = await make_dead(client, "rd", "x", error="kaput")
    old = await claim(client, "rd")
    assert old == []
    r = await client.post(f"/v1/jobs/{dead['id']}/retry")
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["status"] == "pending"
    assert job["attempt"] == 0
    assert job["completed_at"] is None and job["locked_until"] is None
    assert ts(job["visible_at"]) <= datetime.now(UTC) + timedelta(seconds=1)
    assert ts(job["visible_at"]) >= ts(dead["completed_at"])
    assert [(e["attempt"], e["error"], e["kind"]) for e in job["errors"]] == [(1, "kaput", "failed")]
    # Claimable at once, with a new lease id; attempt counts again from 1.
    lease = await claim_job(client, job)
    assert lease["job"]["attempt"] == 1
    assert len(lease["job"]["errors"]) == 1
    done = await ack(client, lease["lease_id"])
    assert done["status"] == "completed"


async def test_retry_keeps_old_lease_ids_dead(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "x", queue="rl")
    first = await claim_job(client, job)
    await fail(client, first["lease_id"], retry=False)
    assert (await client.post(f"/v1/jobs/{job['id']}/retry")).status_code == 200
    second = await claim_job(client, job)
    assert second["lease_id"] != first["lease_id"]
    r = await client.post(f"/v1/leases/{first['lease_id']}/ack", json={})
    assert r.status_code == 409 and problem_code(r) == "lease_lost"
    assert (await get_job(client, job["id"]))["status"] == "running"
    await ack(client, second["lease_id"])


async def test_retry_cancelled_and_failed_jobs(client: httpx.AsyncClient) -> None:
    cancelled = await enqueue(client, "c", queue="rcf")
    assert (await client.post(f"/v1/jobs/{cancelled['id']}/cancel")).status_code == 200
    failed_job = await enqueue(client, "f", queue="rcf")
    lease = await claim_job(client, failed_job)
    failed = await fail(client, lease["lease_id"], error="try later", retry_in_ms=3_600_000)
    assert failed["status"] == "failed"
    assert ts(failed["visible_at"]) > datetime.now(UTC) + timedelta(minutes=30)

    for job, errors in ((cancelled, []), (failed_job, ["try later"])):
        r = await client.post(f"/v1/jobs/{job['id']}/retry")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "pending" and body["attempt"] == 0
        assert ts(body["visible_at"]) <= datetime.now(UTC) + timedelta(seconds=1)
        assert [e["error"] for e in body["errors"]] == errors
    # Both claimable now (the failed one no longer waits out its hour).
    leases = await claim(client, "rcf", limit=10)
    assert {le["job"]["id"] for le in leases} == {cancelled["id"], failed_job["id"]}
    assert all(le["job"]["attempt"] == 1 for le in leases)


async def test_retry_other_statuses_is_409(client: httpx.AsyncClient) -> None:
    done = await make_completed(client, "r409", "done")
    pending = await enqueue(client, "pending", queue="r409")
    running = await enqueue(client, "running", queue="r409")
    await claim_job(client, running)
    for job, status in ((done, "completed"), (pending, "pending"), (running, "running")):
        before = await get_job(client, job["id"])
        r = await client.post(f"/v1/jobs/{job['id']}/retry")
        assert r.status_code == 409, r.text
        assert problem_code(r) == "invalid_state"
        after = await get_job(client, job["id"])
        assert after["status"] == status
        assert after["attempt"] == before["attempt"]


# --- the dead-letter queue ------------------------------------------------------------------


async def test_replay_moves_exactly_the_filtered_dead_jobs(client: httpx.AsyncClient) -> None:
    q1x = [await make_dead(client, "dq1", "x", error=f"x{i}") for i in range(3)]
    q1y = [await make_dead(client, "dq1", "y") for _ in range(2)]
    q2x = [await make_dead(client, "dq2", "x") for _ in range(2)]
    bystander = await enqueue(client, "x", queue="dq1")  # pending: never touched
    done = await make_completed(client, "dq1", "x.done")

    async def statuses() -> dict[str, str]:
        return {j["id"]: j["status"] for j in await list_all(client, limit=1000)}

    r = await client.post("/v1/dead/replay", json={"queue": "dq1", "type": "x", "limit": 2})
    assert r.status_code == 200 and r.json() == {"replayed": 2}, r.text
    st = await statuses()
    assert sorted(st[j["id"]] for j in q1x) == ["dead", "pending", "pending"]
    assert all(st[j["id"]] == "dead" for j in q1y + q2x)
    assert st[bystander["id"]] == "pending" and st[done["id"]] == "completed"
    for j in q1x:
        job = await get_job(client, j["id"])
        assert [e["kind"] for e in job["errors"]] == ["failed"]
        assert job["errors"][0]["error"] == j["errors"][0]["error"]
        if job["status"] == "pending":
            assert job["attempt"] == 0 and job["completed_at"] is None
            assert ts(job["visible_at"]) <= datetime.now(UTC) + timedelta(seconds=1)

    r = await client.post("/v1/dead/replay", json={"queue": "dq1", "type": "x"})
    assert r.json() == {"replayed": 1}
    r = await client.post("/v1/dead/replay", json={"type": "y"})
    assert r.json() == {"replayed": 2}
    st = await statuses()
    assert all(st[j["id"]] == "pending" for j in q1x + q1y)
    assert all(st[j["id"]] == "dead" for j in q2x)
    # Nothing left to replay in dq1.
    assert (await client.post("/v1/dead/replay", json={"queue": "dq1"})).json() == {"replayed": 0}
    # No body: every dead job.
    r = await client.post("/v1/dead/replay")
    assert r.status_code == 200 and r.json() == {"replayed": 2}, r.text
    assert (await client.get("/v1/queues/dq2")).json()["counts"]["dead"] == 0
    # Replayed jobs are claimable now.
    leases = await claim(client, "dq1", limit=100)
    assert {le["job"]["id"] for le in leases} == set(ids(q1x + q1y) + [bystander["id"]])


async def test_replay_and_purge_validate(client: httpx.AsyncClient) -> None:
    for body in ({"limit": 0}, {"limit": -1}, {"bogus": 1}, {"queue": "bad name"}, {"type": ""}):
        r = await client.post("/v1/dead/replay", json=body)
        assert r.status_code == 422, (body, r.text)
        assert problem_code(r) == "validation_error"
    for params in ({"limit": "0"}, {"limit": "x"}, {"queue": "bad name"}):
        r = await client.delete("/v1/dead", params=params)
        assert r.status_code == 422, (params, r.text)
        assert problem_code(r) == "validation_error"


async def test_purge_deletes_exactly_the_filtered_dead_jobs(client: httpx.AsyncClient) -> None:
    q1x = [await make_dead(client, "pq1", "x") for _ in range(3)]
    q1y = [await make_dead(client, "pq1", "y") for _ in range(2)]
    q2x = [await make_dead(client, "pq2", "x") for _ in range(2)]
    keep = [await enqueue(client, "x", queue="pq1"), await make_completed(client, "pq1", "x.done")]

    async def exists(job: dict[str, Any]) -> bool:
        r = await client.get(f"/v1/jobs/{job['id']}")
        assert r.status_code in (200, 404), r.text
        return r.status_code == 200

    r = await client.delete("/v1/dead", params={"queue": "pq1", "type": "x", "limit": 2})
    assert r.status_code == 200 and r.json() == {"purged": 2}, r.text
    assert [await exists(j) for j in q1x].count(True) == 1
    assert all([await exists(j) for j in q1y + q2x + keep])

    r = await client.delete("/v1/dead", params={"type": "x"})
    assert r.json() == {"purged": 3}  # the last pq1 x and both pq2 x
    assert not any([await exists(j) for j in q1x + q2x])
    assert all([await exists(j) for j in q1y + keep])

    r = await client.delete("/v1/dead", params={"queue": "pq2"})
    assert r.json() == {"purged": 0}
    r = await client.delete("/v1/dead")
    assert r.json() == {"purged": 2}
    assert not any([await exists(j) for j in q1y])
    assert all([await exists(j) for j in keep])
    counts = (await client.get("/v1/queues/pq1")).json()["counts"]
    assert counts["dead"] == 0 and counts["pending"] == 1 and counts["completed"] == 1


async def test_replay_over_one_batch(client: httpx.AsyncClient, database_url: str) -> None:
    """More dead jobs than one internal batch (1000): all of them, or exactly `limit`."""
    jobs = await enqueue_batch(client, [{"type": "bulk", "queue": "bulk"} for _ in range(1000)])
    jobs += await enqueue_batch(client, [{"type": "bulk", "queue": "bulk"} for _ in range(300)])
    leases = await claim(client, "bulk", limit=1000) + await claim(client, "bulk", limit=1000)
    assert len(leases) == 1300
    for le in leases:
        assert (await client.post(f"/v1/leases/{le['lease_id']}/fail",
                                  json={"error": "e", "retry": False})).status_code == 200
    r = await client.post("/v1/dead/replay", json={"queue": "bulk", "limit": 1100})
    assert r.json() == {"replayed": 1100}
    counts = (await client.get("/v1/queues/bulk")).json()["counts"]
    assert counts["dead"] == 200 and counts["pending"] == 1100
    assert (await client.delete("/v1/dead", params={"queue": "bulk"})).json() == {"purged": 200}


# --- /metrics --------------------------------------------------------------------------------


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(c: httpx.AsyncClient) -> Samples:
    r = await c.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain"), r.headers
    return parse_metrics(r.text)


async def test_metrics_in_process_counters_follow_operations(client: httpx.AsyncClient) -> None:
    q = f"mq{time.monotonic_ns()}"  # the in-process registry is shared by all tests
    before = await scrape(client)
    assert sample(before, "jobq_jobs_total", queue=q, event="enqueued") == 0
    await enqueue(client, "a", queue=q)
    await enqueue(client, "a", queue=q)
    mid = await scrape(client)
    assert sample(mid, "jobq_jobs_total", queue=q, event="enqueued") == 2
    assert sample(mid, "jobq_waiting_jobs", queue=q, type="a") == 2
    assert sample(mid, "jobq_jobs", queue=q, status="pending") == 2
    leases = await claim(client, q, limit=2)
    await ack(client, leases[0]["lease_id"])
    await fail(client, leases[1]["lease_id"], retry=False)
    r = await client.patch(f"/v1/queues/{q}", json={"max_depth": 0})
    assert r.status_code == 200
    assert (await client.post("/v1/jobs", json={"type": "a", "queue": q})).status_code == 429
    after = await scrape(client)
    assert sample(after, "jobq_jobs_total", queue=q, event="enqueued") == 2
    assert sample(after, "jobq_jobs_total", queue=q, event="claimed") == 2
    assert sample(after, "jobq_jobs_total", queue=q, event="completed") == 1
    assert sample(after, "jobq_jobs_total", queue=q, event="dead") == 1
    assert sample(after, "jobq_enqueue_rejected_total", queue=q) == 1
    assert sample(after, "jobq_waiting_jobs", queue=q, type="a") == 0
    assert sample(after, "jobq_jobs", queue=q, status="completed") == 1
    assert sample(after, "jobq_jobs", queue=q, status="dead") == 1
    assert sample(after, "jobq_job_run_seconds_count", queue=q) == 1
    assert sample(after, "jobq_job_pickup_seconds_count", queue=q) == 2


async def test_metrics_count_every_job_of_a_batch(client: httpx.AsyncClient) -> None:
    q = f"mb{time.monotonic_ns()}"
    r = await client.post("/v1/jobs/batch", json={"jobs": [{"type": "a", "queue": q}] * 3})
    assert r.status_code == 201, r.text
    leases = await claim(client, q, limit=3)
    r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"]} for le in leases]})
    assert r.status_code == 200 and all(x["ok"] for x in r.json()["results"]), r.text
    after = await scrape(client)
    for event in ("enqueued", "claimed", "completed"):
        assert sample(after, "jobq_jobs_total", queue=q, event=event) == 3, event
    assert sample(after, "jobq_job_pickup_seconds_count", queue=q) == 3
    assert sample(after, "jobq_job_run_seconds_count", queue=q) == 3


async def test_metrics_two_processes_share_gauges_and_keep_own_counters(
    replicas: tuple[LiveServer, LiveServer],
) -> None:
    a_srv, b_srv = replicas
    async with httpx.AsyncClient(base_url=a_srv.url, timeout=10) as a, \
            httpx.AsyncClient(base_url=b_srv.url, timeout=10) as b:
        xs = [await enqueue(a, "x", queue="m") for _ in range(3)]
        ys = [await enqueue(b, "y", queue="m") for _ in range(2)]
        await enqueue(b, "z", queue="m", delay_ms=3_600_000)

        await ack(b, (await claim_job(b, xs[0]))["lease_id"])                  # completed
        await fail(a, (await claim_job(a, xs[1]))["lease_id"], retry=False)    # dead
        failed = await fail(a, (await claim(a, "m", types=["x"]))[0]["lease_id"],
                            retry_in_ms=3_600_000)                              # failed
        assert failed["id"] == xs[2]["id"] and failed["status"] == "failed"
        running = await claim(b, "m", types=["y"])                              # running
        assert running[0]["job"]["id"] == ys[0]["id"]
        assert (await a.post(f"/v1/jobs/{ys[1]['id']}/cancel")).status_code == 200

        assert (await a.patch("/v1/queues/full", json={"max_depth": 0})).status_code == 200
        for c, n in ((a, 2), (b, 1)):
            for _ in range(n):
                r = await c.post("/v1/jobs", json={"type": "x", "queue": "full"})
                assert r.status_code == 429, r.text

        want_status = {"pending": 1, "running": 1, "failed": 1, "completed": 1, "dead": 1,
                       "cancelled": 1}
        ma, mb = await scrape(a), await scrape(b)
        for m in (ma, mb):  # database truth: both processes report the same gauges
            assert sample(m, "jobq_waiting_jobs", queue="m", type="x") == 1
            assert sample(m, "jobq_waiting_jobs", queue="m", type="z") == 1
            assert sample(m, "jobq_waiting_jobs", queue="m", type="y") == 0
            for status, n in want_status.items():
                assert sample(m, "jobq_jobs", queue="m", status=status) == n, status
            # Nothing is claimable now in m (z is delayed, x waits out its backoff).
            assert sample(m, "jobq_oldest_waiting_seconds", queue="m") == 0

        # Counters are per process: each counts what it did.
        def counter(m: Samples, event: str) -> float:
            return sample(m, "jobq_jobs_total", queue="m", event=event)

        assert (counter(ma, "enqueued"), counter(mb, "enqueued")) == (3, 3)
        assert (counter(ma, "claimed"), counter(mb, "claimed")) == (2, 2)
        assert (counter(ma, "completed"), counter(mb, "completed")) == (0, 1)
        assert (counter(ma, "dead"), counter(mb, "dead")) == (1, 0)
        assert (counter(ma, "failed"), counter(mb, "failed")) == (1, 0)
        assert (counter(ma, "cancelled"), counter(mb, "cancelled")) == (1, 0)
        assert sample(ma, "jobq_enqueue_rejected_total", queue="full") == 2
        assert sample(mb, "jobq_enqueue_rejected_total", queue="full") == 1

        # And they go on counting, in the process that did the work only.
        new = await enqueue(b, "x", queue="m")
        await b.post("/v1/jobs", json={"type": "x", "queue": "full"})
        # Until the new job has waited a millisecond: the lag below is read as more than 0.
        await aeventually(lambda: datetime.now(UTC) - ts(new["visible_at"]) > timedelta(milliseconds=1),
                          poll_s=0.001, what="the new job waiting a millisecond")
        ma2, mb2 = await scrape(a), await scrape(b)
        assert counter(ma2, "enqueued") == 3 and counter(mb2, "enqueued") == 4
        assert sample(ma2, "jobq_enqueue_rejected_total", queue="full") == 2
        assert sample(mb2, "jobq_enqueue_rejected_total", queue="full") == 2
        for m in (ma2, mb2):
            assert sample(m, "jobq_waiting_jobs", queue="m", type="x") == 2
            assert sample(m, "jobq_jobs", queue="m", status="pending") == 2
            assert sample(m, "jobq_oldest_waiting_seconds", queue="m") > 0
