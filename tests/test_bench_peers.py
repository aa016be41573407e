"""bench/peers.py, the comparison with Graphile Worker and PgQueuer: its arguments, the order
it measures in, the table and ratios it prints, and (slow) a run of jobq alone to the end.
The peers themselves are not installed here: that needs npm's and PyPI's registries."""

from __future__ import annotations

import importlib.util
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from tests import pg
from tests.conftest import ROOT

SCRIPT = ROOT / "bench" / "peers.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


peers = _load()


def test_defaults_measure_all_three_with_the_issues_settings() -> None:
    opts = peers.parse_args([])
    assert opts.systems == ("jobq", "graphile", "pgqueuer")
    assert (opts.jobs, opts.repeat, opts.single_jobs) == (20_000, 3, 2_000)
    assert opts.database_url == "postgresql://postgres@127.0.0.1:5432/postgres"
    assert opts.scratch == ROOT / ".jobq" / "peers"
    assert opts.pickup_rate == 200 and not opts.hog
    assert opts.measurements == ("single", "bulk", "drain", "pickup")
    assert not opts.floors and opts.measured == opts.systems


def test_arguments_are_read_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    opts = peers.parse_args(["--jobs", "2000", "--repeat", "1", "--systems", " PgQueuer,jobq", "--hog",
                             "--scratch", "/tmp/x", "--database-url", "postgres://u@h:5433/db"])
    assert opts.systems == ("pgqueuer", "jobq")
    assert (opts.jobs, opts.repeat, opts.single_jobs, opts.scratch) == (2000, 1, 200, Path("/tmp/x"))
    assert opts.measurements[-1] == "pickup_hog"
    assert peers.parse_args(["--systems", "jobq", "--floors"]).measured == ("jobq", "sql", "http")
    for wrong, says in [
        (["--systems", "jobq,celery"], "choose among jobq,graphile,pgqueuer"),
        (["--systems", "jobq,jobq"], "each system once"),
        (["--jobs", "99"], "at least 100"),
        (["--repeat", "0"], "at least 1"),
        (["--database-url", "host=127.0.0.1 dbname=postgres"], "postgresql://"),
        (["--pickup-seconds", "1"], "at least 2"),
    ]:
        with pytest.raises(SystemExit):
            peers.parse_args(wrong)
        assert says in capsys.readouterr().err, wrong


def test_each_repetition_takes_every_column_for_every_system_in_turn() -> None:
    steps = peers.plan(("jobq", "graphile", "pgqueuer"), 2, ("single", "drain"))
    assert [(s.repetition, s.measurement, s.system[0]) for s in steps] == [
        (0, "single", "j"), (0, "single", "g"), (0, "single", "p"),
        (0, "drain", "j"), (0, "drain", "g"), (0, "drain", "p"),
        (1, "single", "j"), (1, "single", "g"), (1, "single", "p"),
        (1, "drain", "j"), (1, "drain", "g"), (1, "drain", "p"),
    ]


def test_a_floor_takes_only_the_columns_it_has() -> None:
    steps = peers.plan(("jobq", "sql", "http"), 1, ("single", "drain", "pickup"))
    assert [(s.measurement, s.system) for s in steps] == [
        ("single", "jobq"), ("single", "sql"), ("single", "http"),
        ("drain", "jobq"), ("drain", "sql"),
        ("pickup", "jobq"),
    ]


def test_medians_and_percentiles() -> None:
    assert peers.median([3.0, 1.0, 2.0]) == 2.0
    # Of latency pairs, p50 and p99 each on its own: not one repetition's pair.
    assert peers.median([(1.0, 9.0), (2.0, 5.0), (3.0, 7.0)]) == (2.0, 7.0)
    assert peers.percentile(list(range(1, 101)), 50) == 50
    assert peers.percentile(list(range(1, 101)), 99) == 99
    assert peers.percentile([4.0], 99) == 4.0


ISSUE = {  # the figures issue 28 measured
    "graphile": {"single": 877.0, "bulk": 21_750.0, "drain": 18_513.0, "pickup": (2.6, 7.5)},
    "pgqueuer": {"single": 1_594.0, "bulk": 29_677.0, "drain": 14_325.0, "pickup": (3.2, 13.5)},
    "jobq": {"single": 569.0, "bulk": 10_031.0, "drain": 8_856.0, "pickup": (4.8, 11.4)},
}
LABELS = {"graphile": "Graphile Worker 0.17.3", "pgqueuer": "PgQueuer 1.6.0", "jobq": "jobq 0.3.0 (SDK + Worker)"}


