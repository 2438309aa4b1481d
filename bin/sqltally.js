#!/usr/bin/env node
'use strict';
// The compiled CLI; `npm ci` builds it through the `prepare` script.
require('../dist/cli/main.js').main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(err && err.stack ? err.stack : String(err)); process.exitCode = 2; },
);
