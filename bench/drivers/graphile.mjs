// Graphile Worker, driven through its public API for bench/peers.py (see that file for the
// protocol every driver speaks). Run with Node.js; GRAPHILE_WORKER_HOME names the folder whose
// node_modules holds the graphile-worker that bench/peers.py installed.
//
//   node graphile.mjs install --database-url URL
//   node graphile.mjs enqueue --database-url URL --jobs N --batch B [--warmup W] [--rate R]
//   node graphile.mjs work    --database-url URL [--record]
//
// The worker's settings are the ones Graphile Worker's own performance page runs its figures
// with (worker.graphile.org/docs/performance): 24 concurrent jobs, a pool of 25, a local queue
// of 500 jobs fetched at once, and completions and failures batched (delay 0). One instance:
// Node runs a task list on one thread, and the machine's cores are shared with the database.
// The logger drops info and debug lines (Graphile logs every completed job at info).

import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const home = process.env.GRAPHILE_WORKER_HOME;
if (!home) {
  console.error("GRAPHILE_WORKER_HOME is not set (bench/peers.py sets it)");
  process.exit(2);
}
const require = createRequire(path.join(home, "package.json"));
const { Logger, makeWorkerUtils, run } = require("graphile-worker");

const TASK = "noop";
const WORKER = {
  concurrentJobs: 24,
  maxPoolSize: 25,
  localQueue: { size: 500 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
};

// CLOCK_MONOTONIC in microseconds: the clock Python's time.monotonic_ns() reads, so a time
// taken here compares with one taken in another process.
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

const quiet = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`graphile-worker ${level}: ${message}`);
});

function parse(argv) {
  const [command, ...rest] = argv;
  const opts = { command, jobs: 0, batch: 1, warmup: 0, rate: 0, record: false };
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i];
    if (flag === "--record") opts.record = true;
    else if (flag === "--database-url") opts.url = rest[++i];
    else if (["--jobs", "--batch", "--warmup", "--rate"].includes(flag)) opts[flag.slice(2)] = Number(rest[++i]);
    else throw new Error(`unknown argument ${flag}`);
  }
  if (!opts.url) throw new Error("--database-url is required");
  return opts;
}

const sleepUntil = (us) => new Promise((resolve) => setTimeout(resolve, Math.max(0, (us - nowUs()) / 1000)));

async function install(opts) {
  const utils = await makeWorkerUtils({ connectionString: opts.url, logger: quiet });
  try {
    await utils.migrate();
  } finally {
    await utils.release();
  }
  return {};
}

async function enqueue(opts) {
  const utils = await makeWorkerUtils({ connectionString: opts.url, logger: quiet });
  const batchOf = (first, size) =>
    Array.from({ length: size }, (_, i) => ({ identifier: TASK, payload: { k: first + i } }));
  const send = (first, size) =>
    size === 1 ? utils.addJob(TASK, { k: first }) : utils.addJobs(batchOf(first, size));
  try {
    for (let w = 1; w <= opts.warmup; w++) await send(-w * opts.batch, opts.batch); // keys below 0: not measured
    const sent = [];
    const start = nowUs();
    for (let k = 0; k < opts.jobs; k += opts.batch) {
      if (opts.rate > 0) await sleepUntil(start + (k * 1e6) / opts.rate);
      await send(k, Math.min(opts.batch, opts.jobs - k));
      if (opts.rate > 0) sent.push([k, nowUs()]);
    }
    const seconds = (nowUs() - start) / 1e6;
    return opts.rate > 0 ? { jobs: opts.jobs, seconds, sent } : { jobs: opts.jobs, seconds };
  } finally {
    await utils.release();
  }
}

async function work(opts) {
  const starts = [];
  let handled = 0;
  const taskList = {
    [TASK]: async (payload) => {
      handled++;
      if (opts.record) starts.push([payload.k, nowUs()]);
    },
  };
  const lines = readline.createInterface({ input: process.stdin });
  const input = lines[Symbol.asyncIterator]();
  console.log("ready");
  const go = await input.next();
  if (go.done) return { handled, starts };
  const runner = await run({
    taskList,
    noHandleSignals: true,
    preset: { worker: { connectionString: opts.url, logger: quiet, ...WORKER } },
  });
  while (!(await input.next()).done); // stdin closes: stop
  await runner.stop();
  return opts.record ? { handled, starts } : { handled };
}

const opts = parse(process.argv.slice(2));
const commands = { install, enqueue, work };
if (!commands[opts.command]) {
  console.error(`unknown command ${opts.command}`);
  process.exit(2);
}
try {
  const out = await commands[opts.command](opts);
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
} catch (err) {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
}
