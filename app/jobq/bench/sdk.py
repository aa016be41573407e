"""``jobq bench --sdk``: the path Python users take, measured beside the bench's lean raw
client in the same run, each pair interleaved round by round (the order alternating) so both
sides of a ratio run under the same machine noise:

- sequential enqueue: one ``Client.enqueue`` at a time (the sync client, as the README's
  producer) against the raw client's single POST, per-call latency p50/p99;
- ``enqueue_many``: ``AsyncClient.enqueue_many`` batches of ``--batch`` from ``--producers``
  tasks against the raw batch enqueue from as many;
- drain: a pre-filled queue emptied by ``--sdk-workers`` ``jobq worker
  jobq.bench.noop:handlers`` processes of ``--sdk-concurrency`` each, and by one in-process
  ``Worker`` with as many slots in all (run as ``Worker.run`` does: its own asyncio loop, here
  on a thread), against raw-client tasks, one per worker process, each claiming ``limit`` =
  concurrency and acking the batch: the loop a worker would run if it cost nothing;
- pickup at 100 and 1,000 jobs/s offered, with one and with ``--sdk-workers`` idle worker
  processes, against as many idle raw-client tasks (same claim limit); the enqueues are
  paced at most one per 10 ms, so 1,000 jobs/s comes as batches of 10 (see ``_pace``);
- per job, the CPU of each side (the bench's process plus its worker processes), of the
  service and of the database.

How a drain is timed, for every side alike: the queue is paused, filled, the drainers wait in
their long-polls, then the queue is unpaused; the drain ends with its last ack (the raw tasks
count theirs; for the workers, which report nothing, the bench polls the database and takes
the last ``completed_at``). Pickups are read back from the database for both sides:
``claimed_at - visible_at``, the server's clock. Worker processes are warmed up (each has
completed a job) before anything is timed, and stopped, by process group, on every way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from jobq.bench import noop
from jobq.bench.client import BenchClient
from jobq.bench.config import JOB_TYPE, BenchConfig, BenchError, log, shares
from jobq.bench.cpu import CpuMeter
from jobq.bench.latency import percentile
from jobq.bench.load import REQUEST_TIMEOUT_S, enqueue_all, post, run_all, warm_up, work
from jobq.bench.phases import Tally, run_async
from jobq.bench.sdk_procs import Cost, JobsTable, Span, WorkerProcesses, perf_time_of, worker_processes
from jobq.client import AsyncClient, Client, NewJob
from jobq.worker import Worker

SEQUENTIAL_CALLS_MAX = 2_000  # per side
SEQUENTIAL_ROUNDS = 4
ROUNDS = 2  # of enqueue_many and of drains; each moves jobs / ROUNDS
PICKUP_RATES = (100.0, 1_000.0)
POLL_S = 0.02  # the database poll for the end of a worker's drain
SETTLE_S = 0.25  # drainers reach their long-polls before the clock starts
WARM_TIMEOUT_S = 90.0
PICKUP_GRACE_S = 10.0  # after the last paced enqueue, for the workers to catch up
PACE_TICK_S = 0.01  # the pickup phases' enqueues: at most one per 10 ms, a batch when the rate needs more


def _order(i: int, sides: Sequence[str]) -> list[str]:
    """Alternate which side goes first, so a trend in the machine's load favours neither."""
    return list(sides) if i % 2 == 0 else list(reversed(sides))


@dataclass(slots=True)
class _Run:
    cfg: BenchConfig
    url: str
    meter: CpuMeter
    base: str
    tidy: Callable[[], None]
    table: JobsTable

    @property
    def deadline(self) -> float:
        return time.monotonic() + self.cfg.timeout_s

    def bench_client(self) -> BenchClient:
        return BenchClient(self.url, self.cfg.token, REQUEST_TIMEOUT_S)


