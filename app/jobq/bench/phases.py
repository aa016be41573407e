"""Phases: a counted amount of work, timed from start to goal with the CPU it cost, a
progress line on stderr while it runs, and a timeout that ends it. Both the HTTP load
(async) and the raw-SQL baseline (threads) are measured here, the same way."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from jobq.bench.config import BenchError, log
from jobq.bench.cpu import CpuMeter, DatabaseCpu

PROGRESS_EVERY_S = 2.0


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
def progress(label: str, tally: Tally) -> Iterator[None]:
    """A line on stderr every few seconds; a thread, so the sync baseline gets one too."""
    stop = threading.Event()
    start = time.perf_counter()

    def report() -> None:
        while not stop.wait(PROGRESS_EVERY_S):
            rate = tally.done / (time.perf_counter() - start)
            log(f"{label}: {tally.done:,}/{tally.goal:,} jobs, {rate:,.0f} jobs/s")

    log(f"{label}: {tally.goal:,} jobs")
    thread = threading.Thread(target=report, name="bench-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@dataclass(frozen=True, slots=True)
class Phase:
    """A measured phase: its jobs, its seconds, and the CPU seconds each party spent on it."""

    jobs: int
    seconds: float
    cpu_s: dict[str, float | None]  # service, database, bench

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def cpu_ms_per_1000(self, who: str) -> float | None:
        spent = self.cpu_s.get(who)
        return None if spent is None else round(spent * 1000 / (self.jobs / 1000), 1)


class _Stopwatch:
    """Wall clock and CPU from the start of a phase to its goal."""

    def __init__(self, meter: CpuMeter) -> None:
        self.meter = meter
        self.before = meter.sample()
        self.start = time.perf_counter()

    def stop(self, tally: Tally) -> Phase:
        end = tally.finished_at or time.perf_counter()
        after, before = self.meter.sample(), self.before
        service = None if before.service is None or after.service is None else after.service - before.service
        database = (None if before.database is None or after.database is None
                    else DatabaseCpu.spent_s(before.database, after.database))
        return Phase(tally.goal, end - self.start,
                     {"service": service, "database": database, "bench": after.bench - before.bench})


async def timed(label: str, tally: Tally, meter: CpuMeter, timeout_s: float,
                run: Callable[[Tally], Awaitable[None]]) -> Phase:
    with progress(label, tally):
        watch = _Stopwatch(meter)
        try:
            async with asyncio.timeout(timeout_s):
                await run(tally)
        except TimeoutError:
            raise BenchError(f"{label}: not done after {timeout_s:.0f} s "
                             f"({tally.done:,}/{tally.goal:,} jobs)") from None
        phase = watch.stop(tally)
    log(f"{label}: {phase.rate:,.0f} jobs/s")
    return phase


def timed_sync(label: str, tally: Tally, meter: CpuMeter, run: Callable[[Tally], None]) -> Phase:
    with progress(label, tally):
        watch = _Stopwatch(meter)
        run(tally)
        if not tally.complete:  # the threads gave up at their deadline
            raise BenchError(f"{label}: not done in time ({tally.done:,}/{tally.goal:,} jobs)")
        phase = watch.stop(tally)
    log(f"{label}: {phase.rate:,.0f} jobs/s")
    return phase


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """On uvloop when it is installed (uvicorn[standard] brings it), as the service runs: the
    bench's own loop should cost as little of the shared CPU as it can."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - a dependency of uvicorn[standard]
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)
