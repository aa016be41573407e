"""What ``jobq bench --sdk`` needs around its phases: ``jobq worker`` processes started as the
README shows (each in its own process group, stopped on every way out), the CPU each side
spends (``Span``, ``Cost``), and the jobs read back from the database, since worker processes
report nothing to the bench."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psycopg

from jobq.bench.config import BenchError, log
from jobq.bench.cpu import CpuMeter, DatabaseCpu, _read_stat, _ticks

HANDLERS = "jobq.bench.noop:handlers"
STOP_TIMEOUT_S = 10.0
PR_SET_PDEATHSIG = 1


def _die_with_the_bench() -> None:
    """In the child before exec: a SIGKILL when the bench dies, the one way out on which no
    ``finally`` of ours runs (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class WorkerProcesses:
    """``jobq worker jobq.bench.noop:handlers --queues Q --concurrency C`` times ``n``, each
    with a known worker id (so a warm-up can tell that every one is connected) and its own
    process group (so stopping it stops whatever it started)."""

    def __init__(self, url: str, token: str | None, queue: str, n: int, concurrency: int) -> None:
        self.url, self.token, self.queue, self.n, self.concurrency = url, token, queue, n, concurrency
        self.ids = [f"{queue}-{i}" for i in range(n)]
        self.procs: list[subprocess.Popen[bytes]] = []
        self._log = tempfile.NamedTemporaryFile(prefix="jobq-bench-workers-", suffix=".log", delete=False)

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "JOBQ_TOKEN"}
        if self.token:
            env["JOBQ_TOKEN"] = self.token  # not on the command line, where ps shows it
        for worker_id in self.ids:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "jobq.cli", "worker", HANDLERS, "--queues", self.queue,
                 "--concurrency", str(self.concurrency), "--worker-id", worker_id, "--url", self.url],
                env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_the_bench,  # noqa: PLW1509 - no threads yet
            ))
        log(f"started {self.n} `jobq worker {HANDLERS}` process(es) on {self.queue} "
            f"(pids {', '.join(str(p.pid) for p in self.procs)}); their log: {self._log.name}")

    def check(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise BenchError(f"jobq worker (pid {p.pid}) exited with {p.returncode}:\n{self.tail()}")

    def cpu_s(self) -> float:
        """CPU seconds so far of the worker processes (all threads; children they reaped)."""
        ticks = 0
        for p in self.procs:
            if (stat := _read_stat(p.pid)) is not None:
                ticks += _ticks(stat)[1]
        return ticks / os.sysconf("SC_CLK_TCK")

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(Path(self._log.name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to each process group (a graceful stop: nothing is running by then), then
        SIGKILL to any group still there."""
        started = time.monotonic()
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # The group may outlive its leader (a child it started): end it all the same.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(STOP_TIMEOUT_S)
        if self.procs:
            log(f"stopped the worker process(es) on {self.queue} in {time.monotonic() - started:.1f} s")
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log.name)


@contextlib.contextmanager
def worker_processes(url: str, token: str | None, queue: str, n: int, concurrency: int) -> Iterator[WorkerProcesses]:
    procs = WorkerProcesses(url, token, queue, n, concurrency)
    try:
        procs.start()
        yield procs
    finally:
        procs.stop()


@dataclass(slots=True)
class Cost:
    """Wall and CPU seconds summed over the blocks of one side of a measurement. ``client``
    is the bench's own process plus the worker processes it drives."""

    jobs: int = 0
    seconds: float = 0.0
    client: float = 0.0
    service: float | None = 0.0
    database: float | None = 0.0

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def per_1000(self) -> dict[str, float | None]:
        """CPU milliseconds per 1,000 jobs (microseconds per job), each party."""
        def one(spent: float | None) -> float | None:
            return None if spent is None or self.jobs == 0 else round(spent * 1e6 / self.jobs, 1)
        return {"client": one(self.client), "service": one(self.service), "database": one(self.database)}


@dataclass(slots=True)
class Span:
    """One timed block. The clocks the block is measured by are read last on the way in and
    first on the way out, so the /proc and database reads of the meter are not counted as
    the client's CPU or the block's time."""

    meter: CpuMeter
    workers: Sequence[WorkerProcesses] = ()
    _service: float | None = None
    _database: dict[int, int] | None = None
    _workers: float = 0.0
    _client: float = 0.0
    _start: float = field(default=0.0)

    def __post_init__(self) -> None:
        sample = self.meter.sample()
        self._service, self._database = sample.service, sample.database
        self._workers = sum(w.cpu_s() for w in self.workers)
        self._client = time.process_time()
        self._start = time.perf_counter()

    def stop(self, cost: Cost, jobs: int, end: float | None = None) -> float:
        """Add this block to ``cost``; ``end`` (perf_counter) when the goal was reached
        before this call. Returns the block's seconds."""
        now = time.perf_counter()
        client = time.process_time() - self._client
        client += sum(w.cpu_s() for w in self.workers) - self._workers
        sample = self.meter.sample()
        seconds = (end if end is not None else now) - self._start
        cost.jobs += jobs
        cost.seconds += seconds
        cost.client += client
        if cost.service is not None:
            cost.service = (None if sample.service is None or self._service is None
                            else cost.service + sample.service - self._service)
        if cost.database is not None:
            cost.database = (None if sample.database is None or self._database is None
                             else cost.database + DatabaseCpu.spent_s(self._database, sample.database))
        return seconds


class JobsTable:
    """Reads of this run's jobs straight from the database: what the worker processes did
    (they report nothing to the bench) on the server's clock."""

    def __init__(self, database_url: str) -> None:
        self._conn = psycopg.connect(database_url, autocommit=True, connect_timeout=5,
                                     application_name="jobq-bench-sdk")
        self.backend_pid = self._conn.info.backend_pid

    def close(self) -> None:
        self._conn.close()

    def completed(self, queue: str) -> tuple[int, datetime | None]:
        """How many jobs of the queue are completed, and the last completion."""
        row = self._conn.execute(
            "SELECT count(*), max(completed_at) FROM jobs_all WHERE queue = %s AND status = 'completed'",
            (queue,)).fetchone()
        assert row is not None
        return int(row[0]), row[1]

    def workers_done(self, queue: str) -> set[str]:
        rows = self._conn.execute(
            "SELECT DISTINCT worker_id FROM jobs_all WHERE queue = %s AND status = 'completed'", (queue,)).fetchall()
        return {r[0] for r in rows}

    def pickups(self, queue: str) -> tuple[list[float], int]:
        """Visible → claimed of every claimed job of the queue (ms, server clock: claimed_at is
        the claim's now(), visible_at the enqueue's), and how many were never claimed."""
        rows = self._conn.execute(
            "SELECT extract(epoch FROM claimed_at - visible_at)::float8 * 1000 FROM jobs_all "
            "WHERE queue = %s AND claimed_at IS NOT NULL", (queue,)).fetchall()
        left = self._conn.execute(
            "SELECT count(*) FROM jobs WHERE queue = %s AND claimed_at IS NULL", (queue,)).fetchone()
        return [float(r[0]) for r in rows], int(left[0]) if left else 0


def perf_time_of(moment: datetime) -> float:
    """A database timestamp on the perf_counter clock (the database runs on this machine, so
    its clock is ours)."""
    return time.perf_counter() - (time.time() - moment.timestamp())
