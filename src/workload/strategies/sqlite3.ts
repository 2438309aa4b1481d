import type { Database, Statement } from 'sqlite3';
import { COLUMN_COUNT } from '../rows';
import { defineStrategy, expectedCall, literalSteps, perRowStep, placeholderSteps, preparedPerSizeCalls, runPreparedPerSize } from './shared';
import type { InsertStrategy, PreparedStep } from './types';

const BACKENDS = ['sqlite'] as const;

/**
 * node-sqlite3 (5.1.7) binds a JS bigint as NULL, without an error; its decimal text goes into the INTEGER column as
 * the exact 64-bit integer (SQLite's column affinity converts a well-formed integer text).
 */
function bigintsAsText(steps: PreparedStep[]): PreparedStep[] {
  return steps.map((step) => ({ ...step, params: step.params.map((set) => set.map((v) => (typeof v === 'bigint' ? v.toString() : v))) }));
}

/** Runs one node-sqlite3 call to its callback. */
function call(fn: (cb: (err: Error | null) => void) => unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    fn((err) => (err ? reject(err) : resolve()));
  });
}

/**
 * node-sqlite3's documented bulk insert: inside `serialize()`, BEGIN, one `prepare`, `run` per row queued without
 * waiting, `finalize`; then COMMIT, or ROLLBACK when a row failed (every queued call has run by then, so the choice
 * is made on the outcome, not at queue time).
 */
export const SQLITE3_PER_ROW_TX = defineStrategy({
  name: 'sqlite3.per-row-tx',
  driver: 'sqlite3',
  backends: BACKENDS,
  summary: 'inside serialize(): run(BEGIN), prepare() once, run() per row queued without waiting, then run(COMMIT)',
  chunking: 'per-row',
  build: (rows, table) => bigintsAsText(perRowStep(rows, table)),
  async run(db, input) {
    for (const step of input.steps) {
      let failure: Error | null = null;
      const keep = (err: Error | null): void => {
        failure ??= err;
      };
      await new Promise<void>((resolve) => {
        db.serialize(() => {
          db.run('BEGIN', keep);
          const statement = db.prepare(step.sql, keep);
          for (const params of step.params) statement.run(params as unknown[], keep);
          statement.finalize(() => resolve());
        });
      });
      await call((cb) => db.run(failure ? 'ROLLBACK' : 'COMMIT', cb));
      if (failure) throw failure;
    }
  },
  calls: (plan) => [
    expectedCall('run', 'query', 'begin', 0),
    expectedCall('prepare', 'prepare', 'insert', 0, 0),
    ...plan.statementRows.map(() => expectedCall('run', 'execute', 'insert', COLUMN_COUNT)),
    expectedCall('run', 'query', 'commit', 0),
  ],
});

/**
 * Multi-row `?` INSERT chunked under SQLite's variable limit (and the bind budget); one `prepare` per distinct
 * chunk size, then `run` per chunk, each its own implicit transaction.
 */
export const SQLITE3_MULTIROW = defineStrategy({
  name: 'sqlite3.multirow',
  driver: 'sqlite3',
  backends: BACKENDS,
  summary:
    'prepare() a multi-row INSERT per chunk size, run() per chunk; chunks at the bind budget (default 30000 = 5000 rows), never above SQLITE_MAX_VARIABLE_NUMBER',
  chunking: 'bind-budget',
  build: (rows, table, plan) => bigintsAsText(placeholderSteps(rows, table, plan.statementRows)),
  run: (db, input) =>
    runPreparedPerSize<Statement>(input.steps, {
      prepare: (sql) => db.prepare(sql),
      run: (statement, values) => call((cb) => statement.run(values, cb)),
      finalize: (statement) => call((cb) => statement.finalize(cb)),
    }),
  calls: preparedPerSizeCalls,
});

/** The raw-SQL twin: literals escaped for SQLite, `exec(sql)`. */
export const SQLITE3_RAW_SQL = defineStrategy({
  name: 'sqlite3.raw-sql',
  driver: 'sqlite3',
  backends: BACKENDS,
  summary: 'hand-written multi-row INSERT with literal values, exec(sql), 10000 rows per statement',
  chunking: 'text',
  build: (rows, table, plan) => literalSteps(rows, table, plan.statementRows),
  async run(db: Database, input) {
    for (const step of input.steps) await call((cb) => db.exec(step.sql, cb));
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('exec', 'query', 'insert', 0)),
});

export const SQLITE3_STRATEGIES = [SQLITE3_PER_ROW_TX, SQLITE3_MULTIROW, SQLITE3_RAW_SQL] as const satisfies readonly InsertStrategy<'sqlite3'>[];
