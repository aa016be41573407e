"""A database failover under load: two ``jobq serve`` replicas on a multi-host URL over a
primary and a synchronous standby; the primary is SIGKILLed, the standby promoted.

What must hold: every job answered 201 exists afterwards (synchronous replication: the
standby had it before the 201 left), no job is completed by two leases, the load resumes by
itself within RESUME_BOUND_S of the promotion, and nothing but 503 with Retry-After is
answered meanwhile (no 500, no dropped connection). The outage (first 503 to first 201 after
the promotion) is measured and printed.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.conftest import LiveServer
from tests.helpers import stored_jobs
from tests.replication import ReplicatedPair
from tests.waiting import aeventually

QUEUE = "failover"
# Time the standby stays unpromoted, and the bound on the resumption.
# Longer than the service's db_timeout_s (5 s): calls waiting for a primary answer 503.
UNPROMOTED_S = 7.0
RESUME_BOUND_S = 15.0
# Load kept up after everything resumed, to see it stays up.
LOAD_AFTER_S = 2.0
# A client's pause after a 503: shorter than Retry-After, to time the outage finely.
PAUSE_503_S = 0.1


@dataclass
class Record:
    answers: list[tuple[float, str, int]] = field(default_factory=list)   # (time, call, status)
    bad: list[str] = field(default_factory=list)                            # what must not happen
    created: dict[str, int] = field(default_factory=dict)                   # job id -> payload k
    acked: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # job -> leases

    def answer(self, call: str, r: httpx.Response) -> None:
        self.answers.append((time.monotonic(), call, r.status_code))
        if r.status_code == 503:
            if not r.headers.get("retry-after", "").isdigit():
                self.bad.append(f"{call}: 503 without Retry-After: {r.headers}")
            if not r.headers.get("content-type", "").startswith("application/problem+json"):
                self.bad.append(f"{call}: 503 not problem+json: {r.text[:200]}")
        elif r.status_code >= 500:
            self.bad.append(f"{call}: {r.status_code} {r.text[:300]}")


async def _producer(c: httpx.AsyncClient, n: int, rec: Record, stop: asyncio.Event) -> None:
    k = 0
    while not stop.is_set():
        k += 1
        try:
            r = await c.post("/v1/jobs", json={"type": "load", "queue": QUEUE, "payload": {"p": n, "k": k}})
        except httpx.HTTPError as exc:
            rec.bad.append(f"enqueue: {exc!r}")
            await asyncio.sleep(PAUSE_503_S)
            continue
        rec.answer("enqueue", r)
        if r.status_code == 201:
            rec.created[r.json()["id"]] = k
        elif r.status_code == 503:
            await asyncio.sleep(PAUSE_503_S)
        else:
            rec.bad.append(f"enqueue: {r.status_code} {r.text[:200]}")


async def _worker(c: httpx.AsyncClient, n: int, rec: Record, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            r = await c.post("/v1/leases", json={"worker_id": f"w{n}", "queues": [QUEUE], "limit": 5,
                                                 "wait_ms": 1000, "lease_ms": 5000})
        except httpx.HTTPError as exc:
            rec.bad.append(f"claim: {exc!r}")
            await asyncio.sleep(PAUSE_503_S)
            continue
        rec.answer("claim", r)
        if r.status_code != 200:
            await asyncio.sleep(PAUSE_503_S)
            continue
        for lease in r.json()["leases"]:
            # An ack answered 503 is tried again (as the SDK does) until the lease is known
            # to be acked (200) or lost (409: its job goes to another worker).
            while True:
                try:
                    a = await c.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": lease["lease_id"]})
                except httpx.HTTPError as exc:
                    rec.bad.append(f"ack: {exc!r}")
                    break
                rec.answer("ack", a)
                if a.status_code == 200:
                    rec.acked[lease["job"]["id"]].append(lease["lease_id"])
                    break
                if a.status_code != 503:
                    if a.status_code != 409:
                        rec.bad.append(f"ack: {a.status_code} {a.text[:200]}")
                    break
                await asyncio.sleep(PAUSE_503_S)


def _first(rec: Record, call: str, status: int, after: float) -> float | None:
    return next((t for t, c, s in rec.answers if c == call and s == status and t >= after), None)


def _summary(rec: Record, since: float) -> dict[tuple[str, int], int]:
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for t, c, s in rec.answers:
        if t >= since:
            counts[(c, s)] += 1
    return dict(counts)


def _log(server: LiveServer) -> str:
    try:
        return "\n".join(Path(server.log.name).read_text().splitlines()[-40:])
    except (OSError, AttributeError):
        return ""


async def _fleet_sessions(url: str) -> tuple[int, int]:
    """On the new primary: LISTEN sessions of the replicas, and duties locks held."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN jobq_jobs'),"
            " (SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            "  WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE 'jobq-leader%')")
        row = await cur.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_promoted_synchronous_standby_loses_no_acknowledged_job() -> None:
    started = time.monotonic()
    with ReplicatedPair(synchronous=True) as pair:
        with psycopg.connect(pair.primary.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE jobq")
        url = pair.multi_host_url("jobq")
        servers = [LiveServer(url), LiveServer(url)]
        try:
            for server in servers:
                server.start(timeout_s=60)
            await _run_failover(pair, servers)
        except BaseException:
            print("\n".join(f"--- replica {i} log:\n{_log(s)}" for i, s in enumerate(servers)))
            print(pair.log_tail())
            raise
        finally:
            for server in servers:
                server.stop()
    print(f"failover test took {time.monotonic() - started:.1f} s")


async def _run_failover(pair: ReplicatedPair, servers: list[LiveServer]) -> None:
    rec = Record()
    stop = asyncio.Event()
    clients = [httpx.AsyncClient(base_url=s.url, timeout=30) for s in servers]
    try:
        tasks = [asyncio.create_task(_producer(c, i, rec, stop)) for i, c in enumerate(clients)]
        tasks += [asyncio.create_task(_worker(c, i, rec, stop)) for i, c in enumerate(clients)]
        await aeventually(lambda: len(rec.created) >= 20 and sum(map(len, rec.acked.values())) >= 5,
                          what="the load flowing before the crash: 20 jobs enqueued, 5 acked")

        killed_at = time.monotonic()
        pair.kill_primary()
        # The time is the test: no primary for longer than db_timeout_s, so calls answer 503.
        await asyncio.sleep(UNPROMOTED_S)
        pair.promote()
        promoted_at = time.monotonic()

        # The load resumes by itself: every replica's producer and worker succeed again.
        # The bound is the test: the timeout is RESUME_BOUND_S from the promotion.
        await aeventually(
            lambda: _first(rec, "enqueue", 201, promoted_at) is not None
            and _first(rec, "ack", 200, promoted_at) is not None,
            timeout_s=RESUME_BOUND_S - (time.monotonic() - promoted_at), poll_s=0.05,
            what=lambda: (f"the load resuming within {RESUME_BOUND_S} s of the promotion; answers since: "
                          f"{sorted({(c, s) for t, c, s in rec.answers if t >= promoted_at})}"))
        resumed_at = time.monotonic()
        # The time is the test: the load is kept up a while to see it stays up.
        await asyncio.sleep(LOAD_AFTER_S)
        stop.set()
        done, pending = await asyncio.wait(tasks, timeout=30)
        assert not pending, (f"load tasks still running: {[t.get_stack() for t in pending]}; "
                             f"answers after the promotion: {_summary(rec, promoted_at)}")
        for task in done:
            task.result()

        first_503 = _first(rec, "enqueue", 503, killed_at) or _first(rec, "claim", 503, killed_at)
        first_201 = _first(rec, "enqueue", 201, promoted_at)
        first_ack = _first(rec, "ack", 200, promoted_at)
        assert first_201 is not None and first_ack is not None, (
            f"the load did not resume within {RESUME_BOUND_S} s of the promotion; answers since: "
            f"{sorted({(c, s) for t, c, s in rec.answers if t >= promoted_at})}")
        assert resumed_at - promoted_at <= RESUME_BOUND_S
        assert rec.bad == [], rec.bad[:20]
        statuses = sorted({s for _, _, s in rec.answers})
        assert set(statuses) <= {200, 201, 409, 503}, statuses

        # Duties and notifications came back: each replica listens again, one leads.
        fleet: list[tuple[int, int]] = []

        async def fleet_back() -> bool:
            fleet.append(await _fleet_sessions(pair.standby.url("jobq")))
            return fleet[-1] == (len(servers), 1)

        await aeventually(fleet_back, poll_s=0.1,
                          what=lambda: f"each replica listening and one leading (last: {fleet[-1:]})")

        stored = await stored_jobs(clients[0], QUEUE)
        missing = sorted(set(rec.created) - set(stored), key=int)
        twice = {job: leases for job, leases in rec.acked.items() if len(set(leases)) > 1}
        for job_id, leases in rec.acked.items():
            assert stored[job_id]["status"] == "completed", stored[job_id]
            assert stored[job_id]["result"] in leases, (stored[job_id], leases)
        n503 = sum(1 for _, _, s in rec.answers if s == 503)
        print(f"\nfailover: {len(rec.created)} jobs answered 201, {len(missing)} of them lost; "
              f"{sum(map(len, rec.acked.values()))} acks, {len(twice)} jobs completed twice; "
              f"{n503} answers 503; outage (first 503 to first 201 after promotion) "
              f"{(first_201 - (first_503 or killed_at)):.2f} s; crash to first 201 "
              f"{first_201 - killed_at:.2f} s, of which {promoted_at - killed_at:.2f} s "
              f"before the promotion; first 201 "
              f"{first_201 - promoted_at:.2f} s and first ack {first_ack - promoted_at:.2f} s "
              f"after it")
        assert missing == [], f"{len(missing)} jobs answered 201 are gone: {missing[:10]}"
        assert twice == {}, twice
    finally:
        stop.set()
        for c in clients:
            await c.aclose()
