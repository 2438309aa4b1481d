import type { Capabilities, DriverName } from '../containers/types';
import type { DriverLayer, StatementEvent } from '../counters/events';
import type { ServerSummary } from '../counters/probes/types';
import type { WireCounts } from '../counters/wire/types';

/** Driver options that change what goes on the wire (mariadb connector `bulk`, default on). */
export interface DriverOptions {
  bulk?: boolean;
}

/** What the model expects a count to be: prepares may be cached from before the window, bulk may be chunked. */
export interface Range {
  min: number;
  max: number;
}

/** Expected counts per layer for a window, from the driver events and the model. */
export interface Prediction {
  wire: Record<string, Range>;
  server: Partial<Record<keyof ServerSummary, Range>>;
  /** One line per group of driver calls: "1 driver batch (5000 parameter sets) -> ...". */
  lines: string[];
  /** Why some part could not be predicted (events omitted, rows not reported). */
  gaps: string[];
}

export interface ReconcileInput {
  driverName: DriverName;
  driverOptions?: DriverOptions;
  capabilities: Pick<Capabilities, 'bulkExecute' | 'wireProtocol'>;
  driver: DriverLayer;
  /**
   * Every driver event of the window, when the caller still has them: `DriverLayer.events` is capped for reports,
   * and a model fed a capped list would predict too little. Without it, an omitted event turns off the comparisons.
   */
  events?: readonly StatementEvent[];
  wire: WireCounts | null;
  server: ServerSummary | null;
}

export interface Reconciliation {
  reconciliation: string[];
  discrepancies: string[];
  prediction: Prediction;
}

/** What one driver call contributes, per layer. */
interface Contribution {
  wire: Record<string, Range>;
  server: Partial<Record<keyof ServerSummary, Range>>;
  /** Words for the line: "1 COM_STMT_EXECUTE", "Parse/Bind/Execute/Sync". */
  wireWords: string;
  serverWords: string;
}

interface ModelContext {
  /** `${connectionId}\u0000${sql}` already prepared in this window: the driver's statement cache. */
  prepared: Set<string>;
  bulk: boolean;
  /** Why a batch goes out as one execute per row, in words for the reconciliation line. */
  noBulkReason: string;
}

const one = (n = 1): Range => ({ min: n, max: n });
const upTo = (n: number): Range => ({ min: 0, max: n });
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

function classCounts(event: StatementEvent, calls: Range): Partial<Record<keyof ServerSummary, Range>> {
  const out: Partial<Record<keyof ServerSummary, Range>> = {};
  if (event.statementClass === 'insert') out.inserts = calls;
  if (event.statementClass === 'commit') out.commits = calls;
  return out;
}

/** A prepare the driver does implicitly once per connection and SQL text; it may be cached from before the window. */
function implicitPrepare(event: StatementEvent, ctx: ModelContext): Range {
  const key = `${event.connectionId ?? '?'}\u0000${event.sql}`;
  if (ctx.prepared.has(key)) return one(0);
  ctx.prepared.add(key);
  return upTo(1);
}

/** mysql2 and the mariadb connector speak the same protocol; only `batch` differs, and only the connector has it. */
function mysqlProtocol(event: StatementEvent, ctx: ModelContext): Contribution {
  switch (event.kind) {
    case 'query':
      return {
        wire: { COM_QUERY: one() },
        server: { statements: one(), prepares: one(0), executes: one(0), ...classCounts(event, one()) },
        wireWords: '1 COM_QUERY',
        serverWords: '1 statement',
      };
    case 'prepare':
      return {
        wire: { COM_STMT_PREPARE: implicitPrepare(event, ctx) },
        server: { prepares: upTo(1), statements: one(0) },
        wireWords: '0-1 COM_STMT_PREPARE (cached per connection)',
        serverWords: '0-1 prepare',
      };
    case 'execute': {
      const prepare = implicitPrepare(event, ctx);
      return {
        wire: { COM_STMT_PREPARE: prepare, COM_STMT_EXECUTE: one() },
        // Questions counts COM_STMT_EXECUTE but not COM_STMT_PREPARE.
        server: { statements: one(), prepares: prepare, executes: one(), bulkExecutes: one(0), ...classCounts(event, one()) },
        wireWords: '1 COM_STMT_EXECUTE (+ 1 COM_STMT_PREPARE per connection and SQL, unless cached)',
        serverWords: '1 execute',
      };
    }
    case 'batch': {
      const prepare = implicitPrepare(event, ctx);
      const n = event.parameterSets;
      if (ctx.bulk) {
        // One bulk command per chunk: split by max_allowed_packet or a change of parameter types.
        const bulk: Range = { min: Math.min(1, n), max: n };
        return {
          wire: { COM_STMT_PREPARE: prepare, COM_STMT_BULK_EXECUTE: bulk },
          server: { statements: bulk, prepares: prepare, executes: bulk, bulkExecutes: bulk, ...classCounts(event, bulk) },
          wireWords: `${bulk.min === bulk.max ? bulk.min : `${bulk.min}-${bulk.max}`} COM_STMT_BULK_EXECUTE`,
          serverWords: 'as many executes as bulk commands',
        };
      }
      return {
        wire: { COM_STMT_PREPARE: prepare, COM_STMT_EXECUTE: one(n) },
        server: { statements: one(n), prepares: prepare, executes: one(n), bulkExecutes: one(0), ...classCounts(event, one(n)) },
        wireWords: `${n} COM_STMT_EXECUTE (no bulk: ${ctx.noBulkReason})`,
        serverWords: `${n} executes`,
      };
    }
  }
}

