"""Revocation reaches long-polls already waiting: a claim that came in with a valid token
and is waiting for work when the token is revoked must not be handed a job afterwards. It
ends with the same 401 a new request with that token gets, claims nothing, and ends soon
after the revocation rather than at the end of its wait_ms (so a worker learns at once)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.client import Unauthorized
from jobq.core import leases, tokens
from jobq.domain.access import Role
from jobq.worker import Worker
from tests.conftest import LiveServer, make_settings, two_replicas
from tests.helpers import long_polls_idle, problem
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(60)

QUEUE = "lp"
WAIT_MS = 10_000
ADMIN_TOKEN = "bootstrap-admin-token-for-tests"
INVALID = 'Bearer realm="jobq", error="invalid_token"'
# How soon after a revocation a waiting long-poll must have ended: the token table is re-read
# every half second; this is generous for a loaded machine, yet far short of the long-poll's
# wait (an idle long-poll looks again only when rung), so it is the revocation that ended it.
ENDS_WITHIN_S = 3.0


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[FastAPI]:
    """An app with a bootstrap admin token."""
    app = create_app(make_settings(database_url, admin_token=ADMIN_TOKEN))
    async with app.router.lifespan_context(app):
        yield app


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq", timeout=30)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ADMIN = bearer(ADMIN_TOKEN)


async def worker_token(app: FastAPI) -> tuple[str, dict[str, str]]:
    """A new worker token for every queue: its id, and its header."""
    info, token = await tokens.create(app.state.ctx.db, Role.WORKER)
    await app.state.tokens.refresh()
    return info.id, bearer(token)


def claim(c: httpx.AsyncClient, headers: dict[str, str], wait_ms: int = WAIT_MS) -> Any:
    return c.post("/v1/leases", headers=headers, json={"worker_id": "w", "queues": [QUEUE], "wait_ms": wait_ms})


async def enqueue(c: httpx.AsyncClient) -> int:
    r = await c.post("/v1/jobs", json={"type": "t", "queue": QUEUE}, headers=ADMIN)
    assert r.status_code == 201, r.text
    job_id: int = r.json()["id"]
    return job_id


def revoked_answer(r: httpx.Response) -> None:
    """What a request with a revoked token gets: 401 problem+json, invalid_token."""
    problem(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == INVALID


async def test_a_waiting_long_poll_whose_token_is_revoked_claims_nothing(app: FastAPI) -> None:
    token_id, worker = await worker_token(app)
    async with client_of(app) as c:
        poll = asyncio.create_task(claim(c, worker))
        await long_polls_idle(app, QUEUE, 1)
        r = await c.delete(f"/v1/tokens/{token_id}", headers=ADMIN)
        assert r.status_code == 200, r.text
        job_id = await enqueue(c)
        revoked_answer(await asyncio.wait_for(poll, WAIT_MS / 1000 + 5))

        r = await c.get(f"/v1/jobs/{job_id}", headers=ADMIN)
        assert r.json()["status"] == "pending", r.text
        # the job is left for a worker whose token is valid
        _, other = await worker_token(app)
        r = await claim(c, other, wait_ms=0)
        assert r.status_code == 200, r.text
        assert [le["job"]["id"] for le in r.json()["leases"]] == [job_id]


async def test_revocation_elsewhere_ends_the_long_poll_without_any_job(app: FastAPI, database_url: str) -> None:
    """Revoked on the database, as `jobq tokens revoke` or another replica does: the table's
    next read ends the long-poll, long before its wait_ms. Other long-polls, of another
    token and of the bootstrap admin token, go on waiting, and still get the next jobs."""
    token_id, worker = await worker_token(app)
    _, other = await worker_token(app)
    async with client_of(app) as c:
        revoked_poll = asyncio.create_task(claim(c, worker))
        other_poll = asyncio.create_task(claim(c, other))
        admin_poll = asyncio.create_task(claim(c, ADMIN))
        await long_polls_idle(app, QUEUE, 3)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE tokens SET revoked_at = now() WHERE id = %s", (token_id,))
        revoked_at = time.monotonic()
        r = await asyncio.wait_for(revoked_poll, WAIT_MS / 1000 + 5)
        ended_after = time.monotonic() - revoked_at
        revoked_answer(r)
        assert ended_after < ENDS_WITHIN_S, ended_after

        assert not other_poll.done() and not admin_poll.done()
        jobs = {await enqueue(c), await enqueue(c)}
        got = []
        for poll in (other_poll, admin_poll):
            r = await asyncio.wait_for(poll, WAIT_MS / 1000 + 5)
            assert r.status_code == 200, r.text
            got += [le["job"]["id"] for le in r.json()["leases"]]
        assert set(got) == jobs


async def test_a_running_worker_stops_soon_after_its_token_is_revoked(app: FastAPI) -> None:
    """`jobq worker` long-polls with wait_ms 10000 by default: it learns of the revocation
    from the claim it is waiting in, not from its next request up to 10 s later."""
    token_id, worker_headers = await worker_token(app)
    token = worker_headers["Authorization"].removeprefix("Bearer ")

    async def handle(job: Any) -> None:
        raise AssertionError("a revoked worker ran a job")

    worker = Worker(
        "http://jobq",
        queues=[QUEUE],
        handlers={"t": handle},
        token=token,
        wait_ms=WAIT_MS,
        transport=httpx.ASGITransport(app=app),
    )
    running = asyncio.create_task(worker.run_async())
    try:
        await long_polls_idle(app, QUEUE, 1)
        async with client_of(app) as c:
            r = await c.delete(f"/v1/tokens/{token_id}", headers=ADMIN)
            assert r.status_code == 200, r.text
        revoked_at = time.monotonic()
        with pytest.raises(Unauthorized):
            await asyncio.wait_for(running, WAIT_MS / 1000 + 10)
        assert time.monotonic() - revoked_at < ENDS_WITHIN_S
    finally:
        running.cancel()


async def test_local_mode_long_polls_are_unaffected(database_url: str) -> None:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app), client_of(app) as c:
        assert app.state.tokens.local_mode
        poll = asyncio.create_task(c.post("/v1/leases", json={"worker_id": "w", "queues": [QUEUE], "wait_ms": WAIT_MS}))
        await long_polls_idle(app, QUEUE, 1)
        r = await c.post("/v1/jobs", json={"type": "t", "queue": QUEUE})
        assert r.status_code == 201, r.text
        r = await asyncio.wait_for(poll, WAIT_MS / 1000 + 5)
        assert r.status_code == 200 and len(r.json()["leases"]) == 1, r.text


# --- Revoked elsewhere, not yet read here: the claim statement itself checks the token ------
#
# Another replica (or `jobq tokens revoke`) revokes a token in the database; this process's
# table of tokens learns of it at its next read, up to half a second later. Within that gap a
# claim must still hand nothing out. The tests stop the table's periodic read, so the gap
# lasts as long as they need: nothing but the claim's own statement can refuse the token.


def stop_token_reads() -> None:
    """Cancel the app's periodic read of the tokens (its task "jobq-tokens"): from now on
    this process knows only what it read before, as a replica that has not refreshed yet."""
    reads = [t for t in asyncio.all_tasks() if t.get_name() == "jobq-tokens"]
    assert len(reads) == 1, reads
    reads[0].cancel()


def revoke_in_database(database_url: str, token_id: str) -> None:
    """As another replica's DELETE /v1/tokens/{id} does: committed before this returns."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE tokens SET revoked_at = now() WHERE id = %s", (token_id,))


