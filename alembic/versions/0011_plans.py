"""Plans that do not need statistics: each partial index of waiting jobs serves only its own
statements.

On a table never analyzed (autovacuum off, or not yet run) the planner guesses row counts,
and the guesses make every plan look cheap: the claim took ``jobs_waiting_idx`` (queue,
visible_at), read all 20,000 waiting jobs of its queue and sorted them, where
``jobs_claim_idx`` hands out the first 100 in order (76.9 ms against 4.8 ms). The three
indexes of waiting jobs hold nearly the same rows, so any of them can serve any of the
statements with a sort, and without statistics the planner cannot tell which is right.

A statement can only use a partial index whose predicate its own WHERE implies. So each index
now carries a clause that only its statements state, always true, on a column none of the
other statements names:

* ``jobs_claim_idx`` adds ``lease_expiries >= 0`` (expiries count up from 0, a retry or
  replay resets them to 0): stated by the claims in plain order (JobClaim, JobClaimMany).
* ``jobs_waiting_idx`` adds ``attempt >= 0`` (attempts likewise): stated by QueueNextVisible
  and QueueOldestWaiting.
* ``jobs_claim_aged_idx`` is unchanged: its ``aged_key IS NOT NULL`` is stated by the aged
  claims only, and they state neither clause above.

Both are rebuilt CONCURRENTLY under a new name and then swapped in (the old one dropped
CONCURRENTLY, the new one renamed), so enqueues and claims go on during the upgrade and a
queue is never without its index; a failed build leaves an INVALID ``*_0011`` index that the
next run drops first.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-04
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

CLAIM = "ON jobs (queue, priority DESC, visible_at, id) WHERE status IN ('pending', 'failed')"
WAITING = "ON jobs (queue, visible_at) WHERE status IN ('pending', 'failed')"


def _swap(name: str, definition: str) -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}_0011")
        op.execute(f"CREATE INDEX CONCURRENTLY {name}_0011 {definition}")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"ALTER INDEX {name}_0011 RENAME TO {name}")


def upgrade() -> None:
    _swap("jobs_claim_idx", CLAIM + " AND lease_expiries >= 0")
    _swap("jobs_waiting_idx", WAITING + " AND attempt >= 0")


def downgrade() -> None:
    _swap("jobs_claim_idx", CLAIM)
    _swap("jobs_waiting_idx", WAITING)
