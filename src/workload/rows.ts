import { SqltallyError } from '../shared/errors';
import type { Phase } from '../shared/errors';
import { BufferClass, isArray, mathImul, numberIsFinite, numberIsInteger, toBigInt } from '../shared/intrinsics';

/**
 * One row of the workload table, in column order `c1..c6`:
 * integer, integer, short text, double, bigint, short text.
 *
 * `c5` is a `bigint` because its values go beyond 2^53: every driver sqltally uses binds a JS `bigint` exactly
 * (mysql2 `query` writes the digits, mysql2 `execute` sends it as a string the server converts, mariadb sends an
 * 8-byte integer below 2^63, pg and its array literals call `toString()`, better-sqlite3 binds an int64).
 * A `number` there would already have lost the low bits before any driver saw it.
 */
export type Row = readonly [c1: number, c2: number, c3: string, c4: number, c5: bigint, c6: string];

export const COLUMN_NAMES = ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'] as const;
export const COLUMN_COUNT = COLUMN_NAMES.length;
/** The text columns are VARCHAR(32); the limit is in characters (code points), as the DDL means it. */
export const TEXT_MAX_CHARS = 32;
export const DEFAULT_SEED = 0x5eed_7a11;

const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TWO_POW_53 = 2n ** 53n;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** 32-bit avalanche (murmur3 finaliser): rows are a pure function of (seed, index), no state carried between rows. */
function mix32(seed: number, index: number, lane: number): number {
  let h = (seed ^ mathImul(index + 1, 0x9e3779b1) ^ mathImul(lane + 1, 0x85ebca77)) >>> 0;
  h ^= h >>> 16;
  h = mathImul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = mathImul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

// Text that breaks hand-written escaping (quotes, a backslash, `?` and `$1` placeholders, multi-byte UTF-8, the empty
// string), each within 32 bytes so it fits VARCHAR(32) even on a server that counts bytes.
function textC3(index: number, h: number): string {
  if (index % 37 === 5) return '';
  if (index % 7 === 0) return `O'Brien ''${index}`;
  if (index % 11 === 0) return `back\\slash\\${index}`;
  if (index % 13 === 0) return `café ✓ ${index}`;
  if (index % 17 === 0) return `"dq" ? $1 ${index}`;
  if (index % 19 === 0) return `emoji 🚀 ${index}`;
  return `row-${index}-${(h % 46_656).toString(36)}`;
}

function textC6(index: number, h: number): string {
  if (index % 41 === 3) return `tab\there;--${index % 1000}`;
  return `h${h.toString(36)}`;
}

// Never an integer in int32 range: the mariadb connector types an integral number as INT and anything else as
// DOUBLE, and a type change inside a batch splits the bulk command, which would blur the wire counts.
function doubleC4(index: number, h: number): number {
  if (index % 23 === 0) return 1.5e-300 * (index + 1);
  if (index % 29 === 0) return -1.7e300 / (index + 1);
  return ((h % 2_000_001) - 1_000_000) / 1000 + 0.0005 + index * 1e-9;
}

function bigintC5(index: number, h: number): bigint {
  if (index % 31 === 0) return index % 2 === 0 ? INT64_MAX - toBigInt(index) : INT64_MIN + toBigInt(index) + 1n;
  const magnitude = TWO_POW_53 + 1n + toBigInt(h) * 1_000_003n + toBigInt(index);
  return index % 2 === 0 ? magnitude : -magnitude;
}

/** The row at `index` for `seed`: the same on every call, machine and backend. */
export function rowAt(index: number, seed = DEFAULT_SEED): Row {
  const h2 = mix32(seed, index, 2);
  const c2 = (mix32(seed, index, 1) % 2_000_000_000) - 1_000_000_000;
  return [index, c2, textC3(index, h2), doubleC4(index, mix32(seed, index, 3)), bigintC5(index, mix32(seed, index, 4)), textC6(index, mix32(seed, index, 5))];
}

export interface RowOptions {
  /** Changes every generated value except `c1`; default {@link DEFAULT_SEED}. */
  seed?: number;
}

/** `count` rows, `c1` running 0..count-1. */
export function makeRows(count: number, options: RowOptions = {}): Row[] {
  if (!Number.isSafeInteger(count) || count < 0 || count > INT32_MAX) {
    throw new SqltallyError(`row count must be an integer between 0 and ${INT32_MAX}, got ${String(count)}`, { phase: 'config' });
  }
  const seed = options.seed ?? DEFAULT_SEED;
  const rows = new Array<Row>(count);
  for (let i = 0; i < count; i++) rows[i] = rowAt(i, seed);
  return rows;
}

/**
 * What a table holding exactly `makeRows(count)` must sum to. Integer sums are exact `bigint`s (the servers return
 * them as text); `c5` is summed as its quotient and remainder by 10^9 (truncating, sign of the dividend, as
 * MySQL `DIV`/`%`, PostgreSQL and SQLite integer `/`/`%` all do) so no server overflows, SQLite included.
 */
export interface RowsChecksum {
  count: bigint;
  sumC1: bigint;
  sumC2: bigint;
  sumC5Hi: bigint;
  sumC5Lo: bigint;
  /** UTF-8 bytes of c3 and c6 together: a doubled quote or a lost backslash changes it. */
  textBytes: bigint;
}

export const C5_SPLIT = 1_000_000_000n;

export function checksumOf(rows: readonly Row[]): RowsChecksum {
  const sum: RowsChecksum = { count: 0n, sumC1: 0n, sumC2: 0n, sumC5Hi: 0n, sumC5Lo: 0n, textBytes: 0n };
  for (const row of rows) {
    sum.count += 1n;
    sum.sumC1 += toBigInt(row[0]);
    sum.sumC2 += toBigInt(row[1]);
    sum.sumC5Hi += row[4] / C5_SPLIT;
    sum.sumC5Lo += row[4] % C5_SPLIT;
    sum.textBytes += toBigInt(BufferClass.byteLength(row[2], 'utf8') + BufferClass.byteLength(row[5], 'utf8'));
  }
  return sum;
}

/** Indexes worth reading back whole: the first and last row and one of each special text/number case. */
export function sampleIndexes(count: number): number[] {
  const wanted = [0, 1, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 41, 44, count - 1];
  return [...new Set(wanted.filter((i) => i >= 0 && i < count))].sort((a, b) => a - b);
}

/** Where a bad row was found, so the error can name backend, phase and statement. */
export interface RowCheckContext {
  backend?: string;
  phase?: Phase;
  statement?: string;
}

function describeValue(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'function') return 'a function';
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return String(value);
}

