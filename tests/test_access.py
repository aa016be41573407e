"""Access control (issue 11), beyond the route matrix of test_access_rules.py: every item of
a batch and every queue of a claim is checked, no path answers without a token, local mode
and its end, revocation on every replica, the bootstrap admin token, and secrets that are
never shown or stored."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI, Request
from pydantic import ValidationError

from jobq.api.access import guarded
from jobq.api.app import create_app
from jobq.api.deps import known_query
from jobq.api.resolved import resolved_routes
from jobq.core import tokens
from jobq.domain.access import Principal, QueuePattern, Role
from jobq.store.db import Database
from jobq.store.queries import Q
from tests.conftest import ROOT, LiveServer, make_settings
from tests.helpers import history_made, problem
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(90)

IN, IN2, OUT = "in-q", "in-other", "out-q"
# The probes, and the dashboard's page (/ redirects there): its files hold no data.
PUBLIC = {"/healthz", "/readyz", "/", "/ui", "/favicon.ico"}  # the icon: no 401 in a browser's console
# The error pages the problem+json `type` points at, and the dashboard's files: public one
# segment deep, no further.
PUBLIC_PREFIXES = ("/problems/", "/ui/")


def is_public(path: str) -> bool:
    if path in PUBLIC:
        return True
    for prefix in PUBLIC_PREFIXES:
        rest = path.removeprefix(prefix)
        if rest != path and bool(rest) and "/" not in rest:
            return True
    return False
CHALLENGE = 'Bearer realm="jobq"'


# --- helpers ---------------------------------------------------------------------------------


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq",
                             timeout=30)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def token_for(app: FastAPI, role: Role, queues: str = "*") -> dict[str, str]:
    """A token's header, created on the database and read into the app's table."""
    _, token = await tokens.create(app.state.ctx.db, role, queues)
    await app.state.tokens.refresh()
    return bearer(token)


def rows(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def statuses(database_url: str) -> dict[str, list[str]]:
    by_queue: dict[str, list[str]] = {}
    for queue, status in rows(database_url, "SELECT queue, status FROM jobs_all ORDER BY id"):
        by_queue.setdefault(queue, []).append(status)
    return by_queue


def unauthorized(r: httpx.Response, invalid: bool = False) -> None:
    """401 problem+json with the Bearer challenge (a HEAD answer has the headers only)."""
    assert r.status_code == 401, (r.request.method, r.request.url, r.status_code, r.text[:200])
    challenge = r.headers.get("www-authenticate", "")
    assert challenge == (CHALLENGE + ', error="invalid_token"' if invalid else CHALLENGE), challenge
    if r.request.method == "HEAD":
        assert r.headers["content-type"].startswith("application/problem+json")
    else:
        problem(r, 401, "unauthorized")


@pytest.fixture
async def secured(database_url: str) -> AsyncIterator[FastAPI]:
    """An app out of local mode (a full admin token exists)."""
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        app.state.admin_headers = await token_for(app, Role.ADMIN)
        # statuses() reads jobs_history without yielding to the leader's event loop.
        await aeventually(lambda: history_made(database_url), what="the history partitions")
        yield app


async def setup_jobs(c: httpx.AsyncClient, admin: dict[str, str], queue: str, n: int = 1,
                     lease: bool = False) -> list[str]:
    """``n`` jobs in ``queue``: their ids, or with ``lease`` the ids of leases on them."""
    ids = []
    for _ in range(n):
        r = await c.post("/v1/jobs", json={"type": "t", "queue": queue}, headers=admin)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    if not lease:
        return ids
    r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [queue], "limit": n},
                     headers=admin)
    assert r.status_code == 200 and len(r.json()["leases"]) == n, r.text
    return [le["lease_id"] for le in r.json()["leases"]]


# --- every item of a batch, every queue of a claim --------------------------------------------


async def test_a_batch_with_one_out_of_scope_item_enqueues_nothing(
        secured: FastAPI, database_url: str) -> None:
    producer = await token_for(secured, Role.PRODUCER, "in-*")
    async with client_of(secured) as c:
        jobs = [{"type": "t", "queue": q} for q in (IN, IN2, OUT, IN)]
        r = await c.post("/v1/jobs/batch", json={"jobs": jobs}, headers=producer)
        body = problem(r, 403, "forbidden")
        assert "jobs[2].queue" in body["detail"] and OUT in body["detail"], body
        assert rows(database_url, "SELECT count(*) FROM jobs") == [(0,)]
        # the same batch, in scope, goes through
        r = await c.post("/v1/jobs/batch", json={"jobs": [j for j in jobs if j["queue"] != OUT]},
                         headers=producer)
        assert r.status_code == 201, r.text
        assert statuses(database_url) == {IN: ["pending", "pending"], IN2: ["pending"]}


async def test_a_claim_naming_one_out_of_scope_queue_leases_nothing(
        secured: FastAPI, database_url: str) -> None:
    worker = await token_for(secured, Role.WORKER, "in-*")
    async with client_of(secured) as c:
        for q in (IN, OUT, IN2):
            await setup_jobs(c, secured.state.admin_headers, q, 2)
        for queues in ([IN, OUT, IN2], [OUT], [IN2, OUT]):
            r = await c.post("/v1/leases", json={"worker_id": "w", "queues": queues, "limit": 10},
                             headers=worker)
            assert OUT in problem(r, 403, "forbidden")["detail"]
        assert all(s == "pending" for ss in statuses(database_url).values() for s in ss)
        r = await c.post("/v1/leases", json={"worker_id": "w", "queues": [IN, IN2], "limit": 10},
                         headers=worker)
        assert sorted(le["job"]["queue"] for le in r.json()["leases"]) == sorted([IN, IN, IN2, IN2])
        assert statuses(database_url)[OUT] == ["pending", "pending"]


async def test_a_batch_ack_acks_only_the_leases_of_its_queues(
        secured: FastAPI, database_url: str) -> None:
    worker = await token_for(secured, Role.WORKER, "in-*")
    admin = secured.state.admin_headers
    async with client_of(secured) as c:
        inside = await setup_jobs(c, admin, IN, 2, lease=True)
        outside = await setup_jobs(c, admin, OUT, 2, lease=True)
        mixed = [inside[0], outside[0], inside[1], outside[1]]
        r = await c.post("/v1/leases/ack", json={"acks": [{"lease_id": le} for le in mixed]},
                         headers=worker)
        assert r.status_code == 200, r.text
        assert [(x["lease_id"], x["ok"], x.get("code")) for x in r.json()["results"]] == [
            (inside[0], True, None), (outside[0], False, "not_found"),
            (inside[1], True, None), (outside[1], False, "not_found")]
        assert statuses(database_url) == {IN: ["completed"] * 2, OUT: ["running"] * 2}
        # A lease of another queue is answered as one that never existed, whichever way.
        for action, body in (("ack", {}), ("fail", {"error": "x"}), ("heartbeat", {})):
            r = await c.post(f"/v1/leases/{outside[0]}/{action}", json=body, headers=worker)
            problem(r, 404, "not_found")
        # and the admin of every queue still holds them
        r = await c.post("/v1/leases/ack", json={"acks": [{"lease_id": le} for le in outside]},
                         headers=admin)
        assert [x["ok"] for x in r.json()["results"]] == [True, True]


async def test_jobs_of_other_queues_are_not_listed_and_not_found(
        secured: FastAPI, database_url: str) -> None:
    producer = await token_for(secured, Role.PRODUCER, "in-*")
    admin = secured.state.admin_headers
    async with client_of(secured) as c:
        mine = await setup_jobs(c, admin, IN, 3) + await setup_jobs(c, admin, IN2, 2)
        theirs = await setup_jobs(c, admin, OUT, 3)
        seen, cursor = [], None
        while True:  # one job a page: every page is filtered, not just the first
            params: dict[str, Any] = {"limit": 1} | ({"cursor": cursor} if cursor else {})
            r = await c.get("/v1/jobs", params=params, headers=producer)
            assert r.status_code == 200, r.text
            seen += [j["id"] for j in r.json()["jobs"]]
            cursor = r.json()["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(mine)
        problem(await c.get("/v1/jobs", params={"queue": OUT}, headers=producer), 403, "forbidden")
        r = await c.get("/v1/jobs", params={"queue": IN2}, headers=producer)
        assert sorted(j["id"] for j in r.json()["jobs"]) == sorted(mine[3:])
        # A job of another queue reads exactly as a job that does not exist.
        missing = str(int(max(mine + theirs, key=int)) + 1000)
        out = problem(await c.get(f"/v1/jobs/{theirs[0]}", headers=producer), 404, "not_found")
        none = problem(await c.get(f"/v1/jobs/{missing}", headers=producer), 404, "not_found")
        assert out["detail"].replace(theirs[0], "ID") == none["detail"].replace(missing, "ID")
        assert (await c.get(f"/v1/jobs/{theirs[0]}", headers=admin)).status_code == 200


async def test_an_admin_of_some_queues_replays_purges_and_lists_only_those(
        secured: FastAPI, database_url: str) -> None:
    scoped = await token_for(secured, Role.ADMIN, "in-*")
    admin = secured.state.admin_headers
    async with client_of(secured) as c:
        for q in (IN, OUT):
            for lease in await setup_jobs(c, admin, q, 2, lease=True):
                r = await c.post(f"/v1/leases/{lease}/fail", json={"error": "x", "retry": False},
                                 headers=admin)
                assert r.json()["status"] == "dead"
        r = await c.post("/v1/dead/replay", json={}, headers=scoped)
        assert r.json() == {"replayed": 2}, r.text
        assert statuses(database_url) == {IN: ["pending"] * 2, OUT: ["dead"] * 2}
        r = await c.delete("/v1/dead", headers=scoped)
        assert r.json() == {"purged": 0}, r.text
        assert statuses(database_url)[OUT] == ["dead"] * 2
        problem(await c.delete("/v1/dead", params={"queue": OUT}, headers=scoped), 403, "forbidden")
        r = await c.get("/v1/queues", headers=scoped)
        assert [q["name"] for q in r.json()["queues"]] == [IN]
        problem(await c.get(f"/v1/queues/{OUT}", headers=scoped), 403, "forbidden")
        # a queue that does not exist yet is created by a PATCH: not one outside the pattern
        problem(await c.patch("/v1/queues/out-new", json={"paused": True}, headers=scoped),
                403, "forbidden")
        assert rows(database_url, "SELECT count(*) FROM queues WHERE name = 'out-new'") == [(0,)]
        out_job = (await setup_jobs(c, admin, OUT))[0]
        problem(await c.post(f"/v1/jobs/{out_job}/cancel", headers=scoped), 404, "not_found")
        assert statuses(database_url)[OUT][-1] == "pending"
        # and it may not mint itself a token for every queue, nor read the server's metrics
        problem(await c.post("/v1/tokens", json={"role": "admin"}, headers=scoped), 403, "forbidden")
        problem(await c.get("/metrics", headers=scoped), 403, "forbidden")


# --- no route answers without the check ---------------------------------------------------------


def _concrete(path: str) -> str:
    """A route's path with its parameters filled in."""
    out, depth = [], 0
    for ch in path:
        if ch == "{":
            depth += 1
            out.append("1")
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


