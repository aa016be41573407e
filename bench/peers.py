"""jobq beside Graphile Worker and PgQueuer on this machine, measured interleaved, printed as
a Markdown table with jobq's ratio to the best peer in each column.

    .venv/bin/python bench/peers.py [--jobs N] [--repeat R] [--systems jobq,graphile,pgqueuer]
                                    [--scratch DIR] [--database-url URL] [--hog] [--floors]

The peers are installed from their registries on first use, into the scratch folder
(default .jobq/peers in the checkout): ``graphile-worker`` with npm into DIR/graphile,
``pgqueuer[asyncpg]`` with pip into a virtual environment at DIR/pgqueuer. Later runs use what
is there (the versions are printed with the table); delete the folder to take newer ones.

Every measurement runs on a database of its own, copied from a template that holds the
system's schema and dropped afterwards: the server's autovacuum may be off, and no system
should wade through the dead rows of the one before. Within each repetition every column is
measured for each system in turn (jobq, Graphile, PgQueuer, then the next column), so all of
them see the same minutes of a shared machine; the table shows the median of the repetitions.

The columns:

- one-call enqueue: jobs/s of one producer enqueuing one job per call, sequentially
  (``--jobs`` / 10 jobs, after 10 untimed calls);
- bulk enqueue: jobs/s of one producer enqueuing 100 jobs per call (``--jobs`` jobs);
- drain: a backlog of ``--jobs`` jobs, filled first, emptied by the system's workers; the
  clock runs from the moment the waiting workers are told to start until the database holds
  no unfinished job (looked at every 20 ms);
- pickup: p50 and p99 of the time from an enqueue call's return (the commit is behind it)
  to the handler's first line, one producer enqueuing ``--pickup-rate`` jobs/s for
  ``--pickup-seconds`` (the first second is a warm-up and not counted). Both times are read
  from CLOCK_MONOTONIC, which every process on the machine shares;
- with ``--hog``, the pickup again while one ``python3 -c "while True: pass"`` runs.

With ``--floors``, two more rows are measured in the same repetitions, each on its own, and
printed in a second table with what they allow beside jobq and the best peer:

- jobq's statements alone (drivers/sql_driver.py): what ``POST /v1/jobs`` and ``POST
  /v1/jobs/batch`` run (``JobInsert``, ``JobEnqueueMany``) from one psycopg connection, one
  call at a time, and the drain as the service runs it (``JobClaim`` of 100 and one
  ``LeaseAckMany``) from four connections;
- the SDK against a no-op HTTP service (drivers/noop_service.py): jobq's producer driver
  against a bare ASGI function under uvicorn, with ``jobq serve``'s event loop and HTTP
  protocol, answering with canned jobs: the HTTP hop alone, no database;
- the ceiling: one call at a time a producer waits for the hop and then for the statement,
  so ``1 / (1/statements + 1/hop)`` jobs/s is about the most an HTTP service running these
  statements could do for it (the drain's: the statements alone).

Each system as its users run it, with its own best settings (set in its driver):

- jobq: one ``jobq serve`` process (logs at WARNING) on a fresh database; one sync
  ``jobq.client.Client`` producer; two ``jobq.worker.Worker`` processes of concurrency 100,
  the SDK's defaults otherwise, a plain-function no-op handler (drivers/jobq_driver.py);
- Graphile Worker: ``addJob`` / ``addJobs`` from ``makeWorkerUtils``; one ``run()`` with the
  settings of its performance page (drivers/graphile.mjs);
- PgQueuer: ``Queries.enqueue`` with one job or lists of 100; five ``QueueManager``s in one
  process as its own benchmark runs them (drivers/pgqueuer_driver.py).

Every driver speaks one protocol, so this file treats them alike:

- ``enqueue --jobs N --batch B [--warmup W] [--rate R]`` enqueues W untimed calls (keys below
  0), then jobs keyed 0..N-1, B per call (paced at R jobs/s when R is given), and prints one
  JSON line: ``{"jobs": N, "seconds": S}``, with ``"sent": [[key, microseconds], ...]`` (the
  moment each call returned) when paced;
- ``work [--record]`` sets its consumer up, prints ``ready``, starts on a line ``go`` on its
  standard input, stops gracefully when its standard input closes, and prints
  ``{"handled": N}``, with ``"starts": [[key, microseconds], ...]`` when recording;
- ``install`` sets the system up in its template database: the peers create their schema,
  the SQL floor its queue (``jobq migrate`` made its schema).

Standard library and the repository's virtual environment only (psycopg for the peers'
databases, ``jobq.client`` to watch jobq's queue); nothing private of jobq is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import json
import math
import os
import platform
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = Path(__file__).resolve().parent / "drivers"
SYSTEMS = ("jobq", "graphile", "pgqueuer")
PEERS = ("graphile", "pgqueuer")
# --floors: jobq's parts measured alone, in the same minutes (see format_floors).
FLOORS = ("sql", "http")
ROWS = (*PEERS, "jobq")  # the table's order: jobq last, above its ratios
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BATCH = 100  # jobs per call of the bulk enqueue, and of the drain's backlog
SINGLE_SHARE = 10  # the one-call enqueue moves --jobs / 10 jobs: a tenth of the time
SINGLE_WARMUP = 10  # untimed calls before a timed enqueue
POLL_S = 0.02  # how often the end of a drain is looked for
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
PICKUP_DRAIN_TIMEOUT_S = 60.0  # after the paced producer's last job
PR_SET_PDEATHSIG = 1

MEASUREMENTS = ("single", "bulk", "drain", "pickup")
HOG = "pickup_hog"
LATENCIES = ("pickup", HOG)  # (p50, p99) in ms, lower is better; the rest jobs/s, higher is better


def log(message: str) -> None:
    print(f"peers: {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    """A measurement that could not be made; its message says what to do."""


# --- arguments --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    jobs: int
    repeat: int
    systems: tuple[str, ...]
    scratch: Path
    database_url: str
    hog: bool
    pickup_rate: float
    pickup_seconds: float
    floors: bool = False

    @property
    def single_jobs(self) -> int:
        return max(1, self.jobs // SINGLE_SHARE)

    @property
    def measurements(self) -> tuple[str, ...]:
        return MEASUREMENTS + ((HOG,) if self.hog else ())

    @property
    def measured(self) -> tuple[str, ...]:
        """The systems, and with --floors the floors after them."""
        return self.systems + (FLOORS if self.floors else ())


def _systems(text: str) -> tuple[str, ...]:
    names = tuple(n.strip().lower() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose among {','.join(SYSTEMS)}, not {text!r}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"each system once, not {text!r}")
    return names


def _database_url(text: str) -> str:
    # The peers' drivers (node-postgres, asyncpg) take URLs, not key=value strings.
    parts = urlsplit(text)
    if parts.scheme not in ("postgresql", "postgres") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"a postgresql://user@host:port/dbname URL, not {text!r}")
    return text


def _at_least(minimum: float, kind: type = int) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        value = kind(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"at least {minimum:g}, not {text}")
        return value
    return check


def parse_args(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="bench/peers.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--jobs", type=_at_least(BATCH), default=20_000,
                        help="the drain's backlog and the bulk enqueue's jobs; the one-call enqueue moves a tenth")
    parser.add_argument("--repeat", type=_at_least(1), default=3, help="repetitions; the table shows their medians")
    parser.add_argument("--systems", type=_systems, default=",".join(SYSTEMS),
                        help="comma-separated, measured in this order within each repetition")
    parser.add_argument("--scratch", type=Path, default=ROOT / ".jobq" / "peers",
                        help="where the peers are installed")
    parser.add_argument("--database-url", type=_database_url, default=ADMIN_URL,
                        help="a PostgreSQL role that may create databases (each measurement gets its own)")
    parser.add_argument("--hog", action="store_true",
                        help="measure pickup again beside one CPU-burning process")
    parser.add_argument("--pickup-rate", type=_at_least(1.0, float), default=200.0, help="jobs/s")
    parser.add_argument("--pickup-seconds", type=_at_least(2.0, float), default=10.0,
                        help="the first second is a warm-up")
    parser.add_argument("--floors", action="store_true",
                        help="also measure jobq's statements alone (psycopg, no HTTP) and the SDK against a "
                             "no-op HTTP service (no database), interleaved with the systems, and print what "
                             "they allow beside the best peer")
    a = parser.parse_args(argv)
    return Options(a.jobs, a.repeat, a.systems, a.scratch, a.database_url, a.hog, a.pickup_rate,
                   a.pickup_seconds, a.floors)


# --- the plan and the figures -----------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    repetition: int
    measurement: str
    system: str


def plan(systems: Sequence[str], repeat: int, measurements: Sequence[str]) -> list[Step]:
    """Repetition by repetition, column by column, every system in turn (A B C A B C ...):
    the systems of one column are measured minutes apart at most. A floor takes only the
    columns it has (``System.measures``)."""
    return [Step(r, m, s) for r in range(repeat) for m in measurements for s in systems
            if m in ALL[s].measures]


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest rank: every figure is one job's."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * p / 100)) - 1]


Figure = float | tuple[float, float]


def median(values: Sequence[Figure]) -> Figure:
    """Of throughputs; of latency pairs, p50 and p99 each on its own."""
    if not values:
        raise ValueError("no values")
    if isinstance(values[0], tuple):
        pairs = [v for v in values if isinstance(v, tuple)]
        return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))
    return statistics.median(float(v) for v in values if not isinstance(v, tuple))


def column_title(measurement: str, rate: float) -> str:
    return {
        "single": "1/call enqueue jobs/s",
        "bulk": f"bulk enqueue jobs/s ({BATCH} a call)",
        "drain": "drain jobs/s",
        "pickup": f"pickup p50 / p99 ms at {rate:g} jobs/s",
        HOG: f"pickup p50 / p99 ms at {rate:g} jobs/s beside a CPU hog",
    }[measurement]


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"


def _bold(text: str, on: bool) -> str:
    return f"**{text}**" if on else text


@dataclass(frozen=True)
class Ratio:
    value: float
    peer: str  # the best peer's key


def best_peer_ratio(figures: dict[str, Figure], index: int | None = None) -> Ratio | None:
    """jobq's figure over the best peer's: the highest throughput, or (``index`` 0 for p50, 1
    for p99) the lowest latency. Above 1 jobq is ahead in throughput, behind in latency."""
    if "jobq" not in figures:
        return None
    def pick(f: Figure) -> float:
        return f[index] if isinstance(f, tuple) and index is not None else float(f)  # type: ignore[arg-type]
    peers = {k: pick(v) for k, v in figures.items() if k in PEERS}
    if not peers:
        return None
    best = (min if index is not None else max)(peers, key=lambda k: peers[k])
    return Ratio(pick(figures["jobq"]) / peers[best], best) if peers[best] > 0 else None


def format_table(figures: dict[str, dict[str, Figure]], labels: dict[str, str],
                 measurements: Sequence[str], rate: float) -> str:
    """The Markdown table: a row per system (peers first), the best figure of each
    column in bold, and a last row of jobq over the best peer in each column."""
    rows = [s for s in ROWS if s in figures]
    out = ["| system | " + " | ".join(column_title(m, rate) for m in measurements) + " |",
           "|---" * (len(measurements) + 1) + "|"]
    per_column = {m: {s: figures[s][m] for s in rows} for m in measurements}
    for s in rows:
        cells = []
        for m in measurements:
            f, column = figures[s][m], per_column[m]
            if isinstance(f, tuple):
                lows = [min(v[i] for v in column.values() if isinstance(v, tuple)) for i in (0, 1)]
                cells.append(" / ".join(_bold(_ms(f[i]), len(rows) > 1 and f[i] == lows[i]) for i in (0, 1)))
            else:
                top = max(float(v) for v in column.values() if not isinstance(v, tuple))
                cells.append(_bold(f"{f:,.0f}", len(rows) > 1 and f == top))
        label = f"**{labels[s]}**" if s == "jobq" else labels[s]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for m in measurements:
        if m in LATENCIES:
            pair = [best_peer_ratio(per_column[m], i) for i in (0, 1)]
            if pair[0] is None or pair[1] is None:
                cells = []
                break
            p50, p99 = pair[0], pair[1]
            whom = _short(p50.peer) if p50.peer == p99.peer else f"{_short(p50.peer)} / {_short(p99.peer)}"
            cells.append(f"{p50.value:.2f}× / {p99.value:.2f}× ({whom})")
        else:
            r = best_peer_ratio(per_column[m])
            if r is None:
                cells = []
                break
            cells.append(f"{r.value:.2f}× ({_short(r.peer)})")
    if cells:
        out.append("| jobq ÷ best peer | " + " | ".join(cells) + " |")
    return "\n".join(out)


FLOOR_COLUMNS = ("single", "bulk", "drain")


def series(*rates: float) -> float:
    """Jobs/s of steps taken one after another, each at its own rate: a producer that waits
    for each call waits for the HTTP hop and the statement in turn."""
    return 1 / sum(1 / r for r in rates) if all(r > 0 for r in rates) else 0.0


def format_floors(figures: dict[str, dict[str, Figure]], labels: dict[str, str]) -> str:
    """With --floors: jobq's statements alone and the SDK's HTTP hop alone, what the two allow
    together (the ceiling of an HTTP service running those statements), beside jobq and the
    best peer. Empty without both floors."""
    if not all(k in figures for k in FLOORS):
        return ""
    sql, http = figures["sql"], figures["http"]

    def rate(f: dict[str, Figure], m: str) -> float | None:
        v = f.get(m)
        return float(v) if v is not None and not isinstance(v, tuple) else None

    def cell(v: float | None) -> str:
        return "–" if v is None else f"{v:,.0f}"

    def ratio(a: float | None, b: float | None) -> str:
        return "–" if a is None or not b else f"{a / b:.2f}×"

    ceiling: dict[str, float | None] = {}
    for m in FLOOR_COLUMNS:
        parts = [rate(sql, m)] + ([rate(http, m)] if m in ALL["http"].measures else [])
        known = [p for p in parts if p is not None]
        ceiling[m] = series(*known) if len(known) == len(parts) else None
    best: dict[str, tuple[float, str] | None] = {}
    for m in FLOOR_COLUMNS:
        found = [(r, k) for k in PEERS if k in figures and (r := rate(figures[k], m)) is not None]
        best[m] = max(found) if found else None
    out = ["| what | " + " | ".join(column_title(m, 0) for m in FLOOR_COLUMNS) + " |",
           "|---" * (len(FLOOR_COLUMNS) + 1) + "|",
           f"| {labels['sql']} (psycopg, no HTTP) | " + " | ".join(cell(rate(sql, m)) for m in FLOOR_COLUMNS) + " |",
           f"| {labels['http']} (no database) | " + " | ".join(cell(rate(http, m)) for m in FLOOR_COLUMNS) + " |",
           "| ceiling: the two one after the other (drain: the statements alone) | "
           + " | ".join(cell(ceiling[m]) for m in FLOOR_COLUMNS) + " |"]
    if "jobq" in figures:
        out.append(f"| {labels['jobq']} | " + " | ".join(cell(rate(figures['jobq'], m)) for m in FLOOR_COLUMNS) + " |")
        out.append("| jobq ÷ ceiling | " + " | ".join(ratio(rate(figures["jobq"], m), ceiling[m])
                                                    for m in FLOOR_COLUMNS) + " |")
    if any(best.values()):
        out.append("| best peer | " + " | ".join(
            "–" if best[m] is None else f"{best[m][0]:,.0f} ({_short(best[m][1])})" for m in FLOOR_COLUMNS) + " |")
        out.append("| ceiling ÷ best peer | " + " | ".join(
            ratio(ceiling[m], best[m][0] if best[m] else None) for m in FLOOR_COLUMNS) + " |")
    return "\n".join(out)


def _short(key: str) -> str:
    return {"graphile": "Graphile", "pgqueuer": "PgQueuer"}.get(key, key)


# --- processes --------------------------------------------------------------------------------


def _find_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not Linux
        return None


# Looked up here, so that the child between fork and exec only makes the call: the readers'
# threads may be running then, and a child must not wait on a lock one of them held.
_PRCTL = _find_prctl()


def _die_with_parent() -> None:
    """In a child before exec: SIGKILL when this script dies, the one exit on which no
    ``finally`` here runs. A CPU hog or a service must not outlive the bench."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


