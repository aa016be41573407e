// Worker against a live jobq service (JOBQ_URL, JOBQ_TOKEN): jobs completed, failures by
// Retry and Discard, heartbeats past the lease, and a stop that releases what runs.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Discard, Retry, Worker } from "../src/index.js";
import { TOKEN, URL_, client, eventually, freshQueue, recordingLogger, skipLive } from "./helpers.mjs";

function worker(queue, handlers, options = {}) {
  const logger = recordingLogger();
  const w = new Worker({ url: URL_, token: TOKEN, queues: [queue], handlers, handleSignals: false, logger, ...options });
  return { w, logger };
}

/** Runs `body` while the worker runs, then stops it and checks run() resolved. */
async function whileRunning({ w, logger }, body) {
  const running = w.run();
  try {
    await body();
  } catch (error) {
    error.message += `\nworker log:\n${logger.lines.join("\n")}`;
    throw error;
  } finally {
    await w.stop();
  }
  await running;
}

const finished = async (jobq, id) => {
  const job = await jobq.get(id);
  return ["completed", "dead", "cancelled"].includes(job.status) && job;
};

describe("Worker", { skip: skipLive }, () => {
  test("completes jobs with the handler's result, acked once each", async () => {
    const jobq = client();
    const queue = freshQueue();
    const payloads = [{}, { n: 1 }, { list: [1, "two", null] }, { nested: { deep: true } }, { s: "ü" }];
    const jobs = await jobq.enqueueMany(payloads.map((payload) => ({ type: "echo", payload, queue })));
    const seen = [];
    const running = worker(queue, {
      echo: async (job, { leaseId }) => {
        seen.push(leaseId);
        return job.payload;
      },
    }, { concurrency: 3 });
    await whileRunning(running, async () => {
      for (const [i, job] of jobs.entries()) {
        const done = await eventually(() => finished(jobq, job.id), { what: `job ${job.id} finished` });
        assert.equal(done.status, "completed");
        assert.deepEqual(done.result, payloads[i]);
        assert.equal(done.attempt, 1);
      }
    });
    assert.equal(seen.length, payloads.length);
    assert.equal(new Set(seen).size, payloads.length);
    assert.ok(running.logger.lines.some((l) => l.includes("completed")), running.logger.lines.join("\n"));
  });

  test("acks that finish together go out together in POST /v1/leases/ack", async () => {
    const jobq = client();
    const queue = freshQueue();
    const jobs = await jobq.enqueueMany([1, 2, 3, 4, 5, 6].map((n) => ({ type: "t", payload: { n }, queue })));
    const ackBodies = [];
    const fetch = async (url, init) => {
      if (String(url).endsWith("/v1/leases/ack")) ackBodies.push(JSON.parse(init.body).acks);
      return globalThis.fetch(url, init);
    };
    let open;
    const gate = new Promise((r) => (open = r));
    let started = 0;
    const t = async (job) => {
      started += 1;
      if (started === jobs.length) open();
      await gate;
      return job.payload.n;
    };
    await whileRunning(worker(queue, { t }, { fetch, concurrency: jobs.length }), async () => {
      for (const job of jobs) {
        const done = await eventually(() => finished(jobq, job.id), { what: `job ${job.id} finished` });
        assert.equal(done.result, job.payload.n);
      }
    });
    const acked = ackBodies.flat().map((a) => a.lease_id);
    assert.equal(acked.length, jobs.length, JSON.stringify(ackBodies));
    assert.equal(new Set(acked).size, jobs.length);
    assert.ok(ackBodies.length < jobs.length, `${ackBodies.length} ack requests for ${jobs.length} jobs`);
  });

  test("Retry runs the job again; Discard and a thrown error say why", async () => {
    const jobq = client();
    const queue = freshQueue();
    const retried = await jobq.enqueue("flaky", {}, { queue });
    const discarded = await jobq.enqueue("bad", { message: "not an address" }, { queue, maxAttempts: 5 });
    const crashed = await jobq.enqueue("crash", {}, { queue, maxAttempts: 1 });
    await whileRunning(
      worker(queue, {
        flaky: async (job) => {
          if (job.attempt === 1) throw new Retry("try again", { inMs: 50 });
          return { attempt: job.attempt };
        },
        bad: async (job) => {
          throw new Discard(job.payload.message);
        },
        crash: () => {
          throw new TypeError("cannot read it");
        },
      }),
      async () => {
        const done = await eventually(() => finished(jobq, retried.id), { what: "the retried job finished" });
        assert.equal(done.status, "completed");
        assert.deepEqual(done.result, { attempt: 2 });
        assert.deepEqual(done.errors.map((e) => [e.attempt, e.error, e.kind]), [[1, "try again", "failed"]]);

        const dead = await eventually(() => finished(jobq, discarded.id), { what: "the discarded job finished" });
        assert.equal(dead.status, "dead");
        assert.equal(dead.attempt, 1);
        assert.equal(dead.last_error, "not an address");

        const broke = await eventually(() => finished(jobq, crashed.id), { what: "the crashed job finished" });
        assert.equal(broke.status, "dead");
        assert.match(broke.last_error, /^TypeError: cannot read it\n\s+at /);
      },
    );
  });

  test("heartbeats a job that runs longer than the queue's lease", async () => {
    const jobq = client();
    const queue = freshQueue();
    await jobq.updateQueue(queue, { leaseMs: 1_000 });
    const job = await jobq.enqueue("slow", { ms: 3_000 }, { queue });
    const beats = [];
    const fetch = async (url, init) => {
      if (String(url).endsWith("/heartbeat")) beats.push(JSON.parse(init.body));
      return globalThis.fetch(url, init);
    };
    const slow = async (j) => {
      await new Promise((r) => setTimeout(r, j.payload.ms));
      return { slept: j.payload.ms };
    };
    await whileRunning(worker(queue, { slow }, { fetch }), async () => {
      const done = await eventually(() => finished(jobq, job.id), { what: "the slow job finished" });
      assert.equal(done.status, "completed");
      assert.equal(done.attempt, 1);
      assert.deepEqual(done.errors, []);
      assert.deepEqual(done.result, { slept: 3_000 });
    });
    // About every third of a second over three seconds; without leaseMs, no extend_ms: the
    // service extends by the lease's own length.
    assert.ok(beats.length >= 5, `${beats.length} heartbeats`);
    assert.deepEqual(beats[0], {});
  });

  test("leaseMs is the lease every claim asks for", async () => {
    const jobq = client();
    const queue = freshQueue();
    await jobq.updateQueue(queue, { leaseMs: 1_000 });
    const job = await jobq.enqueue("t", {}, { queue });
    await whileRunning(worker(queue, { t: (j) => Date.parse(j.locked_until) - Date.now() }, { leaseMs: 120_000 }), async () => {
      const done = await eventually(() => finished(jobq, job.id), { what: "the job finished" });
      assert.ok(done.result > 100_000, `lease left: ${done.result} ms`);
    });
  });

  test("stop() releases a job still running after the grace period: pending, attempt not spent", async () => {
    const jobq = client();
    const queue = freshQueue();
    const job = await jobq.enqueue("long", {}, { queue, maxAttempts: 1 });
    let aborted = null;
    const long = (j, { signal }) =>
      new Promise((resolve) => {
        signal.addEventListener("abort", () => {
          aborted = signal.reason;
          resolve("too late");
        });
      });
    const { w, logger } = worker(queue, { long }, { gracePeriodMs: 300 });
    await whileRunning({ w, logger }, () =>
      eventually(async () => (await jobq.get(job.id)).status === "running", { what: "the job running" }),
    );
    const back = await jobq.get(job.id);
    assert.equal(back.status, "pending", logger.lines.join("\n"));
    assert.equal(back.attempt, 0);
    assert.deepEqual(back.errors, []);
    assert.equal(back.releases.length, 1);
    assert.equal(back.releases[0].worker_id, w.workerId);
    assert.ok(aborted instanceof Error);
    assert.ok(logger.lines.some((l) => l.includes("released (shutdown)")), logger.lines.join("\n"));
  });

  test("stop() lets a job that finishes within the grace period be acked", async () => {
    const jobq = client();
    const queue = freshQueue();
    const job = await jobq.enqueue("short", {}, { queue });
    let started;
    const begun = new Promise((r) => (started = r));
    const short = async () => {
      started();
      await new Promise((r) => setTimeout(r, 300));
      return "done";
    };
    await whileRunning(worker(queue, { short }, { gracePeriodMs: 10_000 }), () => begun);
    const done = await jobq.get(job.id);
    assert.equal(done.status, "completed");
    assert.equal(done.result, "done");
  });

  test("an idle worker long-polls, and stop() ends its waiting claim at once", async () => {
    const queue = freshQueue();
    let claims = 0;
    const fetch = async (url, init) => {
      if (String(url).endsWith("/v1/leases")) claims += 1;
      return globalThis.fetch(url, init);
    };
    let stopping;
    await whileRunning(worker(queue, { t: () => null }, { fetch, waitMs: 20_000 }), async () => {
      await eventually(() => claims > 0, { what: "the first claim" });
      stopping = Date.now();
    });
    assert.ok(Date.now() - stopping < 2_000, `stopped in ${Date.now() - stopping} ms`);
    assert.equal(claims, 1);
  });

  test("run() rejects when the service refuses the token", { skip: TOKEN ? false : "the service has no tokens" }, async () => {
    const w = new Worker({ url: URL_, token: "wrong", queues: ["q"], handlers: { t: () => null }, handleSignals: false, logger: null });
    await assert.rejects(w.run(), { name: "Unauthorized" });
  });
});

