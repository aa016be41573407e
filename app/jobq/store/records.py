"""Rows to typed records: the one place that reads a row by column name. Core gets the
domain's Job, or the records below, and never a row's columns (tests/test_rows_stay_in_store.py).

Jobs are on the hot path (a listing of 100 jobs builds 100 of them), so their slots are set
directly: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
which made a Job cost four times the row's own dict. The other records are NamedTuples,
built as cheaply as a tuple. Nothing is validated: the row is the database's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from jobq.domain.jobs import Job, JobStatus, NewJob
from jobq.domain.leases import format_lease_id
from jobq.store.db import Row, dumps_json

_new = object.__new__


def _setter(cls: type, slot: str) -> Callable[[Any, Any], None]:
    return getattr(cls, slot).__set__  # type: ignore[no-any-return]


_STATUS = {s.value: s for s in JobStatus}

_id = _setter(Job, "id")
_queue = _setter(Job, "queue")
_type = _setter(Job, "type")
_payload = _setter(Job, "payload")
_priority = _setter(Job, "priority")
_status = _setter(Job, "status")
_attempt = _setter(Job, "attempt")
_max_attempts = _setter(Job, "max_attempts")
_idempotency_key = _setter(Job, "idempotency_key")
_created_at = _setter(Job, "created_at")
_visible_at = _setter(Job, "visible_at")
_locked_until = _setter(Job, "locked_until")
_worker_id = _setter(Job, "worker_id")
_completed_at = _setter(Job, "completed_at")
_last_error = _setter(Job, "last_error")
_errors = _setter(Job, "errors")
_result = _setter(Job, "result")
_releases = _setter(Job, "releases")


def job(row: Row) -> Job:
    """The Job of a row with all of the jobs table's columns (``SELECT *``, ``RETURNING *``)."""
    j = _new(Job)
    _id(j, row["id"])
    _queue(j, row["queue"])
    _type(j, row["type"])
    _payload(j, row["payload"])
    _priority(j, row["priority"])
    _status(j, _STATUS[row["status"]])
    _attempt(j, row["attempt"])
    _max_attempts(j, row["max_attempts"])
    _idempotency_key(j, row["idempotency_key"])
    _created_at(j, row["created_at"])
    _visible_at(j, row["visible_at"])
    _locked_until(j, row["locked_until"])
    _worker_id(j, row["worker_id"])
    _completed_at(j, row["completed_at"])
    _last_error(j, row["last_error"])
    _errors(j, row["errors"])
    _result(j, row["result"])
    _releases(j, row["releases"])
    return j


class JobPage(NamedTuple):
    """A listing's rows: its jobs, and for a search how many jobs the scan examined and the
    lowest id it reached (every row carries both; a page of no match is one row of NULL job)."""
    jobs: list[Job]
    scan_n: int
    scan_low: int | None


def job_page(rows: list[Row], search: bool) -> JobPage:
    jobs = [job(r) for r in rows if r["id"] is not None]
    if not search or not rows:
        return JobPage(jobs, 0, None)
    return JobPage(jobs, rows[0]["scan_n"], rows[0]["scan_low"])


class JobChange(NamedTuple):
    """What the lifecycle events and counters read of a job a statement changed. Statements
    that return fewer columns (a batch ack, a reap, a purge) leave the others None."""

    id: int
    queue: str
    type: str | None
    worker_id: str | None
    attempt: int | None
    status: JobStatus | None
    visible_at: datetime | None
    claimed_at: datetime | None
    completed_at: datetime | None


def change(row: Row) -> JobChange:
    get = row.get
    status = get("status")
    return JobChange(row["id"], row["queue"], get("type"), get("worker_id"), get("attempt"),
                     None if status is None else _STATUS[status], get("visible_at"),
                     get("claimed_at"), get("completed_at"))


def release_change(row: Row) -> JobChange:
    """The change of a job a release gave back (LeaseRelease, LeaseReleaseMany): the worker
    and attempt of the claim released, from the entry the statement recorded (the row's own
    have been cleared and taken back)."""
    entry = row["releases"][-1]
    return JobChange(row["id"], row["queue"], row["type"], entry["worker_id"], entry["attempt"],
                     _STATUS[row["status"]], row["visible_at"], row["claimed_at"], None)


