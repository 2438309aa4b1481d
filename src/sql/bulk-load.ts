/**
 * Statements that load rows from a stream the client sends after the statement: PostgreSQL's `COPY ... FROM STDIN`
 * and MySQL's `LOAD DATA LOCAL INFILE`. Their driver call reports the rows loaded (`COPY n`, the OK packet's
 * affected rows), so the rows they write are predicted as an INSERT's are, and their wire model has the data
 * messages that follow the statement.
 */
export type BulkLoad = 'copy-from-stdin' | 'load-data-local';

// Leading comments and whitespace skipped; the rest read loosely: a false match only gives a model more messages
// to expect, and the counts on the wire still have to be there.
const LEAD = String.raw`^(?:\s+|--[^\n]*\n|/\*[\s\S]*?\*/)*`;
const COPY_FROM_STDIN = new RegExp(`${LEAD}COPY\\b[\\s\\S]*?\\bFROM\\s+STDIN\\b`, 'i');
const LOAD_DATA_LOCAL = new RegExp(`${LEAD}LOAD\\s+(?:DATA|XML)\\s+(?:(?:LOW_PRIORITY|CONCURRENT)\\s+)?LOCAL\\b`, 'i');

const CACHE = new Map<string, BulkLoad | null>();
const CACHE_LIMIT = 256;

/** Which bulk load `sql` is, or null. Asked per group of calls (per text), not per call. */
export function bulkLoadOf(sql: string): BulkLoad | null {
  let known = CACHE.get(sql);
  if (known !== undefined) return known;
  known = COPY_FROM_STDIN.test(sql) ? 'copy-from-stdin' : LOAD_DATA_LOCAL.test(sql) ? 'load-data-local' : null;
  if (CACHE.size >= CACHE_LIMIT) CACHE.clear();
  CACHE.set(sql, known);
  return known;
}
