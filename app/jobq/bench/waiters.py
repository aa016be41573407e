"""``--waiters N``: what idle long-polls cost the service. N long-polls (``wait_ms``
WAITERS_WAIT_MS, each re-posted when it answers) are held on a queue nobody enqueues to, from
a separate process on raw asyncio streams (thousands of connections, no HTTP client objects,
and none of their CPU in the measured processes); meanwhile the bench reads the service's
CPU and its database's transactions over an idle window, then measures pickup at the
latency phase's rate with them present. The same pickup with no waiters, measured first in
the same run, is the baseline the figures are compared with.

Its process runs ``main([URL, QUEUE, N])`` (token in JOBQ_BENCH_TOKEN): it prints
``ready <n>`` once every long-poll was sent, and a JSON summary of the answers when its
stdin closes. The first wait of each long-poll is drawn between 0 and WAITERS_WAIT_MS, so the
fleet's timeouts and re-posts come steadily (N / 20 per second), as a real fleet's would; the
idle window should last one whole wait (the default: 20 s) to count each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import IO, Any
from urllib.parse import urlsplit

import orjson
import psycopg

from jobq.bench.config import BenchConfig, BenchError, log
from jobq.bench.cpu import CpuMeter
from jobq.bench.latency import latency
from jobq.bench.phases import run_async

WAITERS_WAIT_MS = 20_000
# Connections opened at once: the service's listen backlog is finite.
CONNECT_BATCH = 200
READY_TIMEOUT_S = 120.0
# After the last long-poll was sent, before the idle window: the service reads them in (and
# those that arrive before any of them is idle each look once), a moment per thousand.
SETTLE_S = 2.0
SETTLE_PER_1000_S = 0.4


# ----------------------------------------------------------------- the waiters' process


async def _hold(url: str, token: str | None, queue: str, n: int) -> None:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    def request(wait_ms: int) -> bytes:
        body = orjson.dumps({"queues": [queue], "wait_ms": wait_ms, "worker_id": "bench-waiter"})
        head = (f"POST /v1/leases HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: jobq-bench-waiter\r\n"
                + (f"Authorization: Bearer {token}\r\n" if token else "")
                + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        return head.encode() + body

    again = request(WAITERS_WAIT_MS)
    answers: Counter[str] = Counter()
    sent = 0
    all_sent, one_sent = asyncio.Event(), asyncio.Event()

    async def one() -> None:
        nonlocal sent
        first = True
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError as exc:
                answers[f"connect: {exc.strerror or exc}"] += 1
                await asyncio.sleep(1.0)
                continue
            try:
                while True:
                    # The first wait of each is drawn from (0, wait_ms]: a fleet's long-polls end
                    # and are re-posted spread over time, not all in the same second.
                    writer.write(request(random.randint(1, WAITERS_WAIT_MS)) if first else again)
                    if first:
                        first = False
                        sent += 1
                        one_sent.set()
                        if sent == n:
                            all_sent.set()
                    status, length, close, retry_after = _head(await reader.readuntil(b"\r\n\r\n"))
                    await reader.readexactly(length)
                    answers[str(status)] += 1
                    if retry_after is not None:
                        # Refused (past the service's long-poll cap, or unavailable): wait as
                        # a well-behaved worker does, rather than hammer it.
                        writer.close()
                        await asyncio.sleep(retry_after)
                        break
                    if close:
                        break
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                answers[f"connection: {type(exc).__name__}"] += 1
            finally:
                writer.close()

    tasks: list[asyncio.Task[None]] = []
    for start in range(0, n, CONNECT_BATCH):
        batch = [asyncio.create_task(one()) for _ in range(start, min(n, start + CONNECT_BATCH))]
        tasks += batch
        while sent < len(tasks):  # this batch is in before the next one connects
            one_sent.clear()
            await one_sent.wait()
    await all_sent.wait()
    print(f"ready {sent}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the bench closes our stdin
    for t in tasks:
        t.cancel()
    print(json.dumps({"held": sent, "answers": dict(answers)}), flush=True)


def _head(raw: bytes) -> tuple[int, int, bool, float | None]:
    """Status, body length, whether the service closes, and Retry-After (s) if any."""
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, close = 0, False
    retry_after: float | None = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "connection" and value.strip().lower() == "close":
            close = True
        elif name == "retry-after":
            retry_after = float(value.strip())
    return status, length, close, retry_after


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: list[str]) -> int:
    url, queue, n = argv[0], argv[1], int(argv[2])
    _raise_nofile()
    run_async(_hold(url, os.environ.get("JOBQ_BENCH_TOKEN") or None, queue, n))
    return 0


# ----------------------------------------------------------------------- the bench's side


@contextlib.contextmanager
def held(url: str, token: str | None, queue: str, n: int) -> Iterator[dict[str, Any]]:
    """N idle long-polls on ``queue`` from a child process while the block runs; the dict
    yielded is filled with the child's summary (held, answers by status) when it ends."""
    env = {**os.environ, "JOBQ_BENCH_TOKEN": token or ""}
    # Not "-m jobq.bench.waiters": the package imports this module first, and runpy warns.
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from jobq.bench.waiters import main; "
                             "sys.exit(main(sys.argv[1:]))", url, queue, str(n)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    summary: dict[str, Any] = {}
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = _readline(proc.stdout, READY_TIMEOUT_S)
        if not line.startswith("ready"):
            raise BenchError(f"the waiters' process did not hold its long-polls ({line.strip()!r})")
        yield summary
        proc.stdin.close()
        summary.update(json.loads(_readline(proc.stdout, 30.0) or "{}"))
    finally:
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _readline(stream: IO[str], timeout_s: float) -> str:
    import threading

    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not out:
        raise BenchError(f"the waiters' process said nothing within {timeout_s:.0f} s")
    return out[0]