UNKNOWN = ["/v1", "/v1/", "/v2/jobs", "/v1/nope", "/v1/jobs/1/nope", "/v1/jobs/", "/healthz/",
           "/healthz/x", "/readyz/", "/metrics/", "/v1/tokens/", "/admin", "/.env", "/docs/",
           "/openapi.json/", "/v1/leases//ack", "/HEALTHZ", "//healthz", "/v1/jobs%2F1",
           "/problems", "/problems/", "/problems/queue_full/", "/problems/queue_full/x",
           "//problems/queue_full", "/PROBLEMS/queue_full", "/ui/", "/ui/x/y", "/ui/app.js/", "/UI"]


async def test_no_path_answers_without_a_token_but_the_probes(
        secured: FastAPI, database_url: str) -> None:
    # Every route runs access.guarded or, if public, deps.known_query: the paths of the
    # requests that reached one.
    reached: list[str] = []

    async def spy(request: Request) -> None:
        reached.append(request.url.path)
        await known_query(request)

    async def guard_spy(request: Request) -> None:
        reached.append(request.url.path)
        await guarded(request)

    secured.dependency_overrides[known_query] = spy
    secured.dependency_overrides[guarded] = guard_spy
    paths = sorted({_concrete(rc.path) for rc in resolved_routes(secured.router.routes)})
    assert "/openapi.json" in paths and "/docs" in paths and "/v1/leases/1/ack" in paths
    checked = 0
    async with client_of(secured) as c:
        for path in paths + UNKNOWN:
            for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"):
                r = await c.request(method, path, json={"type": "t", "queue": "q"})
                # as sent: httpx sends "//healthz" as "/" (a network-path reference)
                if is_public(r.request.url.path):
                    # public: answered as without tokens (200, or 405 for another method;
                    # 404 for the page of an unknown error code; 307 from / to /ui)
                    assert r.status_code in (200, 307, 404, 405), (method, path, r.status_code)
                    assert "www-authenticate" not in r.headers
                    continue
                unauthorized(r)
                checked += 1
        # the probes, /problems/1, the dashboard's /, /ui and /ui/1 ("//healthz" too, sent as /)
        # and /favicon.ico
        assert checked >= len(paths + UNKNOWN) * 8 - 8 * 8
        # what sits behind the check does not run before it: not the body limit, not the
        # body's validation, not the database
        r = await c.post("/v1/jobs", content=b"x" * (2 * 1024 * 1024),
                         headers={"content-type": "application/json"})
        unauthorized(r)
        unauthorized(await c.post("/v1/jobs", content=b"{not json"))
        unauthorized(await c.post("/v1/jobs", json={"type": "t"},
                                  headers={"Authorization": "Bearer " + "x" * 20}), invalid=True)
    # not one reached a route, but for the probes
    assert reached and {p for p in reached if not is_public(p)} == set()
    assert rows(database_url, "SELECT count(*) FROM jobs") == [(0,)]
    async with client_of(secured) as c:
        for path in PUBLIC:  # / is a redirect to /ui
            assert (await c.get(path, follow_redirects=True)).status_code == 200
            assert (await c.get(path, headers=bearer("rubbish"), follow_redirects=True)).status_code == 200