def changes(rows: Iterable[Row]) -> list[JobChange]:
    return [change(r) for r in rows]


def scalar(row: Row | None) -> Any:
    """The one value of a one-column row (None for no row)."""
    return None if row is None else next(iter(row.values()))


class LeasedJob(NamedTuple):
    """A job as a claim leased it, to be answered at once: Job's fields, but its jsonb columns
    (payload, errors, result, releases) as the JSON text PostgreSQL wrote (the claim statements
    return them ``::text``), passed on to the answer as they are rather than parsed and written
    again; ``result`` None for SQL NULL. ``status`` is the column's text."""

    id: int
    queue: str
    type: str
    payload: str
    priority: int
    status: str
    attempt: int
    max_attempts: int
    idempotency_key: str | None
    created_at: datetime
    visible_at: datetime
    locked_until: datetime | None
    worker_id: str | None
    completed_at: datetime | None
    last_error: str | None
    errors: str
    result: str | None
    releases: str


class Leased(NamedTuple):
    """A claim handed to a worker: the lease id, its end, and the job (see LeasedJob)."""

    lease_id: str
    locked_until: datetime
    job: LeasedJob


class Claimed(NamedTuple):
    """A job a claim leased: the lease to hand out, and the change for the events."""

    lease: Leased
    change: JobChange


def _claimed(row: Row) -> Claimed:
    get = row.__getitem__
    job_id, queue, type_, visible_at, locked_until = (
        get("id"), get("queue"), get("type"), get("visible_at"), get("locked_until"))
    worker_id, attempt = get("worker_id"), get("attempt")
    job = LeasedJob(job_id, queue, type_, get("payload"), get("priority"), get("status"), attempt,
                    get("max_attempts"), get("idempotency_key"), get("created_at"), visible_at,
                    locked_until, worker_id, get("completed_at"), get("last_error"),
                    get("errors"), get("result"), get("releases"))
    return Claimed(
        Leased(format_lease_id(job_id, get("lease_token")), locked_until, job),
        JobChange(job_id, queue, type_, worker_id, attempt, _STATUS[get("status")], visible_at,
                  get("claimed_at"), None))


class ClaimOutcome(NamedTuple):
    """What one claim statement did: the jobs it leased, and whether it found the claiming
    token revoked (then it leased nothing). A paced claim (JobClaimPaced) also says how many
    claimable jobs its queue's rate_limit held back, and in how many ms a window it found full
    has room again (None: none was full)."""

    claimed: list[Claimed]
    token_revoked: bool
    held: int = 0
    free_in_ms: int | None = None


NOTHING_CLAIMED = ClaimOutcome([], False)


def claim_outcome(rows: Iterable[Row]) -> ClaimOutcome:
    """The rows of JobClaim, JobClaimAged, JobClaimPaced or JobClaimMany (a job's columns, its
    jsonb ones as text, with lease_token and claimed_at): the leased jobs, or the one row (job
    columns NULL) that says the token was revoked at the statement's snapshot."""
    out: list[Claimed] = []
    revoked = False
    held, free_in_ms = 0, None
    for r in rows:
        if "_held" in r:  # JobClaimPaced: on every row, and on its one row without a job
            held, free_in_ms = int(r["_held"] or 0), r["_free_in_ms"]
        if r["token_revoked"]:
            revoked = True
        elif r["id"] is not None:
            out.append(_claimed(r))
    return ClaimOutcome(out, revoked, held, free_in_ms)


class LeaseState(NamedTuple):
    """A job's latest lease token and status, to tell a lost lease from one never issued."""

    lease_token: int | None
    status: JobStatus


def lease_state(row: Row) -> LeaseState:
    return LeaseState(row["lease_token"], _STATUS[row["status"]])


def lease_states(rows: Iterable[Row]) -> dict[int, LeaseState]:
    """By job id, from rows that carry it."""
    return {r["id"]: lease_state(r) for r in rows}


