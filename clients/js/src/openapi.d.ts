/**
 * The jobq HTTP API's schemas, generated from openapi/openapi.json by `npm run gen`
 * (openapi-typescript). Do not edit: change the service, regenerate the document, then run
 * `npm run gen`; test/types-current.test.mjs fails while this file is stale.
 */

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Liveness
         * @description No token needed.
         */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Prometheus metrics
         * @description Counters and histograms of this service (all its worker processes), and gauges of
         *     waiting depth, counts by status and oldest-waiting age read from the database.
         *
         *     Per-queue gauges are bounded: at most `JOBQ_METRICS_QUEUES` queues (default 500; the
         *     ones with the most waiting jobs, of those matching `JOBQ_METRICS_QUEUE_PATTERN`) have
         *     series of their own; every other queue is summed into `queue="_other"`, so totals over
         *     all series stay exact.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["get_metrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Readiness
         * @description No token needed.
         */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Purge dead jobs
         * @description Deletes matching dead jobs (all, or the oldest `limit`). A token for some queues
         *     purges only jobs of those.
         *
         *     Roles: `admin`.
         */
        delete: operations["purge_dead"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead/replay": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Replay dead jobs
         * @description Matching dead jobs (all of them, or the oldest `limit`) go back to `pending`, visible
         *     now, `attempt` reset to 0, `errors` kept. Works in batches, so a large replay holds no
         *     long lock. A token for some queues replays only jobs of those.
         *
         *     Roles: `admin`.
         */
        post: operations["replay_dead"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead/{job_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Purge one dead job
         * @description Deletes one dead job, by id. A job of another status is `409` (cancel or retry it
         *     instead); one outside the token's queues is `404`, as if it did not exist.
         *
         *     Roles: `admin`.
         */
        delete: operations["purge_dead_job"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List jobs, newest first
         * @description Keyset-paginated: pass `next_cursor` as `cursor` for the next page; it is null on the
         *     last page. Jobs enqueued after the first page was read do not shift later pages. A
         *     token for some queues lists only jobs of those.
         *
         *     `search` scans rather than looks up (no index finds a substring of a payload): each page
         *     examines at most the newest 5,000 jobs that the other filters select (after `cursor`;
         *     that many from each queue and status it covers) and holds those that match. A page of a
         *     search may therefore hold fewer than `limit` jobs, or none, and still have a
         *     `next_cursor`, which goes on past the jobs examined. The payload's JSON text is
         *     PostgreSQL's rendering of it (`{"key": "value", "n": 1}`: a space after `:` and `,`).
         *
         *     Roles: `producer`, `admin`.
         */
        get: operations["list_jobs"];
        put?: never;
        /**
         * Enqueue one job
         * @description Committed before the answer. `delay_ms` or `run_at` (not both) delay the job; a
         *     `run_at` in the past makes it visible at once. A queue at or above its `max_depth` of
         *     waiting (`pending` + `failed`) jobs answers 429. With concurrent producers the depth
         *     check reads committed counts, so the limit may be passed by at most the number of
         *     enqueues in flight at that moment. Beyond the queue's or the token's `enqueue_rate`, or
         *     past the queue's soft thresholds for a share of enqueues, 429 too, with its own `code`
         *     and `retry_after_ms` (see the guide's rate limits).
         *
         *     A job claimable at once, enqueued while a long-poll of this service process waits for it,
         *     may be leased to that long-poll in the enqueue's own statement and commit (the guide's
         *     "handed over in the enqueue" says when): the answer then shows it `running`, `attempt`
         *     1, with the long-poll's `worker_id` and `locked_until`.
         *
         *     Roles: `producer`, `admin`.
         */
        post: operations["create_job"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Enqueue up to 1000 jobs, all or nothing
         * @description One transaction. Jobs come back in request order; an idempotent replay comes back as
         *     the existing job, and two jobs of one batch with the same key in the same queue are one
         *     job. A 409 for any conflicting key, or a 429, enqueues nothing.
         *
         *     Roles: `producer`, `admin`.
         */
        post: operations["create_jobs"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{job_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a job
         * @description A job outside the token's queues is `404`, as if it did not exist: ids leak nothing.
         *
         *     Roles: `producer`, `admin`.
         */
        get: operations["get_job"];
        put?: never;
        post?: never;
        /**
         * Delete a job
         * @description Deletes a job for good, whatever its status but `running` (cancel a running job
         *     first: its worker holds a lease): waiting, failed, or finished. Its idempotency key is
         *     free again, and the queue's counts drop by one. One outside the token's queues is
         *     `404`, as if it did not exist.
         *
         *     Roles: `admin`.
         */
        delete: operations["delete_job"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{job_id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Cancel a job
         * @description A waiting job becomes `cancelled`; so does a running one, whose lease dies: its
         *     worker's next heartbeat, ack or fail answers `409 lease_lost`.
         *
         *     Roles: `admin`.
         */
        post: operations["cancel_job"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{job_id}/retry": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retry a job now
         * @description A `dead`, `cancelled` or `failed` job goes back to `pending`, visible now, `attempt`
         *     reset to 0 and `errors` kept. Old lease ids stay dead.
         *
         *     Roles: `admin`.
         */
        post: operations["retry_job"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Claim jobs
         * @description Leases up to `limit` claimable jobs. Queues are tried in the order listed, as
         *     Faktory's fetch does: a later queue only fills what the earlier ones left. Within a
         *     queue: `priority` descending, then `visible_at`, then creation. With `wait_ms`, waits
         *     (woken by LISTEN/NOTIFY) until at least one job is claimed or the time is up. Paused
         *     queues hand out nothing; a queue with `max_running` never has more running jobs. A
         *     long-poll whose client hung up stops without claiming; one whose token is revoked
         *     while it waits answers `401` within a second and claims nothing. Every claim checks its
         *     token in the database as it takes jobs: a token whose revocation committed before that,
         *     through any replica, is handed nothing (`401`).
         *
         *     Each service process holds at most `JOBQ_MAX_LONG_POLLS` waiting claims (by default
         *     derived from its file descriptor limit, so that waiting workers never take the
         *     connections enqueues, acks and heartbeats need). A claim with `wait_ms` past that cap
         *     does not wait: it claims once (unless claims already waiting name its queues and would
         *     take the same jobs) and returns what it found, or, finding nothing, answers
         *     `503` `too_many_long_polls` at once with `Connection: close` and a `Retry-After` spread
         *     at random over 1 to 5 times the usual one, so that a fleet refused together does not
         *     come back together. Claim again after `Retry-After` seconds, as after any 503.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["claim"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases/ack": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Ack many leases
         * @description Each lease is answered on its own, in request order: one lost lease does not fail
         *     the others. A `lease_lost` entry with `already_completed: true` is a lease that did
         *     complete its job (its result is stored): the ack of a retried request whose first answer
         *     was lost, not work lost to another worker.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["ack_many"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Release many leases
         * @description Releases each lease as `POST /v1/leases/{lease_id}/release` does, each with its own
         *     `delay_ms`, in one statement: what a stopping worker calls for the jobs it holds. Each
         *     lease is answered on its own, in request order, as in `POST /v1/leases/ack`: one lost
         *     lease does not fail the others.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["release_many"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases/{lease_id}/ack": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Complete a job
         * @description The job becomes `completed` with `result`. A lease past its end whose expiry the
         *     service has not processed yet (at most 1 s) is still held, so a late ack succeeds.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["ack"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases/{lease_id}/fail": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Report a failed attempt
         * @description Retries after `min(backoff_base_ms × 2^(attempt−1), backoff_max_ms) × (1 + j)`, `j`
         *     in [0, 0.1), or after `retry_in_ms`; `retry: false` or no attempts left: `dead`.
         *     `error` is required (it is what `last_error` and `errors` show).
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["fail"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases/{lease_id}/heartbeat": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Extend a lease
         * @description `locked_until` becomes now + `extend_ms` (default: the lease's length). A lease past
         *     its `locked_until` can no longer be extended.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["heartbeat"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/leases/{lease_id}/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Give a job back without spending an attempt
         * @description The job goes back to `pending`, claimable again after `delay_ms` (default 0: at
         *     once), and the claim is not counted against `max_attempts`: `attempt` goes back down by
         *     one, and nothing is added to `errors` (nor to the lease expiries that make a poison
         *     pill). The release is recorded in the job's `releases`. For a worker that stops (a
         *     deploy, Ctrl-C) or holds jobs it will not start: SQS's zero visibility timeout,
         *     Sidekiq's push back on shutdown. Fenced as ack and fail: the lease must still be held (a
         *     lease past its end not yet processed still is); the next claim gets a new lease id.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["release"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List queues, by name, a page at a time
         * @description Paginated by name: pass `next_cursor` as `cursor` for the next page; it is null on
         *     the last page. A client that sends no `cursor` gets the first page only (`limit`,
         *     default 100): to see every queue, follow `next_cursor`. A queue created after a page
         *     was read shows up on a later page if its name sorts after that page's last one.
         *     Counts come from counters kept by triggers, read for the page's queues only, so a page
         *     costs the same however many queues and jobs there are. A token for some queues lists
         *     only those, page after full page.
         *
         *     Roles: `admin`.
         */
        get: operations["list_queues"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a queue
         * @description Roles: `admin`.
         */
        get: operations["get_queue"];
        put?: never;
        post?: never;
        /**
         * Delete a queue
         * @description Deletes the queue: its settings, its completed and cancelled jobs (so it shows up
         *     nowhere any more: not in `GET /v1/queues`, `GET /v1/jobs?queue=`, `/metrics` or the
         *     dashboard), and its counts. Refused with `409 queue_not_empty` while it holds a job
         *     waiting (`pending`), running, failed and awaiting a retry, or dead; the answer's
         *     `counts` says how many of each. With `purge=true` those jobs are deleted first, in
         *     batches of 1000 (no lock on a table, none held long).
         *
         *     Schedules whose job targets the queue and topics subscribed to it are never deleted
         *     with it: while any names it the delete is refused (`409 queue_not_empty`, naming them
         *     in `schedules` and `topics`), with or without `purge`. Delete those schedules (or point
         *     them at another queue) and unsubscribe the queue first.
         *
         *     An enqueue to the queue while it is deleted is never lost: it either commits first (and
         *     the delete answers 409, or purges it) or comes after and creates the queue again with
         *     the defaults, as any first enqueue does. A claim waiting on the queue keeps waiting.
         *
         *     Roles: `admin`.
         */
        delete: operations["delete_queue"];
        options?: never;
        head?: never;
        /**
         * Change a queue's settings
         * @description Only the settings given change. A queue that does not exist yet is created with the
         *     defaults first. Running caps and pauses apply to claims within 1 s on every replica.
         *
         *     Roles: `admin`.
         */
        patch: operations["patch_queue"];
        trace?: never;
    };
    "/v1/schedules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List schedules
         * @description Every schedule, enabled or not, by name.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["list_schedules"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/schedules/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a schedule
         * @description `next_fire_at` is the next time it fires (null while disabled); `last_fired_at` and
         *     `last_job_id` say what its last fire enqueued.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["get_schedule"];
        /**
         * Create or replace a schedule
         * @description Each fire enqueues one job from `job`, with the idempotency key
         *     `schedule:{name}:{fire time}` (such as `schedule:nightly-report:2026-12-04T01:00:00Z`), so
         *     a fire is one job however many replicas run. The job obeys its queue's `max_depth`: a
         *     fire that meets a full queue waits in `pending_fire_at` and is tried again every second.
         *     Replacing keeps `last_fired_at` and `last_job_id`; the next fire time is computed from
         *     now, so no fire time before the change is run.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        put: operations["put_schedule"];
        post?: never;
        /**
         * Delete a schedule
         * @description The jobs it enqueued stay where they are.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        delete: operations["delete_schedule"];
        options?: never;
        head?: never;
        /**
         * Change a schedule
         * @description Only the fields given change; `job` is a partial template, where null sets a field
         *     back to its default. A new `cron` or `timezone`, or `enabled: true` on a disabled
         *     schedule, sets the next fire time from now (no burst of the times it was off);
         *     `enabled: false` stops it firing and drops a fire waiting for a full queue.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        patch: operations["patch_schedule"];
        trace?: never;
    };
    "/v1/throughput": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Jobs finished per minute
         * @description Per queue, the jobs that completed and that died in each of the last `minutes`
         *     minutes, counted from the jobs' `completed_at`. Jobs a queue's `retention_ms` has
         *     already deleted are not counted, so a retention shorter than the window undercounts.
         *     Costs a read of the jobs finished in the window (an index range per queue).
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["get_throughput"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List tokens
         * @description Every token ever created, revoked ones included, newest first; never a secret.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["list_tokens"];
        put?: never;
        /**
         * Create a token
         * @description The answer holds the token itself, this once; the service keeps only its hash. It
         *     works on this replica at once and on every other within a second. Creating the first
         *     token ends local mode.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        post: operations["create_token"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tokens/{token_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Revoke a token
         * @description The token stops working on this replica at once and on every other within a second.
         *     Revoking a revoked token changes nothing and answers it again.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        delete: operations["revoke_token"];
        options?: never;
        head?: never;
        /**
         * Set a token's enqueue rate
         * @description `enqueue_rate`: the token's own token bucket of enqueues (null clears it). It applies
         *     on this replica at once and on every other within a second; the bucket's tokens are kept.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        patch: operations["patch_token"];
        trace?: never;
    };
    "/v1/topics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List topics and their subscriptions
         * @description Every topic with at least one subscription, by name; a topic exists through its
         *     subscriptions only.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["list_topics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/topics/{topic}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a topic
         * @description A topic nobody subscribed to is no error: it has no subscriptions, and publishing to
         *     it enqueues nothing.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["get_topic"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/topics/{topic}/publish": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Publish: one job in every subscribed queue, all or nothing
         * @description One transaction: a job per subscribed queue, each an ordinary job of that queue (its
         *     max_attempts, backoff and dead-letter handling), typed by the subscription's override
         *     when it has one. `201` when it enqueued anything. A topic without subscriptions
         *     enqueues nothing and answers `200` with `jobs: []`, as SNS does for a topic nobody
         *     subscribed to. The caller's token must cover every subscribed queue (else `403`, and
         *     nothing is enqueued); a subscribed queue at its `max_depth` refuses the whole publish
         *     (`429`). With `idempotency_key` each job's key is `topic:{topic}/{key}`: a repeated
         *     publish with the same payload answers `200` with the same jobs and enqueues nothing,
         *     even if a subscription's type override changed since (but a queue subscribed since, or
         *     whose job retention deleted, gets a new job, and the answer is then `201`).
         *
         *     Roles: `producer`, `admin`.
         */
        post: operations["publish_topic"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/topics/{topic}/subscriptions/{queue}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Subscribe a queue to a topic
         * @description From now on every publish to the topic enqueues one job in the queue, of the
         *     published type or of `type` when given. The body may be empty. A queue that does not
         *     exist yet is created with the defaults. Replacing changes only the type override.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        put: operations["subscribe_queue"];
        post?: never;
        /**
         * Unsubscribe a queue from a topic
         * @description Jobs published before stay in the queue. A publish in progress finishes first, with
         *     the queue included: no publish reaches only part of its subscribers.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        delete: operations["unsubscribe_queue"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/workers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Workers seen recently
         * @description The workers that beat (`POST /v1/workers/{worker_id}/beat`) within the last
         *     `window_s` seconds, hold running jobs now, or finished a job (completed, or failed for
         *     good) within the window, merged by `worker_id`, with their running jobs (at most 1000
         *     workers). A beating worker is listed while idle, with what it said of itself (`host`,
         *     `pid`, `concurrency`, `in_flight`, `started_at`, `state`: null for a worker known only
         *     from its jobs). A worker that neither beats nor got a job leaves no trace. A worker
         *     silent for an hour is forgotten. Costs a read of the workers table (a row per worker),
         *     of the running jobs and of the jobs finished in the window.
         *
         *     Roles: `admin`. The token's queue pattern must be `*`.
         */
        get: operations["list_workers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/workers/{worker_id}/beat": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * A worker reports itself
         * @description A worker process says it is alive, and what it is: every 10 s or so, and when its
         *     state changes (`stopping` when told to stop, `stopped` at exit). One upsert of its row,
         *     `last_seen_at` now; a field left out keeps what an earlier beat said, so a beat may be
         *     `{}` or no body at all. `queues` outside the token's queues are `403`. Answers the
         *     worker's record as its beats made it; `GET /v1/workers` adds what its jobs say. A
         *     `worker_id` holding a line break names no path: `404`.
         *
         *     Roles: `worker`, `admin`.
         */
        post: operations["beat_worker"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** AckBody */
        AckBody: {
            /** Result */
            result?: unknown;
        };
        /** AckItem */
        AckItem: {
            /** Lease Id */
            lease_id: string;
            /** Result */
            result?: unknown;
        };
        /** AckManyBody */
        AckManyBody: {
            /** Acks */
            acks: components["schemas"]["AckItem"][];
        };
        /** AckManyPublic */
        AckManyPublic: {
            /** Results */
            results: components["schemas"]["AckResult"][];
        };
        /** AckResult */
        AckResult: {
            /**
             * Already Completed
             * @description with `lease_lost` only, and only when true: this lease completed the job and its result is stored (an ack retried after its answer was lost)
             */
            already_completed?: boolean | null;
            /** Code */
            code?: ("lease_lost" | "not_found") | null;
            /** Lease Id */
            lease_id: string;
            /** Ok */
            ok: boolean;
        };
        /** ClaimBody */
        ClaimBody: {
            /** Lease Ms */
            lease_ms?: number | null;
            /**
             * Limit
             * @default 1
             */
            limit?: number;
            /** Queues */
            queues: string[];
            /** Types */
            types?: string[] | null;
            /**
             * Wait Ms
             * @default 0
             */
            wait_ms?: number;
            /** Worker Id */
            worker_id: string;
        };
        /** DeadFilter */
        DeadFilter: {
            /**
             * Limit
             * @description default: all
             */
            limit?: number | null;
            /** Queue */
            queue?: string | null;
            /** Type */
            type?: string | null;
        };
        /**
         * EnqueueRate
         * @description A token bucket of enqueues: `burst` jobs at once, refilled at `jobs` per `per_ms`
         *     ms; beyond it `429` with the wait in `Retry-After` and `retry_after_ms`.
         */
        EnqueueRate: {
            /**
             * Burst
             * @description the bucket's size (default `jobs`)
             */
            burst?: number | null;
            /** Jobs */
            jobs: number;
            /**
             * Per Ms
             * @description the window, in ms
             */
            per_ms: number;
        };
        /** EnqueueRatePublic */
        EnqueueRatePublic: {
            /** Burst */
            burst: number;
            /** Jobs */
            jobs: number;
            /** Per Ms */
            per_ms: number;
        };
        /** FailBody */
        FailBody: {
            /** Error */
            error: string;
            /**
             * Retry
             * @default true
             */
            retry?: boolean;
            /** Retry In Ms */
            retry_in_ms?: number | null;
        };
        /**
         * Health
         * @description `GET /healthz`: the process is up (it reads nothing else).
         */
        Health: {
            /**
             * Status
             * @constant
             */
            status: "ok";
        };
        /** HeartbeatBody */
        HeartbeatBody: {
            /** Extend Ms */
            extend_ms?: number | null;
        };
        /** HeartbeatPublic */
        HeartbeatPublic: {
            /**
             * Locked Until
             * Format: date-time
             */
            locked_until: string;
        };
        /** JobBatchCreate */
        JobBatchCreate: {
            /** Jobs */
            jobs: components["schemas"]["JobCreate"][];
        };
        /** JobBatchPublic */
        JobBatchPublic: {
            /** Jobs */
            jobs: components["schemas"]["JobPublic"][];
        };
        /** JobCreate */
        JobCreate: {
            /**
             * Delay Ms
             * @description at most 10 years; longer delays are refused (422)
             */
            delay_ms?: number | null;
            /**
             * Idempotency Key
             * @description may not start with `topic:` or `schedule:`, the keys of the jobs of topic publishes and schedules (422)
             */
            idempotency_key?: string | null;
            /**
             * Max Attempts
             * @description default: the queue's max_attempts
             */
            max_attempts?: number | null;
            /** Payload */
            payload?: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description higher runs first
             * @default 0
             */
            priority?: number;
            /**
             * Queue
             * @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit)
             * @default default
             * @example default
             */
            queue?: string;
            /**
             * Run At
             * @description RFC 3339 with an offset, within years 1 to 9999 in UTC
             */
            run_at?: string | null;
            /**
             * Type
             * @example email.welcome
             */
            type: string;
        };
        /** JobError */
        JobError: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /** Attempt */
            attempt: number;
            /** Error */
            error: string;
            /**
             * Kind
             * @enum {string}
             */
            kind: "failed" | "lease_expired";
        };
        /** JobPage */
        JobPage: {
            /** Jobs */
            jobs: components["schemas"]["JobPublic"][];
            /** Next Cursor */
            next_cursor: string | null;
        };
        /** JobPublic */
        JobPublic: {
            /** Attempt */
            attempt: number;
            /**
             * Completed At
             * @description when the job reached a final status
             */
            completed_at: string | null;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Errors */
            errors: components["schemas"]["JobError"][];
            /** Id */
            id: string;
            /** Idempotency Key */
            idempotency_key: string | null;
            /**
             * Last Error
             * @description the latest failure of a job not completed (null once it completes; `errors` keeps the history)
             */
            last_error: string | null;
            /** Locked Until */
            locked_until: string | null;
            /** Max Attempts */
            max_attempts: number;
            /** Payload */
            payload: {
                [key: string]: unknown;
            };
            /** Priority */
            priority: number;
            /** Queue */
            queue: string;
            /**
             * Releases
             * @description An extension of the contract: the claims given back by `POST /v1/leases/{lease_id}/release`, oldest first, the 20 most recent (`[]` for a job never released). A released claim is taken off `attempt` (so `attempt` counts the claims that were not released) and is neither an error nor a lease expiry
             */
            releases: components["schemas"]["JobRelease"][];
            /** Result */
            result?: unknown;
            status: components["schemas"]["JobStatus"];
            /** Type */
            type: string;
            /**
             * Visible At
             * Format: date-time
             */
            visible_at: string;
            /** Worker Id */
            worker_id: string | null;
        };
        /** JobRelease */
        JobRelease: {
            /**
             * At
             * Format: date-time
             */
            at: string;
            /**
             * Attempt
             * @description the number the released claim had
             */
            attempt: number;
            /**
             * Delay Ms
             * @description the release's `delay_ms`
             */
            delay_ms: number;
            /**
             * Worker Id
             * @description the worker that held the released claim
             */
            worker_id: string | null;
        };
        /**
         * JobStatus
         * @description Where a job is in its life. Stored as text in ``jobs.status``.
         * @enum {string}
         */
        JobStatus: "pending" | "running" | "failed" | "completed" | "dead" | "cancelled";
        /** LeaseList */
        LeaseList: {
            /** Leases */
            leases: components["schemas"]["LeasePublic"][];
        };
        /** LeasePublic */
        LeasePublic: {
            job: components["schemas"]["JobPublic"];
            /** Lease Id */
            lease_id: string;
            /**
             * Locked Until
             * Format: date-time
             */
            locked_until: string;
        };
        /**
         * Problem
         * @description RFC 9457 problem details with our own `code`: the body of every 4xx and 5xx.
         */
        Problem: {
            /** @description `lease_lost` only, and only when true: this very lease completed the job, whose result is stored (a retried ack whose first answer was lost) */
            already_completed?: boolean;
            /** @enum {string} */
            code: "validation_error" | "not_found" | "lease_lost" | "invalid_state" | "idempotency_conflict" | "queue_not_empty" | "queue_full" | "queue_rate_limited" | "token_rate_limited" | "queue_overloaded" | "unauthorized" | "forbidden" | "payload_too_large" | "method_not_allowed" | "unavailable" | "too_many_long_polls" | "bad_request" | "request_timeout" | "internal";
            /** @description `queue_not_empty` only: the queue's jobs that keep it from being deleted, by status (`pending`, `running`, `failed`, `dead`; nonzero only) */
            counts?: {
                [key: string]: number;
            };
            detail: string;
            /** @description `validation_error` only: each thing wrong, and where */
            errors?: components["schemas"]["ProblemItem"][];
            /** @description `queue_full`, `queue_rate_limited`, `token_rate_limited`, `queue_overloaded` only: how long to wait before sending the same request again, in ms (`Retry-After` says the same in whole seconds, rounded up); for a rate, when its bucket holds the whole request (a batch: all of it) */
            retry_after_ms?: number;
            /** @description `queue_not_empty` only: the schedules whose job targets the queue */
            schedules?: string[];
            /** @description the HTTP status of the answer */
            status: number;
            title: string;
            /** @description `queue_not_empty` only: the topics the queue is subscribed to */
            topics?: string[];
            /**
             * Format: uri-reference
             * @description `/problems/{code}`, relative to the request's URL: `GET` it for a page (HTML, or JSON with `Accept: application/json`) on what the code means and what to do; no token needed
             */
            type: string;
        };
        /** ProblemItem */
        ProblemItem: {
            /** @description `body`, `query` or `path`, then names and list indexes */
            loc: (string | number)[];
            msg: string;
        };
        /** PublishPublic */
        PublishPublic: {
            /**
             * Jobs
             * @description one per subscribed queue, by queue name
             */
            jobs: components["schemas"]["JobPublic"][];
            /** Topic */
            topic: string;
        };
        /** Purged */
        Purged: {
            /** Purged */
            purged: number;
        };
        /** QueueList */
        QueueList: {
            /**
             * Next Cursor
             * @description pass as `cursor` for the next page; null on the last page
             */
            next_cursor: string | null;
            /**
             * Queues
             * @description one page, by name
             */
            queues: components["schemas"]["QueuePublic"][];
        };
        /** QueuePublic */
        QueuePublic: {
            /** Counts */
            counts: {
                [key: string]: number;
            };
            /** Name */
            name: string;
            /** Oldest Waiting Ms */
            oldest_waiting_ms: number | null;
            /** @description the `rate_limit`'s current use; null without one */
            rate_limit_use?: components["schemas"]["RateLimitUse"] | null;
            settings: components["schemas"]["QueueSettings"];
            /** Waiting By Type */
            waiting_by_type: {
                [key: string]: number;
            };
        };
        /** QueueSettings */
        QueueSettings: {
            /** Aging Ms */
            aging_ms: number | null;
            /** Backoff Base Ms */
            backoff_base_ms: number;
            /** Backoff Max Ms */
            backoff_max_ms: number;
            /**
             * Dead Retention Ms
             * @description dead jobs are deleted this long after they died (default 30 days)
             */
            dead_retention_ms: number;
            /** @description producers' token bucket for this queue; null: none */
            enqueue_rate?: components["schemas"]["EnqueueRatePublic"] | null;
            /** Lease Ms */
            lease_ms: number;
            /** Max Attempts */
            max_attempts: number;
            /** Max Depth */
            max_depth: number | null;
            /** Max Lease Expiries */
            max_lease_expiries: number;
            /** Max Running */
            max_running: number | null;
            /** Paused */
            paused: boolean;
            /** @description the pace of claims: at most `jobs` handed out in any `per_ms` window (per `key` value); null: none */
            rate_limit?: components["schemas"]["RateLimitPublic"] | null;
            /**
             * Retention Ms
             * @description completed and cancelled jobs are deleted this long after they finished (default 7 days)
             */
            retention_ms: number;
            /**
             * Soft Depth
             * @description waiting jobs past which a growing share of enqueues is refused (`queue_overloaded`); null: off
             */
            soft_depth?: number | null;
            /**
             * Soft Lag Ms
             * @description oldest waiting job's lag past which the same happens; null: off
             */
            soft_lag_ms?: number | null;
        };
        /** QueueSettingsPatch */
        QueueSettingsPatch: {
            /** Aging Ms */
            aging_ms?: number | null;
            /** Backoff Base Ms */
            backoff_base_ms?: number | null;
            /** Backoff Max Ms */
            backoff_max_ms?: number | null;
            /** Dead Retention Ms */
            dead_retention_ms?: number | null;
            enqueue_rate?: components["schemas"]["EnqueueRate"] | null;
            /** Lease Ms */
            lease_ms?: number | null;
            /** Max Attempts */
            max_attempts?: number | null;
            /** Max Depth */
            max_depth?: number | null;
            /** Max Lease Expiries */
            max_lease_expiries?: number | null;
            /** Max Running */
            max_running?: number | null;
            /** Paused */
            paused?: boolean | null;
            rate_limit?: components["schemas"]["RateLimit"] | null;
            /** Retention Ms */
            retention_ms?: number | null;
            /** Soft Depth */
            soft_depth?: number | null;
            /** Soft Lag Ms */
            soft_lag_ms?: number | null;
        };
        /** QueueThroughput */
        QueueThroughput: {
            /**
             * Completed
             * @description jobs completed per minute, oldest first; the last entry is the minute under way
             */
            completed: number[];
            /**
             * Dead
             * @description jobs that died (out of attempts) per minute, as `completed`
             */
            dead: number[];
            /** Name */
            name: string;
        };
        /**
         * RateLimit
         * @description A queue's pace: at most `jobs` jobs handed out by claims in any window of `per_ms`
         *     ms, across every worker and replica (a sliding window: see the guide).
         */
        RateLimit: {
            /** Jobs */
            jobs: number;
            /**
             * Key
             * @description a separate allowance per value of this: `type` (the job type) or `payload.<field>` (a top-level payload field; jobs without it share one); null: one allowance for the queue
             */
            key?: string | null;
            /**
             * Per Ms
             * @description the window, in ms
             */
            per_ms: number;
        };
        /** RateLimitPublic */
        RateLimitPublic: {
            /** Jobs */
            jobs: number;
            /** Key */
            key?: string | null;
            /** Per Ms */
            per_ms: number;
        };
        /**
         * RateLimitUse
         * @description What the queue's `rate_limit` is using now.
         */
        RateLimitUse: {
            /**
             * Free In Ms
             * @description when a full window has room again; null: none full
             */
            free_in_ms: number | null;
            /**
             * Jobs
             * @description jobs handed out in the last `per_ms` (for a keyed limit: the busiest key's)
             */
            jobs: number;
            /**
             * Keys
             * @description keys with a job handed out in that window (1 or 0 without a key)
             */
            keys: number;
            /**
             * Keys At Limit
             * @description keys whose window is full
             */
            keys_at_limit: number;
        };
        /**
         * Ready
         * @description `GET /readyz`: the database answers and its schema is the one this code needs.
         */
        Ready: {
            /**
             * Schema
             * @description the database's migration revision (alembic's), the one this code needs
             */
            schema: string;
            /**
             * Status
             * @constant
             */
            status: "ready";
        };
        /** ReleaseBody */
        ReleaseBody: {
            /**
             * Delay Ms
             * @description when the job becomes claimable again, in ms from now (0: at once); at most 10 years, as an enqueue's `delay_ms`
             * @default 0
             */
            delay_ms?: number;
        };
        /** ReleaseItem */
        ReleaseItem: {
            /**
             * Delay Ms
             * @description when the job becomes claimable again, in ms from now (0: at once); at most 10 years, as an enqueue's `delay_ms`
             * @default 0
             */
            delay_ms?: number;
            /** Lease Id */
            lease_id: string;
        };
        /** ReleaseManyBody */
        ReleaseManyBody: {
            /** Releases */
            releases: components["schemas"]["ReleaseItem"][];
        };
        /** Replayed */
        Replayed: {
            /** Replayed */
            replayed: number;
        };
        /** ScheduleJobBody */
        ScheduleJobBody: {
            /**
             * Max Attempts
             * @description default: the queue's
             */
            max_attempts?: number | null;
            /** Payload */
            payload?: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description higher runs first
             * @default 0
             */
            priority?: number;
            /**
             * Queue
             * @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit)
             * @default default
             * @example default
             */
            queue?: string;
            /**
             * Type
             * @example report.nightly
             */
            type: string;
        };
        /**
         * ScheduleJobPatch
         * @description Merge-patch: a field given as null goes back to its default (`queue` default,
         *     `payload` {}, `priority` 0, `max_attempts` the queue's).
         */
        ScheduleJobPatch: {
            /** Max Attempts */
            max_attempts?: number | null;
            /** Payload */
            payload?: {
                [key: string]: unknown;
            } | null;
            /** Priority */
            priority?: number | null;
            /** Queue */
            queue?: string | null;
            /** Type */
            type?: string | null;
        };
        /** ScheduleJobPublic */
        ScheduleJobPublic: {
            /**
             * Max Attempts
             * @description null: the queue's max_attempts
             */
            max_attempts: number | null;
            /** Payload */
            payload: {
                [key: string]: unknown;
            };
            /** Priority */
            priority: number;
            /** Queue */
            queue: string;
            /** Type */
            type: string;
        };
        /** ScheduleList */
        ScheduleList: {
            /** Schedules */
            schedules: components["schemas"]["SchedulePublic"][];
        };
        /** SchedulePatch */
        SchedulePatch: {
            /** Cron */
            cron?: string | null;
            /** Enabled */
            enabled?: boolean | null;
            job?: components["schemas"]["ScheduleJobPatch"] | null;
            /** Misfire */
            misfire?: ("skip" | "run_once") | null;
            /** Timezone */
            timezone?: string | null;
        };
        /** SchedulePublic */
        SchedulePublic: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /**
             * Cron
             * @description as given, fields separated by one space
             */
            cron: string;
            /** Enabled */
            enabled: boolean;
            job: components["schemas"]["ScheduleJobPublic"];
            /**
             * Last Fired At
             * @description the fire time of the last job enqueued
             */
            last_fired_at: string | null;
            /**
             * Last Job Id
             * @description the job the last fire enqueued
             */
            last_job_id: string | null;
            /**
             * Misfire
             * @enum {string}
             */
            misfire: "skip" | "run_once";
            /** Name */
            name: string;
            /**
             * Next Fire At
             * @description null while disabled
             */
            next_fire_at: string | null;
            /**
             * Pending Fire At
             * @description a fire that met a full queue (max_depth), tried again every second
             */
            pending_fire_at: string | null;
            /** Timezone */
            timezone: string;
            /**
             * Updated At
             * Format: date-time
             */
            updated_at: string;
        };
        /** SchedulePut */
        SchedulePut: {
            /**
             * Cron
             * @description 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly` too
             * @example 0 2 * * *
             */
            cron: string;
            /**
             * Enabled
             * @default true
             */
            enabled?: boolean;
            job: components["schemas"]["ScheduleJobBody"];
            /**
             * Misfire
             * @description after downtime: `skip` resumes at the next future fire time; `run_once` enqueues one catch-up job for any number of missed fire times
             * @default run_once
             * @enum {string}
             */
            misfire?: "skip" | "run_once";
            /**
             * Timezone
             * @description an IANA time zone; the cron fields are read in it
             * @default UTC
             * @example Europe/Berlin
             */
            timezone?: string;
        };
        /** SubscriptionPublic */
        SubscriptionPublic: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Queue */
            queue: string;
            /** Topic */
            topic: string;
            /**
             * Type
             * @description null: jobs keep the published type
             */
            type: string | null;
        };
        /** SubscriptionPut */
        SubscriptionPut: {
            /**
             * Type
             * @description the job type this queue's jobs get in place of the published one; null or absent: the published type
             */
            type?: string | null;
        };
        /** Throughput */
        Throughput: {
            /** Minutes */
            minutes: number;
            /** Queues */
            queues: components["schemas"]["QueueThroughput"][];
        };
        /** TokenCreate */
        TokenCreate: {
            /** @description the token's own token bucket of enqueues, on top of the queues' (`429 token_rate_limited` beyond it); null: none */
            enqueue_rate?: components["schemas"]["EnqueueRate"] | null;
            /** Name */
            name?: string | null;
            /**
             * Queues
             * @description shell-style globs on the queue name, comma-separated: `*` any run of characters, `?` one, `[a-z]` and `[!a-z]` one of a set; `*` is every queue
             * @default *
             * @example tenant-a.*
             */
            queues?: string;
            /**
             * Role
             * @enum {string}
             */
            role: "producer" | "worker" | "admin";
        };
        /** TokenCreated */
        TokenCreated: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            enqueue_rate?: components["schemas"]["EnqueueRatePublic"] | null;
            /** Id */
            id: string;
            /** Name */
            name: string | null;
            /** Queues */
            queues: string;
            /** Revoked At */
            revoked_at: string | null;
            /**
             * Role
             * @enum {string}
             */
            role: "producer" | "worker" | "admin";
            /**
             * Token
             * @description the secret: shown this once, stored only as a hash
             */
            token: string;
        };
        /** TokenList */
        TokenList: {
            /** Tokens */
            tokens: components["schemas"]["TokenPublic"][];
        };
        /** TokenPatch */
        TokenPatch: {
            /** @description the token's enqueue rate; null: none */
            enqueue_rate: components["schemas"]["EnqueueRate"] | null;
        };
        /** TokenPublic */
        TokenPublic: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            enqueue_rate?: components["schemas"]["EnqueueRatePublic"] | null;
            /** Id */
            id: string;
            /** Name */
            name: string | null;
            /** Queues */
            queues: string;
            /** Revoked At */
            revoked_at: string | null;
            /**
             * Role
             * @enum {string}
             */
            role: "producer" | "worker" | "admin";
        };
        /** TopicList */
        TopicList: {
            /** Topics */
            topics: components["schemas"]["TopicPublic"][];
        };
        /** TopicPublic */
        TopicPublic: {
            /** Name */
            name: string;
            /**
             * Subscriptions
             * @description by queue name
             */
            subscriptions: components["schemas"]["TopicSubscriptionPublic"][];
        };
        /**
         * TopicPublish
         * @description ``JobCreate`` without ``queue``: the topic's subscriptions name the queues.
         *     tests/test_topics.py holds the two to the same fields.
         */
        TopicPublish: {
            /**
             * Delay Ms
             * @description at most 10 years; longer delays are refused (422)
             */
            delay_ms?: number | null;
            /**
             * Idempotency Key
             * @description each job gets `topic:{topic}/{key}`, unique in its queue
             */
            idempotency_key?: string | null;
            /**
             * Max Attempts
             * @description default: the queue's max_attempts
             */
            max_attempts?: number | null;
            /** Payload */
            payload?: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description higher runs first
             * @default 0
             */
            priority?: number;
            /**
             * Run At
             * @description RFC 3339 with an offset, within years 1 to 9999 in UTC
             */
            run_at?: string | null;
            /**
             * Type
             * @example email.welcome
             */
            type: string;
        };
        /** TopicSubscriptionPublic */
        TopicSubscriptionPublic: {
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Queue */
            queue: string;
            /**
             * Type
             * @description null: jobs keep the published type
             */
            type: string | null;
        };
        /**
         * WorkerBeatBody
         * @description What a worker process says of itself; every field optional, and one left out keeps
         *     what the worker said in an earlier beat.
         */
        WorkerBeatBody: {
            /** Concurrency */
            concurrency?: number | null;
            /** Host */
            host?: string | null;
            /** In Flight */
            in_flight?: number | null;
            /** Pid */
            pid?: number | null;
            /**
             * Queues
             * @description the queues it claims from
             */
            queues?: string[] | null;
            /** Started At */
            started_at?: string | null;
            /**
             * State
             * @description `stopping` once told to stop, `stopped` at exit
             */
            state?: ("running" | "stopping" | "stopped") | null;
        };
        /**
         * WorkerBeatPublic
         * @description The worker's record as its beats left it: what `GET /v1/workers` adds the jobs to.
         */
        WorkerBeatPublic: {
            /** Concurrency */
            concurrency: number | null;
            /** Host */
            host: string | null;
            /** In Flight */
            in_flight: number | null;
            /**
             * Last Seen At
             * Format: date-time
             * @description now: this beat
             */
            last_seen_at: string;
            /** Pid */
            pid: number | null;
            /**
             * Queues
             * @description as it said, by name; [] if it never said
             */
            queues: string[];
            /** Started At */
            started_at: string | null;
            state: components["schemas"]["WorkerState"] | null;
            /** Worker Id */
            worker_id: string;
        };
        /** WorkerList */
        WorkerList: {
            /** Window S */
            window_s: number;
            /** Workers */
            workers: components["schemas"]["WorkerSeen"][];
        };
        /** WorkerSeen */
        WorkerSeen: {
            /**
             * Concurrency
             * @description how many jobs it runs at once
             */
            concurrency: number | null;
            /**
             * Host
             * @description what it said in its beats; null for a worker known only from its jobs (as the fields below)
             */
            host: string | null;
            /**
             * In Flight
             * @description jobs it held at its last beat, running or prefetched
             */
            in_flight: number | null;
            /**
             * Last Seen At
             * Format: date-time
             * @description its latest beat, its latest claim of a job still running, or its latest finished job: the latest
             */
            last_seen_at: string;
            /** Pid */
            pid: number | null;
            /**
             * Queues
             * @description queues it said it serves, and those of the jobs it runs or finished in the window
             */
            queues: string[];
            /**
             * Running
             * @description jobs it holds leases on now
             */
            running: number;
            /** Started At */
            started_at: string | null;
            state: components["schemas"]["WorkerState"] | null;
            /**
             * Worker Id
             * @description as the worker sent it when claiming, or beating
             */
            worker_id: string;
        };
        /**
         * WorkerState
         * @description What a worker process says it is doing.
         * @enum {string}
         */
        WorkerState: "running" | "stopping" | "stopped";
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "status": "ok"
                     *     }
                     */
                    "application/json": components["schemas"]["Health"];
                };
            };
        };
    };
    get_metrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Prometheus text exposition format */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example # HELP jobq_waiting_jobs Jobs waiting (pending + failed), by queue and type
                     *     # TYPE jobq_waiting_jobs gauge
                     *     jobq_waiting_jobs{queue="emails",type="email.welcome"} 11.0
                     */
                    "text/plain": string;
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "schema": "0014",
                     *       "status": "ready"
                     *     }
                     */
                    "application/json": components["schemas"]["Ready"];
                };
            };
            /** @description `unavailable`: the database cannot be reached, or its schema is not the one this code needs */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    purge_dead: {
        parameters: {
            query?: {
                queue?: string | null;
                type?: string | null;
                limit?: number | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "purged": 2
                     *     }
                     */
                    "application/json": components["schemas"]["Purged"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    replay_dead: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                /**
                 * @example {
                 *       "limit": 100,
                 *       "queue": "emails",
                 *       "type": "email.welcome"
                 *     }
                 */
                "application/json": components["schemas"]["DeadFilter"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "replayed": 2
                     *     }
                     */
                    "application/json": components["schemas"]["Replayed"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    purge_dead_job: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                job_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description purged */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `invalid_state`: the job is not dead */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_jobs: {
        parameters: {
            query?: {
                queue?: string | null;
                status?: components["schemas"]["JobStatus"] | null;
                type?: string | null;
                limit?: number;
                cursor?: string | null;
                /** @description only jobs whose payload (its JSON text) or `last_error` contains this text, ignoring case; 1 to 200 characters. Scans: see above */
                search?: string | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "jobs": [
                     *         {
                     *           "attempt": 1,
                     *           "completed_at": "2026-01-15T09:30:02.000000Z",
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "1042",
                     *           "idempotency_key": "signup-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 5,
                     *           "payload": {
                     *             "locale": "en",
                     *             "user_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "emails",
                     *           "releases": [],
                     *           "result": {
                     *             "message_id": "m-81"
                     *           },
                     *           "status": "completed",
                     *           "type": "email.welcome",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": "worker-a:4242"
                     *         },
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "1043",
                     *           "idempotency_key": "signup-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 5,
                     *           "payload": {
                     *             "locale": "en",
                     *             "user_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "emails",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "email.welcome",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         }
                     *       ],
                     *       "next_cursor": "MjAyNi0wMS0xNVQwOTozMDowMFp8MTA0Mw"
                     *     }
                     */
                    "application/json": components["schemas"]["JobPage"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    create_job: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "idempotency_key": "signup-7",
                 *       "max_attempts": 5,
                 *       "payload": {
                 *         "locale": "en",
                 *         "user_id": 7
                 *       },
                 *       "queue": "emails",
                 *       "type": "email.welcome"
                 *     }
                 */
                "application/json": components["schemas"]["JobCreate"];
            };
        };
        responses: {
            /** @description idempotent replay: the existing job, nothing new */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 0,
                     *       "completed_at": null,
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": null,
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "status": "pending",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:00.000000Z",
                     *       "worker_id": null
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description enqueued */
            201: {
                headers: {
                    /** @description `/v1/jobs/{id}` */
                    Location: string;
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 0,
                     *       "completed_at": null,
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": null,
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "status": "pending",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:00.000000Z",
                     *       "worker_id": null
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `idempotency_conflict`: the key names a job with another type or payload */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `queue_full` (max_depth), `queue_rate_limited` (the queue's `enqueue_rate`), `token_rate_limited` (the token's `enqueue_rate`) or `queue_overloaded` (past `soft_depth` or `soft_lag_ms`): nothing enqueued; wait `Retry-After` (whole seconds) or the body's `retry_after_ms` */
            429: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    create_jobs: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "jobs": [
                 *         {
                 *           "payload": {
                 *             "user_id": 7
                 *           },
                 *           "queue": "emails",
                 *           "type": "email.welcome"
                 *         },
                 *         {
                 *           "delay_ms": 60000,
                 *           "payload": {
                 *             "user_id": 8
                 *           },
                 *           "queue": "emails",
                 *           "type": "email.welcome"
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["JobBatchCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "jobs": [
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "1042",
                     *           "idempotency_key": "signup-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 5,
                     *           "payload": {
                     *             "locale": "en",
                     *             "user_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "emails",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "email.welcome",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         },
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "1043",
                     *           "idempotency_key": null,
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 5,
                     *           "payload": {
                     *             "user_id": 8
                     *           },
                     *           "priority": 0,
                     *           "queue": "emails",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "email.welcome",
                     *           "visible_at": "2026-01-15T09:31:00.000000Z",
                     *           "worker_id": null
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["JobBatchPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `idempotency_conflict`: the key names a job with another type or payload */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `queue_full`: a target queue would pass max_depth; `queue_rate_limited` or `token_rate_limited`: a bucket holds fewer jobs than the batch (`retry_after_ms`: when it holds them all); `queue_overloaded`: past soft thresholds. Nothing enqueued. `Retry-After` in whole seconds */
            429: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_job: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                job_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 1,
                     *       "completed_at": null,
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [
                     *         {
                     *           "at": "2026-01-15T09:30:02.000000Z",
                     *           "attempt": 1,
                     *           "error": "SMTP timeout",
                     *           "kind": "failed"
                     *         }
                     *       ],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": "SMTP timeout",
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "status": "failed",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:12.000000Z",
                     *       "worker_id": "worker-a:4242"
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    delete_job: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                job_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `invalid_state`: the job is running */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    cancel_job: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                job_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 0,
                     *       "completed_at": "2026-01-15T09:30:05.000000Z",
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": null,
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "status": "cancelled",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:00.000000Z",
                     *       "worker_id": null
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `invalid_state`: the job has finished */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    retry_job: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                job_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 0,
                     *       "completed_at": null,
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [
                     *         {
                     *           "at": "2026-01-15T09:30:02.000000Z",
                     *           "attempt": 1,
                     *           "error": "SMTP timeout",
                     *           "kind": "failed"
                     *         }
                     *       ],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": "SMTP timeout",
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "status": "pending",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:00.000000Z",
                     *       "worker_id": null
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such job */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `invalid_state`: not dead, cancelled or failed */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    claim: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "lease_ms": 30000,
                 *       "limit": 10,
                 *       "queues": [
                 *         "emails",
                 *         "reports"
                 *       ],
                 *       "wait_ms": 20000,
                 *       "worker_id": "worker-a:4242"
                 *     }
                 */
                "application/json": components["schemas"]["ClaimBody"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "leases": [
                     *         {
                     *           "job": {
                     *             "attempt": 1,
                     *             "completed_at": null,
                     *             "created_at": "2026-01-15T09:30:00.000000Z",
                     *             "errors": [],
                     *             "id": "1042",
                     *             "idempotency_key": "signup-7",
                     *             "last_error": null,
                     *             "locked_until": "2026-01-15T09:30:30.000000Z",
                     *             "max_attempts": 5,
                     *             "payload": {
                     *               "locale": "en",
                     *               "user_id": 7
                     *             },
                     *             "priority": 0,
                     *             "queue": "emails",
                     *             "releases": [],
                     *             "status": "running",
                     *             "type": "email.welcome",
                     *             "visible_at": "2026-01-15T09:30:00.000000Z",
                     *             "worker_id": "worker-a:4242"
                     *           },
                     *           "lease_id": "1042.1",
                     *           "locked_until": "2026-01-15T09:30:30.000000Z"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["LeaseList"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time, or the service is out of file descriptors; `too_many_long_polls`: a claim with `wait_ms` with no job to hand it at once while this service process already holds its cap of waiting claims (`JOBQ_MAX_LONG_POLLS`), answered at once with `Connection: close`. Either way nothing was claimed: claim again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    ack_many: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "acks": [
                 *         {
                 *           "lease_id": "1042.1",
                 *           "result": {
                 *             "message_id": "m-81"
                 *           }
                 *         },
                 *         {
                 *           "lease_id": "1043.2"
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["AckManyBody"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "results": [
                     *         {
                     *           "lease_id": "1042.1",
                     *           "ok": true
                     *         },
                     *         {
                     *           "code": "lease_lost",
                     *           "lease_id": "1043.2",
                     *           "ok": false
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["AckManyPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    release_many: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "releases": [
                 *         {
                 *           "lease_id": "1042.1"
                 *         },
                 *         {
                 *           "delay_ms": 5000,
                 *           "lease_id": "1043.2"
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["ReleaseManyBody"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "results": [
                     *         {
                     *           "lease_id": "1042.1",
                     *           "ok": true
                     *         },
                     *         {
                     *           "code": "lease_lost",
                     *           "lease_id": "1043.2",
                     *           "ok": false
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["AckManyPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    ack: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lease_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                /**
                 * @example {
                 *       "result": {
                 *         "message_id": "m-81"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["AckBody"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 1,
                     *       "completed_at": "2026-01-15T09:30:02.000000Z",
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": null,
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "result": {
                     *         "message_id": "m-81"
                     *       },
                     *       "status": "completed",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:00.000000Z",
                     *       "worker_id": "worker-a:4242"
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lease */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is no longer held; nothing changed. With `already_completed: true`, this very lease completed the job and its result is stored (a retry of an ack whose answer was lost) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    fail: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lease_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "error": "SMTP timeout",
                 *       "retry": true,
                 *       "retry_in_ms": 10000
                 *     }
                 */
                "application/json": components["schemas"]["FailBody"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 1,
                     *       "completed_at": null,
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [
                     *         {
                     *           "at": "2026-01-15T09:30:02.000000Z",
                     *           "attempt": 1,
                     *           "error": "SMTP timeout",
                     *           "kind": "failed"
                     *         }
                     *       ],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": "SMTP timeout",
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [],
                     *       "status": "failed",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:12.000000Z",
                     *       "worker_id": "worker-a:4242"
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lease */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is no longer held; nothing changed. With `already_completed: true`, this very lease completed the job and its result is stored (a retry of an ack whose answer was lost) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    heartbeat: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lease_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                /**
                 * @example {
                 *       "extend_ms": 30000
                 *     }
                 */
                "application/json": components["schemas"]["HeartbeatBody"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "locked_until": "2026-01-15T09:31:00.000000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["HeartbeatPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lease */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is no longer held; nothing changed. With `already_completed: true`, this very lease completed the job and its result is stored (a retry of an ack whose answer was lost) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    release: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                lease_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                /**
                 * @example {
                 *       "delay_ms": 0
                 *     }
                 */
                "application/json": components["schemas"]["ReleaseBody"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "attempt": 0,
                     *       "completed_at": null,
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "errors": [],
                     *       "id": "1042",
                     *       "idempotency_key": "signup-7",
                     *       "last_error": null,
                     *       "locked_until": null,
                     *       "max_attempts": 5,
                     *       "payload": {
                     *         "locale": "en",
                     *         "user_id": 7
                     *       },
                     *       "priority": 0,
                     *       "queue": "emails",
                     *       "releases": [
                     *         {
                     *           "at": "2026-01-15T09:30:05.000000Z",
                     *           "attempt": 1,
                     *           "delay_ms": 0,
                     *           "worker_id": "worker-a:4242"
                     *         }
                     *       ],
                     *       "status": "pending",
                     *       "type": "email.welcome",
                     *       "visible_at": "2026-01-15T09:30:05.000000Z",
                     *       "worker_id": null
                     *     }
                     */
                    "application/json": components["schemas"]["JobPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such lease */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `lease_lost`: the lease is no longer held; nothing changed. With `already_completed: true`, this very lease completed the job and its result is stored (a retry of an ack whose answer was lost) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_queues: {
        parameters: {
            query?: {
                /** @description queues per page (default 100, at most 1000) */
                limit?: number;
                /** @description `next_cursor` of the previous page; absent: the first page */
                cursor?: string | null;
                /** @description only queues whose name starts with this */
                prefix?: string | null;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "next_cursor": "cTplbWFpbA",
                     *       "queues": [
                     *         {
                     *           "counts": {
                     *             "cancelled": 0,
                     *             "completed": 940,
                     *             "dead": 2,
                     *             "failed": 1,
                     *             "pending": 12,
                     *             "running": 3
                     *           },
                     *           "name": "emails",
                     *           "oldest_waiting_ms": 850,
                     *           "rate_limit_use": {
                     *             "free_in_ms": 420,
                     *             "jobs": 100,
                     *             "keys": 1,
                     *             "keys_at_limit": 1
                     *           },
                     *           "settings": {
                     *             "aging_ms": null,
                     *             "backoff_base_ms": 1000,
                     *             "backoff_max_ms": 3600000,
                     *             "dead_retention_ms": 2592000000,
                     *             "enqueue_rate": {
                     *               "burst": 200,
                     *               "jobs": 50,
                     *               "per_ms": 1000
                     *             },
                     *             "lease_ms": 30000,
                     *             "max_attempts": 5,
                     *             "max_depth": 10000,
                     *             "max_lease_expiries": 3,
                     *             "max_running": null,
                     *             "paused": false,
                     *             "rate_limit": {
                     *               "jobs": 100,
                     *               "key": null,
                     *               "per_ms": 60000
                     *             },
                     *             "retention_ms": 604800000,
                     *             "soft_depth": 5000,
                     *             "soft_lag_ms": 60000
                     *           },
                     *           "waiting_by_type": {
                     *             "email.digest": 2,
                     *             "email.welcome": 11
                     *           }
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["QueueList"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_queue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "counts": {
                     *         "cancelled": 0,
                     *         "completed": 940,
                     *         "dead": 2,
                     *         "failed": 1,
                     *         "pending": 12,
                     *         "running": 3
                     *       },
                     *       "name": "emails",
                     *       "oldest_waiting_ms": 850,
                     *       "rate_limit_use": {
                     *         "free_in_ms": 420,
                     *         "jobs": 100,
                     *         "keys": 1,
                     *         "keys_at_limit": 1
                     *       },
                     *       "settings": {
                     *         "aging_ms": null,
                     *         "backoff_base_ms": 1000,
                     *         "backoff_max_ms": 3600000,
                     *         "dead_retention_ms": 2592000000,
                     *         "enqueue_rate": {
                     *           "burst": 200,
                     *           "jobs": 50,
                     *           "per_ms": 1000
                     *         },
                     *         "lease_ms": 30000,
                     *         "max_attempts": 5,
                     *         "max_depth": 10000,
                     *         "max_lease_expiries": 3,
                     *         "max_running": null,
                     *         "paused": false,
                     *         "rate_limit": {
                     *           "jobs": 100,
                     *           "key": null,
                     *           "per_ms": 60000
                     *         },
                     *         "retention_ms": 604800000,
                     *         "soft_depth": 5000,
                     *         "soft_lag_ms": 60000
                     *       },
                     *       "waiting_by_type": {
                     *         "email.digest": 2,
                     *         "email.welcome": 11
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["QueuePublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such queue */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    delete_queue: {
        parameters: {
            query?: {
                /** @description delete the queue's jobs too, whatever their status: running jobs lose their leases (a later heartbeat, ack or fail answers `409 lease_lost`) */
                purge?: boolean;
            };
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such queue */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `queue_not_empty`: the queue holds jobs waiting, running, failed or dead (`counts` by status), or schedules or topic subscriptions name it (`schedules`, `topics`); nothing was deleted */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    patch_queue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "max_attempts": 5,
                 *       "max_depth": 10000,
                 *       "paused": false,
                 *       "rate_limit": {
                 *         "jobs": 100,
                 *         "per_ms": 60000
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["QueueSettingsPatch"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "counts": {
                     *         "cancelled": 0,
                     *         "completed": 940,
                     *         "dead": 2,
                     *         "failed": 1,
                     *         "pending": 12,
                     *         "running": 3
                     *       },
                     *       "name": "emails",
                     *       "oldest_waiting_ms": 850,
                     *       "rate_limit_use": {
                     *         "free_in_ms": 420,
                     *         "jobs": 100,
                     *         "keys": 1,
                     *         "keys_at_limit": 1
                     *       },
                     *       "settings": {
                     *         "aging_ms": null,
                     *         "backoff_base_ms": 1000,
                     *         "backoff_max_ms": 3600000,
                     *         "dead_retention_ms": 2592000000,
                     *         "enqueue_rate": {
                     *           "burst": 200,
                     *           "jobs": 50,
                     *           "per_ms": 1000
                     *         },
                     *         "lease_ms": 30000,
                     *         "max_attempts": 5,
                     *         "max_depth": 10000,
                     *         "max_lease_expiries": 3,
                     *         "max_running": null,
                     *         "paused": false,
                     *         "rate_limit": {
                     *           "jobs": 100,
                     *           "key": null,
                     *           "per_ms": 60000
                     *         },
                     *         "retention_ms": 604800000,
                     *         "soft_depth": 5000,
                     *         "soft_lag_ms": 60000
                     *       },
                     *       "waiting_by_type": {
                     *         "email.digest": 2,
                     *         "email.welcome": 11
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["QueuePublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_schedules: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description every schedule, by name */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "schedules": [
                     *         {
                     *           "created_at": "2026-11-30T09:12:44.120931Z",
                     *           "cron": "0 2 * * *",
                     *           "enabled": true,
                     *           "job": {
                     *             "max_attempts": null,
                     *             "payload": {
                     *               "format": "pdf"
                     *             },
                     *             "priority": 0,
                     *             "queue": "reports",
                     *             "type": "report.nightly"
                     *           },
                     *           "last_fired_at": "2026-12-04T01:00:00Z",
                     *           "last_job_id": "81723",
                     *           "misfire": "run_once",
                     *           "name": "nightly-report",
                     *           "next_fire_at": "2026-12-05T01:00:00Z",
                     *           "pending_fire_at": null,
                     *           "timezone": "Europe/Berlin",
                     *           "updated_at": "2026-11-30T09:12:44.120931Z"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ScheduleList"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description the schedule */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-11-30T09:12:44.120931Z",
                     *       "cron": "0 2 * * *",
                     *       "enabled": true,
                     *       "job": {
                     *         "max_attempts": null,
                     *         "payload": {
                     *           "format": "pdf"
                     *         },
                     *         "priority": 0,
                     *         "queue": "reports",
                     *         "type": "report.nightly"
                     *       },
                     *       "last_fired_at": "2026-12-04T01:00:00Z",
                     *       "last_job_id": "81723",
                     *       "misfire": "run_once",
                     *       "name": "nightly-report",
                     *       "next_fire_at": "2026-12-05T01:00:00Z",
                     *       "pending_fire_at": null,
                     *       "timezone": "Europe/Berlin",
                     *       "updated_at": "2026-11-30T09:12:44.120931Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SchedulePublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    put_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SchedulePut"];
            };
        };
        responses: {
            /** @description replaced */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-11-30T09:12:44.120931Z",
                     *       "cron": "0 2 * * *",
                     *       "enabled": true,
                     *       "job": {
                     *         "max_attempts": null,
                     *         "payload": {
                     *           "format": "pdf"
                     *         },
                     *         "priority": 0,
                     *         "queue": "reports",
                     *         "type": "report.nightly"
                     *       },
                     *       "last_fired_at": "2026-12-04T01:00:00Z",
                     *       "last_job_id": "81723",
                     *       "misfire": "run_once",
                     *       "name": "nightly-report",
                     *       "next_fire_at": "2026-12-05T01:00:00Z",
                     *       "pending_fire_at": null,
                     *       "timezone": "Europe/Berlin",
                     *       "updated_at": "2026-11-30T09:12:44.120931Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SchedulePublic"];
                };
            };
            /** @description created */
            201: {
                headers: {
                    /** @description `/v1/schedules/{name}` */
                    Location: string;
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-11-30T09:12:44.120931Z",
                     *       "cron": "0 2 * * *",
                     *       "enabled": true,
                     *       "job": {
                     *         "max_attempts": null,
                     *         "payload": {
                     *           "format": "pdf"
                     *         },
                     *         "priority": 0,
                     *         "queue": "reports",
                     *         "type": "report.nightly"
                     *       },
                     *       "last_fired_at": "2026-12-04T01:00:00Z",
                     *       "last_job_id": "81723",
                     *       "misfire": "run_once",
                     *       "name": "nightly-report",
                     *       "next_fire_at": "2026-12-05T01:00:00Z",
                     *       "pending_fire_at": null,
                     *       "timezone": "Europe/Berlin",
                     *       "updated_at": "2026-11-30T09:12:44.120931Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SchedulePublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    delete_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    patch_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SchedulePatch"];
            };
        };
        responses: {
            /** @description the schedule as changed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-11-30T09:12:44.120931Z",
                     *       "cron": "0 2 * * *",
                     *       "enabled": true,
                     *       "job": {
                     *         "max_attempts": null,
                     *         "payload": {
                     *           "format": "pdf"
                     *         },
                     *         "priority": 0,
                     *         "queue": "reports",
                     *         "type": "report.nightly"
                     *       },
                     *       "last_fired_at": "2026-12-04T01:00:00Z",
                     *       "last_job_id": "81723",
                     *       "misfire": "run_once",
                     *       "name": "nightly-report",
                     *       "next_fire_at": "2026-12-05T01:00:00Z",
                     *       "pending_fire_at": null,
                     *       "timezone": "Europe/Berlin",
                     *       "updated_at": "2026-11-30T09:12:44.120931Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SchedulePublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_throughput: {
        parameters: {
            query?: {
                /** @description how many minutes back */
                minutes?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "minutes": 3,
                     *       "queues": [
                     *         {
                     *           "completed": [
                     *             118,
                     *             131,
                     *             42
                     *           ],
                     *           "dead": [
                     *             0,
                     *             1,
                     *             0
                     *           ],
                     *           "name": "emails"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["Throughput"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_tokens: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "tokens": [
                     *         {
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "enqueue_rate": null,
                     *           "id": "tok_3f2a",
                     *           "name": "billing workers",
                     *           "queues": "billing.*",
                     *           "revoked_at": null,
                     *           "role": "worker"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["TokenList"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    create_token: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "billing workers",
                 *       "queues": "billing.*",
                 *       "role": "worker"
                 *     }
                 */
                "application/json": components["schemas"]["TokenCreate"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "enqueue_rate": null,
                     *       "id": "tok_3f2a",
                     *       "name": "billing workers",
                     *       "queues": "billing.*",
                     *       "revoked_at": null,
                     *       "role": "worker",
                     *       "token": "jobq_w_8Jt1cQ3...(shown once)"
                     *     }
                     */
                    "application/json": components["schemas"]["TokenCreated"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    revoke_token: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                token_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "enqueue_rate": null,
                     *       "id": "tok_3f2a",
                     *       "name": "billing workers",
                     *       "queues": "billing.*",
                     *       "revoked_at": "2026-01-16T10:00:00.000000Z",
                     *       "role": "worker"
                     *     }
                     */
                    "application/json": components["schemas"]["TokenPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such token */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    patch_token: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                token_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "enqueue_rate": {
                 *         "burst": 200,
                 *         "jobs": 50,
                 *         "per_ms": 1000
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["TokenPatch"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "enqueue_rate": {
                     *         "burst": 200,
                     *         "jobs": 50,
                     *         "per_ms": 1000
                     *       },
                     *       "id": "tok_3f2a",
                     *       "name": "billing workers",
                     *       "queues": "billing.*",
                     *       "revoked_at": null,
                     *       "role": "worker"
                     *     }
                     */
                    "application/json": components["schemas"]["TokenPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: no such token */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_topics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "topics": [
                     *         {
                     *           "name": "orders.placed",
                     *           "subscriptions": [
                     *             {
                     *               "created_at": "2026-01-15T09:30:00.000000Z",
                     *               "queue": "billing",
                     *               "type": "invoice.create"
                     *             },
                     *             {
                     *               "created_at": "2026-01-15T09:30:00.000000Z",
                     *               "queue": "emails",
                     *               "type": null
                     *             },
                     *             {
                     *               "created_at": "2026-01-15T09:30:00.000000Z",
                     *               "queue": "search",
                     *               "type": null
                     *             }
                     *           ]
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["TopicList"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: a query parameter this route does not take (or, where it takes some, a value that does not fit); `errors` says which */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    get_topic: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                topic: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "name": "orders.placed",
                     *       "subscriptions": [
                     *         {
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "queue": "billing",
                     *           "type": "invoice.create"
                     *         },
                     *         {
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "queue": "emails",
                     *           "type": null
                     *         },
                     *         {
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "queue": "search",
                     *           "type": null
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["TopicPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    publish_topic: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                topic: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "idempotency_key": "order-7",
                 *       "payload": {
                 *         "order_id": 7
                 *       },
                 *       "type": "order.placed"
                 *     }
                 */
                "application/json": components["schemas"]["TopicPublish"];
            };
        };
        responses: {
            /** @description nothing new: an idempotent replay (the jobs of the first publish), or a topic without subscriptions */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "jobs": [
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "2001",
                     *           "idempotency_key": "topic:orders.placed/order-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 25,
                     *           "payload": {
                     *             "order_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "billing",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "invoice.create",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         },
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "2002",
                     *           "idempotency_key": "topic:orders.placed/order-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 25,
                     *           "payload": {
                     *             "order_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "emails",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "order.placed",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         },
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "2003",
                     *           "idempotency_key": "topic:orders.placed/order-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 25,
                     *           "payload": {
                     *             "order_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "search",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "order.placed",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         }
                     *       ],
                     *       "topic": "orders.placed"
                     *     }
                     */
                    "application/json": components["schemas"]["PublishPublic"];
                };
            };
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "jobs": [
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "2001",
                     *           "idempotency_key": "topic:orders.placed/order-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 25,
                     *           "payload": {
                     *             "order_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "billing",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "invoice.create",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         },
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "2002",
                     *           "idempotency_key": "topic:orders.placed/order-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 25,
                     *           "payload": {
                     *             "order_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "emails",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "order.placed",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         },
                     *         {
                     *           "attempt": 0,
                     *           "completed_at": null,
                     *           "created_at": "2026-01-15T09:30:00.000000Z",
                     *           "errors": [],
                     *           "id": "2003",
                     *           "idempotency_key": "topic:orders.placed/order-7",
                     *           "last_error": null,
                     *           "locked_until": null,
                     *           "max_attempts": 25,
                     *           "payload": {
                     *             "order_id": 7
                     *           },
                     *           "priority": 0,
                     *           "queue": "search",
                     *           "releases": [],
                     *           "status": "pending",
                     *           "type": "order.placed",
                     *           "visible_at": "2026-01-15T09:30:00.000000Z",
                     *           "worker_id": null
                     *         }
                     *       ],
                     *       "topic": "orders.placed"
                     *     }
                     */
                    "application/json": components["schemas"]["PublishPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `idempotency_conflict`: the key names jobs of another payload */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `queue_full`: a subscribed queue is at its max_depth; nothing enqueued. `Retry-After` in whole seconds */
            429: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    subscribe_queue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                topic: string;
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                queue: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["SubscriptionPut"] | null;
            };
        };
        responses: {
            /** @description replaced (the type override is the new one) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "queue": "billing",
                     *       "topic": "orders.placed",
                     *       "type": "invoice.create"
                     *     }
                     */
                    "application/json": components["schemas"]["SubscriptionPublic"];
                };
            };
            /** @description created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "created_at": "2026-01-15T09:30:00.000000Z",
                     *       "queue": "billing",
                     *       "topic": "orders.placed",
                     *       "type": "invoice.create"
                     *     }
                     */
                    "application/json": components["schemas"]["SubscriptionPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    unsubscribe_queue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                topic: string;
                /** @description 1 to 128 of letters, digits and _ . : - (starting with a letter or digit) */
                queue: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description unsubscribed */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found`: the queue is not subscribed to the topic */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    list_workers: {
        parameters: {
            query?: {
                /** @description how far back a finished job makes its worker seen */
                window_s?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "window_s": 300,
                     *       "workers": [
                     *         {
                     *           "concurrency": 8,
                     *           "host": "worker-a",
                     *           "in_flight": 3,
                     *           "last_seen_at": "2026-01-15T09:30:00.000000Z",
                     *           "pid": 4242,
                     *           "queues": [
                     *             "emails"
                     *           ],
                     *           "running": 3,
                     *           "started_at": "2026-01-15T08:00:00.000000Z",
                     *           "state": "running",
                     *           "worker_id": "worker-a:4242"
                     *         },
                     *         {
                     *           "concurrency": null,
                     *           "host": null,
                     *           "in_flight": null,
                     *           "last_seen_at": "2026-01-15T09:29:41.000000Z",
                     *           "pid": null,
                     *           "queues": [
                     *             "reports"
                     *           ],
                     *           "running": 0,
                     *           "started_at": null,
                     *           "state": null,
                     *           "worker_id": "cron-box:77"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["WorkerList"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    beat_worker: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description the `worker_id` it claims with (percent-encoded) */
                worker_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                /**
                 * @example {
                 *       "concurrency": 8,
                 *       "host": "worker-a",
                 *       "in_flight": 3,
                 *       "pid": 4242,
                 *       "queues": [
                 *         "emails"
                 *       ],
                 *       "started_at": "2026-01-15T08:00:00.000000Z",
                 *       "state": "running"
                 *     }
                 */
                "application/json": components["schemas"]["WorkerBeatBody"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "concurrency": 8,
                     *       "host": "worker-a",
                     *       "in_flight": 3,
                     *       "last_seen_at": "2026-01-15T09:30:00.000000Z",
                     *       "pid": 4242,
                     *       "queues": [
                     *         "emails"
                     *       ],
                     *       "started_at": "2026-01-15T08:00:00.000000Z",
                     *       "state": "running",
                     *       "worker_id": "worker-a:4242"
                     *     }
                     */
                    "application/json": components["schemas"]["WorkerBeatPublic"];
                };
            };
            /** @description `unauthorized`: once any access token exists, a call without a known bearer token */
            401: {
                headers: {
                    /** @description `Bearer` */
                    "WWW-Authenticate": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `forbidden`: the token's role may not make this call, or a queue it names is outside the token's queue pattern */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `payload_too_large`: the body is over the size limit (default 1 MiB) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `validation_error`: the request does not fit this document; `errors` says where */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description `unavailable`: the database did not answer in time; try again after `Retry-After` seconds */
            503: {
                headers: {
                    /** @description whole seconds, at least 1 */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
}
