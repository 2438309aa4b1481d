import { z } from 'zod';
import { SqltallyError } from '../shared/errors';
import { MIN_MEASURED_REPEATS } from '../report/timings';
import { formatZodError } from '../report/schema';
import type { Resolution } from '../backends/types';

/** The curve every backend runs unless told otherwise. */
export const DEFAULT_ROWS = [100, 500, 1000, 2500, 5000, 10000] as const;
export const DEFAULT_HOT_ROWS = [5000] as const;
export const DEFAULT_WARMUPS = 1;
export const DEFAULT_REPEATS = MIN_MEASURED_REPEATS;

/**
 * How long one window of a cell (a warm-up or a repeat, its table reset and its row check included) may take before
 * the run gives up on it. Generous on purpose: at the 500 000-row maximum a per-row strategy on two busy cores takes
 * minutes. A server that stops answering (frozen, partitioned) then fails the run with a report instead of hanging it.
 */
export const DEFAULT_CELL_TIMEOUT_MS = 600_000;
/** The shortest cell timeout accepted: below it even a 100-row cell on a warm server would give up. */
export const MIN_CELL_TIMEOUT_MS = 10;
/** The longest: setTimeout cannot wait longer than 2^31 - 1 ms (about 24.8 days), and a day is plenty. */
export const MAX_CELL_TIMEOUT_MS = 86_400_000;

/**
 * Most rows one cell may insert. Before the clock starts a cell builds every row, its bound values and, for the
 * raw-SQL strategies, the whole statement text; while it runs, every driver call of every window is kept (the
 * per-row strategies make one per row): the limit is what fits a 2 GB V8 heap (docs/main-job.md, *Limits*).
 */
export const MAX_ROWS_PER_CELL = 500_000;

/**
 * Most rows one strategy may insert over a run: rows x (warm-ups + repeats), summed over `rows` and `hotRows` (a
 * hot point runs one window more). A strategy's capture session keeps every driver call it recorded until the
 * strategy is done, so this, not one cell, is what must fit in memory.
 */
export const MAX_ROWS_PER_STRATEGY = 3_000_000;

/** What a run is asked to do; validated (see {@link checkPlan}) before any server starts. */
export const RunPlanSchema = z.object({
  /** Backend ids; empty means each backend's default variant, `['all']` every variant installed here. */
  backends: z.array(z.string().min(1)),
  /** Strategy names; empty means every strategy of each backend. */
  strategies: z.array(z.string().min(1)),
  rows: z.array(z.number().int().positive()).min(1),
  hotRows: z.array(z.number().int().positive()),
  warmups: z.number().int().nonnegative(),
  repeats: z.number().int().min(MIN_MEASURED_REPEATS),
  /** `all`: every installed release of each driver (npm aliases) side by side; `default`: the pinned one only. */
  driverReleases: z.enum(['default', 'all']).default('all'),
  /** Give up on a window after this long (see {@link DEFAULT_CELL_TIMEOUT_MS}); the cell is kept, the run fails. */
  cellTimeoutMs: z.number().int().min(MIN_CELL_TIMEOUT_MS).default(DEFAULT_CELL_TIMEOUT_MS),
});
export type RunPlan = z.input<typeof RunPlanSchema>;
export type ValidPlan = z.output<typeof RunPlanSchema>;

/** A plan field, as `sqltally run` names it on the command line. */
export const PLAN_FLAGS = {
  backends: '--backends',
  strategies: '--strategies',
  rows: '--rows',
  hotRows: '--hot-rows',
  warmups: '--warmups',
  repeats: '--repeats',
  driverReleases: '--driver-releases',
  cellTimeoutMs: '--cell-timeout-ms',
} as const satisfies Record<keyof ValidPlan, string>;

/** One thing wrong with a plan: which field, and a sentence that names the value and the limit. */
export interface PlanProblem {
  field: keyof ValidPlan;
  message: string;
}

const fmt = (n: number): string => n.toLocaleString('en-US');

function duplicates<T>(values: readonly T[]): T[] {
  const seen = new Set<T>();
  const twice = new Set<T>();
  for (const v of values) (seen.has(v) ? twice : seen).add(v);
  return [...twice];
}

