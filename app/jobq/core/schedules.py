"""Recurring jobs: schedules (create, read, change, delete) and the scheduler that fires them.

A fire is an ordinary job, enqueued the way ``POST /v1/jobs`` enqueues one (the queue's
``max_depth``, the counters, the wake-ups), with the idempotency key
``schedule:{name}:{fire time}``; the queue itself never models recurrence. The cron
arithmetic (next fire times, daylight-saving changes, misfire policies) is
``jobq.domain.schedules``; this module only decides when to ask it and writes down the answer.

Every replica runs a scheduler. Each fire happens once because a scheduler takes the due
rows with ``FOR UPDATE SKIP LOCKED`` and enqueues, and writes the next fire time, in that one
transaction: a replica that finds a row locked leaves it to the one that holds it, and a
row lock dies with its session, so killing the replica that fired last hands the next fire
to another at once (no lock to time out, no leader to elect). Should a fire be enqueued twice
anyway (a bookkeeping write lost after the enqueue committed, a row edited by hand), the
idempotency key makes the second one name the first job.

The scheduler sleeps until the earliest fire time in the table (at most SAFETY_RECHECK_S),
and is woken early by ``Context.schedule_bell``, which a change of a schedule rings on this
replica and, by NOTIFY, on the others. A fire that meets a full queue stays in
``pending_fire_at`` and is tried again every FULL_RETRY_S until it goes in; fire times that
come due meanwhile are folded into it (counted as misfires).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from jobq.core import counters
from jobq.core.context import Context
from jobq.domain.errors import InvalidInput, JobqError, NotFound
from jobq.domain.jobs import Job
from jobq.domain.queues import QUEUE_DEFAULTS
from jobq.domain.schedules import (
    MISFIRES,
    CronError,
    CronSpec,
    Misfire,
    due,
    fire_key,
    first_fire,
    parse_cron,
    parse_timezone,
)
from jobq.store import records
from jobq.store.db import Connection, dumps_json
from jobq.store.enqueue import NOT_LEASED
from jobq.store.queries import Q
from jobq.store.records import JobChange, ScheduleRecord

log = logging.getLogger("jobq.schedules")

# At most this long between looks at the table, in case a bell was missed (a NOTIFY lost
# while the listening connection was away).
SAFETY_RECHECK_S = 30.0
# A fire that met a full queue is tried again this often.
FULL_RETRY_S = 1.0
# A due schedule another replica holds (it is firing it now): look again this soon.
BLOCKED_RECHECK_S = 0.1
# After a turn that failed (the database away).
ERROR_RETRY_S = 1.0
# While the database has no schedules table (not migrated yet).
NOT_MIGRATED_RETRY_S = 10.0
# Schedules fired per transaction; a larger backlog takes more turns at once.
TURN_BATCH = 100
DEFAULT_QUEUE = "default"
DEFAULT_MISFIRE: Misfire = "run_once"


@dataclass(frozen=True, slots=True)
class JobTemplate:
    """The job each fire enqueues. ``max_attempts`` None: the queue's, at enqueue time."""

    type: str
    queue: str = DEFAULT_QUEUE
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    max_attempts: int | None = None


@dataclass(frozen=True, slots=True)
class Draft:
    """A schedule as a PUT gives it, checked by ``draft``."""

    cron: CronSpec
    timezone: str
    misfire: Misfire
    enabled: bool
    job: JobTemplate


def _cron(text: str) -> CronSpec:
    try:
        return parse_cron(text)
    except CronError as exc:
        raise InvalidInput(f"cron: {exc}", ["body", "cron"]) from None


@functools.lru_cache(maxsize=1024)
def _stored_cron(text: str) -> CronSpec:
    """A stored expression, parsed once per process: it was validated when it was written."""
    return parse_cron(text)


def _zone(name: str) -> ZoneInfo:
    try:
        return parse_timezone(name)
    except CronError as exc:
        raise InvalidInput(f"timezone: {exc}", ["body", "timezone"]) from None


def _misfire(value: str) -> Misfire:
    if value not in MISFIRES:
        raise InvalidInput(f"misfire: must be one of {', '.join(MISFIRES)}", ["body", "misfire"])
    return value  # type: ignore[return-value]


def draft(cron: str, timezone: str, misfire: str, enabled: bool, job: JobTemplate) -> Draft:
    """A schedule checked field by field: InvalidInput naming the field that is wrong."""
    spec = _cron(cron)
    _zone(timezone)
    return Draft(spec, timezone, _misfire(misfire), enabled, job)


# ------------------------------------------------------------------------------- reading


