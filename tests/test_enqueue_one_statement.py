"""POST /v1/jobs/batch's one statement (JobEnqueueMany, issue 28): a batch of new jobs into
queues that exist and have room is written whole, in request order, in one round trip;
anything else (a key taken, a key twice in the batch, a queue it would take past max_depth,
a queue that does not exist) makes it write nothing and return no row, and the batch takes
the transaction's way (JobInsertMany), which words every answer as before. A key that
another enqueue takes while the statement runs fails it whole (unique_violation): nothing
of it stays."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from jobq.store.queries import Q


def _jobs(*jobs: dict[str, Any]) -> dict[str, str]:
    return {"jobs": json.dumps([{"type": "t", "payload": {"n": i}, **j} for i, j in enumerate(jobs)])}


def _state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    return (conn.execute("SELECT count(*) FROM jobs").fetchone(),
            conn.execute("SELECT count(*) FROM job_keys").fetchone(),
            conn.execute("SELECT coalesce(sum(n), 0) FROM job_counts").fetchone())


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as c:
        c.execute("INSERT INTO queues (name, max_attempts) VALUES ('a', 25), ('b', 7)")
        c.execute("INSERT INTO queues (name, max_attempts, max_depth) VALUES ('full', 25, 2)")
        yield c


def test_new_jobs_are_written_whole_in_request_order(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute(Q.JobEnqueueMany, _jobs(
        {"queue": "b"}, {"queue": "a", "idempotency_key": "k"}, {"queue": "b", "max_attempts": 3},
        {"queue": "full"}, {"queue": "full", "delay_ms": 60_000})).fetchall()
    assert [r[2] for r in rows] == [7, 25, 3, 25, 25]  # max_attempts: the job's, or its queue's
    assert [r[1] for r in rows] == [{"n": i} for i in range(5)]
    ids = [r[0] for r in rows]
    assert ids == sorted(ids)
    stored = conn.execute("SELECT id, queue, (payload->>'n')::int, idempotency_key FROM jobs ORDER BY id").fetchall()
    assert stored == [(ids[0], "b", 0, None), (ids[1], "a", 1, "k"), (ids[2], "b", 2, None),
                      (ids[3], "full", 3, None), (ids[4], "full", 4, None)]
    assert conn.execute("SELECT job_id FROM job_keys").fetchall() == [(ids[1],)]
    assert rows[4][4] > rows[3][4]  # visible_at: delayed


@pytest.mark.parametrize("jobs", [
    pytest.param([{"queue": "a"}, {"queue": "a", "idempotency_key": "taken"}], id="key-taken"),
    pytest.param([{"queue": "a", "idempotency_key": "x"}, {"queue": "a", "idempotency_key": "x"}],
                 id="key-twice"),
    pytest.param([{"queue": "a"}, {"queue": "full"}, {"queue": "full"}], id="past-max-depth"),
    pytest.param([{"queue": "a"}, {"queue": "gone"}], id="no-queue"),
])
def test_anything_but_new_jobs_with_room_writes_nothing(conn: psycopg.Connection[Any],
                                                        jobs: list[dict[str, Any]]) -> None:
    conn.execute(Q.JobEnqueueMany, _jobs({"queue": "a", "idempotency_key": "taken"}, {"queue": "full"}))
    before = _state(conn)
    assert conn.execute(Q.JobEnqueueMany, _jobs(*jobs)).fetchall() == []
    assert _state(conn) == before


def test_a_key_taken_meanwhile_undoes_the_whole_statement(database_url: str,
                                                          conn: psycopg.Connection[Any]) -> None:
    failed: list[BaseException] = []

    def batch() -> None:
        with psycopg.connect(database_url, autocommit=True) as c:
            try:
                c.execute(Q.JobEnqueueMany, _jobs({"queue": "b"}, {"queue": "a", "idempotency_key": "k"}))
            except psycopg.errors.UniqueViolation as exc:
                failed.append(exc)

    with psycopg.connect(database_url) as other:  # a transaction, open while the batch runs
        other.execute(Q.JobInsertMany, _jobs({"queue": "a", "idempotency_key": "k"}))
        t = threading.Thread(target=batch)
        t.start()
        time.sleep(0.5)  # the batch waits on the key
        other.commit()
        t.join(10)
    assert len(failed) == 1
    assert conn.execute("SELECT queue, idempotency_key FROM jobs").fetchall() == [("a", "k")]


async def test_a_batch_after_a_declined_statement_is_answered_as_before(client: httpx.AsyncClient) -> None:
    """The fallback, through the API: a replay in a batch of new jobs, and a full queue."""
    await client.patch("/v1/queues/q", json={"max_depth": 3})
    first = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "queue": "q", "idempotency_key": "k", "payload": {"a": 1}}]})
    assert first.status_code == 201, first.text
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "queue": "q", "payload": {"b": 2}},
        {"type": "t", "queue": "q", "idempotency_key": "k", "payload": {"a": 1}},
        {"type": "t", "queue": "q", "idempotency_key": "k", "payload": {"a": 1}}]})
    assert r.status_code == 201, r.text
    jobs = r.json()["jobs"]
    assert jobs[1]["id"] == jobs[2]["id"] == first.json()["jobs"][0]["id"]
    assert jobs[0]["payload"] == {"b": 2} and jobs[0]["status"] == "pending"
    full = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "t", "queue": "q", "idempotency_key": "k", "payload": {"a": 1}},
        {"type": "t", "queue": "q"}, {"type": "t", "queue": "q"}]})
    assert full.status_code == 429 and full.json()["code"] == "queue_full", full.text
    listed = (await client.get("/v1/jobs", params={"queue": "q"})).json()["jobs"]
    assert len(listed) == 2
