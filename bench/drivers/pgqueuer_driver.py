"""PgQueuer, driven through its public API for bench/peers.py (see that file for the protocol
every driver speaks). Runs in the scratch virtual environment bench/peers.py installs
``pgqueuer[asyncpg]`` into; standard library and PgQueuer only.

    python pgqueuer_driver.py install --database-url URL
    python pgqueuer_driver.py enqueue --database-url URL --jobs N --batch B [--warmup W] [--rate R]
    python pgqueuer_driver.py work    --database-url URL [--record]

The consumer is shaped as PgQueuer's own benchmark (tools/benchmark.py in its repository)
runs it by default: five ``QueueManager``s in one process, each on its own asyncpg
connection, dequeuing batches of 10, on uvloop. No schedules, so no ``SchedulerManager``.
The handler is an ``async def``, as PgQueuer's documentation writes them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

import asyncpg
import uvloop
from pgqueuer import Job, Queries, QueueManager
from protocol import Enqueues, arguments, emit, now_us

ENTRYPOINT = "noop"
CONSUMERS = 5
BATCH_SIZE = 10


def payload(k: int) -> bytes:
    return json.dumps({"k": k}).encode()


async def install(args: argparse.Namespace) -> dict[str, Any]:
    conn = await asyncpg.connect(args.database_url)
    try:
        await Queries.from_asyncpg_connection(conn).install()
    finally:
        await conn.close()
    return {}


async def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    conn = await asyncpg.connect(args.database_url)
    queries = Queries.from_asyncpg_connection(conn)

    async def send(first: int, size: int) -> None:
        if size == 1:
            await queries.enqueue(ENTRYPOINT, payload(first))
        else:
            await queries.enqueue([ENTRYPOINT] * size, [payload(first + i) for i in range(size)], [0] * size)

    try:
        calls = Enqueues(args)
        for first, size in calls.warmups():
            await send(first, size)
        for first, size, wait_s in calls.timed():
            if wait_s:
                await asyncio.sleep(wait_s)
            await send(first, size)
            calls.returned(first)
        return calls.report()
    finally:
        await conn.close()


async def work(args: argparse.Namespace) -> dict[str, Any]:
    starts: list[tuple[int, int]] = []
    handled = 0

    async def noop(job: Job) -> None:
        nonlocal handled
        handled += 1
        if args.record:
            starts.append((json.loads(job.payload or b"{}")["k"], now_us()))

    conns = [await asyncpg.connect(args.database_url) for _ in range(CONSUMERS)]
    managers = [QueueManager(Queries.from_asyncpg_connection(c)) for c in conns]
    for qm in managers:
        qm.entrypoint(ENTRYPOINT)(noop)
    loop = asyncio.get_running_loop()
    print("ready", flush=True)
    if not await loop.run_in_executor(None, sys.stdin.readline):
        return {"handled": 0}
    runs = [asyncio.create_task(qm.run(batch_size=BATCH_SIZE)) for qm in managers]
    while await loop.run_in_executor(None, sys.stdin.readline):
        pass  # stdin closes: stop
    for qm in managers:
        qm.shutdown.set()
    await asyncio.gather(*runs)
    for c in conns:
        with contextlib.suppress(Exception):
            await c.close()
    return {"handled": handled, "starts": starts} if args.record else {"handled": handled}


def main() -> None:
    args = arguments(["install", "enqueue", "work"], "--database-url", "the database, a postgresql:// URL")
    command = {"install": install, "enqueue": enqueue, "work": work}[args.command]
    emit(uvloop.run(command(args)))


if __name__ == "__main__":
    main()