def public(s: ScheduleRecord) -> dict[str, Any]:
    """A schedule as the API shows it."""
    return {
        "name": s.name,
        "cron": s.cron,
        "timezone": s.timezone,
        "misfire": s.misfire,
        "enabled": s.enabled,
        "job": {
            "queue": s.job_queue,
            "type": s.job_type,
            "payload": s.job_payload,
            "priority": s.job_priority,
            "max_attempts": s.job_max_attempts,
        },
        "next_fire_at": s.next_fire_at,
        "pending_fire_at": s.pending_fire_at,
        "last_fired_at": s.last_fired_at,
        "last_job_id": None if s.last_job_id is None else str(s.last_job_id),
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


async def get(ctx: Context, name: str) -> dict[str, Any]:
    row = await ctx.db.fetch_one(Q.ScheduleGet, {"name": name})
    if row is None:
        raise NotFound(f"schedule {name!r} does not exist")
    return public(records.schedule(row))


async def list_all(ctx: Context) -> list[dict[str, Any]]:
    return [public(records.schedule(r)) for r in await ctx.db.fetch(Q.ScheduleList)]


# ------------------------------------------------------------------------------ changing


def _next_fire(spec: CronSpec, timezone: str, enabled: bool, ctx: Context) -> datetime | None:
    """From now: a schedule created, replaced or enabled again does not fire the times it
    was not there for."""
    return first_fire(spec, _zone(timezone), ctx.clock.now()) if enabled else None


def _row_params(name: str, d: Draft) -> dict[str, Any]:
    return {
        "name": name,
        "cron": d.cron.expr,
        "timezone": d.timezone,
        "misfire": d.misfire,
        "enabled": d.enabled,
        "job_queue": d.job.queue,
        "job_type": d.job.type,
        "job_payload": dumps_json(d.job.payload),
        "job_priority": d.job.priority,
        "job_max_attempts": d.job.max_attempts,
    }


async def put(ctx: Context, name: str, d: Draft) -> tuple[dict[str, Any], bool]:
    """Create or replace; answers the schedule and whether it was created."""
    params = _row_params(name, d) | {"next_fire_at": _next_fire(d.cron, d.timezone, d.enabled, ctx)}
    row = await ctx.db.fetch_one(Q.ScheduleUpsert, params)
    assert row is not None
    saved = records.schedule(row)
    ctx.schedules_changed()
    log.info("schedule %s %s: %s %s, next fire %s", name, "created" if saved.created else "replaced",
             d.cron.expr, d.timezone, _text(saved.next_fire_at))
    return public(saved), saved.created


JOB_FIELDS = ("queue", "type", "payload", "priority", "max_attempts")


async def update(ctx: Context, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Change what is given: ``cron``, ``timezone``, ``misfire``, ``enabled``, and ``job``, a
    partial template (a field given as None goes back to its default). A new cron or time
    zone, or enabling a disabled schedule, sets the next fire time from now; disabling
    drops it, and a fire waiting for room in a full queue with it."""
    db = ctx.db
    async with db.transaction() as conn:
        rows = await db.run(conn, Q.ScheduleGetForUpdate, {"name": name})
        if not rows:
            raise NotFound(f"schedule {name!r} does not exist")
        old = records.schedule(rows[0])
        cron = _cron(changes["cron"]) if "cron" in changes else _stored_cron(old.cron)
        timezone = changes.get("timezone", old.timezone)
        if "timezone" in changes:
            _zone(timezone)
        misfire = _misfire(changes.get("misfire", old.misfire))
        enabled = bool(changes.get("enabled", old.enabled))
        fields = {"queue": old.job_queue, "type": old.job_type, "payload": old.job_payload,
                  "priority": old.job_priority, "max_attempts": old.job_max_attempts}
        for key, value in (changes.get("job") or {}).items():
            if key not in JOB_FIELDS:  # the API's schema refuses these already
                raise InvalidInput(f"job.{key}: unknown field", ["body", "job", key])
            fields[key] = value if value is not None else _JOB_DEFAULTS.get(key)
        if not fields["type"]:
            raise InvalidInput("job.type: cannot be null", ["body", "job", "type"])
        template = JobTemplate(**fields)
        d = Draft(cron, timezone, misfire, enabled, template)
        timing_changed = cron.expr != old.cron or timezone != old.timezone
        if not enabled:
            next_fire, pending = None, None
        elif timing_changed or not old.enabled or old.next_fire_at is None:
            next_fire, pending = _next_fire(cron, timezone, True, ctx), old.pending_fire_at
        else:
            next_fire, pending = old.next_fire_at, old.pending_fire_at
        saved = await db.run(conn, Q.ScheduleSave, _row_params(name, d) | {
            "next_fire_at": next_fire, "pending_fire_at": pending})
    ctx.schedules_changed()
    log.info("schedule %s changed (%s): next fire %s", name, ", ".join(sorted(changes)) or "nothing",
             _text(next_fire))
    return public(records.schedule(saved[0]))


_JOB_DEFAULTS: dict[str, Any] = {"queue": DEFAULT_QUEUE, "payload": {}, "priority": 0,
                                 "max_attempts": None}


async def delete(ctx: Context, name: str) -> None:
    """The jobs it enqueued stay; a fire waiting for room in a full queue is dropped."""
    if await ctx.db.fetch_one(Q.ScheduleDelete, {"name": name}) is None:
        raise NotFound(f"schedule {name!r} does not exist")
    ctx.schedules_changed()
    log.info("schedule %s deleted", name)


def _text(t: datetime | None) -> str:
    return "none" if t is None else t.isoformat().replace("+00:00", "Z")


# ----------------------------------------------------------------------------- firing


@dataclass(frozen=True, slots=True)
class Fired:
    schedule: str
    fire_at: datetime
    job: Job
    change: JobChange  # for the events, once committed
    created: bool  # False: the key named a job enqueued before (a fire already done)


@dataclass
class Turn:
    """What one scheduler turn did."""

    fired: list[Fired] = field(default_factory=list)
    missed: dict[str, int] = field(default_factory=dict)
    full: list[str] = field(default_factory=list)  # schedules whose fire waits for room
    failed: list[str] = field(default_factory=list)  # schedules that could not fire (logged)
    newly_full: list[str] = field(default_factory=list)  # of those, the ones that just began to


def _job_params(s: ScheduleRecord, fire_at: datetime) -> dict[str, Any]:
    return {
        "queue": s.job_queue,
        "type": s.job_type,
        "payload": dumps_json(s.job_payload),
        "priority": s.job_priority,
        "max_attempts": s.job_max_attempts,
        "idempotency_key": fire_key(s.name, fire_at),
        "run_at": None,
        "delay_ms": 0,
        **NOT_LEASED,
    }


async def _enqueue(ctx: Context, conn: Connection, s: ScheduleRecord,
                   fire_at: datetime) -> tuple[Job, JobChange, bool] | None:
    """The fire's job, in the turn's transaction: (job, its change, created), or None when
    the queue is full. JobInsert is POST /v1/jobs's statement: max_depth and the counters alike."""
    params = _job_params(s, fire_at)
    inserted = await ctx.db.run(conn, Q.JobInsert, params)
    if inserted:
        return records.job(inserted[0]), records.change(inserted[0]), True
    key = {"queue": s.job_queue, "idempotency_key": fire_key(s.name, fire_at)}
    existing = await ctx.db.run(conn, Q.JobGetByIdempotencyKey, key)
    if existing:
        return records.job(existing[0]), records.change(existing[0]), False
    return None


async def _fire_one(ctx: Context, conn: Connection, s: ScheduleRecord, now: datetime,
                    turn: Turn) -> None:
    name = s.name
    tries: list[datetime] = []
    if s.pending_fire_at is not None:
        tries.append(s.pending_fire_at)
    next_fire = s.next_fire_at
    missed = 0
    if next_fire is not None and next_fire <= now:
        outcome = due(_stored_cron(s.cron), _zone(s.timezone), next_fire, now, s.misfire)
        next_fire, missed = outcome.next_fire_at, outcome.missed
        if outcome.fire_at is not None:
            tries.append(outcome.fire_at)
    pending: datetime | None = None
    last: tuple[datetime, Job] | None = None
    for i, fire_at in enumerate(tries):
        got = await _enqueue(ctx, conn, s, fire_at)
        if got is None:
            pending = fire_at
            missed += len(tries) - i - 1  # folded into the fire that waits
            turn.full.append(name)
            if s.pending_fire_at is None or fire_at != s.pending_fire_at:
                turn.newly_full.append(name)
            break
        job, change, created = got
        turn.fired.append(Fired(name, fire_at, job, change, created))
        last = (fire_at, job)
    if missed:
        turn.missed[name] = turn.missed.get(name, 0) + missed
    await ctx.db.run(conn, Q.ScheduleFired, {
        "name": name, "next_fire_at": next_fire, "pending_fire_at": pending,
        "last_fired_at": last[0] if last else None, "last_job_id": last[1].id if last else None})


async def fire_due(ctx: Context) -> Turn:
    """One scheduler turn: fire every schedule due at ``ctx.clock.now()`` that no other
    replica is firing, in one transaction per batch; then wake the long-polls for the jobs."""
    turn = Turn()
    seen: list[str] = []
    while True:
        now = ctx.clock.now()
        batch = Turn()
        new_queues: set[str] = set()
        db = ctx.db
        async with db.transaction() as conn:
            due_now = [records.schedule(r) for r in await db.run(
                conn, Q.ScheduleDueLock, {"now": now, "limit": TURN_BATCH, "seen": seen})]
            seen += [s.name for s in due_now]
            for row in due_now:
                queue = row.job_queue
                # Asked of the database every turn, not of known_queues: the queue may have
                # been deleted on another replica, and a fire that found no queue would wait
                # in pending_fire_at for ever. A fire is an enqueue: it creates its queue.
                if queue not in new_queues:
                    await db.run(conn, Q.QueueEnsure, {**QUEUE_DEFAULTS.as_params(), "queue": queue})
                    new_queues.add(queue)
                # A savepoint each: one schedule's trouble must not undo the others' fires.
                one = Turn()
                try:
                    async with db.savepoint(conn):
                        await _fire_one(ctx, conn, row, now, one)
                except Exception as exc:  # one schedule's trouble is logged; the others fire
                    log.error("schedule %s could not fire: %s", row.name, exc)
                    batch.failed.append(row.name)
                    continue
                batch.fired += one.fired
                batch.full += one.full
                batch.newly_full += one.newly_full
                batch.missed.update(one.missed)
        ctx.known_queues.update(new_queues)
        _after_commit(ctx, batch, now)
        turn.fired += batch.fired
        turn.full += batch.full
        turn.failed += batch.failed
        for name, n in batch.missed.items():
            turn.missed[name] = turn.missed.get(name, 0) + n
        if len(due_now) < TURN_BATCH:
            return turn


def _after_commit(ctx: Context, turn: Turn, now: datetime) -> None:
    new = [f for f in turn.fired if f.created]
    if new:
        ctx.wakeups.jobs_added((f.job.queue, f.job.visible_at) for f in new)
        ctx.events.emit("enqueued", [f.change for f in new])
    for f in turn.fired:
        lag = (now - f.fire_at).total_seconds()
        counters.schedule_fired(f.schedule, lag)
        log.info("schedule %s fired for %s: job %s in queue %s (%.3f s after its time%s)",
                 f.schedule, _text(f.fire_at), f.job.id, f.job.queue, lag,
                 "" if f.created else "; the job was enqueued before", extra={
                     "event": "schedule_fired", "job_id": str(f.job.id),
                     "queue": f.job.queue, "type": f.job.type})
    for name, n in turn.missed.items():
        counters.schedule_missed(name, n)
        log.warning("schedule %s missed %d fire time(s)", name, n)
    for name in turn.newly_full:  # once, not at every retry
        log.warning("schedule %s: its queue is full; the fire is tried again every %.0f s until "
                    "it goes in", name, FULL_RETRY_S)


async def next_wake_s(ctx: Context) -> float:
    """How long the scheduler may sleep: until the earliest fire time, FULL_RETRY_S while a
    fire waits for room, BLOCKED_RECHECK_S when one is due but another replica holds it."""
    row = await ctx.db.fetch_one(Q.ScheduleNextWake)
    sleep = SAFETY_RECHECK_S
    if row is None:
        return sleep
    wake = records.next_wake(row)
    if wake.pending:
        sleep = min(sleep, FULL_RETRY_S)
    nxt = wake.next_fire_at
    if nxt is not None:
        until = (nxt - ctx.clock.now()).total_seconds()
        # A hair past the time, so that the row is due when we look (clocks read in µs).
        sleep = min(sleep, until + 0.002 if until > 0 else BLOCKED_RECHECK_S)
    return sleep


async def run_scheduler(ctx: Context) -> None:
    """Every replica's scheduler: fire what is due, sleep until the next fire time or a bell."""
    bell = ctx.schedule_bell
    migrated = False
    while True:
        # Cleared before reading the table: a change committed after the read rings it again.
        bell.clear()
        try:
            if not migrated:
                migrated = bool(records.scalar(await ctx.db.fetch_one(Q.ScheduleTableExists)))
            if not migrated:
                # The service answers before `jobq migrate` ran (/readyz says 503 meanwhile).
                log.info("scheduler: no schedules table yet (jobq migrate); looking again in %.0f s",
                         NOT_MIGRATED_RETRY_S)
                await asyncio.sleep(NOT_MIGRATED_RETRY_S)
                continue
            turn = await fire_due(ctx)
            sleep = await next_wake_s(ctx)
            if turn.failed:  # still due: do not retry it (and log) ten times a second
                sleep = max(sleep, ERROR_RETRY_S)
        except asyncio.CancelledError:
            raise
        except JobqError as exc:
            log.warning("scheduler: %s", exc.detail)
            sleep = ERROR_RETRY_S
        except Exception:  # never let the scheduler die; the next turn may succeed
            log.exception("scheduler turn failed")
            sleep = ERROR_RETRY_S
        if sleep > 0:
            try:
                async with asyncio.timeout(sleep):
                    await bell.wait()
            except TimeoutError:
                pass
