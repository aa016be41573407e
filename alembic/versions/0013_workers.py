"""Worker processes that report themselves: ``workers``, one row per ``worker_id``.

Until now the service knew a worker only from its jobs (``GET /v1/workers`` read the running
jobs and those finished lately), so a worker waiting for work was invisible. A worker now
beats (``POST /v1/workers/{worker_id}/beat``, about every 10 s): one upsert of its row with
what it says of itself (host, pid, concurrency, queues, jobs in flight, state) and
``last_seen_at = now()``. ``GET /v1/workers`` merges these rows with the workers seen from jobs.

Small and rewritten in place: a row per live worker process, each updated every few seconds.
No index but the primary key, so that a beat (which changes no indexed column) is a HOT update
that touches no index; the reads of the whole table (the listing's window, the leader's
deletion of rows not seen for an hour) scan a table of as many rows as there are workers.
Half of each page is left free for those updated versions.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE workers (
    worker_id     text PRIMARY KEY,
    host          text,
    pid           bigint,
    concurrency   integer,
    queues        text[],
    in_flight     integer,
    started_at    timestamptz,
    state         text CHECK (state IN ('running', 'stopping', 'stopped')),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 50)""")


def downgrade() -> None:
    op.execute("DROP TABLE workers")
