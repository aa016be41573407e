// What the live tests share: the service under test (JOBQ_URL, JOBQ_TOKEN) and a way to
// wait for a condition instead of for the clock.
import { randomBytes } from "node:crypto";

import { Client } from "../src/index.js";

export const URL_ = process.env.JOBQ_URL;
export const TOKEN = process.env.JOBQ_TOKEN || undefined;
// node --test runs the files without a service too (the type and staleness checks); the
// live tests say what they need instead of failing on a missing URL.
export const skipLive = URL_ ? false : "set JOBQ_URL to a running jobq service";

export function client(options = {}) {
  return new Client({ url: URL_, token: TOKEN, ...options });
}

/** A queue name no other test uses. */
export function freshQueue(label = "js") {
  return `${label}-${randomBytes(4).toString("hex")}`;
}

/** Calls `check` until it returns something truthy, and returns that; fails naming `what`. */
export async function eventually(check, { timeoutMs = 20_000, what = "the condition", pollMs = 20 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await check();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms: ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** A logger that keeps the worker's lines, for assertions and for a failure's message. */
export function recordingLogger() {
  const lines = [];
  const keep = (level) => (message) => lines.push(`${level} ${message}`);
  return { lines, debug: keep("debug"), info: keep("info"), warn: keep("warn"), error: keep("error") };
}
