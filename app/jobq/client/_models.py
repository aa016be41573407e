"""Light, read-only objects parsed from the service's JSON.

Parsing is tolerant on purpose: a newer service may add fields, and an SDK that breaks on
them would force every producer and worker to upgrade in lock-step. Missing fields get
neutral defaults and unknown ones are kept in ``extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final


class JobStatus(StrEnum):
    """A job's status. ``Job.status`` stays a plain ``str`` so unknown values still parse;
    these members compare equal to it."""

    PENDING = "pending"
    RUNNING = "running"
    FAILED = "failed"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"


FINISHED_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED})


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 string as an aware datetime; None (or garbage) as None."""
    if not isinstance(value, str):
        return None
    parsed = _TIMES.get(value, _NOT_SEEN)
    if parsed is _NOT_SEEN:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if len(_TIMES) >= _TIMES_SIZE:
            _TIMES.clear()
        _TIMES[value] = parsed
    return parsed


# Times parsed lately, by their text: the leases of one claim share their locked_until (the
# lease's and the job's), and a job's visible_at is often its created_at, so a claim of 100
# leases parses about 200 texts instead of 500. Datetimes are immutable, so sharing one is
# safe; the cache is emptied when full (a dict's get and set are atomic, so threads may share it).
_TIMES: dict[str, datetime | None] = {}
_TIMES_SIZE: Final = 1024
_NOT_SEEN: Final = object()


_new = object.__new__


def _extra(data: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int_map(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int)}


@dataclass(frozen=True, kw_only=True)
class JobError:
    """One failed attempt in a job's ``errors`` history."""

    attempt: int
    at: datetime | None
    error: str
    kind: str  # "failed" (worker reported) or "lease_expired"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobError:
        return cls(
            attempt=_int(data.get("attempt")),
            at=parse_time(data.get("at")),
            error=str(data.get("error") or ""),
            kind=str(data.get("kind") or ""),
        )


@dataclass(frozen=True, kw_only=True)
class JobRelease:
    """One claim handed back with ``release`` (a worker stopping, say), in a job's
    ``releases`` history: it did not count against ``max_attempts``."""

    attempt: int  # the number the released claim had
    at: datetime | None
    worker_id: str | None
    delay_ms: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRelease:
        worker_id = data.get("worker_id")
        return cls(
            attempt=_int(data.get("attempt")),
            at=parse_time(data.get("at")),
            worker_id=worker_id if isinstance(worker_id, str) else None,
            delay_ms=_int(data.get("delay_ms")),
        )


_JOB_FIELDS = frozenset(
    "id queue type payload priority status attempt max_attempts idempotency_key created_at "
    "visible_at locked_until worker_id completed_at last_error errors releases result".split()
)


@dataclass(frozen=True, kw_only=True)
class Job:
    """A job as the service last described it.

    A worker handler receives one of these. ``id`` is stable across retries, so it is the
    idempotency key to hand to downstream systems (payment APIs, e-mail providers): a job
    runs at least once, and ``id`` lets the side effect happen at most once.
    """

    id: str
    queue: str
    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    status: str = JobStatus.PENDING
    attempt: int = 0
    max_attempts: int = 0
    idempotency_key: str | None = None
    created_at: datetime | None = None
    visible_at: datetime | None = None
    locked_until: datetime | None = None
    worker_id: str | None = None
    completed_at: datetime | None = None
    last_error: str | None = None
    errors: list[JobError] = field(default_factory=list)
    # Empty from a service that predates release, as for a job never released.
    releases: list[JobRelease] = field(default_factory=list)
    result: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """True once the job is ``completed``, ``dead`` or ``cancelled``."""
        return self.status in FINISHED_STATUSES

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        # A worker decodes one of these per job it runs, so this is written for speed: the
        # fields go straight into the instance's __dict__ (what the frozen __init__ does one
        # object.__setattr__ at a time), and the common cases (ints that are ints, a null
        # time, no errors, no unknown fields) skip the helpers. Same values as through cls().
        get = data.get
        payload = get("payload")
        priority = get("priority")
        attempt = get("attempt")
        max_attempts = get("max_attempts")
        created_at = get("created_at")
        visible_at = get("visible_at")
        locked_until = get("locked_until")
        completed_at = get("completed_at")
        errors = get("errors")
        releases = get("releases")
        job = _new(cls)
        job.__dict__.update(
            id=str(data["id"]),
            queue=str(get("queue") or ""),
            type=str(get("type") or ""),
            payload=payload if isinstance(payload, dict) else {},
            priority=priority if type(priority) is int else _int(priority),
            status=str(get("status") or ""),
            attempt=attempt if type(attempt) is int else _int(attempt),
            max_attempts=max_attempts if type(max_attempts) is int else _int(max_attempts),
            idempotency_key=get("idempotency_key"),
            created_at=None if created_at is None else parse_time(created_at),
            visible_at=None if visible_at is None else parse_time(visible_at),
            locked_until=None if locked_until is None else parse_time(locked_until),
            worker_id=get("worker_id"),
            completed_at=None if completed_at is None else parse_time(completed_at),
            last_error=get("last_error"),
            errors=[JobError.from_json(e) for e in errors if isinstance(e, dict)] if errors else [],
            releases=([JobRelease.from_json(r) for r in _list(releases) if isinstance(r, dict)]
                      if releases else []),
            result=get("result"),
            extra={} if data.keys() <= _JOB_FIELDS else _extra(data, _JOB_FIELDS),
        )
        return job


