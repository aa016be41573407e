"""``jobq bench``: drive a jobq service over HTTP and measure it against raw SQL.

What is measured, per mode (``single``: one job per call, one claim of limit 1 and one ack
per job; ``batch``: batch enqueues of ``--batch`` jobs, claims of ``limit`` = batch, batch
acks):

- enqueue rate: P producers fill a fresh queue;
- drain rate: W workers empty it;
- end-to-end rate: producers and workers together on another fresh queue, from the first
  enqueue to the last ack;
- the CPU time of the service per 1,000 jobs in each of those phases (the ``jobq serve``
  process and its descendants, from /proc; only when the bench started the service), and,
  for reference, that of the bench itself and of the PostgreSQL server when it runs on this
  machine (the whole server: whatever else it serves at the time counts too).

Then the pickup latency at a fixed offered rate: single enqueues paced by the clock while W
idle workers long-poll. Pickup is measured per job on the server's clock, from the claim
answer alone: the claim sets ``locked_until = now() + lease_ms``, so ``locked_until - lease_ms``
is the claim's ``now()``, and ``visible_at`` is the enqueue's.

With ``--baseline``, right after each mode's HTTP phases (so the pair being compared runs
under the same machine noise) the same named statements run straight on PostgreSQL with sync
psycopg, 1, 2 and 4 connections in threads, the best count kept per figure: the batch
ceiling inserts batches with JobInsertMany and drains with JobClaim + LeaseAckMany; the single
ceiling runs each job's whole life, JobInsert, JobClaim (limit 1), LeaseAck, each statement
its own transaction as in the service. The HTTP figures are reported as ratios to these.

Between measurements the bench deletes the jobs it made and, on a server with autovacuum off,
VACUUMs the jobs table, so no measurement runs on the dead rows of the one before.

Every phase has a timeout and stops by itself. The bench talks only to loopback addresses
(or a Unix socket, for the database). Progress goes to stderr; stdout carries only the table
or the JSON. Figures from one noisy machine: compare the ratios within a run, not runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from jobq.bench_http import BenchClient

# Long enough that no lease expires during a phase, whatever the machine's load.
LEASE_MS = 60_000
# Workers long-poll rather than spin when the queue is momentarily empty (the end of a drain,
# an end-to-end run whose producers are behind, the latency phase).
WAIT_MS = 1_000
REQUEST_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
PROGRESS_EVERY_S = 2.0
# Idle workers need a moment to reach their long-poll before the paced enqueues begin.
LATENCY_SETTLE_S = 0.5
DEFAULT_CONNECTIONS = (1, 2, 4)
JOB_TYPE = "bench.noop"

# Informational targets shown next to the figures (issue 5).
TARGET_BATCH_DRAIN_RATIO = 0.5
TARGET_SINGLE_E2E_RATIO = 0.6
TARGET_PICKUP_P50_MS = 5.0
TARGET_PICKUP_P99_MS = 20.0


class Mode(StrEnum):
    single = "single"
    batch = "batch"
    both = "both"


class BenchError(RuntimeError):
    """The bench could not measure: a phase timed out, or the service answered an error."""


def _log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# -- configuration -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchConfig:
    url: str | None  # a running service; None: the bench starts one
    database_url: str | None  # the service's database; None: embedded (when we start it)
    data_dir: Path  # home of the embedded PostgreSQL
    mode: Mode
    jobs: int
    producers: int
    workers: int
    batch: int
    queue: str | None  # base of the queue names; None: a fresh one per run
    latency_rate: float
    latency_seconds: float
    baseline: bool
    server_workers: int
    connections: tuple[int, ...]
    timeout_s: float  # per phase
    token: str | None

    @property
    def modes(self) -> list[Mode]:
        return [Mode.batch, Mode.single] if self.mode is Mode.both else [self.mode]


def _is_loopback_host(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_service_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not _is_loopback_host(parts.hostname):
        raise BenchError(f"--url must be a loopback http address (127.0.0.1), not {url!r}")
    return url.rstrip("/")


def check_database_url(url: str) -> str:
    """The libpq URL, refused unless it names a Unix socket or a loopback address."""
    from psycopg.conninfo import conninfo_to_dict

    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            url = "postgresql://" + url[len(prefix):]
    hosts = str(conninfo_to_dict(url).get("host") or "")
    for host in hosts.split(",") if hosts else [""]:
        if host and not host.startswith("/") and not _is_loopback_host(host):
            raise BenchError(f"the bench only talks to a database on this machine, not {host!r}")
    return url


# -- progress and CPU ------------------------------------------------------------------------


class Tally:
    """Jobs done in a phase, counted by its tasks or threads and read by the progress line.
    ``finished_at`` is when the goal was reached: the phase's end, however long the tasks
    that were still long-polling take to stop."""

    def __init__(self, goal: int) -> None:
        self.goal = goal
        self.done = 0
        self.finished_at: float | None = None
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n
            if self.finished_at is None and self.done >= self.goal:
                self.finished_at = time.perf_counter()

    @property
    def complete(self) -> bool:
        return self.done >= self.goal


@contextlib.contextmanager
def _progress(label: str, tally: Tally) -> Iterator[None]:
    """A line on stderr every few seconds; a thread, so the sync baseline gets one too."""
    stop = threading.Event()
    start = time.perf_counter()

    def report() -> None:
        while not stop.wait(PROGRESS_EVERY_S):
            rate = tally.done / (time.perf_counter() - start)
            _log(f"{label}: {tally.done:,}/{tally.goal:,} jobs, {rate:,.0f} jobs/s")

    _log(f"{label}: {tally.goal:,} jobs")
    thread = threading.Thread(target=report, name="bench-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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


def database_facts(database_url: str) -> dict[str, str] | None:
    """Settings that move the figures a lot: a server without autovacuum bloats the queue
    table run after run (claims then wade through dead index entries), and synchronous_commit
    decides what a commit costs."""
    import psycopg

    facts: dict[str, str] = {}
    try:
        with psycopg.connect(database_url, connect_timeout=5) as conn:
            for name in ("server_version", "autovacuum", "synchronous_commit", "fsync"):
                row = conn.execute(f"SHOW {name}").fetchone()
                facts[name] = "" if row is None else str(row[0])
    except psycopg.Error:
        return None
    return facts


class Tidy:
    """Between measurements: remove the jobs this run made and, when the server has autovacuum
    off, VACUUM the jobs table, so that every measurement starts on a table without the dead
    rows of the ones before it. Without this the raw-SQL ceiling, measured after the HTTP
    phases, ran on more garbage than they did, and a reused database slowed run after run
    (single-mode drain fell from 567 to 115 jobs/s over a day's runs). Only rows of this run's
    queues are touched."""

    def __init__(self, database_url: str, base: str, vacuum: bool) -> None:
        self.url, self.prefix, self.vacuum = database_url, f"{base}.", vacuum

    def __call__(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("DELETE FROM jobs WHERE starts_with(queue, %s)", (self.prefix,))
            if self.vacuum:
                conn.execute("VACUUM jobs")  # not ANALYZE: statistics of an emptied table mislead plans


def _no_tidy() -> None:
    return None


class DatabaseCpu:
    """CPU seconds of the PostgreSQL backends serving our database (the service's pool, the
    raw-SQL connections, autovacuum on it), when PostgreSQL runs on this machine. Only those:
    the server may be shared, and what it does for other databases is not our cost. The WAL
    writer and checkpointer, which serve every database at once, are left out."""

    def __init__(self, database_url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(database_url, autocommit=True, connect_timeout=5,
                                     application_name="jobq-bench-meter")
        self._me = self._conn.info.backend_pid

    @classmethod
    def open(cls, database_url: str) -> DatabaseCpu | None:
        import psycopg

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

    def sample(self) -> dict[int, int]:
        """pid -> CPU ticks of each backend on our database now."""
        rows = self._conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s",
            (self._me,)).fetchall()
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


# -- phase results -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Phase:
    jobs: int
    seconds: float
    cpu_s: dict[str, float | None]  # service, database, bench

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def cpu_ms_per_1000(self, who: str) -> float | None:
        spent = self.cpu_s.get(who)
        return None if spent is None else round(spent * 1000 / (self.jobs / 1000), 1)


def _phase(jobs: int, start: float, end: float, before: CpuSample, after: CpuSample) -> Phase:
    service = None if before.service is None or after.service is None else after.service - before.service
    database = (None if before.database is None or after.database is None
                else DatabaseCpu.spent_s(before.database, after.database))
    return Phase(jobs, end - start, {"service": service, "database": database, "bench": after.bench - before.bench})


async def _timed(label: str, tally: Tally, meter: CpuMeter, timeout_s: float,
                 run: Callable[[Tally], Awaitable[None]]) -> Phase:
    with _progress(label, tally):
        before = meter.sample()
        start = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                await run(tally)
        except TimeoutError:
            raise BenchError(f"{label}: not done after {timeout_s:.0f} s "
                             f"({tally.done:,}/{tally.goal:,} jobs)") from None
        end = tally.finished_at or time.perf_counter()
        after = meter.sample()
    phase = _phase(tally.goal, start, end, before, after)
    _log(f"{label}: {phase.rate:,.0f} jobs/s")
    return phase


def _timed_sync(label: str, tally: Tally, meter: CpuMeter, run: Callable[[Tally], None]) -> Phase:
    with _progress(label, tally):
        before = meter.sample()
        start = time.perf_counter()
        run(tally)
        if not tally.complete:  # the threads gave up at their deadline
            raise BenchError(f"{label}: not done in time ({tally.done:,}/{tally.goal:,} jobs)")
        end = tally.finished_at or time.perf_counter()
        after = meter.sample()
    phase = _phase(tally.goal, start, end, before, after)
    _log(f"{label}: {phase.rate:,.0f} jobs/s")
    return phase


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """On uvloop when it is installed (uvicorn[standard] brings it), as the service runs: the
    bench's own loop should cost as little of the shared CPU as it can."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - a dependency of uvicorn[standard]
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


# -- HTTP ------------------------------------------------------------------------------------------


def _client(url: str, token: str | None) -> BenchClient:
    """One client per task: its own keep-alive connection, no pool to contend for."""
    return BenchClient(url, token, REQUEST_TIMEOUT_S)


async def _post(client: BenchClient, path: str, body: Any) -> Any:
    status, answer = await client.post(path, body)
    if status >= 300:
        raise BenchError(f"POST {path}: {status} {answer[:500].decode(errors='replace')}")
    return orjson.loads(answer)


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def _produce(client: BenchClient, queue: str, count: int, size: int, tally: Tally) -> None:
    left = count
    while left > 0:
        if size > 1:
            n = min(size, left)
            await _post(client, "/v1/jobs/batch", {"jobs": [{"type": JOB_TYPE, "queue": queue}] * n})
        else:
            n = 1
            await _post(client, "/v1/jobs", {"type": JOB_TYPE, "queue": queue})
        left -= n
        tally.add(n)


async def _work(client: BenchClient, worker_id: str, queue: str, size: int, tally: Tally) -> None:
    """Claim and ack until the phase's goal is reached (by any worker)."""
    claim = {"worker_id": worker_id, "queues": [queue], "limit": size, "lease_ms": LEASE_MS,
             "wait_ms": WAIT_MS}
    while not tally.complete:
        leases = (await _post(client, "/v1/leases", claim))["leases"]
        if not leases:
            continue
        if size > 1:
            answer = await _post(client, "/v1/leases/ack",
                                 {"acks": [{"lease_id": lease["lease_id"]} for lease in leases]})
            lost = [r for r in answer["results"] if not r["ok"]]
            if lost:
                raise BenchError(f"batch ack lost {len(lost)} leases, e.g. {lost[0]}")
        else:
            for lease in leases:
                await _post(client, f"/v1/leases/{lease['lease_id']}/ack", {})
        tally.add(len(leases))


async def _run_all(coros: Sequence[Coroutine[Any, Any, None]], *, until_first: bool = False) -> None:
    """Run the coroutines as tasks until all are done (``until_first``: until one is, as a
    worker that saw the goal reached). The rest are then stopped: workers may be waiting in a
    long-poll that nothing will end early. A failure, or the phase's timeout cancelling us,
    stops them all."""
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        done, _ = await asyncio.wait(
            tasks, return_when=asyncio.FIRST_COMPLETED if until_first else asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # raises what the task raised
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _enqueue_all(clients: Sequence[BenchClient], queue: str, jobs: int, size: int,
                       tally: Tally) -> None:
    await _run_all([_produce(c, queue, n, size, tally)
                    for c, n in zip(clients, _shares(jobs, len(clients)), strict=True)])


async def _drain_all(clients: Sequence[BenchClient], queue: str, size: int, tally: Tally) -> None:
    await _run_all([_work(c, f"bench-{i}", queue, size, tally) for i, c in enumerate(clients)],
                   until_first=True)


@dataclass(slots=True)
class ModeResult:
    jobs: int
    enqueue: Phase
    drain: Phase
    end_to_end: Phase

    def phases(self) -> dict[str, Phase]:
        return {"enqueue": self.enqueue, "drain": self.drain, "end_to_end": self.end_to_end}

    def cpu(self, who: str) -> dict[str, float | None] | None:
        figures = {name: p.cpu_ms_per_1000(who) for name, p in self.phases().items()}
        return None if all(v is None for v in figures.values()) else figures

    def as_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "enqueue_rate": round(self.enqueue.rate),
            "drain_rate": round(self.drain.rate),
            "end_to_end_rate": round(self.end_to_end.rate),
            "seconds": {name: round(p.seconds, 3) for name, p in self.phases().items()},
            "cpu_ms_per_1000_jobs": self.cpu("service"),
            "db_cpu_ms_per_1000_jobs": self.cpu("database"),
            "bench_cpu_ms_per_1000_jobs": self.cpu("bench"),
        }


async def _warm_up(clients: Sequence[BenchClient], queue: str) -> None:
    """Open every client's connection and let the service open its pool before any timing."""
    for status, _ in await asyncio.gather(*(c.get("/healthz") for c in clients)):
        if status != 200:
            raise BenchError(f"GET /healthz: {status}")
    await _post(clients[0], "/v1/jobs/batch", {"jobs": [{"type": JOB_TYPE, "queue": queue}] * len(clients)})
    claims = [{"worker_id": "bench-warmup", "queues": [queue], "limit": 1, "lease_ms": LEASE_MS}
              for _ in clients]
    answers = await asyncio.gather(*(_post(c, "/v1/leases", body) for c, body in zip(clients, claims, strict=True)))
    # Claims that met each other's locks got nothing: sweep, so no warm-up job is left behind.
    answers.append(await _post(clients[0], "/v1/leases", {**claims[0], "limit": 1000}))
    acks = [{"lease_id": lease["lease_id"]} for a in answers for lease in a["leases"]]
    if acks:
        await _post(clients[0], "/v1/leases/ack", {"acks": acks})


async def http_mode(cfg: BenchConfig, url: str, meter: CpuMeter, mode: Mode, base: str) -> ModeResult:
    size = cfg.batch if mode is Mode.batch else 1
    async with contextlib.AsyncExitStack() as stack:
        producers = [await stack.enter_async_context(_client(url, cfg.token)) for _ in range(cfg.producers)]
        workers = [await stack.enter_async_context(_client(url, cfg.token)) for _ in range(cfg.workers)]
        await _warm_up([*producers, *workers], f"{base}.warmup")

        queue = f"{base}.{mode.value}"
        enqueue = await _timed(f"{mode.value} enqueue", Tally(cfg.jobs), meter, cfg.timeout_s,
                               lambda t: _enqueue_all(producers, queue, cfg.jobs, size, t))
        drain = await _timed(f"{mode.value} drain", Tally(cfg.jobs), meter, cfg.timeout_s,
                             lambda t: _drain_all(workers, queue, size, t))

        e2e_queue = f"{base}.{mode.value}-e2e"

        async def together(acked: Tally) -> None:
            await _run_all([_enqueue_all(producers, e2e_queue, cfg.jobs, size, Tally(cfg.jobs)),
                            _drain_all(workers, e2e_queue, size, acked)])

        end_to_end = await _timed(f"{mode.value} end-to-end", Tally(cfg.jobs), meter, cfg.timeout_s, together)
    return ModeResult(cfg.jobs, enqueue, drain, end_to_end)


def pickup_ms(lease: dict[str, Any], lease_ms: int = LEASE_MS) -> float:
    """Visible → claimed on the server's clock: the claim's now() is locked_until - lease_ms."""
    locked_until = datetime.fromisoformat(lease["locked_until"])
    visible_at = datetime.fromisoformat(lease["job"]["visible_at"])
    return (locked_until - visible_at).total_seconds() * 1000 - lease_ms


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation: every figure is one job's)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * p / 100)) - 1]


async def latency(cfg: BenchConfig, url: str, meter: CpuMeter, base: str) -> dict[str, Any]:
    queue = f"{base}.latency"
    total = max(1, round(cfg.latency_rate * cfg.latency_seconds))
    pickups: list[float] = []
    tally = Tally(total)

    async def work(client: BenchClient, worker_id: str) -> None:
        claim = {"worker_id": worker_id, "queues": [queue], "limit": 1, "lease_ms": LEASE_MS,
                 "wait_ms": WAIT_MS}
        while not tally.complete:
            for lease in (await _post(client, "/v1/leases", claim))["leases"]:
                pickups.append(pickup_ms(lease))
                await _post(client, f"/v1/leases/{lease['lease_id']}/ack", {})
                tally.add(1)

    async def produce(client: BenchClient, ticks: asyncio.Queue[int | None]) -> None:
        while (await ticks.get()) is not None:
            await _post(client, "/v1/jobs", {"type": JOB_TYPE, "queue": queue})

    sent_seconds = 0.0

    async def pace(producers: Sequence[BenchClient]) -> None:
        # The pacer hands out ticks on the clock and a pool of producers sends them, so one
        # slow answer does not hold back the next enqueue: the offered rate stays put.
        nonlocal sent_seconds
        await asyncio.sleep(LATENCY_SETTLE_S)
        ticks: asyncio.Queue[int | None] = asyncio.Queue()
        sending = asyncio.create_task(_run_all([produce(c, ticks) for c in producers]))
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            for k in range(total):
                await asyncio.sleep(max(0.0, start + k / cfg.latency_rate - loop.time()))
                ticks.put_nowait(k)
            for _ in producers:
                ticks.put_nowait(None)
            await sending
        finally:
            sending.cancel()
        sent_seconds = loop.time() - start

    async def run(tally: Tally) -> None:
        async with contextlib.AsyncExitStack() as stack:
            producers = [await stack.enter_async_context(_client(url, cfg.token)) for _ in range(cfg.producers)]
            workers = [await stack.enter_async_context(_client(url, cfg.token)) for _ in range(cfg.workers)]
            await _warm_up([*producers, *workers], f"{base}.warmup")
            await _run_all([
                pace(producers),
                _run_all([work(c, f"bench-latency-{i}") for i, c in enumerate(workers)], until_first=True),
            ])

    phase = await _timed(f"pickup latency at {cfg.latency_rate:g} jobs/s", tally, meter,
                         cfg.timeout_s + cfg.latency_seconds, run)
    return {
        "offered_rate": cfg.latency_rate,
        "achieved_rate": round(total / sent_seconds, 1) if sent_seconds > 0 else None,
        "seconds": cfg.latency_seconds,
        "jobs": len(pickups),
        "workers": cfg.workers,
        "p50_ms": round(percentile(pickups, 50), 2),
        "p95_ms": round(percentile(pickups, 95), 2),
        "p99_ms": round(percentile(pickups, 99), 2),
        "max_ms": round(max(pickups), 2),
        "cpu_ms_per_1000_jobs": phase.cpu_ms_per_1000("service"),
        "db_cpu_ms_per_1000_jobs": phase.cpu_ms_per_1000("database"),
    }


# -- the raw-SQL ceiling -----------------------------------------------------------------------


def _in_threads(connections: Sequence[Any], target: Callable[[Any, int], None], timeout_s: float) -> None:
    """Run ``target(conn, index)`` in one thread per connection; re-raise the first failure."""
    errors: list[BaseException] = []

    def run(conn: Any, index: int) -> None:
        try:
            target(conn, index)
        except BaseException as exc:  # handed to the main thread, which re-raises it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, i), daemon=True) for i, c in enumerate(connections)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in threads):
        # The targets watch the same deadline, so they are about to stop.
        raise BenchError(f"raw SQL: not done after {timeout_s:.0f} s")


class RawSql:
    """The service's own statements straight on PostgreSQL, with no HTTP in between."""

    def __init__(self, database_url: str, batch: int, timeout_s: float, meter: CpuMeter) -> None:
        self.url = database_url
        self.batch = batch
        self.timeout_s = timeout_s
        self.meter = meter

    @contextlib.contextmanager
    def _connections(self, n: int, queue: str) -> Iterator[list[Any]]:
        import psycopg
        from psycopg.rows import dict_row

        from jobq.store.queries import Q

        with contextlib.ExitStack() as stack:
            conns = [stack.enter_context(psycopg.connect(
                self.url, autocommit=True, row_factory=dict_row, application_name="jobq-bench-raw",
                options="-c TimeZone=UTC")) for _ in range(n)]
            conns[0].execute(Q.QueueEnsure, {"queue": queue})
            yield conns

    def _claim_and_ack(self, conn: Any, queue: str, tally: Tally, deadline: float) -> None:
        """Drain with batch claims and batch acks until the goal is reached by any thread."""
        from jobq.store.db import dumps_json
        from jobq.store.queries import Q

        claim = {"queue": queue, "types": None, "limit": self.batch, "lease_ms": LEASE_MS, "worker_id": "raw"}
        while not tally.complete and time.monotonic() < deadline:
            rows = conn.execute(Q.JobClaim, claim).fetchall()
            if not rows:
                time.sleep(0.001)  # the rest is held by the other threads' claims
                continue
            acks = [{"job_id": r["id"], "token": r["lease_token"], "result": None} for r in rows]
            conn.execute(Q.LeaseAckMany, {"acks": dumps_json(acks)})
            tally.add(len(rows))

    def batch_ceiling(self, jobs: int, connections: int, queue: str) -> tuple[Phase, Phase]:
        from jobq.store.db import dumps_json
        from jobq.store.queries import Q

        row = {"queue": queue, "type": JOB_TYPE, "payload": {}, "priority": 0, "max_attempts": None,
               "idempotency_key": None, "run_at": None, "delay_ms": 0}
        with self._connections(connections, queue) as conns:
            shares = _shares(jobs, connections)

            def insert(tally: Tally) -> None:
                deadline = time.monotonic() + self.timeout_s

                def target(conn: Any, index: int) -> None:
                    left = shares[index]
                    while left > 0 and time.monotonic() < deadline:
                        n = min(self.batch, left)
                        conn.execute(Q.JobInsertMany, {"jobs": dumps_json([row] * n)})
                        left -= n
                        tally.add(n)

                _in_threads(conns, target, self.timeout_s)

            def drain(tally: Tally) -> None:
                deadline = time.monotonic() + self.timeout_s
                _in_threads(conns, lambda c, _: self._claim_and_ack(c, queue, tally, deadline), self.timeout_s)

            label = f"raw batch ×{connections}"
            enqueue = _timed_sync(f"{label} insert", Tally(jobs), self.meter, insert)
            drained = _timed_sync(f"{label} drain", Tally(jobs), self.meter, drain)
        return enqueue, drained

    def single_ceiling(self, jobs: int, connections: int, queue: str) -> Phase:
        from jobq.store.queries import Q

        insert = {"queue": queue, "type": JOB_TYPE, "payload": "{}", "priority": 0, "max_attempts": None,
                  "idempotency_key": None, "run_at": None, "delay_ms": 0}
        claim = {"queue": queue, "types": None, "limit": 1, "lease_ms": LEASE_MS, "worker_id": "raw"}
        with self._connections(connections, queue) as conns:
            shares = _shares(jobs, connections)

            def whole_lives(tally: Tally) -> None:
                deadline = time.monotonic() + self.timeout_s

                def target(conn: Any, index: int) -> None:
                    # Each thread enqueues its share and claims after each enqueue; a claim may
                    # take another thread's job, or none while the others hold the rest: the
                    # goal is the total, so whoever is left finishes it.
                    left = shares[index]
                    while not tally.complete and time.monotonic() < deadline:
                        if left > 0:
                            conn.execute(Q.JobInsert, insert)
                            left -= 1
                        rows = conn.execute(Q.JobClaim, claim).fetchall()
                        for r in rows:
                            conn.execute(Q.LeaseAck, {"job_id": r["id"], "token": r["lease_token"], "result": None})
                        tally.add(len(rows))
                        if not rows and left == 0:
                            time.sleep(0.001)

                _in_threads(conns, target, self.timeout_s)

            return _timed_sync(f"raw single ×{connections} whole life", Tally(jobs), self.meter, whole_lives)


def _best(by_connections: dict[int, dict[str, Phase]], figure: str) -> tuple[Phase, int]:
    count = max(by_connections, key=lambda c: by_connections[c][figure].rate)
    return by_connections[count][figure], count


def _raw_figures(phases: dict[str, Phase]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, phase in phases.items():
        out[f"{name}_rate"] = round(phase.rate)
        out[f"{name}_db_cpu_ms_per_1000_jobs"] = phase.cpu_ms_per_1000("database")
    return out


def raw_batch(raw: RawSql, jobs: int, counts: Sequence[int], base: str,
              tidy: Callable[[], None] = _no_tidy) -> dict[str, Any]:
    by: dict[int, dict[str, Phase]] = {}
    for c in counts:
        tidy()
        enqueue, drain = raw.batch_ceiling(jobs, c, f"{base}.raw-batch-{c}")
        by[c] = {"enqueue": enqueue, "drain": drain}
    enqueue, enqueue_c = _best(by, "enqueue")
    drain, drain_c = _best(by, "drain")
    return {
        "batch_enqueue_rate": round(enqueue.rate), "batch_enqueue_connections": enqueue_c,
        "batch_drain_rate": round(drain.rate), "batch_drain_connections": drain_c,
        "batch_by_connections": {str(c): _raw_figures(f) for c, f in by.items()},
    }


def raw_single(raw: RawSql, jobs: int, counts: Sequence[int], base: str,
               tidy: Callable[[], None] = _no_tidy) -> dict[str, Any]:
    by: dict[int, dict[str, Phase]] = {}
    for c in counts:
        tidy()
        by[c] = {"whole_life": raw.single_ceiling(jobs, c, f"{base}.raw-single-{c}")}
    best, count = _best(by, "whole_life")
    return {
        "single_whole_life_rate": round(best.rate), "single_whole_life_connections": count,
        "single_by_connections": {str(c): _raw_figures(f) for c, f in by.items()},
    }


# -- the service under test --------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class Service:
    url: str
    database_url: str | None
    pid: int | None  # set when the bench started it


@contextlib.contextmanager
def started_service(database_url: str, server_workers: int, token: str | None) -> Iterator[Service]:
    """``jobq serve`` on a free loopback port, its output in a file shown if it fails."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="jobq-bench-serve-", suffix=".log", delete=False)
    env = {**os.environ, "JOBQ_DATABASE_URL": database_url, "JOBQ_HOST": "127.0.0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobq.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(server_workers)],
        env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    failed = True
    try:
        _wait_ready(url, proc, Path(log.name), token)
        _log(f"started jobq serve (pid {proc.pid}, {server_workers} worker process"
             f"{'es' if server_workers > 1 else ''}) on {url}; its log: {log.name}")
        yield Service(url, database_url, proc.pid)
        failed = False
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT_S)
        log.close()
        if not failed:
            with contextlib.suppress(OSError):
                os.unlink(log.name)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, token: str | None) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    with httpx.Client(base_url=url, timeout=1, trust_env=False) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"jobq serve exited with {proc.returncode}:\n{_tail(log)}")
            try:
                if client.get("/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    raise BenchError(f"jobq serve was not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(log)}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def _embedded(data_dir: Path) -> Iterator[str]:
    """The embedded PostgreSQL ``jobq serve`` would use, started by the bench so that it
    knows the URL (for the baseline and the database's CPU); the service attaches to it."""
    from jobq.embedded import EmbeddedPostgres, EmbeddedUnavailable

    server = EmbeddedPostgres(data_dir / "pgdata")
    try:
        url = server.start()
    except EmbeddedUnavailable as exc:
        raise BenchError(str(exc)) from None
    try:
        _log(f"embedded PostgreSQL under {data_dir}/ (set JOBQ_DATABASE_URL to use your own)")
        yield url
    finally:
        server.stop()


@contextlib.contextmanager
def service_for(cfg: BenchConfig) -> Iterator[Service]:
    if cfg.url is not None:
        db = check_database_url(cfg.database_url) if cfg.database_url else None
        yield Service(check_service_url(cfg.url), db, None)
        return
    with contextlib.ExitStack() as stack:
        if cfg.database_url:
            db = check_database_url(cfg.database_url)
        else:
            db = stack.enter_context(_embedded(cfg.data_dir))
        yield stack.enter_context(started_service(db, cfg.server_workers, cfg.token))


# -- the run --------------------------------------------------------------------------------------


def _ratio(http: float, ceiling: float) -> float | None:
    return round(http / ceiling, 3) if ceiling > 0 else None


def _target(figure: str, value: float | None, op: str, target: float, unit: str) -> dict[str, Any]:
    met = None if value is None else (value >= target if op == ">=" else value <= target)
    return {"figure": figure, "value": value, "op": op, "target": target, "unit": unit, "met": met}


def run(cfg: BenchConfig) -> dict[str, Any]:
    base = cfg.queue or f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    with service_for(cfg) as service, contextlib.ExitStack() as stack:
        database = DatabaseCpu.open(service.database_url) if service.database_url else None
        if database is not None:
            stack.callback(database.close)
        meter = CpuMeter(service.pid, database)
        facts = database_facts(service.database_url) if service.database_url else None
        vacuum = facts is not None and facts["autovacuum"] != "on"
        if vacuum:
            _log("autovacuum is off on this PostgreSQL server: the bench runs VACUUM on the jobs table "
                 "between measurements")
        tidy: Callable[[], None] = (Tidy(service.database_url, base, vacuum) if service.database_url
                                    else _no_tidy)
        stack.callback(tidy)
        raw: RawSql | None = None
        if cfg.baseline:
            if service.database_url is None:
                raise BenchError("--baseline with --url needs --database-url (or JOBQ_DATABASE_URL)")
            raw = RawSql(service.database_url, cfg.batch, cfg.timeout_s, meter)
        report: dict[str, Any] = {
            "config": {
                "url": service.url, "started_service": service.pid is not None,
                "server_workers": cfg.server_workers if service.pid is not None else None,
                "jobs": cfg.jobs, "producers": cfg.producers, "workers": cfg.workers, "batch": cfg.batch,
                "queue": base, "lease_ms": LEASE_MS, "wait_ms": WAIT_MS,
                "cpus": os.cpu_count(), "database_cpu_measured": database is not None, "database": facts,
            },
        }
        baseline: dict[str, Any] = {}
        for mode in cfg.modes:
            tidy()
            result = _run(http_mode(cfg, service.url, meter, mode, base))
            report[mode.value] = result.as_json()
            if raw is not None:
                counts = cfg.connections
                if mode is Mode.batch:
                    baseline |= raw_batch(raw, cfg.jobs, counts, base, tidy)
                else:
                    baseline |= raw_single(raw, cfg.jobs, counts, base, tidy)
        if cfg.latency_seconds > 0:
            tidy()
            report["latency"] = _run(latency(cfg, service.url, meter, base))
    if raw is not None:
        report["baseline"] = baseline
    report["ratios"], report["targets"] = _compare(report)
    return report


def _compare(report: dict[str, Any]) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    ratios: dict[str, float | None] = {}
    targets: list[dict[str, Any]] = []
    base = report.get("baseline", {})
    if "batch" in report and "batch_drain_rate" in base:
        ratios["batch_enqueue_vs_raw"] = _ratio(report["batch"]["enqueue_rate"], base["batch_enqueue_rate"])
        ratios["batch_drain_vs_raw"] = _ratio(report["batch"]["drain_rate"], base["batch_drain_rate"])
        targets.append(_target("batch drain / raw batch drain", ratios["batch_drain_vs_raw"], ">=",
                               TARGET_BATCH_DRAIN_RATIO, "ratio"))
    if "single" in report and "single_whole_life_rate" in base:
        ratios["single_e2e_vs_raw"] = _ratio(report["single"]["end_to_end_rate"], base["single_whole_life_rate"])
        targets.append(_target("single end-to-end / raw single whole life", ratios["single_e2e_vs_raw"], ">=",
                               TARGET_SINGLE_E2E_RATIO, "ratio"))
    if "latency" in report:
        targets.append(_target("pickup p50", report["latency"]["p50_ms"], "<=", TARGET_PICKUP_P50_MS, "ms"))
        targets.append(_target("pickup p99", report["latency"]["p99_ms"], "<=", TARGET_PICKUP_P99_MS, "ms"))
    return ratios, targets


# -- output ------------------------------------------------------------------------------------------


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and unit != "ratio":
        return f"{value:,.2f}{unit}" if value < 100 else f"{value:,.0f}{unit}"
    if unit == "ratio":
        return f"{value:.0%}"
    return f"{value:,}{unit}"


def render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    cfg = report["config"]
    server = (f"started, {cfg['server_workers']} worker process(es)" if cfg["started_service"]
              else "given by --url")
    console.print(f"jobq bench: {cfg['jobs']:,} jobs per phase, {cfg['producers']} producers, "
                  f"{cfg['workers']} workers, batch {cfg['batch']}; service {cfg['url']} ({server}); "
                  f"{cfg['cpus']} CPUs", highlight=False)
    if cfg["database"]:
        db = cfg["database"]
        console.print(f"PostgreSQL {db['server_version']}: autovacuum {db['autovacuum']}, synchronous_commit "
                      f"{db['synchronous_commit']}, fsync {db['fsync']}", highlight=False)

    rates = Table(title="throughput (jobs/s) and CPU per 1,000 jobs (ms: service / database / bench)")
    for column in ("mode", "phase", "jobs/s", "service", "database", "bench"):
        rates.add_column(column, justify="left" if column in ("mode", "phase") else "right")
    for mode in ("batch", "single"):
        if mode not in report:
            continue
        r = report[mode]
        for phase, key in (("enqueue", "enqueue_rate"), ("drain", "drain_rate"), ("end-to-end", "end_to_end_rate")):
            name = phase.replace("-", "_")
            cpu = [(r[k] or {}).get(name) for k in
                   ("cpu_ms_per_1000_jobs", "db_cpu_ms_per_1000_jobs", "bench_cpu_ms_per_1000_jobs")]
            rates.add_row(mode, phase, _fmt(r[key]), *(_fmt(c) for c in cpu))
    console.print(rates)

    if "latency" in report:
        lat = report["latency"]
        table = Table(title=f"pickup latency (visible → claimed, server clock), {lat['jobs']:,} jobs")
        for column in ("offered jobs/s", "achieved", "p50 ms", "p95 ms", "p99 ms", "max ms"):
            table.add_column(column, justify="right")
        table.add_row(_fmt(lat["offered_rate"]), _fmt(lat["achieved_rate"]), _fmt(lat["p50_ms"]),
                      _fmt(lat["p95_ms"]), _fmt(lat["p99_ms"]), _fmt(lat["max_ms"]))
        console.print(table)

    if "baseline" in report:
        b = report["baseline"]
        table = Table(title="raw-SQL ceiling (same statements, psycopg, no HTTP)")
        for column in ("figure", "jobs/s", "best of connections", "HTTP jobs/s", "HTTP / raw"):
            table.add_column(column, justify="left" if column == "figure" else "right")
        ratios = report["ratios"]
        if "batch_drain_rate" in b:
            table.add_row("batch insert", _fmt(b["batch_enqueue_rate"]), str(b["batch_enqueue_connections"]),
                          _fmt(report["batch"]["enqueue_rate"]), _fmt(ratios.get("batch_enqueue_vs_raw"), "ratio"))
            table.add_row("batch drain", _fmt(b["batch_drain_rate"]), str(b["batch_drain_connections"]),
                          _fmt(report["batch"]["drain_rate"]), _fmt(ratios.get("batch_drain_vs_raw"), "ratio"))
        if "single_whole_life_rate" in b:
            table.add_row("single whole life (HTTP: end-to-end)", _fmt(b["single_whole_life_rate"]),
                          str(b["single_whole_life_connections"]), _fmt(report["single"]["end_to_end_rate"]),
                          _fmt(ratios.get("single_e2e_vs_raw"), "ratio"))
        console.print(table)

    if report["targets"]:
        table = Table(title="targets (informational)")
        for column in ("figure", "value", "target", "met"):
            table.add_column(column, justify="left" if column == "figure" else "right")
        for t in report["targets"]:
            unit = "ratio" if t["unit"] == "ratio" else " ms"
            met = "–" if t["met"] is None else ("yes" if t["met"] else "[red]no[/red]")
            table.add_row(t["figure"], _fmt(t["value"], unit), f"{t['op']} {_fmt(t['target'], unit)}", met)
        console.print(table)


def main(cfg: BenchConfig, *, as_json: bool) -> int:
    try:
        report = run(cfg)
    except BenchError as exc:
        _log(f"error: {exc}")
        return 1
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        render(report)
    return 0
