"""What bench/peers.py's Python drivers share: the command line of the protocol it describes,
and the clock every driver reads. Standard library only: it also runs in the scratch virtual
environment of a peer."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
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


def emit(out: dict[str, Any]) -> None:
    """The one JSON line bench/peers.py reads."""
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
