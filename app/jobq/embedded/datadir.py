"""The embedded PostgreSQL's data directory: the files in it that tell who runs and who uses
the server (postmaster.pid, pgserver's handle list), its log, and where the socket goes.

The handle list, ``<pgdata>/.handle_pids.json``, names the processes attached to the server;
whoever reads or changes it holds the data directory's file lock (see ``server``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from jobq.embedded.errors import EmbeddedError
from jobq.embedded.processes import is_postmaster_of

log = logging.getLogger("jobq.embedded")

DEFAULT_PGDATA = Path(".jobq") / "pgdata"
HANDLES_FILE = ".handle_pids.json"  # pgserver's name, so pgserver's own handles stay compatible
LOG_TAIL_LINES = 30

# sun_path: 108 bytes on Linux, 104 on macOS and the BSDs, the terminating NUL included.
_SUN_PATH_MAX = 108 if sys.platform.startswith("linux") else 104


def read_postmaster_pid(pgdata: Path) -> list[str] | None:
    """The lines of postmaster.pid (pid, data dir, start time, port, socket dir, listen
    address, shared memory key, status), or None when there is none."""
    try:
        return (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    except OSError:
        return []


def running_postmaster(pgdata: Path) -> int | None:
    """The pid of the PostgreSQL running on pgdata, if any."""
    lines = read_postmaster_pid(pgdata)
    if not lines:
        return None
    try:
        pid = int(lines[0])
    except ValueError:
        return None
    return pid if is_postmaster_of(pid, pgdata) else None


def remove_stale_pidfile(pgdata: Path) -> None:
    """Remove a postmaster.pid that no running server owns but that would fool pgserver or
    PostgreSQL (precondition: no server runs on pgdata).

    A file naming a dead pid is left alone, PostgreSQL copes with it (and uses it to look for
    orphaned backends). One whose pid is alive, or which is truncated (pgserver insists on
    all eight lines), is removed, and so is the socket's lock file it points to, which
    PostgreSQL would also refuse to take over from a live pid."""
    lines = read_postmaster_pid(pgdata)
    if lines is None:
        return
    import psutil

    try:
        pid = int(lines[0])
    except (IndexError, ValueError):
        pid = None
    # pid_exists, not alive(): pgserver counts a zombie as running (when we are PID 1 in a
    # container, the postmaster is reparented to us and may linger as one).
    if pid is not None and len(lines) >= 8 and not psutil.pid_exists(pid):
        return
    log.warning("removing stale %s (pid %s is not a PostgreSQL on this data directory)",
                pgdata / "postmaster.pid", pid)
    if len(lines) >= 5 and lines[3].strip() and lines[4].strip():
        socket_lock = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"
        with contextlib.suppress(OSError):
            if socket_lock.read_text().split()[0] == str(pid):
                socket_lock.unlink()
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def read_handles(pgdata: Path) -> list[int]:
    try:
        value = json.loads((pgdata / HANDLES_FILE).read_text() or "[]")
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return []  # torn by a crash mid-write: pgserver writes it in place
    return [p for p in value if isinstance(p, int)] if isinstance(value, list) else []


def write_handles(pgdata: Path, pids: list[int]) -> None:
    # Atomically, so a crash cannot leave a torn file behind.
    path = pgdata / HANDLES_FILE
    tmp = path.with_name(f"{HANDLES_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(pids))
    os.replace(tmp, path)


def log_tail(pgdata: Path) -> str:
    try:
        lines = (pgdata / "log").read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])


def socket_dir(pgdata: Path, system_user: str | None) -> Path:
    """The data directory, unless the socket's path would be too long there (or the path
    has a comma, which unix_socket_directories reads as a separator): then a directory of
    ours in the temporary directory, named after the data directory. ``system_user`` is the
    user PostgreSQL runs as when we are root (pgserver's), who must own that directory."""
    if len(os.fsencode(pgdata / ".s.PGSQL.5432")) < _SUN_PATH_MAX and "," not in str(pgdata):
        return pgdata
    name = "jobq-sock-" + hashlib.sha256(os.fsencode(pgdata)).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / name
    if len(os.fsencode(path / ".s.PGSQL.5432")) >= _SUN_PATH_MAX or "," in str(path):
        path = Path("/tmp") / name
    owner = os.getuid()
    if system_user is not None:  # root: PostgreSQL runs as pgserver's user
        import pwd

        entry = pwd.getpwnam(system_user)
        owner = entry.pw_uid
    path.mkdir(mode=0o755, exist_ok=True)
    if system_user is not None:
        os.chown(path, entry.pw_uid, entry.pw_gid)
    # Not world-writable (pgserver makes it 0777): anyone could swap our socket for theirs,
    # and we trust whatever answers on it.
    if path.stat().st_uid != owner or path.is_symlink():
        raise EmbeddedError(f"{path} belongs to someone else; remove it and start again")
    return path