@pytest.mark.parametrize("header", [
    "Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer ", "Bearer  ", "Bearertoken", "Token {t}",
    "Bearer {t} extra", "Bearer {t}x", "Bearer x{t}", "Bearer jq_000000000000_{secret}", "{t}",
])
async def test_a_malformed_or_unknown_token_is_401(secured: FastAPI, header: str) -> None:
    async with client_of(secured) as c:
        token = secured.state.admin_headers["Authorization"].removeprefix("Bearer ")
        value = header.format(t=token, secret=token.split("_", 2)[2])
        r = await c.get("/v1/queues", headers={"Authorization": value})
        unauthorized(r, invalid=True)
        # the scheme is case-insensitive, and the token itself works
        for scheme in ("Bearer", "bearer", "BEARER"):
            r = await c.get("/v1/queues", headers={"Authorization": f"{scheme} {token}"})
            assert r.status_code == 200, r.text


async def test_a_revoked_token_is_refused_at_once_by_the_replica_that_revoked_it(
        secured: FastAPI) -> None:
    worker = await token_for(secured, Role.WORKER)
    async with client_of(secured) as c:
        claim = {"worker_id": "w", "queues": ["q"]}
        assert (await c.post("/v1/leases", json=claim, headers=worker)).status_code == 200
        listed = (await c.get("/v1/tokens", headers=secured.state.admin_headers)).json()["tokens"]
        token_id = next(t["id"] for t in listed if t["role"] == "worker")
        r = await c.delete(f"/v1/tokens/{token_id}", headers=secured.state.admin_headers)
        assert r.status_code == 200 and r.json()["revoked_at"] is not None, r.text
        unauthorized(await c.post("/v1/leases", json=claim, headers=worker), invalid=True)
        # revoking again answers the same token, revoking nothing else
        again = await c.delete(f"/v1/tokens/{token_id}", headers=secured.state.admin_headers)
        assert again.status_code == 200 and again.json()["revoked_at"] == r.json()["revoked_at"]
        problem(await c.delete("/v1/tokens/000000000000", headers=secured.state.admin_headers),
                404, "not_found")
        assert (await c.get("/v1/queues", headers=secured.state.admin_headers)).status_code == 200