class BackoffInputs(NamedTuple):
    attempt: int
    backoff_base_ms: int
    backoff_max_ms: int


def backoff_inputs(row: Row) -> BackoffInputs:
    return BackoffInputs(row["attempt"], row["backoff_base_ms"], row["backoff_max_ms"])


class LeasesWon(NamedTuple):
    """LeaseAckMany's rows: the (job id, lease token) pairs it completed, and their changes
    for the events."""

    won: set[tuple[int, int]]
    changes: list[JobChange]


def leases_won(rows: Iterable[Row]) -> LeasesWon:
    """From LeaseAckMany's columns (id, lease_token, queue, type, worker_id, attempt,
    claimed_at, completed_at), read by name once each: a batch of 100 reads 100."""
    won: set[tuple[int, int]] = set()
    changes: list[JobChange] = []
    for r in rows:
        job_id = r["id"]
        won.add((job_id, r["lease_token"]))
        changes.append(JobChange(job_id, r["queue"], r["type"], r["worker_id"], r["attempt"], None,
                                 None, r["claimed_at"], r["completed_at"]))
    return LeasesWon(won, changes)


class LeaseReleased(NamedTuple):
    """A lease a release ended (the token stays on the job until its next claim), the job as
    it now is, and its change for the events."""

    lease_token: int
    job: Job
    change: JobChange


def lease_released(row: Row) -> LeaseReleased:
    return LeaseReleased(row["lease_token"], job(row), release_change(row))


class InsertedJob(NamedTuple):
    """One input row of a batch insert: its job, or None when its idempotency key was taken."""

    job: Job | None
    change: JobChange | None


def inserted(row: Row) -> InsertedJob:
    if row["id"] is None:
        return InsertedJob(None, None)
    return InsertedJob(job(row), change(row))


def queue_missing(row: Row) -> bool:
    """Whether a batch row's queue did not exist (JobInsertMany's ``_no_queue``)."""
    return bool(row["_no_queue"])


class QueueUsage(NamedTuple):
    """What keeps a queue from being deleted (QueueUsage): its blocking jobs by status
    (nonzero only), and the schedules and topics that name it."""

    counts: dict[str, int]
    schedules: list[str]
    topics: list[str]


def queue_usage(row: Row) -> QueueUsage:
    return QueueUsage(dict(row["counts"]), list(row["schedules"]), list(row["topics"]))


class QueueDepth(NamedTuple):
    name: str
    depth: int
    max_depth: int | None


def queue_depth(row: Row) -> QueueDepth:
    return QueueDepth(row["name"], row["depth"], row["max_depth"])


class QueueCaps(NamedTuple):
    name: str
    max_running: int | None
    aging_ms: int | None
    paced: bool
    enqueue_rate: dict[str, Any] | None
    soft_depth: int | None
    soft_lag_ms: int | None


def queue_caps(row: Row) -> QueueCaps:
    return QueueCaps(row["name"], row["max_running"], row["aging_ms"], bool(row["paced"]),
                     row["enqueue_rate"], row["soft_depth"], row["soft_lag_ms"])


class QueueRecord(NamedTuple):
    name: str
    settings: dict[str, Any]

    @property
    def paced(self) -> bool:
        """Whether claims of the queue are paced (a ``rate_limit`` among its settings)."""
        return self.settings.get("rate_limit") is not None


def queue(row: Row, settings: Iterable[str]) -> QueueRecord:
    return QueueRecord(row["name"], {k: row[k] for k in settings})


class JobCount(NamedTuple):
    """Jobs of one queue, status and type."""

    queue: str
    status: str
    type: str
    n: int


def job_count(row: Row) -> JobCount:
    return JobCount(row["queue"], row["status"], row["type"], row["n"])


class QueueLag(NamedTuple):
    queue: str
    oldest_waiting_ms: int | None


def queue_lag(row: Row) -> QueueLag:
    return QueueLag(row["queue"], row["oldest_waiting_ms"])


class SubscriptionRecord(NamedTuple):
    topic: str
    queue: str
    type: str | None
    created_at: datetime
    created: bool  # by the statement that returned it (an upsert); False otherwise


