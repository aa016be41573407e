"""Issue 26, "A stop must not spend an attempt": ``POST /v1/leases/{lease_id}/release`` and
its batch form give a held job back to ``pending`` without counting the claim against
``max_attempts``, fenced as ack and fail are. Each test is a behaviour a worker or an operator
relies on; the release of a job with ``max_attempts: 1`` is the issue's own case."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from jobq.api.schemas import TEN_YEARS_MS
from jobq.core.reaper import reap_once
from tests.conftest import make_settings, running_app
from tests.helpers import long_polls_idle
from tests.helpers_workers import (
    ack,
    claim,
    claim_one,
    code,
    enqueue,
    fail,
    get_job,
    now,
    patch_queue,
    sql,
    ts,
)


async def release(c: httpx.AsyncClient, lease_id: str, **body: Any) -> httpx.Response:
    return await c.post(f"/v1/leases/{lease_id}/release", json=body)


async def released(c: httpx.AsyncClient, lease_id: str, **body: Any) -> dict[str, Any]:
    r = await release(c, lease_id, **body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def lost(r: httpx.Response) -> None:
    assert r.status_code == 409, r.text
    assert code(r) == "lease_lost"


# ------------------------------------------------------------------ the attempt is not spent


async def test_a_released_job_with_one_attempt_runs_again_and_dies_only_on_a_real_failure(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client, max_attempts=1)
    lease = await claim_one(client, worker_id="w1")
    assert lease["job"]["attempt"] == 1
    before = now()
    back = await released(client, lease["lease_id"])
    # Pending, claimable now, the claim taken back: nothing says it failed.
    assert back["id"] == job["id"]
    assert back["status"] == "pending" and back["attempt"] == 0 and back["max_attempts"] == 1
    assert back["locked_until"] is None and back["worker_id"] is None
    assert back["errors"] == [] and back["last_error"] is None
    [entry] = back["releases"]
    assert set(entry) == {"attempt", "at", "worker_id", "delay_ms"}
    assert entry["attempt"] == 1 and entry["worker_id"] == "w1" and entry["delay_ms"] == 0
    assert before - timedelta(seconds=1) <= ts(entry["at"]) <= now() + timedelta(seconds=1)
    assert await get_job(client, job["id"]) == back
    # Claimable again at once, with the attempt number the released claim had.
    again = await claim_one(client, worker_id="w2")
    assert again["job"]["id"] == job["id"] and again["job"]["attempt"] == 1
    assert again["lease_id"] != lease["lease_id"]
    assert again["job"]["releases"] == back["releases"]
    # A real failure spends the one attempt.
    r = await fail(client, again["lease_id"], error="boom")
    assert r.status_code == 200, r.text
    dead = r.json()
    assert dead["status"] == "dead" and dead["attempt"] == 1
    assert [e["error"] for e in dead["errors"]] == ["boom"]
    # The record goes with the job into the history.
    assert (await get_job(client, job["id"]))["releases"] == back["releases"]


async def test_without_release_the_same_stop_would_have_killed_the_job(client: httpx.AsyncClient) -> None:
    """The control for the test above: a hand-back as a fail (what workers did) spends it."""
    await enqueue(client, max_attempts=1)
    lease = await claim_one(client)
    r = await fail(client, lease["lease_id"], error="handed back (shutdown)", retry_in_ms=0)
    assert r.json()["status"] == "dead"


async def test_a_failure_after_a_release_backs_off_from_the_counted_attempts(
    client: httpx.AsyncClient,
) -> None:
    await patch_queue(client, "bq", backoff_base_ms=2000, backoff_max_ms=3_600_000)
    await enqueue(client, queue="bq", max_attempts=5)
    for _ in range(3):  # three stops in a row
        await released(client, (await claim_one(client, ["bq"]))["lease_id"])
    lease = await claim_one(client, ["bq"])
    assert lease["job"]["attempt"] == 1
    r = await fail(client, lease["lease_id"], error="x")
    assert r.status_code == 200, r.text
    failed = r.json()
    # First attempt: base × 2^0 × (1 + j), j < 0.1; the fourth claim's would be 16 s.
    delay_ms = (ts(failed["visible_at"]) - ts(failed["errors"][-1]["at"])) / timedelta(milliseconds=1)
    assert 1990 <= delay_ms <= 2300, delay_ms
    assert failed["attempt"] == 1 and len(failed["releases"]) == 3


async def test_errors_last_error_and_lease_expiries_are_unchanged(
    client: httpx.AsyncClient, database_url: str,
) -> None:
    """A release is neither an error nor an expiry: the poison-pill count does not move."""
    await patch_queue(client, "eq", max_lease_expiries=2)
    job = await enqueue(client, queue="eq", max_attempts=10)
    lease = await claim_one(client, ["eq"])
    assert (await fail(client, lease["lease_id"], error="first", retry_in_ms=0)).status_code == 200
    await claim_one(client, ["eq"], lease_ms=100)  # this one expires
    for _ in range(50):
        if (await get_job(client, job["id"]))["status"] == "pending":
            break
        await asyncio.sleep(0.1)
    before = await get_job(client, job["id"])
    assert [e["kind"] for e in before["errors"]] == ["failed", "lease_expired"]
    expiries = sql(database_url, "SELECT lease_expiries FROM jobs WHERE id = %(id)s", {"id": int(job["id"])})
    assert expiries == [(1,)]
    for _ in range(3):
        after = await released(client, (await claim_one(client, ["eq"]))["lease_id"])
    assert after["errors"] == before["errors"] and after["last_error"] == before["last_error"]
    assert after["attempt"] == before["attempt"] == 2
    assert sql(database_url, "SELECT lease_expiries FROM jobs WHERE id = %(id)s",
               {"id": int(job["id"])}) == expiries
    # One more expiry is the second: poison pill, dead. Three releases did not count.
    await claim_one(client, ["eq"], lease_ms=100)
    for _ in range(50):
        if (await get_job(client, job["id"]))["status"] == "dead":
            break
        await asyncio.sleep(0.1)
    assert (await get_job(client, job["id"]))["status"] == "dead"


async def test_releases_keeps_the_twenty_most_recent(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    for i in range(21):
        await released(client, (await claim_one(client, worker_id=f"w{i}"))["lease_id"])
    entries = (await get_job(client, job["id"]))["releases"]
    assert [e["worker_id"] for e in entries] == [f"w{i}" for i in range(1, 21)]
    assert {e["attempt"] for e in entries} == {1}


async def test_the_record_stays_with_the_job_through_history_retry_replay_and_a_reaped_death(
    client: httpx.AsyncClient,
) -> None:
    """Every statement that moves a job between jobs and jobs_history carries releases."""
    job = await enqueue(client, max_attempts=1)
    first = (await released(client, (await claim_one(client, worker_id="w1"))["lease_id"]))["releases"]
    # Dead by a lease expiry (the reaper's move), then retried (back from the history).
    await claim_one(client, lease_ms=100)
    for _ in range(50):
        if (await get_job(client, job["id"]))["status"] == "dead":
            break
        await asyncio.sleep(0.1)
    dead = await get_job(client, job["id"])
    assert dead["status"] == "dead" and dead["releases"] == first
    retried = await client.post(f"/v1/jobs/{job['id']}/retry")
    assert retried.status_code == 200 and retried.json()["releases"] == first
    # Dead by a fail, replayed; then cancelled: still there.
    lease = await claim_one(client, worker_id="w2")
    assert (await fail(client, lease["lease_id"], error="x", retry=False)).json()["releases"] == first
    r = await client.post("/v1/dead/replay", json={"queue": "default"})
    assert r.status_code == 200 and r.json() == {"replayed": 1}
    assert (await get_job(client, job["id"]))["releases"] == first
    cancelled = await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["releases"] == first
    listed = (await client.get("/v1/jobs", params={"status": "cancelled"})).json()["jobs"]
    assert [j["releases"] for j in listed] == [first]


async def test_a_released_job_of_an_aging_queue_is_claimed_again(client: httpx.AsyncClient,
                                                                   database_url: str) -> None:
    """Its aging key is recomputed, as every path back to waiting does: without one, the
    aged claim (which reads jobs by that key) would never hand it out again."""
    await patch_queue(client, "aq", aging_ms=60_000)
    job = await enqueue(client, queue="aq")
    batch = await client.post("/v1/leases/release", json={"releases": [
        {"lease_id": (await claim_one(client, ["aq"]))["lease_id"]}]})
    assert batch.json()["results"][0]["ok"] is True
    await released(client, (await claim_one(client, ["aq"]))["lease_id"], delay_ms=200)
    keys = sql(database_url, "SELECT aged_key IS NOT NULL FROM jobs WHERE id = %(id)s", {"id": int(job["id"])})
    assert keys == [(True,)]
    leases = await claim(client, ["aq"], wait_ms=5_000)
    assert [le["job"]["id"] for le in leases] == [job["id"]]


# ------------------------------------------------------------------ delay


async def test_delay_ms_is_honoured(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    before = now()
    back = await released(client, lease["lease_id"], delay_ms=1500)
    assert ts(back["visible_at"]) >= before + timedelta(milliseconds=1400)
    assert back["releases"][0]["delay_ms"] == 1500
    assert await claim(client) == []  # not claimable before its time
    leases = await claim(client, wait_ms=10_000)  # a long-poll picks it up when due
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert now() >= ts(back["visible_at"]) - timedelta(milliseconds=50)


async def test_a_release_wakes_a_waiting_long_poll(app: FastAPI, client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    waiting = asyncio.create_task(claim(client, worker_id="w2", wait_ms=20_000))
    await long_polls_idle(app, "default")
    await released(client, lease["lease_id"])
    leases = await asyncio.wait_for(waiting, 10)  # woken, not timed out (20 s)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert leases[0]["job"]["attempt"] == 1


# ------------------------------------------------------------------ fencing


async def test_a_second_release_is_lease_lost_and_changes_nothing(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    first = await released(client, lease["lease_id"])
    lost(await release(client, lease["lease_id"]))
    assert await get_job(client, job["id"]) == first


async def test_release_after_ack_or_cancel_is_lease_lost(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    acked = await claim_one(client)
    assert (await ack(client, acked["lease_id"])).status_code == 200
    lost(await release(client, acked["lease_id"]))
    assert (await get_job(client, acked["job"]["id"]))["status"] == "completed"

    job = await enqueue(client)
    lease = await claim_one(client)
    assert (await client.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 200
    lost(await release(client, lease["lease_id"]))
    assert (await get_job(client, job["id"]))["status"] == "cancelled"


async def test_the_old_lease_cannot_ack_after_release_and_a_new_claim(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    old = await claim_one(client, worker_id="w1")
    await released(client, old["lease_id"])
    new = await claim_one(client, worker_id="w2")
    lost(await ack(client, old["lease_id"], result="stale"))
    lost(await fail(client, old["lease_id"], error="stale"))
    lost(await release(client, old["lease_id"]))
    r = await ack(client, new["lease_id"], result="fresh")
    assert r.status_code == 200 and r.json()["result"] == "fresh"
    assert (await get_job(client, job["id"]))["worker_id"] == "w2"


@pytest.mark.parametrize("lease_id", ["999999.1", "not-a-lease"])
async def test_unknown_lease_is_404(client: httpx.AsyncClient, lease_id: str) -> None:
    r = await release(client, lease_id)
    assert r.status_code == 404, r.text
    assert code(r) == "not_found"


@pytest.fixture
async def reaped_by_hand(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A service whose reaper only runs when the test says (``reap_once``)."""
    async with running_app(make_settings(database_url)) as application:
        for task in asyncio.all_tasks():
            if task.get_name() == "jobq-reaper":
                task.cancel()
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq", timeout=30) as c:
            yield application, c


