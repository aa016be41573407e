"""Finished jobs leave the hot table: ``jobs_history``, partitioned by expiry and dropped whole.

Completed, dead and cancelled jobs move from ``jobs`` to ``jobs_history`` in the statement that
finishes them (queries.sql), so ``jobs`` and its indexes hold live jobs only: their size follows
the jobs waiting and running, not the jobs kept for retention. ``jobs_history`` is partitioned
by RANGE on ``expires_at`` (finished time plus the queue's ``retention_ms``, or
``dead_retention_ms`` for a dead job): a partition whose upper bound has passed holds expired
jobs only, and the duties leader drops it whole (``jobq.store.history``). That is where disk
comes back: a DELETE, as retention did before, only makes space reusable after a VACUUM (and
this table's shape never gave it back).

This migration creates the DEFAULT partition only: the leader creates the range partitions
ahead (their width is ``JOBQ_HISTORY_PARTITION_S``, a setting, so partitions are made by the
service and not frozen here) and moves the rows it finds in the DEFAULT partition into each
new one. A finish never fails for lack of a partition: what no range partition takes lands in
the DEFAULT one.

The counters of 0001 count history rows too (the same statement triggers on the partitioned
table): a move is -1 in one table and +1 in the other, in one statement. A partition drop
fires no trigger, so the leader subtracts its rows first, in the drop's transaction.

Idempotency keys move out of ``jobs`` (its unique index is dropped) into ``job_keys``
(queue, key) -> job id: a key is taken by the enqueue statement itself and stays while its job
exists, in either table, so a job moving to history while an enqueue with its key runs cannot
let a duplicate in. A key goes with its job (purge, retention). ``jobq._insert`` (0009) is
replaced to use it.

``jobs_all`` is a view of both tables with the columns of ``jobs``: the reads that look a job up
wherever it is (GET, a key's job) use it. A column added to ``jobs`` must be added to
``jobs_history`` and the view in the same migration.

Existing finished jobs are moved in this transaction (fine for moderate sizes: one statement).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ("id, queue, type, payload, priority, status, attempt, max_attempts, idempotency_key, "
           "created_at, visible_at, locked_until, worker_id, completed_at, last_error, errors, "
           "result, lease_token, lease_ms, lease_expiries, claimed_at, aged_key")

UPGRADE = r"""
CREATE TABLE jobs_history (
    id              bigint  NOT NULL,
    queue           text    NOT NULL,
    type            text    NOT NULL,
    payload         jsonb   NOT NULL DEFAULT '{{}}'::jsonb,
    priority        integer NOT NULL DEFAULT 0,
    status          text    NOT NULL,
    attempt         integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    visible_at      timestamptz NOT NULL DEFAULT now(),
    locked_until    timestamptz,
    worker_id       text,
    completed_at    timestamptz,
    last_error      text,
    errors          jsonb NOT NULL DEFAULT '[]'::jsonb,
    result          jsonb,
    lease_token     bigint,
    lease_ms        bigint,
    lease_expiries  integer NOT NULL DEFAULT 0,
    claimed_at      timestamptz,
    aged_key        double precision,
    -- When retention deletes the job: its partition's key.
    expires_at      timestamptz NOT NULL,
    CONSTRAINT jobs_history_status_check CHECK (status IN ('completed', 'dead', 'cancelled'))
) PARTITION BY RANGE (expires_at);

-- GET, lease state, retry and purge by id (one probe per partition).
CREATE INDEX jobs_history_id_idx ON jobs_history (id);
-- Listing newest first, one (queue, status) at a time (jobq.store.listing).
CREATE INDEX jobs_history_queue_status_id_idx ON jobs_history (queue, status, id);
-- Recent finishes per queue and status (WorkersSeen, QueueThroughput).
CREATE INDEX jobs_history_finished_idx ON jobs_history (queue, status, completed_at);
-- The dead jobs in id order, for replay and purge with no queue named.
CREATE INDEX jobs_history_dead_idx ON jobs_history (id) WHERE status = 'dead';
-- Jobs kept longer than their queue's retention now says (it was lowered): the retention the
-- job was finished with, so that only those are read (jobq.store.history).
CREATE INDEX jobs_history_kept_idx ON jobs_history (queue, status, (expires_at - completed_at));