/** Code points in `text`, as `[...text].length` counts them (a lone surrogate is one), without making the array. */
function codePoints(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++, n++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
  }
  return n;
}

function columnProblem(column: number, value: unknown): string | undefined {
  switch (column) {
    case 0:
    case 1:
      if (typeof value !== 'number' || !numberIsInteger(value)) return 'must be an integer number';
      if (value < INT32_MIN || value > INT32_MAX) return 'is outside the INT range';
      return undefined;
    case 2:
    case 5:
      if (typeof value !== 'string') return 'must be a string';
      if (value.includes('\u0000')) return 'contains a NUL character, which PostgreSQL text and SQLite SQL literals cannot carry';
      // Code points never outnumber UTF-16 units, so only a text longer than that in units is counted (a spread
      // into an array per value was most of checking a 10000-row input).
      if (value.length > TEXT_MAX_CHARS && codePoints(value) > TEXT_MAX_CHARS) return `is longer than VARCHAR(${TEXT_MAX_CHARS})`;
      if (LONE_SURROGATE.test(value)) return 'is not well-formed Unicode (lone surrogate)';
      return undefined;
    case 3:
      if (typeof value !== 'number') return 'must be a number';
      if (!numberIsFinite(value)) return 'must be finite (MySQL and MariaDB cannot store NaN or Infinity)';
      return undefined;
    case 4:
      if (typeof value !== 'bigint') return 'must be a bigint (a number above 2^53 has already lost precision)';
      if (value < INT64_MIN || value > INT64_MAX) return 'is outside the BIGINT range';
      return undefined;
    default:
      return 'is an extra column';
  }
}

/**
 * Throws a SqltallyError naming the first bad row, column and value; runs before anything is sent, so a row the
 * driver would bind wrongly (an object stringified, NaN into an INT, a number for the bigint column) never reaches
 * the server.
 */
export function assertRows(rows: readonly unknown[], context: RowCheckContext = {}): asserts rows is readonly Row[] {
  function fail(message: string): never {
    throw new SqltallyError(message, { backend: context.backend, phase: context.phase ?? 'workload', statement: context.statement });
  }
  if (!isArray(rows)) fail(`rows must be an array, got ${describeValue(rows)}`);
  for (let r = 0; r < rows.length; r++) {
    const row: unknown = rows[r];
    if (!isArray(row)) fail(`row ${r} must be an array of ${COLUMN_COUNT} values, got ${describeValue(row)}`);
    const values = row as unknown[];
    if (values.length !== COLUMN_COUNT) {
      fail(`row ${r} has ${values.length} columns, the table has ${COLUMN_COUNT} (${COLUMN_NAMES.join(', ')})`);
    }
    for (let c = 0; c < COLUMN_COUNT; c++) {
      const problem = columnProblem(c, values[c]);
      if (problem) fail(`row ${r} column ${COLUMN_NAMES[c]} ${problem}: got ${describeValue(values[c])}`);
    }
  }
}
