"""The report: the HTTP figures as ratios to the raw-SQL ceilings, the informational
targets, and the tables on stdout (the JSON is the report itself)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

# Informational targets shown next to the figures (issue 5).
TARGET_BATCH_DRAIN_RATIO = 0.5
TARGET_SINGLE_E2E_RATIO = 0.6
TARGET_PICKUP_P50_MS = 5.0
TARGET_PICKUP_P99_MS = 20.0
# The named statements against the minimal job table (issue 12).
TARGET_NAMED_VS_MINIMAL_DRAIN = 0.6
TARGET_NAMED_VS_MINIMAL_DB_CPU = 1.5
# --sdk (issue 12): the SDK's path as a ratio to the raw client's, in the same run.
TARGET_SDK_SEQUENTIAL_ENQUEUE_RATIO = 1.3  # latency p50: at most this many times the raw client's
TARGET_SDK_WORKER_DRAIN_RATIO = 0.8  # `jobq worker` drain rate: at least this share of the raw drain
# --waiters (issue 24): idle long-polls cost the service this little, and pickup beside them.
TARGET_WAITERS_IDLE_CPU_PCT = 10.0
TARGET_WAITERS_IDLE_XACT_PER_S = 50.0
TARGET_WAITERS_PICKUP_P50_MS = 10.0
TARGET_WAITERS_PICKUP_P99_MS = 50.0
# --queues (issue 24): many queues cost a claim, the listing and /metrics this little.
TARGET_QUEUES_CLAIM_RATIO = 3.0  # a claim naming 100 queues / one naming 1 (median)
TARGET_QUEUES_LIST_MS = 100.0  # GET /v1/queues, first page, at 10,000 queues
TARGET_QUEUES_METRICS_MS = 500.0
TARGET_QUEUES_METRICS_BYTES = 1_500_000


def _ratio(http: float, ceiling: float) -> float | None:
    return round(http / ceiling, 3) if ceiling > 0 else None


def _target(figure: str, value: float | None, op: str, target: float, unit: str) -> dict[str, Any]:
    met = None if value is None else (value >= target if op == ">=" else value <= target)
    return {"figure": figure, "value": value, "op": op, "target": target, "unit": unit, "met": met}


def compare(report: dict[str, Any]) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    ratios: dict[str, float | None] = {}
    targets: list[dict[str, Any]] = []
    base = report.get("baseline", {})
    if "batch" in report and "batch_drain_rate" in base:
        ratios["batch_enqueue_vs_raw"] = _ratio(report["batch"]["enqueue_rate"], base["batch_enqueue_rate"])
        ratios["batch_drain_vs_raw"] = _ratio(report["batch"]["drain_rate"], base["batch_drain_rate"])
        targets.append(_target("batch drain / raw batch drain", ratios["batch_drain_vs_raw"], ">=",
                               TARGET_BATCH_DRAIN_RATIO, "ratio"))
    if "single" in report and "single_whole_life_rate" in base:
        ratios["single_e2e_vs_raw"] = _ratio(report["single"]["end_to_end_rate"], base["single_whole_life_rate"])
        targets.append(_target("single end-to-end / raw single whole life", ratios["single_e2e_vs_raw"], ">=",
                               TARGET_SINGLE_E2E_RATIO, "ratio"))
    vs_minimal(report.get("baseline", {}), ratios, targets)
    if "latency" in report:
        targets.append(_target("pickup p50", report["latency"]["p50_ms"], "<=", TARGET_PICKUP_P50_MS, "ms"))
        targets.append(_target("pickup p99", report["latency"]["p99_ms"], "<=", TARGET_PICKUP_P99_MS, "ms"))
    if "waiters" in report:
        compare_waiters(report["waiters"], ratios, targets)
    if "queues" in report:
        compare_queues(report["queues"], ratios, targets)
    return ratios, targets


def compare_queues(q: dict[str, Any], ratios: dict[str, float | None], targets: list[dict[str, Any]]) -> None:
    """A claim naming 100 queues against one naming 1, and the listing and /metrics at N queues."""
    ratios["queues_claim_found_hundred_vs_one"] = q["claim_found_hundred_vs_one"]
    ratios["queues_claim_empty_hundred_vs_one"] = q["claim_empty_hundred_vs_one"]
    n = f"{q['queues']:,} queues"
    for side in ("found", "empty"):
        targets.append(_target(f"claim naming {q['claim_width']} queues / 1, {side} (p50)",
                               q[f"claim_{side}_hundred_vs_one"], "<=", TARGET_QUEUES_CLAIM_RATIO, "times"))
    targets.append(_target(f"{n}: GET /v1/queues first page p50", q["list_p50_ms"], "<=",
                           TARGET_QUEUES_LIST_MS, "ms"))
    targets.append(_target(f"{n}: GET /metrics p50", q["metrics_p50_ms"], "<=", TARGET_QUEUES_METRICS_MS, "ms"))
    targets.append(_target(f"{n}: GET /metrics bytes", q["metrics_bytes"], "<=", TARGET_QUEUES_METRICS_BYTES, ""))


def compare_waiters(w: dict[str, Any], ratios: dict[str, float | None], targets: list[dict[str, Any]]) -> None:
    """Pickup beside N idle long-polls as a ratio to pickup without, and the issue's targets."""
    alone, beside = w["pickup_without_waiters"], w["pickup_with_waiters"]
    for p in ("p50", "p99"):
        ratios[f"waiters_pickup_{p}_vs_none"] = _sdk_ratio(beside[f"{p}_ms"], alone[f"{p}_ms"])
    n = f"{w['waiters']:,} idle long-polls"
    targets.append(_target(f"{n}: service CPU while idle (% of a core)", w["idle_service_cpu_pct"], "<=",
                           TARGET_WAITERS_IDLE_CPU_PCT, "%"))
    targets.append(_target(f"{n}: database transactions/s while idle", w["idle_db_xact_per_s"], "<=",
                           TARGET_WAITERS_IDLE_XACT_PER_S, "/s"))
    targets.append(_target(f"{n}: pickup p50", beside["p50_ms"], "<=", TARGET_WAITERS_PICKUP_P50_MS, "ms"))
    targets.append(_target(f"{n}: pickup p99", beside["p99_ms"], "<=", TARGET_WAITERS_PICKUP_P99_MS, "ms"))
    errors = _target(f"{n}: answers that were not 200", w["errors"], "<=", 0, "")
    targets.append(errors)


