"""Fan-out topics over HTTP (issue 17): subscriptions, and a publish that enqueues one job per
subscribed queue in one transaction, refused whole by a full queue or a token that misses
one of the queues; idempotent re-publish; validation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from jobq.api.schemas import JobCreate, TopicPublish
from jobq.core import enqueue, tokens
from jobq.domain.access import Role
from tests.helpers import claim, patch_queue, problem, retry_after, total, validation
from tests.waiting import aeventually

QUEUES = ("billing", "emails", "search")


async def subscribe(c: httpx.AsyncClient, topic: str, queue: str, **body: Any) -> httpx.Response:
    r = await c.put(f"/v1/topics/{topic}/subscriptions/{queue}", json=body or None)
    assert r.status_code in (200, 201), r.text
    return r


async def three(c: httpx.AsyncClient, topic: str = "orders.placed") -> None:
    await subscribe(c, topic, "billing", type="invoice.create")
    await subscribe(c, topic, "emails")
    await subscribe(c, topic, "search", type="index.order")


async def totals(c: httpx.AsyncClient) -> list[int]:
    return [await total(c, q) for q in QUEUES]


def test_publish_body_is_a_job_body_without_its_queue() -> None:
    # The two bodies are kept apart (the queue is not a publish's to choose); this holds
    # them to the same fields, so a new job option cannot be forgotten for topics.
    def props(model: Any) -> dict[str, Any]:
        schema = model.model_json_schema()["properties"]
        return {
            name: {k: v for k, v in prop.items() if k not in ("description", "examples")}
            for name, prop in schema.items()
        }

    job = props(JobCreate)
    del job["queue"]
    assert props(TopicPublish) == job


async def test_publish_enqueues_one_job_per_queue_each_claimable_with_its_type(client: httpx.AsyncClient) -> None:
    await three(client)
    r = await client.post(
        "/v1/topics/orders.placed/publish", json={"type": "order.placed", "payload": {"order_id": 7}, "priority": 3}
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["topic"] == "orders.placed"
    assert [(j["queue"], j["type"], j["status"]) for j in body["jobs"]] == [
        ("billing", "invoice.create", "pending"),
        ("emails", "order.placed", "pending"),
        ("search", "index.order", "pending"),
    ]
    assert all(j["payload"] == {"order_id": 7} and j["priority"] == 3 for j in body["jobs"])
    ids = {j["queue"]: j["id"] for j in body["jobs"]}
    for queue in QUEUES:
        (lease,) = await claim(client, queue)
        assert lease["job"]["id"] == ids[queue]
    # Each job has its own queue's retries: failing one leaves the others alone.
    r = await client.get(f"/v1/jobs/{ids['emails']}")
    assert r.json()["status"] == "running"


async def test_each_job_has_its_own_retries_and_dead_letter(client: httpx.AsyncClient) -> None:
    await three(client)
    await patch_queue(client, "billing", max_attempts=1)
    r = await client.post("/v1/topics/orders.placed/publish", json={"type": "t"})
    by_queue = {j["queue"]: j for j in r.json()["jobs"]}
    assert by_queue["billing"]["max_attempts"] == 1 and by_queue["emails"]["max_attempts"] == 25
    (lease,) = await claim(client, "billing")
    r = await client.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "boom"})
    assert r.json()["status"] == "dead"
    (other,) = await claim(client, "emails")
    assert other["job"]["status"] == "running"


async def test_one_full_queue_refuses_the_whole_publish_with_429(client: httpx.AsyncClient) -> None:
    await three(client)
    await patch_queue(client, "emails", max_depth=1)
    r = await client.post("/v1/jobs", json={"type": "t", "queue": "emails"})
    assert r.status_code == 201
    before = await totals(client)
    r = await client.post("/v1/topics/orders.placed/publish", json={"type": "order.placed"})
    body = problem(r, 429, "queue_full")
    assert retry_after(r) >= 1
    assert "emails" in body["detail"]
    assert await totals(client) == before == [0, 1, 0]
    # room again: the same publish goes through, to all three
    await patch_queue(client, "emails", max_depth=2)
    r = await client.post("/v1/topics/orders.placed/publish", json={"type": "order.placed"})
    assert r.status_code == 201
    assert await totals(client) == [1, 2, 1]


async def test_republish_with_the_same_key_returns_the_same_jobs(client: httpx.AsyncClient) -> None:
    await three(client)
    body = {"type": "order.placed", "payload": {"order_id": 7}, "idempotency_key": "order-7"}
    first = await client.post("/v1/topics/orders.placed/publish", json=body)
    assert first.status_code == 201
    assert {j["idempotency_key"] for j in first.json()["jobs"]} == {"topic:orders.placed/order-7"}
    again = await client.post("/v1/topics/orders.placed/publish", json=body)
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert await totals(client) == [1, 1, 1]
    # another payload under the same key is a conflict, and changes nothing
    r = await client.post("/v1/topics/orders.placed/publish", json={**body, "payload": {"order_id": 8}})
    problem(r, 409, "idempotency_conflict")
    assert await totals(client) == [1, 1, 1]
    # a queue subscribed since gets its job on the next publish of the key: nothing else does
    await subscribe(client, "orders.placed", "audit")
    r = await client.post("/v1/topics/orders.placed/publish", json=body)
    assert r.status_code == 201
    jobs = r.json()["jobs"]
    assert [j["queue"] for j in jobs] == ["audit", *QUEUES]
    assert jobs[1:] == first.json()["jobs"]
    # the key of a publish does not collide with the same key used directly in a queue
    r = await client.post("/v1/jobs", json={"type": "t", "queue": "emails", "idempotency_key": "order-7"})
    assert r.status_code == 201


async def test_keys_of_two_topics_never_meet_in_a_queue(client: httpx.AsyncClient) -> None:
    # "a" with key "b:c" and "a:b" with key "c" are two publishes, whatever the separator
    await subscribe(client, "a", "q")
    await subscribe(client, "a:b", "q")
    one = await client.post("/v1/topics/a/publish", json={"type": "t", "idempotency_key": "b:c"})
    two = await client.post("/v1/topics/a:b/publish", json={"type": "t", "idempotency_key": "c"})
    assert one.status_code == two.status_code == 201, two.text
    assert one.json()["jobs"][0]["id"] != two.json()["jobs"][0]["id"]


async def test_a_producer_cannot_take_a_publish_or_schedule_key_first(client: httpx.AsyncClient) -> None:
    # A producer of one subscribed queue seeding the key a publish will use: the publish
    # would then be a 409 for every queue (another type), or be answered with that job.
    await subscribe(client, "o", "billing")
    await subscribe(client, "o", "emails")
    seeded = {"type": "evil", "queue": "emails", "idempotency_key": "topic:o/order-1"}
    errors = validation(await client.post("/v1/jobs", json=seeded), "body", "idempotency_key")
    assert any("reserved" in e["msg"] for e in errors), errors
    batch = {"jobs": [{"type": "fine", "queue": "emails"}, seeded]}
    validation(await client.post("/v1/jobs/batch", json=batch), "body", "jobs", 1, "idempotency_key")
    fire = {"type": "evil", "queue": "reports", "idempotency_key": "schedule:nightly:2030-01-01T02:00:00Z"}
    validation(await client.post("/v1/jobs", json=fire), "body", "idempotency_key")
    validation(await client.post("/v1/jobs/batch", json={"jobs": [fire]}), "body", "jobs", 0, "idempotency_key")
    assert await totals(client) == [0, 0, 0]
    # the publish owns its keys
    r = await client.post("/v1/topics/o/publish", json={"type": "order.placed", "idempotency_key": "order-1"})
    assert r.status_code == 201, r.text
    assert [(j["queue"], j["type"]) for j in r.json()["jobs"]] == [
        ("billing", "order.placed"),
        ("emails", "order.placed"),
    ]
    # only the prefixes are reserved: a key holding them further on is a producer's own
    r = await client.post("/v1/jobs", json={"type": "t", "queue": "emails", "idempotency_key": "my-topic:o/order-1"})
    assert r.status_code == 201, r.text


async def test_republish_after_a_type_override_changed_returns_the_same_jobs(client: httpx.AsyncClient) -> None:
    await three(client)
    body = {"type": "order.placed", "payload": {"order_id": 7}, "idempotency_key": "order-7"}
    first = await client.post("/v1/topics/orders.placed/publish", json=body)
    assert first.status_code == 201
    # an admin retypes one queue's jobs and drops another's override meanwhile
    await subscribe(client, "orders.placed", "billing", type="invoice.create.v2")
    await subscribe(client, "orders.placed", "search")
    again = await client.post("/v1/topics/orders.placed/publish", json=body)
    assert again.status_code == 200, again.text
    assert again.json() == first.json()  # the jobs as published, of the types of then
    assert await totals(client) == [1, 1, 1]
    # the payload is still compared
    r = await client.post("/v1/topics/orders.placed/publish", json={**body, "payload": {"order_id": 8}})
    assert "payload" in problem(r, 409, "idempotency_conflict")["detail"]
    # POST /v1/jobs keeps its own rule: another type under a key is a conflict there
    r = await client.post("/v1/jobs", json={"type": "a", "queue": "emails", "idempotency_key": "k"})
    assert r.status_code == 201
    problem(
        await client.post("/v1/jobs", json={"type": "b", "queue": "emails", "idempotency_key": "k"}),
        409,
        "idempotency_conflict",
    )


async def test_republish_makes_a_new_job_where_the_first_was_deleted(client: httpx.AsyncClient) -> None:
    # A key lives as long as its job: once retention (here: a purge of the dead job) has
    # deleted one queue's job, publishing the key again enqueues a new one there only.
    await three(client)
    await patch_queue(client, "billing", max_attempts=1)
    body = {"type": "order.placed", "payload": {"order_id": 7}, "idempotency_key": "order-7"}
    first = (await client.post("/v1/topics/orders.placed/publish", json=body)).json()["jobs"]
    (lease,) = await claim(client, "billing")
    r = await client.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "boom"})
    assert r.json()["status"] == "dead"
    r = await client.delete(f"/v1/dead/{first[0]['id']}")
    assert r.status_code == 204, r.text
    r = await client.post("/v1/topics/orders.placed/publish", json=body)
    assert r.status_code == 201, r.text
    again = r.json()["jobs"]
    assert again[0]["queue"] == "billing" and again[0]["id"] != first[0]["id"]
    assert again[1:] == first[1:]


async def test_a_topic_without_subscriptions_publishes_nothing_successfully(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/topics/nobody/publish", json={"type": "t"})
    assert r.status_code == 200, r.text
    assert r.json() == {"topic": "nobody", "jobs": []}
    r = await client.get("/v1/topics/nobody")
    assert r.status_code == 200 and r.json() == {"name": "nobody", "subscriptions": []}


async def test_subscription_crud(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/topics")).json() == {"topics": []}
    r = await client.put("/v1/topics/t1/subscriptions/q1")  # no body at all
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["topic"] == "t1" and created["queue"] == "q1" and created["type"] is None
    r = await client.put("/v1/topics/t1/subscriptions/q1", json={"type": "x"})
    assert r.status_code == 200
    assert r.json() == {**created, "type": "x"}  # created_at kept
    r = await client.put("/v1/topics/t1/subscriptions/q1", json={})
    assert r.status_code == 200 and r.json()["type"] is None
    await subscribe(client, "t0", "q2", type="y")
    await subscribe(client, "t1", "q0")
    r = await client.get("/v1/topics")
    assert [(t["name"], [(s["queue"], s["type"]) for s in t["subscriptions"]]) for t in r.json()["topics"]] == [
        ("t0", [("q2", "y")]),
        ("t1", [("q0", None), ("q1", None)]),
    ]
    # subscribing made the queue, as naming it in an enqueue would
    assert (await client.get("/v1/queues/q2")).status_code == 200
    r = await client.delete("/v1/topics/t1/subscriptions/q1")
    assert r.status_code == 204 and r.content == b""
    problem(await client.delete("/v1/topics/t1/subscriptions/q1"), 404, "not_found")
    problem(await client.delete("/v1/topics/zz/subscriptions/q0"), 404, "not_found")
    r = await client.get("/v1/topics/t1")
    assert [s["queue"] for s in r.json()["subscriptions"]] == ["q0"]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/topics/-bad/subscriptions/q",
        "/v1/topics/t/subscriptions/-bad",
        "/v1/topics/" + "a" * 129 + "/subscriptions/q",
        "/v1/topics/t%20x/subscriptions/q",
    ],
)
async def test_names_follow_the_queue_name_rules(client: httpx.AsyncClient, path: str) -> None:
    validation(await client.put(path), "path")
    validation(await client.delete(path), "path")


async def test_bad_bodies_are_422(client: httpx.AsyncClient) -> None:
    validation(await client.put("/v1/topics/t/subscriptions/q", json={"type": ""}), "body", "type")
    validation(await client.put("/v1/topics/t/subscriptions/q", json={"type": 5}), "body", "type")
    validation(await client.put("/v1/topics/t/subscriptions/q", json={"queue": "x"}), "body")
    validation(await client.put("/v1/topics/t/subscriptions/q", json=[1]), "body")
    await subscribe(client, "t", "q")
    for bad, loc in [
        ({}, "type"),
        ({"type": "t", "queue": "q"}, "queue"),
        ({"type": "t", "delay_ms": 1, "run_at": "2030-01-01T00:00:00Z"}, None),
        ({"type": "t", "priority": "1"}, "priority"),
        ({"type": "t", "payload": []}, "payload"),
    ]:
        r = await client.post("/v1/topics/t/publish", json=bad)
        if loc is None:
            validation(r, "body")
        else:
            validation(r, "body", loc)
    validation(await client.post("/v1/topics/-t/publish", json={"type": "t"}), "path")
    assert await total(client, "q") == 0


async def test_access(app: FastAPI, client: httpx.AsyncClient) -> None:
    db = app.state.ctx.db
    made = {}
    for name, role, queues in [
        ("admin", Role.ADMIN, "*"),
        ("scoped_admin", Role.ADMIN, "billing,emails"),
        ("producer", Role.PRODUCER, "*"),
        ("narrow", Role.PRODUCER, "billing,emails"),
        ("worker", Role.WORKER, "*"),
    ]:
        _, made[name] = await tokens.create(db, role, queues, name=name)
    await app.state.tokens.refresh()

    def auth(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {made[who]}"}

    for queue in QUEUES:
        r = await client.put(f"/v1/topics/o/subscriptions/{queue}", headers=auth("admin"))
        assert r.status_code == 201
    # managing: an admin of every queue only
    for who in ("producer", "narrow", "worker", "scoped_admin"):
        problem(await client.put("/v1/topics/o/subscriptions/x", headers=auth(who)), 403, "forbidden")
        problem(await client.delete("/v1/topics/o/subscriptions/billing", headers=auth(who)), 403, "forbidden")
        problem(await client.get("/v1/topics", headers=auth(who)), 403, "forbidden")
    problem(await client.get("/v1/topics"), 401, "unauthorized")
    # publishing: a producer whose pattern covers every subscribed queue
    as_admin = httpx.AsyncClient(transport=client._transport, base_url="http://jobq", headers=auth("admin"))
    async with as_admin:
        before = await totals(as_admin)
        for who in ("narrow", "scoped_admin"):
            r = await client.post("/v1/topics/o/publish", json={"type": "t"}, headers=auth(who))
            body = problem(r, 403, "forbidden")
            # the queue it misses is not named: it may be another tenant's
            assert body["detail"] == "a queue subscribed to this topic is outside this token's queues", body
            assert "search" not in r.text
        problem(await client.post("/v1/topics/o/publish", json={"type": "t"}, headers=auth("worker")), 403, "forbidden")
        assert await totals(as_admin) == before
        r = await client.post("/v1/topics/o/publish", json={"type": "t"}, headers=auth("producer"))
        assert r.status_code == 201
        assert await totals(as_admin) == [n + 1 for n in before]
        # once search is unsubscribed, the narrow producer covers the topic
        await as_admin.delete("/v1/topics/o/subscriptions/search")
        r = await client.post("/v1/topics/o/publish", json={"type": "t"}, headers=auth("narrow"))
        assert r.status_code == 201 and len(r.json()["jobs"]) == 2


async def test_an_unsubscribe_waits_for_a_publish_in_progress(
    client: httpx.AsyncClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish holds its topic's subscriptions from its read to its commit: an unsubscribe
    sent meanwhile answers only after the publish committed, with the queue included. So
    once a DELETE has answered, no publish adds a job to that queue, and no publish reaches
    part of the queues it read."""
    await three(client)
    inserted, commit = asyncio.Event(), asyncio.Event()
    real_insert_many = enqueue.insert_many

    async def held(*args: Any, **kwargs: Any) -> Any:
        out = await real_insert_many(*args, **kwargs)
        inserted.set()
        await commit.wait()  # written, not committed: the publish's transaction stays open
        return out

    monkeypatch.setattr(enqueue, "insert_many", held)
    publish = asyncio.create_task(
        client.post("/v1/topics/orders.placed/publish", json={"type": "t", "payload": {"i": 0}})
    )
    await asyncio.wait_for(inserted.wait(), 10)
    monkeypatch.setattr(enqueue, "insert_many", real_insert_many)
    unsubscribe = asyncio.create_task(client.delete("/v1/topics/orders.placed/subscriptions/search"))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watch:

        async def delete_waits_for_a_lock() -> bool:
            assert not unsubscribe.done(), "the unsubscribe answered while a publish was open"
            cur = await watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM topic_subscriptions%'"
            )
            row = await cur.fetchone()
            assert row is not None
            return bool(row[0])

        # Until the DELETE is seen waiting for a lock in the database; an answer first fails.
        await aeventually(delete_waits_for_a_lock, what="the unsubscribe waiting for a lock in the database")
    assert not publish.done() and not unsubscribe.done()
    commit.set()
    answered = await publish
    gone = await unsubscribe
    assert answered.status_code == 201 and gone.status_code == 204, (answered.text, gone.text)
    assert [j["queue"] for j in answered.json()["jobs"]] == list(QUEUES)
    r = await client.post("/v1/topics/orders.placed/publish", json={"type": "t", "payload": {"i": 1}})
    assert [j["queue"] for j in r.json()["jobs"]] == ["billing", "emails"]
    # what is committed: every queue each publish read, no other
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT payload->>'i', queue FROM jobs ORDER BY 1, 2").fetchall()
    assert rows == [("0", q) for q in QUEUES] + [("1", "billing"), ("1", "emails")]
