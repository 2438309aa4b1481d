import type { Capabilities } from '../backends/types';
import { windowOfEvents, type DriverWindow } from '../driver/driver-layer';
import { rangeText, UNBOUNDED, type CallGroup, type Contribution, type Range } from '../driver/module';
import type { DriverName } from '../shared/driver-names';
import { DRIVERS } from '../driver/registry';
import { countStatements } from '../sql/tokenizer';
import { bulkLoadOf } from '../sql/bulk-load';
import type { DriverLayer } from '../sql/events';
import type { ServerSummary } from '../server/types';
import type { WireCounts } from '../wire/types';
import type { Finding } from './types';

/** Driver options that change what goes on the wire (mariadb connector `bulk`, default on). */
export type DriverOptions = Readonly<Record<string, unknown>>;

export type { Range } from '../driver/module';

/** Expected counts per layer for a window, from the driver calls and the driver's model. */
export interface Prediction {
  wire: Record<string, Range>;
  server: Partial<Record<keyof ServerSummary, Range>>;
  /** One line per group of driver calls: "1 driver batch (5000 parameter sets) -> ...". */
  lines: string[];
  /** Why some part could not be predicted (events omitted, rows not reported). */
  gaps: string[];
  /** The model saw only part of the calls (a capped event list): no layer is compared. */
  partial: boolean;
  /** Batch calls and their parameter sets: what a bulk fallback is recognised by. */
  batches: { calls: number; parameterSets: number };
}

export interface ReconcileInput {
  driverName: DriverName;
  driverOptions?: DriverOptions;
  /** The counted driver's installed version, for a model whose releases differ; null or absent when unknown. */
  driverVersion?: string | null;
  capabilities: Pick<Capabilities, 'bulkExecute' | 'wireProtocol'>;
  driver: DriverLayer;
  /**
   * The window's call groups as the recorder built them from every call: `DriverLayer.events` is capped for
   * reports, and a model fed a capped list would predict too little. Without it the groups are rebuilt from the
   * events, and an omitted event turns off the comparisons.
   */
  window?: Pick<DriverWindow, 'groups' | 'insertedRows' | 'groupsIncomplete'> & Partial<Pick<DriverWindow, 'ignored'>>;
  wire: WireCounts | null;
  server: ServerSummary | null;
}

export interface Reconciliation {
  reconciliation: string[];
  discrepancies: string[];
  /** What the numbers show about the code where the model explains them (a bulk fallback within its range). */
  findings: Finding[];
  prediction: Prediction;
}

function addRange(target: Record<string, Range>, key: string, r: Range): void {
  const cur = target[key] ?? { min: 0, max: 0 };
  target[key] = { min: cur.min + r.min, max: Math.min(UNBOUNDED, cur.max + r.max) };
}

