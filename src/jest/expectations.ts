import { absentMeansZero, type Tally } from '../capture/tally';
import type { CallKind, StatementClass } from '../sql/events';
import { truncateStatement } from '../shared/errors';
import { z } from 'zod';

/**
 * Counts to check, per layer. Every field is optional: only what is named is checked. Server fields are the
 * normalised summary (`statements`, `rowsInserted`, ...); `global` and `perConnection` reach the raw counters.
 */
export interface CountSpec {
  driver?: {
    calls?: number;
    parameterSets?: number;
    bindValues?: number;
    maxBindValuesPerCall?: number;
    rowsAffected?: number;
    errors?: number;
    byKind?: Partial<Record<CallKind, number>>;
    byClass?: Partial<Record<StatementClass, number>>;
  };
  wire?: {
    commandsTotal?: number;
    roundTrips?: number;
    clientWrites?: number;
    connections?: number;
    /** By protocol command name: `COM_QUERY`, `COM_STMT_EXECUTE`, `Parse`, `Sync`, ... */
    commands?: Record<string, number>;
  };
  server?: {
    statements?: number;
    inserts?: number;
    prepares?: number;
    executes?: number;
    bulkExecutes?: number;
    commits?: number;
    rowsInserted?: number;
    global?: Record<string, number>;
    perConnection?: Record<string, number>;
  };
}

const COUNT = z.number().int().nonnegative().optional();
const COUNTS_BY_NAME = z.record(z.string(), z.number().int().nonnegative()).optional();

/**
 * What a CountSpec may name, strictly: a misspelled key (`callz`) or a count that is no count (NaN, -1, 1.5) would
 * otherwise be a mismatch, which `.not` turns into a passing test.
 */
export const CountSpecSchema = z
  .object({
    driver: z
      .object({
        calls: COUNT,
        parameterSets: COUNT,
        bindValues: COUNT,
        maxBindValuesPerCall: COUNT,
        rowsAffected: COUNT,
        errors: COUNT,
        byKind: COUNTS_BY_NAME,
        byClass: COUNTS_BY_NAME,
      })
      .strict()
      .optional(),
    wire: z.object({ commandsTotal: COUNT, roundTrips: COUNT, clientWrites: COUNT, connections: COUNT, commands: COUNTS_BY_NAME }).strict().optional(),
    server: z
      .object({
        statements: COUNT,
        inserts: COUNT,
        prepares: COUNT,
        executes: COUNT,
        bulkExecutes: COUNT,
        commits: COUNT,
        rowsInserted: COUNT,
        global: COUNTS_BY_NAME,
        perConnection: COUNTS_BY_NAME,
      })
      .strict()
      .optional(),
  })
  .strict() satisfies z.ZodType<CountSpec>;

/** Why `spec` is not a CountSpec, one line per problem; null when it is one. */
export function countSpecProblems(spec: unknown): string | null {
  const parsed = CountSpecSchema.safeParse(spec);
  if (parsed.success) return null;
  return parsed.error.issues.map((i) => `${i.path.map(String).join('.') || '(the spec)'}: ${i.message}`).join('; ');
}

export type Comparison = 'exact' | 'atMost';

export interface CountCheck {
  path: string;
  expected: number;
  actual: number | null;
  ok: boolean;
  /** Why the check could not be made, e.g. the layer is incomplete or report-only. */
  blocked: string | null;
}

function flatten(spec: object, prefix: string, out: [string, number][]): void {
  for (const [key, value] of Object.entries(spec)) {
    if (value === undefined) continue;
    const path = prefix ? `${prefix}.${key}` : key;
    if (typeof value === 'number') out.push([path, value]);
    else if (value && typeof value === 'object') flatten(value, path, out);
  }
}

function lookup(root: unknown, path: string[]): number | null {
  let node: unknown = root;
  for (const part of path) {
    if (node === null || typeof node !== 'object') return null;
    node = (node as Record<string, unknown>)[part];
  }
  return typeof node === 'number' ? node : null;
}

