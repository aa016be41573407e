"""Aging keys, retention settings and the indexes that keep both cheap.

``aged_key`` orders the waiting jobs of a queue with ``aging_ms`` set: a job's priority grows by
one step per ``aging_ms`` waited, so ordering by effective priority now is ordering by
``visible_at (ms) - priority × aging_ms``, a number that does not change while the job waits.
An index on it keeps the aging claim on an index; queues without aging leave it NULL and pay
nothing (the index is partial).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UPGRADE = """
-- The aging sort key (see the module docstring); NULL when the queue does not age.
-- IMMUTABLE and plain SQL, so PostgreSQL inlines it into the statements that call it.
CREATE FUNCTION jobq_aged_key(visible_at timestamptz, priority integer, aging_ms bigint)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN aging_ms IS NULL THEN NULL
                ELSE extract(epoch FROM visible_at) * 1000 - priority::double precision * aging_ms
           END
$$;

ALTER TABLE jobs ADD COLUMN aged_key double precision;
ALTER TABLE queues ADD COLUMN retention_ms bigint NOT NULL DEFAULT 604800000;
ALTER TABLE queues ADD COLUMN dead_retention_ms bigint NOT NULL DEFAULT 2592000000;

CREATE INDEX jobs_claim_aged_idx ON jobs (queue, aged_key, id)
    WHERE status IN ('pending', 'failed') AND aged_key IS NOT NULL;
-- Retention walks finished jobs by age, a batch at a time.
CREATE INDEX jobs_finished_idx ON jobs (queue, status, completed_at)
    WHERE status IN ('completed', 'cancelled', 'dead');
"""

DOWNGRADE = """
DROP INDEX IF EXISTS jobs_finished_idx;
DROP INDEX IF EXISTS jobs_claim_aged_idx;
ALTER TABLE queues DROP COLUMN IF EXISTS dead_retention_ms;
ALTER TABLE queues DROP COLUMN IF EXISTS retention_ms;
ALTER TABLE jobs DROP COLUMN IF EXISTS aged_key;
DROP FUNCTION IF EXISTS jobq_aged_key(timestamptz, integer, bigint);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
