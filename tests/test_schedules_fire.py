"""The scheduler against the real database, with a hand-driven clock (issue 13): a fire per
period, misfire policies after downtime, a full queue, a crash between enqueue and
bookkeeping, disabled schedules, and two replicas' schedulers at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobq.core import counters
from jobq.core import enqueue as enq
from jobq.core import schedules as sched
from jobq.core.context import Context
from jobq.core.wakeups import Wakeups
from jobq.domain.jobs import NewJob
from jobq.domain.schedules import fire_key
from jobq.store.db import Database

T0 = datetime(2031, 3, 1, 12, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


class FakeClock:
    def __init__(self, t: datetime) -> None:
        self.t = t

    def now(self) -> datetime:
        return self.t


async def _context(url: str, clock: FakeClock) -> Context:
    db = Database(url, pool_size=4, timeout_s=5.0, retry_after_s=1)
    await db.open(wait=True)
    ctx = Context(db=db, wakeups=Wakeups(db))
    ctx.clock = clock
    return ctx


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
async def ctx(database_url: str, clock: FakeClock) -> AsyncIterator[Context]:
    c = await _context(database_url, clock)
    yield c
    await c.db.close()


def _draft(cron: str = "* * * * *", misfire: str = "run_once", enabled: bool = True,
           queue: str = "sq") -> sched.Draft:
    return sched.draft(cron, "UTC", misfire, enabled,
                       sched.JobTemplate(type="tick", queue=queue, payload={"n": 1}))


def _jobs(url: str, queue: str = "sq") -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT id, idempotency_key FROM jobs_all WHERE queue = %s ORDER BY id", (queue,))]


async def test_fires_once_per_period_with_its_key(ctx: Context, clock: FakeClock, database_url: str) -> None:
    out, created = await sched.put(ctx, "every-minute", _draft())
    assert created and out["next_fire_at"] == T0 + MINUTE
    clock.t = T0 + timedelta(seconds=30)
    assert (await sched.fire_due(ctx)).fired == []
    clock.t = T0 + MINUTE
    turn = await sched.fire_due(ctx)
    assert [(f.schedule, f.fire_at, f.created) for f in turn.fired] == [("every-minute", T0 + MINUTE, True)]
    assert counters.SCHEDULE_FIRES.labels("every-minute")._value.get() == 1
    assert counters.SCHEDULE_LAG.labels("every-minute")._value.get() == 0  # the clock stood at the fire time
    assert (await sched.fire_due(ctx)).fired == []  # the same instant again: nothing
    clock.t = T0 + MINUTE + timedelta(seconds=59)
    assert (await sched.fire_due(ctx)).fired == []
    clock.t = T0 + 2 * MINUTE
    assert len((await sched.fire_due(ctx)).fired) == 1
    jobs = _jobs(database_url)
    assert [k for _, k in jobs] == [fire_key("every-minute", T0 + MINUTE), fire_key("every-minute", T0 + 2 * MINUTE)]
    got = await sched.get(ctx, "every-minute")
    assert got["last_fired_at"] == T0 + 2 * MINUTE
    assert got["last_job_id"] == str(jobs[-1][0])
    assert got["next_fire_at"] == T0 + 3 * MINUTE
    assert got["pending_fire_at"] is None


async def test_a_fired_job_is_the_template(ctx: Context, clock: FakeClock, database_url: str) -> None:
    d = sched.draft("* * * * *", "UTC", "skip", True, sched.JobTemplate(
        type="report", queue="rq", payload={"a": [1, 2]}, priority=7, max_attempts=3))
    await sched.put(ctx, "tmpl", d)
    clock.t = T0 + MINUTE
    [fired] = (await sched.fire_due(ctx)).fired
    job = fired.job
    assert (job.queue, job.type, job.payload, job.priority, job.max_attempts, job.status) == (
        "rq", "report", {"a": [1, 2]}, 7, 3, "pending")


async def test_misfire_skip_after_three_periods_down_fires_nothing_and_resumes_ahead(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    hour = timedelta(hours=1)
    await sched.put(ctx, "skipper", _draft(cron="0 * * * *", misfire="skip"))
    # Down from before the first fire (13:00) until 16:05: 13:00, 14:00, 15:00 and 16:00 passed,
    # the last of them by more than the grace of a late scheduler (MISFIRE_GRACE).
    clock.t = T0 + hour + 3 * hour + timedelta(minutes=5)
    turn = await sched.fire_due(ctx)
    assert turn.fired == [] and turn.missed.get("skipper") == 4
    assert counters.SCHEDULE_MISFIRES.labels("skipper")._value.get() == 4
    assert _jobs(database_url) == []
    got = await sched.get(ctx, "skipper")
    assert got["next_fire_at"] == T0 + 5 * hour and got["next_fire_at"] > clock.t
    clock.t = T0 + 5 * hour
    assert len((await sched.fire_due(ctx)).fired) == 1  # and on time again


async def test_misfire_skip_still_fires_a_time_that_is_merely_late(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    # Back 10 s after a fire time, within MISFIRE_GRACE: that fire is late, not missed.
    await sched.put(ctx, "late", _draft(misfire="skip"))
    clock.t = T0 + MINUTE + 3 * MINUTE + timedelta(seconds=10)
    turn = await sched.fire_due(ctx)
    assert [f.fire_at for f in turn.fired] == [T0 + 4 * MINUTE]
    assert turn.missed.get("late") == 3
    assert len(_jobs(database_url)) == 1


async def test_misfire_run_once_after_three_periods_down_fires_one_catch_up(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    await sched.put(ctx, "catcher", _draft(misfire="run_once"))
    clock.t = T0 + MINUTE + 3 * MINUTE + timedelta(seconds=10)
    turn = await sched.fire_due(ctx)
    assert len(turn.fired) == 1 and turn.missed.get("catcher", 0) >= 2
    assert T0 + MINUTE <= turn.fired[0].fire_at <= clock.t
    assert len(_jobs(database_url)) == 1
    assert (await sched.fire_due(ctx)).fired == []
    got = await sched.get(ctx, "catcher")
    assert got["next_fire_at"] == T0 + 5 * MINUTE


async def _fill(ctx: Context, queue: str = "sq") -> int:
    with psycopg.connect(ctx.db.url, autocommit=True) as conn:
        conn.execute("INSERT INTO queues (name, max_depth) VALUES (%s, 1) "
                     "ON CONFLICT (name) DO UPDATE SET max_depth = 1", (queue,))
    return (await enq.enqueue(ctx, NewJob(type="blocker", payload={}, queue=queue))).job.id


async def test_a_full_queue_is_retried_each_turn_not_lost_not_doubled(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    blocker = await _fill(ctx)
    await sched.put(ctx, "into-full", _draft())
    clock.t = T0 + MINUTE
    turn = await sched.fire_due(ctx)
    assert turn.fired == [] and turn.full == ["into-full"]
    got = await sched.get(ctx, "into-full")
    assert got["pending_fire_at"] == T0 + MINUTE and got["next_fire_at"] == T0 + 2 * MINUTE
    assert await sched.next_wake_s(ctx) <= sched.FULL_RETRY_S
    clock.t += timedelta(seconds=1)
    assert (await sched.fire_due(ctx)).full == ["into-full"]  # still full: still waiting
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET status = 'cancelled', completed_at = now() WHERE id = %s", (blocker,))
    clock.t += timedelta(seconds=1)
    turn = await sched.fire_due(ctx)
    assert [(f.fire_at, f.created) for f in turn.fired] == [(T0 + MINUTE, True)]
    assert (await sched.fire_due(ctx)).fired == []
    keys = [k for _, k in _jobs(database_url) if k]
    assert keys == [fire_key("into-full", T0 + MINUTE)]
    got = await sched.get(ctx, "into-full")
    assert got["pending_fire_at"] is None and got["last_fired_at"] == T0 + MINUTE


async def test_fire_times_that_pass_while_a_fire_waits_fold_into_it(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    await _fill(ctx)
    await sched.put(ctx, "folded", _draft())
    clock.t = T0 + MINUTE
    await sched.fire_due(ctx)
    clock.t = T0 + 2 * MINUTE  # the next fire time comes while the first still waits
    turn = await sched.fire_due(ctx)
    assert turn.fired == [] and turn.missed == {"folded": 1}
    got = await sched.get(ctx, "folded")
    assert got["pending_fire_at"] == T0 + MINUTE and got["next_fire_at"] == T0 + 3 * MINUTE


async def test_a_crash_between_enqueue_and_bookkeeping_still_makes_one_job(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    await sched.put(ctx, "crashy", _draft())
    # The fire's job was committed, its bookkeeping was not: the row still says it is due.
    earlier = await enq.enqueue(ctx, NewJob(type="tick", queue="sq", payload={"n": 1},
                                            idempotency_key=fire_key("crashy", T0 + MINUTE)))
    clock.t = T0 + MINUTE
    turn = await sched.fire_due(ctx)
    assert [(f.job.id, f.created) for f in turn.fired] == [(earlier.job.id, False)]
    assert [i for i, _ in _jobs(database_url)] == [earlier.job.id]
    got = await sched.get(ctx, "crashy")
    assert got["last_job_id"] == str(earlier.job.id) and got["next_fire_at"] == T0 + 2 * MINUTE


async def test_a_disabled_schedule_does_not_fire_and_enabling_starts_from_now(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    out, _ = await sched.put(ctx, "off", _draft(enabled=False))
    assert out["next_fire_at"] is None
    clock.t = T0 + 10 * MINUTE
    assert (await sched.fire_due(ctx)).fired == []
    on = await sched.update(ctx, "off", {"enabled": True})
    assert on["next_fire_at"] == T0 + 11 * MINUTE  # no burst of the ten it was off for
    assert (await sched.fire_due(ctx)).fired == []
    await sched.update(ctx, "off", {"enabled": False})
    clock.t = T0 + 20 * MINUTE
    assert (await sched.fire_due(ctx)).fired == []
    assert _jobs(database_url) == []


async def test_a_replaced_schedule_starts_from_now(ctx: Context, clock: FakeClock) -> None:
    await sched.put(ctx, "re", _draft())
    clock.t = T0 + 5 * MINUTE + timedelta(seconds=1)
    out, created = await sched.put(ctx, "re", _draft(cron="*/10 * * * *"))
    assert not created and out["next_fire_at"] == T0 + 10 * MINUTE
    assert (await sched.fire_due(ctx)).fired == []


async def test_two_replicas_firing_at_once_make_one_job_per_fire_time(
        ctx: Context, clock: FakeClock, database_url: str) -> None:
    other = await _context(database_url, clock)
    try:
        for i in range(5):
            await sched.put(ctx, f"race{i}", _draft())
        for minute in range(1, 4):
            clock.t = T0 + minute * MINUTE
            turns = await asyncio.gather(sched.fire_due(ctx), sched.fire_due(other),
                                         sched.fire_due(ctx), sched.fire_due(other))
            assert sum(len(t.fired) for t in turns) == 5, minute
    finally:
        await other.db.close()
    keys = [k for _, k in _jobs(database_url)]
    assert len(keys) == 15 and len(set(keys)) == 15


async def test_the_scheduler_sleeps_until_the_next_fire(ctx: Context, clock: FakeClock) -> None:
    assert await sched.next_wake_s(ctx) == sched.SAFETY_RECHECK_S  # nothing scheduled
    await sched.put(ctx, "soon", _draft())
    clock.t = T0 + timedelta(seconds=45)
    assert 15 < await sched.next_wake_s(ctx) < 15.1
    clock.t = T0 + MINUTE + timedelta(seconds=1)  # due, but held by another replica
    assert await sched.next_wake_s(ctx) == sched.BLOCKED_RECHECK_S


async def test_a_turn_takes_batches_until_every_due_schedule_was_handled_once(
        ctx: Context, clock: FakeClock, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sched, "TURN_BATCH", 2)
    for i in range(5):
        await sched.put(ctx, f"b{i}", _draft())
    for i in range(3):  # these wait for room in a full queue: due again at once, not again this turn
        await sched.put(ctx, f"f{i}", _draft(queue="fq"))
    await _fill(ctx, "fq")
    clock.t = T0 + MINUTE
    turn = await asyncio.wait_for(sched.fire_due(ctx), 10)
    assert sorted(f.schedule for f in turn.fired) == [f"b{i}" for i in range(5)]
    assert sorted(turn.full) == ["f0", "f1", "f2"]
    turn = await asyncio.wait_for(sched.fire_due(ctx), 10)
    assert turn.fired == [] and sorted(turn.full) == ["f0", "f1", "f2"]