def vs_minimal(base: dict[str, Any], ratios: dict[str, float | None], targets: list[dict[str, Any]]) -> None:
    """The named statements' drain and its database CPU per job as ratios to the minimal table's."""
    if "minimal_drain_rate" not in base:
        return
    ratios["named_drain_vs_minimal"] = _ratio(base["batch_drain_rate"], base["minimal_drain_rate"])
    named_cpu, minimal_cpu = base["batch_drain_db_cpu_ms_per_1000_jobs"], base["minimal_drain_db_cpu_ms_per_1000_jobs"]
    ratios["named_db_cpu_vs_minimal"] = (None if named_cpu is None or minimal_cpu is None
                                         else _ratio(named_cpu, minimal_cpu))
    targets.append(_target("raw batch drain / minimal table drain", ratios["named_drain_vs_minimal"], ">=",
                           TARGET_NAMED_VS_MINIMAL_DRAIN, "ratio"))
    targets.append(_target("raw drain DB CPU per job / minimal table's", ratios["named_db_cpu_vs_minimal"], "<=",
                           TARGET_NAMED_VS_MINIMAL_DB_CPU, "ratio"))


def _render_minimal(console: Console, report: dict[str, Any]) -> None:
    """The named statements' raw drain next to the minimal job table's, as ratios."""
    b, ratios = report.get("baseline", {}), report["ratios"]
    if "minimal_drain_rate" not in b:
        return
    table = Table(title="named statements vs a minimal job table (raw SQL, claim 100 + batch ack, best of connections)")
    for column in ("figure", "named", "minimal", "named / minimal", "target"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    table.add_row("drain jobs/s", _fmt(b["batch_drain_rate"]), _fmt(b["minimal_drain_rate"]),
                  _fmt(ratios.get("named_drain_vs_minimal"), "ratio"), f">= {TARGET_NAMED_VS_MINIMAL_DRAIN:.0%}")
    table.add_row("database CPU ms per 1,000 jobs", _fmt(b["batch_drain_db_cpu_ms_per_1000_jobs"]),
                  _fmt(b["minimal_drain_db_cpu_ms_per_1000_jobs"]),
                  _fmt(ratios.get("named_db_cpu_vs_minimal"), "ratio"), f"<= {TARGET_NAMED_VS_MINIMAL_DB_CPU:.0%}")
    console.print(table)


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and unit not in ("ratio", "x"):
        return f"{value:,.2f}{unit}" if value < 100 else f"{value:,.0f}{unit}"
    if unit == "ratio":
        return f"{value:.0%}"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,}{unit}"