def test_the_table_has_peers_first_the_best_in_bold_and_jobq_over_the_best_peer() -> None:
    table = peers.format_table(ISSUE, LABELS, peers.MEASUREMENTS, 200).splitlines()
    assert table[0] == ("| system | 1/call enqueue jobs/s | bulk enqueue jobs/s (100 a call) | drain jobs/s "
                        "| pickup p50 / p99 ms at 200 jobs/s |")
    assert table[1] == "|---|---|---|---|---|"
    assert table[2] == "| Graphile Worker 0.17.3 | 877 | 21,750 | **18,513** | **2.6** / **7.5** |"
    assert table[3] == "| PgQueuer 1.6.0 | **1,594** | **29,677** | 14,325 | 3.2 / 13.5 |"
    assert table[4] == "| **jobq 0.3.0 (SDK + Worker)** | 569 | 10,031 | 8,856 | 4.8 / 11.4 |"
    # 569 / 1,594, 10,031 / 29,677, 8,856 / 18,513; 4.8 / 2.6 and 11.4 / 7.5
    assert table[5] == ("| jobq ÷ best peer | 0.36× (PgQueuer) | 0.34× (PgQueuer) | 0.48× (Graphile) "
                        "| 1.85× / 1.52× (Graphile) |")
    assert len(table) == 6


def test_latency_ratios_name_each_percentiles_best_peer_and_the_hog_column_has_its_own() -> None:
    figures = {k: {**v, "pickup_hog": v["pickup"]} for k, v in ISSUE.items()}
    figures["pgqueuer"]["pickup_hog"] = (5.0, 6.0)
    table = peers.format_table(figures, LABELS, (*peers.MEASUREMENTS, "pickup_hog"), 100)
    assert "| pickup p50 / p99 ms at 100 jobs/s beside a CPU hog |" in table.splitlines()[0]
    assert table.splitlines()[-1].endswith("| 1.85× / 1.90× (Graphile / PgQueuer) |")


def test_jobq_alone_has_no_ratios_and_nothing_in_bold() -> None:
    table = peers.format_table({"jobq": ISSUE["jobq"]}, LABELS, peers.MEASUREMENTS, 200).splitlines()
    assert table[2:] == ["| **jobq 0.3.0 (SDK + Worker)** | 569 | 10,031 | 8,856 | 4.8 / 11.4 |"]
    peers_only = {k: v for k, v in ISSUE.items() if k != "jobq"}
    assert "best peer" not in peers.format_table(peers_only, LABELS, peers.MEASUREMENTS, 200)


def test_the_floors_show_what_the_statements_and_the_http_hop_allow_one_after_the_other() -> None:
    figures = {**ISSUE, "sql": {"single": 2_000.0, "bulk": 36_000.0, "drain": 30_000.0},
               "http": {"single": 3_000.0, "bulk": 90_000.0}}
    labels = {**LABELS, "sql": "jobq's statements alone", "http": "the SDK against a no-op HTTP service"}
    # One call at a time: 1 / (1/2,000 + 1/3,000) = 1,200 jobs/s; 1 / (1/36,000 + 1/90,000) = 25,714.
    assert peers.series(2_000.0, 3_000.0) == pytest.approx(1_200.0)
    assert peers.series(5.0, 0.0) == 0.0
    assert peers.format_floors(figures, labels).splitlines() == [
        "| what | 1/call enqueue jobs/s | bulk enqueue jobs/s (100 a call) | drain jobs/s |",
        "|---|---|---|---|",
        "| jobq's statements alone (psycopg, no HTTP) | 2,000 | 36,000 | 30,000 |",
        "| the SDK against a no-op HTTP service (no database) | 3,000 | 90,000 | – |",
        "| ceiling: the two one after the other (drain: the statements alone) | 1,200 | 25,714 | 30,000 |",
        "| jobq 0.3.0 (SDK + Worker) | 569 | 10,031 | 8,856 |",
        "| jobq ÷ ceiling | 0.47× | 0.39× | 0.30× |",
        "| best peer | 1,594 (PgQueuer) | 29,677 (PgQueuer) | 18,513 (Graphile) |",
        "| ceiling ÷ best peer | 0.75× | 0.87× | 1.62× |",
    ]
    # Without both floors there is nothing to show; without peers, no peer rows.
    assert peers.format_floors(ISSUE, LABELS) == ""
    alone = peers.format_floors({k: figures[k] for k in ("jobq", "sql", "http")}, labels)
    assert "best peer" not in alone and "| jobq ÷ ceiling | 0.47× | 0.39× | 0.30× |" in alone


def test_sub_millisecond_pickups_keep_two_decimals() -> None:
    figures = {"jobq": {**ISSUE["jobq"], "pickup": (0.456, 1.0)}}
    assert "| 0.46 / 1.0 |" in peers.format_table(figures, LABELS, peers.MEASUREMENTS, 200)


