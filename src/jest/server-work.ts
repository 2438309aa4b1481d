import type { Tally } from '../capture/tally';
import { fingerprint, fingerprintId, isFingerprintId } from '../sql/fingerprint';
import { dialectOf } from '../server';
import { SERVER_WORK_FIGURES, type ServerWork, type ServerWorkFigure, type StatementWork, type UnindexedScan } from '../server/server-work';
import type { ShapeStat } from '../sql/shapes';

/** A budget for one figure: an exact number, or bounds. */
export type WorkBound = number | { max?: number; min?: number };
/** `toHaveServerWork`'s budget: figures by name (see docs/server-work.md). */
export type ServerWorkBudget = Partial<Record<ServerWorkFigure, WorkBound>>;

/** Options of `toHaveServerWork`: which statements the budget applies to (default: the window's totals). */
export interface ServerWorkScope {
  /** The statement entries of one driver shape: its id (12 hex), whole fingerprint, or a RegExp on the fingerprint. */
  shape?: string | RegExp;
  /** Every statement entry of the window, each on its own. */
  eachShape?: boolean;
}

export interface UseIndexesOptions {
  /** Scans of tables with fewer rows than this pass (a lookup table read whole is fine). Default 0: every scan fails. */
  minTableRows?: number;
}

export interface WriteInBatchesOptions {
  /** A write shape fails once it ran this many times, one row per call. Integer of at least 2; default 2. */
  threshold?: number;
}

const WRITE_CLASSES: readonly string[] = ['insert', 'update', 'delete'];

