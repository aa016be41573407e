"""`jobq bench` runs end to end on a small load and reports every figure. A smoke test: no
timing thresholds, benchmarks are not timed tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def _processes_naming(text: str) -> list[str]:
    """Command lines of the processes on this machine that mention ``text``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(cmdline)
    return found


def test_bench_sdk_reports_the_sdk_beside_the_raw_client(live_server: LiveServer) -> None:
    env = {**os.environ, "JOBQ_DATABASE_URL": live_server.database_url}
    queue = f"bench-sdk-test-{os.getpid()}"
    out = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "bench", "--url", live_server.url, "--mode", "batch",
         "--jobs", "60", "--batch", "20", "--producers", "2", "--workers", "2", "--latency-seconds", "0.1",
         "--sdk", "--sdk-workers", "2", "--sdk-concurrency", "4", "--queue", queue, "--timeout", "60", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    sdk = report["sdk"]
    assert (sdk["worker_processes"], sdk["concurrency"]) == (2, 4)

    seq = sdk["sequential_enqueue"]
    assert seq["calls"] == 60
    for side in ("raw", "sdk"):
        assert 0 < seq[side]["p50_ms"] <= seq[side]["p99_ms"]
        assert seq[side]["cpu_ms_per_1000_jobs"]["client"] > 0
    assert _rate(sdk["enqueue_many"]["raw"]["rate"]) and _rate(sdk["enqueue_many"]["sdk"]["rate"])
    drain = sdk["drain"]
    assert drain["jobs"] == 60
    for side in ("raw", "worker", "in_process"):
        assert _rate(drain[side]["rate"]), (side, drain)
        # The worker processes' CPU is read from /proc and counted on the SDK's side.
        assert drain[side]["cpu_ms_per_1000_jobs"]["client"] > 0, (side, drain)
        # The bench did not start this service: it cannot know the service's processes.
        assert drain[side]["cpu_ms_per_1000_jobs"]["service"] is None

    pickups = sdk["pickup"]
    assert [(p["offered_rate"], p["workers"]) for p in pickups] == [(100, 1), (100, 2), (1000, 1), (1000, 2)]
    for pair in pickups:
        for side in ("raw", "sdk"):
            figures = pair[side]
            # Every job offered was picked up and read back from the database.
            assert figures["jobs"] == round(pair["offered_rate"] * 0.1) and figures["unclaimed"] == 0, pair
            assert 0 <= figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"]

    ratios = report["ratios"]
    for key in ("sdk_sequential_enqueue_p50_vs_raw", "sdk_enqueue_many_vs_raw", "sdk_worker_drain_vs_raw",
                "sdk_in_process_drain_vs_raw", "sdk_worker_drain_client_cpu_vs_raw",
                "sdk_pickup_p99_vs_raw_at_1000_w2"):
        assert _rate(ratios[key]), (key, ratios)
    figures = [t["figure"] for t in report["targets"]]
    assert "sdk: enqueue latency p50 / raw" in figures and "sdk: jobq worker drain / raw" in figures
    assert sum(f.startswith("sdk: pickup") for f in figures) == 8
    assert all(t["met"] in (True, False) for t in report["targets"])

    # Every worker process the bench started is gone, and so are the jobs it made.
    assert _processes_naming(f"{queue}.sdk-w") == []
    import psycopg

    with psycopg.connect(live_server.database_url) as conn:
        left = conn.execute("SELECT count(*) FROM jobs WHERE starts_with(queue, %s)", (queue + ".",)).fetchone()
    assert left == (0,)


def test_bench_sdk_table_shows_each_figure_beside_the_raw_one() -> None:
    from rich.console import Console

    from jobq.bench.report import compare_sdk, render_sdk

    cpu = {"cpu_ms_per_1000_jobs": {"client": 100.0, "service": 400.0, "database": None}}
    pickup = {"jobs": 10, "unclaimed": 0, "p50_ms": 2.0, "p95_ms": 3.0, "p99_ms": 4.0, "max_ms": 5.0, **cpu}
    sdk = {
        "worker_processes": 2, "concurrency": 10,
        "sequential_enqueue": {"calls": 10, "raw": {"p50_ms": 1.0, "p99_ms": 2.0, **cpu},
                               "sdk": {"p50_ms": 1.5, "p99_ms": 3.0, **cpu}},
        "enqueue_many": {"batch": 100, "raw": {"rate": 10_000, **cpu}, "sdk": {"rate": 5_000, **cpu}},
        "drain": {"jobs": 10, "worker_processes": 2, "concurrency": 10, "raw": {"rate": 2_000, **cpu},
                  "worker": {"rate": 1_800, **cpu}, "in_process": {"rate": 1_000, **cpu}},
        "pickup": [{"offered_rate": 100.0, "workers": 1, "raw": pickup, "sdk": {**pickup, "unclaimed": 3}}],
    }
    ratios, targets = compare_sdk(sdk)
    assert ratios["sdk_sequential_enqueue_p50_vs_raw"] == 1.5 and ratios["sdk_worker_drain_vs_raw"] == 0.9
    met = {t["figure"]: t["met"] for t in targets}
    assert met["sdk: enqueue latency p50 / raw"] is False and met["sdk: jobq worker drain / raw"] is True
    # Jobs never picked up fail the pickup targets, whatever the percentiles of the others.
    assert met["sdk: pickup at 100/s, 1 worker(s), p50"] is False
    console = Console(record=True, width=200)
    render_sdk(console, sdk, ratios)
    text = console.export_text()
    assert "1.50x" in text and "0.90x" in text and "3 unclaimed" in text


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


