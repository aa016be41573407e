"""The waiting jobs' visibility index; the aging keys' one-time fill.

``jobs_waiting_idx`` answers "when does the next waiting job of this queue become visible" and
"how long has the oldest claimable job waited" (QueueNextVisible, per idle long-poll;
QueueOldestWaiting, per queue read and /metrics scrape) by reading one index entry per
queue. The claim's index cannot: it is ordered by priority first, so the earliest visible_at
of a queue is only found by reading every waiting job, and with 300,000 delayed jobs both
statements read the whole table. It is partial, like the claim's index: a job is in it only
while it waits, so a claim, heartbeat, ack or dead end never inserts into it. It is the one
index this revision adds; each index is a write on every enqueue and retry.

Built CONCURRENTLY, outside a transaction: on a live table a plain CREATE INDEX holds a lock
that blocks every enqueue, claim and ack until the build ends (seconds to minutes at millions
of rows). A concurrent build that fails leaves an INVALID index behind, so the upgrade drops
any index of that name first and can simply be run again.

Until now the leader filled, every second, the aging keys of waiting jobs that a write had
left NULL while their queue's aging_ms was being switched on; the statement read the whole
jobs table each time. The settings write now waits for the writers that may have read the old
setting and re-keys their jobs itself (app/jobq/store/queue_settings.py), so no such job is left;
this revision keys those that the old version may have left, once.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

FILL_AGED_KEYS = """
UPDATE jobs j
   SET aged_key = jobq_aged_key(j.visible_at, j.priority, q.aging_ms)
  FROM queues q
 WHERE q.aging_ms IS NOT NULL AND j.queue = q.name
   AND j.status IN ('pending', 'failed') AND j.aged_key IS NULL
"""


def upgrade() -> None:
    op.execute(FILL_AGED_KEYS)
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS jobs_waiting_idx")
        op.execute("CREATE INDEX CONCURRENTLY jobs_waiting_idx ON jobs (queue, visible_at) "
                   "WHERE status IN ('pending', 'failed')")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS jobs_waiting_idx")