/** Rows a strategy inserts over the whole run with this plan (see {@link MAX_ROWS_PER_STRATEGY}). */
export function rowsPerStrategy(plan: Pick<ValidPlan, 'rows' | 'hotRows' | 'warmups' | 'repeats'>): number {
  const windows = plan.warmups + plan.repeats;
  return plan.rows.reduce((sum, r) => sum + r * windows, 0) + plan.hotRows.reduce((sum, r) => sum + r * (windows + 1), 0);
}

/**
 * Everything wrong with a structurally valid plan, each problem worded for a person: duplicates (which would make two
 * cells with one key), row counts sqltally cannot hold, `all` mixed with ids. Empty when the plan can run.
 */
export function planProblems(plan: ValidPlan): PlanProblem[] {
  const problems: PlanProblem[] = [];
  const ids = plan.backends.map((b) => b.trim());
  for (const id of duplicates(ids)) problems.push({ field: 'backends', message: `names ${id} more than once: name each backend once` });
  if (ids.includes('all') && ids.length > 1)
    problems.push({ field: 'backends', message: `"all" already means every backend and version, so it stands alone; got ${ids.join(',')}` });
  for (const name of duplicates(plan.strategies.map((s) => s.trim())))
    problems.push({ field: 'strategies', message: `names ${name} more than once: name each strategy once` });
  for (const field of ['rows', 'hotRows'] as const) {
    for (const n of duplicates(plan[field])) problems.push({ field, message: `names ${n} more than once: each row count makes one cell` });
    for (const n of plan[field]) {
      if (n > MAX_ROWS_PER_CELL) {
        problems.push({
          field,
          message: `${fmt(n)} rows is more than sqltally can hold in one cell (at most ${fmt(MAX_ROWS_PER_CELL)}): every row, its bound values and every driver call of each repeat are kept in memory`,
        });
      }
    }
  }
  if (plan.cellTimeoutMs > MAX_CELL_TIMEOUT_MS) {
    problems.push({
      field: 'cellTimeoutMs',
      message: `${fmt(plan.cellTimeoutMs)} ms is longer than the ${fmt(MAX_CELL_TIMEOUT_MS)} ms (one day) a cell may wait`,
    });
  }
  const total = rowsPerStrategy(plan);
  if (problems.length === 0 && total > MAX_ROWS_PER_STRATEGY) {
    problems.push({
      field: 'rows',
      message:
        `${plan.rows.join(',')}${plan.hotRows.length > 0 ? ` (hot ${plan.hotRows.join(',')})` : ''} with ${plan.warmups} warm-up(s) and ${plan.repeats} repeats inserts ` +
        `${fmt(total)} rows per strategy, more than the ${fmt(MAX_ROWS_PER_STRATEGY)} sqltally can hold (every driver call of a strategy is kept until it is done): ` +
        'use fewer or smaller row counts, or fewer repeats',
    });
  }
  return problems;
}

/**
 * Parses and checks a plan: a malformed one (a string for a number, a negative repeat count) or one that
 * {@link planProblems} rejects throws a config-phase SqltallyError naming the field and the value. Nothing has
 * started yet when it throws.
 */
export function checkPlan(input: RunPlan): ValidPlan {
  const parsed = RunPlanSchema.safeParse(input);
  if (!parsed.success) {
    throw new SqltallyError(`invalid run plan:\n${formatZodError('plan', parsed.error)}`, { phase: 'config' });
  }
  const problems = planProblems(parsed.data);
  if (problems.length > 0) {
    throw new SqltallyError(problems.map((p) => `${p.field} ${p.message}`).join('; '), { phase: 'config' });
  }
  return parsed.data;
}

/**
 * Two requested ids that the registry resolved to the same server (`mariadb` and `mariadb@10.11` on a machine with
 * one MariaDB, two variables holding one URL) would run the whole matrix twice and produce cells with one key.
 * Refused before anything starts, naming both ids.
 */
export function checkDistinctServers(resolutions: readonly Resolution[]): void {
  const seen = new Map<string, string>();
  for (const r of resolutions) {
    if (!r.available) continue;
    const id = r.id ?? r.backend;
    const where = `${r.provider} ${r.origin}${r.expectedVersion ? ` (${r.expectedVersion})` : ''}`;
    const key = `${r.backend}\0${where}`;
    const first = seen.get(key);
    if (first !== undefined) {
      throw new SqltallyError(`--backends ${first} and ${id} are the same server here (${where}): name it once`, { backend: id, phase: 'config' });
    }
    seen.set(key, id);
  }
}