/** Applies the driver's model to every group of calls of the window, in the order the groups first appear. */
export function predict(input: ReconcileInput): Prediction {
  const model = DRIVERS[input.driverName].model;
  const driverOptions = input.driverOptions ?? {};
  const driverVersion = input.driverVersion ?? null;
  const wire: Record<string, Range> = {};
  const server: Record<string, Range> = {};
  const lines = new Map<string, { calls: number; sets: number; failed: number; wireWords: string; serverWords: string }>();
  // Calls that keep the server's rows inserted from being predicted exactly, by reason (LOOSE_ROWS).
  const loose: Record<LooseRows, number> = { upsert: 0, failedInsert: 0, otherWriter: 0, severalStatements: 0 };
  const dialect = DRIVERS[input.driverName].dialect;
  const gaps: string[] = [];
  const partial = !input.window && input.driver.eventsOmitted > 0;
  const window = input.window ?? windowOfEvents(input.driver.events);
  // A driver prepares once per connection and SQL text, whichever call kind first needs it. Calls on a connection the
  // wrapper does not know (a pool's own execute) may have run on any of the window's connections.
  const unknownConnections = Math.max(1, input.wire?.connections ?? 1);
  const preparesLeft = new Map<string, number>();
  // Ignored calls reached the wire and the server like any other: the layers only line up with them in.
  const ignoredGroups = window.ignored?.groups ?? [];
  const all =
    ignoredGroups.length > 0
      ? [...window.groups.map((g) => ({ g, ignored: false })), ...ignoredGroups.map((g) => ({ g, ignored: true }))]
      : window.groups.map((g) => ({ g, ignored: false }));
  for (const { g: group, ignored } of all) {
    const key = `${group.connectionId ?? '?'}\u0000${group.sql}`;
    const claimPrepare = (): number => {
      const left = preparesLeft.get(key) ?? (group.connectionId === null ? unknownConnections : 1);
      const claimed = Math.min(left, group.calls);
      preparesLeft.set(key, left - claimed);
      return claimed;
    };
    const whole = model(group, { capabilities: input.capabilities, driverOptions, driverVersion, claimPrepare });
    // A failed call may have stopped anywhere: each one counts from nothing up to what it would have done. The floor
    // is the model of the calls that surely succeeded; its prepares are none (a prepare is 0 at least anyway).
    const c =
      group.errors === 0
        ? whole
        : fromFloor(whole, model(succeeded(group), { capabilities: input.capabilities, driverOptions, driverVersion, claimPrepare: () => 0 }));
    for (const [k, r] of Object.entries(c.wire)) addRange(wire, k, r);
    for (const [k, r] of Object.entries(c.server)) addRange(server, k, r);
    const lineKey = `${group.kind}|${group.statementClass}${ignored ? ', ignored' : ''}|${c.wireWords}`;
    const line = lines.get(lineKey) ?? { calls: 0, sets: 0, failed: 0, wireWords: c.wireWords, serverWords: c.serverWords };
    line.calls += group.calls;
    line.sets += group.parameterSets;
    line.failed += group.errors;
    lines.set(lineKey, line);
    if (group.kind !== 'prepare') {
      if (group.statementClass === 'insert') loose.failedInsert += group.errors;
      if (group.statementClass === 'insert' && UPSERT.test(group.sql)) loose.upsert += group.calls;
      if ((group.statementClass === 'other' && bulkLoadOf(group.sql) === null) || group.statementClass === 'ddl') loose.otherWriter += group.calls;
      if (group.kind === 'query' && group.sql.indexOf(';') !== -1 && countStatements(group.sql, dialect) > 1) loose.severalStatements += group.calls;
    }
  }
  // Rows: what the driver said its INSERT calls inserted.
  const ignoredRows = window.ignored ? window.ignored.insertedRows : 0;
  if (window.insertedRows !== null && ignoredRows !== null) {
    const rows = window.insertedRows + ignoredRows;
    const reasons = (Object.keys(LOOSE_ROWS) as LooseRows[]).filter((r) => loose[r] > 0);
    server.rowsInserted = { min: reasons.some((r) => LOOSE_ROWS[r].noFloor) ? 0 : rows, max: reasons.length > 0 ? UNBOUNDED : rows };
    for (const r of reasons) gaps.push(LOOSE_ROWS[r].words(loose[r], rows));
  } else gaps.push('some INSERT calls did not report affected rows: rows not predicted');
  const failedCalls = [...lines.values()].reduce((n, l) => n + l.failed, 0);
  if (failedCalls > 0) {
    gaps.push(
      `${failedCalls} call(s) failed: each counts from nothing up to a whole call's share on the wire and the server, since a call can fail before it is sent, at its prepare or as it runs`,
    );
  }
  if (window.groupsIncomplete) gaps.push(window.groupsIncomplete);
  if (partial) {
    gaps.push(
      `${input.driver.eventsOmitted} driver events were omitted from the layer and the full list was not given: the model saw only ${input.driver.events.length}, so no layer is compared`,
    );
  }
  const text = [...lines.entries()].map(([key, g]) => {
    const [kind, cls] = key.split('|');
    const sets = kind === 'batch' ? ` (${g.sets} parameter sets)` : '';
    const failed = g.failed === 0 ? '' : `, ${g.failed === g.calls ? (g.calls === 1 ? 'failed' : 'all failed') : `${g.failed} failed`}`;
    return `${g.calls} driver ${g.calls === 1 ? kind : plural(kind ?? '')} [${cls}]${sets}${failed} -> ${g.calls === 1 ? '' : 'each '}${g.wireWords} -> ${g.serverWords}`;
  });
  const batchGroups = all.map((x) => x.g).filter((g) => g.kind === 'batch');
  const batches = { calls: batchGroups.reduce((n, g) => n + g.calls, 0), parameterSets: batchGroups.reduce((n, g) => n + g.parameterSets, 0) };
  return { wire, server, lines: text, gaps, partial, batches };
}

/**
 * Why the server's rows inserted can be more than the driver's INSERT calls reported: the rows are then compared as at
 * least those, or, for an upsert, not at all (`noFloor`: its affected rows are not rows inserted either).
 */
