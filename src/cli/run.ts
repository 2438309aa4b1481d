import { join } from 'node:path';
import { SqltallyError } from '../shared/errors';
import { parseBackendId } from '../backends/registry';
import { describeSweep, sweepStalePrivateDirs } from '../backends/stale';
import { BACKEND_NAMES } from '../backends/types';
import { STRATEGY_NAMES } from '../workload/strategies';
import { checkOutputDir } from '../report/atomic';
import { renderTable } from '../report/table';
import { writeReport } from '../report/output';
import { toJson } from '../report/schema';
import { runMatrix } from '../run/matrix';
import { summaryLine } from '../run/summary';
import {
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_HOT_ROWS,
  DEFAULT_REPEATS,
  MAX_CELL_TIMEOUT_MS,
  MIN_CELL_TIMEOUT_MS,
  DEFAULT_ROWS,
  DEFAULT_WARMUPS,
  MAX_ROWS_PER_CELL,
  MAX_ROWS_PER_STRATEGY,
  PLAN_FLAGS,
  RunPlanSchema,
  planProblems,
  type RunPlan,
} from '../run/plan';
import { UsageError, argsCheckedOnly, parseFlags, usageExit } from './usage';
import type { Command } from './main';
import { interruptible } from './interrupt';

const HELP = `usage: sqltally run [options]

Runs the insert-many matrix on every backend reachable here (SQLite always) and writes report.json, events.json
(the per-call driver events of passing cells), report.md and bench.json.

options:
  --backends a,b        backend ids (sqlite, mariadb, mariadb@11.8, postgres@16, mysql), or "all" for every installed
                        version; default: each backend once (those not reachable here are skipped with the reason)
  --strategies a,b      strategy names (see README); default: every strategy of each backend
  --rows 100,5000       row counts; default ${DEFAULT_ROWS.join(',')}; at most ${MAX_ROWS_PER_CELL} per cell, and at most
                        ${MAX_ROWS_PER_STRATEGY} rows per strategy over the run (rows x (warm-ups + repeats), hot points included)
  --hot-rows 5000       row counts that also get a hot repeat on a warm connection; default ${DEFAULT_HOT_ROWS.join(',')}; "" for none
  --repeats N           measured repeats per cell (>= 5); default ${DEFAULT_REPEATS}
  --warmups N           warm-up runs per cell, kept apart; default ${DEFAULT_WARMUPS}
  --cell-timeout-ms N   give up on a window (warm-up or repeat, with its table reset and row check) after N ms:
                        the cell is kept as incomplete with the rows that committed after giving up, the run fails;
                        at least ${MIN_CELL_TIMEOUT_MS}, at most ${MAX_CELL_TIMEOUT_MS}; default ${DEFAULT_CELL_TIMEOUT_MS}
  --driver-releases W   all: every installed release of a driver (npm aliases such as mariadb-3.3) side by side;
                        default: the pinned release only; default all
  --out DIR             output directory; default sqltally-report/<timestamp>
  --force               write into an existing non-empty output directory
  --json                print the report as JSON on stdout (progress goes to stderr)
  --no-write            do not write files (with --json)

exit: 0 the run finished (cells may still be "report" or "incomplete": the summary line counts them, and
      sqltally gate fails on incomplete ones); 1 the run failed or measured nothing; 2 bad options;
      130 (143) stopped by Ctrl-C (SIGTERM): the failed report of the cells done so far is written.
`;

/** `--flag a,b`: the items, trimmed; an option given but naming nothing is an error, never "the default". */
function list(flag: string, value: string | undefined): string[] {
  if (value === undefined) return [];
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new UsageError(`${flag} is empty (got "${value}"): name at least one, or leave ${flag} out for the default`);
  return items;
}

// Digits, optionally in exponent form: "1e6" is a row count people type; "0x10", "1.5" and "" are not.
const WHOLE_NUMBER = /^(?:\d+|\d+(?:\.\d+)?e\+?\d+)$/i;

function whole(flag: string, text: string, what: string): number {
  const n = WHOLE_NUMBER.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`${flag} takes ${what}, got "${text}"`);
  return n;
}

function numbers(flag: string, value: string | undefined, fallback: readonly number[], emptyMeansNone = false): number[] {
  if (value === undefined) return [...fallback];
  if (emptyMeansNone && value.trim() === '') return [];
  return list(flag, value).map((s) => {
    const n = whole(flag, s, 'positive whole numbers such as 100,5000');
    if (n <= 0) throw new UsageError(`${flag} takes positive whole numbers such as 100,5000, got "${s}"`);
    return n;
  });
}

function integer(flag: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = whole(flag, value.trim(), `a whole number of at least ${min}`);
  if (n < min) throw new UsageError(`${flag} takes a whole number of at least ${min}, got "${value}"`);
  return n;
}

function releases(value: string | undefined): 'all' | 'default' {
  if (value === 'all' || value === 'default') return value;
  throw new UsageError(`--driver-releases takes "all" or "default", got "${value}"`);
}

