import { SqltallyError } from '../../shared/errors';
import type { BackendName } from '../../backends/types';
import type { DriverName } from '../../shared/driver-names';
import type { CallKind, StatementClass } from '../../sql/events';
import { planChunks, planTextChunks, TEXT_ROWS_PER_STATEMENT } from '../chunking';
import { assertRows, COLUMN_COUNT } from '../rows';
import type { Row } from '../rows';
import { parseBackendId } from '../../backends/registry';
import { insertHead, placeholderRows } from '../table';
import { rowLiteral } from '../dialects/types';
import type { WorkloadTable } from '../table';
import type { DriverHandle, ExpectedCall, ExpectedDriverCounts, InsertPlan, InsertStrategy, PlanOptions, PreparedInput, PreparedStep } from './types';

/**
 * How a strategy cuts N rows into INSERT executions: by the bind-value budget, by the text row rule, one row per
 * execution, or everything in one call (a batch, an unnest).
 */
export type Chunking = 'bind-budget' | 'text' | 'per-row' | 'single' | 'bulk';

/** What a driver file writes per strategy; {@link defineStrategy} adds the checking common to all. */
export interface StrategySpec<D extends DriverName> {
  name: string;
  driver: D;
  backends: readonly BackendName[];
  summary: string;
  connectionOptions?: Readonly<Record<string, unknown>>;
  chunking: Chunking;
  /** Builds the steps from rows already checked; runs outside the timed part. */
  build(rows: readonly Row[], table: WorkloadTable, plan: InsertPlan): PreparedStep[];
  run(handle: DriverHandle<D>, input: PreparedInput): Promise<void>;
  /** The driver calls `run` makes for `plan`, in order. */
  calls(plan: InsertPlan): ExpectedCall[];
  /** Wire commands the plan fixes exactly that no driver model can (see {@link ExpectedDriverCounts.wire}). */
  wire?(plan: InsertPlan): Record<string, number>;
}

export function expectedCall(method: string, kind: CallKind, statementClass: StatementClass, bindValues: number, parameterSets = 1): ExpectedCall {
  return { method, kind, statementClass, bindValues, parameterSets };
}

/** BEGIN, the calls, COMMIT: the transaction control the strategy sends itself, so a driver layer sees it. */
export function inTransaction(method: string, kind: CallKind, calls: ExpectedCall[]): ExpectedCall[] {
  return [expectedCall(method, kind, 'begin', 0), ...calls, expectedCall(method, kind, 'commit', 0)];
}

export function summarizeExpected(sequence: ExpectedCall[]): ExpectedDriverCounts {
  const byKind: Partial<Record<CallKind, number>> = {};
  const byClass: Partial<Record<StatementClass, number>> = {};
  let parameterSets = 0;
  for (const call of sequence) {
    byKind[call.kind] = (byKind[call.kind] ?? 0) + 1;
    byClass[call.statementClass] = (byClass[call.statementClass] ?? 0) + 1;
    parameterSets += call.parameterSets;
  }
  return { calls: sequence.length, parameterSets, bindValuesPerCall: sequence.map((c) => c.bindValues), byKind, byClass, sequence };
}

function statementRowsFor(chunking: Chunking, rows: number, budgetRows: number[], textRows: number[], bulkRows: number[]): number[] {
  switch (chunking) {
    case 'bind-budget':
      return budgetRows;
    case 'text':
      return textRows;
    case 'per-row':
      return new Array<number>(rows).fill(1);
    case 'single':
      return [rows];
    case 'bulk':
      return bulkRows;
  }
}

/** Runs `body`; on failure sends ROLLBACK (its own error ignored: the original one is what the user needs). */
export async function withRollback(body: () => Promise<void>, rollback: () => Promise<unknown>): Promise<void> {
  try {
    await body();
  } catch (err) {
    await rollback().catch(() => undefined);
    throw err;
  }
}