def test_pickups_pair_each_enqueue_with_its_first_handler_start_past_the_warm_up() -> None:
    # Keys 0..3 at 2 jobs/s: the first second (keys 0 and 1) and the warm-up call (-1) do not count.
    sent = [(-1, 0), (0, 1_000), (1, 2_000), (2, 3_000), (3, 4_000)]
    starts = [(-1, 500), (0, 9_000), (2, 4_500), (3, 6_000), (3, 9_999), (1, 2_100)]
    assert peers.pickup_figures(sent, starts, 2.0) == (1.5, 2.0)
    with pytest.raises(peers.BenchError, match="1 of 2 jobs never reached a handler"):
        peers.pickup_figures(sent, [s for s in starts if s[0] != 3], 2.0, "x")


def test_a_measurements_database_is_named_in_the_admin_url() -> None:
    assert (peers.database_url("postgresql://postgres@127.0.0.1:5432/postgres?sslmode=disable", "jobq_peers_1_x")
            == "postgresql://postgres@127.0.0.1:5432/jobq_peers_1_x?sslmode=disable")


def _peers_databases(admin_url: str) -> set[str]:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'jobq_peers_%'")}


@pytest.mark.slow
def test_jobq_alone_runs_to_a_table_without_installing_anything(admin_url: str, tmp_path: Path) -> None:
    before = _peers_databases(admin_url)
    scratch = tmp_path / "scratch"
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--systems", "jobq", "--floors", "--jobs", "300", "--repeat", "1",
         "--database-url", admin_url, "--scratch", str(scratch)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "PostgreSQL" in lines[0] and "medians of 1 interleaved repetition, 300 jobs (30 one a call)" in lines[0]
    row = next(line for line in lines if line.startswith("| **jobq "))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert [bool(re.fullmatch(r"[\d,]+", c)) for c in cells[:3]] == [True] * 3, row
    assert all(int(c.replace(",", "")) > 0 for c in cells[:3]), row
    assert re.fullmatch(r"\d+\.\d+ / \d+\.\d+", cells[3]), row
    for step in ("single", "bulk", "drain", "pickup"):
        assert f"repetition 1, {step}, jobq:" in out.stderr
    # What the drain cost, which a busy machine does not blur: CPU and calls per 1,000 jobs.
    costs = re.search(r"jobq drain, per 1,000 jobs: worker CPU (\d+\.\d+) s, service CPU (\d+\.\d+) s; "
                      r"calls: .*claim (\d+\.\d)", out.stderr)
    assert costs is not None, out.stderr
    assert float(costs[1]) > 0 and float(costs[2]) > 0 and float(costs[3]) > 0, costs[0]
    # The floors, each a figure of its own: the statements alone, the HTTP hop alone.
    floors = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")[1:]]
              for line in lines if line.startswith("| ") and "(" in line.split("|")[1]}
    statements = floors["jobq's statements alone (psycopg, no HTTP)"]
    hop = floors["the SDK against a no-op HTTP service (no database)"]
    assert all(int(c.replace(",", "")) > 0 for c in statements), statements
    assert all(int(c.replace(",", "")) > 0 for c in hop[:2]) and hop[2] == "–", hop
    assert any(line.startswith("| jobq ÷ ceiling | ") for line in lines), out.stdout
    for step in ("single, jobq's statements alone", "drain, jobq's statements alone",
                 "bulk, the SDK against a no-op HTTP service"):
        assert f"repetition 1, {step}:" in out.stderr
    assert "drain, the SDK against" not in out.stderr
    assert not scratch.exists()  # jobq alone needs no registry
    assert _peers_databases(admin_url) <= before  # every measurement's database is dropped


def test_the_sql_floors_drain_ends_at_once_when_a_statement_fails(admin_url: str) -> None:
    # An empty database holds no jobs table: the first claim fails. The driver must exit
    # (bench/peers.py then reports its error) rather than leave the other threads draining
    # and bench/peers.py waiting for a backlog that never empties.
    name = f"jobq_floor_empty_{uuid.uuid4().hex[:12]}"
    pg.admin_execute(admin_url, f'CREATE DATABASE "{name}"')
    try:
        _drain_fails(pg.with_database(admin_url, name))
    finally:
        pg.drop(admin_url, name)


def _drain_fails(url: str) -> None:
    driver = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "drivers" / "sql_driver.py"), "work", "--database-url", url],
        cwd=ROOT / "bench" / "drivers", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "ready\n"
        assert driver.stdin is not None
        driver.stdin.write("go\n")
        driver.stdin.flush()
        assert driver.wait(timeout=30) == 1  # stdin still open: only the failure ends it
        assert driver.stderr is not None and "UndefinedTable" in driver.stderr.read()
    finally:
        driver.kill()
        driver.wait()


def test_an_unreachable_database_is_said_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = peers.main(["--systems", "jobq", "--repeat", "1", "--jobs", "100",
                       "--database-url", f"postgresql://postgres@127.0.0.1:{port}/postgres"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot reach PostgreSQL at 127.0.0.1:{port}" in err and "--database-url" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
