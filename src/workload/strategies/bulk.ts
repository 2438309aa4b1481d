import { createRequire } from 'node:module';
import type { Readable, Writable } from 'node:stream';
import { SqltallyError } from '../../shared/errors';
import { sliceBySizes } from '../chunking';
import { bulkChunks, bulkTextStream, BULK_ROWS_PER_CHUNK } from '../bulk-text';
import { COLUMN_NAMES } from '../rows';
import type { Row } from '../rows';
import type { WorkloadTable } from '../table';
import type { InsertPlan, PreparedInput, PreparedStep } from './types';

/** `COPY <t> (c1, ..., c6) FROM STDIN`: text format, the server's defaults (tab, `\N`). */
export function copyFromStdinSql(table: WorkloadTable): string {
  return `COPY ${table.quoted} (${COLUMN_NAMES.join(', ')}) FROM STDIN`;
}

/**
 * `LOAD DATA LOCAL INFILE` with the default FIELDS/LINES options (tab-separated, backslash escapes, `\N`), the
 * file name only a label the driver's stream factory is asked for, and the text read as UTF-8 whatever the
 * database's character set.
 */
export function loadDataLocalSql(table: WorkloadTable): string {
  return `LOAD DATA LOCAL INFILE 'sqltally-rows.tsv' INTO TABLE ${table.quoted} CHARACTER SET utf8mb4 (${COLUMN_NAMES.join(', ')})`;
}

/** One step per COPY/LOAD statement: its text and the rows it streams (the rows themselves, not their text). */
export function bulkSteps(rows: readonly Row[], sql: string, plan: InsertPlan): PreparedStep[] {
  return sliceBySizes(rows, plan.statementRows).map((chunk) => ({ sql, params: chunk, rows: chunk.length }));
}

/** CopyData messages (or LOCAL INFILE data writes) the plan's statements send: one per chunk of rows. */
export function bulkDataMessages(plan: InsertPlan, rowsPerChunk = BULK_ROWS_PER_CHUNK): number {
  return plan.statementRows.reduce((n, rows) => n + bulkChunks(rows, rowsPerChunk), 0);
}

/** pg-copy-streams' `from(text)`: a Submittable Writable that sends one CopyData per chunk written. */
export type CopyFrom = (text: string) => Writable & { rowCount: number };

let copyFrom: CopyFrom | null = null;

/**
 * pg-copy-streams, loaded when a COPY strategy builds its input (outside the timed part): an optional peer, as the
 * drivers are, so a run without it fails that strategy with the package to install.
 */
export function loadCopyFrom(backend?: string): CopyFrom {
  if (copyFrom) return copyFrom;
  try {
    const required = createRequire(__filename)('pg-copy-streams') as { from: CopyFrom };
    copyFrom = required.from;
    return copyFrom;
  } catch (cause) {
    throw new SqltallyError('the pg.copy strategy needs the package "pg-copy-streams", which is not installed', {
      backend,
      phase: 'workload',
      cause,
      hint: 'npm install pg-copy-streams (an optional peer dependency, used only by pg.copy)',
    });
  }
}

/**
 * The servers' refusals of LOCAL INFILE: ER_NOT_ALLOWED_COMMAND (1148), MySQL 8's ER_CLIENT_LOCAL_FILES_DISABLED
 * (3948), MariaDB 10.5+'s ER_LOAD_INFILE_CAPABILITY_DISABLED (4166).
 */
const LOCAL_INFILE_REFUSED = new Set([1148, 3948, 4166]);

/**
 * A LOAD DATA LOCAL that the server refused because `local_infile` is off there: a SqltallyError that names the
 * setting (the servers' own messages do not), the driver's error kept as its cause. Any other error is returned as
 * it is.
 */
export function localInfileRefusal(error: unknown, backend: string, sql: string): unknown {
  const errno = (error as { errno?: unknown } | null)?.errno;
  if (typeof errno !== 'number' || !LOCAL_INFILE_REFUSED.has(errno)) return error;
  return new SqltallyError(`the server refused LOAD DATA LOCAL INFILE: its local_infile setting is OFF (${(error as Error).message})`, {
    backend,
    phase: 'workload',
    statement: sql,
    cause: error,
    hint: 'SET GLOBAL local_infile = 1 on the server (or start it with --local-infile=1); sqltally starts its private servers with it on',
  });
}

/** What a LOAD DATA LOCAL strategy calls: a `query` that takes the file as a stream factory (mysql2 and mariadb alike). */
export type InfileQuery = (options: { sql: string; infileStreamFactory: () => Readable }) => Promise<unknown>;

/** Each step as one LOAD DATA LOCAL INFILE, its rows streamed as text; a refusal names the server's local_infile. */
export async function runLoadData(query: InfileQuery, input: PreparedInput): Promise<void> {
  for (const step of input.steps) {
    const rows = step.params as readonly Row[];
    try {
      await query({ sql: step.sql, infileStreamFactory: () => bulkTextStream(rows) });
    } catch (error) {
      throw localInfileRefusal(error, input.table.backend, step.sql);
    }
  }
}
