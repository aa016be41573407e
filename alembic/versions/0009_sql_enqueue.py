"""Transactional enqueue from SQL: ``jobq.enqueue(...)`` and ``jobq.enqueue_many(jsonb)``.

An application that shares the database enqueues inside its own transaction, so a job exists
if and only if its business change committed (the outbox problem, without an outbox). The
functions do what ``POST /v1/jobs`` and ``POST /v1/jobs/batch`` do: the same validation (an
error per field, SQLSTATE ``JQ422``), the queue springing into existence with the column
defaults (which ``tests/test_domain_rules.py`` pins to ``jobq.domain.queues``), the queue's
``max_attempts`` as the default, idempotency keys (a repeat answers the existing job's id;
another type or payload under the key is ``JQ409``), ``max_depth`` (``JQ429``, nothing
enqueued), the depth counters (the insert trigger of 0001), and a NOTIFY on ``jobq_jobs``
that PostgreSQL delivers at commit, so long-polls in every ``jobq serve`` wake.

The NOTIFY's origin is ``sql.<random>``: a service takes such an origin for a bell to ring,
not for a peer process to greet (``jobq.store.notify``), and the random part keeps two calls
in one transaction from being folded into one notification (PostgreSQL drops duplicates).

``tests/test_sql_enqueue.py`` runs one matrix of inputs through these functions and through
the HTTP API and compares the stored rows and counters.

The public functions are SECURITY DEFINER, so an application role needs only USAGE on schema
jobq and EXECUTE on them; EXECUTE is revoked from PUBLIC. They run as their owner, so nothing
another role can create may be looked up by name while they run: every function here pins
``search_path = pg_catalog, pg_temp`` (no schema other roles can create in: PostgreSQL 14 and
older let every role create in ``public``, where an overload that fits a call better than the
built-in would run as the owner) and names jobq's tables and ``jobq_aged_key`` with their
schema, read at migration time. The counter trigger of 0001 runs inside these functions and
names ``job_counts`` bare, so it gets its own path, the tables' schema ahead of pg_temp (a
temporary ``job_counts`` cannot stand in). ``tests/test_sql_enqueue.py`` plants such
overloads and temporary tables and checks that none is used. The schema ``jobq`` must be the
migrating role's own: one that another role owns is refused rather than filled with
functions that run with our rights.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

import logging

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# {s}: the tables' schema, a quoted identifier. Every function's search_path is pg_catalog and
# pg_temp only (pg_temp is never searched for functions or operators; jobq's tables are named
# with {s}, so no temporary table is looked up either).
UPGRADE = r"""
-- The counter trigger runs inside the functions below (with their search_path) and names
-- job_counts without a schema: its own path finds the table before any temporary one.
ALTER FUNCTION {s}.jobs_count_changes() SET search_path = pg_catalog, {s}, pg_temp;

