// Client: every call of the jobq HTTP API a producer, an operator or a hand-written worker
// loop makes, over the runtime's own fetch. Answers are the service's JSON objects as they
// are (snake_case fields, typed in index.d.ts from openapi/openapi.json); the options of
// our own functions are camelCase.

import {
  JobFailed,
  RetryableError,
  TransportError,
  WaitTimeout,
  errorFromAnswer,
} from "./errors.js";
import { env, sleep } from "./runtime.js";

export const VERSION = "0.1.0";
export const TOKEN_ENV = "JOBQ_TOKEN";
export const DEFAULT_TIMEOUT_MS = 30_000;
// A long-poll claim holds the request open for waitMs; its timeout must outlast that.
const CLAIM_TIMEOUT_MARGIN_MS = 10_000;
// Retry-After is optional on a 503 from a proxy; a second is a polite first guess.
const DEFAULT_RETRY_AFTER_MS = 1_000;
// wait() polls GET /v1/jobs/{id}: quickly at first (most jobs are short), then calmer.
const WAIT_POLL_FIRST_MS = 50;
const WAIT_POLL_MAX_MS = 1_000;
const FINISHED = new Set(["completed", "dead", "cancelled"]);

// camelCase option -> the API's field, for the options that name a body field.
const QUEUE_SETTINGS = {
  maxDepth: "max_depth",
  paused: "paused",
  leaseMs: "lease_ms",
  maxAttempts: "max_attempts",
  backoffBaseMs: "backoff_base_ms",
  backoffMaxMs: "backoff_max_ms",
  maxLeaseExpiries: "max_lease_expiries",
  agingMs: "aging_ms",
  maxRunning: "max_running",
  retentionMs: "retention_ms",
  deadRetentionMs: "dead_retention_ms",
  rateLimit: "rate_limit",
  enqueueRate: "enqueue_rate",
  softDepth: "soft_depth",
  softLagMs: "soft_lag_ms",
};
// The settings that are objects, and their own fields (camelCase -> the API's).
const RATE_FIELDS = {
  rateLimit: { jobs: "jobs", perMs: "per_ms", key: "key" },
  enqueueRate: { jobs: "jobs", perMs: "per_ms", burst: "burst" },
};

/** The service's base URL, refused at once when it is not an absolute http(s) URL. */
export function checkUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`url ${JSON.stringify(url)} is not a URL (for example http://127.0.0.1:8000)`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new TypeError(`url ${JSON.stringify(url)} is not an http:// or https:// URL`);
  }
  const path = parsed.pathname.replace(/\/+$/, "");
  if (path.endsWith("/v1")) {
    // Every call adds /v1/... itself: this URL would answer 404 to all of them.
    throw new TypeError(`url ${JSON.stringify(url)} names the API's /v1: give the service's root`);
  }
  return parsed.origin + path;
}

/** `/v1/...` with each id percent-encoded: ids are opaque and may hold any character. */
function path(...parts) {
  return "/v1/" + parts.map((p) => encodeURIComponent(String(p))).join("/");
}

function definedOnly(fields) {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}

function rfc3339(value) {
  if (value instanceof Date) return value.toISOString();
  return value;
}

/** The body of POST /v1/jobs from enqueue's arguments. */
export function jobBody(type, payload, options = {}) {
  const { queue, priority, delayMs, runAt, maxAttempts, idempotencyKey, ...unknown } = options;
  const extra = Object.keys(unknown);
  if (extra.length) throw new TypeError(`unknown enqueue option(s): ${extra.join(", ")}`);
  if (delayMs !== undefined && runAt !== undefined) {
    throw new TypeError("give delayMs or runAt, not both");
  }
  if (payload !== undefined && (payload === null || typeof payload !== "object" || Array.isArray(payload))) {
    throw new TypeError("payload must be a JSON object");
  }
  return definedOnly({
    type,
    payload,
    queue,
    priority,
    delay_ms: delayMs,
    run_at: rfc3339(runAt),
    max_attempts: maxAttempts,
    idempotency_key: idempotencyKey,
  });
}

export function queueSettingsBody(settings) {
  const body = {};
  for (const [key, value] of Object.entries(settings)) {
    if (value === undefined) continue;
    if (!Object.hasOwn(QUEUE_SETTINGS, key)) {
      throw new TypeError(`unknown queue setting ${key} (one of ${Object.keys(QUEUE_SETTINGS).join(", ")})`);
    }
    body[QUEUE_SETTINGS[key]] = Object.hasOwn(RATE_FIELDS, key) ? rateBody(key, value) : value;
  }
  return body;
}

