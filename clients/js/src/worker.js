// Worker: claim -> run the handler -> ack or fail, with heartbeats, batched acks, long-polls,
// Retry-After and a graceful stop that releases what it cannot finish. It follows the
// rules of openapi/GUIDE.md ("What every worker must do") and the Python SDK's jobq.Worker:
//
// - one claim loop keeps one long-poll (waitMs) outstanding while fewer than `concurrency`
//   handlers run; a job whose handler returned no longer takes a slot (its ack is the
//   acker's business). After a 429 or 503 it waits Retry-After (or a backoff with jitter
//   when absent, and after connection errors) before it claims again;
// - each held lease is heartbeated at a third of its length (leaseMs, or, without it, read
//   off the claim's locked_until), until its ack, fail or release is answered;
// - acks go out through one batcher: those that finish while an ack is in flight go
//   together in the next POST /v1/leases/ack; releases likewise (POST /v1/leases/release);
// - stop() (or SIGTERM/SIGINT on Node, Bun and Deno) aborts the waiting claim at once, gives
//   running handlers gracePeriodMs to finish and be acked, then aborts their signal and
//   releases them (pending again, the attempt not spent);
// - the process reports itself (POST /v1/workers/{id}/beat) at start, every 10 s and as it
//   stops, so GET /v1/workers lists it even while idle.

import { Client } from "./client.js";
import {
  APIError,
  Forbidden,
  LeaseLost,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  RetryableError,
  ServerError,
  TransportError,
  Unauthorized,
} from "./errors.js";
import { SIGNAL_NUMBERS, exitNow, hostname, onTermination, pid, sleep } from "./runtime.js";

export const DEFAULT_CONCURRENCY = 10;
export const DEFAULT_WAIT_MS = 20_000;
// 25 s: inside the 30 s an orchestrator (Kubernetes' default) allows before SIGKILL, with
// time left to release what did not finish.
export const DEFAULT_GRACE_PERIOD_MS = 25_000;
// Beat at a third of the lease: two beats can fail before the lease runs out.
const HEARTBEAT_FRACTION = 1 / 3;
// Without leaseMs the lease is read off locked_until; this floor keeps a skewed clock from
// turning that into a heartbeat storm.
const MIN_LEASE_ESTIMATE_MS = 1_000;
const FALLBACK_LEASE_MS = 30_000;
// After the grace period, the acks, fails and releases still owed get this long.
const FINAL_REPORT_MS = 10_000;
// Claim and report retries when the service is unreachable: exponential, full jitter.
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 30_000;
// A claim answered empty sooner than this (waitMs 0) is followed by a pause: never spin.
const MIN_EMPTY_POLL_MS = 250;
const MAX_BATCH = 1000;
const MAX_ERROR_CHARS = 16_000;
const WORKER_BEAT_MS = 10_000;
const WORKER_BEAT_TIMEOUT_MS = 5_000;
const LONG_POLLS_FULL = "too_many_long_polls";
// A service that predates release (404/405 to it) gets a fail with retry_in_ms 0 instead.
const NO_RELEASE = "no_release";
const SHUTDOWN_ERROR = "worker shut down before the job finished; handed back as a failed attempt (this service cannot release)";

/** Thrown by a handler: fail this attempt on purpose and run the job again, after `inMs`
 * (else the queue's backoff). The attempt still counts towards max_attempts. */
export class Retry extends Error {
  constructor(reason = "retry requested by the handler", { inMs } = {}) {
    super(reason);
    this.name = "Retry";
    this.reason = reason;
    // Whole milliseconds: the service coerces nothing, and 1500.5 is not an integer there.
    this.inMs = inMs === undefined || inMs === null ? undefined : Math.round(inMs);
  }
}

/** Thrown by a handler: give up on the job, which goes dead at once (retry: false). Its
 * reason is the job's last_error, as it is. */
