// The rate limits (issue 29) through the client: an enqueue rate's 429 is QueueRateLimited
// with the service's retry_after_ms, retryOverloadMs waits it out and loses no job, a queue
// past its soft thresholds answers Overloaded, and the rate settings go and come back.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Client,
  Overloaded,
  QueueRateLimited,
  RateLimited,
  RetryableError,
  TokenRateLimited,
} from "../src/index.js";
import { client, freshQueue, skipLive } from "./helpers.mjs";

/** A fetch that records each answer's status, for the client under test. */
function recordingFetch() {
  const statuses = [];
  const fetch = async (...args) => {
    const answer = await globalThis.fetch(...args);
    statuses.push(answer.status);
    return answer;
  };
  return { statuses, fetch };
}

describe("Rate limits", { skip: skipLive }, () => {
  test("the rate settings are sent camelCase and answered as the API's fields", async () => {
    const jobq = client();
    const queue = freshQueue();
    const got = await jobq.updateQueue(queue, {
      rateLimit: { jobs: 10, perMs: 1_000, key: "payload.tenant" },
      enqueueRate: { jobs: 50, perMs: 1_000, burst: 200 },
      softDepth: 10_000,
      softLagMs: 60_000,
    });
    assert.deepEqual(got.settings.rate_limit, { jobs: 10, per_ms: 1_000, key: "payload.tenant" });
    assert.deepEqual(got.settings.enqueue_rate, { jobs: 50, per_ms: 1_000, burst: 200 });
    assert.equal(got.settings.soft_depth, 10_000);
    assert.equal(got.settings.soft_lag_ms, 60_000);
    assert.deepEqual(got.rate_limit_use, { jobs: 0, keys: 0, keys_at_limit: 0, free_in_ms: null });

    // The use of the pace: two jobs handed out, of 10 a second.
    await jobq.enqueueMany([{ type: "t", queue, payload: { tenant: "a" } }, { type: "t", queue, payload: { tenant: "a" } }]);
    const leases = await jobq.claim({ queues: [queue], workerId: "js-test", limit: 5 });
    assert.equal(leases.length, 2);
    const use = (await jobq.getQueue(queue)).rate_limit_use;
    assert.equal(use.jobs, 2);
    assert.equal(use.keys, 1);

    const cleared = await jobq.updateQueue(queue, { rateLimit: null, enqueueRate: null, softDepth: null, softLagMs: null });
    assert.equal(cleared.settings.rate_limit, null);
    assert.equal(cleared.settings.enqueue_rate, null);
    assert.equal(cleared.settings.soft_depth, null);
    assert.equal(cleared.rate_limit_use, null);
    await assert.rejects(jobq.updateQueue(queue, { rateLimit: { jobs: 1, per_ms: 1_000 } }), /unknown rateLimit field per_ms/);
  });

  test("beyond a queue's enqueue_rate: QueueRateLimited, retryAfterMs to the millisecond, nothing enqueued", async () => {
    const jobq = client();
    const queue = freshQueue();
    // 2 at once, then one every 5 s: the third enqueue waits for a token that is seconds away.
    await jobq.updateQueue(queue, { enqueueRate: { jobs: 1, perMs: 5_000, burst: 2 } });
    await jobq.enqueueMany([{ type: "t", queue }, { type: "t", queue }]);
    const error = await jobq.enqueue("t", { n: 3 }, { queue }).catch((e) => e);
    assert.ok(error instanceof QueueRateLimited, String(error));
    assert.ok(error instanceof RateLimited && error instanceof RetryableError);
    assert.equal(error.status, 429);
    assert.equal(error.code, "queue_rate_limited");
    assert.equal(error.retryAfterMs, error.body.retry_after_ms);
    assert.ok(error.retryAfterMs > 0 && error.retryAfterMs <= 5_000, String(error.retryAfterMs));
    // A batch larger than what the bucket holds is refused whole, with the wait for all of it.
    const batch = await jobq.enqueueMany([{ type: "t", queue }, { type: "t", queue }]).catch((e) => e);
    assert.ok(batch instanceof QueueRateLimited, String(batch));
    assert.ok(batch.retryAfterMs > error.retryAfterMs - 1_000, `${batch.retryAfterMs} vs ${error.retryAfterMs}`);
    assert.equal((await jobq.getQueue(queue)).counts.pending, 2);
  });

  test("retryOverloadMs waits out the enqueue rate and loses nothing", async () => {
    const queue = freshQueue();
    await client().updateQueue(queue, { enqueueRate: { jobs: 10, perMs: 1_000, burst: 2 } });
    const { statuses, fetch } = recordingFetch();
    const patient = client({ retryOverloadMs: 10_000, fetch });
    const started = Date.now();
    const ids = [];
    for (let n = 0; n < 8; n += 1) ids.push((await patient.enqueue("t", { n }, { queue })).id);
    const took = Date.now() - started;
    assert.ok(statuses.includes(429), `no 429 was waited out: ${statuses}`);
    // 2 at once, then 6 at 10 a second: about 600 ms, not whole seconds per refusal.
    assert.ok(took >= 450 && took < 4_000, `${took} ms`);
    const stored = [];
    for await (const j of client().iterJobs({ queue })) stored.push(j);
    assert.deepEqual(stored.map((j) => j.payload.n).sort(), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(new Set(stored.map((j) => j.id)), new Set(ids));
  });

  test("past soft_depth a share of enqueues is Overloaded, with the wait the curve gives", async () => {
    const jobq = client();
    const queue = freshQueue();
    await jobq.enqueueMany(Array.from({ length: 4 }, () => ({ type: "t", queue })));
    await jobq.updateQueue(queue, { softDepth: 1 });
    let error;
    // Overload 4 and more refuses 3 of 4 enqueues, spread evenly: one of the first few is.
    for (let n = 0; n < 20 && !error; n += 1) {
      error = await jobq.enqueue("t", {}, { queue }).then(() => undefined, (e) => e);
    }
    assert.ok(error instanceof Overloaded, String(error));
    assert.equal(error.code, "queue_overloaded");
    assert.equal(error.retryAfterMs, error.body.retry_after_ms);
    assert.ok(error.retryAfterMs >= 100 && error.retryAfterMs <= 60_000, String(error.retryAfterMs));
  });
});

describe("Rate limit answers without a service", () => {
  const answer = (code, body, headers = { "retry-after": "2" }) => async () =>
    new Response(JSON.stringify({ type: `/problems/${code}`, title: "t", status: 429, code, ...body }),
      { status: 429, headers: { "content-type": "application/problem+json", ...headers } });

  test("each code has its class; retry_after_ms wins over Retry-After's whole seconds", async () => {
    for (const [code, Cls] of [["queue_rate_limited", QueueRateLimited], ["token_rate_limited", TokenRateLimited],
      ["queue_overloaded", Overloaded]]) {
      const jobq = new Client({ url: "http://jobq.test", token: "", fetch: answer(code, { retry_after_ms: 1234 }) });
      const error = await jobq.enqueue("t").catch((e) => e);
      assert.ok(error instanceof Cls, `${code}: ${error}`);
      assert.equal(error.retryAfterMs, 1234);
    }
    const headerOnly = new Client({ url: "http://jobq.test", token: "", fetch: answer("queue_rate_limited", {}) });
    assert.equal((await headerOnly.enqueue("t").catch((e) => e)).retryAfterMs, 2_000);
  });

  test("retryOverloadMs sleeps retry_after_ms, not the rounded-up Retry-After", async () => {
    let calls = 0;
    const fetch = async (...args) => {
      calls += 1;
      if (calls === 1) return answer("token_rate_limited", { retry_after_ms: 40 }, { "retry-after": "1" })(...args);
      return new Response(JSON.stringify({ id: "1", status: "pending" }), { status: 201 });
    };
    const jobq = new Client({ url: "http://jobq.test", token: "", retryOverloadMs: 5_000, fetch });
    const started = Date.now();
    const job = await jobq.enqueue("t");
    const took = Date.now() - started;
    assert.equal(job.id, "1");
    assert.equal(calls, 2);
    assert.ok(took >= 38 && took < 900, `${took} ms`);
  });
});
