/**
 * The Jest side of a bench: a Jest started on one `*.bench.ts` file (never matched by `npm test`'s projects), which
 * loads the build, the drivers and the measuring code through Jest's module registry into its vm context, as a user's
 * test suite loads an installed sqltally, and writes its figures as JSON to the file named in `SQLTALLY_BENCH_OUT`.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(__dirname, '..');

/** Runs `benchFile` (relative to the checkout) in a Jest of its own with `env` added; returns what it wrote. */
export function runJestSide(benchFile: string, env: Record<string, string>): unknown {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-bench-jest-'));
  const out = path.join(dir, 'figures.json');
  try {
    const config = {
      rootDir: ROOT,
      testEnvironment: 'node',
      testMatch: [`<rootDir>/${benchFile}`],
      transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: path.join(ROOT, 'tsconfig.json') }] },
    };
    const jest = spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), '--config', JSON.stringify(config), '--runInBand'], {
      cwd: ROOT,
      env: { ...process.env, ...env, SQLTALLY_BENCH_OUT: out },
      encoding: 'utf8',
    });
    if (jest.status !== 0 || !fs.existsSync(out)) throw new Error(`the Jest side failed (${jest.status ?? jest.signal}):\n${jest.stdout}\n${jest.stderr}`);
    return JSON.parse(fs.readFileSync(out, 'utf8')) as unknown;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
