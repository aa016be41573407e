"""The service under test: one the user runs (``--url``, loopback only), or ``jobq serve``
started on a free loopback port, on the given database or on the embedded PostgreSQL."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from psycopg.conninfo import conninfo_to_dict

from jobq.bench.config import BenchConfig, BenchError, log
from jobq.embedded import EmbeddedPostgres, EmbeddedUnavailable

READY_TIMEOUT_S = 60.0
# Long-polls of the bench's own workers and latency probe, beside --waiters.
LONG_POLL_ROOM = 1000
STOP_TIMEOUT_S = 20.0


def _is_loopback_host(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_service_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not _is_loopback_host(parts.hostname):
        raise BenchError(f"--url must be a loopback http address (127.0.0.1), not {url!r}")
    return url.rstrip("/")


def check_database_url(url: str) -> str:
    """The libpq URL, refused unless it names a Unix socket or a loopback address."""
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            url = "postgresql://" + url[len(prefix):]
    hosts = str(conninfo_to_dict(url).get("host") or "")
    for host in hosts.split(",") if hosts else [""]:
        if host and not host.startswith("/") and not _is_loopback_host(host):
            raise BenchError(f"the bench only talks to a database on this machine, not {host!r}")
    return url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class Service:
    url: str
    database_url: str | None
    pid: int | None  # set when the bench started it


@contextlib.contextmanager
def started_service(database_url: str, server_workers: int, long_polls: int = 0) -> Iterator[Service]:
    """``jobq serve`` on a free loopback port, its output in a file shown if it fails.
    ``long_polls``: the waiters the bench will hold; the service's long-poll cap is raised to
    hold them and the bench's own workers (unless JOBQ_MAX_LONG_POLLS is set)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    output = tempfile.NamedTemporaryFile(prefix="jobq-bench-serve-", suffix=".log", delete=False)
    env = {**os.environ, "JOBQ_DATABASE_URL": database_url, "JOBQ_HOST": "127.0.0.1"}
    if long_polls and not env.get("JOBQ_MAX_LONG_POLLS"):
        env["JOBQ_MAX_LONG_POLLS"] = str(long_polls + LONG_POLL_ROOM)
        log(f"JOBQ_MAX_LONG_POLLS={env['JOBQ_MAX_LONG_POLLS']} for the service: --waiters "
            f"{long_polls} and the bench's own workers")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobq.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(server_workers)],
        env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
    )
    failed = True
    try:
        _wait_ready(url, proc, Path(output.name))
        log(f"started jobq serve (pid {proc.pid}, {server_workers} worker process"
            f"{'es' if server_workers > 1 else ''}) on {url}; its log: {output.name}")
        yield Service(url, database_url, proc.pid)
        failed = False
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT_S)
        output.close()
        if not failed:
            with contextlib.suppress(OSError):
                os.unlink(output.name)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], output: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    with httpx.Client(base_url=url, timeout=1, trust_env=False) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"jobq serve exited with {proc.returncode}:\n{_tail(output)}")
            try:
                if client.get("/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    raise BenchError(f"jobq serve was not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(output)}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def _embedded(data_dir: Path) -> Iterator[str]:
    """The embedded PostgreSQL ``jobq serve`` would use, started by the bench so that it
    knows the URL (for the baseline and the database's CPU); the service attaches to it."""
    server = EmbeddedPostgres(data_dir / "pgdata")
    try:
        url = server.start()
    except EmbeddedUnavailable as exc:
        raise BenchError(str(exc)) from None
    try:
        log(f"embedded PostgreSQL under {data_dir}/ (set JOBQ_DATABASE_URL to use your own)")
        yield url
    finally:
        server.stop()


@contextlib.contextmanager
def service_for(cfg: BenchConfig) -> Iterator[Service]:
    if cfg.url is not None:
        db = check_database_url(cfg.database_url) if cfg.database_url else None
        yield Service(check_service_url(cfg.url), db, None)
        return
    with contextlib.ExitStack() as stack:
        if cfg.database_url:
            db = check_database_url(cfg.database_url)
        else:
            db = stack.enter_context(_embedded(cfg.data_dir))
        yield stack.enter_context(started_service(db, cfg.server_workers, cfg.waiters))
