"""Request and response bodies. Requests refuse unknown fields; responses document the shapes
that ``jobq.api.render`` writes (handlers return bytes, not these models, on the hot path)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic import Strict as StrictTypes

from jobq.domain import jobs as d
from jobq.domain import rates
from jobq.domain.queues import DAY_MS
from jobq.domain.queues import QUEUE_DEFAULTS as DEFAULTS
from jobq.domain.schedules import parse_cron, parse_timezone
from jobq.domain.workers import Beat, WorkerState

MAX_INT32 = 2**31 - 1
MAX_UINT32 = 2**32 - 1
TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000

# One rule for every name a client gives: queues, schedules and topics.
_NAME = StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_NAME_TEXT = "1 to 128 of letters, digits and _ . : - (starting with a letter or digit)"
QueueName = Annotated[str, _NAME, Field(description=_NAME_TEXT, examples=["default"])]
Text255 = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00]*$")]
SearchText = Annotated[str, StringConstraints(min_length=1, max_length=d.MAX_SEARCH_LENGTH,
                                              pattern=r"^[^\x00]*$")]


def _not_reserved(key: str) -> str:
    if key.startswith(d.RESERVED_KEY_PREFIXES):
        raise ValueError("keys starting with 'topic:' or 'schedule:' are reserved for the jobs "
                         "of topic publishes and schedules")
    return key


# A producer's own idempotency key: the prefixes of the keys the service gives the jobs of
# publishes and schedule fires are refused (domain/jobs.py, RESERVED_KEY_PREFIXES). Here, not
# in core, which enqueues those jobs with those keys.
ProducerKey = Annotated[Text255, AfterValidator(_not_reserved)]
Priority = Annotated[int, Field(ge=-MAX_INT32, le=MAX_INT32, description="higher runs first")]
LeaseMs = Annotated[int, Field(ge=100, le=DAY_MS, description="lease length, 100 ms to 1 day")]

# How deeply a payload or result may nest. The request parser stops near 1000 levels, but a
# value stored just under that is read back (psycopg's json.loads) further down the stack, in
# a claim or a GET, where it would overflow: one such job made every claim on its queue fail.
# 128 levels is far beyond real payloads and leaves the whole path a wide margin.
MAX_JSON_DEPTH = 128


def _not_too_deep(value: Any) -> Any:
    # Level by level rather than recursively, so that the check cannot overflow the stack it
    # protects; each container is visited once.
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        below: list[Any] = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, (dict, list)):
                    below.append(child)
        level = below
    return value


Payload = Annotated[dict[str, Any], AfterValidator(_not_too_deep)]
JsonResult = Annotated[Any, AfterValidator(_not_too_deep)]

# RFC 3339's date-time (section 5.6), offset required. Checked before pydantic parses the
# text: its lax parser would also take a bare number ("123") as Unix time.
_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                      r"([Zz]|[+-][0-9]{2}:[0-9]{2})")


def _rfc3339_text(value: Any) -> Any:
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        raise ValueError("must be an RFC 3339 date-time string with an offset, "
                         "such as 2030-01-01T00:00:00Z")
    return value


def _in_utc_years(value: datetime) -> datetime:
    # 9999-12-31T23:59:59-14:00 is year 10000 in UTC. PostgreSQL would store it, and every
    # later read of the row (a GET, a listing, each claim on its queue) would fail, as no
    # Python datetime can hold it. Refused here, before anything is written.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("must fall within years 1 to 9999 in UTC") from None


# A time in a request: RFC 3339 text (JSON has no time type), kept to what every reader can
# read back, in UTC. Lax on its own inside the strict models, where a datetime would have to
# be a Python datetime already.
Timestamp = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339_text),
    StrictTypes(False),
    AfterValidator(_in_utc_years),
]


class Strict(BaseModel):
    """A request body: unknown fields are refused, and so is every value of the wrong JSON
    type (no coercion: "1" is not a number, 0 and "yes" are not booleans, 1.0 is not an
    integer). Both ways a request body is validated (FastAPI's body parameters and
    jobq.api.bodies) are Python mode, on the value the JSON parser produced, so strict mode
    judges the same values there."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _JobFields(Strict):
    """A job body's fields but its queue and key: POST /v1/jobs's and a topic publish's
    (whose subscriptions name the queues)."""

    type: Text255 = Field(examples=["email.welcome"])
    payload: Payload = Field(default_factory=dict)
    priority: Priority = 0
    delay_ms: Annotated[int, Field(ge=0, le=TEN_YEARS_MS)] | None = Field(
        default=None, description="at most 10 years; longer delays are refused (422)")
    run_at: Timestamp | None = Field(
        default=None, description="RFC 3339 with an offset, within years 1 to 9999 in UTC")
    max_attempts: Annotated[int, Field(ge=1, le=10_000)] | None = Field(
        default=None, description="default: the queue's max_attempts")

    @model_validator(mode="after")
    def _one_schedule(self) -> _JobFields:
        if self.delay_ms is not None and self.run_at is not None:
            raise ValueError("give one of delay_ms and run_at, not both")
        return self


