/**
 * Instruction counts of the driver-layer proxy per call, which barely move with the machine's load (wall and CPU
 * times on a shared machine do).
 *
 *   npx tsx bench/driver-cpu.ts [--scenarios select,per-row,bind] [--calls 20000]
 *
 * Each scenario runs in a child process under `valgrind --tool=callgrind` (node with V8's `--predictable`, so the
 * compiler and the garbage collector run on the main thread at deterministic points), bundled with esbuild so that
 * tsx's loader stays out of the count; the sqltally code it runs is the build in dist/ (bench/shipped.ts), loaded at
 * run time: `npm run build` first. Per side (raw better-sqlite3, counted into a `DriverRecorder` with a window
 * open) two runs with the same warm-up and R and 2R measured calls: (I(2R) - I(R)) / R is the instructions of one
 * warm call; counted minus raw is what the proxy adds. Scenarios, on in-memory SQLite:
 * - `select`: a prepared `SELECT 1`, `get()`, one window for all calls (the proxy cost per call);
 * - `per-row`: `run()` of a 6-value INSERT inside `db.transaction()`, 5000 calls per window (the per-row path);
 * - `per-row-spread`: the same rows as arrays, `run(...row)`: how the per-row-tx strategy (and most callers with a
 *   row in hand) calls it, which V8 compiles differently from six arguments written out;
 * - `prepare-run`: `prepare` then `run` of a 1-value INSERT each call, one window for all (knex on SQLite prepares
 *   before every run): what wrapping a new statement costs;
 * - `window`: a whole per-row-tx window with two rows (`begin()`, `prepare` of a new string, `db.transaction()` of two
 *   `run()`s, `end()`), a window each: the cost a window carries whatever its number of rows (three new texts, each
 *   with its caller captured; the statement and transaction wrapped; the window's close);
 * - `bind`: `prepare` + `run` of a 5000-row multi-row INSERT (30000 values, 100 KB of SQL), a window each, on a
 *   new string each time (per statement rather than per call; the window's close is included);
 * - `bind-open`: the same with each window opened and never closed (the next `begin()` drops it unread): what the
 *   call itself adds, without the close's fingerprint of the 100 KB text, which is paid once per window;
 * - `pg-call`, `mysql2-call`: an awaited 2-value INSERT of one text on a stand-in client that settles at once, one
 *   window for all: a network driver's per-call path (the promise chain, the shape, the window's count);
 * - `mysql2-callback-call`: the same on mysql2's callback API (knex and kysely call it so), the stand-in calling
 *   back on the next microtask and each call awaited through a promise of the bench's own on both sides;
 * - `mysql2-prepared-call`: a statement prepared once on the promise API, then an awaited `execute(values)` per call.
 * - `mysql2-values`: one awaited `VALUES ?` call of 5000 rows x 6 on the promise API;
 * - `postgres-js-call`: an awaited 2-value tagged INSERT run by a real postgres.js over an in-process socket that
 *   answers the protocol (`PgWireStandInSocket`): the driver's whole own work on both sides, no server's timing.
 * Not here: a postgres.js query built and never run. Its cost is mostly garbage, and with `--predictable` the
 * collector's work per build moved from +12.8k to +34.4k instructions for the same code when this child became
 * async; `driver-overhead.ts --sections own-network` measures it in CPU time instead, collector threads included.
 * Takes a few minutes.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bundleChild } from './callgrind';

const SCENARIOS = [
  'select',
  'per-row',
  'per-row-spread',
  'prepare-run',
  'window',
  'bind',
  'bind-open',
  'pg-call',
  'mysql2-call',
  'mysql2-callback-call',
  'mysql2-prepared-call',
  'mysql2-values',
  'postgres-js-call',
] as const;
type Scenario = (typeof SCENARIOS)[number];
const NODE_FLAGS = ['--predictable'];
/** Measured calls per scenario for R (the second run makes 2R). */
const DEFAULT_CALLS: Record<Scenario, number> = {
  select: 20_000,
  'per-row': 40_000,
  'per-row-spread': 40_000,
  'prepare-run': 20_000,
  window: 500,
  bind: 20,
  'bind-open': 20,
  'pg-call': 20_000,
  'mysql2-call': 20_000,
  'mysql2-callback-call': 20_000,
  'mysql2-prepared-call': 20_000,
  'mysql2-values': 200,
  'postgres-js-call': 10_000,
};
// The per-row side's first ten or so windows of 5000 still carry TurboFan compilations and a major GC, at points that
// move between runs: measured from window 4 the figure moved between +1455 and +3168 instructions a call over three
// runs of the same code; from window 12 on, windows 12 to 20 repeat to 0.01% (two runs each side, 2026-12-01).
const WARMUP: Record<Scenario, number> = {
  select: 20_000,
  'per-row': 60_000,
  'per-row-spread': 60_000,
  'prepare-run': 20_000,
  window: 1_000,
  bind: 5,
  'bind-open': 5,
  'pg-call': 20_000,
  'mysql2-call': 20_000,
  'mysql2-callback-call': 20_000,
  'mysql2-prepared-call': 20_000,
  'mysql2-values': 50,
  'postgres-js-call': 10_000,
};

