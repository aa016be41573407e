-- The statements that matter, named noun-first and reviewed as SQL.
-- Loaded once by app/jobq/store/queries.py; each block starts with "-- name: X" and a one-line purpose.
-- Parameters are psycopg named placeholders. Every statement here runs on PostgreSQL 14+.

-- name: QueueEnsure
-- Create a queue with the default settings (jobq.domain.queues) the first time it is used.
INSERT INTO queues (name, max_depth, paused, lease_ms, max_attempts, backoff_base_ms, backoff_max_ms,
                    max_lease_expiries, aging_ms, max_running, retention_ms, dead_retention_ms)
VALUES (%(queue)s, %(max_depth)s, %(paused)s, %(lease_ms)s, %(max_attempts)s, %(backoff_base_ms)s,
        %(backoff_max_ms)s, %(max_lease_expiries)s, %(aging_ms)s, %(max_running)s, %(retention_ms)s,
        %(dead_retention_ms)s)
ON CONFLICT (name) DO NOTHING;

-- name: JobInsert
-- Enqueue one job unless its queue is at max_depth; an idempotency key already in the queue (job_keys) inserts nothing; nor does a queue that does not exist (any more).
-- The hand-off (jobq.core.enqueue): with %(lease_worker)s set, a long-poll of this service process waits
-- on the queue for a job like this one, and the job is leased to it here, as JobClaim would lease it,
-- when it is claimable now (visible, the queue not paused) and the claiming token (%(lease_token_id)s;
-- NULL: none that can be revoked) is live at this statement's snapshot: one statement and one commit
-- instead of an insert, a bell and a claim. Otherwise the job is inserted pending, as without one.
-- The queue's row is locked FOR KEY SHARE, as a foreign key's check would lock it: enqueues do
-- not wait for each other, but a queue's delete (QueueLockForDelete) waits for those in flight,
-- and one that comes after the delete committed finds no queue here and inserts nothing (the
-- caller then creates the queue again). So no job lands in a queue that no longer exists.
WITH q AS (
    SELECT max_attempts, max_depth, aging_ms, paused, lease_ms,
           coalesce(%(run_at)s::timestamptz,
                    now() + make_interval(secs => %(delay_ms)s::bigint / 1000.0)) AS visible_at
      FROM queues WHERE name = %(queue)s
       FOR KEY SHARE
),
-- Materialized (nextval is volatile): the key and the job get the same id.
new AS (
    SELECT nextval((SELECT pg_get_serial_sequence('jobs', 'id')::regclass)) AS id, q.*,
           CASE WHEN %(lease_worker)s::text IS NULL THEN false
                ELSE q.visible_at <= now() AND NOT q.paused
                     AND (%(lease_token_id)s::text IS NULL
                          OR EXISTS (SELECT 1 FROM tokens t
                                      WHERE t.id = %(lease_token_id)s::text AND t.revoked_at IS NULL))
           END AS leased,
           coalesce(%(lease_ms)s::bigint, q.lease_ms) AS lease_length_ms
      FROM q
     WHERE q.max_depth IS NULL
        OR (SELECT coalesce(sum(c.n), 0) FROM job_counts c
             WHERE c.queue = %(queue)s AND c.status IN ('pending', 'failed')) < q.max_depth
),
-- The key is taken first: an enqueue with the same key waits for this one to commit, then
-- inserts nothing, wherever the key's job is by then (jobs or jobs_history).
key AS (
    INSERT INTO job_keys (queue, idempotency_key, job_id)
    SELECT %(queue)s, %(idempotency_key)s, new.id FROM new WHERE %(idempotency_key)s::text IS NOT NULL
    ON CONFLICT (queue, idempotency_key) DO NOTHING
    RETURNING job_id
)
INSERT INTO jobs (id, queue, type, payload, priority, status, max_attempts, idempotency_key,
                  visible_at, aged_key, attempt, lease_token, lease_ms, locked_until, worker_id, claimed_at)
SELECT new.id, %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s,
       CASE WHEN new.leased THEN 'running' ELSE 'pending' END,
       coalesce(%(max_attempts)s, new.max_attempts), %(idempotency_key)s,
       new.visible_at, jobq_aged_key(new.visible_at, %(priority)s, new.aging_ms),
       CASE WHEN new.leased THEN 1 ELSE 0 END,
       CASE WHEN new.leased THEN nextval('jobs_lease_token_seq') END,
       CASE WHEN new.leased THEN new.lease_length_ms END,
       CASE WHEN new.leased THEN now() + make_interval(secs => new.lease_length_ms / 1000.0) END,
       CASE WHEN new.leased THEN %(lease_worker)s::text END,
       CASE WHEN new.leased THEN now() END
  FROM new
 WHERE %(idempotency_key)s::text IS NULL OR EXISTS (SELECT 1 FROM key)
