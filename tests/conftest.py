"""Fixtures. Every test that touches the database gets its own, cloned from a migrated
template, so tests never see each other's jobs."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.settings import Settings
from tests import pg
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def admin_url() -> Iterator[str]:
    url = os.environ.get("JOBQ_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from jobq.embedded import EmbeddedPostgres

    with EmbeddedPostgres.temporary() as server:
        yield server.url


@pytest.fixture(scope="session")
def template_db(admin_url: str) -> Iterator[str]:
    name = pg.create_template(admin_url)
    yield name
    pg.drop(admin_url, name)


@pytest.fixture
def database_url(admin_url: str, template_db: str) -> Iterator[str]:
    name = pg.clone(admin_url, template_db)
    yield pg.with_database(admin_url, name)
    pg.drop(admin_url, name)


def make_settings(database_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": database_url,
        "reap_interval_s": 0.1,
        "db_timeout_s": 3.0,
        "pool_size": 20,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


Headers = dict[str, str]


@contextlib.asynccontextmanager
async def app_with_tokens(
        database_url: str, admin_token: str, tokens: dict[str, tuple[str, str]],
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, Headers]]]:
    """A service with access tokens: a client sending the environment's admin token, and the
    Authorization headers of ``tokens`` (name: (role, queues)), made through POST /v1/tokens,
    and of "admin"."""
    async with running_app(make_settings(database_url, admin_token=admin_token)) as application:
        admin = {"Authorization": f"Bearer {admin_token}"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application),
                                     base_url="http://jobq", headers=admin) as c:
            made = {"admin": admin}
            for name, (role, queues) in tokens.items():
                r = await c.post("/v1/tokens", json={"role": role, "queues": queues})
                assert r.status_code == 201, r.text
                made[name] = {"Authorization": f"Bearer {r.json()['token']}"}
            yield c, made


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[FastAPI]:
    async with running_app(make_settings(database_url)) as application:
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://jobq", timeout=30) as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """A real ``jobq serve`` process: for tests that kill or restart the server."""

    def __init__(self, database_url: str, env: dict[str, str] | None = None,
                 args: Sequence[str] = (), preexec_fn: Callable[[], None] | None = None) -> None:
        self.database_url = database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.args = list(args)  # more `jobq serve` options (--workers 2)
        self.preexec_fn = preexec_fn  # run in the child before it starts (lower its limits)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        env = {**os.environ, "JOBQ_DATABASE_URL": self.database_url,
               "JOBQ_REAP_INTERVAL_S": "0.1", **self.extra_env}
        # The server logs a line per job event: into a file, since a pipe nobody reads
        # fills up and blocks the server.
        self.log = tempfile.NamedTemporaryFile(prefix="jobq-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobq.cli", "serve", "--port", str(self.port), *self.args],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self.log, preexec_fn=self.preexec_fn,
        )
        eventually(self._ready, timeout_s=timeout_s, what=f"jobq serve ready on {self.url}", poll_s=0.1)

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            err = Path(self.log.name).read_text()
            raise RuntimeError(f"jobq serve exited with {self.proc.returncode}:\n{err}")
        try:
            return httpx.get(self.url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        with contextlib.suppress(OSError, AttributeError):
            os.unlink(self.log.name)


@pytest.fixture
def live_server(database_url: str) -> Iterator[LiveServer]:
    server = LiveServer(database_url)
    server.start()
    yield server
    server.stop()


@contextlib.contextmanager
def two_replicas(database_url: str, env: dict[str, str] | None = None) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two service processes on one database, as two replicas behind a load balancer, each
    with ``env`` (JOBQ_ADMIN_TOKEN, say)."""
    a, b = LiveServer(database_url, env=env), LiveServer(database_url, env=env)
    try:
        a.start()
        b.start()
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture
def replicas(database_url: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    with two_replicas(database_url) as pair:
        yield pair
