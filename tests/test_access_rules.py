"""Every route × every caller × a queue in and out of the caller's scope (issue 11).

The routes are the app's own, as FastAPI resolved them, so a new route fails here until it
has a rule in jobq.api.access.RULES and a request builder below.

What each case expects follows from the route's rule and the issue's text: 401 without a
valid token, 403 for a role the rule does not allow, and for an allowed role success in
scope; out of scope 403 where the call names the queue, 404 where it names a job or lease
by id, and a listing that leaves the queue out. A refused call changes nothing in the
database, and one refused for want of a token never reaches a route.
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from jobq.api import access
from jobq.api.app import create_app
from jobq.api.resolved import original_route, resolved_routes
from jobq.core import tokens
from jobq.domain.access import Role
from jobq.settings import Settings
from tests.conftest import make_settings
from tests.helpers import history_made, problem
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(120)

IN, OUT = "in-q", "out-q"
SCOPE = "in-*"
# Every caller: no header, a well-formed token nobody issued, and tokens of each role; the
# scoped ones are for SCOPE only.
CALLERS: dict[str, tuple[Role, str] | None] = {
    "none": None,
    "bad": None,
    "producer": (Role.PRODUCER, SCOPE),
    "worker": (Role.WORKER, SCOPE),
    "admin": (Role.ADMIN, "*"),
    "admin_scoped": (Role.ADMIN, SCOPE),
}
BAD_TOKEN = "jq_0123456789ab_" + "A" * 43


def _app_routes() -> list[Any]:
    # Building the app connects to nothing (the pool opens in the lifespan).
    app = create_app(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))
    return resolved_routes(app.router.routes)


ROUTES = _app_routes()
ROUTE_NAMES = [rc.name for rc in ROUTES]


@dataclass
class Call:
    """One request to a route. ``kind`` says how the route treats a queue outside the
    caller's scope: ``names`` 403, ``by_id`` 404, ``listing`` leaves it out of the answer,
    ``batch_by_id`` answers that item not_found, ``global`` has no queue (its rule decides)."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] | None = None
    kind: str = "names"
    listed: Callable[[Any], list[str]] | None = None  # listing: the queues of the answer
    check: Callable[[httpx.Response], None] | None = None  # more about a success


