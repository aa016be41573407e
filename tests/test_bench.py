"""`jobq bench` runs end to end on a small load (a smoke test: no timing thresholds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, LiveServer


def test_bench_runs_both_modes_with_baseline(live_server: LiveServer) -> None:
    env = {**os.environ, "JOBQ_DATABASE_URL": live_server.database_url}
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "bench", "--url", live_server.url, "--jobs", "200",
         "--latency-rate", "50", "--latency-seconds", "1", "--baseline", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for mode in ("batch", "single"):
        assert report[mode]["drain_rate"] > 0 and report[mode]["end_to_end_rate"] > 0
    assert report["latency"]["jobs"] == 50
    assert report["baseline"]["batch_drain_rate"] > 0
    assert set(report["ratios"]) == {"batch_drain_vs_raw", "single_e2e_vs_raw"}
