"""The queue defaults have one definition, jobq.domain.queues: the migrated database, the
table metadata and the queues the service creates all agree with it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import httpx
import psycopg
from psycopg import sql

from jobq.domain.queues import QUEUE_DEFAULTS, QUEUE_SETTINGS
from jobq.store.tables import queues


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