/** Turns a spec into an {@link InsertStrategy} that plans, checks and counts the same way on every driver. */
export function defineStrategy<D extends DriverName>(spec: StrategySpec<D>): InsertStrategy<D> {
  const plan = (rows: number, caps: { maxBindValues: number }, options: PlanOptions = {}): InsertPlan => {
    const requested = options.backend ?? spec.backends[0];
    if (requested === undefined) throw new SqltallyError(`strategy ${spec.name} lists no backend`, { phase: 'config' });
    const backend = parseBackendId(requested).name;
    if (!spec.backends.includes(backend)) {
      throw new SqltallyError(`strategy ${spec.name} does not run on ${backend}; it is for ${spec.backends.join(', ')}`, {
        backend: String(requested),
        phase: 'config',
      });
    }
    // The capability the backend reported (declared per flavour, refined from the server): the one the report shows.
    const bindLimit = caps.maxBindValues;
    const head = `${spec.name}: INSERT INTO ... (${COLUMN_COUNT} columns)`;
    const chunks = planChunks({ rows, columns: COLUMN_COUNT, budget: options.bindBudget, limit: bindLimit, backend: String(requested), statement: head });
    const textRowsPerStatement = options.textRowsPerStatement ?? TEXT_ROWS_PER_STATEMENT;
    const textRows = planTextChunks(rows, textRowsPerStatement, String(requested));
    // A COPY / LOAD DATA carries every row in one statement unless the run asks for a cap; 0 rows is still one.
    const bulkRows = options.bulkRowsPerStatement === undefined || rows === 0 ? [rows] : planTextChunks(rows, options.bulkRowsPerStatement, String(requested));
    return {
      strategy: spec.name,
      backend,
      rows,
      statementRows: statementRowsFor(spec.chunking, rows, chunks.statementRows, textRows, bulkRows),
      bindBudget: chunks.budget,
      bindLimit,
      textRowsPerStatement,
    };
  };

  return {
    name: spec.name,
    driver: spec.driver,
    backends: spec.backends,
    summary: spec.summary,
    ...(spec.connectionOptions ? { connectionOptions: spec.connectionOptions } : {}),
    plan,
    prepare(rows, table, insertPlan) {
      const context = { backend: table.backend, phase: 'workload' as const, statement: insertHead(table) };
      if (insertPlan.strategy !== spec.name) {
        throw new SqltallyError(`plan was made by ${insertPlan.strategy}, not ${spec.name}`, context);
      }
      if (table.backend !== insertPlan.backend) {
        throw new SqltallyError(`table is for ${table.backend} but the plan is for ${insertPlan.backend}`, context);
      }
      assertRows(rows, context);
      if (rows.length !== insertPlan.rows) {
        throw new SqltallyError(`plan is for ${insertPlan.rows} rows but ${rows.length} were given`, context);
      }
      return { strategy: spec.name, table, rows: rows.length, steps: spec.build(rows, table, insertPlan) };
    },
    run: spec.run,
    expectedDriverCounts(rows, caps, options) {
      const planned = plan(rows, caps, options);
      const expected = summarizeExpected(spec.calls(planned));
      return spec.wire ? { ...expected, wire: spec.wire(planned) } : expected;
    },
  };
}

/** Flattens rows into one positional value list for a multi-row placeholder statement. */
export function flatValues(rows: readonly Row[]): unknown[] {
  const out = new Array<unknown>(rows.length * COLUMN_COUNT);
  let at = 0;
  for (const row of rows) for (const value of row) out[at++] = value;
  return out;
}

/** The distinct chunk sizes in order of first use: one prepare each, where a driver prepares explicitly. */
export function distinctSizes(sizes: readonly number[]): number[] {
  return [...new Set(sizes)];
}

/** `INSERT ... VALUES (?, ...), ...` per chunk with the chunk's values flattened: one parameter set per step. */
export function placeholderSteps(rows: readonly Row[], table: WorkloadTable, sizes: readonly number[]): PreparedStep[] {
  const sqlBySize = new Map<number, string>();
  const steps: PreparedStep[] = [];
  let at = 0;
  for (const size of sizes) {
    let sql = sqlBySize.get(size);
    if (sql === undefined) {
      sql = `${insertHead(table)} VALUES ${placeholderRows(table, size)}`;
      sqlBySize.set(size, sql);
    }
    steps.push({ sql, params: [flatValues(rows.slice(at, at + size))], rows: size });
    at += size;
  }
  return steps;
}

/** The hand-written twin: literal values, escaped for the dialect, no parameters at all. */
export function literalSteps(rows: readonly Row[], table: WorkloadTable, sizes: readonly number[]): PreparedStep[] {
  const steps: PreparedStep[] = [];
  let at = 0;
  for (const size of sizes) {
    const literals = new Array<string>(size);
    for (let i = 0; i < size; i++) literals[i] = rowLiteral(table.dialect, rows[at + i] as Row);
    steps.push({ sql: `${insertHead(table)} VALUES ${literals.join(', ')}`, params: [[]], rows: size });
    at += size;
  }
  return steps;
}

/** One single-row statement and every row as its own parameter set (per-row loops and batches). */
export function perRowStep(rows: readonly Row[], table: WorkloadTable): PreparedStep[] {
  return [{ sql: `${insertHead(table)} VALUES ${placeholderRows(table, 1)}`, params: rows, rows: rows.length }];
}

/**
 * A multi-row INSERT prepared once per chunk size and run once per chunk, its values as one array (no
 * 30000-argument spread); every statement it prepared is finalized afterwards where the driver asks for that.
 */
export async function runPreparedPerSize<S>(
  steps: readonly PreparedStep[],
  driver: { prepare(sql: string): S; run(statement: S, values: unknown[]): unknown; finalize?(statement: S): Promise<void> },
): Promise<void> {
  const prepared = new Map<string, S>();
  try {
    for (const step of steps) {
      let statement = prepared.get(step.sql);
      if (statement === undefined) {
        statement = driver.prepare(step.sql);
        prepared.set(step.sql, statement);
      }
      await driver.run(statement, step.params[0] as unknown[]);
    }
  } finally {
    if (driver.finalize) for (const statement of prepared.values()) await driver.finalize(statement);
  }
}

/** The calls of {@link runPreparedPerSize}: a prepare the first time a chunk size comes up, then one run per chunk. */
export function preparedPerSizeCalls(plan: InsertPlan): ExpectedCall[] {
  const calls: ExpectedCall[] = [];
  const seen = new Set<number>();
  for (const n of plan.statementRows) {
    if (!seen.has(n)) {
      seen.add(n);
      calls.push(expectedCall('prepare', 'prepare', 'insert', 0, 0));
    }
    calls.push(expectedCall('run', 'execute', 'insert', n * COLUMN_COUNT));
  }
  return calls;
}