def subscription(row: Row) -> SubscriptionRecord:
    return SubscriptionRecord(row["topic"], row["queue"], row["type"], row["created_at"],
                              bool(row.get("created")))


class Target(NamedTuple):
    """Where a topic's publish goes for one subscription: the queue, and the type override."""

    queue: str
    type: str | None


def target(row: Row) -> Target:
    return Target(row["queue"], row["type"])


class TokenRecord(NamedTuple):
    """A token row: never its secret; its hash only where the live table reads it."""

    id: str
    name: str | None
    role: str
    queues: str
    created_at: datetime | None
    revoked_at: datetime | None
    hash: str | None
    enqueue_rate: dict[str, Any] | None = None


def token(row: Row) -> TokenRecord:
    get = row.get
    return TokenRecord(row["id"], get("name"), row["role"], row["queues"], get("created_at"),
                       get("revoked_at"), get("hash"), get("enqueue_rate"))


class WorkerSeen(NamedTuple):
    """A worker of GET /v1/workers: seen from its jobs, from its beats, or both (what it says
    of itself is None for one known only from its jobs)."""

    worker_id: str
    running: int
    queues: list[str]
    last_seen_at: datetime
    host: str | None
    pid: int | None
    concurrency: int | None
    in_flight: int | None
    started_at: datetime | None
    state: str | None


def worker_seen(row: Row) -> WorkerSeen:
    return WorkerSeen(row["worker_id"], row["running"], list(row["queues"]), row["last_seen_at"],
                      row["host"], row["pid"], row["concurrency"], row["in_flight"],
                      row["started_at"], row["state"])


class WorkerRow(NamedTuple):
    """A row of ``workers``: what a worker said of itself in its beats, and when it last did."""

    worker_id: str
    host: str | None
    pid: int | None
    concurrency: int | None
    queues: list[str]
    in_flight: int | None
    started_at: datetime | None
    state: str | None
    last_seen_at: datetime


def worker_row(row: Row) -> WorkerRow:
    return WorkerRow(row["worker_id"], row["host"], row["pid"], row["concurrency"],
                     list(row["queues"] or ()), row["in_flight"], row["started_at"], row["state"],
                     row["last_seen_at"])


class Finished(NamedTuple):
    """Jobs of a queue that reached ``status`` (completed or dead) ``minutes_ago``."""

    queue: str
    status: str
    minutes_ago: int
    n: int


def finished(row: Row) -> Finished:
    return Finished(row["queue"], row["status"], row["minutes_ago"], row["n"])


class ScheduleRecord(NamedTuple):
    """A schedules row (``SELECT *``, ``RETURNING *``); ``created``: made by the upsert that
    returned it (False for any other statement)."""

    name: str
    cron: str
    timezone: str
    misfire: str
    enabled: bool
    job_queue: str
    job_type: str
    job_payload: Any
    job_priority: int
    job_max_attempts: int | None
    next_fire_at: datetime | None
    pending_fire_at: datetime | None
    last_fired_at: datetime | None
    last_job_id: int | None
    created_at: datetime
    updated_at: datetime
    created: bool


def schedule(row: Row) -> ScheduleRecord:
    return ScheduleRecord(
        row["name"], row["cron"], row["timezone"], row["misfire"], row["enabled"],
        row["job_queue"], row["job_type"], row["job_payload"], row["job_priority"],
        row["job_max_attempts"], row["next_fire_at"], row["pending_fire_at"],
        row["last_fired_at"], row["last_job_id"], row["created_at"], row["updated_at"],
        bool(row.get("created")))


class NextWake(NamedTuple):
    """The earliest fire time of all schedules, and whether a fire waits for room."""

    next_fire_at: datetime | None
    pending: bool


def next_wake(row: Row) -> NextWake:
    return NextWake(row["next_fire_at"], bool(row["pending"]))


class TableUpkeep(NamedTuple):
    """One of jobq's tables as the statistics collector sees it (TableUpkeepStats)."""

    name: str
    parent: str | None  # the partitioned table it is a partition of
    live: int
    dead: int
    changed_since_analyze: int
    analyzed_at: datetime | None
    vacuumed_at: datetime | None
    autovacuum: bool


