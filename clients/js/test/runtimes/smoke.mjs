// Run by Deno and Bun (tests/clients/test_js_client.py): the package loads in them, and a
// Client and a Worker do one job's round trip against JOBQ_URL. Prints "smoke ok <runtime>".
import { Client, NotFound, Worker } from "../../src/index.js";

const url = globalThis.process?.env?.JOBQ_URL ?? globalThis.Deno?.env.get("JOBQ_URL");
const token = globalThis.process?.env?.JOBQ_TOKEN ?? globalThis.Deno?.env.get("JOBQ_TOKEN");
const runtime = globalThis.Deno ? "deno" : globalThis.Bun ? "bun" : "node";
const queue = `smoke-${runtime}-${Math.random().toString(16).slice(2, 10)}`;

const jobq = new Client({ url, token });
const job = await jobq.enqueue("smoke.echo", { runtime }, { queue });
const worker = new Worker({
  url,
  token,
  queues: [queue],
  handlers: { "smoke.echo": async (j) => ({ echoed: j.payload.runtime }) },
  logger: null,
});
const running = worker.run();
const done = await jobq.wait(job.id, { timeoutMs: 20_000 });
await worker.stop();
await running;
if (done.result?.echoed !== runtime) throw new Error(`unexpected result ${JSON.stringify(done.result)}`);
const missing = await jobq.get("no-such-job").catch((e) => e);
if (!(missing instanceof NotFound)) throw new Error(`expected NotFound, got ${missing}`);
console.log(`smoke ok ${runtime}`);
