#!/usr/bin/env node
'use strict';
// The compiled CLI: a published package ships dist/; a checkout builds it with `npm ci` (the `prepare` script).
let cli;
try {
  cli = require('../dist/cli/main.js');
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes('dist/cli/main.js')) {
    console.error('sqltally: the CLI is not built (dist/cli/main.js is missing): run `npm run build` in this checkout');
    process.exit(2);
  }
  throw err;
}
cli.main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(err && err.stack ? err.stack : String(err)); process.exitCode = 2; },
);