CREATE TABLE jobs_history_default PARTITION OF jobs_history DEFAULT;
-- Only the DEFAULT partition is searched by expiry: for its rows that a new range partition
-- takes, and for its expired rows.
CREATE INDEX jobs_history_default_expires_idx ON jobs_history_default (expires_at);

CREATE TRIGGER jobs_history_count_insert AFTER INSERT ON jobs_history
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_changes();
CREATE TRIGGER jobs_history_count_update AFTER UPDATE ON jobs_history
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_changes();
CREATE TRIGGER jobs_history_count_delete AFTER DELETE ON jobs_history
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_changes();

CREATE TABLE job_keys (
    queue           text   NOT NULL,
    idempotency_key text   NOT NULL,
    job_id          bigint NOT NULL,
    PRIMARY KEY (queue, idempotency_key)
);
INSERT INTO job_keys (queue, idempotency_key, job_id)
SELECT queue, idempotency_key, id FROM jobs WHERE idempotency_key IS NOT NULL;
DROP INDEX jobs_idempotency_key_idx;

WITH moved AS (
    DELETE FROM jobs j WHERE j.status IN ('completed', 'dead', 'cancelled')
    RETURNING {cols}
)
INSERT INTO jobs_history ({cols}, expires_at)
SELECT {m_cols},
       coalesce(m.completed_at, now()) + make_interval(secs => coalesce(
           CASE WHEN m.status = 'dead' THEN q.dead_retention_ms ELSE q.retention_ms END,
           CASE WHEN m.status = 'dead' THEN 2592000000 ELSE 604800000 END) / 1000.0)
  FROM moved m LEFT JOIN queues q ON q.name = m.queue;

-- Nothing finished stays in jobs: their indexes there have nothing left to serve.
DROP INDEX jobs_finished_idx;
DROP INDEX jobs_dead_idx;

CREATE VIEW jobs_all AS
    SELECT {cols} FROM jobs
    UNION ALL
    SELECT {cols} FROM jobs_history;
"""

DOWNGRADE = r"""
DROP VIEW IF EXISTS jobs_all;
-- A partition detached for its drop, whose drop did not run (the leader died in between):
-- its jobs had expired; out of the counters, then gone.
DO $do$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c
              WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
                AND NOT c.relispartition AND c.relname ~ '^jobs_history_p[0-9]+_[0-9]+$' LOOP
        EXECUTE format('INSERT INTO job_counts AS c (queue, status, type, shard, n) '
                       'SELECT queue, status, type, 0, -count(*) FROM %I GROUP BY 1, 2, 3 '
                       'ON CONFLICT (queue, status, type, shard) DO UPDATE SET n = c.n + excluded.n', t);
        EXECUTE format('DROP TABLE %I', t);
    END LOOP;
END
$do$;
WITH moved AS (DELETE FROM jobs_history RETURNING {cols})
INSERT INTO jobs ({cols}) SELECT {cols} FROM moved;
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_finished_idx ON jobs (queue, status, completed_at)
    WHERE status IN ('completed', 'cancelled', 'dead');
