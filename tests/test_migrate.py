"""`jobq migrate`: applies the migrations alone, and two at once do not collide."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from jobq.store.migrate import head_revision
from tests import pg
from tests.conftest import ROOT, make_settings, running_app


@pytest.fixture
def empty_database(admin_url: str) -> Iterator[str]:
    name = f"jobq_empty_{os.getpid()}_{os.urandom(3).hex()}"
    pg.admin_execute(admin_url, f'CREATE DATABASE "{name}"')
    yield pg.with_database(admin_url, name)
    pg.drop(admin_url, name)


async def test_two_migrations_at_once_both_succeed_and_readyz_follows(empty_database: str) -> None:
    # Before any migration the service is up but not ready.
    async with running_app(make_settings(empty_database)) as app:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            assert (await c.get("/healthz")).status_code == 200
            r = await c.get("/readyz")
            assert r.status_code == 503 and r.json()["code"] == "unavailable"

    env = {**os.environ, "JOBQ_DATABASE_URL": empty_database}
    procs = [subprocess.Popen([sys.executable, "-m", "jobq.cli", "migrate"], cwd=ROOT, env=env,  # noqa: ASYNC220
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]

    async with running_app(make_settings(empty_database)) as app:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            r = await c.get("/readyz")
            assert r.status_code == 200 and r.json()["schema"] == head_revision()
