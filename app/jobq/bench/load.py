"""Load over HTTP: producers and workers, each task with its own lean client (``client``),
driving a service through the enqueue, drain and end-to-end phases of one mode."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from jobq.bench.client import BenchClient
from jobq.bench.config import JOB_TYPE, LEASE_MS, WAIT_MS, BenchConfig, BenchError, Mode, shares
from jobq.bench.cpu import CpuMeter
from jobq.bench.phases import Phase, Tally, timed

REQUEST_TIMEOUT_S = 30.0


async def post(client: BenchClient, path: str, body: Any) -> Any:
    status, answer = await client.post(path, body)
    if status >= 300:
        raise BenchError(f"POST {path}: {status} {answer[:500].decode(errors='replace')}")
    return orjson.loads(answer)


async def produce(client: BenchClient, queue: str, count: int, size: int, tally: Tally) -> None:
    left = count
    while left > 0:
        if size > 1:
            n = min(size, left)
            await post(client, "/v1/jobs/batch", {"jobs": [{"type": JOB_TYPE, "queue": queue}] * n})
        else:
            n = 1
            await post(client, "/v1/jobs", {"type": JOB_TYPE, "queue": queue})
        left -= n
        tally.add(n)


async def work(client: BenchClient, worker_id: str, queue: str, size: int, tally: Tally,
               on_claim: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Claim and ack until the phase's goal is reached (by any worker). ``on_claim`` sees
    each lease as the claim answered it, before the ack."""
    claim = {"worker_id": worker_id, "queues": [queue], "limit": size, "lease_ms": LEASE_MS,
             "wait_ms": WAIT_MS}
    while not tally.complete:
        leases = (await post(client, "/v1/leases", claim))["leases"]
        if not leases:
            continue
        if on_claim is not None:
            for lease in leases:
                on_claim(lease)
        if size > 1:
            answer = await post(client, "/v1/leases/ack",
                                {"acks": [{"lease_id": lease["lease_id"]} for lease in leases]})
            lost = [r for r in answer["results"] if not r["ok"]]
            if lost:
                raise BenchError(f"batch ack lost {len(lost)} leases, e.g. {lost[0]}")
        else:
            for lease in leases:
                await post(client, f"/v1/leases/{lease['lease_id']}/ack", {})
        tally.add(len(leases))


async def run_all(coros: Sequence[Coroutine[Any, Any, None]], *, until_first: bool = False) -> None:
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


async def enqueue_all(clients: Sequence[BenchClient], queue: str, jobs: int, size: int,
                      tally: Tally) -> None:
    await run_all([produce(c, queue, n, size, tally)
                   for c, n in zip(clients, shares(jobs, len(clients)), strict=True)])


async def drain_all(clients: Sequence[BenchClient], queue: str, size: int, tally: Tally) -> None:
    await run_all([work(c, f"bench-{i}", queue, size, tally) for i, c in enumerate(clients)],
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


async def warm_up(clients: Sequence[BenchClient], queue: str) -> None:
    """Open every client's connection and let the service open its pool before any timing."""
    for status, _ in await asyncio.gather(*(c.get("/healthz") for c in clients)):
        if status != 200:
            raise BenchError(f"GET /healthz: {status}")
    await post(clients[0], "/v1/jobs/batch", {"jobs": [{"type": JOB_TYPE, "queue": queue}] * len(clients)})
    claims = [{"worker_id": "bench-warmup", "queues": [queue], "limit": 1, "lease_ms": LEASE_MS}
              for _ in clients]
    answers = await asyncio.gather(*(post(c, "/v1/leases", body) for c, body in zip(clients, claims, strict=True)))
    # Claims that met each other's locks got nothing: sweep, so no warm-up job is left behind.
    answers.append(await post(clients[0], "/v1/leases", {**claims[0], "limit": 1000}))
    acks = [{"lease_id": lease["lease_id"]} for a in answers for lease in a["leases"]]
    if acks:
        await post(clients[0], "/v1/leases/ack", {"acks": acks})


@contextlib.asynccontextmanager
async def open_clients(cfg: BenchConfig, url: str,
                       base: str) -> AsyncIterator[tuple[list[BenchClient], list[BenchClient]]]:
    """One client per producer and per worker task (each its own keep-alive connection, no
    pool to contend for), warmed up."""
    async with contextlib.AsyncExitStack() as stack:
        producers = [await stack.enter_async_context(BenchClient(url, cfg.token, REQUEST_TIMEOUT_S))
                     for _ in range(cfg.producers)]
        workers = [await stack.enter_async_context(BenchClient(url, cfg.token, REQUEST_TIMEOUT_S))
                   for _ in range(cfg.workers)]
        await warm_up([*producers, *workers], f"{base}.warmup")
        yield producers, workers


async def http_mode(cfg: BenchConfig, url: str, meter: CpuMeter, mode: Mode, base: str) -> ModeResult:
    size = cfg.batch if mode is Mode.batch else 1
    async with open_clients(cfg, url, base) as (producers, workers):
        queue = f"{base}.{mode.value}"
        enqueue = await timed(f"{mode.value} enqueue", Tally(cfg.jobs), meter, cfg.timeout_s,
                              lambda t: enqueue_all(producers, queue, cfg.jobs, size, t))
        drain = await timed(f"{mode.value} drain", Tally(cfg.jobs), meter, cfg.timeout_s,
                            lambda t: drain_all(workers, queue, size, t))

        e2e_queue = f"{base}.{mode.value}-e2e"

        async def together(acked: Tally) -> None:
            await run_all([enqueue_all(producers, e2e_queue, cfg.jobs, size, Tally(cfg.jobs)),
                           drain_all(workers, e2e_queue, size, acked)])

        end_to_end = await timed(f"{mode.value} end-to-end", Tally(cfg.jobs), meter, cfg.timeout_s, together)
    return ModeResult(cfg.jobs, enqueue, drain, end_to_end)
