"""`jobq serve` with no JOBQ_DATABASE_URL: an embedded PostgreSQL under ./.jobq/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg

from app.store.embedded import EmbeddedPostgres
from tests.conftest import ROOT, free_port


def _serve(cwd: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "JOBQ_DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("jobq serve did not become ready")


def _postmaster_pid(pgdata: Path) -> int | None:
    pidfile = pgdata / "postmaster.pid"
    return int(pidfile.read_text().split()[0]) if pidfile.exists() else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_serve_starts_embedded_postgres_keeps_jobs_and_stops_it(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve(tmp_path, port)
    try:
        _ready(url, proc)
        job = httpx.post(url + "/v1/jobs", json={"type": "t"}).json()
        pgdata = tmp_path / ".jobq" / "pgdata"
        pid = _postmaster_pid(pgdata)
        assert pid is not None and _running(pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), "the embedded PostgreSQL outlived jobq serve"

    # A SIGKILLed owner must not keep the next start from working, and the job survives.
    proc = _serve(tmp_path, port)
    try:
        _ready(url, proc)
        proc.kill()
        proc.wait(10)
        proc = _serve(tmp_path, port)
        _ready(url, proc)
        assert httpx.get(f"{url}/v1/jobs/{job['id']}").json()["type"] == "t"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    pid = _postmaster_pid(pgdata)
    deadline = time.monotonic() + 10
    while pid is not None and _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid is None or not _running(pid)


def test_temporary_server_is_usable_and_removed() -> None:
    with EmbeddedPostgres.temporary() as server:
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("jobq",)
        pgdata = server.pgdata
    assert not pgdata.exists()
