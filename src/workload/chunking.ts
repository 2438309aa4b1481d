import { SqltallyError } from '../shared/errors';

/** Bind values one statement may carry unless the caller says otherwise: 5000 rows x 6 columns. */
export const DEFAULT_BIND_BUDGET = 30_000;

/**
 * Rows per statement for the text paths (client-expanded `VALUES ?`, hand-written literals). A row's literal is at
 * most about 600 bytes (two VARCHAR(32) of 4-byte characters, every one a quote doubled), so 10000 rows stay under
 * 6 MB, below MariaDB's 16 MiB and MySQL's 64 MiB default max_allowed_packet; the generated rows are about 90
 * bytes each (under 1 MB). A row rule rather than a byte rule keeps the statement count a function of N alone.
 */
export const TEXT_ROWS_PER_STATEMENT = 10_000;

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