def render(report: dict[str, Any]) -> None:
    console = Console()
    cfg = report["config"]
    server = (f"started, {cfg['server_workers']} worker process(es)" if cfg["started_service"]
              else "given by --url")
    console.print(f"jobq bench: {cfg['jobs']:,} jobs per phase, {cfg['producers']} producers, "
                  f"{cfg['workers']} workers, batch {cfg['batch']}; service {cfg['url']} ({server}); "
                  f"{cfg['cpus']} CPUs", highlight=False)
    if cfg["database"]:
        db = cfg["database"]
        console.print(f"PostgreSQL {db['server_version']}: autovacuum {db['autovacuum']}, synchronous_commit "
                      f"{db['synchronous_commit']}, fsync {db['fsync']}", highlight=False)

    rates = Table(title="throughput (jobs/s) and CPU per 1,000 jobs (ms: service / database / bench)")
    for column in ("mode", "phase", "jobs/s", "service", "database", "bench"):
        rates.add_column(column, justify="left" if column in ("mode", "phase") else "right")
    for mode in ("batch", "single"):
        if mode not in report:
            continue
        r = report[mode]
        for phase, key in (("enqueue", "enqueue_rate"), ("drain", "drain_rate"), ("end-to-end", "end_to_end_rate")):
            name = phase.replace("-", "_")
            cpu = [(r[k] or {}).get(name) for k in
                   ("cpu_ms_per_1000_jobs", "db_cpu_ms_per_1000_jobs", "bench_cpu_ms_per_1000_jobs")]
            rates.add_row(mode, phase, _fmt(r[key]), *(_fmt(c) for c in cpu))
    console.print(rates)

    if "latency" in report:
        lat = report["latency"]
        table = Table(title=f"pickup latency (visible → claimed, server clock), {lat['jobs']:,} jobs")
        for column in ("offered jobs/s", "achieved", "p50 ms", "p95 ms", "p99 ms", "max ms"):
            table.add_column(column, justify="right")
        table.add_row(_fmt(lat["offered_rate"]), _fmt(lat["achieved_rate"]), _fmt(lat["p50_ms"]),
                      _fmt(lat["p95_ms"]), _fmt(lat["p99_ms"]), _fmt(lat["max_ms"]))
        console.print(table)

    if "baseline" in report:
        b = report["baseline"]
        table = Table(title="raw-SQL ceiling (same statements, psycopg, no HTTP)")
        for column in ("figure", "jobs/s", "best of connections", "HTTP jobs/s", "HTTP / raw"):
            table.add_column(column, justify="left" if column == "figure" else "right")
        ratios = report["ratios"]
        if "batch_drain_rate" in b:
            table.add_row("batch insert", _fmt(b["batch_enqueue_rate"]), str(b["batch_enqueue_connections"]),
                          _fmt(report["batch"]["enqueue_rate"]), _fmt(ratios.get("batch_enqueue_vs_raw"), "ratio"))
            table.add_row("batch drain", _fmt(b["batch_drain_rate"]), str(b["batch_drain_connections"]),
                          _fmt(report["batch"]["drain_rate"]), _fmt(ratios.get("batch_drain_vs_raw"), "ratio"))
        if "single_whole_life_rate" in b:
            table.add_row("single whole life (HTTP: end-to-end)", _fmt(b["single_whole_life_rate"]),
                          str(b["single_whole_life_connections"]), _fmt(report["single"]["end_to_end_rate"]),
                          _fmt(ratios.get("single_e2e_vs_raw"), "ratio"))
        console.print(table)
        _render_minimal(console, report)

    if "sdk" in report:
        render_sdk(console, report["sdk"], report["ratios"])

    if "waiters" in report:
        _render_waiters(console, report["waiters"], report["ratios"])

    if "queues" in report:
        _render_queues(console, report["queues"])

    if report["targets"]:
        table = Table(title="targets (informational)")
        for column in ("figure", "value", "target", "met"):
            table.add_column(column, justify="left" if column == "figure" else "right")
        for t in report["targets"]:
            unit = {"ratio": "ratio", "times": "x", "%": "%", "/s": "/s", "": ""}.get(t["unit"], " ms")
            met = "–" if t["met"] is None else ("yes" if t["met"] else "[red]no[/red]")
            table.add_row(t["figure"], _fmt(t["value"], unit), f"{t['op']} {_fmt(t['target'], unit)}", met)
        console.print(table)