def _latencies(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p99_ms": None, "mean_ms": None}
    return {"p50_ms": round(percentile(values, 50), 3), "p99_ms": round(percentile(values, 99), 3),
            "mean_ms": round(sum(values) / len(values), 3)}


def _pickup_figures(pickups: list[float]) -> dict[str, float | None]:
    if not pickups:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    return {"p50_ms": round(percentile(pickups, 50), 2), "p95_ms": round(percentile(pickups, 95), 2),
            "p99_ms": round(percentile(pickups, 99), 2), "max_ms": round(max(pickups), 2)}


# Sequential enqueue: one call at a time, per-call latency.


async def _raw_sequential(run: _Run, queue: str, n: int, latencies: list[float], cost: Cost,
                          deadline: float) -> None:
    body = {"type": JOB_TYPE, "queue": queue}
    async with run.bench_client() as client:
        await post(client, "/v1/jobs", body)  # the connection is open before the clock starts
        span = Span(run.meter)
        for _ in range(n):
            start = time.perf_counter()
            await post(client, "/v1/jobs", body)
            latencies.append((time.perf_counter() - start) * 1000)
            if time.monotonic() > deadline:
                raise BenchError(f"sequential enqueue (raw): not done after {run.cfg.timeout_s:.0f} s")
        span.stop(cost, n)


def _sdk_sequential(run: _Run, client: Client, queue: str, n: int, latencies: list[float], cost: Cost,
                    deadline: float) -> None:
    span = Span(run.meter)
    for _ in range(n):
        start = time.perf_counter()
        client.enqueue(JOB_TYPE, queue=queue)
        latencies.append((time.perf_counter() - start) * 1000)
        if time.monotonic() > deadline:
            raise BenchError(f"sequential enqueue (sdk): not done after {run.cfg.timeout_s:.0f} s")
    span.stop(cost, n)


def sequential_enqueue(run: _Run) -> dict[str, Any]:
    calls = min(run.cfg.jobs, SEQUENTIAL_CALLS_MAX)
    latencies: dict[str, list[float]] = {"raw": [], "sdk": []}
    costs = {"raw": Cost(), "sdk": Cost()}
    deadline = run.deadline
    log(f"sdk: sequential enqueue, {calls:,} calls each side (Client.enqueue and the raw client, "
        f"interleaved in {SEQUENTIAL_ROUNDS} rounds)")
    with Client(run.url, token=run.cfg.token) as client:
        client.enqueue(JOB_TYPE, queue=f"{run.base}.seq-sdk")  # opens its connection
        for i, n in enumerate(shares(calls, SEQUENTIAL_ROUNDS)):
            if n == 0:
                continue
            for side in _order(i, ("raw", "sdk")):
                if side == "raw":
                    run_async(_raw_sequential(run, f"{run.base}.seq-raw", n, latencies["raw"], costs["raw"],
                                              deadline))
                else:
                    _sdk_sequential(run, client, f"{run.base}.seq-sdk", n, latencies["sdk"], costs["sdk"],
                                    deadline)
    out: dict[str, Any] = {"calls": calls}
    for side in ("raw", "sdk"):
        out[side] = {**_latencies(latencies[side]), "cpu_ms_per_1000_jobs": costs[side].per_1000()}
    log(f"sdk: sequential enqueue p50 raw {out['raw']['p50_ms']} ms, sdk {out['sdk']['p50_ms']} ms")
    return out


# The rest runs on one event loop, with the worker processes up.


async def _set_paused(client: BenchClient, queue: str, paused: bool) -> None:
    status, answer = await client.request("PATCH", f"/v1/queues/{queue}", orjson.dumps({"paused": paused}))
    if status >= 300:
        raise BenchError(f"PATCH /v1/queues/{queue}: {status} {answer[:500].decode(errors='replace')}")


async def _until_completed(run: _Run, queue: str, goal: int, timeout_s: float,
                           procs: WorkerProcesses | None = None, *, strict: bool = True) -> float | None:
    """Poll the database until ``goal`` jobs of the queue are completed; the moment of the
    last completion (perf_counter clock), or None when ``timeout_s`` passed first (an error
    when ``strict``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, last = run.table.completed(queue)
        if done >= goal:
            now = time.perf_counter()
            return min(now, perf_time_of(last)) if last is not None else now
        if procs is not None:
            procs.check()
        if time.monotonic() > deadline:
            if strict:
                raise BenchError(f"{queue}: {done:,}/{goal:,} jobs completed after {timeout_s:.0f} s")
            return None
        await asyncio.sleep(POLL_S)


async def _warm_workers(run: _Run, control: BenchClient, sets: Sequence[WorkerProcesses]) -> None:
    """Until each worker process has completed a job: connected, its imports and first
    claim behind it, before any clock starts."""
    deadline = time.monotonic() + WARM_TIMEOUT_S
    for procs in sets:
        while missing := set(procs.ids) - run.table.workers_done(procs.queue):
            procs.check()
            if time.monotonic() > deadline:
                raise BenchError(f"worker(s) {sorted(missing)} took no job within {WARM_TIMEOUT_S:.0f} s:\n"
                                 f"{procs.tail()}")
            await post(control, "/v1/jobs/batch",
                       {"jobs": [{"type": JOB_TYPE, "queue": procs.queue}] * (procs.n * procs.concurrency)})
            await asyncio.sleep(0.5)
    run.tidy()


async def _sdk_produce(client: AsyncClient, queue: str, count: int, size: int) -> None:
    left = count
    while left > 0:
        n = min(size, left)
        await client.enqueue_many([NewJob(type=JOB_TYPE, queue=queue)] * n)
        left -= n


async def enqueue_many(run: _Run, producers: Sequence[BenchClient]) -> dict[str, Any]:
    cfg = run.cfg
    per_round = max(1, cfg.jobs // ROUNDS)
    costs = {"raw": Cost(), "sdk": Cost()}
    async with AsyncClient(run.url, token=cfg.token) as client:
        # One call per producer task at once: the pool opens as many connections.
        await asyncio.gather(*(client.enqueue_many([NewJob(type=JOB_TYPE, queue=f"{run.base}.warmup")])
                               for _ in producers))
        for i in range(ROUNDS):
            for side in _order(i, ("raw", "sdk")):
                queue = f"{run.base}.many-{side}"
                job: Awaitable[None]
                if side == "raw":
                    job = enqueue_all(producers, queue, per_round, cfg.batch, Tally(per_round))
                else:
                    job = run_all([_sdk_produce(client, queue, n, cfg.batch)
                                   for n in shares(per_round, len(producers)) if n])
                span = Span(run.meter)
                try:
                    async with asyncio.timeout(cfg.timeout_s):
                        await job
                except TimeoutError:
                    raise BenchError(f"sdk: enqueue_many ({side}) not done after {cfg.timeout_s:.0f} s") from None
                seconds = span.stop(costs[side], per_round)
                log(f"sdk: enqueue_many {side}: {per_round / seconds:,.0f} jobs/s")
            run.tidy()
    return {"jobs": per_round * ROUNDS, "batch": cfg.batch, "producers": len(producers),
            **{side: {"rate": round(c.rate), "cpu_ms_per_1000_jobs": c.per_1000()} for side, c in costs.items()}}


class _InProcessWorker:
    """A ``Worker`` run as ``Worker.run`` runs it (``asyncio.run`` on a plain loop), on a
    thread of the bench so that ``stop`` can end it."""

    def __init__(self, run: _Run, queue: str, concurrency: int) -> None:
        self.worker = Worker(run.url, queues=[queue], handlers=noop.handlers, concurrency=concurrency,
                             token=run.cfg.token, worker_id=f"{queue}-0")
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="bench-sdk-worker", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self.worker.run_async())
        except BaseException as exc:  # noqa: BLE001 - reported by check()
            self.failure = exc

    def check(self) -> None:
        if self.failure is not None:
            raise BenchError(f"in-process Worker stopped: {self.failure!r}")

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(30)


async def _drain_once(run: _Run, side: str, queue: str, jobs: int, control: BenchClient,
                      producers: Sequence[BenchClient], raw_clients: Sequence[BenchClient],
                      procs: WorkerProcesses, cost: Cost) -> float:
    cfg = run.cfg
    concurrency = procs.concurrency
    async with contextlib.AsyncExitStack() as stack:
        inproc: _InProcessWorker | None = None
        if side == "in_process":
            inproc = _InProcessWorker(run, queue, concurrency * procs.n)
            inproc.thread.start()
            stack.callback(inproc.stop)
            await warm_up_in_process(run, control, queue, inproc)
        await _set_paused(control, queue, True)
        await enqueue_all(producers, queue, jobs, cfg.batch, Tally(jobs))
        raw_task: asyncio.Task[None] | None = None
        tally = Tally(jobs)
        if side == "raw":
            raw_task = asyncio.create_task(run_all(
                [work(c, f"bench-drain-{i}", queue, concurrency, tally) for i, c in enumerate(raw_clients)],
                until_first=True))

            async def stop_raw() -> None:
                assert raw_task is not None
                raw_task.cancel()
                await asyncio.gather(raw_task, return_exceptions=True)

            stack.push_async_callback(stop_raw)
        await asyncio.sleep(SETTLE_S)
        span = Span(run.meter, [procs] if side == "worker" else ())
        await _set_paused(control, queue, False)
        if raw_task is not None:
            try:
                async with asyncio.timeout(cfg.timeout_s):
                    await asyncio.shield(raw_task)
            except TimeoutError:
                raise BenchError(f"sdk: raw drain not done after {cfg.timeout_s:.0f} s "
                                 f"({tally.done:,}/{jobs:,} jobs)") from None
            end = tally.finished_at
        else:
            end = await _until_completed(run, queue, jobs, cfg.timeout_s, procs if side == "worker" else None)
        if inproc is not None:
            inproc.check()
        seconds = span.stop(cost, jobs, end=end)
    log(f"sdk: drain {side}: {jobs / seconds:,.0f} jobs/s")
    run.tidy()
    return seconds


async def warm_up_in_process(run: _Run, control: BenchClient, queue: str, inproc: _InProcessWorker) -> None:
    deadline = time.monotonic() + WARM_TIMEOUT_S
    await post(control, "/v1/jobs", {"type": JOB_TYPE, "queue": queue})
    while not run.table.workers_done(queue):
        inproc.check()
        if time.monotonic() > deadline:
            raise BenchError(f"in-process Worker took no job within {WARM_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.1)
    run.tidy()


async def drains(run: _Run, control: BenchClient, producers: Sequence[BenchClient],
                 procs: WorkerProcesses) -> dict[str, Any]:
    per_round = max(1, run.cfg.jobs // ROUNDS)
    costs = {"raw": Cost(), "worker": Cost(), "in_process": Cost()}
    queues = {"raw": f"{run.base}.drain-raw", "worker": procs.queue, "in_process": f"{run.base}.drain-inproc"}
    async with contextlib.AsyncExitStack() as stack:
        raw_clients = [await stack.enter_async_context(run.bench_client()) for _ in range(procs.n)]
        for status, _ in await asyncio.gather(*(c.get("/healthz") for c in raw_clients)):
            if status != 200:
                raise BenchError(f"GET /healthz: {status}")
        log(f"sdk: drains of {per_round:,} jobs, {ROUNDS} rounds: {procs.n} raw task(s) claiming "
            f"{procs.concurrency} at a time, {procs.n} `jobq worker` process(es) of concurrency "
            f"{procs.concurrency}, one in-process Worker of concurrency {procs.n * procs.concurrency}")
        for i in range(ROUNDS):
            for side in _order(i, ("raw", "worker", "in_process")):
                await _drain_once(run, side, queues[side], per_round, control, producers, raw_clients, procs,
                                  costs[side])
    return {"jobs": per_round * ROUNDS, "worker_processes": procs.n, "concurrency": procs.concurrency,
            **{side: {"rate": round(c.rate), "cpu_ms_per_1000_jobs": c.per_1000()} for side, c in costs.items()}}


def _per_tick(rate: float) -> int:
    """Jobs per paced enqueue: one at up to 100 jobs/s, above that a batch every PACE_TICK_S."""
    return max(1, round(rate * PACE_TICK_S))


async def _pace(producers: Sequence[BenchClient], queue: str, rate: float, total: int) -> float:
    """Enqueues handed out on the clock to a pool of producers (one slow answer does not hold
    back the next); the seconds it took to send them all. Above 100 jobs/s they are batches
    every PACE_TICK_S: 1,000 single POSTs a second would take most of this machine's two
    cores in the service alone (and the raw bench's single enqueue tops out near there), so
    the workers would be measured starved, and the offered rate would not be met."""
    size = _per_tick(rate)
    counts = [size] * (total // size) + ([total % size] if total % size else [])

    async def send(client: BenchClient, ticks: asyncio.Queue[int | None]) -> None:
        while (n := await ticks.get()) is not None:
            if n == 1:
                await post(client, "/v1/jobs", {"type": JOB_TYPE, "queue": queue})
            else:
                await post(client, "/v1/jobs/batch", {"jobs": [{"type": JOB_TYPE, "queue": queue}] * n})

    ticks: asyncio.Queue[int | None] = asyncio.Queue()
    sending = asyncio.create_task(run_all([send(c, ticks) for c in producers]))
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        for k, n in enumerate(counts):
            await asyncio.sleep(max(0.0, start + k * size / rate - loop.time()))
            ticks.put_nowait(n)
        for _ in producers:
            ticks.put_nowait(None)
        await sending
    finally:
        sending.cancel()
    return loop.time() - start


async def _pickup_once(run: _Run, side: str, rate: float, producers: Sequence[BenchClient],
                       procs: WorkerProcesses) -> dict[str, Any]:
    cfg = run.cfg
    total = max(1, round(rate * cfg.latency_seconds))
    grace = max(PICKUP_GRACE_S, cfg.latency_seconds)
    cost = Cost()
    async with contextlib.AsyncExitStack() as stack:
        if side == "raw":
            queue = f"{run.base}.pickup-raw{procs.n}"
            clients = [await stack.enter_async_context(run.bench_client()) for _ in range(procs.n)]
            tally = Tally(total)
            task = asyncio.create_task(run_all(
                [work(c, f"bench-pickup-{i}", queue, procs.concurrency, tally) for i, c in enumerate(clients)],
                until_first=True))

            async def stop_raw() -> None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

            stack.push_async_callback(stop_raw)
        else:
            queue = procs.queue
            procs.check()
        await asyncio.sleep(SETTLE_S)
        span = Span(run.meter, [procs] if side == "sdk" else ())
        try:
            async with asyncio.timeout(cfg.timeout_s + cfg.latency_seconds):
                sent_s = await _pace(producers, queue, rate, total)
        except TimeoutError:
            raise BenchError(f"sdk: pickup at {rate:g} jobs/s: enqueues not done in time") from None
        if side == "raw":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await asyncio.shield(task)
        else:
            await _until_completed(run, queue, total, grace, procs, strict=False)
        span.stop(cost, total)
    pickups, unclaimed = run.table.pickups(queue)
    run.tidy()
    figures = {"achieved_rate": round(total / sent_s, 1) if sent_s > 0 else None, "jobs": len(pickups),
               "unclaimed": unclaimed, **_pickup_figures(pickups), "cpu_ms_per_1000_jobs": cost.per_1000()}
    log(f"sdk: pickup at {rate:g} jobs/s, {procs.n} {side} worker(s): p50 {figures['p50_ms']} ms, "
        f"p99 {figures['p99_ms']} ms" + (f", {unclaimed:,} never claimed" if unclaimed else ""))
    return figures


async def pickups(run: _Run, producers: Sequence[BenchClient],
                  sets: dict[int, WorkerProcesses]) -> list[dict[str, Any]]:
    out = []
    i = 0
    for rate in PICKUP_RATES:
        for n in sorted(sets):
            pair: dict[str, Any] = {"offered_rate": rate, "workers": n, "seconds": run.cfg.latency_seconds,
                                    "jobs_per_enqueue": _per_tick(rate)}
            for side in _order(i, ("raw", "sdk")):
                pair[side] = await _pickup_once(run, side, rate, producers, sets[n])
            out.append(pair)
            i += 1
    return out


async def _with_workers(run: _Run, sets: dict[int, WorkerProcesses]) -> dict[str, Any]:
    cfg = run.cfg
    out: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        control = await stack.enter_async_context(run.bench_client())
        producers = [await stack.enter_async_context(run.bench_client()) for _ in range(cfg.producers)]
        await warm_up([control, *producers], f"{run.base}.warmup")
        await _warm_workers(run, control, list(sets.values()))
        out["enqueue_many"] = await enqueue_many(run, producers)
        out["drain"] = await drains(run, control, producers, sets[max(sets)])
        if cfg.latency_seconds > 0:
            out["pickup"] = await pickups(run, producers, sets)
    return out


def sdk(cfg: BenchConfig, url: str, meter: CpuMeter, base: str, tidy: Callable[[], None],
        database_url: str) -> dict[str, Any]:
    """The ``sdk`` section of the report (see the module's docstring)."""
    table = JobsTable(database_url)
    if meter.database is not None:
        meter.database.ignore(table.backend_pid)
    run = _Run(cfg, url, meter, base, tidy, table)
    try:
        report: dict[str, Any] = {"worker_processes": cfg.sdk_workers, "concurrency": cfg.sdk_concurrency}
        tidy()
        report["sequential_enqueue"] = sequential_enqueue(run)
        tidy()
        with contextlib.ExitStack() as stack:
            sets = {n: stack.enter_context(worker_processes(url, cfg.token, f"{base}.sdk-w{n}", n,
                                                            cfg.sdk_concurrency))
                    for n in sorted({1, cfg.sdk_workers})}
            report |= run_async(_with_workers(run, sets))
        return report
    finally:
        table.close()
