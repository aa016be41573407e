"""Rate limits (issue 29): a queue's pace of claims, producers' enqueue rates, soft thresholds.

Settings on ``queues``: ``rate_limit`` and ``enqueue_rate`` (jsonb objects, null: none, the
shapes of ``jobq.domain.rates``), ``soft_depth`` and ``soft_lag_ms`` (adaptive backpressure).
``tokens.enqueue_rate``: a token's own enqueue rate.

Two small tables of state, rewritten in place (half of each page left free for the updated
versions, so that an update is a HOT one that touches no index):

- ``rate_windows``: one row per rate-limited queue and key (``''`` without a key): the
  grants of the last ``per_ms`` as parallel arrays of times and job counts, oldest first.
  A claim of a paced queue locks and rewrites its keys' rows in the claim statement itself
  (``JobClaimPaced``). Deleted with their queue.
- ``enqueue_buckets``: one token bucket per queue or token with an ``enqueue_rate``: the
  tokens left at ``at`` (refilled lazily from the elapsed time when next taken).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
ALTER TABLE queues ADD COLUMN rate_limit jsonb,
                   ADD COLUMN enqueue_rate jsonb,
                   ADD COLUMN soft_depth bigint,
                   ADD COLUMN soft_lag_ms bigint""")
    op.execute("ALTER TABLE tokens ADD COLUMN enqueue_rate jsonb")
    op.execute("""
CREATE TABLE rate_windows (
    queue     text NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
    key       text NOT NULL,
    grant_at  timestamptz[] NOT NULL DEFAULT '{}',
    grant_n   integer[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (queue, key)
) WITH (fillfactor = 50)""")
    op.execute("""
CREATE TABLE enqueue_buckets (
    kind    text NOT NULL CHECK (kind IN ('queue', 'token')),
    name    text NOT NULL,
    tokens  double precision NOT NULL,
    at      timestamptz NOT NULL,
    PRIMARY KEY (kind, name)
) WITH (fillfactor = 50)""")

    # A window's jobs granted after ``since``, and when a full one next has room: its oldest
    # grant still inside the window leaves it per_ms after it was made (a window never holds
    # more than ``jobs``, so any grant leaving makes room for one job at least).
    op.execute("""
CREATE FUNCTION jobq_window_used(grant_at timestamptz[], grant_n integer[], since timestamptz)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(g.n), 0)::bigint FROM unnest(grant_at, grant_n) AS g(at, n) WHERE g.at > since
$$""")
    op.execute("""
CREATE FUNCTION jobq_window_free_at(grant_at timestamptz[], grant_n integer[], jobs integer,
                                    per_ms bigint, asof timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jobq_window_used(grant_at, grant_n, asof - make_interval(secs => per_ms / 1000.0)) >= jobs
                THEN (SELECT min(g.at) FROM unnest(grant_at, grant_n) AS g(at, n)
                       WHERE g.n > 0 AND g.at > asof - make_interval(secs => per_ms / 1000.0))
                     + make_interval(secs => per_ms / 1000.0)
           END
$$""")


def downgrade() -> None:
    op.execute("DROP FUNCTION jobq_window_free_at(timestamptz[], integer[], integer, bigint, timestamptz)")
    op.execute("DROP FUNCTION jobq_window_used(timestamptz[], integer[], timestamptz)")
    op.execute("DROP TABLE enqueue_buckets")
    op.execute("DROP TABLE rate_windows")
    op.execute("ALTER TABLE tokens DROP COLUMN enqueue_rate")
    op.execute("""
ALTER TABLE queues DROP COLUMN rate_limit, DROP COLUMN enqueue_rate,
                   DROP COLUMN soft_depth, DROP COLUMN soft_lag_ms""")
