"""The SDK's topic calls (sync and async) and ``jobq topics`` against a real ``jobq serve``
(issue 17): subscribe, list, publish with a type override, idempotent re-publish, a full
queue refusing the whole publish, unsubscribe; /metrics counts publishes."""

from __future__ import annotations

import json

import httpx
import pytest

from jobq.client import AsyncClient, Client, NotFound, QueueFull, Subscription, Topic, ValidationError
from tests.conftest import LiveServer
from tests.test_cli import jobq


def test_sync_sdk_round_trip(live_server: LiveServer) -> None:
    with Client(live_server.url) as c:
        sub = c.subscribe("orders.placed", "billing", type="invoice.create")
        assert (sub.topic, sub.queue, sub.type) == ("orders.placed", "billing", "invoice.create")
        assert sub.created_at is not None
        c.subscribe("orders.placed", "emails")
        assert c.list_topics() == [
            Topic(
                name="orders.placed",
                subscriptions=[
                    Subscription(
                        topic="orders.placed", queue="billing", type="invoice.create", created_at=sub.created_at
                    ),
                    c.get_topic("orders.placed").subscriptions[1],
                ],
            )
        ]
        jobs = c.publish("orders.placed", "order.placed", {"order_id": 7}, priority=2, idempotency_key="o-7")
        assert [(j.queue, j.type, j.payload, j.priority) for j in jobs] == [
            ("billing", "invoice.create", {"order_id": 7}, 2),
            ("emails", "order.placed", {"order_id": 7}, 2),
        ]
        again = c.publish("orders.placed", "order.placed", {"order_id": 7}, priority=2, idempotency_key="o-7")
        assert [j.id for j in again] == [j.id for j in jobs]
        assert c.claim("emails", worker_id="w")[0].job.id == jobs[1].id

        c.update_queue("billing", max_depth=1)
        with pytest.raises(QueueFull):
            c.publish("orders.placed", "order.placed")
        assert [j.id for j in c.list_jobs(queue="emails").jobs] == [jobs[1].id]

        with pytest.raises(ValidationError):
            c.subscribe("orders placed", "billing")
        c.unsubscribe("orders.placed", "billing")
        with pytest.raises(NotFound):
            c.unsubscribe("orders.placed", "billing")
        assert c.publish("nobody.listens", "t") == []
    text = httpx.get(live_server.url + "/metrics").text
    counted = [ln for ln in text.splitlines() if ln.startswith('jobq_topic_publishes_total{topic="orders.placed"}')]
    assert counted and float(counted[0].split()[-1]) == 2  # the refused publish does not count
    # nor does one to a topic nobody subscribed to: any name a producer sends is no series
    assert "nobody.listens" not in text


async def test_async_sdk_round_trip(live_server: LiveServer) -> None:
    async with AsyncClient(live_server.url) as c:
        await c.subscribe("t", "a")
        await c.subscribe("t", "b", type="b.t")
        jobs = await c.publish("t", "x", delay=60)
        assert [(j.queue, j.type) for j in jobs] == [("a", "x"), ("b", "b.t")]
        assert all(j.visible_at > j.created_at for j in jobs)
        assert [s.queue for s in (await c.get_topic("t")).subscriptions] == ["a", "b"]
        await c.unsubscribe("t", "a")
        assert [t.name for t in await c.list_topics()] == ["t"]
        with pytest.raises(NotFound):
            await c.unsubscribe("t", "a")


def test_cli_topics(live_server: LiveServer) -> None:
    out = jobq(live_server, "topics", "subscribe", "signup", "mail", "--type", "email.welcome", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["type"] == "email.welcome"
    assert jobq(live_server, "topics", "subscribe", "signup", "crm").returncode == 0
    listed = json.loads(jobq(live_server, "topics", "list", "--json").stdout)
    assert [(s["queue"], s["type"]) for s in listed["topics"][0]["subscriptions"]] == [
        ("crm", None),
        ("mail", "email.welcome"),
    ]
    table = jobq(live_server, "topics")
    assert table.returncode == 0 and "signup" in table.stdout and "email.welcome" in table.stdout
    pub = jobq(live_server, "topics", "publish", "signup", "user.created", "--payload", '{"id": 1}', "--json")
    assert pub.returncode == 0, pub.stderr
    assert [(j["queue"], j["type"]) for j in json.loads(pub.stdout)["jobs"]] == [
        ("crm", "user.created"),
        ("mail", "email.welcome"),
    ]
    assert jobq(live_server, "topics", "unsubscribe", "signup", "crm").returncode == 0
    gone = jobq(live_server, "topics", "unsubscribe", "signup", "crm")
    assert gone.returncode == 1 and "not_found" in gone.stderr + gone.stdout
    assert len(gone.stderr.strip().splitlines()) == 1
    bad = jobq(live_server, "topics", "publish", "signup", "t", "--payload", "[1]")
    assert bad.returncode == 2 and "JSON object" in bad.stderr