def still_live_here(app: FastAPI, headers: dict[str, str]) -> bool:
    return app.state.tokens.authenticate(headers["Authorization"].removeprefix("Bearer ")) is not None


async def job_of(c: httpx.AsyncClient, job_id: int) -> dict[str, Any]:
    r = await c.get(f"/v1/jobs/{job_id}", headers=ADMIN)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_a_long_poll_is_refused_by_its_claim_when_the_revocation_has_not_reached_this_replica(
        app: FastAPI, database_url: str) -> None:
    token_id, worker = await worker_token(app)
    _, other = await worker_token(app)
    stop_token_reads()
    async with client_of(app) as c:
        poll = asyncio.create_task(claim(c, worker))
        await long_polls_idle(app, QUEUE, 1)
        revoke_in_database(database_url, token_id)
        assert still_live_here(app, worker)  # this process has not read the revocation
        job_id = await enqueue(c)  # rings the waiting long-poll here, at once
        revoked_answer(await asyncio.wait_for(poll, WAIT_MS / 1000 + 5))

        job = await job_of(c, job_id)
        assert job["status"] == "pending" and job["attempt"] == 0, job
        # The claim told this process: the token is refused at the door from now on.
        assert not still_live_here(app, worker)
        revoked_answer(await claim(c, worker, wait_ms=0))
        # The job is left for a worker whose token is valid.
        r = await claim(c, other, wait_ms=0)
        assert r.status_code == 200, r.text
        assert [le["job"]["id"] for le in r.json()["leases"]] == [job_id]


