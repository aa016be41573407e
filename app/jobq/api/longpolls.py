"""The long-poll cap: how many claims may wait at once in this process.

A waiting claim holds its client's connection, one file descriptor, for up to 30 s; a fleet
of workers holds thousands. Past the process's descriptor limit nothing works at all: no
connection is accepted and none opened to the database, so enqueues and acks fail with the
long-polls (jobq.descriptors). The claim route asks ``admit`` before it waits: a claim past
the cap does not wait, it claims once and answers what it found, or 503
``too_many_long_polls`` with ``Connection: close``, which gives its descriptor back.

One counter per app, touched only on its event loop: no lock needed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

# A refused long-poll is told to come back after between 1 and this many times
# JOBQ_RETRY_AFTER_S, at random: a fleet refused at once (a restart, a burst of workers) must
# not come back at once, every connection and its claim in the same second.
RETRY_SPREAD = 5


class LongPolls:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.waiting = 0

    @contextmanager
    def admit(self, wait_ms: int) -> Iterator[bool]:
        """Whether a claim asking to wait ``wait_ms`` may wait: always for one that does not
        ask to; for a long-poll, while fewer than ``cap`` wait. Its place is held until the
        block ends."""
        if wait_ms <= 0:
            yield True
            return
        if self.waiting >= self.cap:
            yield False
            return
        self.waiting += 1
        try:
            yield True
        finally:
            self.waiting -= 1

    @staticmethod
    def retry_after(base_s: int) -> int:
        """The Retry-After of a refused long-poll, spread over ``base_s`` to ``RETRY_SPREAD``
        times it."""
        return random.randint(base_s, base_s * RETRY_SPREAD)