function actualFor(tally: Tally, path: string): { actual: number | null; blocked: string | null } {
  const [layer, ...rest] = path.split('.');
  if (layer === 'driver') {
    const driver = tally.layers.driver;
    if (!driver) return { actual: null, blocked: 'the driver layer was not captured' };
    const value = lookup(driver, rest);
    return { actual: value ?? (absentMeansZero(rest[0] ?? '') ? 0 : null), blocked: null };
  }
  if (layer === 'wire') {
    const wire = tally.layers.wire;
    if (!wire) return { actual: null, blocked: 'no wire layer: in-process backend, or the wire proxy was off' };
    if (wire.incomplete) return { actual: null, blocked: `wire layer incomplete: ${wire.incompleteReasons.join('; ')}` };
    const value = lookup(wire, rest);
    return { actual: value ?? (absentMeansZero(rest[0] ?? '') ? 0 : null), blocked: null };
  }
  const server = tally.layers.server;
  if (!server) return { actual: null, blocked: 'the server layer was not captured' };
  if (server.incomplete || tally.verdict.kind === 'incomplete') {
    return { actual: null, blocked: `server layer incomplete: ${tally.verdict.reason}` };
  }
  const [head, ...tail] = rest;
  if (head === 'global' || head === 'perConnection') {
    const table = server[head];
    if (!table) return { actual: null, blocked: `no ${head} counters on this server` };
    if (head === 'global' && tally.verdict.kind !== 'assert') {
      return { actual: null, blocked: `global counters are report-only here: ${tally.verdict.reason}` };
    }
    const value = table[tail.join('.')];
    if (value === undefined && !absentMeansZero(head)) return { actual: null, blocked: `this server has no counter ${tail.join('.')}` };
    return { actual: value ?? 0, blocked: null };
  }
  if (tally.verdict.kind !== 'assert') {
    return { actual: null, blocked: `server counts are report-only here: ${tally.verdict.reason}` };
  }
  const value = lookup(server.summary, rest);
  return {
    actual: value,
    blocked: value === null ? `this server cannot tell server.${rest.join('.')}` : null,
  };
}

/** Checks a tally against a spec; the judging lives here so matchers and scripts agree. */
export function checkCounts(tally: Tally, spec: CountSpec, comparison: Comparison): CountCheck[] {
  const wanted: [string, number][] = [];
  flatten(spec, '', wanted);
  return wanted.map(([path, expected]) => {
    const { actual, blocked } = actualFor(tally, path);
    const ok = blocked === null && actual !== null && (comparison === 'exact' ? actual === expected : actual <= expected);
    return { path, expected, actual, ok, blocked };
  });
}

const STATEMENTS_SHOWN = 20;

/** The evidence under a failure: numbered driver calls, then the verdict and reconciliation. */
export function describeEvidence(tally: Tally): string {
  const lines: string[] = [];
  const driver = tally.layers.driver;
  if (driver) {
    lines.push(`Captured driver calls (${driver.calls}):`);
    driver.events.slice(0, STATEMENTS_SHOWN).forEach((event, i) => {
      const sets = event.kind === 'batch' ? `, ${event.parameterSets} parameter sets` : '';
      const binds = event.bindValues ? `, ${event.bindValues} values` : '';
      const failed = event.error ? `, FAILED: ${event.error}` : '';
      lines.push(`  ${i + 1}. ${event.driver}.${event.method} [${event.statementClass}${sets}${binds}${failed}] ${truncateStatement(event.sql, 120)}`);
    });
    const hidden = driver.calls - Math.min(driver.events.length, STATEMENTS_SHOWN);
    if (hidden > 0) lines.push(`  ... and ${hidden} more`);
  }
  const wire = tally.layers.wire;
  if (wire) {
    const commands = Object.entries(wire.commands)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    lines.push(
      `Wire: ${wire.commandsTotal} commands (${commands}), ${wire.roundTrips} round trips, ${wire.clientWrites} client writes${wire.incomplete ? ' [incomplete]' : ''}`,
    );
  }
  const server = tally.layers.server;
  if (server) {
    const summary = Object.entries(server.summary)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    lines.push(`Server (${server.summarySource}): ${summary}`);
  }
  lines.push(`Verdict: ${tally.verdict.kind}: ${tally.verdict.reason}`);
  for (const line of tally.verdict.reconciliation) lines.push(`  ${line}`);
  for (const line of tally.verdict.discrepancies) lines.push(`  ! ${line}`);
  for (const f of tally.findings ?? []) lines.push(`Finding (${f.kind}): ${f.message}`);
  return lines.join('\n');
}

export function describeChecks(checks: CountCheck[], comparison: Comparison): string {
  const relation = comparison === 'exact' ? 'expected' : 'at most';
  return checks
    .map((c) => {
      const mark = c.ok ? '  ' : '✗ ';
      const actual = c.blocked ? `cannot check: ${c.blocked}` : `actual ${c.actual ?? 'n/a'}`;
      return `${mark}${c.path}: ${relation} ${c.expected}, ${actual}`;
    })
    .join('\n');
}