-- Refuse one job's fields as POST /v1/jobs does (jobq.api.schemas.JobCreate): the message
-- starts with the field (prefixed by "jobs[i]." in a batch), SQLSTATE JQ422.
CREATE FUNCTION jobq._check(at text, queue text, type text, payload jsonb, priority integer,
                            delay_ms bigint, run_at timestamptz, max_attempts integer,
                            idempotency_key text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    level jsonb[];
    depth integer := 0;
    fault text;
BEGIN
    IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{{0,127}}$' THEN
        fault := 'queue: must be 1 to 128 of letters, digits and _ . : - (starting with a letter or digit)';
    ELSIF type IS NULL OR char_length(type) NOT BETWEEN 1 AND 255 THEN
        fault := 'type: must be 1 to 255 characters';
    ELSIF payload IS NULL OR jsonb_typeof(payload) <> 'object' THEN
        fault := 'payload: must be a JSON object';
    ELSIF priority IS NULL OR priority < -2147483647 THEN
        fault := 'priority: must be an integer from -2147483647 to 2147483647';
    ELSIF delay_ms IS NOT NULL AND delay_ms NOT BETWEEN 0 AND 315360000000 THEN
        fault := 'delay_ms: must be 0 to 315360000000 (10 years)';
    ELSIF delay_ms IS NOT NULL AND run_at IS NOT NULL THEN
        fault := 'run_at: give one of delay_ms and run_at, not both';
    ELSIF run_at IS NOT NULL AND (run_at < '0001-01-01T00:00:00Z' OR run_at >= '10000-01-01T00:00:00Z') THEN
        fault := 'run_at: must fall within years 1 to 9999 in UTC';
    ELSIF max_attempts IS NOT NULL AND max_attempts NOT BETWEEN 1 AND 10000 THEN
        fault := 'max_attempts: must be 1 to 10000';
    ELSIF idempotency_key IS NOT NULL AND char_length(idempotency_key) NOT BETWEEN 1 AND 255 THEN
        fault := 'idempotency_key: must be 1 to 255 characters';
    ELSIF left(idempotency_key, 6) = 'topic:' OR left(idempotency_key, 9) = 'schedule:' THEN
        -- The keys jobq gives the jobs of topic publishes and schedule fires (as the API).
        fault := 'idempotency_key: keys starting with ''topic:'' or ''schedule:'' are reserved '
                 'for the jobs of topic publishes and schedules';
    END IF;
    -- As deep as the API allows (MAX_JSON_DEPTH): level by level, each container once. Each
    -- level takes two brackets of the text, so a shorter payload cannot be too deep.
    IF fault IS NULL AND length(payload::text) > 257 THEN
        level := ARRAY[payload];
        WHILE cardinality(level) > 0 LOOP
            depth := depth + 1;
            IF depth > 128 THEN
                fault := 'payload: JSON nested deeper than 128 levels';
                EXIT;
            END IF;
            SELECT coalesce(array_agg(c.value), '{{}}') INTO level
              FROM unnest(level) AS l(v),
                   LATERAL (SELECT e.value FROM jsonb_each(CASE WHEN jsonb_typeof(l.v) = 'object'
                                                               THEN l.v ELSE '{{}}' END) AS e
                            UNION ALL
                            SELECT a.value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(l.v) = 'array'
                                                                         THEN l.v ELSE '[]' END) AS a
                           ) AS c
             WHERE jsonb_typeof(c.value) IN ('object', 'array');
        END LOOP;
    END IF;
    IF fault IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = at || fault,
              HINT = 'the same rules as POST /v1/jobs';
    END IF;
END
$fn$;