export class Discard extends Error {
  constructor(reason = "discarded by the handler") {
    super(reason);
    this.name = "Discard";
    this.reason = reason;
  }
}

const TRANSIENT = [TransportError, RetryableError, ServerError];
const isTransient = (error) => TRANSIENT.some((cls) => error instanceof cls);
const isRefusal = (error) => error instanceof Unauthorized || error instanceof Forbidden;

class GaveUp extends Error {}

function backoff(failures) {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (failures - 1));
  return ceiling / 2 + (Math.random() * ceiling) / 2;
}

function retryPause(error, failures) {
  if (error instanceof RetryableError && error.retryAfterMs !== null) {
    return error.retryAfterMs * (1 + Math.random() * 0.1);
  }
  return backoff(failures);
}

/** The `error` text of a failed attempt: the message first, then the stack. */
export function describe(error) {
  let text;
  if (error instanceof Error) {
    const head = `${error.name}: ${error.message}`;
    text = error.stack ? (error.stack.startsWith(head) ? error.stack : `${head}\n${error.stack}`) : head;
  } else {
    text = `thrown: ${String(error)}`;
  }
  if (text.length <= MAX_ERROR_CHARS) return text;
  const marker = `\n… ${text.length - MAX_ERROR_CHARS} characters cut …\n`;
  const head = Math.floor(MAX_ERROR_CHARS / 4);
  return text.slice(0, head) + marker + text.slice(text.length - (MAX_ERROR_CHARS - head - marker.length));
}

function defer() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

const noop = () => {};
const defaultLogger = {
  debug: noop,
  info: (message) => console.info(`jobq worker: ${message}`),
  warn: (message) => console.warn(`jobq worker: ${message}`),
  error: (message) => console.error(`jobq worker: ${message}`),
};

/** Sends reports of one kind, batching those that pile up while a request is in flight.
 * No timer: a lone report goes out at once, and under load the batches grow by themselves.
 * Each report resolves to "ok" or a code saying why not. */
class Batcher {
  constructor(send) {
    this._send = send; // (items) => Promise<Array<string | Error>>, in order
    this._pending = [];
    this._busy = false;
  }

  submit(item) {
    return new Promise((resolve, reject) => {
      this._pending.push({ item, resolve, reject });
      if (!this._busy) {
        this._busy = true;
        // After this turn: reports submitted in the same turn go out together.
        queueMicrotask(() => this._flush());
      }
    });
  }

  async _flush() {
    while (this._pending.length) {
      const batch = this._pending.splice(0, MAX_BATCH);
      let answers;
      try {
        answers = await this._send(batch.map((entry) => entry.item));
      } catch (error) {
        answers = batch.map(() => error);
      }
      batch.forEach((entry, i) => {
        const answer = answers[i] ?? "missing from the batch answer";
        if (answer instanceof Error) entry.reject(answer);
        else entry.resolve(answer);
      });
    }
    this._busy = false;
  }
}

