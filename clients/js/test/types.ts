// Compiled by `npm run typecheck` (and test/typecheck.test.mjs), never run: the README's
// uses of the API must type-check against src/index.d.ts and the generated schemas.
import {
  Client,
  Discard,
  LeaseLost,
  Overloaded,
  QueueFull,
  RateLimited,
  Retry,
  Worker,
  type Job,
  type JobStatus,
  type RateLimitUse,
} from "@jobq/client";
import type { components } from "@jobq/client/openapi";

const body: components["schemas"]["JobCreate"] = { type: "t", delay_ms: 5 };
void body;

async function producer(): Promise<void> {
  const jobq = new Client({ url: "http://127.0.0.1:8000", token: "t", retryOverloadMs: 30_000 });
  const job: Job = await jobq.enqueue("email.welcome", { to: "ada@example.com" }, {
    queue: "email",
    priority: 5,
    delayMs: 1_000,
    maxAttempts: 3,
    idempotencyKey: "welcome:ada",
  });
  const status: JobStatus = job.status;
  const done = await jobq.wait(job.id, { timeoutMs: 60_000 });
  console.log(status, done.result, done.errors.map((e) => e.error));
  const [a, b] = await jobq.enqueueMany([{ type: "t", payload: { n: 1 } }, { type: "t", runAt: new Date() }]);
  console.log(a.id, b.id);
  const page = await jobq.listJobs({ queue: "email", status: "dead", limit: 10 });
  for (const j of page.jobs) console.log(j.last_error);
  for await (const j of jobq.iterJobs({ queue: "email" })) console.log(j.id);
  const replayed: number = await jobq.replayDead({ queue: "email" });
  const purged: number = await jobq.purgeDead({ queue: "email", type: "t" });
  console.log(replayed, purged, page.next_cursor);
  const queue = await jobq.updateQueue("email", { maxDepth: 100, leaseMs: 60_000, agingMs: null });
  console.log(queue.settings.max_depth, queue.counts.pending);
  const paced = await jobq.updateQueue("geocode", {
    rateLimit: { jobs: 100, perMs: 60_000, key: "payload.tenant" },
    enqueueRate: { jobs: 50, perMs: 1_000, burst: 200 },
    softDepth: 10_000,
    softLagMs: null,
  });
  const use: RateLimitUse | null | undefined = paced.rate_limit_use;
  console.log(paced.settings.rate_limit?.per_ms, paced.settings.enqueue_rate?.burst, use?.jobs, use?.free_in_ms);
  await jobq.updateQueue("geocode", { rateLimit: null, enqueueRate: null });
  await jobq.pauseQueue("email");
  await jobq.resumeQueue("email");
  await jobq.deleteQueue("email", { purge: true });
  try {
    await jobq.enqueue("t");
  } catch (error) {
    if (error instanceof QueueFull) console.log(error.retryAfterMs ?? 1000, error.code, error.status);
    if (error instanceof RateLimited || error instanceof Overloaded) console.log(error.retryAfterMs, error.code);
  }
}

async function ownLoop(jobq: Client): Promise<void> {
  const [lease] = await jobq.claim({ queues: ["email"], workerId: "w1", waitMs: 20_000 });
  if (!lease) return;
  const { locked_until } = await jobq.heartbeat(lease.lease_id, { extendMs: 30_000 });
  console.log(locked_until, lease.job.payload);
  try {
    await jobq.ack(lease.lease_id, { sent: true });
  } catch (error) {
    if (error instanceof LeaseLost && !error.alreadyCompleted) console.log("lost");
  }
  await jobq.fail("x", "boom", { retry: false });
  await jobq.release("x", { delayMs: 0 });
  const results = await jobq.releaseMany(["a", { leaseId: "b", delayMs: 5 }]);
  const acks = await jobq.ackMany([{ leaseId: "a", result: 1 }]);
  console.log(results[0].ok, acks[0].ok);
}

async function worker(): Promise<void> {
  const w = new Worker({
    url: "http://127.0.0.1:8000",
    queues: ["email"],
    concurrency: 4,
    gracePeriodMs: 10_000,
    handlers: {
      "email.welcome": async (job, { signal }) => {
        if (signal.aborted) throw new Retry("later", { inMs: 5_000 });
        if (typeof job.payload.to !== "string") throw new Discard("no address");
        return { sent: true };
      },
    },
  });
  setTimeout(() => void w.stop(), 1_000);
  await w.run();
}

void producer;
void ownLoop;
void worker;
