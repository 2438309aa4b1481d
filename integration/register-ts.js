// @ts-check
// Plain JavaScript: loaded with `node --require` before anything can be transformed.
const fs = require('node:fs');
const path = require('node:path');
const { outputKey, transformTs } = require('./esbuild-transform');

/**
 * Lets a plain Node child of a test (`tsChild()`) require the project's TypeScript as the tests run it, cheaper per child
 * than tsx's loader thread; stacks show TypeScript lines (Node's source-map support, turned on below).
 */
process.setSourceMapsEnabled(true);

// Outputs kept by content, as Jest keeps its own, so a child loads files seen before without starting an esbuild
// service of its own. SQLTALLY_TS_CACHE moves it (its test uses a directory of its own).
const CACHE_DIR = process.env['SQLTALLY_TS_CACHE'] || path.join(__dirname, '..', 'node_modules', '.cache', 'sqltally-register-ts');

/** @param {string} source @param {string} filename */
function cachedTransform(source, filename) {
  const file = path.join(CACHE_DIR, `${outputKey(source, filename)}.js`);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    // Not there yet (or unreadable): transformed below.
  }
  const { code } = transformTs(source, filename, 'inline');
  try {
    fs.mkdirSync(CACHE_DIR, { recursive: true });
    // Written aside, then renamed: a child reading the same key meanwhile sees the whole file or none.
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, code);
    fs.renameSync(tmp, file);
  } catch {
    // A cache that cannot be written only costs the next child this transform again.
  }
  return code;
}

require.extensions['.ts'] = (/** @type {NodeJS.Module} */ module, /** @type {string} */ filename) => {
  const code = cachedTransform(fs.readFileSync(filename, 'utf8'), filename);
  /** @type {{ _compile(code: string, filename: string): void }} */ (/** @type {unknown} */ (module))._compile(code, filename);
};