type LooseRows = 'upsert' | 'failedInsert' | 'otherWriter' | 'severalStatements';
const LOOSE_ROWS: Record<LooseRows, { noFloor?: true; words: (calls: number, rows: number) => string }> = {
  upsert: {
    noFloor: true,
    words: (n) =>
      `${n} upsert call(s) (ON CONFLICT, ON DUPLICATE KEY UPDATE, INSERT IGNORE, REPLACE): the driver's affected rows count updated rows (twice on MySQL and MariaDB) and skip ignored ones, and the server counts an ignored row's attempt, so the rows inserted are not predicted`,
  },
  failedInsert: {
    words: (n, rows) =>
      `${n} INSERT call(s) failed: a statement's rows written before it failed (a duplicate key, say) count on the server and in no driver result, so rows are compared as at least ${rows}`,
  },
  otherWriter: {
    words: (n, rows) =>
      `${n} call(s) of statements that are not INSERTs may write rows (COPY ... FROM a file, CALL, DO, CREATE TABLE ... AS): rows are compared as at least ${rows}`,
  },
  severalStatements: {
    words: (n, rows) =>
      `${n} call(s) sent several statements in one text: the rows their INSERTs wrote are in no INSERT call's result, so rows are compared as at least ${rows}`,
  },
};

/**
 * An INSERT that may update or skip rows instead (ON CONFLICT, ON DUPLICATE KEY UPDATE, IGNORE, REPLACE), looked for in
 * the whole text, strings included: a false match only widens the rows compared, never narrows them.
 */
