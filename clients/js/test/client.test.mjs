// Client against a live jobq service (JOBQ_URL, JOBQ_TOKEN): producing, the typed errors,
// a hand-written worker loop, the dead-letter queue and queue settings.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:net";
import { describe, test } from "node:test";

import {
  Client,
  IdempotencyConflict,
  InvalidState,
  JobFailed,
  LeaseLost,
  NotFound,
  QueueFull,
  QueueNotEmpty,
  RetryableError,
  TransportError,
  ValidationError,
  WaitTimeout,
} from "../src/index.js";
import { client, eventually, freshQueue, skipLive } from "./helpers.mjs";

describe("Client", { skip: skipLive }, () => {
  test("enqueue, claim and ack, then get and wait see the result", async () => {
    const jobq = client();
    const queue = freshQueue();
    const job = await jobq.enqueue("email.welcome", { to: "ada@example.com" }, { queue, priority: 3, maxAttempts: 4 });
    assert.equal(job.status, "pending");
    assert.equal(job.queue, queue);
    assert.equal(job.priority, 3);
    assert.equal(job.max_attempts, 4);
    assert.deepEqual(job.payload, { to: "ada@example.com" });
    assert.deepEqual(await jobq.get(job.id), job);

    const waiting = jobq.wait(job.id, { timeoutMs: 10_000 });
    const [lease] = await jobq.claim({ queues: [queue], workerId: "js-test", waitMs: 5_000 });
    assert.equal(lease.job.id, job.id);
    assert.equal(lease.job.attempt, 1);
    const { locked_until } = await jobq.heartbeat(lease.lease_id, { extendMs: 60_000 });
    assert.ok(Date.parse(locked_until) > Date.now() + 50_000, locked_until);
    const acked = await jobq.ack(lease.lease_id, { sent: true });
    assert.equal(acked.status, "completed");

    const done = await waiting;
    assert.equal(done.status, "completed");
    assert.deepEqual(done.result, { sent: true });
  });

  test("enqueueMany keeps the order; options reach the service; an idempotent repeat is the same job", async () => {
    const jobq = client();
    const queue = freshQueue();
    const runAt = new Date(Date.now() + 3_600_000);
    const jobs = await jobq.enqueueMany([
      { type: "a", payload: { n: 1 }, queue },
      { type: "b", queue, delayMs: 60_000 },
      { type: "c", queue, runAt, idempotencyKey: "k1" },
    ]);
    assert.deepEqual(jobs.map((j) => j.type), ["a", "b", "c"]);
    assert.ok(Date.parse(jobs[1].visible_at) > Date.now() + 50_000);
    assert.equal(Date.parse(jobs[2].visible_at), runAt.getTime());
    const again = await jobq.enqueue("c", {}, { queue, runAt, idempotencyKey: "k1" });
    assert.equal(again.id, jobs[2].id);
    await assert.rejects(jobq.enqueue("other", {}, { queue, idempotencyKey: "k1" }), IdempotencyConflict);

    const page = await jobq.listJobs({ queue, limit: 2 });
    assert.deepEqual(page.jobs.map((j) => j.type), ["c", "b"]);
    assert.ok(page.next_cursor);
    const all = [];
    for await (const j of jobq.iterJobs({ queue, limit: 1 })) all.push(j.type);
    assert.deepEqual(all, ["c", "b", "a"]);
  });

  test("a request that does not fit the API is a ValidationError naming the field", async () => {
    const jobq = client();
    const error = await jobq.enqueue("t", {}, { priority: "high" }).catch((e) => e);
    assert.ok(error instanceof ValidationError, String(error));
    assert.equal(error.status, 422);
    assert.equal(error.code, "validation_error");
    assert.ok(
      error.errors.some((e) => e.loc.includes("priority")),
      JSON.stringify(error.errors),
    );
  });

  test("an unknown job is NotFound", async () => {
    const error = await client().get("no-such-job-0").catch((e) => e);
    assert.ok(error instanceof NotFound, String(error));
    assert.equal(error.status, 404);
    assert.equal(error.code, "not_found");
  });

  test("a lease acked, released or cancelled away answers LeaseLost", async () => {
    const jobq = client();
    const queue = freshQueue();
    await jobq.enqueue("t", {}, { queue });
    const [lease] = await jobq.claim({ queues: queue, workerId: "js-test" });
    await jobq.ack(lease.lease_id, 1);
    const again = await jobq.ack(lease.lease_id, 1).catch((e) => e);
    assert.ok(again instanceof LeaseLost, String(again));
    assert.equal(again.status, 409);
    assert.equal(again.alreadyCompleted, true);
    const beat = await jobq.heartbeat(lease.lease_id).catch((e) => e);
    assert.ok(beat instanceof LeaseLost, String(beat));

    const job = await jobq.enqueue("t", {}, { queue });
    const [second] = await jobq.claim({ queues: [queue], workerId: "js-test" });
    await jobq.cancel(job.id);
    const lost = await jobq.ack(second.lease_id).catch((e) => e);
    assert.ok(lost instanceof LeaseLost, String(lost));
    assert.equal(lost.alreadyCompleted, false);
    await assert.rejects(jobq.cancel(job.id), InvalidState);
  });

  test("a queue at max_depth answers QueueFull with retryAfterMs", async () => {
    const jobq = client();
    const queue = freshQueue();
    const settings = await jobq.updateQueue(queue, { maxDepth: 1 });
    assert.equal(settings.settings.max_depth, 1);
    await jobq.enqueue("t", {}, { queue });
    const error = await jobq.enqueue("t", {}, { queue }).catch((e) => e);
    assert.ok(error instanceof QueueFull, String(error));
    assert.ok(error instanceof RetryableError);
    assert.equal(error.status, 429);
    assert.equal(error.code, "queue_full");
    assert.equal(typeof error.retryAfterMs, "number");
    assert.ok(error.retryAfterMs >= 1000, String(error.retryAfterMs));
    const batch = await jobq.enqueueMany([{ type: "t", queue }]).catch((e) => e);
    assert.ok(batch instanceof QueueFull, String(batch));
  });

  test("retryOverloadMs waits out a full queue until there is room", async () => {
    const statuses = [];
    const fetch = async (...args) => {
      const answer = await globalThis.fetch(...args);
      statuses.push(answer.status);
      return answer;
    };
    const jobq = client({ retryOverloadMs: 20_000, fetch });
    const queue = freshQueue();
    await jobq.updateQueue(queue, { maxDepth: 1 });
    const first = await jobq.enqueue("t", {}, { queue });
    const second = jobq.enqueue("t", { n: 2 }, { queue });
    await eventually(() => statuses.includes(429), { what: "the second enqueue answered 429" });
    // Room comes once the first job leaves the waiting count; the enqueue then goes through.
    const [lease] = await client().claim({ queues: [queue], workerId: "js-test" });
    assert.equal(lease.job.id, first.id);
    const job = await second;
    assert.deepEqual(job.payload, { n: 2 });
  });

  test("fail sends a job dead; the dead letters are listed, replayed and purged", async () => {
    const jobq = client();
    const queue = freshQueue();
    const job = await jobq.enqueue("t", {}, { queue });
    let [lease] = await jobq.claim({ queues: [queue], workerId: "js-test" });
    const dead = await jobq.fail(lease.lease_id, "no such address", { retry: false });
    assert.equal(dead.status, "dead");
    assert.equal(dead.last_error, "no such address");
    const failed = await jobq.wait(job.id, { timeoutMs: 1_000 }).catch((e) => e);
    assert.ok(failed instanceof JobFailed, String(failed));
    assert.equal(failed.job.status, "dead");

    const page = await jobq.listDead({ queue });
    assert.deepEqual(page.jobs.map((j) => j.id), [job.id]);
    assert.equal(await jobq.replayDead({ queue }), 1);
    const replayed = await jobq.get(job.id);
    assert.equal(replayed.status, "pending");
    assert.equal(replayed.attempt, 0);

    [lease] = await jobq.claim({ queues: [queue], workerId: "js-test" });
    await jobq.fail(lease.lease_id, "still broken", { retry: false });
    assert.equal(await jobq.purgeDead({ queue }), 1);
    await assert.rejects(jobq.get(job.id), NotFound);
  });

  test("fail with retryInMs schedules the retry; release hands the job back unspent", async () => {
    const jobq = client();
    const queue = freshQueue();
    const job = await jobq.enqueue("t", {}, { queue, maxAttempts: 1 });
    const [lease] = await jobq.claim({ queues: [queue], workerId: "js-test" });
    const released = await jobq.release(lease.lease_id);
    assert.equal(released.status, "pending");
    assert.equal(released.attempt, 0);
    assert.equal(released.releases.length, 1);
    await assert.rejects(jobq.release(lease.lease_id), LeaseLost);

    const [again] = await jobq.claim({ queues: [queue], workerId: "js-test" });
    assert.equal(again.job.id, job.id);
    const results = await jobq.releaseMany([again.lease_id, "no-such-lease"]);
    assert.deepEqual(results.map((r) => r.ok), [true, false]);

    const other = await jobq.enqueue("t", {}, { queue: freshQueue(), maxAttempts: 3 });
    const [third] = await jobq.claim({ queues: [other.queue], workerId: "js-test" });
    const failed = await jobq.fail(third.lease_id, "busy", { retryInMs: 60_000 });
    assert.equal(failed.status, "failed");
    assert.ok(Date.parse(failed.visible_at) > Date.now() + 50_000);
  });

  test("ackMany answers per lease", async () => {
    const jobq = client();
    const queue = freshQueue();
    await jobq.enqueueMany([{ type: "t", queue }, { type: "t", queue }]);
    const leases = await jobq.claim({ queues: [queue], workerId: "js-test", limit: 2 });
    assert.equal(leases.length, 2);
    const results = await jobq.ackMany([
      { leaseId: leases[0].lease_id, result: { n: 0 } },
      { leaseId: leases[1].lease_id },
      { leaseId: leases[0].lease_id },
    ]);
    assert.deepEqual(results.map((r) => r.ok), [true, true, false]);
    assert.deepEqual((await jobq.get(leases[0].job.id)).result, { n: 0 });
  });

  test("wait gives up with WaitTimeout", async () => {
    const jobq = client();
    const job = await jobq.enqueue("t", {}, { queue: freshQueue() });
    const error = await jobq.wait(job.id, { timeoutMs: 200 }).catch((e) => e);
    assert.ok(error instanceof WaitTimeout, String(error));
  });

  test("queues: get, list, settings, pause, resume and delete", async () => {
    const jobq = client();
    const prefix = freshQueue("jsq");
    const name = `${prefix}.a`;
    await jobq.enqueue("t", {}, { queue: name });
    await jobq.updateQueue(`${prefix}.b`, { leaseMs: 5_000, maxRunning: 2, agingMs: null });

    const queue = await jobq.getQueue(name);
    assert.equal(queue.name, name);
    assert.equal(queue.counts.pending, 1);
    const page = await jobq.listQueues({ prefix });
    assert.deepEqual(page.queues.map((q) => q.name), [`${prefix}.a`, `${prefix}.b`]);
    const names = [];
    for await (const q of jobq.iterQueues({ prefix, pageSize: 1 })) names.push(q.name);
    assert.deepEqual(names, [`${prefix}.a`, `${prefix}.b`]);
    assert.equal((await jobq.getQueue(`${prefix}.b`)).settings.lease_ms, 5_000);

    assert.equal((await jobq.pauseQueue(name)).settings.paused, true);
    assert.deepEqual(await jobq.claim({ queues: [name], workerId: "js-test" }), []);
    assert.equal((await jobq.resumeQueue(name)).settings.paused, false);

    const refused = await jobq.deleteQueue(name).catch((e) => e);
    assert.ok(refused instanceof QueueNotEmpty, String(refused));
    assert.deepEqual(refused.counts, { pending: 1 });
    await jobq.deleteQueue(name, { purge: true });
    await assert.rejects(jobq.getQueue(name), NotFound);
    await assert.rejects(jobq.updateQueue(name, { max_depth: 1 }), TypeError);
  });
});

