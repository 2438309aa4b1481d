import { SqltallyError } from '../shared/errors';
import type { StartedBackend } from '../backends/types';
import type { DriverName } from '../shared/driver-names';
import { openPlainConnection, readDriverFor, rowSource } from './connect';
import type { RowSource } from './connect';
import { READ_LIMIT, selectColumns, toRow } from './read';
import { checksumOf, DEFAULT_SEED, makeRows, rowAt, sampleIndexes } from './rows';
import type { Row, RowsChecksum } from './rows';
import { workloadTable } from './table';
import type { WorkloadTable } from './table';
import { numberIsSafeInteger, objectIs, toBigInt } from '../shared/intrinsics';

export interface VerifyOptions {
  /** The seed the rows were made with; default {@link DEFAULT_SEED}. */
  seed?: number;
  /** The driver the rows were written with: an in-process engine's are read through it (see readDriverFor). */
  cellDriver?: DriverName;
}

const CHECKSUM_FIELDS = [
  ['count', 'n'],
  ['sumC1', 's1'],
  ['sumC2', 's2'],
  ['sumC5Hi', 's5hi'],
  ['sumC5Lo', 's5lo'],
  ['textBytes', 'tb'],
] as const satisfies readonly (readonly [keyof RowsChecksum, string])[];

function asBigint(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && numberIsSafeInteger(value)) return toBigInt(value);
  if (typeof value === 'string' && /^-?\d+$/.test(value.trim())) return toBigInt(value.trim());
  return undefined;
}

function sameRow(a: Row, b: Row): boolean {
  return a.every((value, i) => objectIs(value, b[i]));
}

function showRow(row: Row): string {
  return JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}

/**
 * Checks through `source` that the table holds exactly `makeRows(expectedRows)`: the row count, exact integer
 * sums (c5 split so no server overflows), the UTF-8 bytes of the text columns, and then every row (up to
 * READ_LIMIT rows) or a sample (the quote, backslash, emoji and extreme-number cases included) compared value for
 * value, doubles to the last bit. Returns the verified count;
 * any difference is a verify-phase SqltallyError listing what differed.
 */
export async function verifyRowsWith(source: RowSource, table: WorkloadTable, expectedRows: number, options: VerifyOptions = {}): Promise<number> {
  const seed = options.seed ?? DEFAULT_SEED;
  const fail = (message: string, statement?: string): never => {
    throw new SqltallyError(message, { backend: table.backend, phase: 'verify', statement });
  };
  if (!Number.isSafeInteger(expectedRows) || expectedRows < 0) fail(`expected row count must be a non-negative integer, got ${expectedRows}`);

  const checksumSql = table.dialect.checksumSql(table.quoted);
  const [got] = await source.all(checksumSql);
  if (!got) return fail(`checksum query returned no row`, checksumSql);
  const want = checksumOf(makeRows(expectedRows, { seed }));
  const count = asBigint(got.n);
  if (count !== want.count) fail(`table ${table.name} holds ${String(got.n)} rows, expected ${want.count}`, checksumSql);
  const differences = CHECKSUM_FIELDS.filter(([field, column]) => asBigint(got[column]) !== want[field]).map(
    ([field, column]) => `${field}: table ${String(got[column])}, expected ${want[field]}`,
  );
  if (differences.length > 0) fail(`table ${table.name} has ${count} rows but not the expected content: ${differences.join('; ')}`, checksumSql);

  // Up to the read limit every row is compared value for value (doubles to the last bit); above it, a sample.
  const whole = expectedRows <= READ_LIMIT;
  const indexes = whole ? Array.from({ length: expectedRows }, (_, i) => i) : sampleIndexes(expectedRows);
  if (indexes.length > 0) {
    const where = whole ? '' : ` WHERE c1 IN (${indexes.join(', ')})`;
    const sampleSql = `SELECT ${selectColumns(table, source)} FROM ${table.quoted}${where} ORDER BY c1`;
    const sampled = (await source.all(sampleSql)).map((record) => toRow(record, table));
    if (sampled.length !== indexes.length) fail(`read ${sampled.length} rows for ${indexes.length} distinct c1 values`, sampleSql);
    sampled.forEach((row, i) => {
      const expected = rowAt(indexes[i] as number, seed);
      if (!sameRow(row, expected)) fail(`row c1=${expected[0]} reads back as ${showRow(row)}, expected ${showRow(expected)}`, sampleSql);
    });
  }
  return Number(count);
}

/**
 * {@link verifyRowsWith} through a FRESH connection of its own (never the workload's), closed afterwards, so what
 * it sees is what any other client would see after the workload committed.
 */
export async function verifyRows(backend: StartedBackend, table: string | WorkloadTable, expectedRows: number, options: VerifyOptions = {}): Promise<number> {
  const name = backend.description.name;
  const target = typeof table === 'string' ? workloadTable(name, table) : table;
  const driver = readDriverFor(name, options.cellDriver);
  const opened = await openPlainConnection(driver, backend.connection, {}, backend.description.id);
  try {
    return await verifyRowsWith(rowSource(driver, opened.handle), target, expectedRows, options);
  } finally {
    await opened.close();
  }
}
