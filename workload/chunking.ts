import { SqltallyError } from '../containers/errors';
import type { BackendName } from '../containers/types';

/** Bind values one statement may carry unless the caller says otherwise: 5000 rows x 6 columns. */
export const DEFAULT_BIND_BUDGET = 30_000;

/**
 * The most bind values one statement can carry, by backend. MySQL/MariaDB: the prepared-statement parameter count
 * is 16 bits (the server refuses above 65535). PostgreSQL: Bind carries the count in 16 bits, and pg 8.x does not
 * check, it silently wraps (72000 values go out as 6464), so this module is the only guard. SQLite:
 * SQLITE_MAX_VARIABLE_NUMBER, 32766 by default since 3.32; {@link readSqliteVariableLimit} reads the real one.
 */
export const BIND_LIMIT_BY_BACKEND = {
  sqlite: 32_766,
  mariadb: 65_535,
  mysql: 65_535,
  postgres: 65_535,
} as const satisfies Record<BackendName, number>;

/**
 * Rows per statement for the text paths (client-expanded `VALUES ?`, hand-written literals). A row's literal is at
 * most about 600 bytes (two VARCHAR(32) of 4-byte characters, every one a quote doubled), so 10000 rows stay under
 * 6 MB, below MariaDB's 16 MiB and MySQL's 64 MiB default max_allowed_packet; the generated rows are about 90
 * bytes each (under 1 MB). A row rule rather than a byte rule keeps the statement count a function of N alone.
 */
export const TEXT_ROWS_PER_STATEMENT = 10_000;

/** The smallest of the backend's protocol limit and what the started server reported. */
export function effectiveBindLimit(backend: BackendName, reported?: number): number {
  const protocol = BIND_LIMIT_BY_BACKEND[backend];
  return reported !== undefined && Number.isSafeInteger(reported) && reported > 0 ? Math.min(protocol, reported) : protocol;
}

/**
 * SQLite's variable limit as compiled into this build (`PRAGMA compile_options` lists MAX_VARIABLE_NUMBER when it
 * was set at build time, as better-sqlite3 does); the 3.32+ default when the build does not say. Call it outside
 * any counted window: a counted handle records the pragma.
 */
export function readSqliteVariableLimit(db: { pragma(source: string, options?: { simple?: boolean }): unknown }): number {
  const options = db.pragma('compile_options') as { compile_options?: unknown }[];
  for (const option of Array.isArray(options) ? options : []) {
    const match = /^MAX_VARIABLE_NUMBER=(\d+)$/.exec(String(option.compile_options ?? ''));
    if (match?.[1]) return Number(match[1]);
  }
  return BIND_LIMIT_BY_BACKEND.sqlite;
}

/** What a chunked statement sequence looks like, decided before anything is sent. */
export interface ChunkPlan {
  /** Bind values a statement may carry, as asked. */
  budget: number;
  /** The ceiling the budget was checked against. */
  limit: number;
  rowsPerStatement: number;
  /** Rows in each statement, in order; sums to the row count. */
  statementRows: number[];
}

export interface ChunkRequest {
  rows: number;
  columns: number;
  /** Default {@link DEFAULT_BIND_BUDGET}. */
  budget?: number;
  limit: number;
  /** Named in errors. */
  backend?: string;
  /** Named in errors: the statement the budget is for. */
  statement?: string;
}

function configError(message: string, request: { backend?: string; statement?: string }): SqltallyError {
  return new SqltallyError(message, { backend: request.backend, phase: 'config', statement: request.statement });
}

export function assertRowCount(rows: unknown, backend?: string): asserts rows is number {
  if (typeof rows !== 'number' || !Number.isSafeInteger(rows) || rows < 1) {
    throw configError(`row count must be a positive integer, got ${String(rows)}`, { backend });
  }
}

/** Splits `rows` into statements of `rowsPerStatement` rows, the last one taking the remainder. */
export function splitRows(rows: number, rowsPerStatement: number): number[] {
  const full = Math.floor(rows / rowsPerStatement);
  const sizes = new Array<number>(full).fill(rowsPerStatement);
  const rest = rows - full * rowsPerStatement;
  if (rest > 0) sizes.push(rest);
  return sizes;
}

/**
 * Chunks `rows` so no statement binds more than the budget, and the budget itself is a positive integer no higher
 * than the limit and large enough for one row. Throws a config SqltallyError otherwise, before anything is sent.
 */
export function planChunks(request: ChunkRequest): ChunkPlan {
  const { rows, columns, limit } = request;
  const budget = request.budget ?? DEFAULT_BIND_BUDGET;
  assertRowCount(rows, request.backend);
  if (!Number.isSafeInteger(columns) || columns < 1) throw configError(`column count must be a positive integer, got ${columns}`, request);
  if (!Number.isSafeInteger(limit) || limit < 1) throw configError(`bind limit must be a positive integer, got ${limit}`, request);
  if (typeof budget !== 'number' || !Number.isSafeInteger(budget) || budget < 1) {
    throw configError(`bind-value budget must be a positive integer, got ${String(budget)}`, request);
  }
  if (budget > limit) {
    throw configError(`bind-value budget ${budget} is above this backend's limit of ${limit} values per statement`, request);
  }
  if (budget < columns) {
    throw configError(`bind-value budget ${budget} cannot hold one row of ${columns} values`, request);
  }
  const rowsPerStatement = Math.floor(budget / columns);
  return { budget, limit, rowsPerStatement, statementRows: splitRows(rows, rowsPerStatement) };
}

/** Rows per statement for the text paths, checked like a budget. */
export function planTextChunks(rows: number, rowsPerStatement = TEXT_ROWS_PER_STATEMENT, backend?: string): number[] {
  assertRowCount(rows, backend);
  if (!Number.isSafeInteger(rowsPerStatement) || rowsPerStatement < 1) {
    throw configError(`rows per text statement must be a positive integer, got ${String(rowsPerStatement)}`, { backend });
  }
  return splitRows(rows, rowsPerStatement);
}

/** The items cut into consecutive slices of the given sizes; the sizes must add up to the item count. */
export function sliceBySizes<T>(items: readonly T[], sizes: readonly number[]): T[][] {
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total !== items.length) {
    throw new SqltallyError(`chunk sizes add up to ${total} but there are ${items.length} rows`, { phase: 'workload' });
  }
  const out: T[][] = [];
  let at = 0;
  for (const size of sizes) {
    out.push(items.slice(at, at + size));
    at += size;
  }
  return out;
}