# --- local mode -----------------------------------------------------------------------------


async def answers_within(c: httpx.AsyncClient, method: str, path: str, status: int,
                         within_s: float, **kw: Any) -> float:
    """Seconds until ``path`` answers ``status``; fails after ``within_s``, since how soon a
    token change reaches a service is the behaviour these tests check."""
    start = time.monotonic()
    last: list[httpx.Response] = []

    async def answered() -> bool:
        last[:] = [await c.request(method, path, **kw)]
        return last[0].status_code == status

    await aeventually(answered, timeout_s=within_s, poll_s=0.02,
                      what=lambda: f"{method} {path} answering {status} (last: {last[0].status_code} "
                                   f"{last[0].text[:200]})")
    return time.monotonic() - start


async def test_local_mode_needs_no_token_until_the_first_is_created(database_url: str) -> None:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app), client_of(app) as c:
        assert app.state.tokens.local_mode
        r = await c.post("/v1/jobs", json={"type": "t"})
        assert r.status_code == 201, r.text
        r = await c.post("/v1/leases", json={"worker_id": "w", "queues": ["default"]})
        lease = r.json()["leases"][0]["lease_id"]
        assert (await c.post(f"/v1/leases/{lease}/ack", json={})).status_code == 200
        for path in ("/metrics", "/v1/tokens", "/v1/queues", "/v1/jobs", "/openapi.json"):
            assert (await c.get(path)).status_code == 200, path
        # any header is ignored: there is nothing to check it against
        assert (await c.get("/v1/queues", headers=bearer("whatever"))).status_code == 200

        # The first token, written on the database as `jobq tokens create` does, from
        # another process's connection: this app learns of it within its refresh period.
        token = await create_token_on(database_url, Role.PRODUCER)
        await answers_within(c, "GET", "/v1/jobs", 401, within_s=1.5)
        unauthorized(await c.post("/v1/jobs", json={"type": "t"}))
        assert (await c.get("/v1/jobs", headers=bearer(token))).status_code == 200
        problem(await c.get("/metrics", headers=bearer(token)), 403, "forbidden")
        await aeventually(lambda: history_made(database_url), what="the history partitions")
        assert rows(database_url, "SELECT count(*) FROM jobs_all") == [(1,)]  # the acked job


