"""``jobq bench``: drive a service over HTTP and compare with what PostgreSQL alone does.

Phases (each bounded in time, traffic only to the service it was given):
- batch: enqueue with POST /v1/jobs/batch, drain with claims of ``limit`` and batch acks;
- single: one job per call, one claim (limit 1) and one ack per job;
- latency: single enqueues paced at a fixed rate while idle workers long-poll; pickup is
  measured on the server's clock as (locked_until - lease_ms) - visible_at;
- baseline (--baseline): the same named SQL statements straight on PostgreSQL, no HTTP.
Figures are rates in jobs/s; compare ratios within one run, never across runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

LEASE_MS = 60_000
PHASE_TIMEOUT_S = 300.0


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _cpu_seconds(pid: int | None) -> float | None:
    """utime+stime of a process and its children so far (Linux /proc)."""
    if pid is None:
        return None
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


@dataclass
class Result:
    mode: str
    jobs: int
    enqueue_rate: float = 0.0
    drain_rate: float = 0.0
    end_to_end_rate: float = 0.0
    cpu_ms_per_1000: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


async def _enqueue(client: httpx.AsyncClient, queue: str, n: int, batch: int, producers: int) -> None:
    per = [n // producers + (1 if i < n % producers else 0) for i in range(producers)]

    async def produce(count: int) -> None:
        left = count
        while left > 0:
            if batch > 1:
                k = min(batch, left)
                r = await client.post("/v1/jobs/batch",
                                      json={"jobs": [{"type": "noop", "queue": queue}] * k})
            else:
                k = 1
                r = await client.post("/v1/jobs", json={"type": "noop", "queue": queue})
            r.raise_for_status()
            left -= k

    await asyncio.gather(*(produce(c) for c in per))


async def _drain(client: httpx.AsyncClient, queue: str, n: int, batch: int, workers: int,
                 wait_ms: int) -> None:
    done = 0
    deadline = time.monotonic() + PHASE_TIMEOUT_S

    async def work(i: int) -> None:
        nonlocal done
        while done < n and time.monotonic() < deadline:
            r = await client.post("/v1/leases", json={
                "worker_id": f"bench-{i}", "queues": [queue], "limit": batch,
                "lease_ms": LEASE_MS, "wait_ms": wait_ms})
            r.raise_for_status()
            leases = r.json()["leases"]
            if not leases:
                continue
            if batch > 1:
                r = await client.post("/v1/leases/ack",
                                      json={"acks": [{"lease_id": le["lease_id"]} for le in leases]})
                r.raise_for_status()
            else:
                for le in leases:
                    (await client.post(f"/v1/leases/{le['lease_id']}/ack", json={})).raise_for_status()
            done += len(leases)

    await asyncio.gather(*(work(i) for i in range(workers)))
    if done < n:
        raise RuntimeError(f"drained only {done} of {n} jobs in {PHASE_TIMEOUT_S} s")


async def http_mode(url: str, pid: int | None, mode: str, jobs: int, producers: int, workers: int,
                    batch: int) -> Result:
    size = batch if mode == "batch" else 1
    limits = httpx.Limits(max_connections=producers + workers + 4,
                          max_keepalive_connections=producers + workers + 4)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        res = Result(mode, jobs)
        queue = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
        cpu0 = _cpu_seconds(pid)
        t0 = time.perf_counter()
        await _enqueue(client, queue, jobs, size, producers)
        t1 = time.perf_counter()
        await _drain(client, queue, jobs, size, workers, 0)
        t2 = time.perf_counter()
        cpu1 = _cpu_seconds(pid)
        res.enqueue_rate = jobs / (t1 - t0)
        res.drain_rate = jobs / (t2 - t1)
        # End to end: producers and workers together, enqueue start to last ack.
        queue = f"bench-{mode}-e2e-{uuid.uuid4().hex[:6]}"
        t3 = time.perf_counter()
        await asyncio.gather(_enqueue(client, queue, jobs, size, producers),
                             _drain(client, queue, jobs, size, workers, 1000))
        res.end_to_end_rate = jobs / (time.perf_counter() - t3)
        if cpu0 is not None and cpu1 is not None:
            res.cpu_ms_per_1000 = (cpu1 - cpu0) * 1000 / (jobs / 1000) / 2  # per enqueue+drain of 1000
        return res


async def latency(url: str, rate: float, seconds: float, workers: int) -> dict[str, float]:
    queue = f"bench-latency-{uuid.uuid4().hex[:6]}"
    total = int(rate * seconds)
    pickups: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60,
                                 limits=httpx.Limits(max_connections=workers + 4)) as client:
        stop = asyncio.Event()

        async def work(i: int) -> None:
            while not stop.is_set():
                r = await client.post("/v1/leases", json={
                    "worker_id": f"lat-{i}", "queues": [queue], "limit": 1,
                    "lease_ms": LEASE_MS, "wait_ms": 1000})
                for le in r.json()["leases"]:
                    job = le["job"]
                    claimed = datetime.fromisoformat(le["locked_until"]).timestamp() - LEASE_MS / 1000
                    pickups.append((claimed - datetime.fromisoformat(job["visible_at"]).timestamp()) * 1000)
                    await client.post(f"/v1/leases/{le['lease_id']}/ack", json={})

        tasks = [asyncio.create_task(work(i)) for i in range(workers)]
        await asyncio.sleep(0.5)  # let the workers reach their long-poll
        start = time.perf_counter()
        for k in range(total):
            delay = start + k / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await client.post("/v1/jobs", json={"type": "noop", "queue": queue})
        deadline = time.monotonic() + 10
        while len(pickups) < total and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    qs = statistics.quantiles(pickups, n=100) if len(pickups) >= 2 else [0.0] * 99
    return {"offered_rate": rate, "jobs": len(pickups), "p50_ms": round(qs[49], 2),
            "p95_ms": round(qs[94], 2), "p99_ms": round(qs[98], 2)}


def baseline(database_url: str, jobs: int, batch: int, connections: int) -> dict[str, float]:
    """The raw-SQL ceilings: the service's own statements, sync psycopg, no HTTP."""
    import psycopg
    from psycopg.rows import dict_row

    from app.store.db import dumps_json
    from app.store.queries import Q

    def conn() -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(database_url, autocommit=True, row_factory=dict_row)

    def run_threads(target: Any, n: int) -> float:
        threads = [threading.Thread(target=target, args=(n // connections,)) for _ in range(connections)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(PHASE_TIMEOUT_S)
        return time.perf_counter() - t0

    queue = f"raw-batch-{uuid.uuid4().hex[:6]}"
    with conn() as c:
        c.execute(Q.QueueEnsure, {"queue": queue})
        rowjob = {"queue": queue, "type": "noop", "payload": {}, "priority": 0, "max_attempts": None,
                  "idempotency_key": None, "run_at": None, "delay_ms": 0}

    def enqueue_batches(n: int) -> None:
        with conn() as c:
            for _ in range(0, n, batch):
                c.execute(Q.JobInsertMany, {"jobs": dumps_json([rowjob] * batch)})

    def drain_batches(n: int) -> None:
        with conn() as c:
            got = 0
            while got < n:
                rows = c.execute(Q.JobClaim, {"queue": queue, "types": None, "limit": batch,
                                              "lease_ms": LEASE_MS, "worker_id": "raw"}).fetchall()
                if not rows:
                    break
                acks = [{"job_id": r["id"], "token": r["lease_token"], "result": None} for r in rows]
                c.execute(Q.LeaseAckMany, {"acks": dumps_json(acks)})
                got += len(rows)

    enq = run_threads(enqueue_batches, jobs)
    drain = run_threads(drain_batches, jobs)

    single_q = f"raw-single-{uuid.uuid4().hex[:6]}"
    single_n = max(jobs // 4, 100)
    with conn() as c:
        c.execute(Q.QueueEnsure, {"queue": single_q})

    def whole_life(n: int) -> None:
        with conn() as c:
            for _ in range(n):
                c.execute(Q.JobInsert, {"queue": single_q, "type": "noop", "payload": "{}", "priority": 0,
                                        "max_attempts": None, "idempotency_key": None, "run_at": None,
                                        "delay_ms": 0})
                rows = c.execute(Q.JobClaim, {"queue": single_q, "types": None, "limit": 1,
                                              "lease_ms": LEASE_MS, "worker_id": "raw"}).fetchall()
                for r in rows:
                    c.execute(Q.LeaseAck, {"job_id": r["id"], "token": r["lease_token"], "result": None})

    single = run_threads(whole_life, single_n)
    return {"connections": connections, "batch_enqueue_rate": jobs / enq, "batch_drain_rate": jobs / drain,
            "single_whole_life_rate": single_n / single}


def start_service(database_url: str | None, server_workers: int) -> tuple[str, subprocess.Popen[bytes]]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    if database_url:
        env["JOBQ_DATABASE_URL"] = database_url
    env.setdefault("JOBQ_LOG_LEVEL", "WARNING")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--workers", str(server_workers)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("jobq serve exited")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("jobq serve did not become ready")


def run(*, url: str | None, database_url: str | None, mode: str, jobs: int, producers: int,
        workers: int, batch: int, latency_rate: float, latency_seconds: float, with_baseline: bool,
        server_workers: int, connections: int) -> dict[str, Any]:
    with ExitStack() as stack:
        pid = None
        if url is None:
            url, proc = start_service(database_url, server_workers)
            pid = proc.pid
            stack.callback(lambda: (proc.terminate(), proc.wait(20)))
        out: dict[str, Any] = {"url": url, "jobs": jobs, "producers": producers, "workers": workers,
                               "batch": batch, "server_workers": server_workers}
        modes = ["batch", "single"] if mode == "both" else [mode]
        for m in modes:
            _log(f"{m} mode: {jobs} jobs, {producers} producers, {workers} workers")
            n = jobs if m == "batch" else max(jobs // 4, 100)
            r = asyncio.run(http_mode(url, pid, m, n, producers, workers, batch))
            out[m] = {"jobs": r.jobs, "enqueue_rate": round(r.enqueue_rate), "drain_rate": round(r.drain_rate),
                      "end_to_end_rate": round(r.end_to_end_rate),
                      "cpu_ms_per_1000_jobs": None if r.cpu_ms_per_1000 is None else round(r.cpu_ms_per_1000)}
            _log(f"{m}: {out[m]}")
        if latency_seconds > 0:
            _log(f"latency at {latency_rate} jobs/s for {latency_seconds} s")
            out["latency"] = asyncio.run(latency(url, latency_rate, latency_seconds, 4))
        if with_baseline:
            db = database_url or os.environ.get("JOBQ_DATABASE_URL")
            if not db:
                raise RuntimeError("--baseline needs --database-url or JOBQ_DATABASE_URL")
            _log("raw-SQL baseline")
            base = baseline(db, jobs, batch, connections)
            out["baseline"] = {k: round(v) for k, v in base.items()}
            ratios: dict[str, float] = {}
            if "batch" in out:
                ratios["batch_drain_vs_raw"] = round(out["batch"]["drain_rate"] / base["batch_drain_rate"], 3)
            if "single" in out:
                ratios["single_e2e_vs_raw"] = round(out["single"]["end_to_end_rate"]
                                                    / base["single_whole_life_rate"], 3)
            out["ratios"] = ratios
        return out


def render(out: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("what", "jobs/s or ms", title=f"jobq bench ({out['jobs']} jobs, {out['url']})")
    for m in ("batch", "single"):
        if m in out:
            for k, v in out[m].items():
                table.add_row(f"{m} {k}", str(v))
    for k, v in out.get("latency", {}).items():
        table.add_row(f"pickup {k}", str(v))
    for k, v in out.get("baseline", {}).items():
        table.add_row(f"raw SQL {k}", str(v))
    for k, v in out.get("ratios", {}).items():
        table.add_row(f"ratio {k}", str(v))
    Console().print(table)


def main(**kwargs: Any) -> None:
    as_json = kwargs.pop("as_json")
    out = run(**kwargs)
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        render(out)
