"""The retry policy: a pure function of the attempt and the queue's settings.

This is the only definition of the backoff: ``core.leases.fail`` computes the delay here and
hands it to ``LeaseFail`` as a parameter. ``random`` is injected so tests can pin the jitter.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable

JITTER = 0.1


def backoff_ms(
    attempt: int,
    base_ms: int,
    max_ms: int,
    rand: Callable[[], float] = _random.random,
) -> int:
    """Delay before the retry of a job whose attempt number ``attempt`` (1-based) just failed.

    ``min(base × 2^(attempt−1), max) × (1 + j)``, ``j`` uniform in [0, 0.1): the jitter spreads
    a burst of failures so their retries do not arrive together.
    """
    exponent = max(attempt - 1, 0)
    # Cap the exponent before shifting: 2**25 × 1 h would be a huge int for nothing.
    raw = base_ms * (1 << exponent) if exponent < 62 else max_ms
    capped = min(raw, max_ms)
    return int(capped * (1 + JITTER * rand()))
