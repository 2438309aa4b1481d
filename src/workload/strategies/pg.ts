import { COLUMN_COUNT, COLUMN_NAMES } from '../rows';
import type { Row } from '../rows';
import { insertHead } from '../table';
import { pipeline } from 'node:stream/promises';
import { bulkTextStream } from '../bulk-text';
import { bulkDataMessages, bulkSteps, copyFromStdinSql, loadCopyFrom } from './bulk';
import { defineStrategy, expectedCall, inTransaction, literalSteps, perRowStep, placeholderSteps, withRollback } from './shared';
import type { InsertStrategy } from './types';

const BACKENDS = ['postgres'] as const;
/** One array per column, typed so the server never has to guess from an unknown literal. */
const UNNEST_TYPES = ['int[]', 'int[]', 'text[]', 'float8[]', 'int8[]', 'text[]'] as const;

/**
 * Multi-row `$n` INSERT chunked at the bind budget. pg itself would wrap a count above 65535 to 16 bits and send a
 * corrupt Bind, so the plan refuses a budget above the limit before anything is sent.
 */
export const PG_QUERY_MULTIROW = defineStrategy({
  name: 'pg.query-multirow',
  driver: 'pg',
  backends: BACKENDS,
  summary: 'query(text, values) of a multi-row $n INSERT, chunked at the bind budget (default 30000 = 5000 rows, never above 65535)',
  chunking: 'bind-budget',
  build: (rows, table, plan) => placeholderSteps(rows, table, plan.statementRows),
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql, step.params[0] as unknown[]);
  },
  calls: (plan) => plan.statementRows.map((n) => expectedCall('query', 'query', 'insert', n * COLUMN_COUNT)),
});

/** One statement whatever N: six array parameters, `INSERT ... SELECT * FROM unnest(...)`. */
export const PG_UNNEST = defineStrategy({
  name: 'pg.unnest',
  driver: 'pg',
  backends: BACKENDS,
  summary: 'one INSERT ... SELECT * FROM unnest($1::int[], ..., $6::text[]): six array parameters for any N',
  chunking: 'single',
  build(rows, table) {
    const columns = COLUMN_NAMES.map(() => new Array<unknown>(rows.length));
    rows.forEach((row: Row, r) => row.forEach((value, c) => void ((columns[c] as unknown[])[r] = value)));
    const args = UNNEST_TYPES.map((type, i) => `$${i + 1}::${type}`).join(', ');
    return [{ sql: `${insertHead(table)} SELECT * FROM unnest(${args})`, params: [columns], rows: rows.length }];
  },
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql, step.params[0] as unknown[]);
  },
  calls: () => [expectedCall('query', 'query', 'insert', COLUMN_COUNT)],
});

/** BEGIN, one parameterised single-row `query` per row, COMMIT. */
export const PG_PER_ROW_TX = defineStrategy({
  name: 'pg.per-row-tx',
  driver: 'pg',
  backends: BACKENDS,
  summary: 'BEGIN; query(text, values) of a one-row INSERT per row; COMMIT',
  chunking: 'per-row',
  build: (rows, table) => perRowStep(rows, table),
  async run(handle, input) {
    await handle.query('BEGIN');
    await withRollback(
      async () => {
        for (const step of input.steps) {
          for (const params of step.params) await handle.query(step.sql, params as unknown[]);
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
      plan.statementRows.map(() => expectedCall('query', 'query', 'insert', COLUMN_COUNT)),
    ),
});

/** The raw-SQL twin: literals escaped for PostgreSQL, `query(sql)` without values (simple query protocol). */
export const PG_RAW_SQL = defineStrategy({
  name: 'pg.raw-sql',
  driver: 'pg',
  backends: BACKENDS,
  summary: 'hand-written multi-row INSERT with literal values, query(sql) without values (simple protocol), 10000 rows per statement',
  chunking: 'text',
  build: (rows, table, plan) => literalSteps(rows, table, plan.statementRows),
  async run(handle, input) {
    for (const step of input.steps) await handle.query(step.sql);
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('query', 'query', 'insert', 0)),
});

/**
 * `COPY ... FROM STDIN` through pg-copy-streams: `client.query(from(text))` is one driver call (a Submittable), the
 * rows stream from the workload in text format, one CopyData per chunk of rows, then CopyDone; one statement per
 * COPY on the server whatever N. A stream that fails destroys the COPY stream, which sends CopyFail.
 */
export const PG_COPY = defineStrategy({
  name: 'pg.copy',
  driver: 'pg',
  backends: BACKENDS,
  summary: "client.query(copyFrom('COPY t (...) FROM STDIN')) with the rows piped in as text, one CopyData per 1000 rows (pg-copy-streams)",
  chunking: 'bulk',
  build(rows, table, plan) {
    loadCopyFrom(table.backend);
    return bulkSteps(rows, copyFromStdinSql(table), plan);
  },
  async run(handle, input) {
    const from = loadCopyFrom(input.table.backend);
    for (const step of input.steps) {
      const copy = handle.query(from(step.sql) as never) as unknown as NodeJS.WritableStream;
      await pipeline(bulkTextStream(step.params as readonly Row[]), copy);
    }
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('query', 'query', 'other', 0)),
  wire: (plan) => ({ Query: plan.statementRows.length, CopyData: bulkDataMessages(plan), CopyDone: plan.statementRows.length, CopyFail: 0 }),
});

export const PG_STRATEGIES = [PG_QUERY_MULTIROW, PG_UNNEST, PG_PER_ROW_TX, PG_RAW_SQL, PG_COPY] as const satisfies readonly InsertStrategy<'pg'>[];