CREATE INDEX jobs_dead_idx ON jobs (id) WHERE status = 'dead';
DROP TABLE job_keys;
DROP TABLE jobs_history;
"""

# jobq._insert of 0009 with the keys in job_keys: the key is taken before the job is written,
# in this transaction, so a concurrent enqueue with the key waits for it and then sees it.
INSERT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION jobq._insert(p_queue text, p_type text, p_payload jsonb, p_priority integer,
                             p_delay_ms bigint, p_run_at timestamptz, p_max_attempts integer,
                             p_key text, OUT job_id bigint, OUT created boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    q {s}.queues%ROWTYPE;
    existing_id bigint;
    existing_type text;
    existing_payload jsonb;
    new_id bigint;
    at timestamptz;
BEGIN
    SELECT * INTO q FROM {s}.queues WHERE name = p_queue;
    IF NOT FOUND THEN
        -- A new queue gets the column defaults: the same as QueueEnsure's (jobq.domain.queues).
        INSERT INTO {s}.queues (name) VALUES (p_queue) ON CONFLICT (name) DO NOTHING;
        SELECT * INTO q FROM {s}.queues WHERE name = p_queue;
    END IF;
    created := false;
    IF p_key IS NOT NULL THEN
        SELECT k.job_id INTO existing_id FROM {s}.job_keys k
         WHERE k.queue = p_queue AND k.idempotency_key = p_key;
    END IF;
    IF existing_id IS NULL THEN
        -- Replays enqueue nothing, so only a new job meets max_depth. Counted as the API
        -- counts: committed jobs, plus those this transaction enqueued before.
        IF q.max_depth IS NOT NULL AND (
               SELECT coalesce(sum(c.n), 0) FROM {s}.job_counts c
                WHERE c.queue = p_queue AND c.status IN ('pending', 'failed')) >= q.max_depth THEN
            RAISE EXCEPTION USING ERRCODE = 'JQ429',
                  MESSAGE = format('queue %L is at its max_depth of waiting jobs', p_queue),
                  HINT = 'nothing was enqueued; retry later';
        END IF;
        new_id := nextval({seq}::regclass);
        IF p_key IS NOT NULL THEN
            INSERT INTO {s}.job_keys (queue, idempotency_key, job_id) VALUES (p_queue, p_key, new_id)
            ON CONFLICT (queue, idempotency_key) DO NOTHING;
            IF NOT FOUND THEN
                -- Another transaction committed the key meanwhile.
                SELECT k.job_id INTO existing_id FROM {s}.job_keys k
                 WHERE k.queue = p_queue AND k.idempotency_key = p_key;
            END IF;
        END IF;
        IF existing_id IS NULL THEN
            at := coalesce(p_run_at,
                           now() + make_interval(secs => (coalesce(p_delay_ms, 0::bigint) / 1000.0)::double precision));
            INSERT INTO {s}.jobs (id, queue, type, payload, priority, status, max_attempts,
                                  idempotency_key, visible_at, aged_key)
            VALUES (new_id, p_queue, p_type, p_payload, p_priority, 'pending',
                    coalesce(p_max_attempts, q.max_attempts), p_key, at,
                    {s}.jobq_aged_key(at, p_priority, q.aging_ms));
            job_id := new_id;
            created := true;
            RETURN;
        END IF;
    END IF;
    -- The key's job, in either table.
    SELECT a.type, a.payload INTO existing_type, existing_payload FROM {s}.jobs_all a
     WHERE a.id = existing_id;
    IF existing_type IS DISTINCT FROM p_type OR existing_payload IS DISTINCT FROM p_payload THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ409',
              MESSAGE = format('idempotency key %L in queue %L already names job %s with a '
                               'different type or payload', p_key, p_queue, existing_id);
    END IF;
    job_id := existing_id;
END
$fn$;
REVOKE ALL ON FUNCTION jobq._insert(text, text, jsonb, integer, bigint, timestamptz, integer, text) FROM PUBLIC;
"""


def _schema() -> str:
    return str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar())


def _old_insert_function(s: str) -> str:
    """0009's jobq._insert, for the downgrade (read from that migration's text)."""
    from pathlib import Path

    text = (Path(__file__).parent / "0009_sql_enqueue.py").read_text(encoding="utf-8")
    start = text.index("CREATE FUNCTION jobq._insert(")
    end = text.index("$fn$;", start) + len("$fn$;")
    return text[start:end].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1).format(s=s)


def upgrade() -> None:
    s = _schema()
    m_cols = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
    op.execute(UPGRADE.format(cols=COLUMNS, m_cols=m_cols))
    seq = op.get_bind().exec_driver_sql(
        "SELECT quote_literal(pg_get_serial_sequence(quote_ident(current_schema()) || '.jobs', 'id'))"
    ).scalar()
    op.execute(INSERT_FUNCTION.format(s=s, seq=seq))


def downgrade() -> None:
    s = _schema()
    op.execute(_old_insert_function(s))
    op.execute(DOWNGRADE.format(cols=COLUMNS))
