"""CPU metering: the seconds the service's process tree, our database's PostgreSQL backends
and the bench itself spend during a phase, read from /proc. The service's only when the bench
started it (it then knows the process to follow), the database's only when PostgreSQL runs on
this machine."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg


def _ticks(stat: str) -> tuple[int, int]:
    """(parent pid, CPU ticks) from a /proc/<pid>/stat line: utime+stime+cutime+cstime, so a
    process's reaped children (uvicorn's restarted workers, say) still count."""
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def _read_stat(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read()
    except OSError:  # gone meanwhile, or not ours to see
        return None


def _tree_cpu_s(root: int) -> float | None:
    """CPU seconds so far of a process and all its descendants."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _read_stat(int(entry.name))) is not None:
            table[int(entry.name)] = _ticks(stat)
    if root not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    ticks, stack = 0, [root]
    while stack:
        pid = stack.pop()
        ticks += table[pid][1]
        stack.extend(children.get(pid, ()))
    return ticks / os.sysconf("SC_CLK_TCK")


class DatabaseCpu:
    """CPU seconds of the PostgreSQL backends serving our database (the service's pool, the
    raw-SQL connections, autovacuum on it), when PostgreSQL runs on this machine. Only those:
    the server may be shared, and what it does for other databases is not our cost. The WAL
    writer and checkpointer, which serve every database at once, are left out."""

    def __init__(self, database_url: str) -> None:
        self._conn = psycopg.connect(database_url, autocommit=True, connect_timeout=5,
                                     application_name="jobq-bench-meter")
        self._me = self._conn.info.backend_pid
        self._ignored = [self._me]

    @classmethod
    def open(cls, database_url: str) -> DatabaseCpu | None:
        try:
            meter = cls(database_url)
        except psycopg.Error:
            return None
        # A pid from another namespace (PostgreSQL in a container) names some other process
        # here, or none: it must be PostgreSQL's for the figure to mean anything.
        try:
            local = Path(f"/proc/{meter._me}/cmdline").read_bytes().startswith(b"postgres")
        except OSError:
            local = False
        if not local:
            meter.close()
            return None
        return meter

    def ignore(self, backend_pid: int) -> None:
        """Leave out a backend of the bench's own (one reading what the workers did): its
        work is the bench's, not the service's."""
        self._ignored.append(backend_pid)

    def sample(self) -> dict[int, int]:
        """pid -> CPU ticks of each backend on our database now."""
        rows = self._conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> ALL (%s)",
            (self._ignored,)).fetchall()
        out: dict[int, int] = {}
        for (pid,) in rows:
            if (stat := _read_stat(pid)) is not None:
                out[pid] = _ticks(stat)[1]
        return out

    @staticmethod
    def spent_s(before: dict[int, int], after: dict[int, int]) -> float:
        # Per backend: one that started meanwhile counts whole, one that ended meanwhile is
        # lost (its last moments are not counted; the pools keep their connections open).
        ticks = sum(t - before.get(pid, 0) for pid, t in after.items())
        return ticks / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self._conn.close()


@dataclass(frozen=True, slots=True)
class CpuSample:
    service: float | None
    database: dict[int, int] | None
    bench: float


@dataclass(slots=True)
class CpuMeter:
    """CPU seconds so far of the service's process tree, our database's backends, and the
    bench's own process."""

    service_pid: int | None = None
    database: DatabaseCpu | None = None

    def sample(self) -> CpuSample:
        return CpuSample(
            service=_tree_cpu_s(self.service_pid) if self.service_pid else None,
            database=self.database.sample() if self.database else None,
            bench=time.process_time(),
        )
