// @ts-check
// Plain JavaScript: loaded with `node --require` before anything can be transformed.
const fs = require('node:fs');
const { transformTs } = require('../jest/esbuild-transform');

/**
 * Lets a plain Node child of a test (`tsChild()` in integration/ts-child.ts) require the project's TypeScript, with
 * the same esbuild output the tests themselves run. tsx did this before, and its ESM hooks run on a loader thread of
 * their own: a `sqltally backends` child took 0.36 s of CPU through tsx and 0.20 s through this hook, and the leak
 * and fault tests start some 35 such children a run. Stacks show TypeScript lines (Node's source-map support, turned on below).
 */
process.setSourceMapsEnabled(true);
require.extensions['.ts'] = (/** @type {NodeJS.Module} */ module, /** @type {string} */ filename) => {
  const { code } = transformTs(fs.readFileSync(filename, 'utf8'), filename, 'inline');
  /** @type {{ _compile(code: string, filename: string): void }} */ (/** @type {unknown} */ (module))._compile(code, filename);
};