class World:
    """An app with one token per caller, and a full admin for setting the scene."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient, database_url: str) -> None:
        self.app = app
        self.client = client
        self.database_url = database_url
        self.headers: dict[str, dict[str, str]] = {"none": {},
                                                   "bad": {"Authorization": f"Bearer {BAD_TOKEN}"}}
        self.n = itertools.count()

    async def add_tokens(self) -> None:
        db = self.app.state.ctx.db
        for name, spec in {**CALLERS, "setup": (Role.ADMIN, "*")}.items():
            if spec is not None:
                _, token = await tokens.create(db, spec[0], spec[1], name=name)
                self.headers[name] = {"Authorization": f"Bearer {token}"}
        await self.app.state.tokens.refresh()

    async def setup(self, method: str, path: str, **kw: Any) -> Any:
        r = await self.client.request(method, path, headers=self.headers["setup"], **kw)
        assert r.status_code in (200, 201), (method, path, r.text)
        return r.json()

    def unique(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self.n)}"

    async def job(self, queue: str, type_: str | None = None) -> dict[str, Any]:
        return dict(await self.setup("POST", "/v1/jobs",
                                     json={"queue": queue, "type": type_ or self.unique()}))

    async def lease(self, queue: str) -> str:
        job = await self.job(queue)
        body = await self.setup("POST", "/v1/leases", json={
            "worker_id": "setup", "queues": [queue], "types": [job["type"]]})
        assert [le["job"]["id"] for le in body["leases"]] == [job["id"]]
        return str(body["leases"][0]["lease_id"])

    async def dead(self, queue: str) -> None:
        lease = await self.lease(queue)
        await self.setup("POST", f"/v1/leases/{lease}/fail", json={"error": "x", "retry": False})

    def snapshot(self) -> list[list[str]]:
        """Everything a call could change: jobs, queues and tokens, as text."""
        with psycopg.connect(self.database_url) as conn:
            return [[row[0] for row in conn.execute(sql).fetchall()] for sql in (
                "SELECT j::text FROM jobs_all j ORDER BY id",
                "SELECT k::text FROM job_keys k ORDER BY queue, idempotency_key",
                "SELECT q::text FROM queues q ORDER BY name",
                "SELECT t::text FROM tokens t ORDER BY id",
                "SELECT s::text FROM schedules s ORDER BY name",
                "SELECT s::text FROM topic_subscriptions s ORDER BY topic, queue",
                "SELECT w::text FROM workers w ORDER BY worker_id",
            )]


Builder = Callable[[World, str], Awaitable[Call]]


def _leases_one(r: httpx.Response) -> None:
    assert len(r.json()["leases"]) == 1, r.text


def _ack_many_ok(r: httpx.Response) -> None:
    assert [x["ok"] for x in r.json()["results"]] == [True], r.text


async def _static(path: str, kind: str = "global") -> Call:
    return Call("GET", path, kind=kind)


async def _list_jobs(w: World, q: str) -> Call:
    await w.job(q)
    return Call("GET", "/v1/jobs", params={"limit": 1000}, kind="listing",
                listed=lambda b: [j["queue"] for j in b["jobs"]])


async def _get_job(w: World, q: str) -> Call:
    return Call("GET", f"/v1/jobs/{(await w.job(q))['id']}", kind="by_id")


async def _cancel_job(w: World, q: str) -> Call:
    return Call("POST", f"/v1/jobs/{(await w.job(q))['id']}/cancel", kind="by_id")


async def _retry_job(w: World, q: str) -> Call:
    job = await w.job(q)
    await w.setup("POST", f"/v1/jobs/{job['id']}/cancel")
    return Call("POST", f"/v1/jobs/{job['id']}/retry", kind="by_id")


async def _delete_job(w: World, q: str) -> Call:
    return Call("DELETE", f"/v1/jobs/{(await w.job(q))['id']}", kind="by_id")


async def _beat_worker(w: World, q: str) -> Call:
    # the queues a worker says it serves: out of scope is a 403, as for a claim
    return Call("POST", f"/v1/workers/{w.unique('w')}/beat", json={"queues": [q], "in_flight": 0})


async def _claim(w: World, q: str) -> Call:
    job = await w.job(q)
    return Call("POST", "/v1/leases", json={"worker_id": "w", "queues": [q], "types": [job["type"]]},
                check=_leases_one)


async def _ack_many(w: World, q: str) -> Call:
    return Call("POST", "/v1/leases/ack", json={"acks": [{"lease_id": await w.lease(q)}]},
                kind="batch_by_id", check=_ack_many_ok)


async def _release_many(w: World, q: str) -> Call:
    return Call("POST", "/v1/leases/release", json={"releases": [{"lease_id": await w.lease(q)}]},
                kind="batch_by_id", check=_ack_many_ok)


def _on_lease(action: str, body: Any) -> Builder:
    async def build(w: World, q: str) -> Call:
        return Call("POST", f"/v1/leases/{await w.lease(q)}/{action}", json=body, kind="by_id")
    return build


async def _list_queues(w: World, q: str) -> Call:
    await w.job(q)
    return Call("GET", "/v1/queues", kind="listing", listed=lambda b: [x["name"] for x in b["queues"]])


async def _get_queue(w: World, q: str) -> Call:
    await w.job(q)
    return Call("GET", f"/v1/queues/{q}")


async def _patch_queue(w: World, q: str) -> Call:
    return Call("PATCH", f"/v1/queues/{q}", json={"max_attempts": 7})


async def _delete_queue(w: World, q: str) -> Call:
    await w.setup("PATCH", f"/v1/queues/{q}", json={})  # (again: an earlier case deleted it)
    return Call("DELETE", f"/v1/queues/{q}")


async def _replay_dead(w: World, q: str) -> Call:
    await w.dead(q)
    return Call("POST", "/v1/dead/replay", json={"queue": q})


async def _purge_dead(w: World, q: str) -> Call:
    await w.dead(q)
    return Call("DELETE", "/v1/dead", params={"queue": q})


async def _purge_dead_job(w: World, q: str) -> Call:
    lease = await w.lease(q)
    job = await w.setup("POST", f"/v1/leases/{lease}/fail", json={"error": "x", "retry": False})
    return Call("DELETE", f"/v1/dead/{job['id']}", kind="by_id")


async def _create_token(w: World, q: str) -> Call:
    return Call("POST", "/v1/tokens", json={"role": "producer", "queues": q}, kind="global")


async def _revoke_token(w: World, q: str) -> Call:
    info, _ = await tokens.create(w.app.state.ctx.db, Role.WORKER, q)
    return Call("DELETE", f"/v1/tokens/{info.id}", kind="global")


async def _patch_token(w: World, q: str) -> Call:
    info, _ = await tokens.create(w.app.state.ctx.db, Role.PRODUCER, q)
    return Call("PATCH", f"/v1/tokens/{info.id}",
                json={"enqueue_rate": {"jobs": 5, "per_ms": 1000}}, kind="global")


_SCHEDULE = {"cron": "0 2 * * *", "job": {"type": "t"}}


async def _schedule(w: World, q: str, method: str, body: Any = None) -> Call:
    name = w.unique("s")
    await w.setup("PUT", f"/v1/schedules/{name}", json={**_SCHEDULE, "job": {"type": "t", "queue": q}})
    return Call(method, f"/v1/schedules/{name}", json=body, kind="global")


async def _topic(w: World, q: str, method: str, path: str = "", body: Any = None,
                 kind: str = "global") -> Call:
    topic = w.unique("topic")
    await w.setup("PUT", f"/v1/topics/{topic}/subscriptions/{q}")
    return Call(method, f"/v1/topics/{topic}{path.format(q=q)}", json=body, kind=kind)


# One builder per route name. A route missing here fails test_every_route_has_a_builder_and_a_rule
# and its own matrix case.
BUILDERS: dict[str, Builder] = {
    "openapi": lambda w, q: _static("/openapi.json"),
    "swagger_ui_html": lambda w, q: _static("/docs"),
    "swagger_ui_redirect": lambda w, q: _static("/docs/oauth2-redirect"),
    "redoc_html": lambda w, q: _static("/redoc"),
    "healthz": lambda w, q: _static("/healthz"),
    "readyz": lambda w, q: _static("/readyz"),
    "problem_page": lambda w, q: _static("/problems/queue_full"),
    "create_job": lambda w, q: _call(Call("POST", "/v1/jobs", json={"type": "t", "queue": q})),
    "create_jobs": lambda w, q: _call(Call("POST", "/v1/jobs/batch", json={
        "jobs": [{"type": "a", "queue": q}, {"type": "b", "queue": q}]})),
    "list_jobs": _list_jobs,
    "get_job": _get_job,
    "cancel_job": _cancel_job,
    "retry_job": _retry_job,
    "delete_job": _delete_job,
    "claim": _claim,
    "ack_many": _ack_many,
    "heartbeat": _on_lease("heartbeat", {"extend_ms": 60_000}),
    "ack": _on_lease("ack", {"result": {"ok": 1}}),
    "fail": _on_lease("fail", {"error": "boom"}),
    "release": _on_lease("release", {"delay_ms": 0}),
    "release_many": _release_many,
    "list_queues": _list_queues,
    "get_queue": _get_queue,
    "patch_queue": _patch_queue,
    "delete_queue": _delete_queue,
    "replay_dead": _replay_dead,
    "purge_dead": _purge_dead,
    "list_schedules": lambda w, q: _static("/v1/schedules"),
    "get_schedule": lambda w, q: _schedule(w, q, "GET"),
    "put_schedule": lambda w, q: _call(Call("PUT", f"/v1/schedules/{w.unique('s')}", json={
        **_SCHEDULE, "job": {"type": "t", "queue": q}}, kind="global")),
    "patch_schedule": lambda w, q: _schedule(w, q, "PATCH", {"enabled": False}),
    "delete_schedule": lambda w, q: _schedule(w, q, "DELETE"),
    "list_topics": lambda w, q: _static("/v1/topics"),
    "get_topic": lambda w, q: _topic(w, q, "GET"),
    "subscribe_queue": lambda w, q: _call(Call("PUT", f"/v1/topics/{w.unique('topic')}/subscriptions/{q}",
                                               json={"type": "t"}, kind="global")),
    "unsubscribe_queue": lambda w, q: _topic(w, q, "DELETE", "/subscriptions/{q}"),
    # a publish names the topic's queues: out of scope is a 403, as for an enqueue
    "publish_topic": lambda w, q: _topic(w, q, "POST", "/publish", {"type": "t"}, kind="names"),
    "get_metrics": lambda w, q: _static("/metrics"),
    "create_token": _create_token,
    "list_tokens": lambda w, q: _static("/v1/tokens"),
    "revoke_token": _revoke_token,
    "patch_token": _patch_token,
    "purge_dead_job": _purge_dead_job,
    "list_workers": lambda w, q: _static("/v1/workers"),
    "beat_worker": _beat_worker,
    "get_throughput": lambda w, q: _static("/v1/throughput"),
    "ui_root": lambda w, q: _static("/"),
    "ui_index": lambda w, q: _static("/ui"),
    "ui_file": lambda w, q: _static("/ui/app.js"),
    "ui_favicon": lambda w, q: _static("/favicon.ico"),
}


async def _call(c: Call) -> Call:
    return c


def test_every_route_has_a_builder_and_a_rule() -> None:
    """The guard for new routes: the app's route list is the source, not this file's."""
    assert len(ROUTE_NAMES) == len(set(ROUTE_NAMES)), ROUTE_NAMES
    assert [n for n in ROUTE_NAMES if n not in BUILDERS] == []
    api = [rc.name for rc in ROUTES if isinstance(original_route(rc), APIRoute)]
    assert [n for n in api if n not in access.RULES] == []
    # and no rule or builder for a route that is gone
    assert sorted(set(access.RULES) - set(api)) == []
    assert sorted(set(BUILDERS) - set(ROUTE_NAMES)) == []


def test_rules_say_what_the_issue_says() -> None:
    """Written out from the issue, not from RULES: producer enqueues and reads jobs of its
    queues; worker claims, heartbeats, acks and fails; admin everything, with /metrics and
    token management for an admin of every queue only."""
    producer = {"create_job", "create_jobs", "list_jobs", "get_job", "publish_topic"}
    worker = {"claim", "heartbeat", "ack", "ack_many", "fail",
              "release", "release_many",  # issue 26: a stop gives jobs back
              "beat_worker"}  # issue 26: a worker process reports itself
    all_queues = {"get_metrics", "create_token", "list_tokens", "revoke_token", "patch_token",
                  # schedules: an admin's (issue 13), of every queue (the names are one namespace)
                  "list_schedules", "get_schedule", "put_schedule", "patch_schedule", "delete_schedule",
                  # topics (issue 17): one namespace too; publishing is a producer's
                  "list_topics", "get_topic", "subscribe_queue", "unsubscribe_queue",
                  # the dashboard's server-wide reads (issue 16), as /metrics
                  "list_workers", "get_throughput"}
    public = {"healthz", "readyz", "problem_page",
              # the dashboard's static files: no data in them (issue 16)
              "ui_root", "ui_index", "ui_file", "ui_favicon"}
    for name, rule in access.RULES.items():
        want_roles = ({Role.PRODUCER} if name in producer else set()) | (
            {Role.WORKER} if name in worker else set())
        assert set(rule.roles) == want_roles, name
        assert rule.all_queues == (name in all_queues), name
        assert rule.public == (name in public), name


def expected(name: str, caller: str, queue: str, kind: str) -> str:
    """The outcome the contract wants: "401", "403", "404", "ok", or for a scoped caller's
    out-of-scope queue on a listing or batch ack, "ok-without"."""
    rule = access.RULES.get(name)
    if rule is not None and rule.public:
        return "ok"
    spec = CALLERS[caller]
    if spec is None:
        return "401"
    if rule is None:  # the OpenAPI document and docs pages: any valid token
        return "ok"
    role, pattern = spec
    if role is not Role.ADMIN and role not in rule.roles:
        return "403"
    if rule.all_queues and pattern != "*":
        return "403"
    if kind == "global" or fnmatch.fnmatchcase(queue, pattern):
        return "ok"
    return {"names": "403", "by_id": "404", "listing": "ok-without",
            "batch_by_id": "ok-without"}[kind]


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[World]:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://jobq", timeout=30) as client:
            w = World(app, client, database_url)
            await w.add_tokens()
            # The leader's first round makes the finished jobs' partitions (30 days of the
            # default dead retention, and one more), each attached under a brief lock that
            # reads of jobs_history wait for; snapshot() reads it without yielding to this
            # event loop, so it must not meet that lock: wait for the round's end.
            await aeventually(lambda: history_made(database_url), what="the history partitions")
            yield w


@pytest.mark.parametrize("name", ROUTE_NAMES)
async def test_route_by_caller_by_scope(world: World, name: str) -> None:
    assert name in BUILDERS, f"route {name} has no request builder in {__name__}.BUILDERS"
    seen = []
    for caller, queue in itertools.product(CALLERS, (IN, OUT)):
        call = await BUILDERS[name](world, queue)
        want = expected(name, caller, queue, call.kind)
        before = world.snapshot()
        r = await world.client.request(call.method, call.path, json=call.json, params=call.params,
                                       headers=world.headers[caller])
        case = (name, caller, queue, want, r.status_code, r.text[:300])
        seen.append((caller, queue, r.status_code))
        if want == "401":
            body = problem(r, 401, "unauthorized")
            challenge = r.headers.get("www-authenticate", "")
            assert challenge.startswith('Bearer realm="jobq"'), case
            if caller == "bad":
                assert 'error="invalid_token"' in challenge, case
            assert "detail" in body
        elif want in ("403", "404"):
            problem(r, int(want), "forbidden" if want == "403" else "not_found")
        else:
            # / sends a browser to the dashboard: the one answer that is a redirect
            redirect = name == "ui_root" and r.status_code == 307 and r.headers["location"] == "/ui"
            assert 200 <= r.status_code < 300 or redirect, case
            if call.kind == "listing":
                listed = call.listed(r.json()) if call.listed else []
                spec = CALLERS[caller]
                assert spec is not None
                assert all(fnmatch.fnmatchcase(q, spec[1]) for q in listed), case
                assert (queue in listed) == (want == "ok"), case
            elif call.kind == "batch_by_id" and want == "ok-without":
                assert [(x["ok"], x.get("code")) for x in r.json()["results"]] == [
                    (False, "not_found")], case
            elif call.check is not None:
                call.check(r)
        if want in ("401", "403", "404", "ok-without"):
            # Refused: nothing written, not a job, a lease, a queue setting or a token.
            assert world.snapshot() == before, case
    assert len(seen) == len(CALLERS) * 2
