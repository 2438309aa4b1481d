/**
 * What the benches measure, loaded from the build in dist/ (what an installed sqltally runs: tsc's CommonJS) rather
 * than from these TypeScript sources through tsx. tsx and the esbuild bundles compile the sources differently, and
 * measurably: under callgrind the per-row call added 1920 instructions compiled by esbuild against 793 from dist/.
 * Types still come from the sources. Build first: `npm run build` (`npm run bench` does).
 */
import fs from 'node:fs';
import path from 'node:path';

/** The checkout whose dist/ is measured; a bench child bundled elsewhere is told it by its parent. */
const ROOT = process.env['SQLTALLY_BENCH_ROOT'] ?? path.join(__dirname, '..');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) newest = Math.max(newest, fs.statSync(full).mtimeMs);
  }
  return newest;
}

/** Newest source time per folder, walked once however many modules of the folder are loaded. */
const NEWEST = new Map<string, number>();

function load<T>(module: string): T {
  const file = path.join(ROOT, 'dist', `${module}.js`);
  const built = fs.existsSync(file) ? file : path.join(ROOT, 'dist', module, 'index.js');
  if (!fs.existsSync(built)) throw new Error(`bench: ${built} is missing: run \`npm run build\` first (the benches measure the build)`);
  // A build older than its folder's sources would measure code that is no longer there.
  const folder = path.join(ROOT, 'src', module.split('/')[0]!);
  if (!NEWEST.has(folder)) NEWEST.set(folder, newestSource(folder));
  if ((NEWEST.get(folder) ?? 0) > fs.statSync(built).mtimeMs) {
    throw new Error(`bench: dist/ is older than the sources under ${folder}: run \`npm run build\` first (the benches measure the build)`);
  }
  return require(built) as T;
}

export const { DriverRecorder } = load<typeof import('../src/driver/driver-layer')>('driver/driver-layer');
export const { wrapBetterSqlite3 } = load<typeof import('../src/driver/better-sqlite3')>('driver/better-sqlite3');
export const { wrapMysql2 } = load<typeof import('../src/driver/mysql2')>('driver/mysql2');
export const { wrapPg } = load<typeof import('../src/driver/pg')>('driver/pg');
export const { wrapPostgresJs } = load<typeof import('../src/driver/postgres-js')>('driver/postgres-js');
export const { countExpandedValues, markOf } = load<typeof import('../src/driver/counted')>('driver/counted');
export const { openCountedConnection, openRawConnection, runSql } = load<typeof import('../src/driver/open')>('driver/open');
export const { findStrategy, runStrategy, strategiesFor } = load<typeof import('../src/workload/strategies')>('workload/strategies');
export const { flatValues } = load<typeof import('../src/workload/strategies/shared')>('workload/strategies/shared');
export const { COLUMN_COUNT, makeRows } = load<typeof import('../src/workload/rows')>('workload/rows');
export const { DeferredWorkTracker } = load<typeof import('../src/capture/deferred-work')>('capture/deferred-work');
export const { createTableSql, dropTableSql, insertHead, placeholderRows, workloadTable } = load<typeof import('../src/workload/table')>('workload/table');
export const { startBackend } = load<typeof import('../src/backends/registry')>('backends/registry');
export const { CaptureSession } = load<typeof import('../src/capture/capture')>('capture/capture');
export const { createProbe } = load<typeof import('../src/server')>('server');