class JobCreate(_JobFields):
    queue: QueueName = d.DEFAULT_QUEUE
    idempotency_key: ProducerKey | None = Field(
        default=None, description="may not start with `topic:` or `schedule:`, the keys of "
        "the jobs of topic publishes and schedules (422)")

    def to_domain(self) -> d.NewJob:
        return d.NewJob(
            type=self.type, payload=self.payload, queue=self.queue, priority=self.priority,
            delay_ms=self.delay_ms, run_at=self.run_at, max_attempts=self.max_attempts,
            idempotency_key=self.idempotency_key,
        )


class JobBatchCreate(Strict):
    jobs: Annotated[list[JobCreate], Field(min_length=1, max_length=d.MAX_BATCH)]


class JobError(BaseModel):
    attempt: int
    at: datetime
    error: str
    kind: Literal["failed", "lease_expired"]


class JobRelease(BaseModel):
    attempt: int = Field(description="the number the released claim had")
    at: datetime
    worker_id: str | None = Field(description="the worker that held the released claim")
    delay_ms: int = Field(description="the release's `delay_ms`")


class JobPublic(BaseModel):
    id: str
    queue: str
    type: str
    payload: dict[str, Any]
    priority: int
    status: d.JobStatus
    attempt: int
    max_attempts: int
    idempotency_key: str | None
    created_at: datetime
    visible_at: datetime
    locked_until: datetime | None
    worker_id: str | None
    completed_at: datetime | None = Field(description="when the job reached a final status")
    last_error: str | None = Field(
        description="the latest failure of a job not completed (null once it completes; "
                    "`errors` keeps the history)")
    errors: list[JobError]
    result: Any = None
    releases: list[JobRelease] = Field(
        description="An extension of the contract: the claims given back by `POST "
                    "/v1/leases/{lease_id}/release`, oldest first, the 20 most recent (`[]` for "
                    "a job never released). A released claim is taken off `attempt` (so "
                    "`attempt` counts the claims that were not released) and is neither an "
                    "error nor a lease expiry")


class JobBatchPublic(BaseModel):
    jobs: list[JobPublic]


class JobPage(BaseModel):
    jobs: list[JobPublic]
    next_cursor: str | None


class ClaimBody(Strict):
    worker_id: Text255
    queues: Annotated[list[QueueName], Field(min_length=1, max_length=100)]
    types: Annotated[list[Text255], Field(min_length=1, max_length=1000)] | None = None
    limit: Annotated[int, Field(ge=1, le=d.MAX_BATCH)] = 1
    lease_ms: LeaseMs | None = None
    wait_ms: Annotated[int, Field(ge=0, le=d.MAX_WAIT_MS)] = 0

    def to_domain(self) -> d.ClaimRequest:
        return d.ClaimRequest(
            worker_id=self.worker_id, queues=list(dict.fromkeys(self.queues)),
            types=self.types, limit=self.limit, lease_ms=self.lease_ms, wait_ms=self.wait_ms,
        )


class LeasePublic(BaseModel):
    lease_id: str
    locked_until: datetime
    job: JobPublic


class LeaseList(BaseModel):
    leases: list[LeasePublic]


class Health(BaseModel):
    """`GET /healthz`: the process is up (it reads nothing else)."""

    status: Literal["ok"]


class Ready(BaseModel):
    """`GET /readyz`: the database answers and its schema is the one this code needs."""

    model_config = ConfigDict(populate_by_name=True)

    status: Literal["ready"]
    # "schema" on the wire; another name in Python, where BaseModel has a ``schema`` method.
    schema_revision: str = Field(alias="schema", description="the database's migration "
                                 "revision (alembic's), the one this code needs")


class HeartbeatBody(Strict):
    extend_ms: LeaseMs | None = None


class HeartbeatPublic(BaseModel):
    locked_until: datetime