def _render_waiters(console: Console, w: dict[str, Any], ratios: dict[str, float | None]) -> None:
    console.print(f"{w['held'] or 0:,} of {w['waiters']:,} idle long-polls held (wait_ms {w['wait_ms']:,}), "
                  f"idle for {w['idle_seconds']:g} s: service CPU {_fmt(w['idle_service_cpu_pct'], '%')} of a core, "
                  f"database {_fmt(w['idle_db_xact_per_s'])} transactions/s; answers {w['answers']}",
                  highlight=False)
    table = Table(title=f"pickup latency with {w['waiters']:,} idle long-polls and without (same run)")
    for column in ("waiters", "offered jobs/s", "achieved", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right")
    for label, lat in (("0", w["pickup_without_waiters"]), (f"{w['waiters']:,}", w["pickup_with_waiters"])):
        table.add_row(label, _fmt(lat["offered_rate"]), _fmt(lat["achieved_rate"]), _fmt(lat["p50_ms"]),
                      _fmt(lat["p95_ms"]), _fmt(lat["p99_ms"]), _fmt(lat["max_ms"]))
    table.add_row("ratio", "", "", _fmt(ratios.get("waiters_pickup_p50_vs_none"), "x"), "",
                  _fmt(ratios.get("waiters_pickup_p99_vs_none"), "x"), "")
    console.print(table)


def _render_queues(console: Console, q: dict[str, Any]) -> None:
    table = Table(title=f"{q['queues']:,} queues ({q['queues_with_jobs']:,} with a job waiting): medians of "
                        f"{q['claim_calls']} claims (wait_ms 0) of each kind, {q['list_calls']} listings, "
                        f"{q['metrics_calls']} scrapes")
    for column in ("figure", "p50 ms", f"{q['claim_width']} / 1", "bytes"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for side, what in (("found", "a job waiting in the last queue named"), ("empty", "no job waiting")):
        table.add_row(f"claim naming 1 queue, {what}", _fmt(q[f"claim_one_{side}_p50_ms"]), "", "")
        table.add_row(f"claim naming {q['claim_width']} queues, {what}", _fmt(q[f"claim_hundred_{side}_p50_ms"]),
                      _fmt(q[f"claim_{side}_hundred_vs_one"], "x"), "")
    table.add_row(f"GET /v1/queues, first page ({q['list_page_queues']} queues)", _fmt(q["list_p50_ms"]), "",
                  _fmt(q["list_bytes"]))
    table.add_row("GET /metrics", _fmt(q["metrics_p50_ms"]), "", _fmt(q["metrics_bytes"]))
    if q["claims_unexpected"]:
        table.add_row(f"[red]claims that did not get what they should: {q['claims_unexpected']}[/red]", "", "", "")
    console.print(table)


def _cpu(figures: dict[str, Any], who: str) -> float | None:
    value = (figures.get("cpu_ms_per_1000_jobs") or {}).get(who)
    return value if isinstance(value, int | float) else None


def _sdk_ratio(sdk: float | None, raw: float | None) -> float | None:
    return None if sdk is None or raw is None else _ratio(sdk, raw)


def compare_sdk(sdk: dict[str, Any]) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    """The ``--sdk`` figures as sdk ÷ raw (latency and CPU: lower is better; rates: higher),
    and the issue's targets for them."""
    ratios: dict[str, float | None] = {}
    targets: list[dict[str, Any]] = []

    def cpu_ratios(name: str, raw: dict[str, Any], other: dict[str, Any]) -> None:
        for who in ("client", "service"):
            ratios[f"{name}_{who}_cpu_vs_raw"] = _sdk_ratio(_cpu(other, who), _cpu(raw, who))

    if "sequential_enqueue" in sdk:
        seq = sdk["sequential_enqueue"]
        for p in ("p50", "p99"):
            ratios[f"sdk_sequential_enqueue_{p}_vs_raw"] = _sdk_ratio(seq["sdk"][f"{p}_ms"], seq["raw"][f"{p}_ms"])
        cpu_ratios("sdk_sequential_enqueue", seq["raw"], seq["sdk"])
        targets.append(_target("sdk: enqueue latency p50 / raw", ratios["sdk_sequential_enqueue_p50_vs_raw"],
                               "<=", TARGET_SDK_SEQUENTIAL_ENQUEUE_RATIO, "times"))
    if "enqueue_many" in sdk:
        many = sdk["enqueue_many"]
        ratios["sdk_enqueue_many_vs_raw"] = _sdk_ratio(many["sdk"]["rate"], many["raw"]["rate"])
        cpu_ratios("sdk_enqueue_many", many["raw"], many["sdk"])
    if "drain" in sdk:
        drain = sdk["drain"]
        for side, name in (("worker", "sdk_worker_drain"), ("in_process", "sdk_in_process_drain")):
            ratios[f"{name}_vs_raw"] = _sdk_ratio(drain[side]["rate"], drain["raw"]["rate"])
            cpu_ratios(name, drain["raw"], drain[side])
        targets.append(_target("sdk: jobq worker drain / raw", ratios["sdk_worker_drain_vs_raw"], ">=",
                               TARGET_SDK_WORKER_DRAIN_RATIO, "ratio"))
    for pair in sdk.get("pickup", []):
        where = f"at_{pair['offered_rate']:g}_w{pair['workers']}"
        raw, other = pair["raw"], pair["sdk"]
        for p in ("p50", "p99"):
            ratios[f"sdk_pickup_{p}_vs_raw_{where}"] = _sdk_ratio(other[f"{p}_ms"], raw[f"{p}_ms"])
        ratios[f"sdk_pickup_client_cpu_vs_raw_{where}"] = _sdk_ratio(_cpu(other, "client"), _cpu(raw, "client"))
        label = f"sdk: pickup at {pair['offered_rate']:g}/s, {pair['workers']} worker(s),"
        for p, limit in (("p50", TARGET_PICKUP_P50_MS), ("p99", TARGET_PICKUP_P99_MS)):
            target = _target(f"{label} {p}", other[f"{p}_ms"], "<=", limit, "ms")
            if other["unclaimed"]:  # jobs never picked up: no percentile of the claimed ones meets it
                target["met"] = False
            targets.append(target)
    return ratios, targets


def render_sdk(console: Console, sdk: dict[str, Any], ratios: dict[str, float | None]) -> None:
    """The SDK beside the raw client: each figure, and each side's CPU per 1,000 jobs (the
    client's: the bench's process and its worker processes; the service's)."""
    table = Table(title=f"SDK vs raw client, interleaved in one run: {sdk['worker_processes']} `jobq worker` "
                        f"process(es) of concurrency {sdk['concurrency']} (CPU: ms per 1,000 jobs; pickup "
                        "(xN): enqueued N at a time, every 10 ms)")
    for column in ("figure", "raw", "sdk", "sdk/raw", "client raw", "client sdk", "service raw", "service sdk"):
        table.add_column(column, justify="left" if column == "figure" else "right")

    def row(figure: str, raw: dict[str, Any], other: dict[str, Any], key: str, unit: str, ratio: str,
            cpu: bool = True) -> None:
        cells = [_fmt(_cpu(side, who)) if cpu else "" for who in ("client", "service") for side in (raw, other)]
        table.add_row(figure, _fmt(raw[key], unit), _fmt(other[key], unit), _fmt(ratios.get(ratio), "x"), *cells)

    if "sequential_enqueue" in sdk:
        seq = sdk["sequential_enqueue"]
        row("enqueue one at a time, p50", seq["raw"], seq["sdk"], "p50_ms", " ms", "sdk_sequential_enqueue_p50_vs_raw")
        row("  p99", seq["raw"], seq["sdk"], "p99_ms", " ms", "sdk_sequential_enqueue_p99_vs_raw", cpu=False)
    if "enqueue_many" in sdk:
        many = sdk["enqueue_many"]
        row(f"enqueue_many of {many['batch']}, jobs/s", many["raw"], many["sdk"], "rate", "", "sdk_enqueue_many_vs_raw")
    if "drain" in sdk:
        drain = sdk["drain"]
        row("drain: jobq worker, jobs/s", drain["raw"], drain["worker"], "rate", "", "sdk_worker_drain_vs_raw")
        row("drain: in-process Worker", drain["raw"], drain["in_process"], "rate", "", "sdk_in_process_drain_vs_raw")
    for pair in sdk.get("pickup", []):
        where = f"at_{pair['offered_rate']:g}_w{pair['workers']}"
        unclaimed = pair["sdk"]["unclaimed"]
        burst = pair.get("jobs_per_enqueue", 1)
        row(f"pickup {pair['offered_rate']:g}/s{f' (x{burst})' if burst > 1 else ''}, {pair['workers']}w, p50",
            pair["raw"], pair["sdk"], "p50_ms", " ms",
            f"sdk_pickup_p50_vs_raw_{where}")
        row("  p99" + (f" ({unclaimed:,} unclaimed)" if unclaimed else ""), pair["raw"], pair["sdk"], "p99_ms", " ms",
            f"sdk_pickup_p99_vs_raw_{where}", cpu=False)
    console.print(table)

