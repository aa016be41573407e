"""A claim naming many queues: one statement for each run of uncapped queues, in the order
listed (earlier queues first, each queue in its own claim order), capped queues still under
their lock, whatever mix of plain, aged, capped and paused queues the list holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from jobq.store.queries import Q
from tests.helpers_workers import claim, enqueue, now, patch_queue


@contextmanager
def statements(app: FastAPI) -> Iterator[list[str]]:
    """The statements the service sends through its pool (by name), counted on the real database."""
    db = app.state.ctx.db
    names = {getattr(Q, n): n for n in Q.names()}
    sent: list[str] = []
    fetch = db.fetch

    async def counted(sql: str, params: Any = None) -> Any:
        sent.append(names.get(sql, sql))
        return await fetch(sql, params)

    db.fetch = counted
    try:
        yield sent
    finally:
        db.fetch = fetch


async def test_a_claim_over_many_queues_is_one_statement(app: FastAPI, client: httpx.AsyncClient) -> None:
    queues = [f"many{i}" for i in range(60)]
    await claim(client, queues)  # creates the queues and reads their settings
    job = await enqueue(client, queue="many45")
    with statements(app) as sent:
        leases = await claim(client, queues, limit=5)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert sent.count("JobClaimMany") == 1 and "JobClaim" not in sent, sent
    with statements(app) as sent:
        assert await claim(client, queues, limit=5) == []
    assert [s for s in sent if s.startswith("JobClaim")] == ["JobClaimMany"], sent


async def test_strict_order_over_plain_aged_capped_and_paused_queues(client: httpx.AsyncClient) -> None:
    hour_ago = (now() - timedelta(hours=1)).isoformat()
    await patch_queue(client, "ob", aging_ms=60_000)
    await patch_queue(client, "oc", max_running=1)
    await patch_queue(client, "od", paused=True)
    a = await enqueue(client, queue="oa")
    # Aged: an hour of waiting outranks one step of priority (by aging_ms, a minute per step).
    b_young = await enqueue(client, queue="ob", priority=2)
    b_old = await enqueue(client, queue="ob", priority=1, run_at=hour_ago)
    c = [await enqueue(client, queue="oc") for _ in range(2)]
    await enqueue(client, queue="od")
    # Plain: priority first, then visible_at.
    e_old = await enqueue(client, queue="oe", run_at=hour_ago)
    e_high = await enqueue(client, queue="oe", priority=3)
    f = await enqueue(client, queue="of")
    g = await enqueue(client, queue="og")
    order = ["oa", "ob", "oc", "od", "oe", "of", "og"]
    leases = await claim(client, order, limit=7)
    assert [le["job"]["id"] for le in leases] == [
        a["id"], b_old["id"], b_young["id"], c[0]["id"], e_high["id"], e_old["id"], f["id"]]
    # What is left: the capped queue's second job waits for its slot, the paused queue's job
    # for its queue; og's is next.
    assert [le["job"]["id"] for le in await claim(client, order, limit=7)] == [g["id"]]


@pytest.mark.parametrize("limit", [1, 3])
async def test_a_later_queue_fills_only_what_the_earlier_ones_left(client: httpx.AsyncClient, limit: int) -> None:
    first = [await enqueue(client, queue="l2", payload={"i": i}) for i in range(2)]
    later = [await enqueue(client, queue="l4", payload={"i": i}) for i in range(3)]
    leases = await claim(client, ["l1", "l2", "l3", "l4"], limit=limit)
    assert [le["job"]["id"] for le in leases] == [j["id"] for j in [*first, *later]][:limit]


async def test_types_filter_every_queue_of_the_claim(client: httpx.AsyncClient) -> None:
    await enqueue(client, "other", queue="t1")
    wanted = await enqueue(client, "mine", queue="t2")
    await enqueue(client, "other", queue="t3")
    leases = await claim(client, ["t1", "t2", "t3"], types=["mine"], limit=10)
    assert [le["job"]["id"] for le in leases] == [wanted["id"]]
