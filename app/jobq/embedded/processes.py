"""Processes the embedded PostgreSQL cares about: is a pid alive (a zombie is not), and is it
the postmaster of a given data directory rather than whatever now has a dead server's pid."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether pid is a running process. A zombie has finished: its parent has just not
    reaped it yet (a SIGKILLed owner often is one for a moment)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def is_postmaster_of(pid: int, pgdata: Path) -> bool:
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


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
