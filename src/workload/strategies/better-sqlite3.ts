import type BetterSqlite3 from 'better-sqlite3';
import { COLUMN_COUNT } from '../rows';
import { defineStrategy, expectedCall, literalSteps, perRowStep, placeholderSteps, preparedPerSizeCalls, runPreparedPerSize } from './shared';
import type { InsertStrategy } from './types';

const BACKENDS = ['sqlite'] as const;

/**
 * The documented better-sqlite3 bulk insert: one `prepare`, then `run` per row inside `db.transaction()`. The
 * BEGIN/COMMIT are better-sqlite3's own; a counting proxy records them with method `transaction`.
 */
export const SQLITE_PER_ROW_TX = defineStrategy({
  name: 'better-sqlite3.per-row-tx',
  driver: 'better-sqlite3',
  backends: BACKENDS,
  summary: 'prepare() once, run() per row inside db.transaction()',
  chunking: 'per-row',
  build: (rows, table) => perRowStep(rows, table),
  async run(db, input) {
    for (const step of input.steps) {
      const statement = db.prepare(step.sql);
      const insertAll = db.transaction((sets: readonly (readonly unknown[])[]) => {
        for (const params of sets) statement.run(...params);
      });
      insertAll(step.params);
    }
  },
  calls: (plan) => [
    expectedCall('prepare', 'prepare', 'insert', 0, 0),
    expectedCall('transaction', 'query', 'begin', 0),
    ...plan.statementRows.map(() => expectedCall('run', 'execute', 'insert', COLUMN_COUNT)),
    expectedCall('transaction', 'query', 'commit', 0),
  ],
});

/**
 * Multi-row `?` INSERT chunked under SQLite's variable limit (and the bind budget); one `prepare` per distinct
 * chunk size, then `run` per chunk, each its own implicit transaction.
 */
export const SQLITE_MULTIROW = defineStrategy({
  name: 'better-sqlite3.multirow',
  driver: 'better-sqlite3',
  backends: BACKENDS,
  summary:
    'prepare() a multi-row INSERT per chunk size, run() per chunk; chunks at the bind budget (default 30000 = 5000 rows), never above SQLITE_MAX_VARIABLE_NUMBER',
  chunking: 'bind-budget',
  build: (rows, table, plan) => placeholderSteps(rows, table, plan.statementRows),
  run: (db, input) =>
    runPreparedPerSize<BetterSqlite3.Statement>(input.steps, { prepare: (sql) => db.prepare(sql), run: (statement, values) => statement.run(values) }),
  calls: preparedPerSizeCalls,
});

/** The raw-SQL twin: literals escaped for SQLite, `exec(sql)`. */
export const SQLITE_RAW_SQL = defineStrategy({
  name: 'better-sqlite3.raw-sql',
  driver: 'better-sqlite3',
  backends: BACKENDS,
  summary: 'hand-written multi-row INSERT with literal values, exec(sql), 10000 rows per statement',
  chunking: 'text',
  build: (rows, table, plan) => literalSteps(rows, table, plan.statementRows),
  async run(db, input) {
    for (const step of input.steps) db.exec(step.sql);
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('exec', 'query', 'insert', 0)),
});

export const SQLITE_STRATEGIES = [SQLITE_PER_ROW_TX, SQLITE_MULTIROW, SQLITE_RAW_SQL] as const satisfies readonly InsertStrategy<'better-sqlite3'>[];
