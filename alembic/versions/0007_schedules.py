"""Recurring jobs: one row per schedule.

The row holds the schedule as given (cron, time zone, misfire policy, enabled), the job each
fire enqueues (``job_*``), and the scheduler's state: ``next_fire_at`` (NULL while disabled),
``pending_fire_at`` (a fire that met a full queue, tried again at each scheduler turn until
it goes in), and what the last fire did. Every replica's scheduler locks due rows with
``FOR UPDATE SKIP LOCKED`` (jobq.core.schedules), so the partial index on the enabled rows'
fire times is all it reads to find them and to know how long to sleep.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE schedules (
    name              text PRIMARY KEY,
    cron              text NOT NULL,
    timezone          text NOT NULL DEFAULT 'UTC',
    misfire           text NOT NULL DEFAULT 'run_once'
                      CONSTRAINT schedules_misfire_check CHECK (misfire IN ('skip', 'run_once')),
    enabled           boolean NOT NULL DEFAULT true,
    job_queue         text NOT NULL,
    job_type          text NOT NULL,
    job_payload       jsonb NOT NULL DEFAULT '{}'::jsonb,
    job_priority      integer NOT NULL DEFAULT 0,
    job_max_attempts  integer,
    next_fire_at      timestamptz,
    pending_fire_at   timestamptz,
    last_fired_at     timestamptz,
    last_job_id       bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
)""")
    op.execute("CREATE INDEX schedules_next_fire_idx ON schedules (next_fire_at) WHERE enabled")


def downgrade() -> None:
    op.execute("DROP TABLE schedules")