@pytest.mark.parametrize("kind", ["plain", "aged", "capped", "several queues"])
async def test_a_claim_under_a_token_revoked_in_the_database_takes_nothing(
        app: FastAPI, database_url: str, kind: str) -> None:
    """Every statement that hands out jobs checks the token: one queue (JobClaim), one with
    aging (JobClaimAged), one with max_running (its own transaction), and several at once
    (JobClaimMany)."""
    queues = ["first", QUEUE] if kind == "several queues" else [QUEUE]
    token_id, worker = await worker_token(app)
    _, other = await worker_token(app)
    async with client_of(app) as c:
        if kind != "plain":
            settings = {"aged": {"aging_ms": 60_000}, "capped": {"max_running": 5},
                        "several queues": {}}[kind]
            for queue in queues:
                r = await c.patch(f"/v1/queues/{queue}", json=settings, headers=ADMIN)
                assert r.status_code == 200, r.text
        job_id = await enqueue(c)
        stop_token_reads()
        revoke_in_database(database_url, token_id)
        assert still_live_here(app, worker)

        body = {"worker_id": "w", "queues": queues, "limit": 10}
        revoked_answer(await c.post("/v1/leases", headers=worker, json=body))
        job = await job_of(c, job_id)
        assert job["status"] == "pending" and job["attempt"] == 0, job
        assert not still_live_here(app, worker)

        r = await c.post("/v1/leases", headers=other, json=body)
        assert r.status_code == 200, r.text
        assert [le["job"]["id"] for le in r.json()["leases"]] == [job_id]


async def test_the_admin_token_of_the_environment_claims_without_a_token_row(app: FastAPI) -> None:
    """JOBQ_ADMIN_TOKEN has no row in tokens (nothing revokes it): its claims are not
    refused for want of one."""
    async with client_of(app) as c:
        job_id = await enqueue(c)
        r = await claim(c, ADMIN, wait_ms=0)
        assert r.status_code == 200, r.text
        assert [le["job"]["id"] for le in r.json()["leases"]] == [job_id]



# --- Two real replicas: revoked through A while the long-poll waits on B ------------------

ROUNDS = 12
LONG_POLL_SETTLES_S = 0.3


