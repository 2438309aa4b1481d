#!/usr/bin/env node
// Builds dist/ when it is missing or older than a source file: a checkout's `npm start` and `npm test` run the CLI
// from dist/, while a published package ships dist/ built by `prepack` and runs no script on install.
const { existsSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { execFileSync } = require('node:child_process');

const root = join(__dirname, '..');
const SOURCES = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
const BUILT = join(root, 'dist', 'cli', 'main.js');

function newest(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  return readdirSync(path).reduce((m, name) => Math.max(m, newest(join(path, name))), 0);
}

const built = existsSync(BUILT) && existsSync(join(root, 'dist', 'report', 'viewer', 'viewer.js')) ? statSync(BUILT).mtimeMs : 0;
const sources = Math.max(...SOURCES.map((s) => join(root, s)).filter(existsSync).map(newest));
if (built < sources) {
  console.error(built ? 'sqltally: sources changed since the last build: building dist/' : 'sqltally: building dist/ (first run)');
  execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
}