class AckBody(Strict):
    result: JsonResult = None


class AckItem(Strict):
    lease_id: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    result: JsonResult = None


class AckManyBody(Strict):
    acks: Annotated[list[AckItem], Field(min_length=1, max_length=d.MAX_BATCH)]


class AckResult(BaseModel):
    lease_id: str
    ok: bool
    code: Literal["lease_lost", "not_found"] | None = None
    already_completed: bool | None = Field(
        default=None, description="with `lease_lost` only, and only when true: this lease "
        "completed the job and its result is stored (an ack retried after its answer was lost)")


class AckManyPublic(BaseModel):
    results: list[AckResult]


ReleaseDelayMs = Annotated[int, Field(
    ge=0, le=TEN_YEARS_MS, description="when the job becomes claimable again, in ms from now "
    "(0: at once); at most 10 years, as an enqueue's `delay_ms`")]


class ReleaseBody(Strict):
    delay_ms: ReleaseDelayMs = 0


class ReleaseItem(Strict):
    lease_id: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    delay_ms: ReleaseDelayMs = 0


class ReleaseManyBody(Strict):
    releases: Annotated[list[ReleaseItem], Field(min_length=1, max_length=d.MAX_BATCH)]


class FailBody(Strict):
    # No NUL: PostgreSQL's text cannot hold it; refused here, the error's loc names the field.
    error: Annotated[str, StringConstraints(max_length=65_536, pattern=r"^[^\x00]*$")]
    retry: bool = True
    retry_in_ms: Annotated[int, Field(ge=0, le=TEN_YEARS_MS)] | None = None


def _days(ms: int) -> str:
    return f"{ms / DAY_MS:g} days"


# ------------------------------------------------------------------------- rate limits

_JOBS = Annotated[int, Field(ge=1, le=rates.MAX_JOBS)]
_PER_MS = Annotated[int, Field(ge=1, le=rates.MAX_PER_MS, description="the window, in ms")]


def _pace_key(key: str) -> str:
    if not rates.valid_key(key):
        raise ValueError("key must be \"type\" or \"payload.<field>\" (a top-level field of "
                         "the payload)")
    return key


class RateLimit(Strict):
    """A queue's pace: at most `jobs` jobs handed out by claims in any window of `per_ms`
    ms, across every worker and replica (a sliding window: see the guide)."""

    jobs: _JOBS
    per_ms: _PER_MS
    key: Annotated[str, StringConstraints(min_length=1, max_length=208),
                   AfterValidator(_pace_key)] | None = Field(
        default=None, description="a separate allowance per value of this: `type` (the job "
        "type) or `payload.<field>` (a top-level payload field; jobs without it share one); "
        "null: one allowance for the queue")


class EnqueueRate(Strict):
    """A token bucket of enqueues: `burst` jobs at once, refilled at `jobs` per `per_ms`
    ms; beyond it `429` with the wait in `Retry-After` and `retry_after_ms`."""

    jobs: _JOBS
    per_ms: _PER_MS
    burst: _JOBS | None = Field(default=None, description="the bucket's size (default `jobs`)")

    def to_domain(self) -> rates.Bucket:
        return rates.Bucket(self.jobs, self.per_ms, self.burst or self.jobs)


class RateLimitPublic(BaseModel):
    jobs: int
    per_ms: int
    key: str | None = None


class EnqueueRatePublic(BaseModel):
    jobs: int
    per_ms: int
    burst: int


class RateLimitUse(BaseModel):
    """What the queue's `rate_limit` is using now."""

    jobs: int = Field(description="jobs handed out in the last `per_ms` (for a keyed limit: "
                                  "the busiest key's)")
    keys: int = Field(description="keys with a job handed out in that window (1 or 0 without a key)")
    keys_at_limit: int = Field(description="keys whose window is full")
    free_in_ms: int | None = Field(description="when a full window has room again; null: none full")


