"""The tables, as SQLAlchemy Core metadata: Alembic's target and the source of ad-hoc queries.

The migrations in ``alembic/versions`` create exactly this schema (plus the counters' triggers,
which SQLAlchemy does not model). The queue settings' defaults come from ``jobq.domain.queues``;
``tests/test_domain_rules.py`` checks that the migrated columns and these agree with it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.sql.elements import TextClause

from jobq.domain.queues import QUEUE_DEFAULTS

metadata = MetaData()


def _default(setting: str) -> TextClause:
    """A queue setting's column default, written from the domain's defaults."""
    value = getattr(QUEUE_DEFAULTS, setting)
    return text(str(value).lower() if isinstance(value, bool) else str(int(value)))


STATUSES_SQL = "('pending', 'running', 'failed', 'completed', 'dead', 'cancelled')"

queues = Table(
    "queues",
    metadata,
    Column("name", Text, primary_key=True),
    Column("max_depth", BigInteger, nullable=True),
    Column("paused", Boolean, nullable=False, server_default=_default("paused")),
    Column("lease_ms", BigInteger, nullable=False, server_default=_default("lease_ms")),
    Column("max_attempts", Integer, nullable=False, server_default=_default("max_attempts")),
    Column("backoff_base_ms", BigInteger, nullable=False, server_default=_default("backoff_base_ms")),
    Column("backoff_max_ms", BigInteger, nullable=False, server_default=_default("backoff_max_ms")),
    Column("max_lease_expiries", Integer, nullable=False, server_default=_default("max_lease_expiries")),
    Column("aging_ms", BigInteger, nullable=True),
    Column("max_running", Integer, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("retention_ms", BigInteger, nullable=False, server_default=_default("retention_ms")),
    Column("dead_retention_ms", BigInteger, nullable=False, server_default=_default("dead_retention_ms")),
    # Rate limits (migration 0014): objects of jobq.domain.rates, null for none.
    Column("rate_limit", JSONB, nullable=True),
    Column("enqueue_rate", JSONB, nullable=True),
    Column("soft_depth", BigInteger, nullable=True),
    Column("soft_lag_ms", BigInteger, nullable=True),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("queue", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("priority", Integer, nullable=False, server_default=text("0")),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=False),
    Column("idempotency_key", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("visible_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("locked_until", DateTime(timezone=True), nullable=True),
    Column("worker_id", Text, nullable=True),
    Column("completed_at", DateTime(timezone=True), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("errors", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("result", JSONB, nullable=True),
    # The fencing token of the current (or last) lease, from jobs_lease_token_seq.
    Column("lease_token", BigInteger, nullable=True),
    Column("lease_ms", BigInteger, nullable=True),
    Column("lease_expiries", Integer, nullable=False, server_default=text("0")),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
    Column("aged_key", Double, nullable=True),
    # The claims handed back by a release (migration 0012), oldest first, the 20 most recent:
    # {"attempt", "at", "worker_id", "delay_ms"} each.
    Column("releases", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    CheckConstraint(f"status IN {STATUSES_SQL}", name="jobs_status_check"),
    # Each index of waiting jobs has a clause (always true) that only its own statements
    # state, so that none can serve another's statement, whatever the statistics say: here
    # "lease_expiries >= 0", stated by the plain claims (migration 0011).
    Index(
        "jobs_claim_idx",
        "queue",
        text("priority DESC"),
        "visible_at",
        "id",
        postgresql_where=text("status IN ('pending', 'failed') AND lease_expiries >= 0"),
    ),
    # When the next waiting job of a queue becomes visible, and the oldest claimable one's lag
    # (migration 0004). "attempt >= 0" (always true) is stated only by those two reads, so no
    # claim can use this index whatever the statistics (migration 0011).
    Index("jobs_waiting_idx", "queue", "visible_at",
          postgresql_where=text("status IN ('pending', 'failed') AND attempt >= 0")),
    Index("jobs_lease_expiry_idx", "locked_until", postgresql_where=text("status = 'running'")),
    Index(
        "jobs_claim_aged_idx",
        "queue",
        "aged_key",
        "id",
        postgresql_where=text("status IN ('pending', 'failed') AND aged_key IS NOT NULL"),
    ),
    # Listing, newest first: one (queue, status) at a time (jobq.store.listing).
    Index("jobs_queue_status_id_idx", "queue", "status", "id"),
    # Free space per page keeps most updated versions on their page (migration 0001). Not for
    # HOT updates: every update of a job changes an indexed column (README, "Why the jobs
    # table is tuned").
    postgresql_with={
        "fillfactor": "70",
        "autovacuum_vacuum_scale_factor": "0.01",
        "autovacuum_vacuum_insert_scale_factor": "0.05",
        "autovacuum_analyze_scale_factor": "0.02",
        "autovacuum_vacuum_cost_delay": "1",
    },
)


# Columns of jobs added after jobs_history was made (0010): ADD COLUMN appends, so in
# jobs_history they come after expires_at, in this order. The statements that move a job to
# jobs_history write its columns positionally (queries.sql).
_ADDED_AFTER_HISTORY = ("releases",)


def _job_columns(added: bool = False) -> list[Column[Any]]:
    """The columns of ``jobs`` again, for ``jobs_history`` (same names, types and order; no
    identity: a job keeps its id when it moves; no default status: a finished one is given):
    those it was made with, or (``added``) those added since."""
    return [Column(c.name, c.type, nullable=c.nullable,
                   server_default=None if c.name == "status" else c.server_default)
            for c in jobs.columns
            if c.name != "id" and (c.name in _ADDED_AFTER_HISTORY) == added]


# Finished jobs (migration 0010): completed, dead and cancelled jobs move here from ``jobs`` in
# the statement that finishes them, so ``jobs`` holds live jobs only. Partitioned by RANGE on
# ``expires_at`` (finished + the queue's retention); the partitions are made and dropped whole
# by the duties leader (jobq.store.history), with a DEFAULT one for the expiries no range
# partition covers. The view ``jobs_all`` (not modelled) is both tables with jobs' columns.
jobs_history = Table(
    "jobs_history",
    metadata,
    Column("id", BigInteger, nullable=False),
    *_job_columns(),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    *_job_columns(added=True),
    CheckConstraint("status IN ('completed', 'dead', 'cancelled')", name="jobs_history_status_check"),
    Index("jobs_history_id_idx", "id"),
    Index("jobs_history_queue_status_id_idx", "queue", "status", "id"),
    Index("jobs_history_finished_idx", "queue", "status", "completed_at"),
    Index("jobs_history_dead_idx", "id", postgresql_where=text("status = 'dead'")),
    Index("jobs_history_kept_idx", "queue", "status", text("(expires_at - completed_at)")),
    postgresql_partition_by="RANGE (expires_at)",
)

# Idempotency keys (migration 0010): a key names its job in whichever table it is, from the
# enqueue that takes it until the job is deleted.
job_keys = Table(
    "job_keys",
    metadata,
    Column("queue", Text, primary_key=True),
    Column("idempotency_key", Text, primary_key=True),
    Column("job_id", BigInteger, nullable=False),
)

# Counts of jobs by queue, type and status, kept by statement triggers on ``jobs`` (and
# ``jobs_history``) so that
# max_depth checks and queue stats never count rows. Each backend writes its own shard
# (pg_backend_pid() % 256, migration 0003), so concurrent transactions rarely wait on the
# same counter row.
job_counts = Table(
    "job_counts",
    metadata,
    Column("queue", Text, primary_key=True),
    Column("status", Text, primary_key=True),
    Column("type", Text, primary_key=True),
    Column("shard", SmallInteger, primary_key=True),
    Column("n", BigInteger, nullable=False),
)

# Access tokens (migration 0005): only a hash of each token; revoked rows are kept.
tokens = Table(
    "tokens",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=True),
    Column("role", Text, nullable=False),
    Column("queues", Text, nullable=False, server_default=text("'*'")),
    Column("hash", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("enqueue_rate", JSONB, nullable=True),  # migration 0014: jobq.domain.rates.Bucket
    CheckConstraint("role IN ('producer', 'worker', 'admin')", name="tokens_role_check"),
)

# Recurring jobs (migration 0007): the schedule, the job each fire enqueues, and the
# scheduler's state (jobq.core.schedules).
schedules = Table(
    "schedules",
    metadata,
    Column("name", Text, primary_key=True),
    Column("cron", Text, nullable=False),
    Column("timezone", Text, nullable=False, server_default=text("'UTC'")),
    Column("misfire", Text, nullable=False, server_default=text("'run_once'")),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    Column("job_queue", Text, nullable=False),
    Column("job_type", Text, nullable=False),
    Column("job_payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("job_priority", Integer, nullable=False, server_default=text("0")),
    Column("job_max_attempts", Integer, nullable=True),
    Column("next_fire_at", DateTime(timezone=True), nullable=True),
    Column("pending_fire_at", DateTime(timezone=True), nullable=True),
    Column("last_fired_at", DateTime(timezone=True), nullable=True),
    Column("last_job_id", BigInteger, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    CheckConstraint("misfire IN ('skip', 'run_once')", name="schedules_misfire_check"),
    Index("schedules_next_fire_idx", "next_fire_at", postgresql_where=text("enabled")),
)

# Fan-out topics (migration 0008): the queues each topic's publishes go to, with the job
# type a queue gets in place of the published one (jobq.core.topics).
topic_subscriptions = Table(
    "topic_subscriptions",
    metadata,
    Column("topic", Text, primary_key=True),
    Column("queue", Text, ForeignKey("queues.name"), primary_key=True),
    Column("type", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
)


# Worker processes that beat (migration 0013): what each says of itself, and when it last
# did. Only the primary key is indexed, so that a beat is a HOT update (fillfactor 50).
WORKER_STATES_SQL = "('running', 'stopping', 'stopped')"
workers = Table(
    "workers",
    metadata,
    Column("worker_id", Text, primary_key=True),
    Column("host", Text, nullable=True),
    Column("pid", BigInteger, nullable=True),
    Column("concurrency", Integer, nullable=True),
    Column("queues", ARRAY(Text), nullable=True),
    Column("in_flight", Integer, nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("state", Text, nullable=True),
    Column("last_seen_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    CheckConstraint(f"state IN {WORKER_STATES_SQL}", name="workers_state_check"),
    postgresql_with={"fillfactor": "50"},
)


# A paced queue's grants of the last per_ms, per key (migration 0014; JobClaimPaced).
rate_windows = Table(
    "rate_windows",
    metadata,
    Column("queue", Text, ForeignKey("queues.name", ondelete="CASCADE"), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("grant_at", ARRAY(DateTime(timezone=True)), nullable=False, server_default=text("'{}'")),
    Column("grant_n", ARRAY(Integer), nullable=False, server_default=text("'{}'")),
    postgresql_with={"fillfactor": "50"},
)

# Token buckets of enqueue rates, per queue or access token (migration 0014; EnqueueBucketsTake).
enqueue_buckets = Table(
    "enqueue_buckets",
    metadata,
    Column("kind", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("tokens", Double, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    CheckConstraint("kind IN ('queue', 'token')", name="enqueue_buckets_kind_check"),
    postgresql_with={"fillfactor": "50"},
)