def _transactions(conn: psycopg.Connection[Any]) -> int:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                       "WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def idle_costs(meter: CpuMeter, database_url: str | None, seconds: float) -> dict[str, Any]:
    """The service's CPU (% of one core) and its database's transactions/s over ``seconds``
    of nothing but the held long-polls. The transactions are all of the database's, less
    this reading's own (one per sample): statistics reach pg_stat_database when a backend
    flushes them (at most every second while busy, 10 s when idle), so the window should be
    longer than that."""
    conn = psycopg.connect(database_url, autocommit=True) if database_url else None
    try:
        before_cpu = meter.sample().service
        before_x = _transactions(conn) if conn else None
        start = time.perf_counter()
        time.sleep(seconds)
        elapsed = time.perf_counter() - start
        after_cpu = meter.sample().service
        after_x = _transactions(conn) if conn else None
    finally:
        if conn is not None:
            conn.close()
    cpu = None if before_cpu is None or after_cpu is None else round(100 * (after_cpu - before_cpu) / elapsed, 2)
    # Each of our two readings is two transactions; the first's count in the second's.
    xacts = None if before_x is None or after_x is None else round(max(after_x - before_x - 2, 0) / elapsed, 1)
    return {"idle_seconds": round(elapsed, 2), "idle_service_cpu_pct": cpu, "idle_db_xact_per_s": xacts}


def waiters_phase(cfg: BenchConfig, url: str, meter: CpuMeter, database_url: str | None, base: str,
                  tidy: Any) -> dict[str, Any]:
    """Pickup with no waiters (the baseline); then N held long-polls: the idle window, and
    pickup again with them present."""
    tidy()
    alone = run_async(latency(cfg, url, meter, f"{base}.alone"))
    tidy()
    log(f"waiters: holding {cfg.waiters:,} idle long-polls (wait_ms {WAITERS_WAIT_MS:,})")
    with held(url, cfg.token, f"{base}.idle", cfg.waiters) as summary:
        time.sleep(SETTLE_S + SETTLE_PER_1000_S * cfg.waiters / 1000)
        log(f"waiters: idle window of {cfg.waiters_idle_seconds:g} s")
        idle = idle_costs(meter, database_url, cfg.waiters_idle_seconds)
        log(f"waiters: service CPU {idle['idle_service_cpu_pct']}% of a core, "
            f"{idle['idle_db_xact_per_s']} database transactions/s")
        beside = run_async(latency(cfg, url, meter, f"{base}.beside"))
    errors = {k: v for k, v in summary.get("answers", {}).items() if k != "200"}
    return {
        "waiters": cfg.waiters,
        "held": summary.get("held"),
        "wait_ms": WAITERS_WAIT_MS,
        **idle,
        "answers": summary.get("answers", {}),
        "errors": sum(errors.values()),
        "pickup_without_waiters": _pickup(alone),
        "pickup_with_waiters": _pickup(beside),
    }


def _pickup(figures: dict[str, Any]) -> dict[str, Any]:
    keys = ("offered_rate", "achieved_rate", "jobs", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    return {k: figures[k] for k in keys}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
