"""Soak: the total size of jobq's tables under steady churn with a short retention.

    JOBQ_SOAK_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m tests.soak_history --minutes 7 --rate 200 --retention-s 120 --partition-s 20

Creates a database of its own (dropped at the end), migrates it, runs the service in this process
(the duties leader included: retention every 10 s) and drives it over ASGI: batches of enqueue,
claim and batch ack at ``--rate`` jobs/s, 500-byte payloads, each with an idempotency key, in one
queue whose ``retention_ms`` is ``--retention-s``. The tables of ``--vacuum`` (default: ``jobs``,
``job_keys`` and ``job_counts``, the ones deletes and updates leave dead rows in) are vacuumed
every 30 s, as the maintenance duty does when autovacuum is off (this machine's PostgreSQL runs
without it); ``--vacuum jobs`` shows what ``job_keys`` does unvacuumed.
Prints, every ``--every-s``, the bytes of ``jobs``, of the history (partitions, detached ones
included, and ``job_keys``) and of all of jobq's tables: the total must stop growing once the
first retention period (plus one partition width) has passed.

Measured on a shared 2-core machine (``--minutes 5``, the other defaults above), MB:

     t (s)  jobs done  jobs  history  total  partitions
        20       4000   7.1      7.7   14.8          64
        60      12000  11.6     16.1   27.8          64
       120      24000  11.7     28.6   40.5          64
       140      28000   8.8     31.3   40.2          64
       180      36000  11.8     32.2   44.1          64
       220      44000   5.8     32.2   38.1          64
       280      56000   5.7     32.2   38.1          64

With ``--vacuum jobs`` (job_keys never vacuumed) the history kept growing: 34.9 MB at 280 s,
41.7 MB at 400 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

import httpx
import psycopg

from jobq.api.app import create_app
from jobq.settings import Settings
from jobq.store.migrate import migrate
from tests import pg

SIZES = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'jobs'), 0)::float8,
       coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname LIKE 'jobs_history%%'
                                                               OR c.relname = 'job_keys'), 0)::float8,
       coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8,
       count(*) FILTER (WHERE c.relname ~ '^jobs_history_p')
  FROM pg_class c
 WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
   AND (c.relname IN ('jobs', 'job_keys', 'job_counts', 'queues') OR c.relname LIKE 'jobs_history%%')
"""


async def soak(url: str, minutes: float, rate: int, retention_s: int, partition_s: int, every_s: float,
               vacuum: str) -> None:
    app = create_app(Settings(database_url=url, history_partition_s=partition_s, pool_size=10))
    batch = 100
    payload = {"blob": "z" * 500}
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://jobq", timeout=30) as c, \
            await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        r = await c.patch("/v1/queues/soak", json={"retention_ms": retention_s * 1000})
        assert r.status_code == 200, r.text
        start = time.monotonic()
        next_sample = next_vacuum = start
        done = 0
        print(f"{'t (s)':>6} {'jobs done':>10} {'jobs MB':>8} {'history MB':>11} {'total MB':>9} {'partitions':>10}",
              flush=True)
        while time.monotonic() - start < minutes * 60:
            now = time.monotonic()
            if now >= next_sample:
                row = await (await conn.execute(SIZES)).fetchone()
                assert row is not None
                print(f"{now - start:6.0f} {done:10d} {row[0] / 1e6:8.2f} {row[1] / 1e6:11.2f} {row[2] / 1e6:9.2f} "
                      f"{row[3]:10d}", flush=True)
                next_sample += every_s
            if now >= next_vacuum:
                await conn.execute(f"VACUUM {vacuum}")
                next_vacuum += 30
            r = await c.post("/v1/jobs/batch", json={"jobs": [
                {"type": "t", "queue": "soak", "payload": payload, "idempotency_key": uuid.uuid4().hex}
                for _ in range(batch)]})
            assert r.status_code == 201, r.text
            r = await c.post("/v1/leases", json={"worker_id": "soak", "queues": ["soak"], "limit": batch})
            leases = r.json()["leases"]
            r = await c.post("/v1/leases/ack", json={"acks": [{"lease_id": le["lease_id"]} for le in leases]})
            assert r.status_code == 200, r.text
            done += len(leases)
            # Pace to the rate.
            ahead = start + done / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=7)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--retention-s", type=int, default=120)
    parser.add_argument("--partition-s", type=int, default=20)
    parser.add_argument("--every-s", type=float, default=20)
    parser.add_argument("--vacuum", default="jobs, job_keys, job_counts")
    args = parser.parse_args()
    admin = os.environ.get("JOBQ_SOAK_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"hhist_soak_{uuid.uuid4().hex[:6]}"
    pg.admin_execute(admin, f'CREATE DATABASE "{name}"')
    url = pg.with_database(admin, name)
    try:
        migrate(url)
        asyncio.run(soak(url, args.minutes, args.rate, args.retention_s, args.partition_s, args.every_s,
                         args.vacuum))
    finally:
        pg.drop(admin, name)


if __name__ == "__main__":
    main()
