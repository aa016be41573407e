"""A job remembers the claims handed back by a release: ``releases`` on ``jobs`` and ``jobs_history``.

``POST /v1/leases/{lease_id}/release`` gives a held job back (to ``pending``) without spending
the attempt: the claim is taken off ``attempt`` and is neither an error nor a lease expiry. So
that a released claim stays visible (the job's history, the dashboard), the job keeps a short
record of its releases, oldest first: ``{"attempt", "at", "worker_id", "delay_ms"}`` each, the 20
most recent (LeaseRelease, queries.sql).

Column order matters: the statements that move a job to ``jobs_history`` write it positionally
(``INSERT INTO jobs_history SELECT * FROM moved``). ``ADD COLUMN`` appends, so in ``jobs`` the
column comes after ``aged_key`` and in ``jobs_history`` after ``expires_at`` (on the partitioned
parent, which adds it to every attached partition, the DEFAULT one included; partitions made
later copy the parent). The view ``jobs_all`` gains it as its last column (a view may only grow
at its end).

A constant default: no table rewrite, the ALTERs are catalog changes only.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = ("id, queue, type, payload, priority, status, attempt, max_attempts, idempotency_key, "
           "created_at, visible_at, locked_until, worker_id, completed_at, last_error, errors, "
           "result, lease_token, lease_ms, lease_expiries, claimed_at, aged_key")

UPGRADE = """
ALTER TABLE jobs ADD COLUMN releases jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE jobs_history ADD COLUMN releases jsonb NOT NULL DEFAULT '[]'::jsonb;
CREATE OR REPLACE VIEW jobs_all AS
    SELECT {cols}, releases FROM jobs
    UNION ALL
    SELECT {cols}, releases FROM jobs_history;
"""

# A view cannot lose a column by CREATE OR REPLACE: dropped and made again as 0010 made it.
DOWNGRADE = """
DROP VIEW jobs_all;
CREATE VIEW jobs_all AS
    SELECT {cols} FROM jobs
    UNION ALL
    SELECT {cols} FROM jobs_history;
ALTER TABLE jobs_history DROP COLUMN releases;
ALTER TABLE jobs DROP COLUMN releases;
"""


def upgrade() -> None:
    op.execute(UPGRADE.format(cols=COLUMNS))


def downgrade() -> None:
    op.execute(DOWNGRADE.format(cols=COLUMNS))
