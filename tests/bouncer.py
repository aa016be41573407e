"""A private pgbouncer in front of a test database: the pooler real deployments put between
jobq and PostgreSQL (Debian's package, 1.18 in Debian 12).

    with pgbouncer(database_url, pool_mode="transaction", default_pool_size=4) as bouncer:
        bouncer.url      # postgresql://postgres@127.0.0.1:<port>/<dbname>, through the pooler

Everything but what a test needs is pgbouncer's default, as a package user gets it: in
particular no ``ignore_startup_parameters`` (jobq must work without it) and no
``max_prepared_statements`` (1.18 has none). Authentication is ``trust`` (the user is listed in
an auth_file): the test servers trust their clients too.

pgbouncer refuses to run as root (we are root here and in CI): then it is told to switch to an
unprivileged user (its ``user`` setting), the owner of the server's socket directory when the
URL names one (the embedded server's, which only its owner may enter), else ``postgres`` or
``nobody``, else a system user created for it.

Without pgbouncer installed the tests that need it are skipped, unless
JOBQ_TEST_REQUIRE_PGBOUNCER=1 (CI sets it: there they must run), then they fail."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.conftest import free_port
from tests.waiting import eventually

PoolMode = Literal["session", "transaction"]

# Created when no existing unprivileged user fits (a runner without postgres and nobody).
SYSTEM_USER = "jobq-pgbouncer"


def pgbouncer_binary() -> str:
    """The pgbouncer executable, or skip (fail where CI requires it)."""
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None)
    if found:
        return found
    why = "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
    if os.environ.get("JOBQ_TEST_REQUIRE_PGBOUNCER") == "1":
        pytest.fail(f"{why}, and JOBQ_TEST_REQUIRE_PGBOUNCER=1")
    pytest.skip(why)


def _run_as(host: str) -> pwd.struct_passwd | None:
    """Who pgbouncer runs as: None when we are not root (then it runs as us)."""
    if os.geteuid() != 0:
        return None
    if host.startswith("/"):
        # A socket directory: PostgreSQL's own user owns it, and may be the only one let in.
        owner = pwd.getpwuid(os.stat(host).st_uid)
        if owner.pw_uid != 0:
            return owner
    for name in ("postgres", "nobody", SYSTEM_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    SYSTEM_USER], check=True)
    return pwd.getpwnam(SYSTEM_USER)


def _quote_ini(value: str) -> str:
    # A value in [databases] is a libpq-style string: single quotes around anything odd.
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Bouncer:
    url: str            # the database through pgbouncer (TCP on 127.0.0.1)
    port: int
    pool_mode: PoolMode
    directory: Path     # config, auth file, log, pid file and unix socket
    proc: subprocess.Popen[bytes]

    @property
    def logfile(self) -> Path:
        return self.directory / "pgbouncer.log"

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return "".join(self.log().splitlines(keepends=True)[-lines:])


def _answers(bouncer: Bouncer) -> bool:
    if bouncer.proc.poll() is not None:
        stderr = (bouncer.directory / "stderr.log").read_text(errors="replace")
        raise RuntimeError(f"pgbouncer exited with {bouncer.proc.returncode}:\n{stderr}")
    try:
        with psycopg.connect(bouncer.url, connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    # SIGINT is pgbouncer's safe shutdown (it waits for server connections to be released);
    # a client still holding one must not keep the test waiting long.
    for sig, wait_s in ((signal.SIGINT, 1.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def pgbouncer(database_url: str, pool_mode: PoolMode = "transaction",
              default_pool_size: int | None = None) -> Iterator[Bouncer]:
    """A pgbouncer in front of ``database_url``'s database, started and ready; stopped on
    leaving the block."""
    binary = pgbouncer_binary()
    params = conninfo_to_dict(database_url)
    host = str(params.get("host") or "/var/run/postgresql")
    server_port = str(params.get("port") or "5432")
    dbname = str(params.get("dbname") or "postgres")
    user = str(params.get("user") or "postgres")
    # pgbouncer 1.18 reads a [databases] key unquoted: test databases are plain names.
    if not re.fullmatch(r"[A-Za-z0-9_]+", dbname):
        raise ValueError(f"pgbouncer harness: database name {dbname!r} is not a plain name")
    run_as = _run_as(host)

    directory = Path(tempfile.mkdtemp(prefix="jobq-bouncer-"))  # short: the socket path fits
    try:
        if run_as is not None:
            os.chown(directory, run_as.pw_uid, run_as.pw_gid)
        port = free_port()
        target = f"host={_quote_ini(host)} port={server_port} dbname={_quote_ini(dbname)}"
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(port),
            "unix_socket_dir": str(directory),
            "auth_type": "trust",
            "auth_file": str(directory / "userlist.txt"),
            "pool_mode": pool_mode,
            "logfile": str(directory / "pgbouncer.log"),
            "pidfile": str(directory / "pgbouncer.pid"),
            # The console (SHOW POOLS, SHOW SERVERS) for a test that wants to look inside.
            "admin_users": user,
        }
        if default_pool_size is not None:
            settings["default_pool_size"] = str(default_pool_size)
        if run_as is not None:
            settings["user"] = run_as.pw_name
        config = "\n".join([
            "[databases]", f"{dbname} = {target}", "",
            "[pgbouncer]", *(f"{k} = {v}" for k, v in settings.items()), "",
        ])
        (directory / "pgbouncer.ini").write_text(config)
        (directory / "userlist.txt").write_text(f'"{user}" ""\n')
        if run_as is not None:
            for name in ("pgbouncer.ini", "userlist.txt"):
                os.chown(directory / name, run_as.pw_uid, run_as.pw_gid)

        # Its stderr says why it would not start (a config error comes before the log file).
        with open(directory / "stderr.log", "wb") as stderr:
            proc = subprocess.Popen([binary, str(directory / "pgbouncer.ini")], cwd=directory,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=stderr)
        url = f"postgresql://{quote(user, safe='')}@127.0.0.1:{port}/{quote(dbname, safe='')}"
        bouncer = Bouncer(url=url, port=port, pool_mode=pool_mode, directory=directory, proc=proc)
        try:
            eventually(lambda: _answers(bouncer), timeout_s=15, poll_s=0.05,
                       what=lambda: f"pgbouncer answering on {url}:\n{bouncer.tail()}")
            yield bouncer
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