async def test_the_first_token_created_over_http_ends_local_mode_at_once(database_url: str) -> None:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app), client_of(app) as c:
        r = await c.post("/v1/tokens", json={"role": "admin", "name": "first"})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
        unauthorized(await c.get("/v1/tokens"))  # the very next request
        unauthorized(await c.post("/v1/jobs", json={"type": "t"}))
        r = await c.get("/v1/tokens", headers=bearer(token))
        assert [t["name"] for t in r.json()["tokens"]] == ["first"]


# --- revocation and the first token on every replica -----------------------------------------


@pytest.mark.timeout(120)
async def test_tokens_apply_on_every_replica_within_a_second(
        replicas: tuple[LiveServer, LiveServer]) -> None:
    a_srv, b_srv = replicas
    claim = {"worker_id": "w", "queues": ["q"]}
    async with httpx.AsyncClient(base_url=a_srv.url, timeout=10) as a, \
            httpx.AsyncClient(base_url=b_srv.url, timeout=10) as b:
        for c in (a, b):  # both in local mode
            assert (await c.post("/v1/leases", json=claim)).status_code == 200
        # the first token, made on replica a, ends local mode on b within a second
        r = await a.post("/v1/tokens", json={"role": "admin"})
        assert r.status_code == 201, r.text
        admin = bearer(r.json()["token"])
        unauthorized(await a.post("/v1/leases", json=claim))
        assert await answers_within(b, "POST", "/v1/leases", 401, within_s=1.0, json=claim) < 1.0

        r = await a.post("/v1/tokens", json={"role": "worker", "queues": "q"}, headers=admin)
        worker, worker_id = bearer(r.json()["token"]), r.json()["id"]
        await answers_within(b, "POST", "/v1/leases", 200, within_s=1.0, json=claim,
                             headers=worker)
        assert (await a.post("/v1/leases", json=claim, headers=worker)).status_code == 200

        # revoked on a: refused there at once, and on b within a second
        r = await a.delete(f"/v1/tokens/{worker_id}", headers=admin)
        assert r.status_code == 200, r.text
        revoked = time.monotonic()
        unauthorized(await a.post("/v1/leases", json=claim, headers=worker), invalid=True)
        seen: list[httpx.Response] = []

        async def refused_on_b() -> bool:
            seen[:] = [r := await b.post("/v1/leases", json=claim, headers=worker)]
            assert r.status_code in (200, 401), r.text
            return r.status_code == 401

        # The bound is the test: within a second of the revocation.
        await aeventually(refused_on_b, timeout_s=1.0, poll_s=0.02,
                          what="replica b refusing a token revoked on a")
        assert time.monotonic() - revoked < 1.0, "replica b still takes a token revoked on a"
        unauthorized(seen[0], invalid=True)
        # and stays refused
        for c in (a, b):
            unauthorized(await c.post("/v1/leases", json=claim, headers=worker), invalid=True)
            assert (await c.get("/v1/tokens", headers=admin)).status_code == 200


