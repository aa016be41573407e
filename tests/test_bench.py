"""`jobq bench` runs end to end on a small load and reports every figure. A smoke test: no
timing thresholds, benchmarks are not timed tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jobq.bench.latency import percentile, pickup_ms
from tests.conftest import ROOT, LiveServer


def _rate(value: object) -> bool:
    return isinstance(value, int | float) and value > 0


def test_bench_runs_both_modes_with_baseline(live_server: LiveServer) -> None:
    env = {**os.environ, "JOBQ_DATABASE_URL": live_server.database_url}
    out = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "bench", "--url", live_server.url, "--mode", "both",
         "--jobs", "200", "--batch", "50", "--producers", "2", "--workers", "3",
         "--latency-rate", "50", "--latency-seconds", "1", "--baseline", "--connections", "1,2",
         "--timeout", "60", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)  # stdout is the JSON alone: progress went to stderr
    assert "bench:" in out.stderr

    assert report["config"]["started_service"] is False
    for mode in ("batch", "single"):
        figures = report[mode]
        assert figures["jobs"] == 200
        for key in ("enqueue_rate", "drain_rate", "end_to_end_rate"):
            assert _rate(figures[key]), (mode, key, figures)
        # The bench did not start this service: it cannot know the service's processes.
        assert figures["cpu_ms_per_1000_jobs"] is None
        assert set(figures["bench_cpu_ms_per_1000_jobs"]) == {"enqueue", "drain", "end_to_end"}

    latency = report["latency"]
    assert latency["jobs"] == 50 and latency["offered_rate"] == 50
    assert 0 <= latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"] <= latency["max_ms"]

    baseline = report["baseline"]
    for key in ("batch_enqueue_rate", "batch_drain_rate", "single_whole_life_rate"):
        assert _rate(baseline[key]), (key, baseline)
    assert set(baseline["batch_by_connections"]) == {"1", "2"}
    assert set(baseline["minimal_by_connections"]) == {"1", "2"}
    assert _rate(baseline["minimal_drain_rate"])
    assert set(report["ratios"]) == {"batch_enqueue_vs_raw", "batch_drain_vs_raw", "single_e2e_vs_raw",
                                     "named_drain_vs_minimal", "named_db_cpu_vs_minimal"}
    # 200 jobs may cost the database less than one clock tick: its CPU ratio may be unknown.
    assert all(_rate(r) for k, r in report["ratios"].items() if k != "named_db_cpu_vs_minimal")
    import psycopg

    with psycopg.connect(live_server.database_url) as conn:
        left = conn.execute("SELECT count(*) FROM jobs WHERE starts_with(queue, %s)",
                            (report["config"]["queue"] + ".",)).fetchone()
        tables = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'jobq_bench_minimal%'").fetchone()
    assert left == (0,), "the bench leaves no jobs of its own behind"
    assert tables == (0,), "nor its minimal table"
    assert [t["figure"] for t in report["targets"]] == [
        "batch drain / raw batch drain", "single end-to-end / raw single whole life",
        "raw batch drain / minimal table drain", "raw drain DB CPU per job / minimal table's",
        "pickup p50", "pickup p99"]


def test_bench_refuses_a_service_off_this_machine() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "bench", "--url", "http://192.0.2.1:8000", "--jobs", "10"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 1 and "loopback" in out.stderr


def test_pickup_is_claim_time_minus_visible_time_on_the_server_clock() -> None:
    lease = {"locked_until": "2026-01-01T00:01:00.004500Z", "job": {"visible_at": "2026-01-01T00:00:00Z"}}
    assert pickup_ms(lease, lease_ms=60_000) == pytest.approx(4.5)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([7.0], 99) == 7.0


async def test_bench_client_survives_a_cancelled_long_poll(live_server: LiveServer) -> None:
    """The bench stops workers mid long-poll between phases and reuses their clients: the
    cancelled request's late answer must not become the next request's."""
    import asyncio

    import orjson

    from jobq.bench.client import BenchClient

    async with BenchClient(live_server.url) as c:
        claim = {"worker_id": "w", "queues": ["bc"], "wait_ms": 5000}
        task = asyncio.create_task(c.post("/v1/leases", claim))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        status, body = await c.post("/v1/jobs", {"type": "t", "queue": "bc"})
        assert status == 201 and orjson.loads(body)["queue"] == "bc"
        status, body = await c.post("/v1/leases", claim)
        assert status == 200 and len(orjson.loads(body)["leases"]) == 1
        status, body = await c.post("/v1/jobs", {"type": ""})
        assert status == 422 and orjson.loads(body)["code"] == "validation_error"
        status, body = await c.get("/healthz")
        assert status == 200


def test_bench_drivers_compares_every_psycopg_path(database_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "bench", "--drivers", "--json", "--database-url", database_url],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert [f["path"] for f in figures] == [
        "async", "sync", "async pipeline of 8", "async pool x8", "sync in 8 threads"]
    assert all(_rate(f["rate"]) and f["cpu_us"] > 0 for f in figures)