/** node-postgres: values given => extended protocol, one round trip; none => simple Query. Named statements parse once. */
function pgProtocol(event: StatementEvent): Contribution {
  const calls = event.kind === 'prepare' ? one(0) : one();
  if (event.bindValues > 0 || event.kind === 'execute') {
    return {
      // The unnamed statement is parsed on every call; a named one once per connection: 0 or 1 either way.
      wire: { Parse: { min: 0, max: 1 }, Bind: one(), Execute: one(), Sync: one(), Describe: upTo(1) },
      server: { statements: calls, ...classCounts(event, calls) },
      wireWords: 'Parse/Bind/Describe?/Execute/Sync',
      serverWords: '1 pg_stat_statements call',
    };
  }
  return {
    // query(text) without values may still use the extended protocol (empty values array): allow either form.
    wire: { Query: upTo(1), Parse: upTo(1), Bind: upTo(1), Execute: upTo(1), Sync: upTo(1), Describe: upTo(1) },
    server: { statements: calls, ...classCounts(event, calls) },
    wireWords: 'Query (or Parse/Bind/Execute/Sync)',
    serverWords: '1 pg_stat_statements call',
  };
}

/** better-sqlite3: in-process; every run/exec is one statement, nothing on a wire, no statement counter. */
function sqliteModel(event: StatementEvent): Contribution {
  const calls = event.kind === 'prepare' ? one(0) : one(event.kind === 'batch' ? event.parameterSets : 1);
  return { wire: {}, server: { statements: calls }, wireWords: 'no wire', serverWords: `${calls.max} statement(s)` };
}

const DRIVER_MODELS = {
  mysql2: mysqlProtocol,
  mariadb: mysqlProtocol,
  pg: pgProtocol,
  'better-sqlite3': sqliteModel,
} satisfies Record<DriverName, (event: StatementEvent, ctx: ModelContext) => Contribution>;

function addRange(target: Record<string, Range>, key: string, r: Range): void {
  const cur = target[key] ?? { min: 0, max: 0 };
  target[key] = { min: cur.min + r.min, max: Math.min(UNBOUNDED, cur.max + r.max) };
}

function rangeText(r: Range): string {
  return r.min === r.max ? `${r.min}` : `${r.min}-${r.max}`;
}

