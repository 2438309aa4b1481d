import { COLUMN_COUNT } from '../rows';
import { insertHead } from '../table';
import type { ExecuteValues, QueryValues } from 'mysql2';
import type { PreparedStep } from './types';
import { bulkDataMessages, bulkSteps, loadDataLocalSql, runLoadData } from './bulk';
import { defineStrategy, expectedCall, inTransaction, literalSteps, perRowStep, placeholderSteps, withRollback } from './shared';
import type { InsertStrategy } from './types';

const BACKENDS = ['mysql', 'mariadb'] as const;

/**
 * `query('INSERT ... VALUES ?', [rows])`: mysql2 expands the nested arrays into literals on the client and sends
 * one COM_QUERY per chunk; chunks follow the text row rule (10000 rows per statement).
 */
export const MYSQL2_QUERY_MULTIROW = defineStrategy({
  name: 'mysql2.query-multirow',
  driver: 'mysql2',
  backends: BACKENDS,
  summary: "query('INSERT ... VALUES ?', [rows]): client-side expansion, one COM_QUERY per 10000 rows",
  chunking: 'text',
  build(rows, table, plan) {
    const sql = `${insertHead(table)} VALUES ?`;
    const steps: PreparedStep[] = [];
    let at = 0;
    for (const size of plan.statementRows) {
      steps.push({ sql, params: [[rows.slice(at, at + size)]], rows: size });
      at += size;
    }
    return steps;
  },
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql, step.params[0] as QueryValues);
  },
  calls: (plan) => plan.statementRows.map((n) => expectedCall('query', 'query', 'insert', n * COLUMN_COUNT)),
});

/**
 * Prepared multi-row `execute`, chunked so no statement binds more than the budget (30000 = 5000 rows). mysql2
 * prepares once per distinct SQL text on the connection, so a remainder chunk costs one more prepare on the wire.
 */
export const MYSQL2_EXECUTE_MULTIROW = defineStrategy({
  name: 'mysql2.execute-multirow',
  driver: 'mysql2',
  backends: BACKENDS,
  summary: 'execute() of a multi-row prepared INSERT, chunked at the bind budget (default 30000 values = 5000 rows)',
  chunking: 'bind-budget',
  build: (rows, table, plan) => placeholderSteps(rows, table, plan.statementRows),
  async run(handle, input) {
    for (const step of input.steps) await handle.execute(step.sql, step.params[0] as ExecuteValues[]);
  },
  calls: (plan) => plan.statementRows.map((n) => expectedCall('execute', 'execute', 'insert', n * COLUMN_COUNT)),
});

/** One prepared single-row `execute` per row between BEGIN and COMMIT sent with `query`. */
export const MYSQL2_EXECUTE_PER_ROW_TX = defineStrategy({
  name: 'mysql2.execute-per-row-tx',
  driver: 'mysql2',
  backends: BACKENDS,
  summary: 'BEGIN; execute() of a one-row prepared INSERT per row; COMMIT',
  chunking: 'per-row',
  build: (rows, table) => perRowStep(rows, table),
  async run(handle, input) {
    await handle.query('BEGIN');
    await withRollback(
      async () => {
        for (const step of input.steps) {
          for (const params of step.params) await handle.execute(step.sql, params as ExecuteValues[]);
        }
        await handle.query('COMMIT');
      },
      () => handle.query('ROLLBACK'),
    );
  },
  calls: (plan) =>
    inTransaction(
      'query',
      'query',
      plan.statementRows.map(() => expectedCall('execute', 'execute', 'insert', COLUMN_COUNT)),
    ),
});

/** The raw-SQL twin: literals escaped for MySQL in prepare(), sent with a parameterless `query`. */
export const MYSQL2_RAW_SQL = defineStrategy({
  name: 'mysql2.raw-sql',
  driver: 'mysql2',
  backends: BACKENDS,
  summary: 'hand-written multi-row INSERT with literal values, query(sql) without parameters, 10000 rows per statement',
  chunking: 'text',
  build: (rows, table, plan) => literalSteps(rows, table, plan.statementRows),
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql);
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('query', 'query', 'insert', 0)),
});

/**
 * `LOAD DATA LOCAL INFILE` through mysql2: `query({ sql, infileStreamFactory })`, one driver call per statement; the
 * server asks for the file and mysql2 sends each chunk the stream gives as one packet, then an empty one. A server
 * with local_infile off refuses it, and the error says so.
 */
export const MYSQL2_LOAD_DATA = defineStrategy({
  name: 'mysql2.load-data',
  driver: 'mysql2',
  backends: BACKENDS,
  summary: "query({ sql: 'LOAD DATA LOCAL INFILE ...', infileStreamFactory }) with the rows streamed as text, one packet per 1000 rows",
  chunking: 'bulk',
  build: (rows, table, plan) => bulkSteps(rows, loadDataLocalSql(table), plan),
  run: (handle, input) => runLoadData((options) => handle.query(options), input),
  calls: (plan) => plan.statementRows.map(() => expectedCall('query', 'query', 'other', 0)),
  wire: (plan) => ({ COM_QUERY: plan.statementRows.length, LocalInfileData: bulkDataMessages(plan), LocalInfileEnd: plan.statementRows.length }),
});

export const MYSQL2_STRATEGIES = [
  MYSQL2_QUERY_MULTIROW,
  MYSQL2_EXECUTE_MULTIROW,
  MYSQL2_EXECUTE_PER_ROW_TX,
  MYSQL2_RAW_SQL,
  MYSQL2_LOAD_DATA,
] as const satisfies readonly InsertStrategy<'mysql2'>[];
