"""The SDK's ``enqueue_in_transaction`` (and the batch and asyncio forms): on the caller's
psycopg or SQLAlchemy connection, in the caller's transaction, with the HTTP client's
exceptions for what the SQL functions refuse."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

import jobq
from jobq.client import (
    IdempotencyConflict,
    NewJob,
    QueueFull,
    RetryableError,
    ValidationError,
    aenqueue_in_transaction,
    aenqueue_many_in_transaction,
    enqueue_in_transaction,
    enqueue_many_in_transaction,
)
from tests.conftest import ROOT
from tests.helpers import ts


def alchemy_url(database_url: str) -> str:
    return database_url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def alchemy(database_url: str) -> Iterator[Engine]:
    eng = create_engine(alchemy_url(database_url))
    yield eng
    eng.dispose()


async def job(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_psycopg_commit_and_rollback(client: httpx.AsyncClient, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        job_id = enqueue_in_transaction(
            conn, "email.welcome", {"user": 1}, queue="mail", priority=3, max_attempts=4, idempotency_key="u1"
        )
        assert isinstance(job_id, str)
        conn.commit()
        lost = jobq.enqueue_in_transaction(conn, "email.welcome", {"user": 2}, queue="mail")
        conn.rollback()
    got = await job(client, job_id)
    assert (got["queue"], got["type"], got["payload"], got["priority"], got["max_attempts"]) == (
        "mail",
        "email.welcome",
        {"user": 1},
        3,
        4,
    )
    assert got["idempotency_key"] == "u1" and got["status"] == "pending"
    assert (await client.get(f"/v1/jobs/{lost}")).status_code == 404


async def test_psycopg_batch_keeps_order_and_answers_replays(client: httpx.AsyncClient, database_url: str) -> None:
    run_at = datetime(2030, 1, 1, tzinfo=UTC)
    with psycopg.connect(database_url) as conn:
        ids = enqueue_many_in_transaction(
            conn,
            [
                NewJob(type="a", payload={"i": 0}, queue="b", idempotency_key="k"),
                NewJob(type="b", queue="b", delay=timedelta(seconds=60)),
                NewJob(type="c", queue="b", run_at=run_at),
                NewJob(type="a", payload={"i": 0}, queue="b", idempotency_key="k"),
            ],
        )
        conn.commit()
    assert ids[0] == ids[3] and len(set(ids)) == 3
    jobs = [await job(client, i) for i in ids[:3]]
    assert [j["type"] for j in jobs] == ["a", "b", "c"]
    delayed = ts(jobs[1]["visible_at"]) - ts(jobs[1]["created_at"])
    assert delayed == timedelta(seconds=60)
    assert ts(jobs[2]["visible_at"]) == run_at


async def test_psycopg_async(client: httpx.AsyncClient, database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        one = await aenqueue_in_transaction(conn, "t", {"a": 1}, queue="aq")
        more = await aenqueue_many_in_transaction(conn, [NewJob(type="t", queue="aq"), NewJob(type="u", queue="aq")])
        await conn.commit()
    assert [(await job(client, i))["queue"] for i in [one, *more]] == ["aq"] * 3


async def test_sqlalchemy_connection_and_session(client: httpx.AsyncClient, alchemy: Engine) -> None:
    with alchemy.begin() as conn:
        from_conn = enqueue_in_transaction(conn, "t", {"via": "connection"}, queue="sa")
    with Session(alchemy) as session:
        from_session = enqueue_many_in_transaction(session, [NewJob(type="t", payload={"via": "session"}, queue="sa")])[
            0
        ]
        session.commit()
    with Session(alchemy) as session:
        rolled_back = enqueue_in_transaction(session, "t", queue="sa")
        session.rollback()
    assert (await job(client, from_conn))["payload"] == {"via": "connection"}
    assert (await job(client, from_session))["payload"] == {"via": "session"}
    assert (await client.get(f"/v1/jobs/{rolled_back}")).status_code == 404


async def test_errors_are_the_http_clients_exceptions(client: httpx.AsyncClient, database_url: str) -> None:
    r = await client.patch("/v1/queues/tiny", json={"max_depth": 1})
    assert r.status_code == 200, r.text
    with psycopg.connect(database_url) as conn:
        enqueue_in_transaction(conn, "t", queue="tiny", idempotency_key="x")
        conn.commit()
        with pytest.raises(QueueFull) as full:
            enqueue_in_transaction(conn, "t", queue="tiny")
        conn.rollback()
        assert isinstance(full.value, RetryableError) and full.value.status == 429
        assert full.value.code == "queue_full" and "max_depth" in (full.value.detail or "")
        assert isinstance(full.value.__cause__, psycopg.Error)

        with pytest.raises(IdempotencyConflict) as conflict:
            enqueue_in_transaction(conn, "other", queue="tiny", idempotency_key="x")
        conn.rollback()
        assert conflict.value.status == 409

        with pytest.raises(ValidationError) as bad:
            enqueue_in_transaction(conn, "t", queue="no spaces")
        conn.rollback()
        assert bad.value.errors[0]["loc"] == ["body", "queue"]
        assert (bad.value.detail or "").startswith("queue: must be")

        with pytest.raises(ValidationError) as bad_batch:
            enqueue_many_in_transaction(conn, [NewJob(type="t"), NewJob(type="t", priority=2**31)])
        conn.rollback()
        assert bad_batch.value.errors[0]["loc"] == ["body", "jobs", 1, "priority"]

        # Keys of topic publishes' and schedules' jobs are the service's, as over HTTP.
        with pytest.raises(ValidationError) as reserved:
            enqueue_in_transaction(conn, "t", queue="tiny", idempotency_key="topic:orders/7")
        conn.rollback()
        assert reserved.value.errors[0]["loc"] == ["body", "idempotency_key"]
        assert "reserved" in (reserved.value.detail or "")
    # Nothing of the refused calls was stored.
    assert len((await client.get("/v1/jobs", params={"queue": "tiny"})).json()["jobs"]) == 1
    assert (await client.get("/v1/jobs", params={"queue": "default"})).json()["jobs"] == []


async def test_sqlalchemy_errors_are_mapped_too(alchemy: Engine) -> None:
    with alchemy.connect() as conn, pytest.raises(ValidationError) as bad:
        enqueue_in_transaction(conn, "", queue="q")
    assert bad.value.errors[0]["loc"] == ["body", "type"]


def test_importing_the_sdk_imports_no_database_driver() -> None:
    code = "import sys, jobq; print(sorted(m for m in ('psycopg', 'sqlalchemy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