/** Every flag checked and turned into a plan, or a UsageError naming the first bad flag and its value. */
export function planFromFlags(v: ReturnType<typeof parseRunFlags>['values']): RunPlan {
  const plan: RunPlan = {
    backends: list('--backends', v.backends),
    strategies: list('--strategies', v.strategies),
    rows: numbers('--rows', v.rows, DEFAULT_ROWS),
    hotRows: numbers('--hot-rows', v['hot-rows'], DEFAULT_HOT_ROWS, true),
    repeats: integer('--repeats', v.repeats, DEFAULT_REPEATS, DEFAULT_REPEATS),
    warmups: integer('--warmups', v.warmups, DEFAULT_WARMUPS, 0),
    driverReleases: releases(v['driver-releases']),
    cellTimeoutMs: integer('--cell-timeout-ms', v['cell-timeout-ms'], DEFAULT_CELL_TIMEOUT_MS, MIN_CELL_TIMEOUT_MS),
  };
  for (const id of plan.backends) {
    if (id === 'all') continue;
    try {
      parseBackendId(id);
    } catch {
      throw new UsageError(
        `--backends "${v.backends}": unknown backend "${id}"; use ${BACKEND_NAMES.join(', ')} (optionally with a version: mariadb@10.11, postgres@15), or all`,
      );
    }
  }
  for (const name of plan.strategies) {
    if (!(STRATEGY_NAMES as readonly string[]).includes(name))
      throw new UsageError(`--strategies "${v.strategies}": unknown strategy "${name}"; known: ${STRATEGY_NAMES.join(', ')}`);
  }
  const parsed = RunPlanSchema.parse(plan);
  const [problem] = planProblems(parsed);
  if (problem) {
    const given = v[PLAN_FLAG_OPTION[problem.field]];
    throw new UsageError(`${PLAN_FLAGS[problem.field]}${given !== undefined ? ` "${given}"` : ''}: ${problem.message}`);
  }
  return plan;
}

/** Plan field -> the parseArgs option that carries it. */
const PLAN_FLAG_OPTION = {
  backends: 'backends',
  strategies: 'strategies',
  rows: 'rows',
  hotRows: 'hot-rows',
  warmups: 'warmups',
  repeats: 'repeats',
  driverReleases: 'driver-releases',
  cellTimeoutMs: 'cell-timeout-ms',
} as const;

function parseRunFlags(argv: string[]) {
  return parseFlags(argv, {
    backends: { type: 'string' },
    strategies: { type: 'string' },
    rows: { type: 'string' },
    'hot-rows': { type: 'string' },
    repeats: { type: 'string' },
    warmups: { type: 'string' },
    'driver-releases': { type: 'string', default: 'all' },
    'cell-timeout-ms': { type: 'string' },
    out: { type: 'string' },
    force: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  });
}

function defaultOutDir(): string {
  return join('sqltally-report', new Date().toISOString().replace(/[:.]/g, '-'));
}

export const command: Command = {
  summary: 'run the count matrix and write a report',
  async run(argv) {
    let v: ReturnType<typeof parseRunFlags>['values'];
    let plan: RunPlan;
    try {
      v = parseRunFlags(argv).values;
      if (v.help) {
        console.log(HELP);
        return 0;
      }
      plan = planFromFlags(v);
      if (v.out !== undefined && v.out.trim() === '')
        throw new UsageError('--out is empty: name a directory, or leave --out out for sqltally-report/<timestamp>');
      if (v.out !== undefined && v['no-write']) throw new UsageError(`--out "${v.out}" and --no-write contradict each other: drop one`);
    } catch (err) {
      return usageExit('run', err);
    }
    if (argsCheckedOnly('run')) return 0;
    const write = !v['no-write'];
    const out = v.out ?? defaultOutDir();
    // Refuse a bad output directory before minutes of work, not after; like a bad flag, nothing has started.
    if (write) {
      try {
        await checkOutputDir(out, { force: v.force });
      } catch (err) {
        if (!(err instanceof SqltallyError)) throw err;
        console.error(`sqltally run: --out: ${err.message}`);
        return 2;
      }
    }

    const progress = (line: string) => process.stderr.write(`sqltally: ${line}\n`);
    // A run killed by SIGKILL left its data directories (and perhaps a server); this run is the "next run".
    for (const line of describeSweep(await sweepStalePrivateDirs(process.env))) progress(line);
    // Ctrl-C: the window in flight gives up (its servers kept to count what it committed), nothing more starts, the
    // failed report is written, then the servers stop. A second Ctrl-C ends the process by the signal (live.ts stops them).
    const interrupt = interruptible(progress, {
      first: (signal) => `stopping after the window in flight; the report keeps the cells done so far (${signal} again to stop at once)`,
      keepBackends: true,
    });
    let report: Awaited<ReturnType<typeof runMatrix>>;
    try {
      report = await runMatrix(plan, { progress, signal: interrupt.signal });
    } finally {
      interrupt.release();
    }
    let unwritten = false;
    if (write) {
      try {
        await writeReport(out, report, { force: v.force });
        progress(`wrote ${join(out, 'report.json')}, events.json, report.md, report.html, reconciliation.md, bench.json and the count charts`);
      } catch (err) {
        // The directory is left as it was (writeReport renders everything first and renames into place); the report
        // still reaches a person on stdout rather than being lost with the minutes it took.
        if (!(err instanceof SqltallyError)) throw err;
        progress(`could not write the report, nothing was written to ${out}: ${err.message}`);
        if (!v.json) process.stdout.write(`${toJson(report)}\n`);
        unwritten = true;
      }
    }
    if (v.json) process.stdout.write(`${toJson(report)}\n`);
    else console.log(renderTable(report));
    if (report.status === 'failed') progress(`run FAILED: ${report.failure?.message ?? 'unknown failure'}`);
    progress(summaryLine(report));
    // 128 + the signal's number, as a shell reports a process the signal ended.
    if (interrupt.signal.aborted) return interrupt.signal.reason === 'SIGTERM' ? 143 : 130;
    return report.status === 'failed' || unwritten ? 1 : 0;
  },
};
