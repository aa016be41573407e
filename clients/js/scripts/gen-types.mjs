// Writes src/openapi.d.ts from the repository's openapi/openapi.json (`npm run gen`).
// test/types-current.test.mjs renders the same text and compares, so a stale file fails.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

import openapiTS, { astToString } from "openapi-typescript";

export const SPEC = new URL("../../../openapi/openapi.json", import.meta.url);
export const TARGET = new URL("../src/openapi.d.ts", import.meta.url);

const HEADER = `/**
 * The jobq HTTP API's schemas, generated from openapi/openapi.json by \`npm run gen\`
 * (openapi-typescript). Do not edit: change the service, regenerate the document, then run
 * \`npm run gen\`; test/types-current.test.mjs fails while this file is stale.
 */

`;

export async function render() {
  const spec = JSON.parse(await readFile(SPEC, "utf8"));
  // defaultNonNullable false: a field with a default that is not required stays optional, as
  // the request bodies (JobCreate: priority, queue ...) need.
  const ast = await openapiTS(spec, { alphabetize: false, defaultNonNullable: false });
  return HEADER + astToString(ast);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await writeFile(TARGET, await render());
  console.log(`wrote ${fileURLToPath(TARGET)}`);
}
