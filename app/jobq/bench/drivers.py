"""``jobq bench --drivers``: the cost of one statement through each psycopg path we could use.

The service talks to PostgreSQL through async psycopg. Issue 5 asked to measure that choice
before settling on it: on this kind of VM a ``SELECT 1`` loop had run about 3x slower in
async mode than in sync mode. This runs the same small prepared statement (a primary-key
lookup in ``jobs``) through each path and reports statements per second and this process's
CPU per statement:

- async: one AsyncConnection, one statement per round trip (what the service does);
- async pool x8: eight concurrent tasks sharing an AsyncConnectionPool (the service's shape);
- async pipeline: batches of 8 statements per round trip on one connection;
- sync: one blocking Connection;
- sync in threads: eight event-loop tasks, each handing its statement to a thread pool
  over a sync ConnectionPool (the usual way to use a sync driver from an async server).

Its table and JSON are here, not in ``report.py``: they share nothing with the HTTP report,
and ``report.py`` naming ``DriverFigure`` while this module imported its renderers was an
import cycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from rich.console import Console
from rich.table import Table

from jobq.bench.phases import run_async
from jobq.store.migrate import migrate

SQL = "SELECT id, queue, type, status FROM jobs WHERE id = %(id)s"
CONCURRENCY = 8
PIPELINE = 8


@dataclass(frozen=True, slots=True)
class DriverFigure:
    path: str
    rate: float
    cpu_us: float  # this process's CPU per statement


class _Clock:
    """Wall and CPU time of one measured run, as a figure per statement."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def figure(self, path: str, n: int) -> DriverFigure:
        wall, cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return DriverFigure(path, n / wall, cpu / n * 1e6)


def _timed(path: str, n: int, run: Callable[[], None]) -> DriverFigure:
    clock = _Clock()
    run()
    return clock.figure(path, n)


async def _async_timed(path: str, n: int, run: Callable[[], Awaitable[None]]) -> DriverFigure:
    clock = _Clock()
    await run()
    return clock.figure(path, n)


async def _async_paths(url: str, n: int) -> list[DriverFigure]:
    kwargs = {"autocommit": True, "prepare_threshold": 0}
    out: list[DriverFigure] = []
    async with await psycopg.AsyncConnection.connect(url, **kwargs) as conn:

        async def one_by_one() -> None:
            for i in range(n):
                await (await conn.execute(SQL, {"id": i})).fetchall()

        async def pipelined() -> None:
            for start in range(0, n, PIPELINE):
                async with conn.pipeline():
                    curs = [await conn.execute(SQL, {"id": i}) for i in range(start, start + PIPELINE)]
                for cur in curs:
                    await cur.fetchall()

        await one_by_one()  # warm: prepare the statement, fill caches
        out.append(await _async_timed("async", n, one_by_one))
        out.append(await _async_timed(f"async pipeline of {PIPELINE}", n, pipelined))

    async with AsyncConnectionPool(url, min_size=CONCURRENCY, max_size=CONCURRENCY, kwargs=kwargs,
                                   open=False) as pool:
        await pool.wait()

        async def task() -> None:
            for i in range(n // CONCURRENCY):
                async with pool.connection() as conn:
                    await (await conn.execute(SQL, {"id": i})).fetchall()

        async def pooled() -> None:
            await asyncio.gather(*(task() for _ in range(CONCURRENCY)))

        out.append(await _async_timed(f"async pool x{CONCURRENCY}", n, pooled))

    sync_pool = ConnectionPool(url, min_size=CONCURRENCY, max_size=CONCURRENCY, kwargs=kwargs, open=True)
    try:
        sync_pool.wait()
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as threads:

            def statement(i: int) -> None:
                with sync_pool.connection() as conn:
                    conn.execute(SQL, {"id": i}).fetchall()

            async def handed_over() -> None:
                for i in range(n // CONCURRENCY):
                    await loop.run_in_executor(threads, statement, i)

            async def threaded() -> None:
                await asyncio.gather(*(handed_over() for _ in range(CONCURRENCY)))

            out.append(await _async_timed(f"sync in {CONCURRENCY} threads", n, threaded))
    finally:
        sync_pool.close()
    return out


def measure(url: str, n: int = 3000) -> list[DriverFigure]:
    """Each path once, in one run, so the figures share the machine's noise."""
    figures = run_async(_async_paths(url, n))
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:

        def sync_loop() -> None:
            for i in range(n):
                conn.execute(SQL, {"id": i}).fetchall()

        sync_loop()
        figures.insert(1, _timed("sync", n, sync_loop))
    return figures


def drivers_json(figures: Sequence[DriverFigure]) -> str:
    return json.dumps([{"path": f.path, "rate": round(f.rate), "cpu_us": round(f.cpu_us)} for f in figures])


def render_drivers(figures: Sequence[DriverFigure]) -> None:
    table = Table(title="one prepared primary-key SELECT through each psycopg path")
    for column in ("path", "statements/s", "client CPU per statement (us)"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for f in figures:
        table.add_row(f.path, f"{f.rate:,.0f}", f"{f.cpu_us:,.0f}")
    Console().print(table)


def main(database_url: str | None, *, as_json: bool) -> int:
    if database_url is None:
        print("jobq bench --drivers needs --database-url or JOBQ_DATABASE_URL", file=sys.stderr)
        return 2
    migrate(database_url)  # the statement reads the jobs table
    figures = measure(database_url)
    if as_json:
        print(drivers_json(figures))
    else:
        render_drivers(figures)
    return 0