def test_serve_says_it_is_in_local_mode(live_server: LiveServer) -> None:
    log = Path(live_server.log.name).read_text()
    assert "local mode" in log and "127.0.0.1" in log, log


async def test_revoking_the_last_token_does_not_return_to_local_mode(database_url: str) -> None:
    """Local mode is for a database that never had a token: once one was created, revoking
    every token locks the service (a new one comes from `jobq tokens create` on the database);
    it must not open a service that may be bound to a public address by now to anyone."""
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app), client_of(app) as c:
        r = await c.post("/v1/tokens", json={"role": "admin"})
        admin, token_id = bearer(r.json()["token"]), r.json()["id"]
        assert (await c.delete(f"/v1/tokens/{token_id}", headers=admin)).status_code == 200
        await app.state.tokens.refresh()  # as the next periodic read would
        unauthorized(await c.get("/v1/queues"))
        unauthorized(await c.post("/v1/tokens", json={"role": "admin"}))
        assert not app.state.tokens.local_mode
    # nor when a replica starts on that database
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app), client_of(app) as c:
        unauthorized(await c.get("/v1/queues"))


async def create_token_on(database_url: str, role: Role, revoke: bool = False) -> str:
    """A token made on the database, as `jobq tokens create` does."""
    db = Database(database_url, pool_size=1, timeout_s=3, retry_after_s=1)
    await db.open(wait=True)
    try:
        info, token = await tokens.create(db, role, "*")
        if revoke:
            await tokens.revoke(db, info.id)
    finally:
        await db.close()
    return token


@pytest.mark.timeout(120)
def test_serve_binds_a_public_address_only_once_a_token_exists(database_url: str) -> None:
    env = {**os.environ, "JOBQ_DATABASE_URL": database_url}
    env.pop("JOBQ_ADMIN_TOKEN", None)
    refused = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert "refusing to bind 0.0.0.0" in refused.stderr
    # A token created on the database (here: and revoked since) is no local mode.
    asyncio.run(create_token_on(database_url, Role.ADMIN, revoke=True))
    server = LiveServer(database_url, env={"JOBQ_HOST": "0.0.0.0"})
    try:
        server.start()
        log = Path(server.log.name).read_text()
        assert "local mode" not in log and "refusing" not in log, log
        unauthorized(httpx.get(server.url + "/v1/queues", timeout=10))
    finally:
        server.stop()


# --- the bootstrap admin token, and secrets ----------------------------------------------------

ADMIN_TOKEN = "bootstrap-admin-token-0123456789"


async def test_the_admin_token_of_the_environment_is_an_admin_of_every_queue(
        database_url: str) -> None:
    app = create_app(make_settings(database_url, admin_token=ADMIN_TOKEN))
    async with app.router.lifespan_context(app), client_of(app) as c:
        assert not app.state.tokens.local_mode  # no token in the database, still locked
        unauthorized(await c.get("/metrics"))
        unauthorized(await c.get("/metrics", headers=bearer(ADMIN_TOKEN + "x")), invalid=True)
        unauthorized(await c.get("/metrics", headers=bearer(ADMIN_TOKEN[:-1])), invalid=True)
        admin = bearer(ADMIN_TOKEN)
        r = await c.get("/metrics", headers=admin)
        assert r.status_code == 200 and "jobq" in r.text
        assert (await c.get("/v1/tokens", headers=admin)).json() == {"tokens": []}
        r = await c.post("/v1/tokens", json={"role": "producer", "queues": "a.*"}, headers=admin)
        assert r.status_code == 201, r.text
        producer = bearer(r.json()["token"])
        assert (await c.post("/v1/jobs", json={"type": "t", "queue": "a.b"},
                             headers=producer)).status_code == 201
        assert (await c.post("/v1/jobs", json={"type": "t", "queue": "x"},
                             headers=admin)).status_code == 201
        # it is no database token: nothing to list, nothing to revoke
        assert [t["role"] for t in (await c.get("/v1/tokens", headers=admin)).json()["tokens"]] == [
            "producer"]