class QueueSettings(BaseModel):
    max_depth: int | None
    paused: bool
    lease_ms: int
    max_attempts: int
    backoff_base_ms: int
    backoff_max_ms: int
    max_lease_expiries: int
    aging_ms: int | None
    max_running: int | None
    retention_ms: int = Field(description="completed and cancelled jobs are deleted this long "
                                          f"after they finished (default {_days(DEFAULTS.retention_ms)})")
    dead_retention_ms: int = Field(description="dead jobs are deleted this long after they "
                                               f"died (default {_days(DEFAULTS.dead_retention_ms)})")
    rate_limit: RateLimitPublic | None = Field(
        default=None, description="the pace of claims: at most `jobs` handed out in any "
        "`per_ms` window (per `key` value); null: none")
    enqueue_rate: EnqueueRatePublic | None = Field(
        default=None, description="producers' token bucket for this queue; null: none")
    soft_depth: int | None = Field(default=None, description="waiting jobs past which a growing "
                                   "share of enqueues is refused (`queue_overloaded`); null: off")
    soft_lag_ms: int | None = Field(default=None, description="oldest waiting job's lag past "
                                    "which the same happens; null: off")


class QueueSettingsPatch(Strict):
    max_depth: Annotated[int, Field(ge=0, le=2**62)] | None = None
    paused: bool | None = None
    lease_ms: LeaseMs | None = None
    max_attempts: Annotated[int, Field(ge=1, le=10_000)] | None = None
    backoff_base_ms: Annotated[int, Field(ge=0, le=TEN_YEARS_MS)] | None = None
    backoff_max_ms: Annotated[int, Field(ge=0, le=TEN_YEARS_MS)] | None = None
    max_lease_expiries: Annotated[int, Field(ge=1, le=10_000)] | None = None
    aging_ms: Annotated[int, Field(ge=1, le=TEN_YEARS_MS)] | None = None
    max_running: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    retention_ms: Annotated[int, Field(ge=0, le=TEN_YEARS_MS)] | None = None
    dead_retention_ms: Annotated[int, Field(ge=0, le=TEN_YEARS_MS)] | None = None
    rate_limit: RateLimit | None = None
    enqueue_rate: EnqueueRate | None = None
    soft_depth: Annotated[int, Field(ge=1, le=2**62)] | None = None
    soft_lag_ms: Annotated[int, Field(ge=1, le=TEN_YEARS_MS)] | None = None

    # Settings that may be null mean "no limit"/"off" there; the others may not be null.
    NULLABLE: ClassVar[frozenset[str]] = frozenset({
        "max_depth", "aging_ms", "max_running", "rate_limit", "enqueue_rate", "soft_depth",
        "soft_lag_ms"})

    # A field validator, not a model one, so that the error's loc names the setting. It runs
    # only for the settings given, which is when null means "set to null".
    @field_validator("paused", "lease_ms", "max_attempts", "backoff_base_ms", "backoff_max_ms",
                     "max_lease_expiries", "retention_ms", "dead_retention_ms", mode="before")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            raise ValueError(f"{info.field_name} cannot be null")
        return value

    def changes(self) -> dict[str, Any]:
        """The settings given, as stored: the rate objects as JSON objects, every field
        written (an enqueue rate's burst defaults to its jobs)."""
        out: dict[str, Any] = {}
        for k in self.model_fields_set:
            value = getattr(self, k)
            if isinstance(value, EnqueueRate):
                value = value.to_domain().as_json()
            elif isinstance(value, RateLimit):
                value = rates.Pace(value.jobs, value.per_ms, value.key).as_json()
            out[k] = value
        return out


class QueuePublic(BaseModel):
    name: str
    settings: QueueSettings
    counts: dict[str, int]
    waiting_by_type: dict[str, int]
    oldest_waiting_ms: int | None
    rate_limit_use: RateLimitUse | None = Field(
        default=None, description="the `rate_limit`'s current use; null without one")


class QueueList(BaseModel):
    queues: list[QueuePublic] = Field(description="one page, by name")
    next_cursor: str | None = Field(
        description="pass as `cursor` for the next page; null on the last page")


class DeadFilter(Strict):
    queue: QueueName | None = None
    type: Text255 | None = None
    limit: Annotated[int, Field(ge=1)] | None = Field(default=None, description="default: all")


class Replayed(BaseModel):
    replayed: int


class Purged(BaseModel):
    purged: int


def _queue_pattern(value: str) -> str:
    from jobq.domain.access import QueuePattern

    return QueuePattern(value).text


QueuePatternText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=1000),
    AfterValidator(_queue_pattern),
    Field(description="shell-style globs on the queue name, comma-separated: `*` any run of "
          "characters, `?` one, `[a-z]` and `[!a-z]` one of a set; `*` is every queue",
          examples=["tenant-a.*"]),
]