/** A check that cannot be made: the matcher fails with and without `.not`. */
export type Judged<T> = { ok: true; value: T } | { ok: false; reason: string };

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `${String(value)} (${typeof value})`;
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function unknownKeys(given: object, known: readonly string[], what: string): string | null {
  const bad = Object.keys(given).filter((k) => !known.includes(k));
  if (bad.length === 0) return null;
  return `unknown ${what} ${bad.map((k) => JSON.stringify(k)).join(', ')}: the known keys are ${known.join(', ')}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof RegExp);
}

interface Bound {
  figure: ServerWorkFigure;
  exact: number | null;
  min: number | null;
  max: number | null;
}

/** Validates a budget: known keys only, numbers only. */
export function parseBudget(budget: unknown): Judged<Bound[]> {
  if (!isPlainObject(budget)) return { ok: false, reason: `the budget must be an object of figures, received ${describeValue(budget)}` };
  const bad = unknownKeys(budget, SERVER_WORK_FIGURES, 'budget key');
  if (bad) return { ok: false, reason: bad };
  const bounds: Bound[] = [];
  for (const [key, value] of Object.entries(budget)) {
    const figure = key as ServerWorkFigure;
    if (isNumber(value)) {
      bounds.push({ figure, exact: value, min: null, max: null });
      continue;
    }
    if (!isPlainObject(value)) return { ok: false, reason: `${key} must be a number or { max, min } of numbers, received ${describeValue(value)}` };
    const extra = unknownKeys(value, ['max', 'min'], `key in ${key}`);
    if (extra) return { ok: false, reason: extra };
    const { max, min } = value;
    if (max === undefined && min === undefined) return { ok: false, reason: `${key} names neither max nor min` };
    for (const [name, v] of [
      ['max', max],
      ['min', min],
    ] as const) {
      if (v !== undefined && !isNumber(v)) return { ok: false, reason: `${key}.${name} must be a number, received ${describeValue(v)}` };
    }
    bounds.push({ figure, exact: null, min: (min as number | undefined) ?? null, max: (max as number | undefined) ?? null });
  }
  if (bounds.length === 0) return { ok: false, reason: 'the budget names no figure' };
  return { ok: true, value: bounds };
}

function describeBound(b: Bound): string {
  if (b.exact !== null) return `${b.exact}`;
  return [b.min !== null ? `at least ${b.min}` : null, b.max !== null ? `at most ${b.max}` : null].filter(Boolean).join(' and ');
}

function within(b: Bound, value: number): boolean {
  if (b.exact !== null) return value === b.exact;
  return (b.min === null || value >= b.min) && (b.max === null || value <= b.max);
}

/** The server-work section of a tally, or why there is none to judge. */
export function workOf(tally: Tally): Judged<ServerWork> {
  const server = tally.layers.server;
  if (!server) return { ok: false, reason: 'the server layer was not captured' };
  if (!server.work) return { ok: false, reason: 'this server layer has no server-work section (written by an older sqltally, or its probe reads none)' };
  if (server.incomplete) return { ok: false, reason: `the server layer is incomplete: ${server.incompleteReasons.join('; ')}` };
  return { ok: true, value: server.work };
}

function driverShapes(tally: Tally): ShapeStat[] {
  return tally.layers.driver?.shapes ?? [];
}

/** The driver shape a server statement entry is, by fingerprint; null when none of the window's shapes is it. */
export function shapeOfStatement(tally: Tally, entry: StatementWork): ShapeStat | null {
  const id = fingerprintId(fingerprint(entry.text, dialectOf(tally.backend.flavour)));
  return driverShapes(tally).find((s) => s.id === id) ?? null;
}

function matchesShape(shape: ShapeStat | null, entry: StatementWork, tally: Tally, selector: string | RegExp): boolean {
  const fp = fingerprint(entry.text, dialectOf(tally.backend.flavour));
  if (selector instanceof RegExp) return fp.search(selector) >= 0 || (shape !== null && shape.fingerprint.search(selector) >= 0);
  if (isFingerprintId(selector)) return fingerprintId(fp) === selector;
  return fp === selector;
}

function label(tally: Tally, entry: StatementWork): string {
  const shape = shapeOfStatement(tally, entry);
  const where = shape ? `shape ${shape.id}, called from ${shape.caller ?? '(caller unknown)'}` : 'no driver shape of the window matched it';
  return `${entry.calls}× ${entry.text.trim()} (${where})`;
}

export interface WorkCheck {
  scope: string;
  figure: ServerWorkFigure;
  expected: string;
  actual: number | null;
  ok: boolean;
  /** Why the figure cannot be read, or null. */
  blocked: string | null;
}

/** Checks a budget on the window or on its statement entries. */
export function judgeServerWork(tally: Tally, budget: unknown, scope: unknown): Judged<WorkCheck[]> {
  const bounds = parseBudget(budget);
  if (!bounds.ok) return bounds;
  if (scope !== undefined && !isPlainObject(scope))
    return { ok: false, reason: `the options must be an object { shape?, eachShape? }, received ${describeValue(scope)}` };
  const opts = (scope ?? {}) as Record<string, unknown>;
  const bad = unknownKeys(opts, ['shape', 'eachShape'], 'option');
  if (bad) return { ok: false, reason: bad };
  const selector = opts['shape'];
  if (selector !== undefined && !(selector instanceof RegExp) && !(typeof selector === 'string' && selector.length > 0)) {
    return { ok: false, reason: `shape must be a shape id, a whole fingerprint or a RegExp, received ${describeValue(selector)}` };
  }
  if (opts['eachShape'] !== undefined && typeof opts['eachShape'] !== 'boolean')
    return { ok: false, reason: `eachShape must be a boolean, received ${describeValue(opts['eachShape'])}` };
  const work = workOf(tally);
  if (!work.ok) return work;
  const w = work.value;
  const checks: WorkCheck[] = [];
  if (selector === undefined && opts['eachShape'] !== true) {
    for (const b of bounds.value) {
      const value = w.figures[b.figure];
      const blocked = value === undefined ? (w.unknown[b.figure] ?? 'not read in this window') : null;
      checks.push({ scope: 'window', figure: b.figure, expected: describeBound(b), actual: value ?? null, ok: blocked === null && within(b, value!), blocked });
    }
    return { ok: true, value: checks };
  }
  if (!w.statements) return { ok: false, reason: `no per-statement figures in this window: ${w.statementsUnknown ?? 'unknown'}` };
  const entries = w.statements.filter((e) => selector === undefined || matchesShape(shapeOfStatement(tally, e), e, tally, selector as string | RegExp));
  if (entries.length === 0) {
    return {
      ok: false,
      reason:
        selector === undefined ? 'no statement ran on the server in this window' : `no server statement entry of this window is the shape ${String(selector)}`,
    };
  }
  for (const e of entries) {
    for (const b of bounds.value) {
      const value = e.figures[b.figure];
      const blocked =
        value === undefined
          ? (w.unknown[b.figure] ??
            `this server keeps ${b.figure} per window only, not per statement (per statement: ${w.statementFigures.join(', ') || 'nothing'})`)
          : null;
      checks.push({
        scope: label(tally, e),
        figure: b.figure,
        expected: describeBound(b),
        actual: value ?? null,
        ok: blocked === null && within(b, value!),
        blocked,
      });
    }
  }
  return { ok: true, value: checks };
}

export function describeWorkChecks(checks: readonly WorkCheck[]): string {
  const lines: string[] = [];
  let scope = '';
  for (const c of checks) {
    if (c.scope !== scope) {
      scope = c.scope;
      lines.push(`  ${scope}:`);
    }
    const mark = c.blocked ? '?' : c.ok ? '✓' : '✗';
    lines.push(`    ${mark} ${c.figure}: expected ${c.expected}, ${c.blocked ? `unknown: ${c.blocked}` : `actual ${c.actual}`}`);
  }
  return lines.join('\n');
}

export interface UnindexedOffender {
  scan: UnindexedScan;
  /** The driver shapes it comes from: the statement's own, or those naming the table. */
  shapes: ShapeStat[];
}

function shapesNamingTable(tally: Tally, table: string): ShapeStat[] {
  const name = table.slice(table.lastIndexOf('.') + 1).toLowerCase();
  const word = new RegExp(`(^|[^a-z0-9_$])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^a-z0-9_$])`, 'i');
  return driverShapes(tally).filter((s) => s.statementClass !== 'ddl' && word.test(s.fingerprint.replace(/["`]/g, '')));
}

