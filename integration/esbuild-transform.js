// @ts-check
// Plain JavaScript: Jest loads a transformer with Node's own require, before any transform runs.
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { transformSync } = require('esbuild');
const { version: ESBUILD_VERSION } = require('esbuild/package.json');

/**
 * TypeScript for Jest, stripped by esbuild rather than compiled per worker (`npm run typecheck` checks types): CommonJS
 * as tsc emits it, with source maps for TypeScript lines. The examples stay on ts-jest, as most users' suites run.
 */

/** The project's compiler options (plain JSON): esbuild reads what changes its output from them (class fields). */
const TSCONFIG = fs.readFileSync(path.join(__dirname, '..', 'tsconfig.json'), 'utf8');
const COMPILER_OPTIONS = JSON.parse(TSCONFIG).compilerOptions;
const TSCONFIG_RAW = JSON.stringify({ compilerOptions: COMPILER_OPTIONS });
const TARGET = String(COMPILER_OPTIONS.target).toLowerCase();

/** What makes every cached output stale when it changes: this file, esbuild's version, the compiler options. */
const IDENTITY = createHash('sha256').update(fs.readFileSync(__filename)).update(ESBUILD_VERSION).update(TSCONFIG).digest('hex');

/**
 * One TypeScript file as CommonJS, its source map apart for Jest or inline for Node (integration/register-ts.js).
 * @param {string} source
 * @param {string} filename
 * @param {'external' | 'inline'} sourcemap
 */
function transformTs(source, filename, sourcemap) {
  const out = transformSync(source, {
    loader: filename.endsWith('.tsx') ? 'tsx' : 'ts',
    format: 'cjs',
    target: TARGET,
    platform: 'node',
    sourcemap,
    sourcefile: filename,
    tsconfigRaw: TSCONFIG_RAW,
    // `import()` becomes a `require()` in a promise, as in tsc's CommonJS output: a real dynamic import needs
    // --experimental-vm-modules under Jest, and Node's ESM loader, which cannot read TypeScript, in a child.
    supported: { 'dynamic-import': false },
  });
  return { ...out, code: out.code.replace(TO_COMMONJS, DIRECT_EXPORTS) };
}

/**
 * esbuild's `__toCommonJS` getters read through a computed key V8 does not inline, which tsc's output (what users run)
 * does not pay: the module's own object is handed over instead, same `__esModule` mark, same line count for the map.
 */
const TO_COMMONJS = 'var __toCommonJS = (mod) => __copyProps(__defProp({}, "__esModule", { value: true }), mod);';
const DIRECT_EXPORTS = 'var __toCommonJS = (mod) => __defProp(mod, "__esModule", { value: true });';

/**
 * The cache key of one file's output: {@link IDENTITY}, the file's name and source and, for Jest, the configuration.
 * @param {string} source
 * @param {string} filename
 * @param {string} [configString]
 */
function outputKey(source, filename, configString = '') {
  return createHash('sha256').update(IDENTITY).update('\0').update(filename).update('\0').update(source).update('\0').update(configString).digest('hex');
}

/** @type {import('@jest/transform').SyncTransformer & { transformTs: typeof transformTs, outputKey: typeof outputKey }} */
module.exports = {
  canInstrument: false,
  getCacheKey(source, filename, options) {
    return outputKey(source, filename, options.configString);
  },
  process(source, filename) {
    const out = transformTs(source, filename, 'external');
    return { code: out.code, map: out.map };
  },
  transformTs,
  outputKey,
};
