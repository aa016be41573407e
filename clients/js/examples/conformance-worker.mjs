// A worker for `jobq conformance`: it reads JOBQ_URL, JOBQ_TOKEN and JOBQ_QUEUES (comma-
// separated) and handles the kit's three job types with @jobq/client's Worker:
//
//   jobq conformance --url http://127.0.0.1:8000 -- node clients/js/examples/conformance-worker.mjs
//
// Everything the kit checks (long-polls, heartbeats, acks, Retry-After, the stop that
// releases) is the Worker's own doing; the handlers below are all the code there is.
import { Discard, Worker } from "@jobq/client";

const env = globalThis.process?.env ?? {};
const queues = (env.JOBQ_QUEUES || "default").split(",").filter(Boolean);

/** Resolves after `ms`, or rejects as soon as `signal` aborts (the lease lost, or the stop's
 * grace period over: the Worker then releases the job). */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}

const worker = new Worker({
  url: env.JOBQ_URL || "http://127.0.0.1:8000",
  token: env.JOBQ_TOKEN || "",
  queues,
  // A sleep of two minutes cannot finish: after 5 s it is released, well within the kit's
  // --stop-within (30 s).
  gracePeriodMs: Number(env.JOBQ_GRACE_MS || 5_000),
  handlers: {
    "conformance.echo": async (job) => job.payload,
    "conformance.fail": async (job) => {
      throw new Discard(job.payload.message);
    },
    "conformance.sleep": async (job, { signal }) => {
      await sleep(job.payload.ms, signal);
      return { slept: job.payload.ms };
    },
  },
});

await worker.run(); // until SIGTERM or SIGINT, then the graceful stop
