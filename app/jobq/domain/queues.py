"""A queue's settings and the defaults a queue springs into existence with.

The one definition of the defaults: ``QueueEnsure`` takes them as parameters, the table's
column defaults (``store.tables``) are written from them, and ``tests/test_domain_rules.py``
pins the migrated database's column defaults to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class QueueSettings:
    max_depth: int | None = None
    """Most waiting (pending + failed) jobs; None: no limit."""
    paused: bool = False
    lease_ms: int = 30_000
    max_attempts: int = 25
    backoff_base_ms: int = 1_000
    backoff_max_ms: int = 3_600_000
    max_lease_expiries: int = 5
    """Lease expiries after which a job is a poison pill and goes dead."""
    aging_ms: int | None = None
    """A waiting job gains one priority step per aging_ms waited; None: no aging."""
    max_running: int | None = None
    """Most running jobs; None: no limit."""
    retention_ms: int = 7 * DAY_MS
    """Completed and cancelled jobs are deleted this long after they finished."""
    dead_retention_ms: int = 30 * DAY_MS
    """Dead jobs are deleted this long after they died."""
    rate_limit: dict[str, Any] | None = None
    """The pace of claims (jobq.domain.rates.Pace as JSON); None: none."""
    enqueue_rate: dict[str, Any] | None = None
    """The producers' token bucket (jobq.domain.rates.Bucket as JSON); None: none."""
    soft_depth: int | None = None
    """Waiting jobs past which a growing share of enqueues is refused; None: off."""
    soft_lag_ms: int | None = None
    """Oldest waiting job's lag past which the same happens; None: off."""

    def as_params(self) -> dict[str, Any]:
        return asdict(self)


QUEUE_DEFAULTS = QueueSettings()
QUEUE_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(QueueSettings))


def jobs_by_status(counts: Mapping[str, int]) -> str:
    """``1 pending job``, ``2 dead jobs``, ``4 jobs: 3 pending, 1 dead``: a queue's jobs in
    the words of a sentence (a delete's refusal, what it deleted)."""
    total = sum(counts.values())
    noun = "job" if total == 1 else "jobs"
    if len(counts) == 1:
        (status, n), = counts.items()
        return f"{n} {status} {noun}"
    return f"{total} {noun}: " + ", ".join(f"{n} {status}" for status, n in counts.items())