describe("Client without a service", () => {
  test("a URL that is not http(s), or names /v1, is refused at once", () => {
    assert.throws(() => new Client({ url: "localhost:8000" }), TypeError);
    assert.throws(() => new Client({ url: "http://127.0.0.1:8000/v1" }), /root/);
  });

  test("no answer is a TransportError naming the URL", async () => {
    // A port that was free a moment ago: nothing listens there.
    const server = createServer().listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address();
    server.close();
    await once(server, "close");
    const jobq = new Client({ url: `http://127.0.0.1:${port}`, token: "" });
    const error = await jobq.get("1").catch((e) => e);
    assert.ok(error instanceof TransportError, String(error));
    assert.match(error.message, new RegExp(`cannot reach http://127.0.0.1:${port}: GET /v1/jobs/1: .*ECONNREFUSED`));
  });

  test("an answer that is not problem+json still gets a class by its status", async () => {
    const fetch = async () =>
      new Response("<html>busy</html>", { status: 503, headers: { "retry-after": "7" } });
    const error = await new Client({ url: "http://jobq.test", fetch }).get("1").catch((e) => e);
    assert.ok(error instanceof RetryableError, String(error));
    assert.equal(error.code, null);
    assert.equal(error.retryAfterMs, 7_000);
  });
});