/** Scans without an index of tables with at least `minTableRows` rows, with the shapes they come from. */
export function judgeUseIndexes(tally: Tally, options: unknown): Judged<{ offenders: UnindexedOffender[]; minTableRows: number; judged: number }> {
  if (options !== undefined && !isPlainObject(options))
    return { ok: false, reason: `the options must be an object { minTableRows? }, received ${describeValue(options)}` };
  const opts = (options ?? {}) as Record<string, unknown>;
  const bad = unknownKeys(opts, ['minTableRows'], 'option');
  if (bad) return { ok: false, reason: bad };
  const min = opts['minTableRows'] ?? 0;
  if (!isNumber(min) || min < 0) return { ok: false, reason: `minTableRows must be a number of at least 0, received ${describeValue(min)}` };
  const work = workOf(tally);
  if (!work.ok) return work;
  const scans = work.value.unindexedScans;
  if (!scans) return { ok: false, reason: `scans without an index cannot be told in this window: ${work.value.scansUnknown ?? 'unknown'}` };
  const offenders: UnindexedOffender[] = [];
  for (const scan of scans) {
    if (scan.scans <= 0 || scan.rowsRead < min * scan.scans) continue;
    let shapes: ShapeStat[] = [];
    if (scan.statement !== null) {
      const shape = shapeOfStatement(tally, { key: '', text: scan.statement, calls: scan.scans, figures: {} });
      shapes = shape ? [shape] : [];
    } else if (scan.table !== null) shapes = shapesNamingTable(tally, scan.table);
    offenders.push({ scan, shapes });
  }
  return { ok: true, value: { offenders, minTableRows: min, judged: scans.length } };
}

export function describeUnindexed(offenders: readonly UnindexedOffender[]): string {
  const lines: string[] = [];
  for (const o of offenders) {
    const what = o.scan.table ? `table ${o.scan.table}` : o.scan.statement ? `statement ${o.scan.statement.trim()}` : "the window's statements";
    lines.push(`  ✗ ${what}: ${o.scan.scans} scan(s) without an index, ${o.scan.rowsRead} rows read (${o.scan.basis})`);
    if (o.shapes.length === 0) lines.push('      no driver shape of the window could be tied to it');
    for (const s of o.shapes) lines.push(`      shape ${s.id} [${s.statementClass}] ${s.fingerprint}, called from ${s.caller ?? '(caller unknown)'}`);
  }
  return lines.join('\n');
}

export interface PerRowWrite {
  shape: ShapeStat;
}

/** Write shapes that ran once per row: `threshold` or more single-row calls, not a batch. */
export function judgeWriteInBatches(tally: Tally, options: unknown): Judged<{ perRow: PerRowWrite[]; threshold: number; writes: number }> {
  if (options !== undefined && !isPlainObject(options))
    return { ok: false, reason: `the options must be an object { threshold? }, received ${describeValue(options)}` };
  const opts = (options ?? {}) as Record<string, unknown>;
  const bad = unknownKeys(opts, ['threshold'], 'option');
  if (bad) return { ok: false, reason: bad };
  const threshold = opts['threshold'] ?? 2;
  if (!isNumber(threshold) || !Number.isInteger(threshold) || threshold < 2) {
    return { ok: false, reason: `threshold must be an integer of at least 2, received ${describeValue(threshold)}` };
  }
  const driver = tally.layers.driver;
  if (!driver) return { ok: false, reason: 'the driver layer was not captured' };
  if (!driver.shapes) return { ok: false, reason: 'this driver layer records no statement shapes' };
  const writes = driver.shapes.filter((s) => !s.ignored && WRITE_CLASSES.includes(s.statementClass) && s.kind !== 'prepare');
  const perRow = writes
    .filter((s) => s.kind !== 'batch' && s.calls >= threshold && s.parameterSets <= s.calls && (s.rows === null || s.rows <= s.calls))
    .sort((a, b) => b.calls - a.calls)
    .map((shape) => ({ shape }));
  return { ok: true, value: { perRow, threshold, writes: writes.length } };
}

export function describePerRow(perRow: readonly PerRowWrite[]): string {
  return perRow
    .map(
      ({ shape: s }) =>
        `  ✗ ${s.calls} ${s.statementClass.toUpperCase()} calls of one row each (${s.rows === null ? 'rows not reported' : `${s.rows} rows`}): ${s.id} ${s.fingerprint}\n      called from ${s.caller ?? '(caller unknown)'}`,
    )
    .join('\n');
}