class TokenCreate(Strict):
    role: Literal["producer", "worker", "admin"]
    queues: QueuePatternText = "*"
    name: Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00]*$")] | None = None
    enqueue_rate: EnqueueRate | None = Field(
        default=None, description="the token's own token bucket of enqueues, on top of the "
        "queues' (`429 token_rate_limited` beyond it); null: none")


class TokenPatch(Strict):
    enqueue_rate: EnqueueRate | None = Field(description="the token's enqueue rate; null: none")


class TokenPublic(BaseModel):
    id: str
    name: str | None
    role: Literal["producer", "worker", "admin"]
    queues: str
    created_at: datetime
    revoked_at: datetime | None
    enqueue_rate: EnqueueRatePublic | None = None


class TokenCreated(TokenPublic):
    token: str = Field(description="the secret: shown this once, stored only as a hash")


class TokenList(BaseModel):
    tokens: list[TokenPublic]


# ------------------------------------------------------------------------------ schedules

ScheduleName = Annotated[str, _NAME, Field(description=_NAME_TEXT, examples=["nightly-report"])]


def _cron_text(value: str) -> str:
    return parse_cron(value).expr  # CronError is a ValueError: a 422 at body.cron


def _timezone_text(value: str) -> str:
    parse_timezone(value)
    return value


CronText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200),
    AfterValidator(_cron_text),
    Field(description="5 fields (minute hour day-of-month month day-of-week), or 6 with "
          "seconds first; `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly` too",
          examples=["0 2 * * *"]),
]
TimezoneText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64),
    AfterValidator(_timezone_text),
    Field(description="an IANA time zone; the cron fields are read in it", examples=["Europe/Berlin"]),
]
MisfireText = Literal["skip", "run_once"]
MaxAttempts = Annotated[int, Field(ge=1, le=10_000)]


class ScheduleJobBody(Strict):
    type: Text255 = Field(examples=["report.nightly"])
    queue: QueueName = d.DEFAULT_QUEUE
    payload: Payload = Field(default_factory=dict)
    priority: Priority = 0
    max_attempts: MaxAttempts | None = Field(default=None, description="default: the queue's")


class SchedulePut(Strict):
    cron: CronText
    timezone: TimezoneText = "UTC"
    misfire: MisfireText = Field(
        default="run_once",
        description="after downtime: `skip` resumes at the next future fire time; `run_once` "
                    "enqueues one catch-up job for any number of missed fire times")
    enabled: bool = True
    job: ScheduleJobBody


def _not_null(value: Any, info: ValidationInfo) -> Any:
    if value is None:
        raise ValueError(f"{info.field_name} cannot be null")
    return value


class ScheduleJobPatch(Strict):
    """Merge-patch: a field given as null goes back to its default (`queue` default,
    `payload` {}, `priority` 0, `max_attempts` the queue's)."""

    type: Text255 | None = None
    queue: QueueName | None = None
    payload: Payload | None = None
    priority: Priority | None = None
    max_attempts: MaxAttempts | None = None

    _type_not_null = field_validator("type", mode="before")(_not_null)

    def changes(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.model_fields_set}


class SchedulePatch(Strict):
    cron: CronText | None = None
    timezone: TimezoneText | None = None
    misfire: MisfireText | None = None
    enabled: bool | None = None
    job: ScheduleJobPatch | None = None

    _fields_not_null = field_validator("cron", "timezone", "misfire", "enabled", "job",
                                       mode="before")(_not_null)

    def changes(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self.model_fields_set if k != "job"}
        if self.job is not None:
            out["job"] = self.job.changes()
        return out


class ScheduleJobPublic(BaseModel):
    queue: str
    type: str
    payload: dict[str, Any]
    priority: int
    max_attempts: int | None = Field(description="null: the queue's max_attempts")


class SchedulePublic(BaseModel):
    name: str
    cron: str = Field(description="as given, fields separated by one space")
    timezone: str
    misfire: MisfireText
    enabled: bool
    job: ScheduleJobPublic
    next_fire_at: datetime | None = Field(description="null while disabled")
    pending_fire_at: datetime | None = Field(
        description="a fire that met a full queue (max_depth), tried again every second")
    last_fired_at: datetime | None = Field(description="the fire time of the last job enqueued")
    last_job_id: str | None = Field(description="the job the last fire enqueued")
    created_at: datetime
    updated_at: datetime


class ScheduleList(BaseModel):
    schedules: list[SchedulePublic]


# Fan-out topics (routes/topics.py). A topic's name obeys a queue name's rules.
TopicName = Annotated[str, _NAME, Field(description=_NAME_TEXT, examples=["orders.placed"])]


