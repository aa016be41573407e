"""Aging keys without a sweep: a job written while its queue's aging is switched on is keyed
by the settings change itself, so the aging claim sees it at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.store import queue_settings
from jobq.store.db import Database
from jobq.store.enqueue import NOT_LEASED
from jobq.store.queries import Q
from tests.waiting import aeventually

QUEUE = "aging-race"


def _insert_params() -> dict[str, object]:
    return {"queue": QUEUE, "type": "t", "payload": json.dumps({}), "priority": 0, "run_at": None,
            "delay_ms": 0, "max_attempts": None, "idempotency_key": None, **NOT_LEASED}


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url, pool_size=4, timeout_s=5.0, retry_after_s=1)
    await database.open(wait=True)
    yield database
    await database.close()


async def test_a_job_enqueued_while_aging_is_switched_on_is_claimed_by_the_aging_claim(
        db: Database, database_url: str) -> None:
    await db.fetch(Q.QueueEnsure, {**QUEUE_DEFAULTS.as_params(), "queue": QUEUE})
    async with await psycopg.AsyncConnection.connect(database_url) as late:
        # An enqueue that read aging_ms (still NULL) before the change, and commits after the
        # change has re-keyed the queue: its job has no aging key.
        await late.execute(Q.JobInsert, _insert_params())
        change = asyncio.create_task(queue_settings.update(db, QUEUE, {"aging_ms": 1000}))

        async def changed() -> bool:
            row = await db.fetch_one(Q.QueueGet, {"queue": QUEUE})
            return row is not None and row["aging_ms"] is not None

        await aeventually(changed, what="aging_ms written while the change waits on the enqueue")
        assert not change.done()  # it waits for the enqueue that may have read the old setting
        await late.commit()
        await asyncio.wait_for(change, 10)

    claimed = await db.fetch(Q.JobClaimAged, {"queue": QUEUE, "types": None, "limit": 10,
                                              "lease_ms": None, "worker_id": "w", "token_id": None})
    assert len(claimed) == 1
    keyed = await db.fetch_one("SELECT aged_key FROM jobs WHERE id = %(id)s", {"id": claimed[0]["id"]})
    assert keyed is not None and keyed["aged_key"] is not None


async def test_switching_aging_on_does_not_wait_when_no_one_writes_jobs(db: Database) -> None:
    await db.fetch(Q.QueueEnsure, {**QUEUE_DEFAULTS.as_params(), "queue": QUEUE})
    await db.fetch(Q.JobInsert, _insert_params())
    await asyncio.wait_for(queue_settings.update(db, QUEUE, {"aging_ms": 1000}), 10)
    claimed = await db.fetch(Q.JobClaimAged, {"queue": QUEUE, "types": None, "limit": 10,
                                              "lease_ms": None, "worker_id": "w", "token_id": None})
    assert len(claimed) == 1