async def test_secrets_are_shown_once_and_stored_as_a_hash_only(database_url: str) -> None:
    app = create_app(make_settings(database_url, admin_token=ADMIN_TOKEN))
    async with app.router.lifespan_context(app), client_of(app) as c:
        admin = bearer(ADMIN_TOKEN)
        made = []
        for role, queues in (("producer", "a,b"), ("worker", "*"), ("admin", "t-*")):
            r = await c.post("/v1/tokens", json={"role": role, "queues": queues, "name": role},
                             headers=admin)
            assert r.status_code == 201, r.text
            assert r.headers["location"] == f"/v1/tokens/{r.json()['id']}"
            made.append(r.json())
        r = await c.get("/v1/tokens", headers=admin)
        listed = r.json()["tokens"]
        assert {t["id"] for t in listed} == {m["id"] for m in made}
        for t in listed:
            assert set(t) == {"id", "name", "role", "queues", "created_at", "revoked_at",
                                  "enqueue_rate"}, t
        for m in made:
            secret = m["token"].split("_", 2)[2]
            assert m["token"] not in r.text and secret not in r.text
            assert secret not in (await c.delete(f"/v1/tokens/{m['id']}", headers=admin)).text
        stored = rows(database_url, "SELECT t::text, hash FROM tokens t ORDER BY id")
        assert len(stored) == 3
        by_hash = {h: text for text, h in stored}
        for m in made:
            secret = m["token"].split("_", 2)[2]
            assert all(secret not in text and m["token"] not in text for text, _ in stored)
            assert hashlib.sha256(m["token"].encode()).hexdigest() in by_hash
        # a token's listing after its revocation: still there, revoked
        listed = (await c.get("/v1/tokens", headers=admin)).json()["tokens"]
        assert all(t["revoked_at"] is not None for t in listed)


@pytest.mark.parametrize("body", [
    {"role": "root"}, {"role": "admin", "queues": ""}, {"role": "admin", "queues": "a,,b"},
    {"role": "admin", "queues": "[z-a]"}, {"role": "worker", "queues": " , "},
    {"role": "admin", "extra": 1}, {},
])
async def test_a_bad_token_request_is_a_validation_error(database_url: str,
                                                        body: dict[str, Any]) -> None:
    app = create_app(make_settings(database_url, admin_token=ADMIN_TOKEN))
    async with app.router.lifespan_context(app), client_of(app) as c:
        r = await c.post("/v1/tokens", json=body, headers=bearer(ADMIN_TOKEN))
        problem(r, 422, "validation_error")
        assert rows(database_url, "SELECT count(*) FROM tokens") == [(0,)]