@dataclass(frozen=True, kw_only=True)
class JobPage:
    """One page of ``list_jobs``; pass ``next_cursor`` back for the next (None: last page)."""

    jobs: list[Job]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobPage:
        cursor = data.get("next_cursor")
        return cls(
            jobs=[Job.from_json(j) for j in data.get("jobs") or []],
            next_cursor=str(cursor) if cursor is not None else None,
        )


@dataclass(frozen=True, kw_only=True)
class Lease:
    """One claim of one job. ``lease_id`` is the fencing token for heartbeat, ack and fail."""

    lease_id: str
    locked_until: datetime | None
    job: Job

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lease:
        lease = _new(cls)  # as Job.from_json: one per job a worker runs
        lease.__dict__.update(
            lease_id=str(data["lease_id"]),
            locked_until=parse_time(data.get("locked_until")),
            job=Job.from_json(data["job"]),
        )
        return lease


@dataclass(frozen=True, kw_only=True)
class AckResult:
    """One entry of a batch ack: ``ok``, or ``code`` says why not (``lease_lost``,
    ``not_found``). ``already_completed`` (with ``lease_lost``): this very lease completed the
    job and its result is stored, as when an ack is retried after its answer was lost."""

    lease_id: str
    ok: bool
    code: str | None = None
    already_completed: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AckResult:
        result = _new(cls)  # as Job.from_json: a worker decodes one per job
        get = data.get
        result.__dict__.update(
            lease_id=str(get("lease_id")),
            ok=get("ok") is True,
            code=get("code"),
            already_completed=get("already_completed") is True,
        )
        return result


@dataclass(frozen=True, kw_only=True)
class ReleaseResult:
    """One entry of a batch release: ``ok``, or ``code`` says why not (``lease_lost``,
    ``not_found``)."""

    lease_id: str
    ok: bool
    code: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseResult:
        return cls(lease_id=str(data.get("lease_id")), ok=data.get("ok") is True, code=data.get("code"))


_SETTINGS_FIELDS = frozenset(
    "max_depth paused lease_ms max_attempts backoff_base_ms backoff_max_ms max_lease_expiries "
    "aging_ms max_running retention_ms dead_retention_ms soft_depth soft_lag_ms".split()
)
# Settings that are JSON objects (rate limits), kept as the service sends them.
_SETTINGS_OBJECTS = frozenset({"rate_limit", "enqueue_rate"})


@dataclass(frozen=True, kw_only=True)
class QueueSettings:
    """A queue's settings; None means "no limit" / "off" where the contract says so."""

    max_depth: int | None = None
    paused: bool = False
    lease_ms: int | None = None
    max_attempts: int | None = None
    backoff_base_ms: int | None = None
    backoff_max_ms: int | None = None
    max_lease_expiries: int | None = None
    aging_ms: int | None = None
    max_running: int | None = None
    retention_ms: int | None = None  # completed and cancelled jobs are deleted this long after
    dead_retention_ms: int | None = None  # dead jobs are deleted this long after they died
    # Rate limits: {"jobs", "per_ms", "key"} (the pace of claims) and {"jobs", "per_ms",
    # "burst"} (producers' token bucket); None: none.
    rate_limit: dict[str, Any] | None = None
    enqueue_rate: dict[str, Any] | None = None
    soft_depth: int | None = None  # adaptive backpressure's thresholds; None: off
    soft_lag_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueSettings:
        ints = {name: _opt_int(data.get(name)) for name in _SETTINGS_FIELDS - {"paused"}}
        objects = {name: dict(data[name]) if isinstance(data.get(name), dict) else None
                   for name in _SETTINGS_OBJECTS}
        return cls(paused=data.get("paused") is True,
                   extra=_extra(data, _SETTINGS_FIELDS | _SETTINGS_OBJECTS), **ints, **objects)


_COUNT_FIELDS = frozenset("pending running failed completed dead cancelled".split())


@dataclass(frozen=True, kw_only=True)
class QueueCounts:
    pending: int = 0
    running: int = 0
    failed: int = 0
    completed: int = 0
    dead: int = 0
    cancelled: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueCounts:
        return cls(
            extra=_extra(data, _COUNT_FIELDS),
            **{name: _int(data.get(name)) for name in _COUNT_FIELDS},
        )


