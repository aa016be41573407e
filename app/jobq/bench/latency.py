"""Pickup latency at a fixed offered rate: single enqueues paced by the clock while idle
workers long-poll, each job's visible → claimed time read on the server's clock from the
claim's answer alone."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobq.bench.client import BenchClient
from jobq.bench.config import JOB_TYPE, LEASE_MS, BenchConfig
from jobq.bench.cpu import CpuMeter
from jobq.bench.load import open_clients, post, run_all, work
from jobq.bench.phases import Tally, timed

# Idle workers need a moment to reach their long-poll before the paced enqueues begin.
LATENCY_SETTLE_S = 0.5


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

    def picked_up(lease: dict[str, Any]) -> None:
        pickups.append(pickup_ms(lease))

    async def send(client: BenchClient, ticks: asyncio.Queue[int | None]) -> None:
        while (await ticks.get()) is not None:
            await post(client, "/v1/jobs", {"type": JOB_TYPE, "queue": queue})

    sent_seconds = 0.0

    async def pace(producers: Sequence[BenchClient]) -> None:
        # The pacer hands out ticks on the clock and a pool of producers sends them, so one
        # slow answer does not hold back the next enqueue: the offered rate stays put.
        nonlocal sent_seconds
        await asyncio.sleep(LATENCY_SETTLE_S)
        ticks: asyncio.Queue[int | None] = asyncio.Queue()
        sending = asyncio.create_task(run_all([send(c, ticks) for c in producers]))
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
        async with open_clients(cfg, url, base) as (producers, workers):
            await run_all([
                pace(producers),
                run_all([work(c, f"bench-latency-{i}", queue, 1, tally, picked_up) for i, c in enumerate(workers)],
                        until_first=True),
            ])

    phase = await timed(f"pickup latency at {cfg.latency_rate:g} jobs/s", tally, meter,
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
