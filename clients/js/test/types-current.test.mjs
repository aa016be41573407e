// src/openapi.d.ts must be what `npm run gen` makes of openapi/openapi.json today: a change
// to the API without `npm run gen` fails here. And the declarations, with the README's uses
// of them (test/types.ts), must type-check.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

import { TARGET, render } from "../scripts/gen-types.mjs";

test("src/openapi.d.ts is current with openapi/openapi.json (else run `npm run gen`)", async () => {
  const expected = await render();
  const actual = await readFile(TARGET, "utf8");
  assert.ok(actual === expected, "src/openapi.d.ts is stale: run `npm run gen` in clients/js and commit it");
});

test("the declarations type-check (tsc -p tsconfig.json)", async () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const cwd = fileURLToPath(new URL("..", import.meta.url));
  const run = await promisify(execFile)(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd }).catch((e) => e);
  assert.equal(run.code ?? 0, 0, `${run.stdout}${run.stderr}`);
});

test("every export of src/index.js is declared in src/index.d.ts", async () => {
  const exported = Object.keys(await import("../src/index.js"));
  const declarations = await readFile(new URL("../src/index.d.ts", import.meta.url), "utf8");
  const missing = exported.filter((name) => !new RegExp(`export declare (class|const|function) ${name}\\b`).test(declarations));
  assert.deepEqual(missing, []);
});

test("VERSION (sent in the User-Agent) is package.json's version", async () => {
  const { VERSION } = await import("../src/index.js");
  const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(VERSION, pkg.version);
});
