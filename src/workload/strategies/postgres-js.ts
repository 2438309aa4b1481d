import { COLUMN_COUNT, COLUMN_NAMES } from '../rows';
import type { Row } from '../rows';
import { sliceBySizes } from '../chunking';
import { pipeline } from 'node:stream/promises';
import type { Writable } from 'node:stream';
import { bulkTextStream } from '../bulk-text';
import { bulkDataMessages, bulkSteps, copyFromStdinSql } from './bulk';
import { defineStrategy, expectedCall, inTransaction, perRowStep } from './shared';
import type { InsertStrategy, PreparedStep } from './types';

const BACKENDS = ['postgres'] as const;

/** A row as postgres.js's `sql(rows, ...columns)` helper reads it: by column name. */
function rowObject(row: Row): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  COLUMN_NAMES.forEach((name, i) => (out[name] = row[i]));
  return out;
}

/**
 * postgres.js's own bulk insert: `sql\`INSERT INTO t ${sql(rows, ...columns)}\``, which it expands into one
 * multi-row `VALUES ($1, ...), ...` statement, chunked at the bind budget (default 30000 = 5000 rows; postgres.js
 * itself refuses 65534 parameters and more). Each distinct chunk size is a named prepared statement.
 */
export const POSTGRES_JS_MULTIROW = defineStrategy({
  name: 'postgres-js.multirow',
  driver: 'postgres-js',
  backends: BACKENDS,
  summary: 'sql`INSERT INTO t ${sql(rows, ...columns)}` (postgres.js multi-row helper), chunked at the bind budget (default 30000 = 5000 rows)',
  chunking: 'bind-budget',
  build(rows, table, plan): PreparedStep[] {
    return sliceBySizes(rows, plan.statementRows).map((chunk) => ({
      sql: table.name,
      params: chunk.map(rowObject) as unknown as unknown[][],
      rows: chunk.length,
    }));
  },
  async run(sql, input) {
    for (const step of input.steps) {
      await sql`INSERT INTO ${sql(step.sql)} ${sql(step.params as unknown as Record<string, unknown>[], ...COLUMN_NAMES)}`;
    }
  },
  calls: (plan) => plan.statementRows.map((n) => expectedCall('sql', 'query', 'insert', n * COLUMN_COUNT)),
});

/** One array per column, as the unnest strategy binds them. */
type UnnestColumns = [number[], number[], string[], number[], string[], string[]];

/** One statement whatever N: six array parameters, `INSERT ... SELECT * FROM unnest(...)`, a tagged template. */
export const POSTGRES_JS_UNNEST = defineStrategy({
  name: 'postgres-js.unnest',
  driver: 'postgres-js',
  backends: BACKENDS,
  summary: 'one sql`INSERT ... SELECT * FROM unnest(${c1}::int[], ..., ${c6}::text[])`: six array parameters for any N',
  chunking: 'single',
  // c5 goes as text, cast by the server: a JS bigint array is typed int8, not int8[], and the server refuses it.
  build(rows, table) {
    const columns = COLUMN_NAMES.map(() => new Array<unknown>(rows.length));
    rows.forEach((row, r) => row.forEach((value, c) => void ((columns[c] as unknown[])[r] = typeof value === 'bigint' ? value.toString() : value)));
    return [{ sql: table.name, params: [columns], rows: rows.length }];
  },
  async run(sql, input) {
    for (const step of input.steps) {
      const [c1, c2, c3, c4, c5, c6] = step.params[0] as unknown as UnnestColumns;
      await sql`INSERT INTO ${sql(step.sql)} (c1, c2, c3, c4, c5, c6) SELECT * FROM unnest(${c1}::int[], ${c2}::int[], ${c3}::text[], ${c4}::float8[], ${c5}::int8[], ${c6}::text[])`;
    }
  },
  calls: () => [expectedCall('sql', 'query', 'insert', COLUMN_COUNT)],
});

/**
 * BEGIN, one single-row INSERT per row handed to postgres.js all at once (`sql.begin(sql => rows.map(...))`), which
 * pipelines them on the transaction's connection, COMMIT: N statements in few round trips of the network.
 */
export const POSTGRES_JS_PIPELINED_TX = defineStrategy({
  name: 'postgres-js.pipelined-tx',
  driver: 'postgres-js',
  backends: BACKENDS,
  summary: 'sql.begin(sql => rows.map(r => sql`INSERT ... VALUES (${r.c1}, ...)`)): one-row INSERTs pipelined inside one transaction',
  chunking: 'per-row',
  build: (rows, table) => perRowStep(rows, table).map((step) => ({ ...step, sql: table.name })),
  async run(sql, input) {
    for (const step of input.steps) {
      const name = step.sql;
      await sql.begin((tx) =>
        step.params.map(
          (p) =>
            tx`INSERT INTO ${tx(name)} (c1, c2, c3, c4, c5, c6) VALUES (${p[0] as number}, ${p[1] as number}, ${p[2] as string}, ${p[3] as number}, ${p[4] as never}, ${p[5] as string})`,
        ),
      );
    }
  },
  calls: (plan) =>
    inTransaction(
      'begin',
      'query',
      plan.statementRows.map(() => expectedCall('sql', 'query', 'insert', COLUMN_COUNT)),
    ),
});

/**
 * `COPY ... FROM STDIN` through postgres.js: `await sql.unsafe(text).writable()` is one driver call, answered with a
 * Writable once the server sent CopyInResponse; the rows are piped in as text, one CopyData per chunk of rows.
 */
export const POSTGRES_JS_COPY = defineStrategy({
  name: 'postgres-js.copy',
  driver: 'postgres-js',
  backends: BACKENDS,
  summary: '(await sql`COPY t (...) FROM STDIN`.writable()) with the rows piped in as text, one CopyData per 1000 rows',
  chunking: 'bulk',
  build: (rows, table, plan) => bulkSteps(rows, copyFromStdinSql(table), plan),
  async run(sql, input) {
    for (const step of input.steps) {
      const writable = (await sql.unsafe(step.sql).writable()) as Writable;
      await pipeline(bulkTextStream(step.params as readonly Row[]), writable);
    }
  },
  calls: (plan) => plan.statementRows.map(() => expectedCall('unsafe', 'query', 'other', 0)),
  // postgres.js sends a CopyFail after each CopyDone (see copyInWire); the server ignores it.
  wire: (plan) => ({
    Query: plan.statementRows.length,
    CopyData: bulkDataMessages(plan),
    CopyDone: plan.statementRows.length,
    CopyFail: plan.statementRows.length,
  }),
});

export const POSTGRES_JS_STRATEGIES = [
  POSTGRES_JS_MULTIROW,
  POSTGRES_JS_UNNEST,
  POSTGRES_JS_PIPELINED_TX,
  POSTGRES_JS_COPY,
] as const satisfies readonly InsertStrategy<'postgres-js'>[];
