"""What every part of the bench shares: the run's configuration (``BenchConfig``, ``Mode``),
its one error, the constants of the load it offers, and its progress log on stderr."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# Long enough that no lease expires during a phase, whatever the machine's load.
LEASE_MS = 60_000
# Workers long-poll rather than spin when the queue is momentarily empty (the end of a drain,
# an end-to-end run whose producers are behind, the latency phase).
WAIT_MS = 1_000
JOB_TYPE = "bench.noop"


class Mode(StrEnum):
    single = "single"
    batch = "batch"
    both = "both"


class BenchError(RuntimeError):
    """The bench could not measure: a phase timed out, or the service answered an error."""


def log(message: str) -> None:
    """Progress and errors go to stderr: stdout carries only the table or the JSON."""
    print(f"bench: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class BenchConfig:
    url: str | None  # a running service; None: the bench starts one
    database_url: str | None  # the service's database; None: embedded (when we start it)
    data_dir: Path  # home of the embedded PostgreSQL
    mode: Mode
    jobs: int
    producers: int
    workers: int
    batch: int
    queue: str | None  # base of the queue names; None: a fresh one per run
    latency_rate: float
    latency_seconds: float
    baseline: bool
    server_workers: int
    connections: tuple[int, ...]
    timeout_s: float  # per phase
    token: str | None
    # --sdk: the SDK's path (Client, AsyncClient, `jobq worker`, Worker) beside the raw client
    sdk: bool = False
    sdk_workers: int = 2  # worker processes
    sdk_concurrency: int = 10  # each one's --concurrency (`jobq worker`'s default)
    # --waiters: idle long-polls held from another process (0: no such phase), and how long
    # their cost is read while nothing else happens
    waiters: int = 0
    waiters_idle_seconds: float = 20.0
    # --queues: this many queues made in the database (0: no such phase); claims naming 1 and
    # 100 of them, the first page of GET /v1/queues and /metrics measured beside them
    queues: int = 0

    @property
    def modes(self) -> list[Mode]:
        return [Mode.batch, Mode.single] if self.mode is Mode.both else [self.mode]


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole shares (producers, raw-SQL threads)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