export class Worker {
  /**
   * `handlers` maps a job type to `async (job, { signal, leaseId }) => result`; the result
   * (JSON) becomes the job's. `signal` aborts when the lease is lost or the stop's grace
   * period runs out: a long handler should honour it. Only these types are claimed.
   * `leaseMs`: the lease each claim asks for; without it the queue's applies.
   * `gracePeriodMs`: how long running jobs get to finish once the stop begins.
   * `handleSignals` (default true): run() stops on SIGTERM/SIGINT; a second one exits at
   * once with 128 + its number.
   */
  constructor({
    url,
    token,
    queues,
    handlers,
    concurrency = DEFAULT_CONCURRENCY,
    leaseMs,
    gracePeriodMs = DEFAULT_GRACE_PERIOD_MS,
    waitMs = DEFAULT_WAIT_MS,
    workerId,
    handleSignals = true,
    logger = defaultLogger,
    fetch,
  } = {}) {
    this.queues = typeof queues === "string" ? [queues] : [...(queues ?? [])];
    if (!this.queues.length) throw new TypeError("queues: give at least one queue name");
    this.handlers = handlers instanceof Map ? new Map(handlers) : new Map(Object.entries(handlers ?? {}));
    if (!this.handlers.size) throw new TypeError("handlers: give at least one job type and its handler");
    for (const [type, fn] of this.handlers) {
      if (typeof fn !== "function") throw new TypeError(`handlers[${JSON.stringify(type)}] is not a function`);
    }
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency must be a positive integer, not ${concurrency}`);
    }
    if (leaseMs !== undefined && !(Number.isInteger(leaseMs) && leaseMs > 0)) {
      throw new RangeError(`leaseMs must be a positive integer, not ${leaseMs}`);
    }
    if (!(Number.isInteger(waitMs) && waitMs >= 0 && waitMs <= 30_000)) {
      throw new RangeError(`waitMs must be an integer from 0 to 30000, not ${waitMs}`);
    }
    if (!(gracePeriodMs >= 0)) throw new RangeError(`gracePeriodMs must not be negative, not ${gracePeriodMs}`);
    this.client = new Client({ url, token, fetch });
    this.url = this.client.url;
    this.concurrency = concurrency;
    this.leaseMs = leaseMs;
    this.gracePeriodMs = gracePeriodMs;
    this.waitMs = waitMs;
    this.workerId = workerId ?? `js-${pid() ?? "worker"}-${Math.random().toString(16).slice(2, 8)}`;
    this.handleSignals = handleSignals;
    // null: silent; a logger lacking a level (no debug, say) leaves that level out.
    this.log = { debug: noop, info: noop, warn: noop, error: noop, ...(logger ?? {}) };
    this._run = null;
    this._stopRequested = false;
  }

  /** Works until stop() (or SIGTERM/SIGINT), then stops gracefully and resolves. Rejects
   * with Unauthorized or Forbidden (after the same graceful stop) when the service refuses
   * the token. */
  run() {
    if (this._run) throw new Error("this worker is already running");
    this._run = this._work().finally(() => {
      this._run = null;
    });
    return this._run;
  }

  /** Begins the graceful stop; resolves once the worker has stopped (never rejects). */
  stop() {
    if (!this._run) {
      this._stopRequested = true; // run() will stop at once
      return Promise.resolve();
    }
    if (!this._stopping) {
      this._stopping = true;
      this._stopController.abort();
      this._claimController?.abort();
      this._wakeSlot();
      this._beatWorker("stopping");
    }
    return this._run.then(noop, noop);
  }

  async _work() {
    this._stopping = this._stopRequested;
    this._stopRequested = false;
    this._stopController = new AbortController();
    if (this._stopping) this._stopController.abort();
    this._held = new Map(); // lease id -> entry, from claim until its report is answered
    this._active = 0; // handlers not yet returned: what concurrency bounds
    this._slot = defer();
    this._reports = new Set(); // report promises in flight
    this._reportDeadline = Infinity;
    this._fatal = null;
    this._signals = 0;
    this._startedAt = new Date();
    this._acker = new Batcher((items) => this._sendAcks(items));
    this._releaser = new Batcher((items) => this._sendReleases(items));
    this._host = await hostname();
    const removeSignals = this.handleSignals ? onTermination((name) => this._onSignal(name)) : noop;
    this.log.info(
      `worker ${this.workerId}: serving queues=${this.queues.join(",")} at ${this.url} ` +
        `types=${[...this.handlers.keys()].sort().join(",")} concurrency=${this.concurrency}`,
    );
    this._beatWorker("running");
    const beats = setInterval(() => this._beatWorker("running"), WORKER_BEAT_MS);
    try {
      await this._claimLoop();
      await this._drain();
    } finally {
      clearInterval(beats);
      for (const entry of this._held.values()) clearTimeout(entry.timer);
      await this._beatWorker("stopped");
      removeSignals();
      this.log.info(`worker ${this.workerId}: stopped`);
    }
    if (this._fatal) throw this._fatal;
  }

  _onSignal(name) {
    this._signals += 1;
    if (this._signals === 1) {
      this.log.warn(
        `${name}: stopping; running jobs get ${this.gracePeriodMs / 1000}s to finish (send it again to exit at once)`,
      );
      this.stop();
      return;
    }
    const status = 128 + (SIGNAL_NUMBERS[name] ?? 0);
    this.log.error(`second ${name}: exiting now with status ${status}; ${this._held.size} lease(s) left to expire`);
    exitNow(status);
  }

  _refused(call, error) {
    if (!this._fatal) {
      this._fatal = error;
      this.log.error(`${call} refused by the service (${error.message}); stopping`);
    }
    this.stop();
  }

  _wakeSlot() {
    const slot = this._slot;
    this._slot = defer();
    slot.resolve();
  }

  // Claiming

  async _claimLoop() {
    const types = [...this.handlers.keys()];
    let failures = 0;
    let capped = false;
    while (!this._stopping) {
      const want = Math.min(MAX_BATCH, this.concurrency - this._active);
      if (want <= 0) {
        await this._slot.promise; // a handler returned, or the stop began
        continue;
      }
      const controller = new AbortController();
      this._claimController = controller;
      const started = Date.now();
      let leases;
      try {
        leases = await this.client.claim({
          queues: this.queues,
          workerId: this.workerId,
          types,
          limit: want,
          leaseMs: this.leaseMs,
          waitMs: this.waitMs,
          signal: controller.signal,
        });
      } catch (error) {
        if (this._stopping) break; // the stop aborted the long-poll
        if (isTransient(error)) {
          failures += 1;
          const pause = retryPause(error, failures);
          if (error.code === LONG_POLLS_FULL) {
            // Not a failure: the service holds its cap of waiting claims and had no job.
            (capped ? this.log.debug : this.log.info)(
              `the service holds its limit of waiting claims; claiming again in ${(pause / 1000).toFixed(1)}s`,
            );
            capped = true;
          } else {
            this.log.warn(`claim failed (${error.message}); retrying in ${(pause / 1000).toFixed(1)}s`);
          }
          await sleep(pause, this._stopController.signal);
          continue;
        }
        if (error instanceof APIError) {
          // 401, 403, 422 ...: asking again will not help. Finish what we hold, then stop.
          this._refused("claim", error);
          break;
        }
        failures += 1;
        const pause = backoff(failures);
        this.log.error(`claim crashed (${describe(error)}); retrying in ${(pause / 1000).toFixed(1)}s`);
        await sleep(pause, this._stopController.signal);
        continue;
      } finally {
        this._claimController = null;
      }
      failures = 0;
      capped = false;
      for (const lease of leases) {
        if (this._stopping) this._handBackUnstarted(lease);
        else this._start(lease);
      }
      const elapsed = Date.now() - started;
      if (!leases.length && elapsed < MIN_EMPTY_POLL_MS) {
        await sleep((MIN_EMPTY_POLL_MS - elapsed) * (1 + Math.random() * 0.5), this._stopController.signal);
      }
    }
  }

  _leaseLength(lease) {
    if (this.leaseMs !== undefined) return this.leaseMs;
    const until = Date.parse(lease.locked_until);
    if (Number.isNaN(until)) return FALLBACK_LEASE_MS;
    return Math.max(MIN_LEASE_ESTIMATE_MS, until - Date.now());
  }

  _hold(lease) {
    const entry = {
      lease,
      leaseId: lease.lease_id,
      job: lease.job,
      leaseMs: this._leaseLength(lease),
      controller: new AbortController(),
      timer: null,
      lost: false,
      abandoned: false, // the stop handed it back: its handler's outcome is dropped
      finished: false, // the handler returned (or never ran)
      closed: false, // its report was answered: no more heartbeats
      startedAt: Date.now(),
      handlerDone: null,
    };
    this._held.set(entry.leaseId, entry);
    this._scheduleBeat(entry, entry.leaseMs * HEARTBEAT_FRACTION);
    return entry;
  }

  _close(entry) {
    entry.closed = true;
    clearTimeout(entry.timer);
    this._held.delete(entry.leaseId);
  }

  _track(promise) {
    this._reports.add(promise);
    // The reports catch their own errors; the catch keeps this side chain from ever being
    // an unhandled rejection.
    promise.finally(() => this._reports.delete(promise)).catch(noop);
    return promise;
  }

  _start(lease) {
    const entry = this._hold(lease);
    this._active += 1;
    const done = defer();
    entry.handlerDone = done.promise;
    this._process(entry, done.resolve).catch((error) => {
      // A bug here must not take down a worker that holds other leases: its lease expires.
      this.log.error(`job ${entry.job.id}: the worker failed running it (${describe(error)})`);
    });
  }

  // Running one job

  async _process(entry, handlerReturned) {
    const { job } = entry;
    let outcome;
    try {
      outcome = await this._callHandler(entry);
    } finally {
      entry.finished = true;
      entry.ranMs = Date.now() - entry.startedAt;
      this._active -= 1;
      handlerReturned();
      this._wakeSlot();
    }
    if (entry.lost) {
      this.log.debug(`job ${job.id}: lease was lost; its outcome is dropped`);
      this._close(entry);
      return;
    }
    if (entry.abandoned) return; // the stop released it; the release's answer closes it
    await this._track(this._report(entry, outcome));
  }

  async _callHandler(entry) {
    const { job } = entry;
    const handler = this.handlers.get(job.type);
    if (!handler) return { fail: { error: `this worker has no handler for job type ${JSON.stringify(job.type)}` } };
    let value;
    try {
      value = await handler(job, { signal: entry.controller.signal, leaseId: entry.leaseId });
    } catch (error) {
      if (error instanceof Retry) return { fail: { error: error.reason, retryInMs: error.inMs } };
      if (error instanceof Discard) return { fail: { error: error.reason, retry: false } };
      return { fail: { error: describe(error) } };
    }
    try {
      JSON.stringify(value ?? null);
    } catch (error) {
      // Retrying would run the side effects again only to fail alike: dead at once.
      return {
        fail: {
          error: `the handler for ${JSON.stringify(job.type)} returned a value that is not JSON: ${error.message}`,
          retry: false,
        },
      };
    }
    return { ack: value ?? null };
  }

  async _report(entry, outcome) {
    try {
      if (outcome.ack !== undefined) {
        const failure = await this._sendAck(entry, outcome.ack);
        if (failure) await this._sendFail(entry, failure);
      } else {
        await this._sendFail(entry, outcome.fail);
      }
    } catch (error) {
      this.log.error(`job ${entry.job.id}: reporting its outcome failed (${describe(error)}); the lease will expire`);
    } finally {
      this._close(entry);
    }
  }

  _outcome(entry, what, error) {
    const { job } = entry;
    const ran = ((entry.ranMs ?? Date.now() - entry.startedAt) / 1000).toFixed(3);
    const reason = error ? `: ${error.split("\n")[0].slice(0, 200)}` : "";
    this.log.info(`job ${job.id} (${job.type}) attempt ${job.attempt}/${job.max_attempts}: ${what} (ran ${ran}s)${reason}`);
  }

  async _sendAck(entry, result) {
    const { job } = entry;
    let code;
    try {
      code = await this._acker.submit({ leaseId: entry.leaseId, result });
    } catch (error) {
      if (error instanceof PayloadTooLarge) {
        return { error: `the service refused the result as too large: ${error.message}`, retry: false };
      }
      if (isRefusal(error)) this._refused(`ack of job ${job.id}`, error);
      else if (error instanceof GaveUp) this.log.error(`job ${job.id}: could not ack before exit; the lease will expire`);
      else if (error instanceof APIError) return { error: `the service refused the ack: ${error.message}`, retry: false };
      else throw error;
      return null;
    }
    if (code === "ok") this._outcome(entry, "completed");
    else if (code === "already_completed") this.log.info(`job ${job.id}: acked (a retried ack: the first had stored the result)`);
    else this.log.warn(`job ${job.id}: ack answered ${code}; the result is dropped`);
    return null;
  }

  async _sendFail(entry, failure) {
    const { job } = entry;
    let answered;
    try {
      answered = await this._retrying(() =>
        this.client.fail(entry.leaseId, failure.error, { retry: failure.retry, retryInMs: failure.retryInMs }),
      );
    } catch (error) {
      if (error instanceof LeaseLost || error instanceof NotFound) {
        this.log.warn(`job ${job.id}: fail answered ${error.code}; nothing more to do`);
      } else if (isRefusal(error)) this._refused(`failure report of job ${job.id}`, error);
      else if (error instanceof GaveUp) this.log.error(`job ${job.id}: could not report the failure before exit`);
      else if (error instanceof APIError) this.log.error(`job ${job.id}: the service refused the failure: ${error.message}`);
      else throw error;
      return;
    }
    const what =
      answered.status === "dead"
        ? failure.retry === false
          ? "discarded (dead)"
          : "failed for good (dead)"
        : `failed, retried at ${answered.visible_at}`;
    this._outcome(entry, what, failure.error);
  }

  /** Retries a report through outages until the stop's deadline. Safe: the lease id fences
   * every retry, so a duplicate is answered lease_lost and changes nothing. */
  async _retrying(call) {
    let failures = 0;
    for (;;) {
      try {
        return await call();
      } catch (error) {
        if (!isTransient(error)) throw error;
        failures += 1;
        const pause = retryPause(error, failures);
        if (Date.now() + pause > this._reportDeadline) throw new GaveUp(error.message);
        this.log.warn(`report failed (${error.message}); retrying in ${(pause / 1000).toFixed(1)}s`);
        await sleep(pause);
      }
    }
  }

  async _sendAcks(items) {
    let results;
    try {
      results = await this._retrying(() => this.client.ackMany(items));
    } catch (error) {
      if (error instanceof PayloadTooLarge && items.length > 1) {
        // Each result fits but together they do not: send them one by one.
        return Promise.all(items.map((item) => this._sendAcks([item]).then((r) => r[0])));
      }
      throw error;
    }
    return results.map((r) => (r.ok ? "ok" : r.already_completed ? "already_completed" : r.code || "not ok"));
  }

  async _sendReleases(leaseIds) {
    let results;
    try {
      results = await this._retrying(() => this.client.releaseMany(leaseIds));
    } catch (error) {
      // Unknown leases are answered inside the results: this service has no release.
      if (error instanceof NotFound || error instanceof MethodNotAllowed) return leaseIds.map(() => NO_RELEASE);
      throw error;
    }
    return results.map((r) => (r.ok ? "ok" : r.code || "not ok"));
  }

  // Heartbeats

  _scheduleBeat(entry, ms) {
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => this._beat(entry), ms);
  }

  async _beat(entry) {
    if (entry.closed || entry.lost) return;
    let next = entry.leaseMs * HEARTBEAT_FRACTION;
    try {
      await this.client.heartbeat(entry.leaseId, { extendMs: this.leaseMs });
    } catch (error) {
      if (error instanceof LeaseLost || error instanceof NotFound) {
        this._lose(entry, error);
        return;
      }
      if (isRefusal(error)) {
        this._refused(`heartbeat of job ${entry.job.id}`, error);
        return;
      }
      // The lease may well still be held: try again soon, well before it runs out.
      next = Math.min(2_000, (entry.leaseMs * HEARTBEAT_FRACTION) / 2) * (0.8 + Math.random() * 0.4);
      this.log.warn(`job ${entry.job.id}: heartbeat failed (${error.message}); retrying in ${(next / 1000).toFixed(1)}s`);
    }
    if (!entry.closed && !entry.lost) this._scheduleBeat(entry, next);
  }

  _lose(entry, error) {
    if (entry.lost) return;
    entry.lost = true;
    clearTimeout(entry.timer);
    const { job } = entry;
    this.log.warn(
      `job ${job.id} (${job.type}) attempt ${job.attempt}/${job.max_attempts}: lease lost (${error.code}): ` +
        "cancelled, or expired and taken by another worker",
    );
    entry.controller.abort(error);
    if (entry.finished) this._close(entry);
  }

  // Stopping

  /** A lease claimed as the stop began: never started, released at once. */
  _handBackUnstarted(lease) {
    const entry = this._hold(lease);
    entry.finished = true;
    entry.abandoned = true;
    this._track(this._release(entry, "shutdown, never started"));
  }

  async _release(entry, why) {
    const { job } = entry;
    try {
      const code = await this._releaser.submit(entry.leaseId);
      if (code === "ok") this._outcome(entry, `released (${why})`);
      else if (code === NO_RELEASE) {
        await this._sendFail(entry, { error: SHUTDOWN_ERROR, retryInMs: 0 });
      } else this.log.warn(`job ${job.id}: release answered ${code}; nothing more to do`);
    } catch (error) {
      if (isRefusal(error)) this._refused(`release of job ${job.id}`, error);
      else if (error instanceof GaveUp) this.log.error(`job ${job.id}: could not release before exit; the lease will expire`);
      else this.log.error(`job ${job.id}: the release failed: ${describe(error)}`);
    } finally {
      this._close(entry);
    }
  }

  async _drain() {
    const unfinished = () => [...this._held.values()].filter((e) => !(e.finished || e.lost));
    const deadline = Date.now() + this.gracePeriodMs;
    if (unfinished().length) {
      this.log.info(`waiting up to ${this.gracePeriodMs / 1000}s for ${unfinished().length} job(s)`);
    }
    for (;;) {
      const running = unfinished();
      const remaining = deadline - Date.now();
      if (!running.length || remaining <= 0) break;
      const timer = new AbortController();
      await Promise.race([...running.map((e) => e.handlerDone), sleep(remaining, timer.signal)]);
      timer.abort(); // so no timer outlives the stop
    }
    this._reportDeadline = Date.now() + FINAL_REPORT_MS;
    const late = unfinished();
    if (late.length) this.log.warn(`grace period over: releasing ${late.length} job(s)`);
    for (const entry of late) {
      entry.abandoned = true;
      entry.controller.abort(new Error("the worker is stopping: the job was released"));
      // One loop turn: the batcher sends them together in one POST /v1/leases/release.
      this._track(this._release(entry, "shutdown"));
    }
    const timer = new AbortController();
    await Promise.race([Promise.allSettled([...this._reports]), sleep(FINAL_REPORT_MS + 1_000, timer.signal)]);
    timer.abort();
  }

  // The worker process's own beat

  async _beatWorker(state) {
    const timer = new AbortController();
    const timeout = setTimeout(() => timer.abort(), WORKER_BEAT_TIMEOUT_MS);
    try {
      const fields = {
        host: this._host,
        pid: pid(),
        concurrency: this.concurrency,
        queues: this.queues,
        in_flight: this._held?.size ?? 0,
        started_at: this._startedAt?.toISOString(),
        state,
      };
      await this.client.workerBeat(this.workerId, fields, { signal: timer.signal });
    } catch (error) {
      // An older service has no such endpoint (404), a token may lack it: the beat is for
      // the operator's page, and the claims will say what matters about the token.
      this.log.debug(`worker beat (${state}) not sent: ${error.message}`);
    } finally {
      clearTimeout(timeout);
    }
  }
}
