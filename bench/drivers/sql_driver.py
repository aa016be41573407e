"""jobq's own statements on psycopg, with no HTTP and no SDK, for bench/peers.py's
``--floors``: what the database alone allows, measured in the same minutes as the systems.
It imports jobq's statements (``jobq.store.queries``), not its service.

    python sql_driver.py enqueue --database-url URL --jobs N --batch B [--warmup W]
    python sql_driver.py work    --database-url URL

- ``enqueue``: one connection, autocommit, sequential: ``JobInsert`` (what ``POST /v1/jobs``
  runs) for one job a call, ``JobEnqueueMany`` (what ``POST /v1/jobs/batch`` runs) for more;
- ``work``: four connections in threads (the best of 1, 2 and 4 in ``jobq bench
  --baseline``), each claiming 100 jobs with ``JobClaim`` and completing them with one
  ``LeaseAckMany``, as the service does for a Worker's claims and batched acks.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import traceback
from typing import Any

import orjson
import psycopg
from protocol import Enqueues, arguments, emit
from psycopg.rows import dict_row

from jobq.store.enqueue import NOT_LEASED
from jobq.store.queries import Q

QUEUE = "peers"
JOB_TYPE = "noop"
CONNECTIONS = 4
CLAIM = 100
LEASE_MS = 30_000


def _job(key: int) -> dict[str, Any]:
    """JobInsert's parameters for one job."""
    return {"queue": QUEUE, "type": JOB_TYPE, "payload": {"k": key}, "priority": 0, "max_attempts": None,
            "idempotency_key": None, "run_at": None, "delay_ms": 0}


def _batch_row(key: int) -> dict[str, Any]:
    """One job of JobEnqueueMany's list as the service writes it: what is None left out."""
    return {"queue": QUEUE, "type": JOB_TYPE, "payload": {"k": key}, "priority": 0}


def install(args: argparse.Namespace) -> dict[str, Any]:
    """The queue (the schema is jobq's, made by ``jobq migrate``)."""
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO queues (name) VALUES (%s) ON CONFLICT DO NOTHING", (QUEUE,))
    return {}


def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(args.database_url, autocommit=True, prepare_threshold=0) as conn:

        def send(first: int, size: int) -> None:
            if size == 1:
                job = _job(first)
                payload = orjson.dumps(job["payload"]).decode()
                conn.execute(Q.JobInsert, {**job, **NOT_LEASED, "payload": payload}).fetchall()
            else:
                jobs = orjson.dumps([_batch_row(first + i) for i in range(size)]).decode()
                if len(conn.execute(Q.JobEnqueueMany, {"jobs": jobs}).fetchall()) != size:
                    raise SystemExit("JobEnqueueMany declined the batch")

        return Enqueues(args).run(send)


def work(args: argparse.Namespace) -> dict[str, Any]:
    conns = [psycopg.connect(args.database_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
             for _ in range(CONNECTIONS)]
    stop = threading.Event()
    handled = [0] * CONNECTIONS
    claim = {"queue": QUEUE, "types": None, "limit": CLAIM, "lease_ms": LEASE_MS, "worker_id": "sql",
             "token_id": None}

    def drain(i: int) -> None:
        try:
            drain_on(i)
        except BaseException:
            # A thread's error would leave the others draining and bench/peers.py waiting for a
            # backlog that never empties: the process ends, and bench/peers.py says so at once.
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)

    def drain_on(i: int) -> None:
        conn = conns[i]
        while not stop.is_set():
            rows = conn.execute(Q.JobClaim, claim).fetchall()
            if not rows:
                time.sleep(0.001)
                continue
            acks = [{"job_id": r["id"], "token": r["lease_token"], "result": None} for r in rows]
            conn.execute(Q.LeaseAckMany, {"acks": orjson.dumps(acks).decode(), "scope": None})
            handled[i] += len(rows)

    print("ready", flush=True)
    if not sys.stdin.readline():
        return {"handled": 0}
    threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(CONNECTIONS)]
    for t in threads:
        t.start()
    while sys.stdin.readline():
        pass
    stop.set()
    for t in threads:
        t.join()
    for c in conns:
        c.close()
    return {"handled": sum(handled)}


def main() -> None:
    args = arguments(["install", "enqueue", "work"], "--database-url", "jobq's database")
    emit({"install": install, "enqueue": enqueue, "work": work}[args.command](args))


if __name__ == "__main__":
    main()
