"""The process's file descriptors: raising the soft limit at start, the long-poll cap derived
from it, and telling a failure for want of descriptors from any other.

Every connection the service holds is a descriptor: each client's (a long-poll holds one for
its whole wait), each of the database pool's, the LISTEN, duties-leader and upkeep ones. A
process at its limit can accept no connection and open none to the database, so every request
fails, enqueues and acks included. Long-polls are the only connections that a fleet holds open
by the thousand, so they are the ones capped (jobq.api.longpolls); this module says how many
fit. Standard library only: the store, the API and the settings all use it.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass

# Descriptors the process holds whatever its load: stdin/out/err, the listening socket(s),
# the event loop's (epoll, its self-pipe), log files, the embedded PostgreSQL's pipes, the
# thread pool's and the resolver's, with room to spare.
RESERVED_FOR_PROCESS = 64
# The service's own database connections besides the pool: LISTEN, the duties' lock, and the
# leader's upkeep for a while (jobq.store.notify, jobq.store.leader, jobq.store.upkeep).
RESERVED_FOR_SESSIONS = 3
# What a limit of "unlimited" counts as: no kernel hands out more descriptors than this to one
# process (Linux's default fs.nr_open is 2^20), and the cap must be a number.
UNLIMITED_AS = 1 << 20
# macOS refuses RLIM_INFINITY (and anything above kern.maxfilesperproc, 10240 by default) for
# RLIMIT_NOFILE even when the hard limit says unlimited: tried in turn after the hard limit.
_FALLBACKS = (UNLIMITED_AS, 65536, 10240)

# errno values of "out of descriptors": this process's (EMFILE) or the system's (ENFILE).
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})
# libpq reports a socket it could not create in words, not as an OSError ("could not create
# socket: Too many open files"): the same words are looked for in the driver's errors.
_EXHAUSTED_WORDS = tuple(os.strerror(n) for n in sorted(EXHAUSTED))


@dataclass(frozen=True, slots=True)
class Limit:
    """The soft limit before and after ``raise_soft_limit``, and the hard one (None: unlimited;
    None for all three where the platform has no such limit, as on Windows)."""

    before: int | None
    soft: int | None
    hard: int | None
    error: str | None = None  # why it could not be raised, when it could not

    @property
    def usable(self) -> int:
        """The soft limit as a number (unlimited counted as ``UNLIMITED_AS``)."""
        return UNLIMITED_AS if self.soft is None else self.soft

    def describe(self) -> str:
        """For the start log: what the service got, and whether it raised it."""
        if self.soft is None and self.before is None and self.hard is None:
            return "no descriptor limit on this platform"
        soft = "unlimited" if self.soft is None else str(self.soft)
        hard = "unlimited" if self.hard is None else str(self.hard)
        if self.error is not None:
            return f"descriptor limit {soft} (hard {hard}; could not raise it: {self.error})"
        if self.before != self.soft:
            before = "unlimited" if self.before is None else str(self.before)
            return f"descriptor limit {soft} (raised from {before} to the hard limit {hard})"
        return f"descriptor limit {soft} (the hard limit {hard})"


def _number(value: int, infinity: int) -> int | None:
    return None if value == infinity or value < 0 else value


def current() -> Limit:
    """The process's RLIMIT_NOFILE now."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return Limit(None, None, None)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return Limit(_number(soft, inf), _number(soft, inf), _number(hard, inf))


def raise_soft_limit() -> Limit:
    """Raise the soft RLIMIT_NOFILE to the hard one (or as near as the platform allows).

    The soft limit is what a shell's ``ulimit -n`` set, often 1024, while the hard one an
    unprivileged process may raise it to is usually far higher: a service that holds one
    descriptor per waiting worker should have all it may. Nothing is lowered; a failure is
    reported in the answer, never raised."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return Limit(None, None, None)
    inf = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = _number(soft, inf)
    if soft == hard or soft == inf:
        return Limit(before, before, _number(hard, inf))
    tries = [hard] if hard != inf else []
    if hard == inf or sys.platform == "darwin":
        tries += [n for n in _FALLBACKS if n > soft and (hard == inf or n < hard)]
    error = "no higher value was accepted"
    for value in tries:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (value, hard))
        except (ValueError, OSError) as exc:
            error = str(exc) or type(exc).__name__
            continue
        return Limit(before, value, _number(hard, inf))
    return Limit(before, before, _number(hard, inf), error=error)


def default_max_long_polls(limit: int, pool_size: int) -> int:
    """How many long-polls one process holds at once when ``JOBQ_MAX_LONG_POLLS`` is unset:
    ``(limit - pool_size - 3 - 64) // 2``, at least 1. From the descriptor limit, keep one
    per pooled database connection, 3 for the LISTEN, leader and upkeep connections and 64
    for the process's own (listening socket, event loop, logs, ...); of what is left, half
    may wait in long-polls and half stays for everything else: enqueues, acks, heartbeats,
    listings, and the idle keep-alive connections of the same workers."""
    return max(1, room(limit, pool_size) // 2)


def room(limit: int, pool_size: int) -> int:
    """The descriptors left for client connections once the process's own and its database
    connections are counted."""
    return limit - pool_size - RESERVED_FOR_SESSIONS - RESERVED_FOR_PROCESS


def exhausted(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the process or the system out of descriptors."""
    seen: set[int] = set()
    current_exc: BaseException | None = exc
    while current_exc is not None and id(current_exc) not in seen:
        seen.add(id(current_exc))
        if isinstance(current_exc, OSError) and current_exc.errno in EXHAUSTED:
            return True
        if not isinstance(current_exc, OSError) and any(
                words in str(current_exc) for words in _EXHAUSTED_WORDS):
            return True
        current_exc = current_exc.__cause__ or current_exc.__context__
    return False
