"""Rate limits (issue 29): their shapes and the arithmetic the service answers with.

Three limits, each with one owner here:

- ``Pace`` (queue setting ``rate_limit``): at most ``jobs`` jobs handed out by claims in any
  window of ``per_ms``, optionally per ``key``. A sliding window, enforced by the claim
  statement itself (``JobClaimPaced`` in store/queries.sql).
- ``Bucket`` (queue setting and token field ``enqueue_rate``): a token bucket of ``burst``
  jobs refilled at ``jobs`` per ``per_ms``; an enqueue beyond it is refused (429) with the
  time until the bucket holds enough (``EnqueueBucketsTake``).
- soft thresholds (queue settings ``soft_depth``, ``soft_lag_ms``): past them a growing
  fraction of enqueues is refused, with a Retry-After that grows with the overload
  (``overload``, ``refused_fraction``, ``overload_retry_ms``).

Pure functions of their inputs: no clock, no database.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# The most jobs per window or bucket: a paced window keeps one entry per grant, so its row
# grows with ``jobs``; a million per window is no pace but a typo.
MAX_JOBS = 1_000_000
MAX_PER_MS = 366 * 24 * 3600 * 1000  # a year
# A pace's key: the job type, or a top-level field of the payload.
KEY_TYPE = "type"
KEY_PAYLOAD_PREFIX = "payload."
_FIELD = re.compile(r"^[^\x00]{1,200}$")


@dataclass(frozen=True, slots=True)
class Pace:
    """A queue's ``rate_limit``."""

    jobs: int
    per_ms: int
    key: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "per_ms": self.per_ms, "key": self.key}


def valid_key(key: str) -> bool:
    """``type`` or ``payload.<field>`` (a top-level field, any name without NUL)."""
    return key == KEY_TYPE or (key.startswith(KEY_PAYLOAD_PREFIX)
                               and bool(_FIELD.match(key[len(KEY_PAYLOAD_PREFIX):])))


@dataclass(frozen=True, slots=True)
class Bucket:
    """An ``enqueue_rate``: ``jobs`` per ``per_ms`` sustained, ``burst`` at once (the bucket's
    size; at least 1)."""

    jobs: int
    per_ms: int
    burst: int

    def as_json(self) -> dict[str, int]:
        return {"jobs": self.jobs, "per_ms": self.per_ms, "burst": self.burst}

    def wait_ms(self, short: float) -> int:
        """Milliseconds until a bucket ``short`` tokens short of a request holds enough:
        refill is ``jobs`` per ``per_ms``; rounded up, so a retry after it is accepted."""
        return max(1, math.ceil(short * self.per_ms / self.jobs))

    @classmethod
    def of(cls, value: Any) -> Bucket | None:
        """From the stored JSON (a settings column or token field); None for none."""
        if not isinstance(value, dict):
            return None
        jobs, per_ms = int(value["jobs"]), int(value["per_ms"])
        return cls(jobs, per_ms, int(value.get("burst") or jobs))


_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*(ms|s|m|h)?\s*(?::\s*(\d+))?\s*$")
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_rate(text: str) -> Bucket:
    """``N/P[:B]`` as the CLI takes it: N jobs per P ms (or P with a unit: ``50/1s``,
    ``100/1m``), burst B (default N). ValueError in words for anything else."""
    m = _RATE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not N/P[:B] (jobs per milliseconds, optional burst), "
                         "e.g. 50/1000 or 50/1s:100")
    jobs, per, unit, burst = int(m[1]), int(m[2]), m[3], m[4]
    per_ms = per * _UNIT_MS[unit]
    b = int(burst) if burst is not None else jobs
    if not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be 1 to {MAX_JOBS}, not {jobs}")
    if not 1 <= per_ms <= MAX_PER_MS:
        raise ValueError(f"the period must be 1 ms to a year, not {per_ms} ms")
    if not 1 <= b <= MAX_JOBS:
        raise ValueError(f"burst must be 1 to {MAX_JOBS}, not {b}")
    return Bucket(jobs, per_ms, b)


# ------------------------------------------------------------------ adaptive backpressure

# Retry-After of an overload refusal: this much per unit of overload past the threshold,
# within these bounds.
OVERLOAD_RETRY_PER_UNIT_MS = 1_000
OVERLOAD_RETRY_MIN_MS = 100
OVERLOAD_RETRY_MAX_MS = 60_000


def overload(depth: int, lag_ms: int | None, soft_depth: int | None,
             soft_lag_ms: int | None) -> float:
    """How far a queue is past its soft thresholds: the larger of depth / soft_depth and
    lag / soft_lag_ms (each only when set; a threshold of 0 counts as 1). At or below 1 the
    queue is not overloaded."""
    ratios = [0.0]
    if soft_depth is not None:
        ratios.append(depth / max(soft_depth, 1))
    if soft_lag_ms is not None and lag_ms is not None:
        ratios.append(lag_ms / max(soft_lag_ms, 1))
    return max(ratios)


def refused_fraction(o: float) -> float:
    """The share of enqueues refused at overload ``o``: 0 up to the threshold, then
    1 - 1/o (10% past it: 9%; twice it: 50%; four times: 75%), never all: ``max_depth``
    stays the hard wall. At this share a producer whose rate was R gets R/o through."""
    return 0.0 if o <= 1.0 else 1.0 - 1.0 / o


def overload_retry_ms(o: float) -> int:
    """Retry-After of an overload refusal, proportional to the overload past the threshold:
    1 s per unit (twice the threshold: 1 s; four times: 3 s), between 100 ms and 60 s."""
    ms = math.ceil((o - 1.0) * OVERLOAD_RETRY_PER_UNIT_MS)
    return min(max(ms, OVERLOAD_RETRY_MIN_MS), OVERLOAD_RETRY_MAX_MS)


class Spreader:
    """Refuses exactly a fraction of the calls it is asked about, evenly spread, without
    chance: each call adds the fraction to a running sum, and a call that brings it to 1 is
    refused (and takes 1 off). At 0.25, every 4th call is refused. One per queue and process."""

    __slots__ = ("_sum",)

    def __init__(self) -> None:
        self._sum = 0.0

    def refuse(self, fraction: float) -> bool:
        if fraction <= 0.0:
            self._sum = 0.0
            return False
        self._sum += fraction
        if self._sum >= 1.0 - 1e-9:
            self._sum -= 1.0
            return True
        return False


def retry_after_s(ms: int) -> int:
    """The Retry-After header (whole seconds, RFC 9110) for a wait of ``ms``: rounded up, so
    that a client that honours it is not refused again for coming early; at least 1."""
    return max(1, math.ceil(ms / 1000))
