"""``--queues N``: what many queues cost (issue 24, item 3). N queues are made in one
statement straight in the service's database (under the run's base name, so that they are
this run's alone), with a job waiting in every 50th of them; then, over HTTP:

- a claim (``wait_ms`` 0) naming 1 queue against one naming 100, both when a job waits (in
  the last queue named) and when none does: the median of CLAIM_CALLS each, interleaved so
  that the machine's moods fall on all four alike;
- ``GET /v1/queues`` (its first page, the default limit) and ``GET /metrics``: median time
  and body size with the N queues present.

The queues, their jobs and their counters are deleted afterwards.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import psycopg

from jobq.bench.client import BenchClient
from jobq.bench.config import JOB_TYPE, LEASE_MS, BenchConfig, BenchError, log
from jobq.bench.phases import run_async

CLAIM_WIDTH = 100  # queues named in the wide claim (the most a claim may name)
MIN_QUEUES = CLAIM_WIDTH + 1  # the wide claims' queues, and the queue the found ones find a job in
CLAIM_CALLS = 150  # of each of the four claims
LIST_CALLS = 20
METRICS_CALLS = 10
SCATTER_EVERY = 50  # a job waits in every 50th queue beyond the claims' (listings see some depth)
ENQUEUE_BATCH = 500


def _name(prefix: str, i: int) -> str:
    return f"{prefix}{i:06d}"


def _create(database_url: str, prefix: str, n: int) -> None:
    with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute("INSERT INTO queues (name) SELECT %s || lpad(i::text, 6, '0') FROM generate_series(0, %s - 1) i",
                     (prefix, n))


def _drop(database_url: str, prefix: str) -> None:
    """After the run's jobs were deleted (the triggers took them off the counters): the
    queues and their counter rows, all of them zero by now."""
    with psycopg.connect(database_url, connect_timeout=5) as conn, conn.transaction():
        conn.execute("DELETE FROM job_counts WHERE starts_with(queue, %s)", (prefix,))
        conn.execute("DELETE FROM queues WHERE starts_with(name, %s)", (prefix,))


async def _enqueue(c: BenchClient, queues: list[str]) -> None:
    for start in range(0, len(queues), ENQUEUE_BATCH):
        jobs = [{"type": JOB_TYPE, "queue": q} for q in queues[start:start + ENQUEUE_BATCH]]
        status, body = await c.post("/v1/jobs/batch", {"jobs": jobs})
        if status != 201:
            raise BenchError(f"enqueue answered {status}: {body[:200]!r}")


async def _timed(c: BenchClient, method: str, path: str, payload: Any = None) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    if method == "GET":
        status, body = await c.get(path)
    else:
        status, body = await c.post(path, payload)
    return (time.perf_counter() - start) * 1000, status, body


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


async def _measure(cfg: BenchConfig, url: str, prefix: str, n: int) -> dict[str, Any]:
    names = [_name(prefix, i) for i in range(CLAIM_WIDTH - 1)]
    hot = _name(prefix, CLAIM_WIDTH)  # where the found claims find their job
    scattered = [_name(prefix, i) for i in range(MIN_QUEUES, n) if i % SCATTER_EVERY == 1]
    claims: dict[str, list[str]] = {
        "one_found": [hot],
        "one_empty": [names[0]],
        "hundred_found": [*names, hot],
        "hundred_empty": [*names, _name(prefix, CLAIM_WIDTH - 1)],
    }
    async with BenchClient(url, cfg.token, cfg.timeout_s) as c:
        # Each found claim takes one job from the hot queue: enough for both, and a few more.
        await _enqueue(c, [hot] * (2 * CLAIM_CALLS + 10) + scattered)
        log(f"queues: {n:,} queues, {len(scattered) + 1:,} of them with jobs waiting; "
            f"{CLAIM_CALLS} claims of each kind")
        times: dict[str, list[float]] = {k: [] for k in claims}
        wrong = 0
        for i in range(CLAIM_CALLS):
            for kind, queues in claims.items():
                payload = {"worker_id": f"bench-queues-{i}", "queues": queues, "limit": 1,
                           "lease_ms": LEASE_MS, "wait_ms": 0}
                ms, status, body = await _timed(c, "POST", "/v1/leases", payload)
                if status != 200:
                    raise BenchError(f"a claim answered {status}: {body[:200]!r}")
                got = len(orjson.loads(body)["leases"])
                wrong += got != (1 if kind.endswith("found") else 0)
                times[kind].append(ms)
        listing = [await _timed(c, "GET", "/v1/queues") for _ in range(LIST_CALLS)]
        metrics = [await _timed(c, "GET", "/metrics") for _ in range(METRICS_CALLS)]
    for what, answers in (("GET /v1/queues", listing), ("GET /metrics", metrics)):
        if any(status != 200 for _, status, _ in answers):
            raise BenchError(f"{what} answered {sorted({s for _, s, _ in answers})}")
    medians = {f"claim_{kind}_p50_ms": _median(t) for kind, t in times.items()}
    found_ratio = medians["claim_hundred_found_p50_ms"] / medians["claim_one_found_p50_ms"]
    empty_ratio = medians["claim_hundred_empty_p50_ms"] / medians["claim_one_empty_p50_ms"]
    first_page = orjson.loads(listing[-1][2])
    return {
        "queues": n,
        "queues_with_jobs": len(scattered) + 1,
        "claim_calls": CLAIM_CALLS,
        "claim_width": CLAIM_WIDTH,
        **medians,
        "claim_found_hundred_vs_one": round(found_ratio, 2),
        "claim_empty_hundred_vs_one": round(empty_ratio, 2),
        "claims_unexpected": wrong,
        "list_calls": LIST_CALLS,
        "list_p50_ms": _median([ms for ms, _, _ in listing]),
        "list_bytes": len(listing[-1][2]),
        "list_page_queues": len(first_page["queues"]),
        "list_next_cursor": first_page.get("next_cursor") is not None,
        "metrics_calls": METRICS_CALLS,
        "metrics_p50_ms": _median([ms for ms, _, _ in metrics]),
        "metrics_bytes": len(metrics[-1][2]),
    }


def queues_phase(cfg: BenchConfig, url: str, database_url: str, base: str,
                 tidy: Callable[[], None]) -> dict[str, Any]:
    """N queues made in the database, measured over HTTP, then deleted with their jobs."""
    if cfg.queues < MIN_QUEUES:
        raise BenchError(f"--queues needs at least {MIN_QUEUES} queues (a claim names {CLAIM_WIDTH})")
    # Under the run's base (tidy deletes their jobs), unique even when --queue repeats a base.
    prefix = f"{base}.many-{uuid.uuid4().hex[:6]}."
    tidy()
    start = time.perf_counter()
    _create(database_url, prefix, cfg.queues)
    log(f"queues: made {cfg.queues:,} queues in {time.perf_counter() - start:.2f} s")
    try:
        return run_async(_measure(cfg, url, prefix, cfg.queues))
    finally:
        tidy()
        _drop(database_url, prefix)