_QUEUE_FIELDS = frozenset(
    "name settings counts waiting_by_type oldest_waiting_ms rate_limit_use".split())


@dataclass(frozen=True, kw_only=True)
class Queue:
    """A queue's settings and live counts (``GET /v1/queues/{name}``)."""

    name: str
    settings: QueueSettings
    counts: QueueCounts
    waiting_by_type: dict[str, int] = field(default_factory=dict)
    oldest_waiting_ms: int | None = None
    # The rate_limit's current use: {"jobs", "keys", "keys_at_limit", "free_in_ms"}; None
    # without a rate_limit.
    rate_limit_use: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Queue:
        return cls(
            name=str(data.get("name") or ""),
            settings=QueueSettings.from_json(data.get("settings") or {}),
            counts=QueueCounts.from_json(data.get("counts") or {}),
            waiting_by_type=_int_map(data.get("waiting_by_type")),
            oldest_waiting_ms=_opt_int(data.get("oldest_waiting_ms")),
            rate_limit_use=(dict(data["rate_limit_use"])
                            if isinstance(data.get("rate_limit_use"), dict) else None),
            extra=_extra(data, _QUEUE_FIELDS),
        )


@dataclass(frozen=True, kw_only=True)
class QueuePage:
    """One page of ``list_queues``; pass ``next_cursor`` back for the next (None: last page)."""

    queues: list[Queue]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueuePage:
        cursor = data.get("next_cursor")
        return cls(
            queues=[Queue.from_json(q) for q in data.get("queues") or []],
            next_cursor=str(cursor) if cursor is not None else None,
        )


_SCHEDULE_JOB_FIELDS = frozenset("queue type payload priority max_attempts".split())


@dataclass(frozen=True, kw_only=True)
class ScheduleJob:
    """The job a schedule enqueues at each fire time."""

    type: str
    queue: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int | None = None
    max_attempts: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScheduleJob:
        payload = data.get("payload")
        return cls(
            type=str(data.get("type") or ""),
            queue=data.get("queue"),
            payload=payload if isinstance(payload, dict) else {},
            priority=_opt_int(data.get("priority")),
            max_attempts=_opt_int(data.get("max_attempts")),
            extra=_extra(data, _SCHEDULE_JOB_FIELDS),
        )


_SCHEDULE_FIELDS = frozenset(
    "name cron timezone misfire enabled job next_fire_at last_fired_at last_job_id".split()
)


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A recurring job. ``next_fire_at``, ``last_fired_at`` and ``last_job_id`` are read-only."""

    name: str
    cron: str
    job: ScheduleJob
    timezone: str = "UTC"
    misfire: str | None = None  # "skip" or "run_once"
    enabled: bool = True
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    last_job_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str | None = None) -> Schedule:
        last_job_id = data.get("last_job_id")
        return cls(
            # The contract does not say the body repeats the name; the path always has it.
            name=str(data.get("name") or name or ""),
            cron=str(data.get("cron") or ""),
            job=ScheduleJob.from_json(data.get("job") or {}),
            timezone=str(data.get("timezone") or "UTC"),
            misfire=data.get("misfire"),
            enabled=data.get("enabled") is not False,
            next_fire_at=parse_time(data.get("next_fire_at")),
            last_fired_at=parse_time(data.get("last_fired_at")),
            last_job_id=str(last_job_id) if last_job_id is not None else None,
            extra=_extra(data, _SCHEDULE_FIELDS),
        )


_SUBSCRIPTION_FIELDS = frozenset("topic queue type created_at".split())


@dataclass(frozen=True, kw_only=True)
class Subscription:
    """A queue subscribed to a topic: each publish enqueues one job in it, of ``type`` when
    set (else of the published type)."""

    topic: str
    queue: str
    type: str | None = None
    created_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any], topic: str = "") -> Subscription:
        type_ = data.get("type")
        return cls(
            topic=str(data.get("topic") or topic),
            queue=str(data.get("queue") or ""),
            type=str(type_) if type_ is not None else None,
            created_at=parse_time(data.get("created_at")),
            extra=_extra(data, _SUBSCRIPTION_FIELDS),
        )


@dataclass(frozen=True, kw_only=True)
class Topic:
    """A topic and its subscriptions, by queue name."""

    name: str
    subscriptions: list[Subscription] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str = "") -> Topic:
        topic = str(data.get("name") or name)
        subs = data.get("subscriptions")
        return cls(
            name=topic,
            subscriptions=[
                Subscription.from_json(s, topic) for s in (subs if isinstance(subs, list) else [])
            ],
        )


@dataclass(frozen=True, kw_only=True)
class NewJob:
    """One job for ``enqueue_many``; the fields mean what ``enqueue``'s arguments mean."""

    type: str
    payload: dict[str, Any] | None = None
    queue: str | None = None
    priority: int | None = None
    delay: float | timedelta | None = None  # seconds, or a timedelta
    run_at: datetime | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