def table_upkeep(row: Row) -> TableUpkeep:
    return TableUpkeep(row["name"], row["parent"], row["n_live_tup"], row["n_dead_tup"], row["n_mod_since_analyze"],
                       row["analyzed_at"], row["vacuumed_at"], row["autovacuum"])


class WakeReading(NamedTuple):
    """One queue of a QueueWakeCheck: jobs claimable now, visible now, and the next delayed
    one's visible time."""

    queue: str
    ready: int
    visible: int
    next_visible_at: datetime | None
    free_in_ms: int | None = None  # a paced queue's full window has room again in this many ms


def wake_reading(row: Row) -> WakeReading:
    return WakeReading(row["queue"], int(row["ready"]), int(row["visible"]), row["next_visible_at"],
                       row["free_in_ms"])


class QueuePressure(NamedTuple):
    """QueuePressure: what backpressure weighs, per queue."""
    queue: str
    depth: int
    lag_ms: int | None


def queue_pressure(row: Row) -> QueuePressure:
    return QueuePressure(row["queue"], int(row["depth"]), row["lag_ms"])


class BucketLeft(NamedTuple):
    """EnqueueBucketsTake: a bucket's tokens after the take (below 0: it was short)."""
    kind: str
    name: str
    tokens: float


def bucket_left(row: Row) -> BucketLeft:
    return BucketLeft(row["kind"], row["name"], float(row["tokens"]))


class RateUse(NamedTuple):
    """QueueRateUse: a paced queue's window now (``free_in_ms`` None: it has room)."""
    queue: str
    jobs: int
    keys: int
    keys_at_limit: int
    free_in_ms: int | None


def rate_use(row: Row) -> RateUse:
    free = row["free_in_ms"]
    return RateUse(row["queue"], int(row["used"]), int(row["keys"]), int(row["keys_full"]),
                   None if free is None else max(int(free), 0))


class Inserted(NamedTuple):
    """A job an enqueue created (JobInsert, JobEnqueueMany): the job, and its change for the
    lifecycle log. JobInsert's row holds every column (``inserted_job``). ``handed``: the
    lease of a job JobInsert leased to a waiting long-poll (the hand-off), as a claim's."""
    job: Job
    change: JobChange
    handed: Claimed | None = None


def inserted_job(row: Row) -> Inserted:
    text = row.get("leased_payload")
    if text is None:
        return Inserted(job(row), change(row))
    # Leased in the insert: the lease as JobClaim would answer it, its payload as PostgreSQL
    # wrote it (errors and releases are a new job's, written here as PostgreSQL writes them).
    return Inserted(job(row), change(row),
                    _claimed({**row, "payload": text, "errors": dumps_json(row["errors"]),
                              "result": None, "releases": dumps_json(row["releases"])}))


def created_jobs(jobs: list[NewJob], rows: list[Row]) -> list[Inserted]:
    """JobEnqueueMany's rows (request order) with the requests they answer: the jobs as
    created. The statement returns only what the request did not say (id, the stored
    payload, max_attempts, created_at, visible_at); a new job's other columns are their
    defaults, set here as the table sets them."""
    out: list[Inserted] = []
    append = out.append
    pending = JobStatus.PENDING
    for nj, row in zip(jobs, rows, strict=True):
        j = _new(Job)
        job_id = row["id"]
        queue, type_, visible_at = nj.queue, nj.type, row["visible_at"]
        _id(j, job_id)
        _queue(j, queue)
        _type(j, type_)
        _payload(j, row["payload"])
        _priority(j, nj.priority)
        _status(j, pending)
        _attempt(j, 0)
        _max_attempts(j, row["max_attempts"])
        _idempotency_key(j, nj.idempotency_key)
        _created_at(j, row["created_at"])
        _visible_at(j, visible_at)
        _locked_until(j, None)
        _worker_id(j, None)
        _completed_at(j, None)
        _last_error(j, None)
        _errors(j, [])
        _result(j, None)
        _releases(j, [])
        append(Inserted(j, JobChange(job_id, queue, type_, None, 0, pending, visible_at, None, None)))
    return out