async def _past_its_end(lease: dict[str, Any]) -> None:
    await asyncio.sleep(max(0.0, (ts(lease["locked_until"]) - now()).total_seconds()) + 0.05)


async def test_release_after_the_expiry_was_processed_is_lease_lost(
    reaped_by_hand: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, c = reaped_by_hand
    job = await enqueue(c)
    lease = await claim_one(c, lease_ms=100)
    await _past_its_end(lease)
    assert await reap_once(app.state.ctx) == 1
    lost(await release(c, lease["lease_id"]))
    stored = await get_job(c, job["id"])
    assert stored["releases"] == [] and [e["kind"] for e in stored["errors"]] == ["lease_expired"]


async def test_release_past_locked_until_but_not_yet_reaped_succeeds(
    reaped_by_hand: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, c = reaped_by_hand
    job = await enqueue(c)
    lease = await claim_one(c, lease_ms=100)
    await _past_its_end(lease)
    back = await released(c, lease["lease_id"])
    assert back["status"] == "pending" and back["attempt"] == 0 and back["errors"] == []
    assert await reap_once(app.state.ctx) == 0  # nothing left for the reaper
    assert (await get_job(c, job["id"]))["errors"] == []


# ------------------------------------------------------------------ batch


async def test_batch_release_answers_each_lease_in_request_order(client: httpx.AsyncClient) -> None:
    a, b, c_ = [await enqueue(client, payload={"n": n}) for n in range(3)]
    leases = {le["job"]["id"]: le["lease_id"] for le in await claim(client, limit=3)}
    await released(client, leases[c_["id"]])  # already given back: lost
    before = now()
    r = await client.post("/v1/leases/release", json={"releases": [
        {"lease_id": leases[a["id"]]},
        {"lease_id": leases[b["id"]], "delay_ms": 60_000},
        {"lease_id": leases[c_["id"]]},
        {"lease_id": "999999.1"},
        {"lease_id": leases[a["id"]]},  # named twice: the first entry released it
    ]})
    assert r.status_code == 200, r.text
    assert r.json() == {"results": [
        {"lease_id": leases[a["id"]], "ok": True},
        {"lease_id": leases[b["id"]], "ok": True},
        {"lease_id": leases[c_["id"]], "ok": False, "code": "lease_lost"},
        {"lease_id": "999999.1", "ok": False, "code": "not_found"},
        {"lease_id": leases[a["id"]], "ok": False, "code": "lease_lost"},
    ]}
    ja, jb = await get_job(client, a["id"]), await get_job(client, b["id"])
    assert ja["status"] == jb["status"] == "pending" and ja["attempt"] == jb["attempt"] == 0
    assert [e["delay_ms"] for e in ja["releases"]] == [0]
    assert [e["delay_ms"] for e in jb["releases"]] == [60_000]
    assert ts(jb["visible_at"]) >= before + timedelta(seconds=59)
    # a and c are claimable now, b is not.
    ids = {le["job"]["id"] for le in await claim(client, limit=10)}
    assert ids == {a["id"], c_["id"]}


# ------------------------------------------------------------------ bodies


@pytest.mark.parametrize("body", [
    {"delay_ms": -1}, {"delay_ms": TEN_YEARS_MS + 1}, {"delay_ms": "5"}, {"delay_ms": 1.5},
    {"delay_ms": None}, {"delay": 5},
])
async def test_bad_bodies_are_422_and_change_nothing(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    job = await enqueue(client)
    lease = await claim_one(client)
    r = await release(client, lease["lease_id"], **body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert code(r) == "validation_error"
    assert any(e["loc"][:2] == ["body", next(iter(body))] for e in r.json()["errors"]), r.json()
    r = await client.post("/v1/leases/release", json={"releases": [{"lease_id": lease["lease_id"], **body}]})
    assert r.status_code == 422, r.text
    # The lease is still held.
    assert (await get_job(client, job["id"]))["status"] == "running"
    assert (await ack(client, lease["lease_id"])).status_code == 200


async def test_the_largest_delay_and_no_body_are_accepted(client: httpx.AsyncClient) -> None:
    await enqueue(client)
    await enqueue(client)
    one, two = await claim(client, limit=2)
    assert (await released(client, one["lease_id"], delay_ms=TEN_YEARS_MS))["status"] == "pending"
    r = await client.post(f"/v1/leases/{two['lease_id']}/release")  # no body: delay 0
    assert r.status_code == 200 and r.json()["releases"][0]["delay_ms"] == 0


@pytest.mark.parametrize("releases", [[], [{"lease_id": "1.1"}] * 1001])
async def test_batch_size_is_1_to_1000(client: httpx.AsyncClient, releases: list[Any]) -> None:
    r = await client.post("/v1/leases/release", json={"releases": releases})
    assert r.status_code == 422, r.text
    assert code(r) == "validation_error"


# ------------------------------------------------------------------ observability


async def test_metrics_and_the_lifecycle_log_say_released(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture,
) -> None:
    await enqueue(client, queue="metrics-release")
    await enqueue(client, queue="metrics-release")
    one, two = await claim(client, ["metrics-release"], worker_id="w9", limit=2)
    with caplog.at_level(logging.INFO, logger="jobq.events"):
        await released(client, one["lease_id"])
        r = await client.post("/v1/leases/release", json={"releases": [{"lease_id": two["lease_id"]}]})
        assert r.json()["results"][0]["ok"] is True
    events = [rec for rec in caplog.records if getattr(rec, "event", None) == "released"]
    jobs = [j for rec in events for j in rec.jobs]  # type: ignore[attr-defined]
    assert [(j["job_id"], j["worker_id"], j["attempt"]) for j in jobs] == [
        (one["job"]["id"], "w9", 1), (two["job"]["id"], "w9", 1)]
    text = (await client.get("/metrics")).text
    released_n = [s.value for family in text_string_to_metric_families(text) for s in family.samples
                  if s.name == "jobq_jobs_total" and s.labels == {"queue": "metrics-release",
                                                                  "event": "released"}]
    assert released_n == [2.0], text


# ------------------------------------------------------------------ concurrency


async def test_release_racing_ack_on_one_lease_has_exactly_one_winner(client: httpx.AsyncClient) -> None:
    outcomes: set[str] = set()
    for _ in range(20):
        job = await enqueue(client, queue="race")
        lease = await claim_one(client, ["race"])
        r_release, r_ack = await asyncio.gather(release(client, lease["lease_id"]),
                                                ack(client, lease["lease_id"], result="done"))
        codes = sorted([r_release.status_code, r_ack.status_code])
        assert codes == [200, 409], (r_release.text, r_ack.text)
        stored = await get_job(client, job["id"])
        if r_ack.status_code == 200:
            outcomes.add("ack")
            assert stored["status"] == "completed" and stored["releases"] == []
        else:
            outcomes.add("release")
            assert stored["status"] == "pending" and stored["attempt"] == 0
            assert len(stored["releases"]) == 1
            # Take it out of the way of the next round.
            assert (await client.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 200
    assert outcomes  # each round had one winner; which one is the race's
