"""The hand-off: a job enqueued while a long-poll of the same service process waits for it is
leased to that long-poll in the enqueue's own statement (no bell, no claim statement, one
commit), as the claim it would have run would lease it; what such a claim could not take, or
a queue whose claims run statements of their own, goes the usual way.

(A long-poll whose token was revoked in the database is handed nothing: tests/test_revocation.py's
``test_a_long_poll_is_refused_by_its_claim_when_the_revocation_has_not_reached_this_replica``
runs that path.)"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from jobq.core import enqueue as core_enqueue
from tests.helpers import job_events, long_polls_idle, patch_queue
from tests.helpers_workers import Claims, claim, enqueue, get_job
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(60)

WAIT_MS = 10_000


@pytest.fixture(autouse=True)
async def listening(app: FastAPI) -> None:
    """Once up, the LISTEN connection rings one waiter per queue (it may have missed
    notifications), which then looks again: a long-poll in the middle of that look is not
    idle, and an enqueue then rings it rather than hand it the job. Wait for that first."""
    await app.state.ctx.wakeups.notifications.listening.wait()


def poll(c: httpx.AsyncClient, queue: str, worker_id: str = "w-waiting", wait_ms: int = WAIT_MS,
         **body: Any) -> asyncio.Task[list[dict[str, Any]]]:
    return asyncio.create_task(claim(c, [queue], worker_id=worker_id, wait_ms=wait_ms, **body))


def slow_inserts(monkeypatch: pytest.MonkeyPatch, seconds: float,
                 key: str | None = None) -> asyncio.Event:
    """Make the enqueue's insert wait ``seconds`` before it runs (only for idempotency key
    ``key``, when given): the window in which a long-poll is reserved for it. The event is set
    when a slowed insert starts."""
    real = core_enqueue._insert
    inserting = asyncio.Event()

    async def slow(ctx: Any, params: dict[str, Any], takes: Any) -> Any:
        if key is None or params.get("idempotency_key") == key:
            inserting.set()
            await asyncio.sleep(seconds)
        return await real(ctx, params, takes)

    monkeypatch.setattr(core_enqueue, "_insert", slow)
    return inserting



async def test_a_job_enqueued_while_a_long_poll_waits_is_leased_to_it_in_the_enqueue(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    claims = Claims(monkeypatch)
    waiting = poll(client, "h")
    await long_polls_idle(app, "h")
    looked = claims.n
    payload = {"to": "ana@example.com", "n": [1, 2.5, None], "name": "Zoë"}
    job = await enqueue(client, "email", queue="h", payload=payload, priority=3)
    # The enqueue's answer is the job as committed: already leased, its first attempt.
    assert job["status"] == "running" and job["attempt"] == 1, job
    assert job["worker_id"] == "w-waiting" and job["locked_until"] is not None, job

    (lease,) = await asyncio.wait_for(waiting, 5)
    assert claims.n == looked, "the long-poll ran a claim: the job was not handed over"
    assert lease["job"]["id"] == job["id"]
    assert lease["locked_until"] == job["locked_until"]
    assert lease["job"]["payload"] == payload and lease["job"]["priority"] == 3
    assert lease["job"]["status"] == "running" and lease["job"]["attempt"] == 1
    assert lease["job"]["errors"] == [] and lease["job"]["result"] is None
    stored = await get_job(client, job["id"])
    assert {k: stored[k] for k in lease["job"]} == lease["job"]

    # The lease is a lease like any other: it acks, once.
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": {"sent": True}})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["result"] == {"sent": True}
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
    assert r.status_code == 409, r.text


async def test_a_handed_lease_reads_as_a_claimed_one(app: FastAPI, client: httpx.AsyncClient) -> None:
    """The long-poll's answer is the same whether its job was claimed or handed over: the
    same fields, the same values where the jobs are alike."""
    await enqueue(client, queue="same", payload={"k": 1})
    (claimed,) = await claim(client, ["same"], worker_id="w")
    waiting = poll(client, "same", worker_id="w")
    await long_polls_idle(app, "same")
    await enqueue(client, queue="same", payload={"k": 1})
    (handed,) = await asyncio.wait_for(waiting, 5)
    assert handed.keys() == claimed.keys() and handed["job"].keys() == claimed["job"].keys()
    differ = {"lease_id", "locked_until"}
    assert {k: v for k, v in handed.items() if k not in differ | {"job"}} == \
        {k: v for k, v in claimed.items() if k not in differ | {"job"}}
    times = {"id", "created_at", "visible_at", "locked_until"}
    assert {k: v for k, v in handed["job"].items() if k not in times} == \
        {k: v for k, v in claimed["job"].items() if k not in times}


async def test_two_waiting_long_polls_are_handed_one_job_each(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    claims = Claims(monkeypatch)
    first, second = poll(client, "two", worker_id="a"), poll(client, "two", worker_id="b")
    await long_polls_idle(app, "two", 2)
    looked = claims.n
    one, two = await enqueue(client, queue="two"), await enqueue(client, queue="two")
    got = {le["job"]["id"]: le["job"]["worker_id"] for t in (first, second) for le in await asyncio.wait_for(t, 5)}
    assert sorted(got) == sorted([one["id"], two["id"]]) and sorted(got.values()) == ["a", "b"], got
    assert claims.n == looked


@pytest.mark.parametrize("case", ["delayed", "max_running", "rate_limit", "other types"])
async def test_what_is_not_handed_over_goes_the_usual_way(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """A job not claimable at once, a queue whose claims run statements of their own, a
    long-poll that does not take the job's type: the enqueue inserts the job pending, and a
    claim (or nobody) takes it as before."""
    queue = f"usual-{case.replace(' ', '-').replace('_', '-')}"
    if case == "max_running":
        await patch_queue(client, queue, max_running=5)
    if case == "rate_limit":
        await patch_queue(client, queue, rate_limit={"jobs": 100, "per_ms": 1000})
    claims = Claims(monkeypatch)
    types = ["other"] if case == "other types" else None
    waiting = poll(client, queue, wait_ms=1500 if types else WAIT_MS, **({"types": types} if types else {}))
    await long_polls_idle(app, queue)
    looked = claims.n
    job = await enqueue(client, queue=queue, **({"delay_ms": 100} if case == "delayed" else {}))
    assert job["status"] == "pending" and job["attempt"] == 0 and job["worker_id"] is None, job
    leases_ = await asyncio.wait_for(waiting, 5)
    if types:
        # Rung as bells and readings ring type-filtered long-polls (they do not know the
        # job's type), it may have looked, and took nothing.
        assert leases_ == [], "a long-poll for other types was handed or took the job"
        assert (await get_job(client, job["id"]))["status"] == "pending"
    else:
        assert [le["job"]["id"] for le in leases_] == [job["id"]]
        assert claims.n > looked, "the long-poll did not claim it"


async def test_a_paused_queue_hands_nothing_and_its_long_poll_sleeps_on(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    await patch_queue(client, "paused-h", paused=True)
    claims = Claims(monkeypatch)
    waiting = poll(client, "paused-h", wait_ms=1500)
    await long_polls_idle(app, "paused-h")
    looked = claims.n
    job = await enqueue(client, queue="paused-h")
    assert job["status"] == "pending" and job["attempt"] == 0, job
    assert await asyncio.wait_for(waiting, 5) == []
    # Rung by the new job (it does not know the queue is paused), it looked once.
    assert claims.n <= looked + 1
    assert (await get_job(client, job["id"]))["status"] == "pending"


async def test_a_long_poll_whose_wait_ends_during_the_hand_off_still_gets_its_job(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lease is made for the long-poll before its insert commits: a wait that runs out in
    between still answers it (an empty answer would leave the job leased to nobody, until its
    lease expired and counted against it)."""
    waiting = poll(client, "late", wait_ms=300)
    await long_polls_idle(app, "late")
    slow_inserts(monkeypatch, 0.8)  # past the long-poll's wait
    job = await enqueue(client, queue="late")
    assert job["status"] == "running", job
    (lease,) = await asyncio.wait_for(waiting, 5)
    assert lease["job"]["id"] == job["id"]
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={})
    assert r.status_code == 200, r.text


