import { Readable } from 'node:stream';
import { SqltallyError } from '../shared/errors';
import type { Row } from './rows';

/**
 * Rows per stream chunk in the bulk paths: each chunk is one write to the driver's stream, which pg-copy-streams
 * and postgres.js send as one CopyData message, so the message count follows from the plan.
 */
export const BULK_ROWS_PER_CHUNK = 1000;

/**
 * One field in the tab-separated text format PostgreSQL's `COPY ... FROM STDIN` (text format) and MySQL's
 * `LOAD DATA` (default FIELDS/LINES options) both read: backslash, tab, newline and carriage return escaped with a
 * backslash, NULL as `\N`. Numbers in the digits the INSERT literals use, so both paths store the same values.
 */
export function bulkTextField(value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') return String(value);
  if (typeof value !== 'string') {
    throw new SqltallyError(`the bulk text format carries strings, numbers, bigints and NULL, got ${typeof value}`, { phase: 'workload' });
  }
  return ESCAPABLE.test(value) ? value.replace(ESCAPES, escapeOne) : value;
}

const ESCAPABLE = /[\\\t\n\r]/;
const ESCAPES = /[\\\t\n\r]/g;
const ESCAPE_OF: Readonly<Record<string, string>> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
function escapeOne(c: string): string {
  return ESCAPE_OF[c] as string;
}

/** One line: the fields tab-separated, ending in a newline. */
export function bulkTextLine(values: readonly unknown[]): string {
  let line = '';
  for (let i = 0; i < values.length; i++) line += (i === 0 ? '' : '\t') + bulkTextField(values[i]);
  return `${line}\n`;
}

/**
 * The rows `from` to `from + count` as a stream of UTF-8 chunks of `rowsPerChunk` lines each, each chunk encoded
 * only when the consumer asks for it: never the whole text in memory.
 */
export function bulkTextStream(rows: readonly Row[], from = 0, count = rows.length - from, rowsPerChunk = BULK_ROWS_PER_CHUNK): Readable {
  if (!Number.isSafeInteger(rowsPerChunk) || rowsPerChunk < 1) {
    throw new SqltallyError(`rows per bulk chunk must be a positive integer, got ${String(rowsPerChunk)}`, { phase: 'config' });
  }
  let at = from;
  const end = from + count;
  return new Readable({
    // One chunk per read: the stream's own buffering stays within a chunk or two.
    highWaterMark: 1,
    objectMode: true,
    read() {
      if (at >= end) {
        this.push(null);
        return;
      }
      const stop = Math.min(end, at + rowsPerChunk);
      let text = '';
      for (; at < stop; at++) text += bulkTextLine(rows[at] as Row);
      this.push(Buffer.from(text, 'utf8'));
    },
  });
}

/** The chunk sizes {@link bulkTextStream} makes for `rows` rows: the plan's CopyData messages or LOCAL INFILE writes. */
export function bulkChunks(rows: number, rowsPerChunk = BULK_ROWS_PER_CHUNK): number {
  return Math.ceil(rows / rowsPerChunk);
}

/** UTF-8 bytes of the rows as the bulk text format: what the stream carries, for the plan's byte count. */
export function bulkTextBytes(rows: readonly Row[], from = 0, count = rows.length - from): number {
  let bytes = 0;
  for (let i = from; i < from + count; i++) bytes += Buffer.byteLength(bulkTextLine(rows[i] as Row), 'utf8');
  return bytes;
}

/**
 * Reads one line of the text format back into its fields (`\N` as null), the inverse of {@link bulkTextLine}: the
 * round-trip check, and what a server does with a line.
 */
export function parseBulkTextLine(line: string): (string | null)[] {
  const body = line.endsWith('\n') ? line.slice(0, -1) : line;
  return body.split('\t').map((field) => {
    if (field === '\\N') return null;
    return field.replace(/\\(.)/g, (_m, c: string) => (c === 't' ? '\t' : c === 'n' ? '\n' : c === 'r' ? '\r' : c));
  });
}