def _stop(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT_S) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Driver:
    """One driver process: its standard output read by a thread (so a wait has a deadline),
    its standard error in a file shown when it fails."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], keep_stdin: bool) -> None:
        self.name = name
        slug = name.lower().replace(" ", "-")
        self._errors = tempfile.NamedTemporaryFile(prefix=f"jobq-peers-{slug}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            argv, env=env, text=True, stdout=subprocess.PIPE, stderr=self._errors,
            stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
            preexec_fn=_die_with_parent)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def fail(self, what: str) -> BenchError:
        return BenchError(f"{self.name}: {what}:\n{_tail(Path(self._errors.name))}")

    def wait_for(self, word: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self.fail(f"no {word!r} within {timeout:.0f} s") from None
            if line is None:
                raise self.fail(f"exited with {self.proc.wait()} before {word!r}")
            if line.strip() == word:
                return

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        """Close its standard input (a worker stops) and read its JSON line."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        deadline = time.monotonic() + timeout
        found: dict[str, Any] | None = None
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self.fail(f"no result within {timeout:.0f} s") from None
            if line is None:
                break
            if line.startswith("{"):
                found = json.loads(line)
        code = self.proc.wait(STOP_TIMEOUT_S)
        if code != 0 or found is None:
            raise self.fail(f"exited with {code}" + ("" if found else " without a result"))
        return found

    def close(self) -> None:
        _stop(self.proc, 10)
        self._errors.close()
        with contextlib.suppress(OSError):
            os.unlink(self._errors.name)


