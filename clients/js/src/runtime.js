// What the client needs from its runtime beyond fetch and timers, read without importing
// `node:` modules at load time, so the package loads on Node, Deno and Bun alike.

/** An environment variable, or undefined where there is none or reading it is not allowed
 * (Deno without --allow-env throws). */
export function env(name) {
  try {
    const fromProcess = globalThis.process?.env?.[name];
    if (fromProcess !== undefined) return fromProcess;
  } catch {
    // Deno's process.env asks for permission and may refuse.
  }
  try {
    return globalThis.Deno?.env?.get(name);
  } catch {
    return undefined;
  }
}

export function pid() {
  const value = globalThis.process?.pid ?? globalThis.Deno?.pid;
  return Number.isInteger(value) ? value : undefined;
}

/** The host name, from node:os where the runtime has it (Node, Bun, Deno), else undefined.
 * Imported on demand: a static `node:` import would not load elsewhere. */
export async function hostname() {
  try {
    const os = await import("node:os");
    return os.hostname();
  } catch {
    try {
      return globalThis.Deno?.hostname?.();
    } catch {
      return undefined;
    }
  }
}

/** Calls `onSignal(name)` on SIGTERM and SIGINT; returns a function that removes the
 * handlers. A runtime without process signals (a browser) gets none. */
export function onTermination(onSignal) {
  const names = ["SIGTERM", "SIGINT"];
  const proc = globalThis.process;
  if (typeof proc?.on === "function" && typeof proc?.off === "function") {
    const listeners = names.map((name) => {
      const listener = () => onSignal(name);
      proc.on(name, listener);
      return [name, listener];
    });
    return () => listeners.forEach(([name, listener]) => proc.off(name, listener));
  }
  const deno = globalThis.Deno;
  if (typeof deno?.addSignalListener === "function") {
    const listeners = names.map((name) => {
      const listener = () => onSignal(name);
      deno.addSignalListener(name, listener);
      return [name, listener];
    });
    return () => listeners.forEach(([name, listener]) => deno.removeSignalListener(name, listener));
  }
  return () => {};
}

export const SIGNAL_NUMBERS = { SIGINT: 2, SIGTERM: 15 };

/** Ends the process at once with `status` (a second signal), where the runtime can. */
export function exitNow(status) {
  if (typeof globalThis.process?.exit === "function") globalThis.process.exit(status);
  else globalThis.Deno?.exit?.(status);
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}
