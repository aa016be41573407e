"""The domain's rules have one definition: the queue defaults (jobq.domain.queues), which the
migrated database, the table metadata and the queues the service creates all agree with; and
the Job and Lease that core builds from rows."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import httpx
import psycopg
from psycopg import sql

from jobq.domain.jobs import Job, JobStatus
from jobq.domain.leases import LeaseRef, parse_lease_id
from jobq.domain.queues import QUEUE_DEFAULTS, QUEUE_SETTINGS
from jobq.store import records
from jobq.store.tables import jobs, queues


def evaluated(conn: psycopg.Connection[Any], default: str | None) -> Any:
    """The value of a column default expression (None: no default, so NULL)."""
    if default is None:
        return None
    return conn.execute(sql.SQL("SELECT {}").format(sql.SQL(default))).fetchone()[0]  # type: ignore[index]


def test_migrated_column_defaults_are_the_domain_defaults(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT column_name, column_default FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'queues'"
        ).fetchall()
        found = {name: evaluated(conn, default) for name, default in rows if name in QUEUE_SETTINGS}
    assert found == asdict(QUEUE_DEFAULTS)


def test_table_metadata_defaults_are_the_domain_defaults(database_url: str) -> None:
    columns = {c.name: c for c in queues.columns}
    assert set(QUEUE_SETTINGS) <= set(columns)
    with psycopg.connect(database_url) as conn:
        found = {
            name: evaluated(conn, None if columns[name].server_default is None
                            else columns[name].server_default.arg.text)  # type: ignore[union-attr]
            for name in QUEUE_SETTINGS
        }
    assert found == asdict(QUEUE_DEFAULTS)


async def test_a_queue_created_on_first_use_has_the_domain_defaults(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", json={"type": "t", "queue": "fresh"})
    assert r.status_code == 201, r.text
    r = await client.get("/v1/queues/fresh")
    assert r.status_code == 200, r.text
    assert r.json()["settings"] == asdict(QUEUE_DEFAULTS)


def test_a_job_row_becomes_a_job_with_every_field_set() -> None:
    """store.records sets Job's slots one by one: a field added to Job and not to the builder
    would be missing from every job the API answers with."""
    row: dict[str, Any] = {c.name: f"value of {c.name}" for c in jobs.columns}
    row["status"] = "running"
    row["lease_token"] = 7
    job = records.job(row)
    assert job == Job(**{f.name: row[f.name] for f in fields(Job)} | {"status": JobStatus.RUNNING})
    assert job.status is JobStatus.RUNNING
    # A claim's lease carries its job with the same fields, the jsonb ones as PostgreSQL's text.
    assert records.LeasedJob._fields == tuple(f.name for f in fields(Job))
    outcome = records.claim_outcome([row | {"token_revoked": False}])
    (claimed,) = outcome.claimed
    assert not outcome.token_revoked
    assert claimed.lease.lease_id == f"{row['id']}.7"
    assert claimed.lease.locked_until == row["locked_until"]
    assert claimed.lease.job == records.LeasedJob(**{f.name: row[f.name] for f in fields(Job)})
    assert parse_lease_id(f"{12}.7") == LeaseRef(12, 7)