@pytest.fixture
def replicas_with_tokens(database_url: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two `jobq serve` processes on one database, with the bootstrap admin token."""
    with two_replicas(database_url, {"JOBQ_ADMIN_TOKEN": ADMIN_TOKEN}) as pair:
        yield pair


async def new_worker_token(c: httpx.AsyncClient, via: LiveServer, known_to: LiveServer) -> tuple[str, dict[str, str]]:
    """A worker token made through ``via``, once ``known_to`` accepts it too."""
    r = await c.post(via.url + "/v1/tokens", json={"role": "worker"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    headers = bearer(r.json()["token"])

    async def accepted() -> bool:
        r = await c.post(known_to.url + "/v1/leases", headers=headers,
                         json={"worker_id": "probe", "queues": ["probe"], "wait_ms": 0})
        return r.status_code == 200

    await aeventually(accepted, what="the new token accepted by the other replica")
    return r.json()["id"], headers


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_long_poll_on_one_replica_gets_no_job_after_its_token_is_revoked_through_another(
        replicas_with_tokens: tuple[LiveServer, LiveServer]) -> None:
    """The race of issue 25: B's table of tokens reads the revocation up to half a second
    after A commits it, and the job enqueued through A reaches B's long-poll (NOTIFY) in
    milliseconds. B's claim must refuse the token by itself, every time: 401, the job left
    pending for a worker whose token is valid."""
    a, b = replicas_with_tokens
    async with httpx.AsyncClient(timeout=30) as c:
        _, other = await new_worker_token(c, a, b)
        for round_ in range(ROUNDS):
            token_id, worker = await new_worker_token(c, a, b)
            poll = asyncio.create_task(c.post(b.url + "/v1/leases", headers=worker, json={
                "worker_id": "revoked", "queues": [QUEUE], "wait_ms": WAIT_MS}))
            # Time for the long-poll to pass B's door and look once (milliseconds). Not
            # claim_looked_since: B's sessions go on to other statements (token reads, the
            # reaper), and on a socket connection it sees no ports. Whether the long-poll
            # waits or is still on its first look, its claim runs after the revocation
            # below, so the assertions hold either way.
            await asyncio.sleep(LONG_POLL_SETTLES_S)
            assert not poll.done(), (round_, (await poll).text)
            r = await c.delete(f"{a.url}/v1/tokens/{token_id}", headers=ADMIN)
            assert r.status_code == 200, r.text
            r = await c.post(a.url + "/v1/jobs", json={"type": "t", "queue": QUEUE}, headers=ADMIN)
            assert r.status_code == 201, r.text
            job_id = r.json()["id"]

            answer = await asyncio.wait_for(poll, WAIT_MS / 1000 + 5)
            assert answer.status_code == 401, (round_, answer.text)  # not 200 with the job
            revoked_answer(answer)
            r = await c.get(f"{a.url}/v1/jobs/{job_id}", headers=ADMIN)
            assert r.json()["status"] == "pending" and r.json()["attempt"] == 0, (round_, r.text)
            r = await c.post(b.url + "/v1/leases", headers=other,
                             json={"worker_id": "valid", "queues": [QUEUE], "wait_ms": 0})
            assert r.status_code == 200, r.text
            assert [le["job"]["id"] for le in r.json()["leases"]] == [job_id], (round_, r.text)


async def test_jobs_leased_before_the_revocation_committed_are_handed_out_and_no_more(
        app: FastAPI, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim over a capped queue and another runs one statement each. Revoked between them
    (committed after the first ran, before the second), the first one's job was leased under
    a live token: it is answered, not left to sit out its lease. The second leases nothing,
    and this process refuses the token from then on."""
    token_id, worker = await worker_token(app)
    real = leases._claim_queue

    async def then_revoked(*args: Any) -> Any:
        outcome = await real(*args)
        revoke_in_database(database_url, token_id)
        return outcome

    async with client_of(app) as c:
        r = await c.patch("/v1/queues/capped", json={"max_running": 5}, headers=ADMIN)
        assert r.status_code == 200, r.text
        first = await c.post("/v1/jobs", json={"type": "t", "queue": "capped"}, headers=ADMIN)
        second = await c.post("/v1/jobs", json={"type": "t", "queue": "after"}, headers=ADMIN)
        stop_token_reads()
        monkeypatch.setattr(leases, "_claim_queue", then_revoked)
        r = await c.post("/v1/leases", headers=worker,
                         json={"worker_id": "w", "queues": ["capped", "after"], "limit": 2})
        assert r.status_code == 200, r.text
        assert [le["job"]["id"] for le in r.json()["leases"]] == [first.json()["id"]]
        assert (await job_of(c, second.json()["id"]))["status"] == "pending"
        assert not still_live_here(app, worker)