/** `{ jobs, perMs, key }` or `{ jobs, perMs, burst }` as the API takes it; null (none) as is. */
function rateBody(setting, value) {
  if (value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${setting} must be an object such as { jobs: 10, perMs: 1000 }, or null`);
  }
  const fields = RATE_FIELDS[setting];
  const body = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (!Object.hasOwn(fields, key)) {
      throw new TypeError(`unknown ${setting} field ${key} (one of ${Object.keys(fields).join(", ")})`);
    }
    body[fields[key]] = v;
  }
  return body;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** An AbortSignal that fires when `ms` passes or `outer` aborts (AbortSignal.any is not in
 * Node 18); `clear` drops the timer. `timedOut` tells which fired. */
function deadlineSignal(ms, outer) {
  const controller = new AbortController();
  const state = { timedOut: false };
  const timer = setTimeout(() => {
    state.timedOut = true;
    controller.abort();
  }, ms);
  const onAbort = () => controller.abort(outer.reason);
  if (outer) {
    if (outer.aborted) controller.abort(outer.reason);
    else outer.addEventListener("abort", onAbort, { once: true });
  }
  return {
    signal: controller.signal,
    state,
    clear() {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    },
  };
}

export class Client {
  /**
   * `url`: the service's root (http://127.0.0.1:8000). `token`: sent as a Bearer token;
   * without it, JOBQ_TOKEN from the environment is (`token: ""` sends none).
   * `retryOverloadMs`: let each call wait out 429 and 503 answers (queue_full, the enqueue
   * rates, queue_overloaded, unavailable), sleeping the wait each asks for (`retry_after_ms`
   * to the millisecond, else Retry-After), for at most this long in all (default 0: they
   * throw at once).
   * `timeoutMs`: per request (a long-poll claim gets its waitMs on top).
   * `fetch`: a fetch of your own (a test double, a proxy-aware one).
   */
  constructor({ url, token, timeoutMs = DEFAULT_TIMEOUT_MS, retryOverloadMs = 0, headers = {}, fetch } = {}) {
    this.url = checkUrl(url);
    this.timeoutMs = timeoutMs;
    this.retryOverloadMs = retryOverloadMs;
    const resolved = token === undefined ? env(TOKEN_ENV) : token;
    this._headers = {
      accept: "application/json",
      "user-agent": `jobq-js/${VERSION}`,
      ...(resolved ? { authorization: `Bearer ${resolved}` } : {}),
      ...headers,
    };
    this._fetch = fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** One call: the JSON answer (null for 204), or the typed error. 429/503 are waited out
   * within retryOverloadMs; the service promises such an answer changed nothing. */
  async request(method, target, { body, timeoutMs, signal } = {}) {
    const deadline = Date.now() + this.retryOverloadMs;
    for (;;) {
      try {
        return await this._send(method, target, body, timeoutMs ?? this.timeoutMs, signal);
      } catch (error) {
        if (!(error instanceof RetryableError) || signal?.aborted) throw error;
        // A little jitter, so producers told "1 s" together do not come back in step.
        const pause = (error.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS) * (1 + Math.random() * 0.1);
        if (Date.now() + pause > deadline) throw error;
        await sleep(pause, signal);
      }
    }
  }

  async _send(method, target, body, timeoutMs, outer) {
    const headers = { ...this._headers };
    let payload;
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      payload = JSON.stringify(body);
    }
    const deadline = deadlineSignal(timeoutMs, outer);
    let answer;
    let text;
    try {
      answer = await this._fetch(this.url + target, { method, headers, body: payload, signal: deadline.signal });
      text = await answer.text();
    } catch (error) {
      if (outer?.aborted && !deadline.state.timedOut) throw error; // the caller's abort
      const why = deadline.state.timedOut ? `no answer within ${timeoutMs} ms` : describeFetchError(error);
      throw new TransportError(`cannot reach ${this.url}: ${method} ${target}: ${why}`, {
        url: this.url,
        cause: error,
      });
    } finally {
      deadline.clear();
    }
    if (answer.status >= 400) throw errorFromAnswer(answer.status, answer.statusText, answer.headers, text);
    return text ? JSON.parse(text) : null;
  }

  // Producers

  /** Enqueue one job; resolves to the job (`id`, `status` ...). With `idempotencyKey`, a
   * repeat resolves to the existing job. */
  async enqueue(type, payload = {}, options = {}) {
    return this.request("POST", path("jobs"), { body: jobBody(type, payload, options) });
  }

  /** Enqueue up to 1000 jobs in one transaction, all or none:
   * `[{ type, payload, queue, priority, delayMs, runAt, maxAttempts, idempotencyKey }]`. */
  async enqueueMany(jobs) {
    const body = { jobs: jobs.map(({ type, payload, ...options }) => jobBody(type, payload, options)) };
    return (await this.request("POST", path("jobs", "batch"), { body })).jobs;
  }

  /** Publish to a topic: one job in every subscribed queue, in one transaction. */
  async publish(topic, type, payload = {}, options = {}) {
    if (options.queue !== undefined) throw new TypeError("a publish names no queue: its subscriptions do");
    const body = jobBody(type, payload, options);
    return (await this.request("POST", path("topics", topic, "publish"), { body })).jobs;
  }

  async get(jobId) {
    return this.request("GET", path("jobs", jobId));
  }

  /** Polls until the job finishes: resolves to it when completed (its `result` is the
   * handler's), throws JobFailed when it ends dead or cancelled and WaitTimeout when
   * `timeoutMs` (default 60000) passes first. */
  async wait(jobId, { timeoutMs = 60_000, signal } = {}) {
    const deadline = Date.now() + timeoutMs;
    let pause = WAIT_POLL_FIRST_MS;
    for (;;) {
      const job = await this.get(jobId);
      if (job.status === "completed") return job;
      if (FINISHED.has(job.status)) throw new JobFailed(job);
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new WaitTimeout(jobId, timeoutMs);
      await sleep(Math.min(pause, remaining), signal);
      if (signal?.aborted) throw signal.reason;
      pause = Math.min(pause * 1.5, WAIT_POLL_MAX_MS);
    }
  }

  /** One page of jobs, newest first: `{ jobs, next_cursor }`. */
  async listJobs({ queue, status, type, search, limit, cursor } = {}) {
    return this.request("GET", path("jobs") + query({ queue, status, type, search, limit, cursor }));
  }

  /** Every matching job, newest first, fetching pages as it goes (`for await`). */
  async *iterJobs(filter = {}) {
    let cursor;
    do {
      const page = await this.listJobs({ ...filter, cursor });
      yield* page.jobs;
      cursor = page.next_cursor;
    } while (cursor);
  }

  async cancel(jobId) {
    return this.request("POST", path("jobs", jobId, "cancel"));
  }

  /** A dead, cancelled or failed job goes back to pending, attempt 0. */
  async retry(jobId) {
    return this.request("POST", path("jobs", jobId, "retry"));
  }

  /** Delete a job for good (any status but running). */
  async deleteJob(jobId) {
    await this.request("DELETE", path("jobs", jobId));
  }

  // The dead-letter queue

  /** One page of dead jobs, newest first: `{ jobs, next_cursor }`. */
  async listDead({ queue, type, limit, cursor } = {}) {
    return this.listJobs({ queue, type, limit, cursor, status: "dead" });
  }

  /** Send matching dead jobs back to pending; resolves to how many. */
  async replayDead({ queue, type, limit } = {}) {
    const body = definedOnly({ queue, type, limit });
    return (await this.request("POST", path("dead", "replay"), { body })).replayed;
  }

  /** Delete matching dead jobs; resolves to how many. */
  async purgeDead({ queue, type, limit } = {}) {
    return (await this.request("DELETE", path("dead") + query({ queue, type, limit }))).purged;
  }

  /** Delete one dead job (InvalidState when it is not dead). */
  async purgeDeadJob(jobId) {
    await this.request("DELETE", path("dead", jobId));
  }

  // Queues

  /** One page of queues by name: `{ queues, next_cursor }`. */
  async listQueues({ prefix, limit, cursor } = {}) {
    return this.request("GET", path("queues") + query({ prefix, limit, cursor }));
  }

  /** Every queue (whose name starts with `prefix`), by name, page after page. */
  async *iterQueues({ prefix, pageSize } = {}) {
    let cursor;
    do {
      const page = await this.listQueues({ prefix, limit: pageSize, cursor });
      yield* page.queues;
      cursor = page.next_cursor;
    } while (cursor);
  }

  async getQueue(name) {
    return this.request("GET", path("queues", name));
  }

  /** Change the settings given (camelCase: maxDepth, paused, leaseMs ..., rateLimit:
   * { jobs, perMs, key }, enqueueRate: { jobs, perMs, burst }, softDepth, softLagMs; null
   * means no limit or off where the API allows it). Creates the queue if needed. */
  async updateQueue(name, settings) {
    return this.request("PATCH", path("queues", name), { body: queueSettingsBody(settings) });
  }

  async pauseQueue(name) {
    return this.updateQueue(name, { paused: true });
  }

  async resumeQueue(name) {
    return this.updateQueue(name, { paused: false });
  }

  /** Delete a queue; QueueNotEmpty while it holds jobs, unless `purge: true`. */
  async deleteQueue(name, { purge = false } = {}) {
    await this.request("DELETE", path("queues", name) + (purge ? "?purge=true" : ""));
  }

  // Workers: the calls Worker makes, for a loop of your own

  /** Lease up to `limit` jobs; with `waitMs` (up to 30000) the call long-polls. Without
   * `leaseMs` the queue's lease applies. `signal` aborts a waiting claim. */
  async claim({ queues, workerId, types, limit = 1, leaseMs, waitMs = 0, signal }) {
    const body = definedOnly({
      worker_id: workerId,
      queues: typeof queues === "string" ? [queues] : queues,
      types,
      limit,
      lease_ms: leaseMs,
      wait_ms: waitMs || undefined,
    });
    const timeoutMs = this.timeoutMs + waitMs + CLAIM_TIMEOUT_MARGIN_MS;
    // One attempt only: a worker decides itself how long to wait after a 429 or 503.
    return (await this._send("POST", path("leases"), body, timeoutMs, signal)).leases;
  }

  /** Extend a lease; resolves to `{ locked_until }`. LeaseLost when it is gone. */
  async heartbeat(leaseId, { extendMs } = {}) {
    return this.request("POST", path("leases", leaseId, "heartbeat"), { body: definedOnly({ extend_ms: extendMs }) });
  }

  /** Complete the job with `result` (any JSON); resolves to the job. */
  async ack(leaseId, result = null) {
    return this.request("POST", path("leases", leaseId, "ack"), { body: { result: result ?? null } });
  }

  /** Ack many at once: `[{ leaseId, result }]`; resolves to the per-lease results
   * (`{ lease_id, ok, code? }`): one lost lease does not fail the others. */
  async ackMany(acks) {
    const body = { acks: acks.map(({ leaseId, result }) => ({ lease_id: leaseId, result: result ?? null })) };
    return (await this.request("POST", path("leases", "ack"), { body })).results;
  }

  /** Report a failed attempt. `retry: false` sends the job dead; `retryInMs` replaces the
   * queue's backoff for this attempt. */
  async fail(leaseId, error, { retry, retryInMs } = {}) {
    const body = definedOnly({ error: String(error), retry, retry_in_ms: retryInMs });
    return this.request("POST", path("leases", leaseId, "fail"), { body });
  }

  /** Hand the job back unfinished: pending again (after `delayMs`), its attempt not spent. */
  async release(leaseId, { delayMs } = {}) {
    return this.request("POST", path("leases", leaseId, "release"), { body: definedOnly({ delay_ms: delayMs }) });
  }

  /** Release many at once: lease ids or `{ leaseId, delayMs }`; per-lease results. */
  async releaseMany(releases) {
    const body = {
      releases: releases.map((r) =>
        typeof r === "string" ? { lease_id: r } : definedOnly({ lease_id: r.leaseId, delay_ms: r.delayMs }),
      ),
    };
    return (await this.request("POST", path("leases", "release"), { body })).results;
  }

  /** Report a worker process alive (POST /v1/workers/{id}/beat), so GET /v1/workers lists
   * it while idle. `fields`: host, pid, concurrency, queues, in_flight, started_at, state. */
  async workerBeat(workerId, fields = {}, { signal } = {}) {
    return this.request("POST", path("workers", workerId, "beat"), { body: definedOnly(fields), signal });
  }
}

function describeFetchError(error) {
  // Node's fetch says "fetch failed" and puts the reason (ECONNREFUSED ...) in `cause`.
  const cause = error?.cause;
  const reason = cause?.code || cause?.message;
  return reason ? `${error.message} (${reason})` : String(error?.message ?? error);
}