class SubscriptionPut(Strict):
    type: Text255 | None = Field(
        default=None, description="the job type this queue's jobs get in place of the "
        "published one; null or absent: the published type")


class TopicPublish(_JobFields):
    """``JobCreate`` without ``queue``: the topic's subscriptions name the queues.
    tests/test_topics.py holds the two to the same fields."""

    idempotency_key: Text255 | None = Field(
        default=None, description="each job gets `topic:{topic}/{key}`, unique in its queue")

    def to_domain(self) -> d.NewJob:
        # queue: filled in per subscription (core/topics.py)
        return d.NewJob(
            type=self.type, payload=self.payload, priority=self.priority,
            delay_ms=self.delay_ms, run_at=self.run_at, max_attempts=self.max_attempts,
            idempotency_key=self.idempotency_key,
        )


class TopicSubscriptionPublic(BaseModel):
    queue: str
    type: str | None = Field(description="null: jobs keep the published type")
    created_at: datetime


class SubscriptionPublic(TopicSubscriptionPublic):
    topic: str


class TopicPublic(BaseModel):
    name: str
    subscriptions: list[TopicSubscriptionPublic] = Field(description="by queue name")


class TopicList(BaseModel):
    topics: list[TopicPublic]


class PublishPublic(BaseModel):
    topic: str
    jobs: list[JobPublic] = Field(description="one per subscribed queue, by queue name")

class WorkerSeen(BaseModel):
    worker_id: str = Field(description="as the worker sent it when claiming, or beating")
    running: int = Field(description="jobs it holds leases on now")
    queues: list[str] = Field(description="queues it said it serves, and those of the jobs it "
                                          "runs or finished in the window")
    last_seen_at: datetime = Field(description="its latest beat, its latest claim of a job still "
                                               "running, or its latest finished job: the latest")
    host: str | None = Field(description="what it said in its beats; null for a worker known "
                                         "only from its jobs (as the fields below)")
    pid: int | None
    concurrency: int | None = Field(description="how many jobs it runs at once")
    in_flight: int | None = Field(description="jobs it held at its last beat, running or "
                                              "prefetched")
    started_at: datetime | None
    state: WorkerState | None


class WorkerList(BaseModel):
    window_s: int
    workers: list[WorkerSeen]


# The states as JSON text: an enum of strict mode would take only WorkerState instances.
WorkerStateText = Literal["running", "stopping", "stopped"]


class WorkerBeatBody(Strict):
    """What a worker process says of itself; every field optional, and one left out keeps
    what the worker said in an earlier beat."""

    host: Text255 | None = None
    pid: Annotated[int, Field(ge=0, le=MAX_UINT32)] | None = None
    concurrency: Annotated[int, Field(ge=1, le=MAX_INT32, description="jobs it runs at once")] | None = None
    queues: Annotated[list[QueueName], Field(max_length=100)] | None = Field(
        default=None, description="the queues it claims from")
    in_flight: Annotated[int, Field(ge=0, le=MAX_INT32, description="jobs it holds now, running "
                                                                     "or prefetched")] | None = None
    started_at: Timestamp | None = None
    state: WorkerStateText | None = Field(default=None, description="`stopping` once told to stop, "
                                                                     "`stopped` at exit")

    def to_domain(self, worker_id: str) -> Beat:
        return Beat(worker_id=worker_id, host=self.host, pid=self.pid, concurrency=self.concurrency,
                    queues=None if self.queues is None else list(dict.fromkeys(self.queues)),
                    in_flight=self.in_flight, started_at=self.started_at,
                    state=None if self.state is None else WorkerState(self.state))


class WorkerBeatPublic(BaseModel):
    """The worker's record as its beats left it: what `GET /v1/workers` adds the jobs to."""

    worker_id: str
    host: str | None
    pid: int | None
    concurrency: int | None
    queues: list[str] = Field(description="as it said, by name; [] if it never said")
    in_flight: int | None
    started_at: datetime | None
    state: WorkerState | None
    last_seen_at: datetime = Field(description="now: this beat")


class QueueThroughput(BaseModel):
    name: str
    completed: list[int] = Field(description="jobs completed per minute, oldest first; the "
                                             "last entry is the minute under way")
    dead: list[int] = Field(description="jobs that died (out of attempts) per minute, as `completed`")


class Throughput(BaseModel):
    minutes: int
    queues: list[QueueThroughput]