-- Enqueue one checked job: (id, created). created is false for an idempotent repeat.
CREATE FUNCTION jobq._insert(p_queue text, p_type text, p_payload jsonb, p_priority integer,
                             p_delay_ms bigint, p_run_at timestamptz, p_max_attempts integer,
                             p_key text, OUT job_id bigint, OUT created boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    q {s}.queues%ROWTYPE;
    existing {s}.jobs%ROWTYPE;
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
        SELECT * INTO existing FROM {s}.jobs WHERE queue = p_queue AND idempotency_key = p_key;
    END IF;
    IF existing.id IS NULL THEN
        -- Replays enqueue nothing, so only a new job meets max_depth. Counted as the API
        -- counts: committed jobs, plus those this transaction enqueued before.
        IF q.max_depth IS NOT NULL AND (
               SELECT coalesce(sum(c.n), 0) FROM {s}.job_counts c
                WHERE c.queue = p_queue AND c.status IN ('pending', 'failed')) >= q.max_depth THEN
            RAISE EXCEPTION USING ERRCODE = 'JQ429',
                  MESSAGE = format('queue %L is at its max_depth of waiting jobs', p_queue),
                  HINT = 'nothing was enqueued; retry later';
        END IF;
        at := coalesce(p_run_at,
                       now() + make_interval(secs => (coalesce(p_delay_ms, 0::bigint) / 1000.0)::double precision));
        INSERT INTO {s}.jobs (queue, type, payload, priority, status, max_attempts, idempotency_key,
                          visible_at, aged_key)
        VALUES (p_queue, p_type, p_payload, p_priority, 'pending',
                coalesce(p_max_attempts, q.max_attempts), p_key, at,
                {s}.jobq_aged_key(at, p_priority, q.aging_ms))
        ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id INTO job_id;
        IF job_id IS NOT NULL THEN
            created := true;
            RETURN;
        END IF;
        -- Another transaction committed the key meanwhile.
        SELECT * INTO existing FROM {s}.jobs WHERE queue = p_queue AND idempotency_key = p_key;
    END IF;
    IF existing.type IS DISTINCT FROM p_type OR existing.payload IS DISTINCT FROM p_payload THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ409',
              MESSAGE = format('idempotency key %L in queue %L already names job %s with a '
                               'different type or payload', p_key, p_queue, existing.id);
    END IF;
    job_id := existing.id;
END
$fn$;

-- Tell every jobq serve's long-polls (sent at commit; nothing if the transaction rolls back).
CREATE FUNCTION jobq._notify(counts jsonb)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT pg_notify('jobq_jobs', format('%s %s sql.%s', c.key, c.value,
                                         substr(md5(random()::text || clock_timestamp()::text), 1, 12)))
      FROM jsonb_each_text(counts) AS c;
$fn$;

CREATE FUNCTION jobq.enqueue(queue text, type text, payload jsonb DEFAULT '{{}}',
                             priority integer DEFAULT 0, delay_ms bigint DEFAULT NULL,
                             run_at timestamptz DEFAULT NULL, max_attempts integer DEFAULT NULL,
                             idempotency_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    r record;
BEGIN
    PERFORM jobq._check('', queue, type, payload, priority, delay_ms, run_at, max_attempts,
                        idempotency_key);
    SELECT * INTO r FROM jobq._insert(queue, type, payload, priority, delay_ms, run_at,
                                      max_attempts, idempotency_key);
    IF r.created THEN
        PERFORM jobq._notify(jsonb_build_object(queue, 1));
    END IF;
    RETURN r.job_id;
END
$fn$;

-- One field of a batch's job, of the JSON type the API demands (no coercion, as its strict
-- models): the value as text, NULL when absent or JSON null (where null is allowed).
CREATE FUNCTION jobq._field(job jsonb, at text, name text, kind text, nullable boolean)
RETURNS text LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    v jsonb := job -> name;
BEGIN
    IF v IS NULL OR (jsonb_typeof(v) = 'null' AND nullable) THEN
        RETURN NULL;
    END IF;
    IF kind = 'integer' THEN
        -- jsonb keeps 100.0 as written (refused, as by the strict API) but has already read
        -- 1e2 as 100, so that one is taken (the README says so): the text is gone.
        IF jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]{{1,19}}$'
           AND v::text::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 THEN
            RETURN v::text;
        END IF;
    ELSIF jsonb_typeof(v) = kind THEN
        RETURN CASE WHEN kind = 'string' THEN v #>> '{{}}' ELSE v::text END;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = format('%s%s: must be %s %s', at, name,
          CASE WHEN kind = 'integer' THEN 'an' ELSE 'a' END,
          CASE kind WHEN 'object' THEN 'JSON object' ELSE kind END
          || CASE WHEN nullable THEN ' or null' ELSE '' END),
          HINT = 'the same rules as POST /v1/jobs/batch';
END
$fn$;