@contextlib.contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_die_with_parent)
    try:
        yield
    finally:
        _stop(hog, 10)


# --- databases --------------------------------------------------------------------------------


def database_url(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


class Databases:
    """A template per system, holding its schema, and a copy of it per measurement."""

    def __init__(self, admin_url: str) -> None:
        import psycopg  # the repository's virtual environment has it (jobq[server])

        self._psycopg = psycopg
        self.admin_url = admin_url
        self.prefix = f"jobq_peers_{os.getpid()}_"
        self._made: list[str] = []
        self._count = 0
        self._open: list[Any] = []  # connections watching a measurement's database

    def _admin(self, sql: str) -> None:
        with self._psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)

    def create(self, name: str, template: str | None = None) -> str:
        full = self.prefix + name
        self._admin(f'CREATE DATABASE "{full}"' + (f' TEMPLATE "{self.prefix + template}"' if template else ""))
        self._made.append(full)
        return database_url(self.admin_url, full)

    def fresh(self, system: str) -> tuple[str, str]:
        self._count += 1
        name = f"{system}_{self._count}"
        return name, self.create(name, template=f"{system}_template")

    def drop(self, name: str) -> None:
        full = self.prefix + name
        self._admin(f'DROP DATABASE IF EXISTS "{full}" WITH (FORCE)')
        with contextlib.suppress(ValueError):
            self._made.remove(full)

    def drop_all(self) -> None:
        """Drop every database of this run: those it made, and any other under its prefix (a
        CI run once found one left behind), a few times over if a drop fails (a process that
        is still going away can connect again between the force's terminate and the drop)."""
        for attempt in range(3):
            with self._psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10) as conn:
                left = {r[0] for r in conn.execute(
                    "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (self.prefix,))}
            left |= set(self._made)
            if not left:
                break
            for full in sorted(left, key=lambda n: n.endswith("_template")):
                with contextlib.suppress(Exception):
                    self._admin(f'DROP DATABASE IF EXISTS "{full}" WITH (FORCE)')
            self._made.clear()
            time.sleep(0.5 * attempt)

    def facts(self) -> str:
        """The server's version and durability settings; the first thing asked of it, so a
        server that is not there is said in one line."""
        try:
            conn = self._psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10)
        except self._psycopg.OperationalError as exc:
            parts = urlsplit(self.admin_url)
            where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
            said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BenchError(f"cannot reach PostgreSQL at {where} ({said}); start it, or name a role that "
                             "may create databases with --database-url") from None
        with conn:
            values = {}
            for setting in ("server_version", "fsync", "synchronous_commit", "autovacuum"):
                row = conn.execute(f"SHOW {setting}").fetchone()
                values[setting] = row[0] if row else "?"
        return (f"PostgreSQL {values['server_version'].split()[0]} (fsync {values['fsync']}, synchronous_commit "
                f"{values['synchronous_commit']}, autovacuum {values['autovacuum']})")

    def has_rows(self, url: str, sql: str) -> Callable[[], bool]:
        conn = self._psycopg.connect(url, autocommit=True, connect_timeout=10)
        self._open.append(conn)
        return lambda: conn.execute(sql).fetchone() is not None

    def close_watchers(self) -> None:
        while self._open:
            with contextlib.suppress(Exception):
                self._open.pop().close()


# --- the systems ------------------------------------------------------------------------------


@dataclass
class Target:
    """One measurement's system: how to call its drivers and how to see that nothing is left."""

    argv: Callable[[str], list[str]]  # driver command line for a command
    env: dict[str, str]
    busy: Callable[[], bool]  # is any job not yet finished?
    worker_processes: int = 1
    service_pid: int | None = None  # a service process of its own (jobq serve), for its CPU time


class System:
    key = ""
    name = ""
    measures: tuple[str, ...] = (*MEASUREMENTS, HOG)

    def install(self, scratch: Path) -> None:
        """Bring the system's packages into the scratch folder, once."""

    def version(self, scratch: Path) -> str:
        raise NotImplementedError

    def make_template(self, url: str, scratch: Path) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def target(self, url: str, scratch: Path, dbs: Databases) -> Iterator[Target]:
        raise NotImplementedError
        yield  # pragma: no cover


def _run(argv: list[str], env: dict[str, str] | None = None, what: str = "", timeout: float = 600,
         cwd: Path | None = None) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise BenchError(f"{what or ' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                         f"{done.stderr[-3000:]}")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Jobq(System):
    key, name = "jobq", "jobq"
    queue = "peers"  # drivers/jobq_driver.py's queue

    def version(self, scratch: Path) -> str:
        from importlib.metadata import version

        return version("jobq")

    def make_template(self, url: str, scratch: Path) -> None:
        _run([sys.executable, "-m", "jobq.cli", "migrate"], env={**os.environ, "JOBQ_DATABASE_URL": url},
             what="jobq migrate")

    @contextlib.contextmanager
    def target(self, url: str, scratch: Path, dbs: Databases) -> Iterator[Target]:
        from jobq.client import Client, NotFound

        env = {**os.environ, "JOBQ_DATABASE_URL": url, "JOBQ_LOG_LEVEL": "WARNING", "JOBQ_HOST": "127.0.0.1"}
        serve = [sys.executable, "-m", "jobq.cli", "serve", "--host", "127.0.0.1", "--port"]
        with _service(serve, env, "jobq serve") as (service, pid), Client(service) as client:
            def busy() -> bool:
                try:
                    counts = client.queue(self.queue).counts
                except NotFound:
                    return False
                return counts.pending + counts.running > 0

            yield Target(_jobq_driver(service), dict(os.environ), busy, worker_processes=2, service_pid=pid)


def _jobq_driver(service: str) -> Callable[[str], list[str]]:
    driver = [sys.executable, str(DRIVERS / "jobq_driver.py")]
    return lambda command: [*driver, command, "--url", service]


@contextlib.contextmanager
def _service(argv: list[str], env: dict[str, str], what: str) -> Iterator[tuple[str, int]]:
    """A service on a free loopback port (``argv`` ends where the port goes), ready: its URL
    and process id. Its output goes to a file, shown when it fails; one that exits during the
    measurement fails it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    output = tempfile.NamedTemporaryFile(prefix="jobq-peers-service-", suffix=".log", delete=False)
    proc = subprocess.Popen([*argv, str(port)], env=env, stdin=subprocess.DEVNULL, stdout=output,
                            stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:
        _wait_ready(url, proc, Path(output.name), what)
        yield url, proc.pid
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with {proc.returncode}:\n{_tail(Path(output.name))}")
    finally:
        _stop(proc)
        output.close()
        with contextlib.suppress(OSError):
            os.unlink(output.name)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], output: Path, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with {proc.returncode}:\n{_tail(output)}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise BenchError(f"{what} was not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(output)}")


class Graphile(System):
    key, name = "graphile", "Graphile Worker"
    package = "graphile-worker"

    def home(self, scratch: Path) -> Path:
        return scratch / "graphile"

    def install(self, scratch: Path) -> None:
        home = self.home(scratch)
        if (home / "node_modules" / self.package / "package.json").is_file():
            return
        node, npm = shutil.which("node"), shutil.which("npm")
        if not node or not npm:
            raise BenchError("Graphile Worker needs Node.js and npm on PATH; install them, or leave it out "
                             "with --systems jobq,pgqueuer")
        home.mkdir(parents=True, exist_ok=True)
        (home / "package.json").write_text(json.dumps({"name": "jobq-peers-graphile", "private": True}) + "\n")
        log(f"installing {self.package} with npm into {home} (once)")
        # --save-exact: package.json and package-lock.json pin what was installed.
        _run([npm, "install", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error", self.package],
             cwd=home, what="npm install graphile-worker")
        if not (home / "node_modules" / self.package / "package.json").is_file():
            raise BenchError(f"npm did not install {self.package} into {home}")

    def version(self, scratch: Path) -> str:
        meta = json.loads((self.home(scratch) / "node_modules" / self.package / "package.json").read_text())
        return str(meta["version"])

    def _env(self, scratch: Path) -> dict[str, str]:
        return {**os.environ, "GRAPHILE_WORKER_HOME": str(self.home(scratch))}

    def _argv(self, url: str) -> Callable[[str], list[str]]:
        node = shutil.which("node") or "node"
        return lambda command: [node, str(DRIVERS / "graphile.mjs"), command, "--database-url", url]

    def make_template(self, url: str, scratch: Path) -> None:
        _run(self._argv(url)("install"), env=self._env(scratch), what="graphile-worker migrate")

    @contextlib.contextmanager
    def target(self, url: str, scratch: Path, dbs: Databases) -> Iterator[Target]:
        # The public view; ordered by id, its first row comes off the primary key's index.
        busy = dbs.has_rows(url, "SELECT 1 FROM graphile_worker.jobs ORDER BY id LIMIT 1")
        yield Target(self._argv(url), self._env(scratch), busy)


class PgQueuer(System):
    key, name = "pgqueuer", "PgQueuer"
    requirement = "pgqueuer[asyncpg]"

    def venv(self, scratch: Path) -> Path:
        return scratch / "pgqueuer"

    def python(self, scratch: Path) -> Path:
        return self.venv(scratch) / "bin" / "python"

    def install(self, scratch: Path) -> None:
        python = self.python(scratch)
        if python.is_file() and subprocess.run([str(python), "-c", "import pgqueuer, asyncpg, uvloop"],
                                               capture_output=True, check=False).returncode == 0:
            return
        log(f"installing {self.requirement} with pip into {self.venv(scratch)} (once)")
        _run([sys.executable, "-m", "venv", "--clear", str(self.venv(scratch))], what="python -m venv")
        _run([str(python), "-m", "pip", "install", "-q", self.requirement], what=f"pip install {self.requirement}")

    def version(self, scratch: Path) -> str:
        code = "from importlib.metadata import version as v; print(v('pgqueuer'), v('asyncpg'))"
        pgqueuer, asyncpg = _run([str(self.python(scratch)), "-c", code]).split()
        return f"{pgqueuer} (asyncpg {asyncpg})"

    def _argv(self, url: str, scratch: Path) -> Callable[[str], list[str]]:
        python = str(self.python(scratch))
        return lambda command: [python, str(DRIVERS / "pgqueuer_driver.py"), command, "--database-url", url]

    def make_template(self, url: str, scratch: Path) -> None:
        _run(self._argv(url, scratch)("install"), what="pgqueuer install")

    @contextlib.contextmanager
    def target(self, url: str, scratch: Path, dbs: Databases) -> Iterator[Target]:
        # Finished jobs leave this table (for pgqueuer_log) when their completion is flushed.
        busy = dbs.has_rows(url, "SELECT 1 FROM pgqueuer ORDER BY id LIMIT 1")
        yield Target(self._argv(url, scratch), dict(os.environ), busy)


class JobqSql(System):
    """A floor: jobq's own statements on psycopg, no HTTP (drivers/sql_driver.py)."""

    key, name = "sql", "jobq's statements alone"
    measures = ("single", "bulk", "drain")

    def version(self, scratch: Path) -> str:
        return Jobq().version(scratch)

    def _argv(self, url: str) -> Callable[[str], list[str]]:
        return lambda command: [sys.executable, str(DRIVERS / "sql_driver.py"), command, "--database-url", url]

    def make_template(self, url: str, scratch: Path) -> None:
        Jobq().make_template(url, scratch)
        _run(self._argv(url)("install"), what="the queue of drivers/sql_driver.py")

    @contextlib.contextmanager
    def target(self, url: str, scratch: Path, dbs: Databases) -> Iterator[Target]:
        # An ack moves its job to jobs_history: the table empties as the drain ends.
        busy = dbs.has_rows(url, "SELECT 1 FROM jobs ORDER BY id LIMIT 1")
        yield Target(self._argv(url), dict(os.environ), busy)


class NoopHttp(System):
    """A floor: the SDK's producer against a service that answers without doing anything
    (drivers/noop_service.py): the HTTP hop alone, no database."""

    key, name = "http", "the SDK against a no-op HTTP service"
    measures = ("single", "bulk")

    def version(self, scratch: Path) -> str:
        return Jobq().version(scratch)

    def make_template(self, url: str, scratch: Path) -> None:
        """Nothing: it has no schema (its measurements' empty databases go unused)."""

    @contextlib.contextmanager
    def target(self, url: str, scratch: Path, dbs: Databases) -> Iterator[Target]:
        noop = [sys.executable, str(DRIVERS / "noop_service.py")]
        with _service(noop, dict(os.environ), "drivers/noop_service.py") as (service, pid):
            yield Target(_jobq_driver(service), dict(os.environ), lambda: False, service_pid=pid)


ALL: dict[str, System] = {s.key: s for s in (Jobq(), Graphile(), PgQueuer(), JobqSql(), NoopHttp())}


# --- the measurements -------------------------------------------------------------------------


def enqueue(target: Target, name: str, jobs: int, batch: int, warmup: int = 0, rate: float = 0.0,
            timeout: float = 1800) -> dict[str, Any]:
    argv = target.argv("enqueue") + ["--jobs", str(jobs), "--batch", str(batch), "--warmup", str(warmup)]
    if rate:
        argv += ["--rate", f"{rate:g}"]
    driver = Driver(f"{name} enqueue", argv, target.env, keep_stdin=False)
    try:
        return driver.result(timeout)
    finally:
        driver.close()


@contextlib.contextmanager
def workers(target: Target, name: str, record: bool) -> Iterator[list[Driver]]:
    """The system's worker processes, set up and waiting for ``go``."""
    procs: list[Driver] = []
    try:
        for i in range(target.worker_processes):
            argv = target.argv("work") + (["--record"] if record else [])
            procs.append(Driver(f"{name} worker {i + 1}", argv, target.env, keep_stdin=True))
        for p in procs:
            p.wait_for("ready", READY_TIMEOUT_S)
        yield procs
    finally:
        for p in procs:
            p.close()


def wait_idle(target: Target, procs: Sequence[Driver], timeout: float, what: str) -> float:
    """Until no job is left unfinished; the monotonic moment that was seen."""
    deadline = time.monotonic() + timeout
    while target.busy():
        for p in procs:
            if p.proc.poll() is not None:
                raise p.fail(f"exited with {p.proc.returncode} during {what}")
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: jobs still unfinished after {timeout:.0f} s")
        time.sleep(POLL_S)
    return time.monotonic()


def finish(procs: Sequence[Driver]) -> list[dict[str, Any]]:
    for p in procs:  # all stop at once
        if p.proc.stdin is not None:
            p.proc.stdin.close()
    return [p.result(STOP_TIMEOUT_S) for p in procs]


def measure_single(target: Target, name: str, opts: Options, notes: list[str]) -> float:
    out = enqueue(target, name, opts.single_jobs, 1, warmup=SINGLE_WARMUP)
    return out["jobs"] / out["seconds"]


def measure_bulk(target: Target, name: str, opts: Options, notes: list[str]) -> float:
    out = enqueue(target, name, opts.jobs, BATCH, warmup=2)
    return out["jobs"] / out["seconds"]


def cpu_seconds(pid: int | None) -> float:
    """A process's CPU time so far (user and system, /proc/PID/stat); 0 where unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def measure_drain(target: Target, name: str, opts: Options, notes: list[str]) -> float:
    enqueue(target, name, opts.jobs, BATCH)  # the backlog, untimed
    with workers(target, name, record=False) as procs:
        service_cpu = cpu_seconds(target.service_pid)
        for p in procs:
            p.send("go")
        start = time.monotonic()
        end = wait_idle(target, procs, max(120.0, opts.jobs / 100), f"{name} drain")
        service_cpu = cpu_seconds(target.service_pid) - service_cpu
        outs = finish(procs)
    handled = sum(o["handled"] for o in outs)
    if handled < opts.jobs:
        raise BenchError(f"{name} drain: the workers ran {handled:,} of {opts.jobs:,} jobs")
    log_costs(name, handled, service_cpu, outs)
    return opts.jobs / (end - start)


def log_costs(name: str, jobs: int, service_cpu: float, outs: Sequence[dict[str, Any]]) -> None:
    """What a drain cost per 1,000 jobs, where a driver reports it (jobq's: CPU seconds of its
    worker processes, and the calls they made): figures a busy machine does not blur."""
    if not all("cpu_s" in o for o in outs):
        return
    per = 1000 / jobs
    calls: dict[str, int] = {}
    for o in outs:
        for call, n in o.get("calls", {}).items():
            calls[call] = calls.get(call, 0) + n
    said = ", ".join(f"{call} {n * per:.1f}" for call, n in sorted(calls.items()))
    log(f"{name} drain, per 1,000 jobs: worker CPU {sum(o['cpu_s'] for o in outs) * per:.3f} s, "
        f"service CPU {service_cpu * per:.3f} s; calls: {said}")


def measure_pickup(target: Target, name: str, opts: Options, notes: list[str], hog: bool = False
                   ) -> tuple[float, float]:
    jobs = round(opts.pickup_rate * opts.pickup_seconds)
    with cpu_hog(hog), workers(target, name, record=True) as procs:
        for p in procs:
            p.send("go")
        produced = enqueue(target, name, jobs, 1, warmup=1, rate=opts.pickup_rate)
        wait_idle(target, procs, PICKUP_DRAIN_TIMEOUT_S, f"{name} pickup")
        outs = finish(procs)
    achieved = jobs / produced["seconds"]
    if achieved < 0.9 * opts.pickup_rate:
        # One producer, one call at a time: a slow call delays the next ones.
        notes.append(f"{name}'s producer offered {achieved:,.0f} jobs/s, not {opts.pickup_rate:g}, in a pickup "
                     f"measurement{' beside the CPU hog' if hog else ''}")
        log(notes[-1])
    return pickup_figures(produced["sent"], [s for o in outs for s in o["starts"]], opts.pickup_rate, name)


def pickup_figures(sent: Sequence[Sequence[int]], starts: Sequence[Sequence[int]], rate: float,
                   name: str = "") -> tuple[float, float]:
    """p50 and p99 in ms of handler start minus enqueue return, per key, leaving out the first
    second's keys (warm-up) and the warm-up calls' (below 0)."""
    started: dict[int, int] = {}
    for key, at in starts:
        started.setdefault(key, at)  # the first run of a job, should one run twice
    measured = [(key, at) for key, at in sent if key >= int(rate)]
    missing = sum(1 for key, _ in measured if key not in started)
    if missing or not measured:
        raise BenchError(f"{name} pickup: {missing} of {len(measured)} jobs never reached a handler")
    pickups = [(started[key] - at) / 1000 for key, at in measured]
    return percentile(pickups, 50), percentile(pickups, 99)


MEASURE: dict[str, Callable[[Target, str, Options, list[str]], Figure]] = {
    "single": measure_single,
    "bulk": measure_bulk,
    "drain": measure_drain,
    "pickup": measure_pickup,
    HOG: lambda target, name, opts, notes: measure_pickup(target, name, opts, notes, hog=True),
}


# --- the run ----------------------------------------------------------------------------------


def machine() -> str:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} cores{f' ({model})' if model else ''}"


def _label(system: System, version: str) -> str:
    if system.key in FLOORS:
        return system.name
    return f"jobq {version} (SDK + Worker)" if system.key == "jobq" else f"{system.name} {version.split()[0]}"


def _show(f: Figure) -> str:
    return f"{_ms(f[0])} / {_ms(f[1])} ms" if isinstance(f, tuple) else f"{f:,.0f} jobs/s"


def run(opts: Options) -> str:
    systems = [ALL[k] for k in opts.measured]
    dbs = Databases(opts.database_url)
    started = dt.datetime.now(dt.UTC)
    load = os.getloadavg()
    versions: dict[str, str] = {}
    facts = dbs.facts()  # and the database answers before anything is installed
    notes: list[str] = []
    figures: dict[str, dict[str, list[Figure]]] = {
        s.key: {m: [] for m in opts.measurements if m in s.measures} for s in systems}
    try:
        for s in systems:
            s.install(opts.scratch)
            versions[s.key] = s.version(opts.scratch)
            log(f"{s.name} {versions[s.key]}")
        for s in systems:
            s.make_template(dbs.create(f"{s.key}_template"), opts.scratch)
        steps = plan(opts.measured, opts.repeat, opts.measurements)
        for i, step in enumerate(steps, 1):
            system = ALL[step.system]
            began = time.monotonic()
            name, url = dbs.fresh(system.key)
            try:
                with system.target(url, opts.scratch, dbs) as target:
                    value = MEASURE[step.measurement](target, system.name, opts, notes)
            finally:
                dbs.close_watchers()
                dbs.drop(name)
            figures[system.key][step.measurement].append(value)
            log(f"[{i}/{len(steps)}] repetition {step.repetition + 1}, {step.measurement}, {system.name}: "
                f"{_show(value)} ({time.monotonic() - began:.1f} s with its setup)")
    finally:
        dbs.close_watchers()
        dbs.drop_all()
    medians = {k: {m: median(v) for m, v in per.items()} for k, per in figures.items()}
    labels = {s.key: _label(s, versions[s.key]) for s in systems}
    took = dt.datetime.now(dt.UTC) - started
    head = (f"{started:%Y-%m-%d %H:%M} UTC, {machine()}, {facts}; load average {load[0]:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end; medians of {opts.repeat} interleaved repetition"
            f"{'s' if opts.repeat != 1 else ''}, {opts.jobs:,} jobs ({opts.single_jobs:,} one a call), "
            f"{took.total_seconds() / 60:.1f} min in all.")
    table = format_table({k: v for k, v in medians.items() if k not in FLOORS}, labels, opts.measurements,
                         opts.pickup_rate)
    legend = ("" if len(opts.systems) < 2 or "jobq" not in opts.systems else
              "\njobq ÷ best peer: jobq's median over the best peer's (named); above 1 jobq is ahead in "
              "throughput, below 1 it is ahead in pickup.\n")
    floors = format_floors(medians, labels)
    if floors:
        floors = ("\nWhat jobq's parts allow, measured in the same repetitions: its statements run by one "
                  "psycopg connection (the drain: four), and the SDK's producer against a service that "
                  "answers at once. One call at a time, a producer waits for the HTTP hop and then for the "
                  "statement, so the two one after the other are about the most any HTTP service running "
                  "these statements could do for it.\n\n" + floors + "\n")
    return (head + "\n\n" + table + "\n" + legend + floors + "".join(f"\n- {n}" for n in notes)
            + ("\n" if notes else ""))


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        print(run(opts), end="")
    except BenchError as exc:
        log(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
