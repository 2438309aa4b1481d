import { COLUMN_COUNT } from '../rows';
import { bulkSteps, loadDataLocalSql, runLoadData } from './bulk';
import { defineStrategy, expectedCall, literalSteps, perRowStep, placeholderSteps } from './shared';
import type { InsertStrategy } from './types';

const BACKENDS = ['mysql', 'mariadb'] as const;

/**
 * `batch()` with the connector's defaults: against a MariaDB server that advertises it, COM_STMT_BULK_EXECUTE
 * (split by the connector only when a packet would pass max_allowed_packet); against MySQL, one pipelined
 * COM_STMT_EXECUTE per row. Either way one driver call with N parameter sets.
 */
export const MARIADB_BATCH = defineStrategy({
  name: 'mariadb.batch',
  driver: 'mariadb',
  backends: BACKENDS,
  summary: 'batch(sql, rows) with default options (bulk protocol on MariaDB, pipelined executes on MySQL)',
  chunking: 'single',
  build: (rows, table) => perRowStep(rows, table),
  async run(handle, input) {
    for (const step of input.steps) await handle.batch(step.sql, step.params as unknown[][]);
  },
  calls: (plan) => [expectedCall('batch', 'batch', 'insert', plan.rows * COLUMN_COUNT, plan.rows)],
});

/**
 * `batch()` on a connection opened with `bulk: false`: the connector prepares once and pipelines one
 * COM_STMT_EXECUTE per row. The option belongs to the connection, so the strategy carries it as data.
 */
export const MARIADB_BATCH_NO_BULK = defineStrategy({
  name: 'mariadb.batch-nobulk',
  driver: 'mariadb',
  backends: BACKENDS,
  summary: 'batch(sql, rows) on a connection with bulk: false (pipelined COM_STMT_EXECUTE per row)',
  connectionOptions: { bulk: false },
  chunking: 'single',
  build: (rows, table) => perRowStep(rows, table),
  async run(handle, input) {
    for (const step of input.steps) await handle.batch(step.sql, step.params as unknown[][]);
  },
  calls: (plan) => [expectedCall('batch', 'batch', 'insert', plan.rows * COLUMN_COUNT, plan.rows)],
});

/**
 * Multi-row `query` with `?` placeholders: the connector substitutes the values on the client (text protocol),
 * so no server parameter limit applies and chunks follow the text row rule.
 */
export const MARIADB_QUERY_MULTIROW = defineStrategy({
  name: 'mariadb.query-multirow',
  driver: 'mariadb',
  backends: BACKENDS,
  summary: "query('INSERT ... VALUES (?, ...), ...', values): client-side substitution, one COM_QUERY per 10000 rows",
  chunking: 'text',
  build: (rows, table, plan) => placeholderSteps(rows, table, plan.statementRows),
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql, step.params[0]);
  },
  calls: (plan) => plan.statementRows.map((n) => expectedCall('query', 'query', 'insert', n * COLUMN_COUNT)),
});

/** The raw-SQL twin through the mariadb connector: literals built in prepare(), `query(sql)` without values. */
export const MARIADB_RAW_SQL = defineStrategy({
  name: 'mariadb.raw-sql',
  driver: 'mariadb',
  backends: BACKENDS,
  summary: 'hand-written multi-row INSERT with literal values, query(sql) without values, 10000 rows per statement',
  chunking: 'text',
  build: (rows, table, plan) => literalSteps(rows, table, plan.statementRows),
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql);
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('query', 'query', 'insert', 0)),
});

/**
 * `LOAD DATA LOCAL INFILE` through the mariadb connector: a connection opened with `permitLocalInfile: true` (which
 * turns its pipelining off), `query({ sql, infileStreamFactory })`. The connector gathers what the stream gives into
 * packets of its own size, so its data packets follow the bytes, not the chunks: the plan fixes the request's
 * terminator, not the data packets.
 */
export const MARIADB_LOAD_DATA = defineStrategy({
  name: 'mariadb.load-data',
  driver: 'mariadb',
  backends: BACKENDS,
  summary: "query({ sql: 'LOAD DATA LOCAL INFILE ...', infileStreamFactory }) on a connection with permitLocalInfile: true, the rows streamed as text",
  connectionOptions: { permitLocalInfile: true },
  chunking: 'bulk',
  build: (rows, table, plan) => bulkSteps(rows, loadDataLocalSql(table), plan),
  run: (handle, input) => runLoadData((options) => handle.query(options), input),
  calls: (plan) => plan.statementRows.map(() => expectedCall('query', 'query', 'other', 0)),
  wire: (plan) => ({ COM_QUERY: plan.statementRows.length, LocalInfileEnd: plan.statementRows.length }),
});

export const MARIADB_STRATEGIES = [
  MARIADB_BATCH,
  MARIADB_BATCH_NO_BULK,
  MARIADB_QUERY_MULTIROW,
  MARIADB_RAW_SQL,
  MARIADB_LOAD_DATA,
] as const satisfies readonly InsertStrategy<'mariadb'>[];