@pytest.mark.parametrize("value", [
    "short", "fifteen-chars-x", "has a space in the middle", "tab\there-0123456789",
    "ünïcode-not-ascii-0123", "jq_0123456789ab_" + "A" * 43,
])
def test_an_admin_token_no_client_could_present_is_refused_at_start(value: str) -> None:
    """Too short to be a secret, or never matched (a header cannot carry it; a database
    token's form is looked up in the database): refused when the service starts, and the
    refusal does not print it."""
    with pytest.raises(ValidationError) as info:
        make_settings("postgresql://x@127.0.0.1/y", admin_token=value)
    assert "JOBQ_ADMIN_TOKEN" in str(info.value) and value not in str(info.value)
    env = {**os.environ, "JOBQ_ADMIN_TOKEN": value, "JOBQ_DATABASE_URL": "postgresql://x@127.0.0.1:1/y"}
    done = subprocess.run([sys.executable, "-m", "jobq.cli", "serve", "--port", "0"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "JOBQ_ADMIN_TOKEN" in done.stderr, done.stderr
    assert value not in done.stderr + done.stdout


def test_an_empty_admin_token_is_none() -> None:
    assert make_settings("postgresql://x@127.0.0.1/y", admin_token="").admin_token is None


async def test_a_token_row_written_wrongly_by_hand_opens_nothing_and_stops_nothing(
        database_url: str) -> None:
    """A row whose pattern does not compile is skipped; the other tokens are still read, so
    a revocation still applies (an exception there would stop every later read)."""
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app), client_of(app) as c:
        worker = await token_for(app, Role.WORKER)
        odd = "jq_0123456789ab_" + "A" * 43
        with psycopg.connect(database_url) as conn:
            conn.execute("INSERT INTO tokens (id, role, queues, hash) VALUES "
                         "('0123456789ab', 'admin', '[z-a]', %s)",
                         (hashlib.sha256(odd.encode()).hexdigest(),))
        await app.state.tokens.refresh()
        unauthorized(await c.get("/v1/queues", headers=bearer(odd)), invalid=True)
        claim = {"worker_id": "w", "queues": ["q"]}
        assert (await c.post("/v1/leases", json=claim, headers=worker)).status_code == 200
        with psycopg.connect(database_url) as conn:
            conn.execute("UPDATE tokens SET revoked_at = now() WHERE id <> '0123456789ab'")
        await app.state.tokens.refresh()
        unauthorized(await c.post("/v1/leases", json=claim, headers=worker), invalid=True)


@pytest.mark.parametrize("change", ["create", "revoke"])
async def test_a_read_of_the_tokens_in_flight_does_not_undo_a_change_made_here(
        database_url: str, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """A token created here works here at once, and one revoked here stops at once, even
    when a periodic read that began before the change ends after it (its rows are older)."""
    app = create_app(make_settings(database_url, admin_token=ADMIN_TOKEN))
    async with app.router.lifespan_context(app), client_of(app) as c:
        admin, claim = bearer(ADMIN_TOKEN), {"worker_id": "w", "queues": ["q"]}
        worker: dict[str, str] = {}
        token_id = ""
        if change == "revoke":
            r = await c.post("/v1/tokens", json={"role": "worker"}, headers=admin)
            worker, token_id = bearer(r.json()["token"]), r.json()["id"]
        table = app.state.tokens
        read, fetch = asyncio.Event(), table.db.fetch
        slow: list[asyncio.Task[None]] = []
        # Whether the revoked token counted as live to a waiting long-poll (still_valid) at
        # the start of each read after the revocation began: the stale read must not put it
        # back in the gap before the next read.
        revoking, seen_live = False, []
        waiter = Principal(token_id or None, Role.WORKER, QueuePattern("*"))

        async def slow_fetch(sql: str, params: Any = None) -> Any:
            if sql == Q.TokensLive and revoking and asyncio.current_task() not in slow:
                seen_live.append(table.still_valid(waiter))
            rows = await fetch(sql, params)
            if sql == Q.TokensLive and asyncio.current_task() in slow:
                read.set()  # read before the change; applied after it
                await asyncio.sleep(0.3)  # a slow read, by design
            return rows

        monkeypatch.setattr(table.db, "fetch", slow_fetch)
        stale = asyncio.create_task(table.refresh())
        slow.append(stale)
        await read.wait()
        if change == "create":
            r = await c.post("/v1/tokens", json={"role": "worker"}, headers=admin)
            assert r.status_code == 201, r.text
            worker = bearer(r.json()["token"])
            want = 200
        else:
            revoking = True
            assert (await c.delete(f"/v1/tokens/{token_id}", headers=admin)).status_code == 200
            assert seen_live and not any(seen_live), seen_live
            want = 401
        assert (await c.post("/v1/leases", json=claim, headers=worker)).status_code == want
        await stale
        assert (await c.post("/v1/leases", json=claim, headers=worker)).status_code == want


async def test_a_websocket_without_a_valid_token_is_closed_before_it_is_accepted(secured: FastAPI) -> None:
    # No route speaks WebSocket today; the first one added must not be the way around the check.
    async def handshake(headers: list[tuple[bytes, bytes]]) -> list[dict[str, object]]:
        sent: list[dict[str, object]] = []
        messages = [{"type": "websocket.connect"}]

        async def receive() -> dict[str, object]:
            return messages.pop(0) if messages else {"type": "websocket.disconnect", "code": 1000}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {"type": "websocket", "path": "/v1/jobs", "raw_path": b"/v1/jobs", "root_path": "",
                 "query_string": b"", "headers": headers, "scheme": "ws", "server": ("t", 80),
                 "client": ("c", 1), "subprotocols": [], "asgi": {"version": "3.0"}, "app": secured}
        await secured(scope, receive, send)
        return sent

    for headers in ([], [(b"authorization", b"Bearer " + b"x" * 30)]):
        assert await handshake(headers) == [{"type": "websocket.close", "code": 1008}]
    # With the admin's token it gets past the check, to the router, which has no such route.
    admin = secured.state.admin_headers["Authorization"].encode()
    sent = await handshake([(b"authorization", admin)])
    assert sent and sent[0].get("code") != 1008
