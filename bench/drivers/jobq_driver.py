"""jobq, driven as a Python user drives it, for bench/peers.py (see that file for the protocol
every driver speaks). Runs in the repository's virtual environment and uses only the SDK's
public names: ``jobq.client.Client`` for the producer, ``jobq.worker.Worker`` for the worker.

    python jobq_driver.py enqueue --url URL --jobs N --batch B [--warmup W] [--rate R]
    python jobq_driver.py work    --url URL [--record]

The producer is one sync ``Client``: ``enqueue`` one call at a time, ``enqueue_many`` in
batches. The worker is one ``Worker`` of concurrency 100 with every other setting at the
SDK's default, and a plain-function no-op handler, as the README writes handlers;
bench/peers.py starts two of these processes. The ``jobq serve`` they talk to is started by
bench/peers.py (one process, logs at WARNING).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import resource
import sys
import threading
from typing import Any

from protocol import Enqueues, arguments, emit, now_us

from jobq.client import AsyncClient, Client, Job, NewJob
from jobq.worker import Worker

QUEUE = "peers"
JOB_TYPE = "noop"
CONCURRENCY = 100


def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    with Client(args.url) as client:

        def send(first: int, size: int) -> None:
            if size == 1:
                client.enqueue(JOB_TYPE, {"k": first}, queue=QUEUE)
            else:
                client.enqueue_many([NewJob(type=JOB_TYPE, payload={"k": first + i}, queue=QUEUE)
                                     for i in range(size)])

        return Enqueues(args).run(send)


# The Worker's calls to the service, counted by method name: requests per job, which a busy
# machine does not blur as it blurs jobs/s.
CALLS = ("claim", "ack", "ack_many", "fail", "heartbeat", "release", "release_many")


def count_calls(calls: collections.Counter[str]) -> None:
    for name in CALLS:
        method = getattr(AsyncClient, name)

        def counted(self: AsyncClient, *args: Any, _name: str = name, _method: Any = method,
                    **kwargs: Any) -> Any:
            calls[_name] += 1
            return _method(self, *args, **kwargs)

        setattr(AsyncClient, name, counted)


def cpu_seconds() -> float:
    """This process's CPU time so far, user and system, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def work(args: argparse.Namespace) -> dict[str, Any]:
    calls: collections.Counter[str] = collections.Counter()
    count_calls(calls)
    starts: list[tuple[int, int]] = []
    handled = itertools.count()  # next() is one step under the GIL: no increment lost between threads

    def noop(job: Job) -> None:
        next(handled)
        if args.record:
            starts.append((job.payload["k"], now_us()))

    worker = Worker(args.url, queues=[QUEUE], handlers={JOB_TYPE: noop}, concurrency=CONCURRENCY)
    print("ready", flush=True)
    if not sys.stdin.readline():
        return {"handled": 0}

    def stop_when_stdin_closes() -> None:
        while sys.stdin.readline():
            pass
        worker.stop()

    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    cpu = cpu_seconds()
    worker.run()
    done = next(handled)
    out = {"handled": done, "cpu_s": cpu_seconds() - cpu, "calls": dict(calls)}
    return {**out, "starts": starts} if args.record else out


def main() -> None:
    args = arguments(["enqueue", "work"], "--url", "the jobq service")
    emit(enqueue(args) if args.command == "enqueue" else work(args))


if __name__ == "__main__":
    main()
