"""What bench/peers.py's Python drivers share: the command line of the protocol it describes,
and the clock every driver reads. Standard library only: it also runs in the scratch virtual
environment of a peer."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def now_us() -> int:
    """CLOCK_MONOTONIC in microseconds: one clock for every process on the machine (Node's
    process.hrtime reads it too), so a time taken in a producer compares with one taken in
    a worker."""
    return time.monotonic_ns() // 1000


def arguments(commands: Sequence[str], where: str, where_help: str) -> argparse.Namespace:
    """``COMMAND WHERE [--jobs N] [--batch B] [--warmup W] [--rate R] [--record]``; ``where``
    is the flag naming what the driver talks to (``--url``, ``--database-url``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=list(commands))
    parser.add_argument(where, required=True, help=where_help)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0, help="untimed calls first, their keys below 0")
    parser.add_argument("--rate", type=float, default=0.0, help="jobs/s; 0: as fast as calls return")
    parser.add_argument("--record", action="store_true", help="work: report each handler start")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    return args


class Enqueues:
    """The calls of ``enqueue``: the warm-up's, then the timed ones with when each is due, and
    what the driver prints. The driver sleeps and calls its system in between::

        for first, size, wait_s in calls.timed():
            sleep(wait_s); send(first, size); calls.returned(first)
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.jobs, self.batch, self.rate, self.warmup = args.jobs, args.batch, args.rate, args.warmup
        self.sent: list[tuple[int, int]] = []
        self.start_us = 0

    def warmups(self) -> Iterator[tuple[int, int]]:
        """Untimed calls, keyed below 0 so that nothing counts them."""
        for w in range(1, self.warmup + 1):
            yield -w * self.batch, self.batch

    def timed(self) -> Iterator[tuple[int, int, float]]:
        """(first key, jobs in the call, seconds to wait before it): at once unless paced."""
        self.start_us = now_us()
        for k in range(0, self.jobs, self.batch):
            due = self.start_us + k * 1e6 / self.rate if self.rate else 0
            yield k, min(self.batch, self.jobs - k), max(0.0, (due - now_us()) / 1e6)

    def returned(self, first: int) -> None:
        if self.rate:
            self.sent.append((first, now_us()))

    def run(self, send: Callable[[int, int], None]) -> dict[str, Any]:
        """The whole enqueue for a blocking ``send(first key, jobs in the call)``: warm-up,
        timed calls, paced when asked; what the driver prints."""
        for first, size in self.warmups():
            send(first, size)
        for first, size, wait_s in self.timed():
            if wait_s:
                time.sleep(wait_s)
            send(first, size)
            self.returned(first)
        return self.report()

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jobs": self.jobs, "seconds": (now_us() - self.start_us) / 1e6}
        if self.rate:
            out["sent"] = self.sent
        return out


def emit(out: dict[str, Any]) -> None:
    """The one JSON line bench/peers.py reads."""
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
