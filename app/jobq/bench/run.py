"""One ``jobq bench`` run: the service, then per mode its HTTP phases followed (with
``--baseline``) by the raw-SQL ceilings, then the pickup latency; tidied between
measurements; the report printed as a table or JSON."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobq.bench.baseline import RawSql, raw_batch, raw_single
from jobq.bench.config import LEASE_MS, WAIT_MS, BenchConfig, BenchError, Mode, log
from jobq.bench.cpu import CpuMeter, DatabaseCpu
from jobq.bench.database import Tidy, database_facts, no_tidy
from jobq.bench.latency import latency
from jobq.bench.load import http_mode
from jobq.bench.phases import run_async
from jobq.bench.queues import queues_phase
from jobq.bench.report import compare, compare_sdk, render
from jobq.bench.sdk import sdk
from jobq.bench.service import service_for
from jobq.bench.waiters import waiters_phase


def run(cfg: BenchConfig) -> dict[str, Any]:
    base = cfg.queue or f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    with service_for(cfg) as service, contextlib.ExitStack() as stack:
        database = DatabaseCpu.open(service.database_url) if service.database_url else None
        if database is not None:
            stack.callback(database.close)
        meter = CpuMeter(service.pid, database)
        facts = database_facts(service.database_url) if service.database_url else None
        vacuum = facts is not None and facts["autovacuum"] != "on"
        if vacuum:
            log("autovacuum is off on this PostgreSQL server: the bench runs VACUUM on the jobs table "
                "between measurements")
        tidy: Callable[[], None] = (Tidy(service.database_url, base, vacuum) if service.database_url
                                    else no_tidy)
        stack.callback(tidy)
        raw: RawSql | None = None
        if cfg.baseline:
            if service.database_url is None:
                raise BenchError("--baseline with --url needs --database-url (or JOBQ_DATABASE_URL)")
            raw = RawSql(service.database_url, cfg.batch, cfg.timeout_s, meter)
        if cfg.sdk and service.database_url is None:
            # The worker processes report nothing: what they did is read back from the jobs.
            raise BenchError("--sdk with --url needs --database-url (or JOBQ_DATABASE_URL)")
        if cfg.queues and service.database_url is None:
            # The queues are made straight in the database: ten thousand in one statement.
            raise BenchError("--queues with --url needs --database-url (or JOBQ_DATABASE_URL)")
        report: dict[str, Any] = {
            "config": {
                "url": service.url, "started_service": service.pid is not None,
                "server_workers": cfg.server_workers if service.pid is not None else None,
                "jobs": cfg.jobs, "producers": cfg.producers, "workers": cfg.workers, "batch": cfg.batch,
                "queue": base, "lease_ms": LEASE_MS, "wait_ms": WAIT_MS,
                "cpus": os.cpu_count(), "database_cpu_measured": database is not None, "database": facts,
            },
        }
        baseline: dict[str, Any] = {}
        for mode in cfg.modes:
            tidy()
            result = run_async(http_mode(cfg, service.url, meter, mode, base))
            report[mode.value] = result.as_json()
            if raw is not None:
                counts = cfg.connections
                if mode is Mode.batch:
                    baseline |= raw_batch(raw, cfg.jobs, counts, base, tidy)
                else:
                    baseline |= raw_single(raw, cfg.jobs, counts, base, tidy)
        if cfg.latency_seconds > 0:
            tidy()
            report["latency"] = run_async(latency(cfg, service.url, meter, base))
        if cfg.waiters > 0:
            report["waiters"] = waiters_phase(cfg, service.url, meter, service.database_url, base, tidy)
        if cfg.queues > 0:
            assert service.database_url is not None
            report["queues"] = queues_phase(cfg, service.url, service.database_url, base, tidy)
        if cfg.sdk:
            assert service.database_url is not None
            tidy()
            report["sdk"] = sdk(cfg, service.url, meter, base, tidy, service.database_url)
    if raw is not None:
        report["baseline"] = baseline
    report["ratios"], report["targets"] = compare(report)
    if "sdk" in report:
        sdk_ratios, sdk_targets = compare_sdk(report["sdk"])
        report["ratios"] |= sdk_ratios
        report["targets"] += sdk_targets
    return report


def _exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(cfg: BenchConfig, *, as_json: bool) -> int:
    # SIGTERM unwinds like Ctrl-C, so the service and the worker processes the bench started
    # are stopped on the way out rather than left running.
    previous = (signal.signal(signal.SIGTERM, _exit) if threading.current_thread() is threading.main_thread()
                else None)
    try:
        report = run(cfg)
    except BenchError as exc:
        log(f"error: {exc}")
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        render(report)
    return 0