-- A leased job's payload also as the JSON text PostgreSQL wrote, for the long-poll's answer
-- (records.handed_lease: as a claim's, passed on as it is).
RETURNING *, CASE WHEN status = 'running' THEN payload::text END AS leased_payload;

-- name: JobInsertMany
-- Enqueue a batch in request order; ids are drawn first so each input row maps to its job.
WITH src AS MATERIALIZED (
    -- The sequence is found once per statement (the subquery is an InitPlan), not per row:
    -- pg_get_serial_sequence reads the catalogs, ~3.5 us of a batch job's ~19.5 us.
    SELECT nextval((SELECT pg_get_serial_sequence('jobs', 'id')::regclass)) AS id, s.*,
           coalesce(s.run_at, now() + make_interval(secs => coalesce(s.delay_ms, 0) / 1000.0))
               AS visible_at
      FROM ROWS FROM (jsonb_to_recordset(%(jobs)s::jsonb)
                      AS (queue text, type text, payload jsonb, priority integer,
                          max_attempts integer, idempotency_key text, delay_ms bigint,
                          run_at timestamptz))
           WITH ORDINALITY
           AS s(queue, type, payload, priority, max_attempts, idempotency_key, delay_ms, run_at, ord)
),
-- The batch's queues, locked FOR KEY SHARE as in JobInsert: a row of a queue that does not
-- exist (deleted since this process last created it) inserts nothing and says so (_no_queue).
q AS (
    SELECT name, max_attempts, aging_ms FROM queues
     WHERE name = ANY (ARRAY(SELECT DISTINCT queue FROM src))
     ORDER BY name
       FOR KEY SHARE
),
-- Keys first, in request order: a key already taken (or taken earlier in this batch) keeps
-- its job, and its row inserts nothing (see JobInsert).
key AS (
    INSERT INTO job_keys (queue, idempotency_key, job_id)
    SELECT src.queue, src.idempotency_key, src.id
      FROM src JOIN q ON q.name = src.queue
     WHERE src.idempotency_key IS NOT NULL
     ORDER BY src.ord
    ON CONFLICT (queue, idempotency_key) DO NOTHING
    RETURNING job_id
),
ins AS (
    INSERT INTO jobs (id, queue, type, payload, priority, status, max_attempts, idempotency_key,
                      visible_at, aged_key)
    SELECT src.id, src.queue, src.type, coalesce(src.payload, '{}'::jsonb),
           coalesce(src.priority, 0), 'pending', coalesce(src.max_attempts, q.max_attempts),
           src.idempotency_key, src.visible_at,
           jobq_aged_key(src.visible_at, coalesce(src.priority, 0), q.aging_ms)
      FROM src JOIN q ON q.name = src.queue
     WHERE src.idempotency_key IS NULL OR src.id IN (SELECT job_id FROM key)
     ORDER BY src.ord
    RETURNING *
)
SELECT src.ord AS _ord, NOT EXISTS (SELECT 1 FROM q WHERE q.name = src.queue) AS _no_queue, ins.*
  FROM src LEFT JOIN ins ON ins.id = src.id ORDER BY src.ord;
-- name: JobEnqueueMany
-- Enqueue a batch of new jobs, all or nothing, in one statement (the fast way of POST /v1/jobs/batch): when every queue exists, no key of the batch is taken (nor twice in it) and no queue would pass max_depth; otherwise it writes nothing and returns no row (the caller then takes JobInsertMany's way).
-- Rows in request order (ids are drawn in that order), with only what the request did not
-- say. The checks read the statement's snapshot; a key taken meanwhile by another enqueue
-- fails the key insert (no ON CONFLICT: unique_violation), which undoes the whole statement.
-- The depth check counts the committed waiting jobs plus this batch's, as JobInsertMany's
-- caller does after its insert (QueueDepths).
WITH src AS MATERIALIZED (
    -- The sequence is found once per statement (the subquery is an InitPlan), not per row:
    -- pg_get_serial_sequence reads the catalogs, ~3.5 us of a batch job's ~19.5 us.
    SELECT nextval((SELECT pg_get_serial_sequence('jobs', 'id')::regclass)) AS id, s.*,
           coalesce(s.run_at, now() + make_interval(secs => coalesce(s.delay_ms, 0) / 1000.0))
               AS visible_at
      FROM ROWS FROM (jsonb_to_recordset(%(jobs)s::jsonb)
                      AS (queue text, type text, payload jsonb, priority integer,
                          max_attempts integer, idempotency_key text, delay_ms bigint,
                          run_at timestamptz))
           WITH ORDINALITY
           AS s(queue, type, payload, priority, max_attempts, idempotency_key, delay_ms, run_at, ord)
),
-- Locked FOR KEY SHARE as in JobInsert; a queue deleted meanwhile is missing here.
q AS MATERIALIZED (
    SELECT name, max_attempts, aging_ms, max_depth FROM queues
     WHERE name = ANY (ARRAY(SELECT DISTINCT queue FROM src))
     ORDER BY name
       FOR KEY SHARE
),
ok AS MATERIALIZED (
    SELECT (SELECT count(*) FROM q) = (SELECT count(DISTINCT queue) FROM src)
           AND NOT EXISTS (SELECT 1 FROM src JOIN job_keys k
                              ON k.queue = src.queue AND k.idempotency_key = src.idempotency_key)
           AND NOT EXISTS (SELECT 1 FROM src WHERE src.idempotency_key IS NOT NULL
                            GROUP BY src.queue, src.idempotency_key HAVING count(*) > 1)
           AND NOT EXISTS (SELECT 1 FROM q WHERE q.max_depth IS NOT NULL
                              AND (SELECT coalesce(sum(c.n), 0) FROM job_counts c
                                    WHERE c.queue = q.name AND c.status IN ('pending', 'failed'))
                                  + (SELECT count(*) FROM src WHERE src.queue = q.name) > q.max_depth)
           AS ok
),
key AS (
    INSERT INTO job_keys (queue, idempotency_key, job_id)
    SELECT src.queue, src.idempotency_key, src.id
      FROM src
     WHERE src.idempotency_key IS NOT NULL AND (SELECT ok FROM ok)
     ORDER BY src.ord
),
ins AS (
    INSERT INTO jobs (id, queue, type, payload, priority, status, max_attempts, idempotency_key,
                      visible_at, aged_key)
    SELECT src.id, src.queue, src.type, coalesce(src.payload, '{}'::jsonb),
           coalesce(src.priority, 0), 'pending', coalesce(src.max_attempts, q.max_attempts),
           src.idempotency_key, src.visible_at,
           jobq_aged_key(src.visible_at, coalesce(src.priority, 0), q.aging_ms)
      FROM src JOIN q ON q.name = src.queue
     WHERE (SELECT ok FROM ok)
     ORDER BY src.ord
    RETURNING id, payload, max_attempts, created_at, visible_at
)
SELECT * FROM ins ORDER BY id;

-- name: JobGetByIdempotencyKey
-- The job an idempotency key already names in a queue, live or finished.
SELECT j.* FROM job_keys k JOIN jobs_all j ON j.id = k.job_id
 WHERE k.queue = %(queue)s AND k.idempotency_key = %(idempotency_key)s;
-- name: QueueDepths
-- Settings and waiting depth of the queues a batch targets, for its max_depth check.
SELECT q.name, q.max_depth,
       (SELECT coalesce(sum(c.n), 0) FROM job_counts c
         WHERE c.queue = q.name AND c.status IN ('pending', 'failed'))::bigint AS depth
  FROM queues q WHERE q.name = ANY(%(queues)s::text[]);

-- name: JobClaim
-- Lease up to %(limit)s claimable jobs of one unpaused queue in claim order; rows other claimers hold are skipped.
-- Plans without statistics (migration 0011): each partial index of waiting jobs carries a clause
-- that only its own statements state, here "lease_expiries >= 0" (always true), so that neither
-- jobs_waiting_idx nor jobs_claim_aged_idx can serve this pick, nor this index theirs. And the
-- planner must not know the LIMIT: told "100" while guessing (no ANALYZE) that the queue holds
-- 30 rows, it plans to read them all, and a bitmap scan plus a sort of every waiting job looks
-- cheaper than walking the index in order. As a subquery, the LIMIT is costed as a fraction of
-- the rows, as in a generic plan, and the ordered index walk wins at any depth.
WITH q AS (
    SELECT name, lease_ms FROM queues WHERE name = %(queue)s AND NOT paused
),
-- The claiming access token, live at this statement's snapshot: a revocation committed on any replica
-- before the statement began leases nothing (this process's table of tokens may not have read it yet).
-- NULL: the environment's admin token, or local mode, which nothing revokes. "revoked" also comes back,
-- as the one row of a claim that leased nothing for it (see the final SELECT), so that the caller tells
-- a revoked token from an empty queue without asking again. Read, not locked: FOR SHARE would have
-- every claim of every worker under the token write its one row.
caller AS (
    SELECT %(token_id)s::text IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tokens t
                            WHERE t.id = %(token_id)s::text AND t.revoked_at IS NULL) AS revoked
),
picked AS (
    SELECT j.id
      FROM jobs j
     WHERE j.queue = %(queue)s
       AND j.status IN ('pending', 'failed') AND j.lease_expiries >= 0
       AND j.visible_at <= now()
       AND (%(types)s::text[] IS NULL OR j.type = ANY(%(types)s::text[]))
       AND EXISTS (SELECT 1 FROM q) AND NOT (SELECT revoked FROM caller)
     ORDER BY j.priority DESC, j.visible_at, j.id
     LIMIT (SELECT %(limit)s::bigint)  -- hidden from the planner: see JobClaim's note
       FOR UPDATE OF j SKIP LOCKED
),
-- The picked ids go to the UPDATE as an array, not a join: a cached generic plan may then
-- only fetch them by primary key. Joined, a plan made while the table looked empty seq-scanned
-- all of jobs on every claim (15 ms at 20,000 rows).
claimed AS (
    UPDATE jobs j
       SET status       = 'running',
           attempt      = j.attempt + 1,
           lease_token  = nextval('jobs_lease_token_seq'),
           lease_ms     = coalesce(%(lease_ms)s, (SELECT lease_ms FROM q)),
           locked_until = now() + make_interval(secs => coalesce(%(lease_ms)s, (SELECT lease_ms FROM q)) / 1000.0),
           worker_id    = %(worker_id)s,
           claimed_at   = now()
     WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.*
)
-- Every row says whether the token was revoked; a revoked one gets a single row, its job columns NULL
-- (the claimed CTE is empty then: nothing was picked), and an empty claim under a live token no row.
-- The columns the answer and the events need, the jsonb ones as their JSON text: the service passes
-- that on to the answer as it is (parsing it to write it again was most of a claim's cost per job).
SELECT c.id, c.queue, c.type, c.payload::text AS payload, c.priority, c.status, c.attempt, c.max_attempts,
       c.idempotency_key, c.created_at, c.visible_at, c.locked_until, c.worker_id, c.completed_at,
       c.last_error, c.errors::text AS errors, c.result::text AS result, c.releases::text AS releases,
       c.lease_token, c.claimed_at, k.revoked AS token_revoked
  FROM caller k LEFT JOIN claimed c ON true
 WHERE c.id IS NOT NULL OR k.revoked
 ORDER BY c.priority DESC, c.visible_at, c.id;

-- name: JobClaimAged
-- JobClaim for a queue with aging_ms: effective priority order, from the aging index.
-- Without statistics it cannot take jobs_claim_idx (sorting every waiting job by aging key): that
-- index needs "lease_expiries >= 0", which only the plain claim states (migration 0011).
WITH q AS (
    SELECT name, lease_ms FROM queues WHERE name = %(queue)s AND NOT paused
),
-- The claiming token, live at this statement's snapshot: see JobClaim.
caller AS (
    SELECT %(token_id)s::text IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tokens t
                            WHERE t.id = %(token_id)s::text AND t.revoked_at IS NULL) AS revoked
),
picked AS (
    SELECT j.id
      FROM jobs j
     WHERE j.queue = %(queue)s
       AND j.status IN ('pending', 'failed')
       AND j.visible_at <= now()
       AND j.aged_key IS NOT NULL
       AND (%(types)s::text[] IS NULL OR j.type = ANY(%(types)s::text[]))
       AND EXISTS (SELECT 1 FROM q) AND NOT (SELECT revoked FROM caller)
     ORDER BY j.aged_key, j.id
     LIMIT (SELECT %(limit)s::bigint)  -- hidden from the planner: see JobClaim's note
       FOR UPDATE OF j SKIP LOCKED
),
-- The picked ids go to the UPDATE as an array, not a join: a cached generic plan may then
-- only fetch them by primary key. Joined, a plan made while the table looked empty seq-scanned
-- all of jobs on every claim (15 ms at 20,000 rows).
claimed AS (
    UPDATE jobs j
       SET status       = 'running',
           attempt      = j.attempt + 1,
           lease_token  = nextval('jobs_lease_token_seq'),
           lease_ms     = coalesce(%(lease_ms)s, (SELECT lease_ms FROM q)),
           locked_until = now() + make_interval(secs => coalesce(%(lease_ms)s, (SELECT lease_ms FROM q)) / 1000.0),
           worker_id    = %(worker_id)s,
           claimed_at   = now()
     WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.*
)
-- As JobClaim's (its columns too): one row with NULL job columns for a revoked token.
SELECT c.id, c.queue, c.type, c.payload::text AS payload, c.priority, c.status, c.attempt, c.max_attempts,
       c.idempotency_key, c.created_at, c.visible_at, c.locked_until, c.worker_id, c.completed_at,
       c.last_error, c.errors::text AS errors, c.result::text AS result, c.releases::text AS releases,
       c.lease_token, c.claimed_at, k.revoked AS token_revoked
  FROM caller k LEFT JOIN claimed c ON true
 WHERE c.id IS NOT NULL OR k.revoked
 ORDER BY c.aged_key, c.id;

-- name: JobClaimPaced
-- JobClaim for a queue with a rate_limit: at most rate_limit.jobs jobs handed out in any window of per_ms (per key), enforced by this statement alone; both claim orders (aging or not).
-- The window of each key is a row of rate_windows: the grants of the last per_ms (times and job
-- counts, oldest first). The statement picks candidates (FOR UPDATE SKIP LOCKED, as JobClaim), then
-- upserts the window row of each key it picked for (INSERT ... ON CONFLICT DO UPDATE). That upsert is
-- the guarantee: PostgreSQL locks the row, and under READ COMMITTED evaluates the SET on its latest
-- committed version, not on this statement's snapshot, so a claim on any replica that committed
-- grants to the window first is counted; the lock is held to commit, so the next claim on the key
-- waits for this one and counts it in turn. No read-then-write between statements, no race.
-- The SET computes the grant at t = greatest(clock_timestamp(), the window's last grant): evaluated
-- after the lock is taken, and never before an earlier grant, so grant times only grow in commit
-- order, and "room = jobs - grants in (t - per_ms, t]" bounds every window of per_ms. The grant is
-- appended even when 0 (RETURNING then says what this claim got); older entries with none are dropped,
-- so a window holds at most jobs + 1 entries. Keys are locked in key order: claims never deadlock.
-- What the snapshot knows of the windows only narrows the pick (a keyed claim skips keys whose window
-- was full: their jobs would be locked for nothing, and one tenant's backlog must not hide another's).
WITH q AS (
    SELECT name, lease_ms, aging_ms IS NOT NULL AS aged,
           (rate_limit ->> 'jobs')::integer AS jobs, (rate_limit ->> 'per_ms')::bigint AS per_ms,
           rate_limit ->> 'key' AS key_of
      FROM queues WHERE name = %(queue)s AND NOT paused
),
caller AS (  -- the claiming token, live at this statement's snapshot: see JobClaim
    SELECT %(token_id)s::text IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tokens t
                            WHERE t.id = %(token_id)s::text AND t.revoked_at IS NULL) AS revoked
),
-- Keys whose window was full at the snapshot (keyed limits only: a claim without a key picks
-- %(limit)s candidates and learns from its upsert how many it may take).
full_keys AS (
    SELECT coalesce(array_agg(w.key), '{}') AS keys
      FROM q JOIN rate_windows w ON w.queue = q.name
     WHERE q.key_of IS NOT NULL
       AND jobq_window_free_at(w.grant_at, w.grant_n, q.jobs, q.per_ms, clock_timestamp()) IS NOT NULL
),
-- Candidates in claim order, each with its key: the job type, a top-level payload field
-- ("payload.<field>", its text; a job without it has key ''), or '' for a limit without key.
-- Two branches gated on aging as in JobClaimMany (FOR UPDATE cannot apply to a UNION's inputs).
-- The queue's settings come in as scalar subqueries, never as a join: evaluated once, the gate is
-- a one-time filter, and the branch that is off reads no row (joined to q, it walked the index).
picked AS (
    SELECT c.id, c.key, row_number() OVER (PARTITION BY c.key ORDER BY c.ord) AS rank
      FROM (
           SELECT a.id, a.key, row_number() OVER () AS ord FROM (
                  SELECT j.id, coalesce(CASE WHEN (SELECT key_of FROM q) = 'type' THEN j.type
                                             ELSE j.payload ->> substr((SELECT key_of FROM q), 9) END, '') AS key
                    FROM jobs j
                   WHERE j.queue = %(queue)s AND NOT (SELECT aged FROM q)
                     AND j.status IN ('pending', 'failed') AND j.lease_expiries >= 0
                     AND j.visible_at <= now()
                     AND (%(types)s::text[] IS NULL OR j.type = ANY(%(types)s::text[]))
                     AND NOT (SELECT revoked FROM caller)
                     AND coalesce(CASE WHEN (SELECT key_of FROM q) = 'type' THEN j.type
                                       ELSE j.payload ->> substr((SELECT key_of FROM q), 9) END, '')
                         <> ALL ((SELECT keys FROM full_keys)::text[])
                   ORDER BY j.priority DESC, j.visible_at, j.id
                   LIMIT (SELECT %(limit)s::bigint)  -- hidden from the planner: see JobClaim's note
                     FOR UPDATE OF j SKIP LOCKED) AS a
           UNION ALL
           SELECT b.id, b.key, row_number() OVER () AS ord FROM (
                  SELECT j.id, coalesce(CASE WHEN (SELECT key_of FROM q) = 'type' THEN j.type
                                             ELSE j.payload ->> substr((SELECT key_of FROM q), 9) END, '') AS key
                    FROM jobs j
                   WHERE j.queue = %(queue)s AND (SELECT aged FROM q)
                     AND j.status IN ('pending', 'failed') AND j.visible_at <= now()
                     AND j.aged_key IS NOT NULL
                     AND (%(types)s::text[] IS NULL OR j.type = ANY(%(types)s::text[]))
                     AND NOT (SELECT revoked FROM caller)
                     AND coalesce(CASE WHEN (SELECT key_of FROM q) = 'type' THEN j.type
                                       ELSE j.payload ->> substr((SELECT key_of FROM q), 9) END, '')
                         <> ALL ((SELECT keys FROM full_keys)::text[])
                   ORDER BY j.aged_key, j.id
                   LIMIT (SELECT %(limit)s::bigint)
                     FOR UPDATE OF j SKIP LOCKED) AS b) AS c
),
wanted AS (
    SELECT p.key, count(*)::integer AS n FROM picked p GROUP BY p.key
),
-- The grant, per key: see the note above. A new key's window starts with this claim's grant; the
-- inserted row carries what the claim wants in grant_n, for the DO UPDATE to read as EXCLUDED.
granted AS (
    INSERT INTO rate_windows AS w (queue, key, grant_at, grant_n)
    SELECT q.name, k.key, ARRAY[clock_timestamp()], ARRAY[least(k.n, q.jobs)]
      FROM wanted k, q
     WHERE q.jobs IS NOT NULL
     ORDER BY k.key
    ON CONFLICT (queue, key) DO UPDATE
       SET (grant_at, grant_n) = (
           SELECT ARRAY(SELECT e.at FROM unnest(w.grant_at, w.grant_n) WITH ORDINALITY AS e(at, n, i)
                         WHERE e.n > 0 AND e.at > s.since ORDER BY e.i) || s.t,
                  ARRAY(SELECT e.n FROM unnest(w.grant_at, w.grant_n) WITH ORDINALITY AS e(at, n, i)
                         WHERE e.n > 0 AND e.at > s.since ORDER BY e.i)
                  || greatest(least(excluded.grant_n[1], (SELECT jobs FROM q)
                                    - jobq_window_used(w.grant_at, w.grant_n, s.since)), 0)::integer
             FROM (SELECT x.t, x.t - make_interval(secs => (SELECT per_ms FROM q) / 1000.0) AS since
                     FROM (SELECT greatest(clock_timestamp(), w.grant_at[cardinality(w.grant_at)]) AS t) AS x
                  ) AS s)
    RETURNING w.key, w.grant_n[cardinality(w.grant_n)] AS n,
              jobq_window_free_at(w.grant_at, w.grant_n, (SELECT jobs FROM q), (SELECT per_ms FROM q),
                                  w.grant_at[cardinality(w.grant_at)]) AS free_at
),
-- The candidates the limit lets through: the first n of each key in claim order (all of them
-- when the queue has no limit any more: the process read its settings before the change).
allowed AS (
    SELECT p.id FROM picked p LEFT JOIN granted g ON g.key = p.key
     WHERE (SELECT jobs FROM q) IS NULL OR p.rank <= g.n
),
claimed AS (
    UPDATE jobs j
       SET status       = 'running',
           attempt      = j.attempt + 1,
           lease_token  = nextval('jobs_lease_token_seq'),
           lease_ms     = coalesce(%(lease_ms)s, (SELECT lease_ms FROM q)),
           locked_until = now() + make_interval(secs => coalesce(%(lease_ms)s, (SELECT lease_ms FROM q)) / 1000.0),
           worker_id    = %(worker_id)s,
           claimed_at   = now()
     WHERE j.id = ANY (ARRAY(SELECT id FROM allowed))
    RETURNING j.*
),
-- How many candidates the limit held back, and in how many ms (by the database's clock) a window
-- this claim found full next has room: the service's wake-up timer for the claims that wait.
pace AS (
    SELECT (SELECT count(*) FROM picked) - (SELECT count(*) FROM allowed) AS held,
           (extract(epoch FROM least(
                (SELECT min(g.free_at) FROM granted g),
                (SELECT min(jobq_window_free_at(w.grant_at, w.grant_n, q.jobs, q.per_ms, clock_timestamp()))
                   FROM q JOIN rate_windows w ON w.queue = q.name
                  WHERE q.jobs IS NOT NULL AND (q.key_of IS NOT NULL OR w.key = ''))
           ) - clock_timestamp()) * 1000)::bigint AS free_in_ms
)
-- As JobClaim's (its columns too), and one row with NULL job columns when nothing was leased but
-- the limit held something back or will free room (the caller sets its timer from it).
SELECT c.id, c.queue, c.type, c.payload::text AS payload, c.priority, c.status, c.attempt, c.max_attempts,
       c.idempotency_key, c.created_at, c.visible_at, c.locked_until, c.worker_id, c.completed_at,
       c.last_error, c.errors::text AS errors, c.result::text AS result, c.releases::text AS releases,
       c.lease_token, c.claimed_at, k.revoked AS token_revoked,
       p.held AS _held, p.free_in_ms AS _free_in_ms
  FROM caller k CROSS JOIN pace p LEFT JOIN claimed c ON true
 WHERE c.id IS NOT NULL OR k.revoked OR p.held > 0 OR p.free_in_ms IS NOT NULL
 ORDER BY CASE WHEN (SELECT aged FROM q) THEN c.aged_key END, c.priority DESC, c.visible_at, c.id;

-- name: QueueCaps
-- The settings a claim or an enqueue needs to pick its statements: running cap, aging, whether claims are paced (rate_limit), the enqueue rate and the soft thresholds.
SELECT name, max_running, aging_ms, rate_limit IS NOT NULL AS paced, enqueue_rate, soft_depth, soft_lag_ms
  FROM queues WHERE name = ANY(%(queues)s::text[]);

-- name: QueueRunningSlots
-- How many more jobs a queue with max_running may start now; run after QueueClaimLock in the same transaction.
SELECT q.max_running - coalesce((SELECT sum(c.n) FROM job_counts c
                                  WHERE c.queue = q.name AND c.status = 'running'), 0) AS slots
  FROM queues q WHERE q.name = %(queue)s;

-- name: QueueClaimLock
-- Serialise claims on one max_running-capped queue until commit, so the cap holds across replicas.
SELECT pg_advisory_xact_lock(hashtextextended('jobq.claim:' || %(queue)s, 0));

-- name: LeaseHeartbeat
-- Extend a lease that is still held and not yet past its end.
-- Here and below, %(scope)s is the caller's queue pattern as a regular expression (NULL: every queue).
-- Here and below, a held lease's job is "(status = 'running') IS TRUE", not "status = 'running'":
-- the same rows, but the planner can then not prove that the reaper's index (running jobs only)
-- holds them, so it always fetches the job by primary key. With statistics taken while no job
-- ran, it walked that whole index instead, every running job, on each heartbeat, ack and fail
-- (5,000 running: a heartbeat took 1.5-20 ms instead of 0.1; a batch ack 9.5 instead of 1).
UPDATE jobs
   SET locked_until = now() + make_interval(secs => coalesce(%(extend_ms)s, lease_ms) / 1000.0)
 WHERE id = %(job_id)s AND lease_token = %(token)s AND (status = 'running') IS TRUE AND locked_until > now()
   AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text)
RETURNING locked_until;

-- name: LeaseAck
-- Complete the job of a lease still held (an expired lease not yet reaped still counts), moving it to jobs_history.
-- last_error is cleared: a completed job has no current error (earlier ones stay in errors).
-- Here and below, a finished job leaves jobs in the statement that finishes it (DELETE ...
-- RETURNING its finished row, INSERT INTO jobs_history): one statement, as conditional as the
-- UPDATE it replaces, and the counters see -1 running, +1 completed. expires_at is when its
-- queue's retention deletes it (the column defaults of queues if the queue row is missing).
WITH moved AS (
    DELETE FROM jobs j
     WHERE j.id = %(job_id)s AND j.lease_token = %(token)s AND (j.status = 'running') IS TRUE
       AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
    RETURNING j.id,
              j.queue,
              j.type,
              j.payload,
              j.priority,
              'completed'::text,
              j.attempt,
              j.max_attempts,
              j.idempotency_key,
              j.created_at,
              j.visible_at,
              NULL::timestamptz,
              j.worker_id,
              now(),
              NULL::text,
              j.errors,
              %(result)s::jsonb,
              j.lease_token,
              j.lease_ms,
              j.lease_expiries,
              j.claimed_at,
              NULL::double precision,
              now() + make_interval(secs => coalesce((SELECT q.retention_ms FROM queues q WHERE q.name = j.queue), 604800000) / 1000.0),
              -- After expires_at: added by migration 0012, as the last column of jobs_history.
              j.releases
)
INSERT INTO jobs_history SELECT * FROM moved
RETURNING *;
-- name: LeaseAckMany
-- Complete the jobs of many held leases in one statement, moving them to jobs_history; returns the leases that won.
WITH moved AS (
    DELETE FROM jobs j
     USING jsonb_to_recordset(%(acks)s::jsonb) AS a(job_id bigint, token bigint, result jsonb)
     WHERE j.id = a.job_id AND j.lease_token = a.token AND (j.status = 'running') IS TRUE
       AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
       -- Lets a cached generic plan fetch the jobs by primary key instead of reading every running job.
       AND j.id = ANY (ARRAY(SELECT (e->>'job_id')::bigint FROM jsonb_array_elements(%(acks)s::jsonb) AS e))
    RETURNING j.id,
              j.queue,
              j.type,
              j.payload,
              j.priority,
              'completed'::text,
              j.attempt,
              j.max_attempts,
              j.idempotency_key,
              j.created_at,
              j.visible_at,
              NULL::timestamptz,
              j.worker_id,
              now(),
              NULL::text,
              j.errors,
              a.result,
              j.lease_token,
              j.lease_ms,
              j.lease_expiries,
              j.claimed_at,
              NULL::double precision,
              now() + make_interval(secs => coalesce((SELECT q.retention_ms FROM queues q WHERE q.name = j.queue), 604800000) / 1000.0),
              -- After expires_at: added by migration 0012, as the last column of jobs_history.
              j.releases
)
INSERT INTO jobs_history SELECT * FROM moved
RETURNING id, lease_token, queue, type, worker_id, attempt, claimed_at, completed_at;
-- name: LeaseBackoffInputs
-- What the retry policy (jobq.domain.retry) needs to schedule the retry of a held lease's job.
SELECT j.attempt, q.backoff_base_ms, q.backoff_max_ms
  FROM jobs j JOIN queues q ON q.name = j.queue
 WHERE j.id = %(job_id)s AND j.lease_token = %(token)s AND (j.status = 'running') IS TRUE
   AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text);

-- name: LeaseFail
-- Record a failed attempt of a held lease: retry after %(delay_ms)s, or dead (moved to jobs_history) when out of attempts or not retryable.
WITH cur AS (
    SELECT j.id, q.aging_ms,
           (NOT %(retry)s OR j.attempt >= j.max_attempts) AS dead,
           now() + make_interval(secs => %(delay_ms)s::bigint / 1000.0) AS retry_at
      FROM jobs j JOIN queues q ON q.name = j.queue
     WHERE j.id = %(job_id)s AND j.lease_token = %(token)s AND (j.status = 'running') IS TRUE
       AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
),
kept AS (
    UPDATE jobs j
       SET status       = 'failed',
           visible_at   = cur.retry_at,
           aged_key     = jobq_aged_key(cur.retry_at, j.priority, cur.aging_ms),
           last_error   = %(error)s,
           errors       = j.errors || jsonb_build_array(jsonb_build_object(
                            'attempt', j.attempt,
                            'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                            'error', %(error)s::text, 'kind', 'failed')),
           locked_until = NULL
      FROM cur
     WHERE j.id = cur.id AND NOT cur.dead AND j.lease_token = %(token)s AND (j.status = 'running') IS TRUE
    RETURNING j.*
),
moved AS (
    DELETE FROM jobs j
     USING cur
     WHERE j.id = cur.id AND cur.dead AND j.lease_token = %(token)s AND (j.status = 'running') IS TRUE
    RETURNING j.id,
              j.queue,
              j.type,
              j.payload,
              j.priority,
              'dead'::text,
              j.attempt,
              j.max_attempts,
              j.idempotency_key,
              j.created_at,
              j.visible_at,
              NULL::timestamptz,
              j.worker_id,
              now(),
              %(error)s::text,
              j.errors || jsonb_build_array(jsonb_build_object(
                                  'attempt', j.attempt,
                                  'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                  'error', %(error)s::text, 'kind', 'failed')),
              j.result,
              j.lease_token,
              j.lease_ms,
              j.lease_expiries,
              j.claimed_at,
              NULL::double precision,
              now() + make_interval(secs => coalesce((SELECT q.dead_retention_ms FROM queues q WHERE q.name = j.queue), 2592000000) / 1000.0),
              -- After expires_at: added by migration 0012, as the last column of jobs_history.
              j.releases
),
died AS (
    INSERT INTO jobs_history SELECT * FROM moved RETURNING *
)
-- By name, in the columns of jobs: jobs_history's order differs (expires_at sits before the
-- columns added since 0010).
SELECT kept.* FROM kept
UNION ALL
SELECT d.id, d.queue, d.type, d.payload, d.priority, d.status, d.attempt, d.max_attempts,
       d.idempotency_key, d.created_at, d.visible_at, d.locked_until, d.worker_id, d.completed_at,
       d.last_error, d.errors, d.result, d.lease_token, d.lease_ms, d.lease_expiries, d.claimed_at,
       d.aged_key, d.releases
  FROM died d;
-- name: LeaseRelease
-- Give a held lease's job back without spending its attempt (an expired lease not yet reaped still counts): pending, visible after %(delay_ms)s, attempt taken back, recorded in releases (the 20 most recent); errors, last_error and lease_expiries unchanged.
-- The entry records the claim released (its attempt number and worker); the SET reads the
-- row as it was. The lease token stays: with the job no longer running, the lease is dead,
-- and the next claim draws a new one.
UPDATE jobs j
   SET status       = 'pending',
       visible_at   = now() + make_interval(secs => %(delay_ms)s::bigint / 1000.0),
       aged_key     = jobq_aged_key(now() + make_interval(secs => %(delay_ms)s::bigint / 1000.0), j.priority,
                                    q.aging_ms),
       attempt      = j.attempt - 1,
       locked_until = NULL,
       worker_id    = NULL,
       releases     = jsonb_path_query_array(j.releases || jsonb_build_array(jsonb_build_object(
                          'attempt', j.attempt,
                          'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                          'worker_id', j.worker_id,
                          'delay_ms', %(delay_ms)s::bigint)),
                      '$[last - 19 to last]')
  FROM queues q  -- as LeaseFail: a job's queue exists while the job does
 WHERE q.name = j.queue
   AND j.id = %(job_id)s AND j.lease_token = %(token)s AND (j.status = 'running') IS TRUE
   AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
RETURNING j.*;
-- name: LeaseReleaseMany
-- LeaseRelease for many held leases in one statement, each with its own delay; returns the jobs released.
UPDATE jobs j
   SET status       = 'pending',
       visible_at   = now() + make_interval(secs => a.delay_ms / 1000.0),
       aged_key     = jobq_aged_key(now() + make_interval(secs => a.delay_ms / 1000.0), j.priority,
                                    q.aging_ms),
       attempt      = j.attempt - 1,
       locked_until = NULL,
       worker_id    = NULL,
       releases     = jsonb_path_query_array(j.releases || jsonb_build_array(jsonb_build_object(
                          'attempt', j.attempt,
                          'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                          'worker_id', j.worker_id,
                          'delay_ms', a.delay_ms)),
                      '$[last - 19 to last]')
  FROM jsonb_to_recordset(%(releases)s::jsonb) AS a(job_id bigint, token bigint, delay_ms bigint),
       queues q
 WHERE q.name = j.queue AND j.id = a.job_id AND j.lease_token = a.token AND (j.status = 'running') IS TRUE
   AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
   -- Lets a cached generic plan fetch the jobs by primary key (see LeaseAckMany).
   AND j.id = ANY (ARRAY(SELECT (e->>'job_id')::bigint FROM jsonb_array_elements(%(releases)s::jsonb) AS e))
RETURNING j.*;
-- name: LeaseState
-- Why a lease operation changed nothing: the job's current token and status, live or finished (NULL row: no such job, or not one of the caller's).
SELECT lease_token, status FROM jobs WHERE id = %(job_id)s AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text)
UNION ALL
SELECT lease_token, status FROM jobs_history WHERE id = %(job_id)s AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text);
-- name: LeaseJobsGone
-- Of the jobs behind leases that no operation found (%(job_ids)s, with their %(tokens)s): those that existed, with such a lease, and are deleted (a queue's purge, retention). Their leases are lost, not unknown: ids and tokens come from sequences, so one at or below the sequence's last value was handed out.
SELECT u.id FROM unnest(%(job_ids)s::bigint[], %(tokens)s::bigint[]) AS u(id, token)
 WHERE u.id > 0 AND u.token > 0
   AND u.id <= coalesce(pg_sequence_last_value(pg_get_serial_sequence('jobs', 'id')::regclass), 0)
   AND u.token <= coalesce(pg_sequence_last_value('jobs_lease_token_seq'::regclass), 0)
   AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = u.id)
   AND NOT EXISTS (SELECT 1 FROM jobs_history h WHERE h.id = u.id);
-- name: LeaseStateMany
-- The current tokens and statuses of the jobs behind many leases, live or finished, for batch ack's per-lease answer.
SELECT id, lease_token, status FROM jobs WHERE id = ANY(%(job_ids)s::bigint[]) AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text)
UNION ALL
SELECT id, lease_token, status FROM jobs_history WHERE id = ANY(%(job_ids)s::bigint[]) AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text);
-- name: JobReapExpired
-- Process leases past their end: back to pending (claimable at once) or dead (moved to jobs_history) when out of attempts or a poison pill.
WITH expired AS (
    SELECT j.id, q.aging_ms,
           (j.attempt >= j.max_attempts OR j.lease_expiries + 1 >= q.max_lease_expiries) AS dead
      FROM jobs j JOIN queues q ON q.name = j.queue
     WHERE j.status = 'running' AND j.locked_until < now()
     ORDER BY j.locked_until
     LIMIT (SELECT %(limit)s::bigint)  -- hidden from the planner, as in JobClaim: a batch at a time, not every expired lease sorted
       FOR UPDATE OF j SKIP LOCKED
),
back AS (
    UPDATE jobs j
       SET status         = 'pending',
           visible_at     = now(),
           aged_key       = jobq_aged_key(now(), j.priority, e.aging_ms),
           lease_expiries = j.lease_expiries + 1,
           last_error     = 'lease expired',
           errors         = j.errors || jsonb_build_array(jsonb_build_object(
                                'attempt', j.attempt,
                                'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                'error', 'lease expired', 'kind', 'lease_expired')),
           locked_until   = NULL
      FROM expired e
     WHERE j.id = e.id AND NOT e.dead
       AND j.id = ANY (ARRAY(SELECT id FROM expired))  -- by primary key, whatever the plan (see JobClaim)
    RETURNING j.id, j.queue, j.type, j.status, j.worker_id, j.attempt, j.claimed_at
),
moved AS (
    DELETE FROM jobs j
     USING expired e
     WHERE j.id = e.id AND e.dead
       AND j.id = ANY (ARRAY(SELECT id FROM expired))
    RETURNING j.id,
              j.queue,
              j.type,
              j.payload,
              j.priority,
              'dead'::text,
              j.attempt,
              j.max_attempts,
              j.idempotency_key,
              j.created_at,
              j.visible_at,
              NULL::timestamptz,
              j.worker_id,
              now(),
              'lease expired'::text,
              j.errors || jsonb_build_array(jsonb_build_object(
                                'attempt', j.attempt,
                                'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                'error', 'lease expired', 'kind', 'lease_expired')),
              j.result,
              j.lease_token,
              j.lease_ms,
              j.lease_expiries + 1,
              j.claimed_at,
              NULL::double precision,
              now() + make_interval(secs => coalesce((SELECT q.dead_retention_ms FROM queues q WHERE q.name = j.queue), 2592000000) / 1000.0),
              -- After expires_at: added by migration 0012, as the last column of jobs_history.
              j.releases
),
died AS (
    INSERT INTO jobs_history SELECT * FROM moved
    RETURNING id, queue, type, status, worker_id, attempt, claimed_at
)
SELECT * FROM back UNION ALL SELECT * FROM died;
-- name: JobGet
-- One job by id, live or finished (none outside the caller's queues).
SELECT * FROM jobs_all WHERE id = %(job_id)s AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text);
-- name: JobCancel
-- Cancel a waiting or running job, moving it to jobs_history; a running job's lease dies with it.
WITH moved AS (
    DELETE FROM jobs j
     WHERE j.id = %(job_id)s AND j.status IN ('pending', 'failed', 'running')
       AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
    RETURNING j.id,
              j.queue,
              j.type,
              j.payload,
              j.priority,
              'cancelled'::text,
              j.attempt,
              j.max_attempts,
              j.idempotency_key,
              j.created_at,
              j.visible_at,
              NULL::timestamptz,
              j.worker_id,
              now(),
              j.last_error,
              j.errors,
              j.result,
              j.lease_token,
              j.lease_ms,
              j.lease_expiries,
              j.claimed_at,
              NULL::double precision,
              now() + make_interval(secs => coalesce((SELECT q.retention_ms FROM queues q WHERE q.name = j.queue), 604800000) / 1000.0),
              -- After expires_at: added by migration 0012, as the last column of jobs_history.
              j.releases
)
INSERT INTO jobs_history SELECT * FROM moved
RETURNING *;
-- name: JobRetry
-- Put a dead, cancelled or failed job back to pending, visible now, attempts reset; errors are kept. A dead or cancelled one moves back from jobs_history with its id.
WITH back AS (
    DELETE FROM jobs_history h
     WHERE h.id = %(job_id)s AND h.status IN ('dead', 'cancelled')
       AND (%(scope)s::text IS NULL OR h.queue ~ %(scope)s::text)
    RETURNING h.*
),
moved AS (
    INSERT INTO jobs (id, queue, type, payload, priority, status, attempt, max_attempts, idempotency_key,
                      created_at, visible_at, locked_until, worker_id, completed_at, last_error, errors, result,
                      lease_token, lease_ms, lease_expiries, claimed_at, aged_key, releases)
    SELECT b.id, b.queue, b.type, b.payload, b.priority, 'pending', 0, b.max_attempts, b.idempotency_key,
           b.created_at, now(), NULL, b.worker_id, NULL, b.last_error, b.errors, b.result,
           b.lease_token, b.lease_ms, 0, b.claimed_at, jobq_aged_key(now(), b.priority, q.aging_ms),
           b.releases
      FROM back b LEFT JOIN queues q ON q.name = b.queue
    RETURNING *
),
kept AS (
    UPDATE jobs j
       SET status = 'pending', visible_at = now(), attempt = 0, lease_expiries = 0,
           locked_until = NULL, completed_at = NULL,
           aged_key = jobq_aged_key(now(), j.priority, q.aging_ms)
      FROM queues q
     WHERE q.name = j.queue AND j.id = %(job_id)s AND j.status IN ('dead', 'cancelled', 'failed')
       AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
    RETURNING j.*
)
SELECT * FROM moved UNION ALL SELECT * FROM kept;
-- name: QueueExists
-- Whether a queue exists: an enqueue that inserted nothing tells a deleted queue from a full one.
SELECT EXISTS (SELECT 1 FROM queues WHERE name = %(queue)s) AS exists;

-- name: QueueLockForDelete
-- Lock a queue's row for its delete until commit: enqueues in flight (JobInsert's FOR KEY SHARE) finish first, later ones wait and then find no queue. No row: no such queue.
SELECT name FROM queues WHERE name = %(queue)s FOR UPDATE;

-- name: QueueUsage
-- What keeps a queue from being deleted: its waiting, running, failed and dead jobs by status (the counters, nonzero only), and the schedules and topic subscriptions that name it.
SELECT (SELECT coalesce(jsonb_object_agg(c.status, c.n), '{}'::jsonb)
          FROM (SELECT status, sum(n)::bigint AS n FROM job_counts
                 WHERE queue = %(queue)s AND status IN ('pending', 'running', 'failed', 'dead')
                 GROUP BY status HAVING sum(n) <> 0) c) AS counts,
       ARRAY(SELECT s.name FROM schedules s WHERE s.job_queue = %(queue)s ORDER BY s.name) AS schedules,
       ARRAY(SELECT t.topic FROM topic_subscriptions t WHERE t.queue = %(queue)s ORDER BY t.topic) AS topics;

-- name: QueueJobsPurge
-- One batch of a queue's purge: up to %(limit)s of its live jobs (any status, running ones too: their leases die), row locks only, and their idempotency keys; returns how many.
WITH picked AS (
    SELECT j.id FROM jobs j WHERE j.queue = %(queue)s
     -- jobs_queue_status_id_idx's order: each batch probes the index where the last one
     -- ended, instead of reading from the table's start past the rows already deleted.
     ORDER BY j.status, j.id
     LIMIT (SELECT %(limit)s::bigint)
       FOR UPDATE OF j
),
gone AS (
    DELETE FROM jobs j
     WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND j.queue = %(queue)s
    RETURNING j.id, j.queue, j.idempotency_key
),
keys AS (
    DELETE FROM job_keys k USING gone g
     WHERE g.idempotency_key IS NOT NULL
       AND k.queue = g.queue AND k.idempotency_key = g.idempotency_key AND k.job_id = g.id
)
SELECT count(*)::bigint AS n FROM gone;

-- name: QueueHistoryPurge
-- One batch of a queue's delete: up to %(limit)s of its finished jobs of %(statuses)s (completed and cancelled; dead too for a purge), and their idempotency keys; returns how many.
WITH doomed AS (
    SELECT h.id, h.expires_at FROM jobs_history h
     WHERE h.queue = %(queue)s AND h.status = ANY (%(statuses)s::text[])
     LIMIT (SELECT %(limit)s::bigint)
),
gone AS (
    -- By id and expiry, as arrays (as HistoryDeleteExpired): each partition is probed by id.
    DELETE FROM jobs_history h
     WHERE h.id = ANY (ARRAY(SELECT id FROM doomed))
       AND h.expires_at = ANY (ARRAY(SELECT expires_at FROM doomed))
       AND h.queue = %(queue)s
    RETURNING h.id, h.queue, h.idempotency_key
),
keys AS (
    DELETE FROM job_keys k USING gone g
     WHERE g.idempotency_key IS NOT NULL
       AND k.queue = g.queue AND k.idempotency_key = g.idempotency_key AND k.job_id = g.id
)
SELECT count(*)::bigint AS n FROM gone;

-- name: QueueDelete
-- Delete a queue whose jobs are gone (under QueueLockForDelete): its row, and its counters (which then sum to zero), so that no listing or /metrics shows it.
WITH counters AS (
    DELETE FROM job_counts WHERE queue = %(queue)s
)
DELETE FROM queues WHERE name = %(queue)s RETURNING name;

-- name: QueueRestore
-- After a delete: jobs that an enqueue outside the API (the SQL functions, which read the queue without locking it) wrote into the queue as it was deleted get their queue back, with the defaults, and its counters are corrected from its rows. Returns the name when it did.
WITH made AS (
    INSERT INTO queues (name) SELECT %(queue)s
     WHERE EXISTS (SELECT 1 FROM jobs WHERE queue = %(queue)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING name
),
-- The delete removed the counter rows: a job counted before that removal is counted again.
fixed AS (
    INSERT INTO job_counts AS c (queue, status, type, shard, n)
    SELECT %(queue)s, k.status, k.type, 0, k.actual - k.counted
      FROM (SELECT coalesce(a.status, b.status) AS status, coalesce(a.type, b.type) AS type,
                   coalesce(a.n, 0) AS actual, coalesce(b.n, 0) AS counted
              FROM (SELECT status, type, count(*) AS n FROM jobs WHERE queue = %(queue)s
                     GROUP BY status, type) a
              FULL JOIN (SELECT status, type, sum(n) AS n FROM job_counts
                          WHERE queue = %(queue)s AND status IN ('pending', 'running', 'failed')
                          GROUP BY status, type) b ON a.status = b.status AND a.type = b.type) k
     WHERE k.actual <> k.counted AND EXISTS (SELECT 1 FROM made)
    ON CONFLICT (queue, status, type, shard) DO UPDATE SET n = c.n + excluded.n
)
SELECT name FROM made;

-- name: QueueGet
-- One queue's settings.
SELECT * FROM queues WHERE name = %(queue)s;

-- name: QueueList
-- Every queue's settings, by name.
SELECT * FROM queues ORDER BY name;

-- name: QueueCounts
-- Job counts by queue, status and type from the trigger-kept counters (no scan of jobs).
SELECT queue, status, type, sum(n)::bigint AS n
  FROM job_counts
 WHERE %(queue)s::text IS NULL OR queue = %(queue)s
 GROUP BY queue, status, type
HAVING sum(n) <> 0;

-- name: QueueOldestWaiting
-- Lag of the oldest job claimable now, per queue, in ms (from jobs_waiting_idx); a paused queue has none claimable. Counted from year 1 at the earliest, as jobs are read (store.db): an older visible_at, -infinity included, written outside the API, must not fail the queue's listing.
-- "attempt >= 0" is always true; stated here and in the index's predicate (migration 0011) so
-- that this index serves these reads and no claim can take it, whatever the statistics.
SELECT q.name AS queue,
       (SELECT (extract(epoch FROM now() - greatest(j.visible_at, '0001-01-01 00:00:00+00')) * 1000)::bigint
          FROM jobs j
         WHERE j.queue = q.name AND j.status IN ('pending', 'failed') AND j.attempt >= 0
           AND j.visible_at <= now() AND NOT q.paused
         ORDER BY j.visible_at LIMIT 1) AS oldest_waiting_ms
  FROM queues q
 WHERE %(queue)s::text IS NULL OR q.name = %(queue)s;

-- name: QueueAgedKeysReset
-- After aging_ms changed: recompute (or clear) the aging keys of a queue's waiting jobs (reads every one: a settings change, never periodic).
UPDATE jobs j
   SET aged_key = jobq_aged_key(j.visible_at, j.priority, q.aging_ms)
  FROM queues q
 WHERE q.name = %(queue)s AND j.queue = q.name AND j.status IN ('pending', 'failed')
   AND j.aged_key IS DISTINCT FROM jobq_aged_key(j.visible_at, j.priority, q.aging_ms);

-- name: JobWritersInFlight
-- The transactions writing jobs now (not ours), by virtual transaction id: a change of aging_ms waits for them, as they may have keyed their jobs by the old setting.
SELECT coalesce(array_agg(DISTINCT virtualtransaction), '{}') AS writers
  FROM pg_locks
 WHERE locktype = 'relation' AND relation = 'jobs'::regclass AND mode = 'RowExclusiveLock'
   AND pid IS DISTINCT FROM pg_backend_pid();

-- name: JobReplayDead
-- Replay one batch of dead jobs matching the filter, as JobRetry does (back to jobs with their ids); errors are kept.
WITH picked AS (
    SELECT h.id FROM jobs_history h
     WHERE h.status = 'dead'
       AND (%(queue)s::text IS NULL OR h.queue = %(queue)s)
       AND (%(type)s::text IS NULL OR h.type = %(type)s)
       AND (%(scope)s::text IS NULL OR h.queue ~ %(scope)s::text)
     ORDER BY h.id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
),
back AS (
    DELETE FROM jobs_history h
     WHERE h.id = ANY (ARRAY(SELECT id FROM picked)) AND h.status = 'dead'
    RETURNING h.*
)
INSERT INTO jobs (id, queue, type, payload, priority, status, attempt, max_attempts, idempotency_key,
                      created_at, visible_at, locked_until, worker_id, completed_at, last_error, errors, result,
                      lease_token, lease_ms, lease_expiries, claimed_at, aged_key, releases)
SELECT b.id, b.queue, b.type, b.payload, b.priority, 'pending', 0, b.max_attempts, b.idempotency_key,
           b.created_at, now(), NULL, b.worker_id, NULL, b.last_error, b.errors, b.result,
           b.lease_token, b.lease_ms, 0, b.claimed_at, jobq_aged_key(now(), b.priority, q.aging_ms),
           b.releases
  FROM back b LEFT JOIN queues q ON q.name = b.queue
RETURNING id, queue, type, worker_id, attempt;
-- name: JobPurgeDead
-- Delete one batch of dead jobs matching the filter, and their idempotency keys.
WITH gone AS (
    DELETE FROM jobs_history
     WHERE id = ANY (ARRAY(SELECT h.id FROM jobs_history h
                            WHERE h.status = 'dead'
                              AND (%(queue)s::text IS NULL OR h.queue = %(queue)s)
                              AND (%(type)s::text IS NULL OR h.type = %(type)s)
                              AND (%(scope)s::text IS NULL OR h.queue ~ %(scope)s::text)
                            ORDER BY h.id
                            LIMIT %(limit)s
                              FOR UPDATE SKIP LOCKED))
       AND status = 'dead'
    RETURNING id, queue, type, idempotency_key
),
keys AS (
    DELETE FROM job_keys k USING gone g
     WHERE k.queue = g.queue AND k.idempotency_key = g.idempotency_key AND k.job_id = g.id
)
SELECT id, queue, type FROM gone;
-- name: MetricsDepths
-- Gauges for /metrics: job counts by queue, type and status, from the counters.
SELECT queue, type, status, sum(n)::bigint AS n FROM job_counts
 GROUP BY queue, type, status HAVING sum(n) <> 0;

-- name: TokenInsert
-- A new token: its id, name, role, queue pattern, enqueue rate (JSON, or NULL) and the hash of its secret.
INSERT INTO tokens (id, name, role, queues, hash, enqueue_rate)
VALUES (%(id)s, %(name)s, %(role)s, %(queues)s, %(hash)s, %(enqueue_rate)s::jsonb)
RETURNING id, name, role, queues, created_at, revoked_at, enqueue_rate;

-- name: TokenList
-- Every token ever created, newest first; never the hash.
SELECT id, name, role, queues, created_at, revoked_at, enqueue_rate FROM tokens ORDER BY created_at DESC, id;

-- name: TokenRevoke
-- Revoke a token (a second revoke keeps the first time). No row: no such token.
UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = %(id)s
RETURNING id, name, role, queues, created_at, revoked_at, enqueue_rate;

-- name: TokenSetRate
-- Set (or clear, NULL) a token's enqueue rate. No row: no such token.
UPDATE tokens SET enqueue_rate = %(enqueue_rate)s::jsonb WHERE id = %(id)s
RETURNING id, name, role, queues, created_at, revoked_at, enqueue_rate;

-- name: TokensLive
-- What each replica keeps in memory to check requests against, re-read every half second.
SELECT id, role, queues, hash, enqueue_rate FROM tokens WHERE revoked_at IS NULL;

-- name: TokensEver
-- Whether any token was ever created, revoked ones included: local mode is only for a database that never had one.
SELECT EXISTS (SELECT 1 FROM tokens) AS ever;

-- name: ScheduleUpsert
-- Create or replace a schedule (PUT): what was fired before (last_fired_at, last_job_id) and a fire waiting for room in a full queue are kept, unless it is now disabled; created tells which.
INSERT INTO schedules AS s (name, cron, timezone, misfire, enabled, job_queue, job_type, job_payload,
                            job_priority, job_max_attempts, next_fire_at)
VALUES (%(name)s, %(cron)s, %(timezone)s, %(misfire)s, %(enabled)s, %(job_queue)s, %(job_type)s,
        %(job_payload)s::jsonb, %(job_priority)s, %(job_max_attempts)s, %(next_fire_at)s)
ON CONFLICT (name) DO UPDATE
   SET cron             = excluded.cron,
       timezone         = excluded.timezone,
       misfire          = excluded.misfire,
       enabled          = excluded.enabled,
       job_queue        = excluded.job_queue,
       job_type         = excluded.job_type,
       job_payload      = excluded.job_payload,
       job_priority     = excluded.job_priority,
       job_max_attempts = excluded.job_max_attempts,
       next_fire_at     = excluded.next_fire_at,
       pending_fire_at  = CASE WHEN excluded.enabled THEN s.pending_fire_at END,
       updated_at       = now()
RETURNING *, (xmax = 0) AS created;

-- name: ScheduleGet
-- One schedule by name.
SELECT * FROM schedules WHERE name = %(name)s;

-- name: ScheduleGetForUpdate
-- One schedule by name, locked until commit: a PATCH reads, changes and writes it back while the scheduler waits.
SELECT * FROM schedules WHERE name = %(name)s FOR UPDATE;

-- name: ScheduleList
-- Every schedule, by name.
SELECT * FROM schedules ORDER BY name;

-- name: ScheduleSave
-- Write back a schedule a PATCH changed (after ScheduleGetForUpdate, in its transaction).
UPDATE schedules
   SET cron = %(cron)s, timezone = %(timezone)s, misfire = %(misfire)s, enabled = %(enabled)s,
       job_queue = %(job_queue)s, job_type = %(job_type)s, job_payload = %(job_payload)s::jsonb,
       job_priority = %(job_priority)s, job_max_attempts = %(job_max_attempts)s,
       next_fire_at = %(next_fire_at)s, pending_fire_at = %(pending_fire_at)s, updated_at = now()
 WHERE name = %(name)s
RETURNING *;

-- name: ScheduleDelete
-- Delete a schedule; no row: there was none. Jobs it enqueued stay.
DELETE FROM schedules WHERE name = %(name)s RETURNING name;

-- name: ScheduleDueLock
-- The schedules due at %(now)s (a fire time reached, or a fire waiting for room in a full queue), locked until commit; rows another replica's scheduler holds are skipped, so each fire happens once.
-- %(seen)s: the schedules this turn handled already (a fire still waiting for room is due again at once).
SELECT * FROM schedules
 WHERE enabled AND (next_fire_at <= %(now)s OR pending_fire_at IS NOT NULL)
   AND name <> ALL(%(seen)s::text[])
 ORDER BY coalesce(pending_fire_at, next_fire_at), name
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED;

-- name: ScheduleFired
-- A scheduler turn's bookkeeping of one schedule (in the transaction of ScheduleDueLock and the fire's enqueue).
UPDATE schedules
   SET next_fire_at    = %(next_fire_at)s,
       pending_fire_at = %(pending_fire_at)s,
       last_fired_at   = coalesce(%(last_fired_at)s, last_fired_at),
       last_job_id     = coalesce(%(last_job_id)s, last_job_id)
 WHERE name = %(name)s;

-- name: ScheduleNextWake
-- When a scheduler has something to do next: the earliest fire time of the enabled schedules, and whether any fire waits for room in a full queue.
SELECT min(next_fire_at) AS next_fire_at, coalesce(bool_or(pending_fire_at IS NOT NULL), false) AS pending
  FROM schedules WHERE enabled;

-- name: ScheduleTableExists
-- Whether the database was migrated far enough for schedules (the service may answer before `jobq migrate` ran).
SELECT to_regclass('schedules') IS NOT NULL AS present;

-- name: TopicSubscribe
-- Subscribe a queue to a topic, or replace the subscription's type override (PUT); created tells which. No row: the queue does not exist (deleted as it was subscribed).
-- The queue's row is locked first, as the foreign key's check would lock it, but here a queue
-- deleted meanwhile inserts nothing instead of failing the statement.
WITH q AS (
    SELECT name FROM queues WHERE name = %(queue)s FOR KEY SHARE
)
INSERT INTO topic_subscriptions AS s (topic, queue, type)
SELECT %(topic)s, q.name, %(type)s FROM q
ON CONFLICT (topic, queue) DO UPDATE SET type = excluded.type
RETURNING s.topic, s.queue, s.type, s.created_at, (xmax = 0) AS created;

-- name: TopicUnsubscribe
-- Delete a subscription; no row: there was none. Jobs already published to the queue stay.
DELETE FROM topic_subscriptions WHERE topic = %(topic)s AND queue = %(queue)s RETURNING topic;

-- name: TopicList
-- Every subscription, by topic then queue.
SELECT topic, queue, type, created_at FROM topic_subscriptions ORDER BY topic, queue;

-- name: TopicGet
-- One topic's subscriptions, by queue.
SELECT topic, queue, type, created_at FROM topic_subscriptions WHERE topic = %(topic)s ORDER BY queue;

-- name: TopicSubscriptionsLock
-- A publish's subscribers, share-locked until its commit: an unsubscribe waits for the publish, so each publish reaches exactly the queues subscribed when it read them.
SELECT queue, type FROM topic_subscriptions WHERE topic = %(topic)s ORDER BY queue FOR SHARE;

-- name: JobPurgeDeadOne
-- Delete one dead job by id (the dashboard's single purge), and its idempotency key; nothing for a job not dead.
WITH gone AS (
    DELETE FROM jobs_history
     WHERE id = %(job_id)s AND status = 'dead'
       AND (%(scope)s::text IS NULL OR queue ~ %(scope)s::text)
    RETURNING id, queue, type, idempotency_key
),
keys AS (
    DELETE FROM job_keys k USING gone g
     WHERE k.queue = g.queue AND k.idempotency_key = g.idempotency_key AND k.job_id = g.id
)
SELECT id, queue, type FROM gone;
-- name: JobDelete
-- Delete one job that is not running, live (jobs) or finished (jobs_history), and its idempotency key; nothing for a running job. The counters follow through their delete triggers.
WITH live AS (
    DELETE FROM jobs j
     WHERE j.id = %(job_id)s AND j.status <> 'running'
       AND (%(scope)s::text IS NULL OR j.queue ~ %(scope)s::text)
    RETURNING j.id, j.queue, j.type, j.status, j.worker_id, j.attempt, j.idempotency_key
),
finished AS (
    DELETE FROM jobs_history h
     WHERE h.id = %(job_id)s
       AND (%(scope)s::text IS NULL OR h.queue ~ %(scope)s::text)
    RETURNING h.id, h.queue, h.type, h.status, h.worker_id, h.attempt, h.idempotency_key
),
gone AS (
    SELECT * FROM live UNION ALL SELECT * FROM finished
),
keys AS (
    DELETE FROM job_keys k USING gone g
     WHERE k.queue = g.queue AND k.idempotency_key = g.idempotency_key AND k.job_id = g.id
)
SELECT id, queue, type, status, worker_id, attempt FROM gone;
-- name: WorkersSeen
-- Workers seen lately, merged by worker_id: those that beat within the window (the workers table: a row per worker process, read whole), those holding running jobs (jobs_lease_expiry_idx: as many rows as jobs run at once; seen at their latest claim), and those that finished a job within the window (jobs_history_finished_idx, one range per queue and final status: as many rows as jobs finished in the window). What a worker said of itself is null for one known only from its jobs.
WITH seen AS (
    SELECT w.worker_id, sum(w.running)::bigint AS running, max(w.seen_at) AS last_seen_at,
           array_agg(DISTINCT w.queue) AS queues
      FROM (SELECT j.worker_id, j.queue, count(*) AS running,
                   max(j.claimed_at) AS seen_at
              FROM jobs j
             WHERE j.status = 'running' AND j.worker_id IS NOT NULL
             GROUP BY j.worker_id, j.queue
            UNION ALL
            SELECT f.worker_id, q.name, 0, max(f.completed_at)
              FROM queues q
              CROSS JOIN LATERAL (
                    SELECT j.worker_id, j.completed_at FROM jobs_history j
                     WHERE j.queue = q.name AND j.status IN ('completed', 'dead')
                       AND j.completed_at > now() - make_interval(secs => %(window_s)s)
                       AND j.worker_id IS NOT NULL) f
             GROUP BY f.worker_id, q.name) w
     GROUP BY w.worker_id
)
SELECT coalesce(s.worker_id, b.worker_id) AS worker_id,
       coalesce(s.running, 0)::bigint AS running,
       -- greatest() passes over a NULL: the later of the two sightings, or the one there is
       greatest(s.last_seen_at, b.last_seen_at) AS last_seen_at,
       ARRAY(SELECT DISTINCT x FROM unnest(coalesce(s.queues, '{}') || coalesce(b.queues, '{}')) AS x
              ORDER BY x) AS queues,
       b.host, b.pid, b.concurrency, b.in_flight, b.started_at, b.state
  FROM seen s
  FULL JOIN workers b ON b.worker_id = s.worker_id
 WHERE s.worker_id IS NOT NULL OR b.last_seen_at > now() - make_interval(secs => %(window_s)s)
 ORDER BY 1
 LIMIT %(limit)s;

-- name: WorkerBeat
-- A worker process reports itself: its row made or updated in one statement, last_seen_at now; a field it leaves out keeps what it said before.
INSERT INTO workers AS w (worker_id, host, pid, concurrency, queues, in_flight, started_at, state, last_seen_at)
VALUES (%(worker_id)s, %(host)s::text, %(pid)s::bigint, %(concurrency)s::integer, %(queues)s::text[],
        %(in_flight)s::integer, %(started_at)s::timestamptz, %(state)s::text, now())
ON CONFLICT (worker_id) DO UPDATE
   SET host = coalesce(EXCLUDED.host, w.host),
       pid = coalesce(EXCLUDED.pid, w.pid),
       concurrency = coalesce(EXCLUDED.concurrency, w.concurrency),
       queues = coalesce(EXCLUDED.queues, w.queues),
       in_flight = coalesce(EXCLUDED.in_flight, w.in_flight),
       started_at = coalesce(EXCLUDED.started_at, w.started_at),
       state = coalesce(EXCLUDED.state, w.state),
       last_seen_at = now()
RETURNING *;

-- name: WorkersForget
-- The duties leader's upkeep: forget the workers that have not beaten for %(after_s)s seconds (a read of the whole table, a row per worker process).
DELETE FROM workers WHERE last_seen_at < now() - make_interval(secs => %(after_s)s)
RETURNING worker_id;

-- name: QueueThroughput
-- Jobs that reached completed or dead, per queue and minute over the last minutes, from the finished jobs' completed_at (jobs_history_finished_idx: one range per queue and status). What PostgreSQL holds, so every replica answers alike; jobs deleted by retention before the window ends are not counted.
SELECT q.name AS queue, f.status,
       least(floor(extract(epoch FROM now() - f.completed_at) / 60)::int, %(minutes)s - 1) AS minutes_ago,
       count(*)::bigint AS n
  FROM queues q
  CROSS JOIN LATERAL (
        SELECT j.status, j.completed_at FROM jobs_history j
         WHERE j.queue = q.name AND j.status IN ('completed', 'dead')
           AND j.completed_at > now() - make_interval(mins => %(minutes)s)) f
 GROUP BY 1, 2, 3;

-- name: QueuePage
-- A page of queues by name (the primary key in order), after %(after)s (NULL: from the first), names starting with %(prefix)s (NULL: any), within %(scope)s; the caller asks one row more than it shows, to know whether a page follows.
-- The prefix is a filter, not a range: the order is the database's collation, in which the names that share a prefix need not sit together; at 10^4 queues a prefix search reads the whole primary key, a few ms.
SELECT * FROM queues
 WHERE (%(after)s::text IS NULL OR name > %(after)s::text)
   AND (%(prefix)s::text IS NULL OR starts_with(name, %(prefix)s::text))
   AND (%(scope)s::text IS NULL OR name ~ %(scope)s::text)
 ORDER BY name
 LIMIT %(limit)s;

-- name: QueuePageCounts
-- Job counts by queue, status and type of the queues of one page, from the trigger-kept counters (primary key probes: no other queue's counters are read).
SELECT queue, status, type, sum(n)::bigint AS n
  FROM job_counts
 WHERE queue = ANY(%(queues)s::text[])
 GROUP BY queue, status, type
HAVING sum(n) <> 0;

-- name: QueuePageOldestWaiting
-- The lag (as QueueOldestWaiting) of the queues of one page only: one probe of jobs_waiting_idx each.
SELECT q.name AS queue,
       (SELECT (extract(epoch FROM now() - greatest(j.visible_at, '0001-01-01 00:00:00+00')) * 1000)::bigint
          FROM jobs j
         WHERE j.queue = q.name AND j.status IN ('pending', 'failed') AND j.attempt >= 0
           AND j.visible_at <= now() AND NOT q.paused
         ORDER BY j.visible_at LIMIT 1) AS oldest_waiting_ms
  FROM queues q
 WHERE q.name = ANY(%(queues)s::text[]);

-- name: MetricsShownQueues
-- The queues /metrics gives series of their own: those matching %(pattern)s (a regular expression; NULL: every queue), at most %(limit)s, the most waiting jobs first, ties by name (so the set stays put while depths do).
SELECT q.name
  FROM queues q
  LEFT JOIN (SELECT queue, sum(n) AS waiting FROM job_counts
              WHERE status IN ('pending', 'failed') GROUP BY queue) w ON w.queue = q.name
 WHERE %(pattern)s::text IS NULL OR q.name ~ %(pattern)s::text
 ORDER BY coalesce(w.waiting, 0) DESC, q.name
 LIMIT %(limit)s;

-- name: MetricsDepthsShown
-- Gauges for /metrics: job counts by queue, type and status from the counters, each queue of %(shown)s on its own and every other queue summed in one row of queue NULL per type and status, so the totals stay exact.
SELECT s.name AS queue, c.type, c.status, sum(c.n)::bigint AS n
  FROM job_counts c
  LEFT JOIN unnest(%(shown)s::text[]) AS s(name) ON s.name = c.queue
 GROUP BY s.name, c.type, c.status
HAVING sum(c.n) <> 0;

-- name: MetricsOldestWaitingShown
-- The lag (as QueueOldestWaiting) of each queue of %(shown)s, and in one row of queue NULL the largest lag of every other queue: one probe of jobs_waiting_idx per queue (10^4 queues: ~50 ms).
SELECT s.name AS queue,
       max((SELECT (extract(epoch FROM now() - greatest(j.visible_at, '0001-01-01 00:00:00+00')) * 1000)::bigint
              FROM jobs j
             WHERE j.queue = q.name AND j.status IN ('pending', 'failed') AND j.attempt >= 0
               AND j.visible_at <= now() AND NOT q.paused
             ORDER BY j.visible_at LIMIT 1)) AS oldest_waiting_ms
  FROM queues q
  LEFT JOIN unnest(%(shown)s::text[]) AS s(name) ON s.name = q.name
 GROUP BY s.name;

-- name: JobClaimMany
-- Lease up to %(limit)s claimable jobs from several uncapped queues in the order listed (earlier queues first), in one statement; each queue in its own claim order.
-- A nested loop over the listed queues, in list order (the function scan yields them in order and
-- nothing above it sorts), with a LATERAL pick per queue: the outer LIMIT stops pulling once it has
-- %(limit)s jobs, so later queues are not read and a row is locked only when it is pulled. The pick
-- is one of two branches, gated on the queue's aging_ms (a one-time filter per queue, so only one
-- runs): claim order from jobs_claim_idx, or effective priority from jobs_claim_aged_idx. FOR
-- UPDATE cannot apply to a UNION's inputs, hence each branch locks in a subquery of its own. The
-- queues LATERAL keeps OFFSET 0 so it stays a per-queue probe and cannot be joined out of order.
WITH caller AS (  -- the claiming token, live at this statement's snapshot: see JobClaim
    SELECT %(token_id)s::text IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tokens t
                            WHERE t.id = %(token_id)s::text AND t.revoked_at IS NULL) AS revoked
),
picked AS (
    SELECT p.id, q.lease_ms, u.ord, q.aged
      FROM unnest(%(queues)s::text[]) WITH ORDINALITY AS u(name, ord)
     CROSS JOIN LATERAL (
           SELECT q.name, q.lease_ms, q.aging_ms IS NOT NULL AS aged
             FROM queues q WHERE q.name = u.name AND NOT q.paused
           OFFSET 0) AS q
     CROSS JOIN LATERAL (
           SELECT a.id FROM (
                  SELECT j.id FROM jobs j
                   WHERE j.queue = q.name AND NOT q.aged
                     AND j.status IN ('pending', 'failed') AND j.lease_expiries >= 0
                     AND j.visible_at <= now()
                     AND (%(types)s::text[] IS NULL OR j.type = ANY(%(types)s::text[]))
                   ORDER BY j.priority DESC, j.visible_at, j.id
                   LIMIT (SELECT %(limit)s::bigint)
                     FOR UPDATE OF j SKIP LOCKED) AS a
           UNION ALL
           SELECT b.id FROM (
                  SELECT j.id FROM jobs j
                   WHERE j.queue = q.name AND q.aged
                     AND j.status IN ('pending', 'failed') AND j.visible_at <= now()
                     AND j.aged_key IS NOT NULL
                     AND (%(types)s::text[] IS NULL OR j.type = ANY(%(types)s::text[]))
                   ORDER BY j.aged_key, j.id
                   LIMIT (SELECT %(limit)s::bigint)
                     FOR UPDATE OF j SKIP LOCKED) AS b) AS p
     WHERE NOT (SELECT revoked FROM caller)
     LIMIT %(limit)s
),
-- By primary key through the array of ids, as in JobClaim; joined to picked for each job's queue's lease_ms.
claimed AS (
    UPDATE jobs j
       SET status       = 'running',
           attempt      = j.attempt + 1,
           lease_token  = nextval('jobs_lease_token_seq'),
           lease_ms     = coalesce(%(lease_ms)s, p.lease_ms),
           locked_until = now() + make_interval(secs => coalesce(%(lease_ms)s, p.lease_ms) / 1000.0),
           worker_id    = %(worker_id)s,
           claimed_at   = now()
      FROM picked p
     WHERE j.id = p.id
       AND j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.*, p.ord AS _ord, p.aged AS _aged
)
-- As JobClaim's (its columns too): one row with NULL job columns for a revoked token.
SELECT c.id, c.queue, c.type, c.payload::text AS payload, c.priority, c.status, c.attempt, c.max_attempts,
       c.idempotency_key, c.created_at, c.visible_at, c.locked_until, c.worker_id, c.completed_at,
       c.last_error, c.errors::text AS errors, c.result::text AS result, c.releases::text AS releases,
       c.lease_token, c.claimed_at, k.revoked AS token_revoked
  FROM caller k LEFT JOIN claimed c ON true
 WHERE c.id IS NOT NULL OR k.revoked
 ORDER BY c._ord, CASE WHEN c._aged THEN c.aged_key END, CASE WHEN NOT c._aged THEN c.priority END DESC,
          CASE WHEN NOT c._aged THEN c.visible_at END, c.id;

-- name: TableUpkeepStats
-- Row churn of jobq's own tables (those of %(tables)s that exist) from the statistics collector, and whether autovacuum runs on each (the server's switch and the table's autovacuum_enabled), for the leader's ANALYZE and VACUUM (core/maintenance.py) and the dead-tuple gauge.
-- The partitions of a partitioned table among them (jobs_history's) are listed too, with their parent: the
-- parent holds no rows of its own, so its churn is its partitions', and autovacuum never analyzes it.
SELECT s.relname AS name, p.relname AS parent, s.n_live_tup, s.n_dead_tup, s.n_mod_since_analyze,
       greatest(s.last_analyze, s.last_autoanalyze) AS analyzed_at,
       greatest(s.last_vacuum, s.last_autovacuum) AS vacuumed_at,
       (current_setting('autovacuum')::boolean
        AND coalesce((SELECT o.option_value::boolean FROM pg_options_to_table(c.reloptions) AS o
                       WHERE o.option_name = 'autovacuum_enabled'), true)) AS autovacuum
  FROM pg_stat_user_tables s
  JOIN pg_class c ON c.oid = s.relid
  LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE s.relid IN (SELECT to_regclass(t) FROM unnest(%(tables)s::text[]) AS t)
    OR i.inhparent IN (SELECT to_regclass(t) FROM unnest(%(tables)s::text[]) AS t)
 ORDER BY s.relname;

-- name: QueueWakeCheck
-- For the queues idle long-polls wait on, one row per unpaused queue: how many waiting jobs a claim could take now (counted up to its cap, within max_running), how many are visible now, and when the next delayed one becomes visible (jobs_waiting_idx).
-- "attempt >= 0" (always true) is what lets these reads use jobs_waiting_idx (see QueueOldestWaiting).
-- A paced queue without a key counts only the room its window has now (and says in how many ms a
-- full one has room again, the watcher's timer); with a key it cannot tell whose jobs are visible,
-- and counts them all (the claims it rings say when their keys' windows free).
SELECT q.name AS queue,
       least(v.visible,
             CASE WHEN q.max_running IS NOT NULL
                  THEN greatest(q.max_running - coalesce(
                         (SELECT sum(c.n) FROM job_counts c WHERE c.queue = q.name AND c.status = 'running'), 0), 0)
             END,
             CASE WHEN q.rate_limit IS NOT NULL AND q.rate_limit ->> 'key' IS NULL
                  THEN greatest((q.rate_limit ->> 'jobs')::integer - coalesce(
                         (SELECT jobq_window_used(w.grant_at, w.grant_n, clock_timestamp()
                                 - make_interval(secs => (q.rate_limit ->> 'per_ms')::bigint / 1000.0))
                            FROM rate_windows w WHERE w.queue = q.name AND w.key = ''), 0), 0)
             END) AS ready,
       CASE WHEN q.rate_limit IS NOT NULL AND q.rate_limit ->> 'key' IS NULL THEN
            (SELECT (extract(epoch FROM jobq_window_free_at(w.grant_at, w.grant_n, (q.rate_limit ->> 'jobs')::integer,
                                                            (q.rate_limit ->> 'per_ms')::bigint, clock_timestamp())
                                        - clock_timestamp()) * 1000)::bigint
               FROM rate_windows w WHERE w.queue = q.name AND w.key = '')
       END AS free_in_ms,
       v.visible,
       (SELECT j.visible_at FROM jobs j
         WHERE j.queue = q.name AND j.status IN ('pending', 'failed') AND j.attempt >= 0
           AND j.visible_at > now()
         ORDER BY j.visible_at LIMIT 1) AS next_visible_at
  FROM unnest(%(queues)s::text[], %(caps)s::int[]) AS w(name, cap)
  JOIN queues q ON q.name = w.name AND NOT q.paused
  CROSS JOIN LATERAL (
        SELECT count(*) AS visible FROM (
              SELECT 1 FROM jobs j
               WHERE j.queue = q.name AND j.status IN ('pending', 'failed') AND j.attempt >= 0
                 AND j.visible_at <= now()
               LIMIT w.cap) s) v;

-- The history's upkeep (jobq.store.history, run by the duties leader). Statements with {part}
-- name one partition of jobs_history: the leader fills it in as an identifier (DDL takes no
-- parameters), and its bounds as literals.

-- name: HistoryPartitions
-- The range partitions of jobs_history, by name (jobs_history_p<from>_<to>, epoch seconds); the DEFAULT one is not among them.
SELECT c.relname::text AS name
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'jobs_history'::regclass AND c.relname::text ~ '^jobs_history_p[0-9]+_[0-9]+$'
 ORDER BY 1;

-- name: HistoryHorizon
-- The longest retention of any queue, or of a queue made now with the defaults (%(default_ms)s), in ms: how far ahead expiries can fall; and the database's time, in epoch seconds.
SELECT greatest(max(greatest(retention_ms, dead_retention_ms)), %(default_ms)s::bigint) AS ms,
       extract(epoch FROM now())::float8 AS now_s
  FROM queues;

-- name: HistoryPartitionNew
-- A new range partition's table, outside jobs_history until attached (so that creating it locks nothing else).
CREATE TABLE {part} (LIKE jobs_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS);

-- name: HistoryDefaultHolds
-- Whether the DEFAULT partition holds rows of a new partition's range; read under HistoryLockWrites, and when it does the leader locks reads too before taking them (see jobq.store.history).
SELECT EXISTS (SELECT 1 FROM jobs_history_default WHERE expires_at >= {lo} AND expires_at < {hi}) AS holds;

-- name: HistoryLockAll
-- Before rows move from the DEFAULT partition to a new one: no statement reads or writes jobs_history until commit.
LOCK TABLE jobs_history IN ACCESS EXCLUSIVE MODE;

-- name: HistoryLockWrites
-- Before a partition is attached: no statement writes jobs_history until commit (reads go on), so no insert routes a row by the partitions it saw before the ATTACH.
LOCK TABLE jobs_history IN SHARE MODE;

-- name: HistoryDefaultTake
-- Rows of the DEFAULT partition that the new partition's range takes, moved into it before it is attached (partition to partition: the counters do not change, and no trigger fires).
WITH moved AS (
    DELETE FROM jobs_history_default WHERE expires_at >= {lo} AND expires_at < {hi} RETURNING *
)
INSERT INTO {part} SELECT * FROM moved;

-- name: HistoryPartitionAttach
-- Attach the new partition (its indexes are made then); locks jobs_history less than CREATE TABLE ... PARTITION OF would.
ALTER TABLE jobs_history ATTACH PARTITION {part} FOR VALUES FROM ({lo}) TO ({hi});

-- name: HistoryPartitionDetach
-- First step of a drop: take the partition out of jobs_history (brief lock, no scan); its rows, all expired, are no longer read.
ALTER TABLE jobs_history DETACH PARTITION {part};

-- name: HistoryDetached
-- Partitions detached and not yet dropped (a drop's second step that did not run): dropped at the next round.
SELECT c.relname::text AS name
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND NOT c.relispartition
   AND c.relname::text ~ '^jobs_history_p[0-9]+_[0-9]+$'
 ORDER BY 1;

-- name: HistoryPartitionUncount
-- Second step of a drop, in the drop's transaction: take its jobs out of the counters, as the delete trigger would (a DROP fires no trigger).
-- Returns how many jobs it held.
WITH held AS MATERIALIZED (
    SELECT queue, status, type, count(*) AS n FROM {part} GROUP BY queue, status, type
),
uncounted AS (
    INSERT INTO job_counts AS c (queue, status, type, shard, n)
    SELECT queue, status, type, (pg_backend_pid() % 256)::smallint, -n
      FROM held ORDER BY queue, status, type
    ON CONFLICT (queue, status, type, shard) DO UPDATE SET n = c.n + excluded.n
)
SELECT coalesce(sum(n), 0)::bigint AS jobs FROM held;

-- name: HistoryPartitionUnkey
-- Second step of a drop, in the drop's transaction: free the idempotency keys of its jobs.
DELETE FROM job_keys k USING {part} h
 WHERE h.idempotency_key IS NOT NULL AND k.queue = h.queue AND k.idempotency_key = h.idempotency_key
   AND k.job_id = h.id;

-- name: HistoryPartitionDrop
-- Drop a detached partition whose range has passed: all its jobs had expired, and its disk goes back at once.
DROP TABLE {part};

-- name: HistoryDeleteExpired
-- Retention for rows no dropped partition takes: expired jobs of the DEFAULT partition, and jobs of a queue whose retention was lowered after they finished (jobs_history_kept_idx); one batch, keys freed with them.
WITH doomed AS (
    (SELECT d.id, d.expires_at FROM jobs_history_default d
      WHERE d.expires_at <= now()
      ORDER BY d.expires_at LIMIT %(limit)s)
    UNION ALL
    (SELECT h.id, h.expires_at
       FROM queues q
      CROSS JOIN LATERAL (
            SELECT h.id, h.expires_at FROM jobs_history h
             WHERE h.queue = q.name AND h.status IN ('completed', 'cancelled')
               AND h.expires_at - h.completed_at > make_interval(secs => q.retention_ms / 1000.0)
               -- IS TRUE: not a condition an index can take, so that the plan reads only the
               -- jobs kept longer than the retention says (jobs_history_kept_idx), not every
               -- expired job waiting for its partition's drop (jobs_history_finished_idx).
               AND (h.completed_at < now() - make_interval(secs => q.retention_ms / 1000.0)) IS TRUE
             LIMIT %(limit)s) AS h
     LIMIT %(limit)s)
    UNION ALL
    (SELECT h.id, h.expires_at
       FROM queues q
      CROSS JOIN LATERAL (
            SELECT h.id, h.expires_at FROM jobs_history h
             WHERE h.queue = q.name AND h.status = 'dead'
               AND h.expires_at - h.completed_at > make_interval(secs => q.dead_retention_ms / 1000.0)
               AND (h.completed_at < now() - make_interval(secs => q.dead_retention_ms / 1000.0)) IS TRUE
             -- The kept index's order: without it PostgreSQL 18 walked the partial index of
             -- every dead job by id (jobs_history_dead_idx), filtering on the queue, hoping to
             -- meet a row early (89,000 pages at 10^5 dead jobs; PostgreSQL 15 took the kept one).
             ORDER BY h.expires_at - h.completed_at
             LIMIT %(limit)s) AS h
     LIMIT %(limit)s)
),
gone AS (
    -- By id, as an array: joined to doomed, a generic plan may read the whole DEFAULT
    -- partition instead (measured: 7,800 pages at 10^5 finished jobs).
    DELETE FROM jobs_history h
     WHERE h.id = ANY (ARRAY(SELECT id FROM doomed))
       AND h.expires_at = ANY (ARRAY(SELECT expires_at FROM doomed))
    RETURNING h.id, h.queue, h.idempotency_key
),
keys AS (
    DELETE FROM job_keys k USING gone g
     WHERE k.queue = g.queue AND k.idempotency_key = g.idempotency_key AND k.job_id = g.id
)
SELECT id FROM gone;

-- name: HistorySizes
-- Bytes on disk of jobq's job tables (with indexes and TOAST), partitions included: what retention must keep bounded.
SELECT coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'jobs'), 0)::bigint AS jobs_bytes,
       coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname <> 'jobs'), 0)::bigint AS history_bytes,
       count(*) FILTER (WHERE c.relispartition)::bigint AS partitions
  FROM pg_class c
 WHERE c.oid = 'jobs'::regclass OR c.oid = 'job_keys'::regclass
    OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'jobs_history'::regclass);

-- name: EnqueueBucketsTake
-- Take %(takes)s' jobs from the token buckets of enqueue rates (a queue's, a token's), in the caller's transaction; returns each bucket's tokens after the take, negative when it was short (the caller then rolls back, which undoes every take).
-- One upsert: PostgreSQL locks each bucket's row and evaluates the SET on its latest committed
-- version (READ COMMITTED), so enqueues on every replica take from the same tokens, each after the
-- last; the lock is held to commit. Refill is lazy: the tokens at "at", plus jobs/per_ms for each
-- ms since, up to the burst. "at" never goes back (greatest), so a take never refills twice.
-- Buckets are locked in (kind, name) order: two batches naming the same ones never deadlock.
WITH t AS (
    SELECT * FROM jsonb_to_recordset(%(takes)s::jsonb)
                  AS t(kind text, name text, n integer, jobs integer, per_ms bigint, burst integer)
)
INSERT INTO enqueue_buckets AS b (kind, name, tokens, at)
SELECT t.kind, t.name, t.burst - t.n, clock_timestamp() FROM t ORDER BY t.kind, t.name
ON CONFLICT (kind, name) DO UPDATE
   SET (tokens, at) = (
       SELECT least(t.burst::float8, b.tokens + extract(epoch FROM greatest(s.at - b.at, '0'::interval))
                                                * 1000.0 * t.jobs / t.per_ms) - t.n,
              s.at
         FROM t, (SELECT greatest(clock_timestamp(), b.at) AS at) AS s
        WHERE t.kind = b.kind AND t.name = b.name)
RETURNING b.kind, b.name, b.tokens;

-- name: QueuePressure
-- Waiting depth (the counters) and the oldest claimable job's lag, in ms, of queues with soft thresholds: what adaptive backpressure reads, at most every few hundred ms per queue and process.
SELECT q.name AS queue,
       (SELECT coalesce(sum(c.n), 0) FROM job_counts c
         WHERE c.queue = q.name AND c.status IN ('pending', 'failed'))::bigint AS depth,
       (SELECT (extract(epoch FROM now() - greatest(j.visible_at, '0001-01-01 00:00:00+00')) * 1000)::bigint
          FROM jobs j
         WHERE j.queue = q.name AND j.status IN ('pending', 'failed') AND j.attempt >= 0
           AND j.visible_at <= now() AND NOT q.paused
         ORDER BY j.visible_at LIMIT 1) AS lag_ms
  FROM queues q WHERE q.name = ANY(%(queues)s::text[]);

-- name: QueueRateUse
-- The current use of the rate_limit of each of %(queues)s that has one: jobs handed out in the last per_ms (the busiest key's, for a keyed limit), keys with a grant in that window, keys at the limit, and in how many ms a full window has room again.
SELECT q.name AS queue,
       coalesce(max(u.used), 0)::bigint AS used,
       count(u.key) FILTER (WHERE u.used > 0) AS keys,
       count(u.key) FILTER (WHERE u.used >= (q.rate_limit ->> 'jobs')::integer) AS keys_full,
       min(u.free_in_ms) AS free_in_ms
  FROM queues q
  LEFT JOIN LATERAL (
       SELECT w.key,
              jobq_window_used(w.grant_at, w.grant_n, clock_timestamp()
                               - make_interval(secs => (q.rate_limit ->> 'per_ms')::bigint / 1000.0)) AS used,
              (extract(epoch FROM jobq_window_free_at(w.grant_at, w.grant_n, (q.rate_limit ->> 'jobs')::integer,
                                                      (q.rate_limit ->> 'per_ms')::bigint, clock_timestamp())
                                  - clock_timestamp()) * 1000)::bigint AS free_in_ms
         FROM rate_windows w
        WHERE w.queue = q.name AND ((q.rate_limit ->> 'key') IS NOT NULL OR w.key = '')) AS u ON true
 WHERE q.name = ANY(%(queues)s::text[]) AND q.rate_limit IS NOT NULL
 GROUP BY q.name, q.rate_limit;

-- name: RateStateForget
-- The duties leader's upkeep: delete the rate_limit windows whose every grant has left the window (or whose queue has no limit, or no key, any more), and the enqueue buckets that have refilled to their burst or belong to no rate; a claim or enqueue that comes later makes its row again. Returns how many went.
-- A row a claim rewrites meanwhile is re-checked on its new version (READ COMMITTED) and kept.
WITH windows AS (
    DELETE FROM rate_windows w USING queues q
     WHERE w.queue = q.name
       AND (q.rate_limit IS NULL
            OR (w.key <> '' AND q.rate_limit ->> 'key' IS NULL)
            OR coalesce(w.grant_at[cardinality(w.grant_at)], '-infinity')
               <= now() - make_interval(secs => (q.rate_limit ->> 'per_ms')::bigint / 1000.0))
    RETURNING 1
),
buckets AS (  -- kept only while a rate applies to it and it has not refilled to its burst
    DELETE FROM enqueue_buckets b
     WHERE NOT EXISTS (
           SELECT 1 FROM (SELECT q.enqueue_rate AS r FROM queues q WHERE b.kind = 'queue' AND q.name = b.name
                          UNION ALL
                          SELECT t.enqueue_rate FROM tokens t WHERE b.kind = 'token' AND t.id = b.name) AS x
            WHERE x.r IS NOT NULL
              AND b.tokens + extract(epoch FROM now() - b.at) * 1000.0 * (x.r ->> 'jobs')::float8
                             / (x.r ->> 'per_ms')::float8
                  < coalesce((x.r ->> 'burst')::float8, (x.r ->> 'jobs')::float8))
    RETURNING 1
)
SELECT (SELECT count(*) FROM windows) + (SELECT count(*) FROM buckets) AS n;
