// A jobq worker in plain Node (18 or later): global fetch and AbortController, no package.
//
// It is the reference a JavaScript user can copy: every rule of the guide's "What every
// worker must do" is here, each where it happens, and nothing else. Run it with
//
//     JOBQ_URL=http://127.0.0.1:8000 JOBQ_TOKEN=... JOBQ_QUEUES=default node ref_worker.mjs
//
// or under the conformance kit, which sets those three itself:
//
//     jobq conformance --url http://127.0.0.1:8000 -- node ref_worker.mjs
//
// It handles the kit's three job types (conformance.echo, conformance.fail,
// conformance.sleep); put your own handlers in HANDLERS.
//
// JOBQ_BROKEN=<rule> makes it break one rule on purpose, so the kit's tests can show that
// each check catches a worker that breaks it. Every place it does is marked `broken(...)`.

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

const URL_BASE = (process.env.JOBQ_URL || "http://127.0.0.1:8000").replace(/\/+$/, "");
const TOKEN = process.env.JOBQ_TOKEN || "";
const QUEUES = (process.env.JOBQ_QUEUES || "default").split(",").map((q) => q.trim()).filter(Boolean);
const BROKEN = process.env.JOBQ_BROKEN || "";

const WORKER_ID = `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
const CONCURRENCY = 4; // jobs run at once
const WAIT_MS = 20_000; // a claim waits this long for a job (long-poll) before it comes back empty
const GRACE_MS = 5_000; // on SIGTERM, running jobs get this long to finish before they are released
const BACKOFF_FIRST_MS = 500; // after a connection error without Retry-After: exponential, with jitter
const BACKOFF_MAX_MS = 30_000;
const REPORT_DEADLINE_MS = 10_000; // how long an ack, fail or release is retried through an outage

const VARIANTS = [
  "wrong-result", "double-ack", "ack-failures", "no-heartbeat", "spin",
  "ignore-retry-after", "exit-without-release", "claim-after-term",
];
if (BROKEN && !VARIANTS.includes(BROKEN)) {
  console.error(`JOBQ_BROKEN=${BROKEN}: not one of ${VARIANTS.join(", ")}`);
  process.exit(2);
}
const broken = (rule) => BROKEN === rule;

// ---- handlers: job type -> async (job, signal) => result ------------------------------
// A handler's return value becomes the job's result. A PermanentError fails the job with
// retry: false (it goes dead at once); any other error fails the attempt, and the queue's
// backoff retries it. `signal` aborts when the worker gives the job up (lease lost, or the
// grace period of a stop ran out).

class PermanentError extends Error {}

const HANDLERS = {
  "conformance.echo": async (job) => (broken("wrong-result") ? { echo: job.payload } : job.payload),
  "conformance.fail": async (job) => {
    if (broken("ack-failures")) return { error: job.payload.message };
    throw new PermanentError(job.payload.message);
  },
  "conformance.sleep": async (job, signal) => {
    await sleep(job.payload.ms, signal);
    return { slept: job.payload.ms };
  },
};

// ---- talking to the service -------------------------------------------------------------

// An answer that is neither 2xx nor a connection error: status, problem+json body, and the
// Retry-After header in milliseconds (null when absent).
class HttpError extends Error {
  constructor(status, body, retryAfterMs) {
    super(`HTTP ${status}${body && body.code ? ` ${body.code}` : ""}${body && body.detail ? `: ${body.detail}` : ""}`);
    this.status = status;
    this.code = body ? body.code : undefined;
    this.retryAfterMs = retryAfterMs;
  }
}

async function call(method, path, body, signal) {
  const headers = { "content-type": "application/json" };
  if (TOKEN) headers.authorization = `Bearer ${TOKEN}`;
  const response = await fetch(URL_BASE + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: a proxy's error page, say. The status still says what happened.
  }
  if (!response.ok) throw new HttpError(response.status, parsed, retryAfterMs(response));
  return parsed;
}

// Retry-After is whole seconds or an HTTP date (RFC 9110).
function retryAfterMs(response) {
  const value = response.headers.get("retry-after");
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

// 429 and 503 ask us to come back later (so may a proxy's 502 or 504); a connection error
// (fetch throws a TypeError) is worth another try too. Anything else (401, 403, 422 ...)
// would be answered the same again.
function isTransient(error) {
  if (error instanceof HttpError) return error.status === 429 || error.status >= 500;
  return error instanceof TypeError;
}

// How long to wait before the next call of the same kind: what the service said, else an
// exponential backoff with full jitter, so that a fleet does not come back in step.
function pauseMs(error, failures) {
  if (error instanceof HttpError && error.retryAfterMs !== null) return error.retryAfterMs;
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** failures);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}

// ---- the worker ---------------------------------------------------------------------------

const running = new Map(); // lease_id -> { job, abort: AbortController, done: Promise }
const stopping = new AbortController(); // aborted by SIGTERM/SIGINT: claims stop at once

async function claimLoop() {
  // What ends a claim, or the pause after a failed one: the stop (broken: nothing does).
  const stop = broken("claim-after-term") ? new AbortController().signal : stopping.signal;
  let failures = 0;
  while (!stop.aborted) {
    const free = CONCURRENCY - running.size;
    if (free === 0) {
      await Promise.race([...[...running.values()].map((r) => r.done), aborted(stop)]);
      continue;
    }
    let leases;
    try {
      const answer = await call("POST", "/v1/leases", {
        worker_id: WORKER_ID,
        queues: QUEUES,
        types: Object.keys(HANDLERS),
        limit: free,
        // No lease_ms: the queue's lease applies; start() reads its length off locked_until.
        wait_ms: broken("spin") ? 0 : WAIT_MS,
      }, stop);
      leases = answer.leases;
      failures = 0;
    } catch (error) {
      if (stop.aborted) return; // the stop aborted the long-poll
      if (!isTransient(error)) {
        console.error(`claim refused (${error.message}); stopping`);
        stopping.abort();
        return;
      }
      const pause = broken("ignore-retry-after") ? 100 : pauseMs(error, failures++);
      console.error(`claim failed (${error.message}); next claim in ${(pause / 1000).toFixed(1)} s`);
      await sleep(pause, stop).catch(() => {}); // a stop ends the pause early
      continue;
    }
    for (const lease of leases) start(lease);
  }
}

function aborted(signal) {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", resolve, { once: true });
  });
}

// The handler's outcome, or the abort's reason as soon as the signal aborts (a handler that
// ignores its signal is left to run, and what it returns then is dropped).
function unlessAborted(promise, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    promise.then(resolve, reject);
  });
}

function start(lease) {
  const { lease_id: leaseId, job } = lease;
  const abort = new AbortController();
  // The lease length, read off locked_until (the clocks are assumed to agree within a second);
  // heartbeats go at a third of it, so two can fail before the lease runs out.
  const leaseMs = Math.max(1000, Date.parse(lease.locked_until) - Date.now());
  const beats = broken("no-heartbeat") ? null : setInterval(() => heartbeat(leaseId, abort), leaseMs / 3);
  const entry = { job, abort };
  entry.done = run(leaseId, job, abort.signal).finally(() => {
    clearInterval(beats);
    running.delete(leaseId);
  });
  running.set(leaseId, entry);
}

async function heartbeat(leaseId, abort) {
  try {
    await call("POST", `/v1/leases/${leaseId}/heartbeat`, {});
  } catch (error) {
    if (error instanceof HttpError && (error.code === "lease_lost" || error.status === 404)) {
      // Cancelled, or expired and claimed by another worker: stop working on it, report nothing.
      console.error(`job lease ${leaseId}: lease lost; giving the job up`);
      abort.abort(new LeaseLost());
    } else {
      console.error(`job lease ${leaseId}: heartbeat failed (${error.message}); the next one tries again`);
    }
  }
}

class LeaseLost extends Error {}
class GivenUp extends Error {} // the grace period of a stop ran out: release the job

async function run(leaseId, job, signal) {
  const handler = HANDLERS[job.type];
  let outcome;
  try {
    const result = await unlessAborted(handler(job, signal), signal);
    outcome = { verb: "ack", body: { result } };
  } catch (error) {
    if (error instanceof LeaseLost) return;
    if (error instanceof GivenUp) {
      outcome = { verb: "release", body: {} }; // pending again at once, the attempt not counted
    } else {
      const message = error instanceof Error ? error.message : String(error);
      outcome = { verb: "fail", body: { error: message, retry: !(error instanceof PermanentError) } };
    }
  }
  try {
    await report(leaseId, outcome.verb, outcome.body);
    if (broken("double-ack") && outcome.verb === "ack") await report(leaseId, "ack", outcome.body);
    console.error(`job ${job.id} (${job.type}) attempt ${job.attempt}: ${outcome.verb}`);
  } catch (error) {
    // 409 lease_lost: the lease expired or the job was cancelled meanwhile; nothing to undo.
    console.error(`job ${job.id}: ${outcome.verb} answered ${error.message}`);
  }
}

// Ack, fail or release, retried through 429/503 and connection errors (the lease id fences
// every retry: a duplicate is answered 409 and changes nothing).
async function report(leaseId, verb, body) {
  const deadline = Date.now() + REPORT_DEADLINE_MS;
  for (let failures = 0; ; failures++) {
    try {
      return await call("POST", `/v1/leases/${leaseId}/${verb}`, body);
    } catch (error) {
      const pause = pauseMs(error, failures);
      if (!isTransient(error) || Date.now() + pause > deadline) throw error;
      await sleep(pause);
    }
  }
}

// ---- stopping -------------------------------------------------------------------------------

function onSignal(name) {
  if (stopping.signal.aborted) {
    console.error(`second ${name}: exiting now; the leases held expire on the service`);
    process.exit(1);
  }
  console.error(`${name}: no more claims; running jobs get ${GRACE_MS / 1000} s to finish`);
  if (broken("exit-without-release")) process.exit(0);
  stopping.abort(); // aborts the long-poll in flight, and the claim loop ends
}
process.on("SIGTERM", () => onSignal("SIGTERM"));
process.on("SIGINT", () => onSignal("SIGINT"));

async function main() {
  console.error(`worker ${WORKER_ID}: queues ${QUEUES.join(",")} at ${URL_BASE}${BROKEN ? ` (broken: ${BROKEN})` : ""}`);
  const claims = claimLoop();
  await aborted(stopping.signal);
  // Wait for the running jobs, at most the grace period; then give up the rest, which
  // their run() releases.
  const all = () => Promise.all([...running.values()].map((r) => r.done));
  await Promise.race([all(), sleep(GRACE_MS)]);
  for (const r of running.values()) r.abort.abort(new GivenUp());
  await all();
  if (!broken("claim-after-term")) await claims;
  console.error(`worker ${WORKER_ID}: stopped`);
  process.exit(0); // the claim-after-term variant still has a long-poll open
}

await main();