describe("Worker without a service", () => {
  test("after a 503 with Retry-After the next claim waits that long", async () => {
    const claims = [];
    const fetch = async (url) => {
      const path = new URL(url).pathname;
      if (path === "/v1/leases") {
        claims.push(Date.now());
        const body = JSON.stringify({ status: 503, code: "unavailable", title: "Unavailable" });
        return new Response(body, { status: 503, headers: { "retry-after": "1", "content-type": "application/problem+json" } });
      }
      return new Response("{}", { status: 200 });
    };
    const w = new Worker({ url: "http://jobq.test", queues: ["q"], handlers: { t: () => null }, fetch, handleSignals: false, logger: null });
    const running = w.run();
    try {
      await eventually(() => claims.length >= 3, { what: "three claims" });
    } finally {
      await w.stop();
    }
    await running;
    const gaps = claims.slice(1).map((at, i) => at - claims[i]);
    assert.ok(gaps.every((gap) => gap >= 1_000), `gaps: ${gaps}`);
  });
});

describe("Worker options", () => {
  test("are checked when it is made", () => {
    const base = { url: "http://127.0.0.1:1", queues: ["q"], handlers: { t: () => null } };
    assert.throws(() => new Worker({ ...base, queues: [] }), /queues/);
    assert.throws(() => new Worker({ ...base, handlers: {} }), /handlers/);
    assert.throws(() => new Worker({ ...base, handlers: { t: 1 } }), /not a function/);
    assert.throws(() => new Worker({ ...base, concurrency: 0 }), /concurrency/);
    assert.throws(() => new Worker({ ...base, leaseMs: 1.5 }), /leaseMs/);
    assert.throws(() => new Worker({ ...base, waitMs: 60_000 }), /waitMs/);
  });
});