async def test_a_job_handed_to_a_long_poll_that_left_goes_back_without_spending_its_attempt(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The long-poll's request is cancelled (its worker went away) while the insert leasing it
    a job runs: the job is given back, claimable at once, its attempt not spent."""
    waiting = poll(client, "left", worker_id="gone")
    await long_polls_idle(app, "left")
    inserting = slow_inserts(monkeypatch, 0.5)
    enqueuing = asyncio.create_task(enqueue(client, queue="left"))
    await inserting.wait()
    waiting.cancel()
    job = await enqueuing
    assert job["status"] == "running" and job["worker_id"] == "gone", job

    async def given_back() -> dict[str, Any] | None:
        now = await get_job(client, job["id"])
        return now if now["status"] == "pending" else None

    back = await aeventually(given_back, what="the job given back")
    assert back["worker_id"] is None and back["errors"] == [], back
    (lease,) = await claim(client, ["left"], worker_id="next")
    assert lease["job"]["id"] == job["id"]
    r = await client.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "boom", "retry": True})
    assert r.status_code == 200, r.text
    # One failed attempt on record: the handed-over one that went back was not counted.
    assert [e["attempt"] for e in r.json()["errors"]] == [1], r.json()


async def test_a_bell_that_comes_while_a_hand_off_leases_nothing_is_answered(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The long-poll is reserved for an enqueue that then inserts nothing (its idempotency
    key is taken); another job enqueued meanwhile found no waiter in the ring order. That
    job's bell is the reserved long-poll's: it claims the job as soon as the first enqueue
    is done, not at the next safety round or the end of its wait."""
    first = await enqueue(client, queue="meanwhile", idempotency_key="k")
    (held,) = await claim(client, ["meanwhile"], worker_id="x")
    assert held["job"]["id"] == first["id"]
    waiting = poll(client, "meanwhile", wait_ms=4000)
    await long_polls_idle(app, "meanwhile")
    inserting = slow_inserts(monkeypatch, 0.5, key="k")
    replay = asyncio.create_task(client.post("/v1/jobs", json={"type": "t", "queue": "meanwhile",
                                                              "idempotency_key": "k"}))
    await inserting.wait()
    other = await enqueue(client, queue="meanwhile")
    assert other["status"] == "pending", other  # no long-poll in the ring order to hand it to
    r = await replay
    assert r.status_code == 200 and r.json()["id"] == first["id"], r.text
    done_at = asyncio.get_running_loop().time()
    leases_ = await asyncio.wait_for(waiting, 5)
    assert [le["job"]["id"] for le in leases_] == [other["id"]]
    assert asyncio.get_running_loop().time() - done_at < 2.0, "answered by the safety round, not the bell"


async def test_a_long_poll_with_a_capped_queue_first_is_not_handed_a_later_queues_job(
        app: FastAPI, client: httpx.AsyncClient) -> None:
    """Queues are claimed in the order listed. An ack frees a max_running slot without a
    bell, so the long-poll cannot know the capped queue has a job for it again: a job
    enqueued into a later queue rings it, and its claim takes the capped queue's first."""
    await patch_queue(client, "capped-first", max_running=1)
    a1 = await enqueue(client, queue="capped-first")
    a2 = await enqueue(client, queue="capped-first")
    (holding,) = await claim(client, ["capped-first"], worker_id="holder")
    assert holding["job"]["id"] == a1["id"]
    waiting = asyncio.create_task(claim(client, ["capped-first", "plain-later"], worker_id="w",
                                        wait_ms=WAIT_MS))
    await long_polls_idle(app, "plain-later")
    r = await client.post(f"/v1/leases/{holding['lease_id']}/ack", json={})
    assert r.status_code == 200, r.text
    later = await enqueue(client, queue="plain-later")
    assert later["status"] == "pending", later
    leases_ = await asyncio.wait_for(waiting, 5)
    assert [le["job"]["id"] for le in leases_] == [a2["id"]]


async def test_a_lease_handed_to_a_long_poll_cancelled_before_it_answers_goes_back(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Handed its lease, the long-poll's task is cancelled before it runs again (a server's
    forced stop): the job goes back at once, its attempt not spent, rather than wait out a
    lease nobody holds."""
    waiting = poll(client, "cut")
    await long_polls_idle(app, "cut")
    real = core_enqueue._settle

    def settle_then_cancel(*args: Any) -> None:
        real(*args)
        waiting.cancel()

    monkeypatch.setattr(core_enqueue, "_settle", settle_then_cancel)
    job = await enqueue(client, queue="cut")
    assert job["status"] == "running", job
    await asyncio.gather(waiting, return_exceptions=True)

    async def given_back() -> dict[str, Any] | None:
        now = await get_job(client, job["id"])
        return now if now["status"] == "pending" else None

    back = await aeventually(given_back, what="the job given back")
    assert back["attempt"] == 0 and back["errors"] == [], back


async def test_a_handed_job_is_counted_enqueued_and_claimed_even_if_its_enqueue_is_cancelled(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    waiting = poll(client, "counted")
    await long_polls_idle(app, "counted")
    inserting = slow_inserts(monkeypatch, 0.3)
    producing = asyncio.create_task(enqueue(client, queue="counted"))
    await inserting.wait()
    producing.cancel()  # the producer's request, mid-insert
    (lease,) = await asyncio.wait_for(waiting, 5)
    assert lease["job"]["status"] == "running"
    events = job_events((await client.get("/metrics")).text, "counted")
    assert events["enqueued"] == 1 and events["claimed"] == 1, events