const UPSERT = /\bon\s+(?:conflict|duplicate\s+key\s+update)\b|^[\s(]*(?:replace|insert\s+(?:or\s+\w+\s+)?ignore|insert\s+or\s+replace)\b/i;

/**
 * The calls of a group that surely succeeded, as a group: each field that counts calls loses the failed ones, as
 * many as it can have had; parameter sets are at least one per call that carried some.
 */
function succeeded(group: CallGroup): CallGroup {
  const less = (n: number): number => Math.max(0, n - group.errors);
  const { simple, extended, named, cursor, describe } = group.byProtocol;
  return {
    ...group,
    calls: less(group.calls),
    parameterSets: less(group.callsWithParameterSets),
    callsWithParameterSets: less(group.callsWithParameterSets),
    callsWithValues: less(group.callsWithValues),
    errors: 0,
    byProtocol: { simple: less(simple), extended: less(extended), named: less(named), cursor: less(cursor), describe: less(describe) },
  };
}

/** Every range from the floor's min (0 where the floor has none) up to the whole group's max. */
function fromFloor(all: Contribution, floor: Contribution): Contribution {
  const widen = <K extends string>(ranges: Partial<Record<K, Range>>, mins: Partial<Record<K, Range>>): Partial<Record<K, Range>> => {
    const out: Partial<Record<K, Range>> = {};
    for (const [k, r] of Object.entries(ranges) as [K, Range][]) out[k] = { min: Math.min(r.min, mins[k]?.min ?? 0), max: r.max };
    return out;
  };
  return { ...all, wire: widen(all.wire, floor.wire) as Record<string, Range>, server: widen(all.server, floor.server) };
}

function ignoredCalls(input: ReconcileInput): string {
  return input.driver.ignoredCalls > 0 ? ` and ${input.driver.ignoredCalls} ignored` : '';
}

/**
 * How much of the wire and server counts the ignored calls account for, from the driver model: what a layer that
 * cannot tell statements apart by itself would have counted without them. Only exact predictions are given as
 * numbers; a range (a driver that may or may not prepare) is named in `inexact` and left in the layer.
 */
export interface IgnoredShare {
  calls: number;
  wire: Record<string, number>;
  server: Partial<Record<keyof ServerSummary, number>>;
  inexact: string[];
}

export function ignoredShare(input: ReconcileInput): IgnoredShare | null {
  const ignored = input.window?.ignored;
  if (!ignored || ignored.groups.length === 0) return null;
  const p = predict({ ...input, window: { groups: ignored.groups, insertedRows: ignored.insertedRows, groupsIncomplete: null } });
  const wire: Record<string, number> = {};
  const server: Partial<Record<keyof ServerSummary, number>> = {};
  const inexact: string[] = [];
  for (const [cmd, r] of Object.entries(p.wire)) {
    if (r.min === r.max) wire[cmd] = r.min;
    else inexact.push(`wire ${cmd} ${rangeText(r)}`);
  }
  for (const [field, r] of Object.entries(p.server) as [keyof ServerSummary, Range][]) {
    if (r.min === r.max) server[field] = r.min;
    else inexact.push(`server ${field} ${rangeText(r)}`);
  }
  return { calls: ignored.groups.reduce((n, g) => n + g.calls, 0), wire, server, inexact };
}

const FELL_BACK = 'the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed)';

/** Likely causes, by layer and direction: the first thing to check when a count is off. */
function serverCause(field: string, actual: number, r: Range, batches: Prediction['batches']): string {
  const { calls, parameterSets: sets } = batches;
  if ((field === 'executes' || field === 'statements') && calls > 0 && actual >= sets && actual > calls) {
    return `${calls} driver batch(es) became ${actual} server ${field}: ${FELL_BACK}`;
  }
  if (field === 'bulkExecutes' && calls > 0 && actual < r.min) return `${calls} driver batch(es) became ${actual} bulk commands: ${FELL_BACK}`;
  if (field === 'rowsInserted') {
    return actual > r.max
      ? 'more rows than the driver reported: another writer, or triggers'
      : 'fewer rows than the driver reported: statistics not settled, or rows counted elsewhere (INSERT IGNORE, ON CONFLICT)';
  }
  return actual > r.max
    ? `${actual - r.max} more than the driver calls explain: another connection, driver-internal statements (SET, ping), or retries`
    : `${r.min - actual} fewer than the driver calls explain: calls that failed before reaching the server, or statements outside the window`;
}

/**
 * Lines the layers up through the driver model and lists every disagreement the model does not explain, naming
 * the layer, the amount and the likely cause.
 */
export function reconcile(input: ReconcileInput): Reconciliation {
  const prediction = predict(input);
  const reconciliation = [...prediction.lines];
  const discrepancies: string[] = [];
  const findings: Finding[] = [];
  const partial = prediction.partial;

  if (input.wire) {
    const seen = input.wire.commands;
    const parts: string[] = [];
    for (const [cmd, r] of Object.entries(prediction.wire)) {
      const actual = seen[cmd] ?? 0;
      parts.push(`${cmd} ${actual}`);
      if (!partial && (actual < r.min || actual > r.max)) {
        discrepancies.push(
          `wire layer: ${actual} ${cmd}, model predicts ${rangeText(r)} from ${input.driver.calls} driver calls${ignoredCalls(input)} (${
            actual > r.max
              ? 'extra commands: another client on the proxied port, or driver-internal commands'
              : cmd === 'COM_STMT_BULK_EXECUTE'
                ? `${seen.COM_STMT_EXECUTE ?? 0} COM_STMT_EXECUTE instead: ${FELL_BACK}`
                : 'missing commands: the driver batched or skipped calls'
          })`,
        );
      }
    }
    if (parts.length > 0) reconciliation.push(`wire: ${parts.join(', ')}`);
  }

  const batches = prediction.batches;
  const bulkExpected = batches.calls > 0 && input.capabilities.bulkExecute && input.driverOptions?.bulk !== false;
  const bulkBatches = batches.calls;
  const bulkSets = batches.parameterSets;
  if (input.server) {
    const parts: string[] = [];
    // Bulk commands the server or the wire saw: a batch whose value types change every row is one bulk command per
    // row, as many as a fallback would send, and only these tell the two apart.
    const bulkSeen = input.server.bulkExecutes ?? input.wire?.commands.COM_STMT_BULK_EXECUTE ?? null;
    for (const [field, r] of Object.entries(prediction.server) as [keyof ServerSummary, Range][]) {
      const actual = input.server[field];
      if (actual === null || actual === undefined) continue;
      parts.push(`${field} ${actual}`);
      // One execute per parameter set fits the bulk range too, but it is what a fallback looks like, unless each of
      // those executes was seen to be a bulk command.
      const fellBack =
        bulkExpected &&
        (field === 'executes' || field === 'statements') &&
        actual >= bulkSets &&
        actual > bulkBatches &&
        (bulkSeen === null || bulkSeen < actual);
      if (partial) continue;
      if (actual < r.min || actual > r.max) {
        discrepancies.push(`server layer: ${field} ${actual}, model predicts ${rangeText(r)}: ${serverCause(field, actual, r, batches)}`);
      } else if (fellBack) {
        // Within the model's range the numbers are explained: a fallback says how the code ran, not that a count is off.
        findings.push({
          kind: 'batch-fallback',
          message: `server ${field} ${actual}, within the model's ${rangeText(r)}: ${serverCause(field, actual, r, batches)}`,
        });
      }
    }
    if (parts.length > 0) reconciliation.push(`server: ${parts.join(', ')}`);
    const bulkCommands = input.wire?.commands.COM_STMT_BULK_EXECUTE ?? input.server.bulkExecutes ?? null;
    if (!partial && bulkExpected && bulkCommands !== null && bulkCommands > bulkBatches) {
      findings.push({
        kind: 'batch-split',
        message: `${bulkBatches} driver batch(es) of ${bulkSets} parameter sets went out as ${bulkCommands} bulk commands: the connector splits a batch where the parameter types change between rows or a packet would pass max_allowed_packet`,
      });
    }
  }
  for (const gap of prediction.gaps) reconciliation.push(`not modelled: ${gap}`);
  return { reconciliation, discrepancies, findings, prediction };
}

/** `query` -> `queries`, `batch` -> `batches`, `execute` -> `executes`. */
function plural(word: string): string {
  if (word.endsWith('y')) return `${word.slice(0, -1)}ies`;
  if (word.endsWith('ch') || word.endsWith('sh') || word.endsWith('s')) return `${word}es`;
  return `${word}s`;
}