/** What one measured unit of each scenario is, as printed. */
const UNIT: Record<Scenario, string> = {
  select: 'call',
  'per-row': 'call',
  'per-row-spread': 'call',
  'prepare-run': 'prepare + run',
  window: 'window',
  bind: 'statement (prepare + run + window)',
  'bind-open': 'statement (prepare + run, window opened)',
  'pg-call': 'awaited call',
  'mysql2-call': 'awaited call',
  'mysql2-callback-call': 'call (callback API)',
  'mysql2-prepared-call': 'awaited execute of a prepared statement',
  'mysql2-values': 'awaited `VALUES ?` call of 5000 rows x 6 (30000 values)',
  'postgres-js-call': 'awaited tagged query run by postgres.js (a socket answering the protocol in-process)',
};

function instructions(bundle: string, scenario: Scenario, side: string, warmup: number, measured: number): number {
  const result = spawnSync(
    'valgrind',
    ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, ...NODE_FLAGS, bundle, scenario, side, String(warmup), String(measured)],
    {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: {
        ...process.env,
        NODE_PATH: join(__dirname, '..', 'node_modules'),
        SQLTALLY_BENCH_ROOT: process.env['SQLTALLY_BENCH_ROOT'] ?? join(__dirname, '..'),
      },
    },
  );
  if (result.status !== 0) throw new Error(`valgrind exited ${result.status ?? result.signal}: ${result.stderr.slice(-2000)}`);
  const match = /Collected : (\d+)/.exec(result.stderr);
  if (!match) throw new Error(`no instruction count in valgrind's output: ${result.stderr.slice(-2000)}`);
  return Number(match[1]);
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { scenarios: { type: 'string', default: SCENARIOS.join(',') }, calls: { type: 'string' } },
  });
  const scenarios = values.scenarios.split(',').map((s) => s.trim()) as Scenario[];
  for (const s of scenarios) {
    if (!SCENARIOS.includes(s)) {
      console.error(`driver-cpu: unknown scenario "${s}"; known: ${SCENARIOS.join(', ')}`);
      return 2;
    }
  }
  const tmp = mkdtempSync(join(os.tmpdir(), 'driver-cpu-'));
  try {
    const bundle = bundleChild(join(__dirname, 'driver-cpu-child.ts'), tmp, 'driver-cpu-child.js');
    for (const scenario of scenarios) {
      const r = values.calls ? Number(values.calls) : DEFAULT_CALLS[scenario];
      const per: Record<string, [number, number]> = {};
      for (const side of ['raw', 'counted']) {
        const once = instructions(bundle, scenario, side, WARMUP[scenario], r);
        const twice = instructions(bundle, scenario, side, WARMUP[scenario], 2 * r);
        // Two estimates would need a third run; one difference of R units, with the rounding of both runs in it.
        per[side] = [(twice - once) / r, once];
      }
      const unit = UNIT[scenario];
      const added = per.counted![0] - per.raw![0];
      console.log(
        `${scenario.padEnd(14)} instructions per ${unit}: raw ${per.raw![0].toFixed(0)}, counted ${per.counted![0].toFixed(0)}, ` +
          `added ${added.toFixed(0)} (R = ${r}, warm-up ${WARMUP[scenario]})`,
      );
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