def test_bench_waiters_reports_what_idle_long_polls_cost(live_server: LiveServer) -> None:
    """``--waiters N``: N idle long-polls held from another process; the report has the
    service's idle cost (its CPU is unknown here: the bench did not start it), the database's
    transactions/s while idle, pickup with and without them, their ratios and the targets."""
    env = {**os.environ, "JOBQ_DATABASE_URL": live_server.database_url}
    out = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "bench", "--url", live_server.url, "--mode", "single",
         "--jobs", "50", "--producers", "1", "--workers", "2", "--latency-rate", "50",
         "--latency-seconds", "1", "--waiters", "30", "--waiters-idle-seconds", "1",
         "--timeout", "60", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    w = report["waiters"]
    assert w["waiters"] == 30 and w["held"] == 30 and w["wait_ms"] == 20_000
    assert w["errors"] == 0 and set(w["answers"]) <= {"200"}
    assert w["idle_seconds"] >= 1 and w["idle_service_cpu_pct"] is None
    assert isinstance(w["idle_db_xact_per_s"], float) and w["idle_db_xact_per_s"] >= 0
    for side in ("pickup_without_waiters", "pickup_with_waiters"):
        pickup = w[side]
        assert pickup["jobs"] == 50 and pickup["offered_rate"] == 50
        assert 0 <= pickup["p50_ms"] <= pickup["p99_ms"] <= pickup["max_ms"]
    assert {"waiters_pickup_p50_vs_none", "waiters_pickup_p99_vs_none"} <= set(report["ratios"])
    figures = [t["figure"] for t in report["targets"] if t["figure"].startswith("30 idle long-polls")]
    assert len(figures) == 5
    assert not _processes_naming("jobq.bench.waiters"), "the waiters' process was stopped"


def test_bench_queues_reports_what_many_queues_cost(live_server: LiveServer) -> None:
    """``--queues N``: N queues made in the database; the report has the claims naming 1 and
    100 of them (found and not), the listing's first page and /metrics with their sizes, the
    ratios and the targets; and the queues and their jobs are gone afterwards."""
    import psycopg

    env = {**os.environ, "JOBQ_DATABASE_URL": live_server.database_url}
    out = subprocess.run(
        [sys.executable, "-m", "jobq.cli", "bench", "--url", live_server.url, "--mode", "batch",
         "--jobs", "50", "--producers", "1", "--workers", "2", "--latency-seconds", "0",
         "--queues", "150", "--timeout", "60", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    q = report["queues"]
    assert q["queues"] == 150 and q["claim_width"] == 100 and q["claim_calls"] > 0
    assert q["queues_with_jobs"] == 2  # the found claims' queue, and queue 101 (every 50th)
    assert q["claims_unexpected"] == 0, "each found claim got its job, each empty one none"
    for kind in ("one_found", "one_empty", "hundred_found", "hundred_empty"):
        assert q[f"claim_{kind}_p50_ms"] > 0
    for side in ("found", "empty"):
        assert q[f"claim_{side}_hundred_vs_one"] > 0
        assert report["ratios"][f"queues_claim_{side}_hundred_vs_one"] == q[f"claim_{side}_hundred_vs_one"]
    # The first page is the default limit's, and there is a next one.
    assert q["list_page_queues"] == 100 and q["list_next_cursor"] is True
    assert q["list_p50_ms"] > 0 and q["list_bytes"] > 0
    assert q["metrics_p50_ms"] > 0 and q["metrics_bytes"] > 0
    figures = {t["figure"] for t in report["targets"]}
    assert {"claim naming 100 queues / 1, found (p50)", "claim naming 100 queues / 1, empty (p50)",
            "150 queues: GET /v1/queues first page p50", "150 queues: GET /metrics p50",
            "150 queues: GET /metrics bytes"} <= figures
    prefix = report["config"]["queue"] + ".many-"  # the other phases' queues are left, as before
    with psycopg.connect(live_server.database_url) as conn:
        for sql in ("SELECT count(*) FROM queues WHERE starts_with(name, %s)",
                    "SELECT count(*) FROM jobs WHERE starts_with(queue, %s)",
                    "SELECT count(*) FROM job_counts WHERE starts_with(queue, %s)"):
            row = conn.execute(sql, (prefix,)).fetchone()
            assert row is not None and row[0] == 0, sql