-- A narrow int from a checked integer field: out-of-range values fail the range check.
CREATE FUNCTION jobq._int(value text, at text, name text, low bigint, high bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF value IS NOT NULL AND value::bigint NOT BETWEEN low AND high THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ422',
              MESSAGE = format('%s%s: must be %s to %s', at, name, low, high),
              HINT = 'the same rules as POST /v1/jobs/batch';
    END IF;
    RETURN value::bigint;
END
$fn$;

-- A batch's run_at text as the API reads it (jobq.api.schemas.Timestamp): RFC 3339 with an
-- offset, each field in its range (PostgreSQL's own input would also take 24:00:00, 23:59:60
-- and 31 February's overflow, and refuse offsets past 15:59 that the API takes), fractions
-- cut to microseconds. Checked field by field rather than by catching the cast's error: an
-- exception block is a subtransaction per job, and a batch holds up to 1000.
CREATE FUNCTION jobq._run_at(value text, at text)
RETURNS timestamptz LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    m text[];
    year integer;
    month integer;
    day integer;
    local timestamp;
    shift interval := interval '0';
    bad boolean := false;
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    m := regexp_match(value, '^([0-9]{{4}})-([0-9]{{2}})-([0-9]{{2}})[Tt ]([0-9]{{2}}):([0-9]{{2}}):([0-9]{{2}})'
                             '(\.[0-9]{{1,6}})?[0-9]*(?:[Zz]|([+-])([0-9]{{2}}):([0-9]{{2}}))$');
    IF m IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = at || 'run_at: must be an RFC 3339 '
              'date-time string with an offset, such as 2030-01-01T00:00:00Z',
              HINT = 'the same rules as POST /v1/jobs/batch';
    END IF;
    year := m[1]::integer;
    month := m[2]::integer;
    day := m[3]::integer;
    -- Two steps, so that make_date only ever meets a year and month in range.
    IF year < 1 OR month NOT BETWEEN 1 AND 12 OR day NOT BETWEEN 1 AND 31
       OR m[4]::integer > 23 OR m[5]::integer > 59 OR m[6]::integer > 59
       OR coalesce(m[9]::integer, 0) > 23 OR coalesce(m[10]::integer, 0) > 59 THEN
        bad := true;
    ELSIF day > extract(day FROM make_date(year, month, 1) + interval '1 month - 1 day')::integer THEN
        bad := true;
    END IF;
    IF bad THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = at || 'run_at: not a valid date and '
              'time (a field is out of its range, such as 30 February or hour 25)',
              HINT = 'the same rules as POST /v1/jobs/batch';
    END IF;
    -- Every field is in range now, so the cast cannot fail.
    local := (m[1] || '-' || m[2] || '-' || m[3] || ' ' || m[4] || ':' || m[5] || ':' || m[6]
              || coalesce(m[7], ''))::timestamp;
    IF m[8] IS NOT NULL THEN
        shift := make_interval(hours => m[9]::integer, mins => m[10]::integer);
        IF m[8] = '-' THEN
            shift := -shift;
        END IF;
    END IF;
    RETURN (local - shift) AT TIME ZONE 'UTC';
END
$fn$;

-- The batch: a JSON array of up to 1000 job objects with POST /v1/jobs/batch's fields, all
-- or nothing; ids in input order (a repeat, or a key used twice in the array, answers the
-- same id).
CREATE FUNCTION jobq.enqueue_many(jobs jsonb)
RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    fields CONSTANT text[] := ARRAY['queue', 'type', 'payload', 'priority', 'delay_ms', 'run_at',
                                    'max_attempts', 'idempotency_key'];
    n integer;
    i integer;
    j jsonb;
    at text;
    extra text;
    parsed jsonb[] := '{{}}';
    whens timestamptz[] := '{{}}';
    run_at timestamptz;
    w integer;
    p jsonb;
    r record;
    ids bigint[] := '{{}}';
    added jsonb := '{{}}';
BEGIN
    IF jobs IS NULL OR jsonb_typeof(jobs) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = 'jobs: must be a JSON array of job objects';
    END IF;
    n := jsonb_array_length(jobs);
    IF n NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = 'jobs: must hold 1 to 1000 jobs';
    END IF;
    -- Check every job before enqueueing any, as the API validates the whole body first.
    FOR i IN 0 .. n - 1 LOOP
        j := jobs -> i;
        at := format('jobs[%s].', i);
        IF jsonb_typeof(j) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = format('jobs[%s]: must be a JSON object', i);
        END IF;
        SELECT k INTO extra FROM jsonb_object_keys(j) AS k WHERE k <> ALL (fields) LIMIT 1;
        IF extra IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'JQ422',
                  MESSAGE = format('%s%s: unknown field', at, extra);
        END IF;
        IF NOT j ? 'type' THEN
            RAISE EXCEPTION USING ERRCODE = 'JQ422', MESSAGE = at || 'type: required';
        END IF;
        run_at := jobq._run_at(jobq._field(j, at, 'run_at', 'string', true), at);
        p := jsonb_build_object(
            'queue', coalesce(jobq._field(j, at, 'queue', 'string', false), 'default'),
            'type', jobq._field(j, at, 'type', 'string', false),
            'payload', coalesce(jobq._field(j, at, 'payload', 'object', false), '{{}}')::jsonb,
            'priority', coalesce(jobq._int(jobq._field(j, at, 'priority', 'integer', false), at,
                                           'priority', -2147483647::bigint, 2147483647::bigint), 0),
            'delay_ms', jobq._int(jobq._field(j, at, 'delay_ms', 'integer', true), at,
                                  'delay_ms', 0::bigint, 315360000000::bigint),
            'max_attempts', jobq._int(jobq._field(j, at, 'max_attempts', 'integer', true), at,
                                      'max_attempts', 1::bigint, 10000::bigint),
            'idempotency_key', jobq._field(j, at, 'idempotency_key', 'string', true));
        PERFORM jobq._check(at, p ->> 'queue', p ->> 'type', p -> 'payload',
                            (p ->> 'priority')::integer, (p ->> 'delay_ms')::bigint,
                            run_at, (p ->> 'max_attempts')::integer,
                            p ->> 'idempotency_key');
        parsed := parsed || p;
        whens := whens || run_at;
    END LOOP;
    FOR w IN 1 .. n LOOP
        p := parsed[w];
        SELECT * INTO r FROM jobq._insert(p ->> 'queue', p ->> 'type', p -> 'payload', (p ->> 'priority')::integer,
                          (p ->> 'delay_ms')::bigint, whens[w],
                          (p ->> 'max_attempts')::integer, p ->> 'idempotency_key');
        ids := ids || r.job_id;
        IF r.created THEN
            added := jsonb_set(added, ARRAY[p ->> 'queue'],
                               to_jsonb(coalesce((added ->> (p ->> 'queue'))::integer, 0) + 1));
        END IF;
    END LOOP;
    PERFORM jobq._notify(added);
    RETURN ids;
END
$fn$;

-- Functions are executable by PUBLIC unless revoked: only roles granted EXECUTE may enqueue.
REVOKE ALL ON FUNCTION jobq.enqueue(text, text, jsonb, integer, bigint, timestamptz, integer, text),
                       jobq.enqueue_many(jsonb), jobq._notify(jsonb), jobq._run_at(text, text),
                       jobq._int(text, text, text, bigint, bigint),
                       jobq._field(jsonb, text, text, text, boolean),
                       jobq._insert(text, text, jsonb, integer, bigint, timestamptz, integer, text),
                       jobq._check(text, text, text, jsonb, integer, bigint, timestamptz, integer, text)
    FROM PUBLIC;
"""

DOWNGRADE = """
DROP FUNCTION IF EXISTS jobq.enqueue_many(jsonb);
DROP FUNCTION IF EXISTS jobq.enqueue(text, text, jsonb, integer, bigint, timestamptz, integer, text);
DROP FUNCTION IF EXISTS jobq._run_at(text, text);
DROP FUNCTION IF EXISTS jobq._int(text, text, text, bigint, bigint);
DROP FUNCTION IF EXISTS jobq._field(jsonb, text, text, text, boolean);
DROP FUNCTION IF EXISTS jobq._notify(jsonb);
DROP FUNCTION IF EXISTS jobq._insert(text, text, jsonb, integer, bigint, timestamptz, integer, text);
DROP FUNCTION IF EXISTS jobq._check(text, text, text, jsonb, integer, bigint, timestamptz, integer, text);
ALTER FUNCTION {s}.jobs_count_changes() RESET search_path;
-- The schema goes only if nothing else lives in it (no CASCADE: what others put there is theirs).
DO $do$
BEGIN
    DROP SCHEMA IF EXISTS jobq;
EXCEPTION WHEN dependent_objects_still_exist OR insufficient_privilege THEN
    RAISE NOTICE 'schema jobq still holds objects that are not jobq''s (or is not ours): left in place';
END
$do$;
"""

log = logging.getLogger("alembic.runtime.migration")


# Every kind of object a role can create in a schema, with its owner column.
FOREIGN_OBJECTS = " UNION ALL ".join(
    f"SELECT '{kind} ' || {name}::text FROM pg_catalog.{table} "
    f"WHERE {ns} = 'jobq'::regnamespace AND {owner} <> (SELECT oid FROM pg_roles WHERE rolname = current_user)"
    for kind, table, name, ns, owner in (
        ("function", "pg_proc", "oid::regprocedure", "pronamespace", "proowner"),
        ("relation", "pg_class", "oid::regclass", "relnamespace", "relowner"),
        ("type", "pg_type", "oid::regtype", "typnamespace", "typowner"),
        ("operator", "pg_operator", "oid::regoperator", "oprnamespace", "oprowner"),
        ("collation", "pg_collation", "collname", "collnamespace", "collowner"),
        ("conversion", "pg_conversion", "conname", "connamespace", "conowner"),
        ("operator class", "pg_opclass", "opcname", "opcnamespace", "opcowner"),
        ("operator family", "pg_opfamily", "opfname", "opfnamespace", "opfowner"),
        ("text search dictionary", "pg_ts_dict", "dictname", "dictnamespace", "dictowner"),
        ("text search configuration", "pg_ts_config", "cfgname", "cfgnamespace", "cfgowner"),
    )
)


def _schema() -> str:
    """The tables' schema as a quoted identifier (where 0001 created them: the current one)."""
    return str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar())


def upgrade() -> None:
    bind = op.get_bind()
    # Checked after CREATE SCHEMA, in the same transaction: a schema another role made in
    # between is seen, and once it is ours nobody else can hand it over or grant on it.
    op.execute("CREATE SCHEMA IF NOT EXISTS jobq")
    owner, me, shared = bind.exec_driver_sql("""
        SELECT pg_get_userbyid(n.nspowner), current_user,
               EXISTS (SELECT 1 FROM aclexplode(n.nspacl) AS a
                        WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner)
          FROM pg_namespace AS n WHERE n.nspname = 'jobq'""").one()
    if owner != me:
        raise RuntimeError(
            f'schema "jobq" already exists and belongs to role "{owner}", not to "{me}", the role '
            "running this migration: the SECURITY DEFINER functions it installs there would run "
            "with this role's rights in a schema another role controls. Drop or rename that "
            f'schema, or run the migration as its owner (ALTER SCHEMA jobq OWNER TO "{me}" if it '
            "is really jobq's), then migrate again."
        )
    # Objects another role put in the schema stay theirs when the schema changes hands (or a
    # CREATE grant is revoked): an overload of one of our helpers there, say
    # jobq._int(text, text, text, integer, integer), would be called by our functions with the
    # migrating role's rights.
    foreign = bind.exec_driver_sql(FOREIGN_OBJECTS).scalars().all()
    if foreign:
        raise RuntimeError(
            'schema "jobq" holds objects that belong to other roles (' + ", ".join(foreign[:5])
            + "): they could stand in for the SECURITY DEFINER functions this migration installs "
            "there. Drop them or the schema, then migrate again."
        )
    if shared:
        raise RuntimeError(
            'schema "jobq" grants CREATE to other roles, who could put functions beside the '
            "SECURITY DEFINER ones this migration installs there: revoke it (REVOKE CREATE ON "
            "SCHEMA jobq FROM ...), then migrate again."
        )
    op.execute(UPGRADE.format(s=_schema()))


def downgrade() -> None:
    op.execute(DOWNGRADE.format(s=_schema()))
    if op.get_bind().exec_driver_sql("SELECT 1 FROM pg_namespace WHERE nspname = 'jobq'").first():
        log.warning("schema jobq still holds objects that are not jobq's (or is not ours): left in place")
