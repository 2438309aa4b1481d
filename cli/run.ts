import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SqltallyError } from '../containers/errors';
import { checkOutputDir } from '../reports/atomic';
import { renderTable } from '../reports/table';
import { writeReport } from '../reports/output';
import { toJson } from '../reports/schema';
import { DEFAULT_HOT_ROWS, DEFAULT_REPEATS, DEFAULT_ROWS, DEFAULT_WARMUPS, runMatrix, type RunPlan } from '../run/matrix';
import type { Command } from './main';

const HELP = `usage: sqltally run [options]

Runs the insert-many matrix on every backend reachable here (SQLite always) and writes report.json, report.md and
bench.json.

options:
  --backends a,b        backend ids (sqlite, mariadb, mariadb@11.8, postgres@16, mysql), or "all" for every installed
                        version; default: each backend once (those not reachable here are skipped with the reason)
  --strategies a,b      strategy names (see README); default: every strategy of each backend
  --rows 100,5000       row counts; default ${DEFAULT_ROWS.join(',')}
  --hot-rows 5000       row counts that also get a hot repeat on a warm connection; default ${DEFAULT_HOT_ROWS.join(',')}; "" for none
  --repeats N           measured repeats per cell (>= 5); default ${DEFAULT_REPEATS}
  --warmups N           warm-up runs per cell, kept apart; default ${DEFAULT_WARMUPS}
  --driver-releases W   all: every installed release of a driver (npm aliases such as mariadb-3.3) side by side;
                        default: the pinned release only; default all
  --out DIR             output directory; default sqltally-report/<timestamp>
  --force               write into an existing non-empty output directory
  --json                print the report as JSON on stdout (progress goes to stderr)
  --no-write            do not write files (with --json)
`;

function list(value: string | undefined): string[] {
  return value === undefined ? [] : value.split(',').map((s) => s.trim()).filter(Boolean);
}

function numbers(flag: string, value: string | undefined, fallback: readonly number[]): number[] {
  if (value === undefined) return [...fallback];
  return list(value).map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n <= 0) {
      throw new SqltallyError(`${flag} takes positive integers, got "${s}"`, { phase: 'config' });
    }
    return n;
  });
}

function integer(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new SqltallyError(`${flag} takes an integer, got "${value}"`, { phase: 'config' });
  return n;
}

function releases(value: string | undefined): 'all' | 'default' {
  if (value === 'all' || value === 'default') return value;
  throw new SqltallyError(`--driver-releases takes "all" or "default", got "${value}"`, { phase: 'config' });
}

function defaultOutDir(): string {
  return join('sqltally-report', new Date().toISOString().replace(/[:.]/g, '-'));
}

export const command: Command = {
  summary: 'run the count matrix and write a report',
  async run(argv) {
    let args;
    try {
      args = parseArgs({
        args: argv,
        options: {
          backends: { type: 'string' },
          strategies: { type: 'string' },
          rows: { type: 'string' },
          'hot-rows': { type: 'string' },
          repeats: { type: 'string' },
          warmups: { type: 'string' },
          'driver-releases': { type: 'string', default: 'all' },
          out: { type: 'string' },
          force: { type: 'boolean', default: false },
          json: { type: 'boolean', default: false },
          'no-write': { type: 'boolean', default: false },
          help: { type: 'boolean', short: 'h', default: false },
        },
        allowPositionals: false,
      });
    } catch (err) {
      console.error(`sqltally run: ${(err as Error).message}\n\n${HELP}`);
      return 2;
    }
    const v = args.values;
    if (v.help) {
      console.log(HELP);
      return 0;
    }
    const plan: RunPlan = {
      backends: list(v.backends),
      strategies: list(v.strategies),
      rows: numbers('--rows', v.rows, DEFAULT_ROWS),
      hotRows: numbers('--hot-rows', v['hot-rows'], DEFAULT_HOT_ROWS),
      repeats: integer('--repeats', v.repeats, DEFAULT_REPEATS),
      warmups: integer('--warmups', v.warmups, DEFAULT_WARMUPS),
      driverReleases: releases(v['driver-releases']),
    };
    if (plan.repeats < DEFAULT_REPEATS) {
      throw new SqltallyError(`--repeats must be at least ${DEFAULT_REPEATS}, got ${plan.repeats}`, {
        phase: 'config',
        hint: 'percentiles over fewer samples mean nothing',
      });
    }
    const write = !v['no-write'];
    const out = v.out ?? defaultOutDir();
    // Refuse a bad output directory before minutes of work, not after.
    if (write) await checkOutputDir(out, { force: v.force });

    const progress = (line: string) => process.stderr.write(`sqltally: ${line}\n`);
    const report = await runMatrix(plan, { progress });
    if (write) {
      await writeReport(out, report, { force: v.force });
      progress(`wrote ${join(out, 'report.json')}, report.md, bench.json`);
    }
    if (v.json) process.stdout.write(`${toJson(report)}\n`);
    else console.log(renderTable(report));
    if (report.status === 'failed') {
      progress(`run FAILED: ${report.failure?.message ?? 'unknown failure'}`);
      return 1;
    }
    return 0;
  },
};