/** Applies the driver's model to every event of the window. */
export function predict(input: ReconcileInput): Prediction {
  const model = DRIVER_MODELS[input.driverName];
  const ctx: ModelContext = {
    prepared: new Set(),
    bulk: input.capabilities.bulkExecute && input.driverOptions?.bulk !== false,
    noBulkReason: !input.capabilities.bulkExecute
      ? 'the server does not advertise COM_STMT_BULK_EXECUTE, so the connector pipelines one execute per row'
      : 'the bulk option is off, so the connector pipelines one execute per row',
  };
  const wire: Record<string, Range> = {};
  const server: Record<string, Range> = {};
  const groups = new Map<string, { calls: number; sets: number; wireWords: string; serverWords: string }>();
  const gaps: string[] = [];
  const events = input.events ?? input.driver.events;
  for (const event of events) {
    const c = model(event, ctx);
    for (const [k, r] of Object.entries(c.wire)) addRange(wire, k, r);
    for (const [k, r] of Object.entries(c.server)) addRange(server, k, r);
    const key = `${event.kind}|${event.statementClass}|${c.wireWords}`;
    const g = groups.get(key) ?? { calls: 0, sets: 0, wireWords: c.wireWords, serverWords: c.serverWords };
    g.calls += 1;
    g.sets += event.parameterSets;
    groups.set(key, g);
  }
  // Rows: what the driver said it inserted; a batch that did not report counts its parameter sets.
  let rows = 0;
  let rowsKnown = true;
  for (const e of events) {
    // An explicit prepare inserts nothing; its rows are the executes'.
    if (e.statementClass !== 'insert' || e.error || e.kind === 'prepare') continue;
    if (e.rowsAffected !== null) rows += e.rowsAffected;
    else rowsKnown = false;
  }
  if (rowsKnown) server.rowsInserted = one(rows);
  else gaps.push('some INSERT calls did not report affected rows: rows not predicted');
  if (!input.events && input.driver.eventsOmitted > 0) {
    gaps.push(
      `${input.driver.eventsOmitted} driver events were omitted from the layer and the full list was not given: the model saw only ${events.length}, so no layer is compared`,
    );
  }
  const lines = [...groups.entries()].map(([key, g]) => {
    const [kind, cls] = key.split('|');
    const sets = kind === 'batch' ? ` (${g.sets} parameter sets)` : '';
    return `${g.calls} driver ${kind}${g.calls === 1 ? '' : 's'} [${cls}]${sets} -> ${g.calls === 1 ? '' : 'each '}${g.wireWords} -> ${g.serverWords}`;
  });
  return { wire, server, lines, gaps };
}

const FELL_BACK = 'the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed)';

/** Likely causes, by layer and direction: the first thing to check when a count is off. */
function serverCause(field: string, actual: number, r: Range, input: ReconcileInput): string {
  const batches = (input.events ?? input.driver.events).filter((e) => e.kind === 'batch');
  const sets = batches.reduce((n, e) => n + e.parameterSets, 0);
  if ((field === 'executes' || field === 'statements') && batches.length > 0 && actual >= sets && actual > batches.length) {
    return `${batches.length} driver batch(es) became ${actual} server ${field}: ${FELL_BACK}`;
  }
  if (field === 'bulkExecutes' && batches.length > 0 && actual < r.min) return `${batches.length} driver batch(es) became ${actual} bulk commands: ${FELL_BACK}`;
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
  const partial = !input.events && input.driver.eventsOmitted > 0;

  if (input.wire) {
    const seen = input.wire.commands;
    const parts: string[] = [];
    for (const [cmd, r] of Object.entries(prediction.wire)) {
      const actual = seen[cmd] ?? 0;
      parts.push(`${cmd} ${actual}`);
      if (!partial && (actual < r.min || actual > r.max)) {
        discrepancies.push(
          `wire layer: ${actual} ${cmd}, model predicts ${rangeText(r)} from ${input.driver.calls} driver calls (${
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

  const batches = (input.events ?? input.driver.events).filter((e) => e.kind === 'batch');
  const bulkExpected = batches.length > 0 && input.capabilities.bulkExecute && input.driverOptions?.bulk !== false;
  const bulkBatches = batches.length;
  const bulkSets = batches.reduce((n, e) => n + e.parameterSets, 0);
  if (input.server) {
    const parts: string[] = [];
    for (const [field, r] of Object.entries(prediction.server) as [keyof ServerSummary, Range][]) {
      const actual = input.server[field];
      if (actual === null || actual === undefined) continue;
      parts.push(`${field} ${actual}`);
      // One execute per parameter set fits the bulk range too, but it is what a fallback looks like.
      const fellBack = bulkExpected && (field === 'executes' || field === 'statements') && actual >= bulkSets && actual > bulkBatches;
      if (!partial && (actual < r.min || actual > r.max || fellBack)) {
        discrepancies.push(`server layer: ${field} ${actual}, model predicts ${rangeText(r)}: ${serverCause(field, actual, r, input)}`);
      }
    }
    if (parts.length > 0) reconciliation.push(`server: ${parts.join(', ')}`);
  }
  for (const gap of prediction.gaps) reconciliation.push(`not modelled: ${gap}`);
  return { reconciliation, discrepancies, prediction };
}
