import { SqltallyError } from '../shared/errors';
import type { StartedBackend } from '../backends/types';
import { openPlainConnection, readDriverFor, rowSource } from './connect';
import type { DriverName } from '../shared/driver-names';
import type { RowSource } from './connect';
import { COLUMN_NAMES } from './rows';
import type { Row } from './rows';
import { workloadTable } from './table';
import type { WorkloadTable } from './table';
import { numberIsSafeInteger, toBigInt, toNumber } from '../shared/intrinsics';

/** The most rows the read path hands back; asking for more is an error, never a truncated answer. */
export const READ_LIMIT = 5000;

export interface ReadOptions {
  /** At most {@link READ_LIMIT}; a smaller cap is allowed. */
  maxRows?: number;
  /** The driver the rows were written with: an in-process engine's are read through it (see readDriverFor). */
  cellDriver?: DriverName;
}

function toInteger(value: unknown, column: string, table: WorkloadTable): number {
  const n = typeof value === 'bigint' ? toNumber(value) : typeof value === 'string' ? toNumber(value) : value;
  if (typeof n !== 'number' || !numberIsSafeInteger(n)) {
    throw new SqltallyError(`column ${column} came back as ${String(value)}, not an integer`, { backend: table.backend, phase: 'workload' });
  }
  return n;
}

function toBigint(value: unknown, column: string, table: WorkloadTable): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return toBigInt(value);
  if (typeof value === 'number' && numberIsSafeInteger(value)) return toBigInt(value);
  throw new SqltallyError(`column ${column} came back as ${typeof value} ${String(value)}, which may have lost precision`, {
    backend: table.backend,
    phase: 'workload',
  });
}

function toText(value: unknown, column: string, table: WorkloadTable): string {
  if (typeof value === 'string') return value;
  throw new SqltallyError(`column ${column} came back as ${typeof value}, not text`, { backend: table.backend, phase: 'workload' });
}

/** A database row (whatever types its driver chose) as a workload {@link Row}. */
export function toRow(record: Record<string, unknown>, table: WorkloadTable): Row {
  const c4 = typeof record.c4 === 'string' ? toNumber(record.c4) : record.c4;
  if (typeof c4 !== 'number') {
    throw new SqltallyError(`column c4 came back as ${typeof record.c4}, not a number`, { backend: table.backend, phase: 'workload' });
  }
  return [
    toInteger(record.c1, 'c1', table),
    toInteger(record.c2, 'c2', table),
    toText(record.c3, 'c3', table),
    c4,
    toBigint(record.c5, 'c5', table),
    toText(record.c6, 'c6', table),
  ];
}

/** The 64-bit column: read as text through a source that would hand it back as a lossy number. */
const INT64_COLUMN = 'c5';

/** The select list of the workload's columns, each named as itself, exact through `source`. */
export function selectColumns(table: WorkloadTable, source?: Pick<RowSource, 'lossyInt64'>): string {
  return COLUMN_NAMES.map((c) => (c === INT64_COLUMN && source?.lossyInt64 ? `${table.dialect.asText(c)} AS ${c}` : c)).join(', ');
}

export function readSql(table: WorkloadTable, maxRows: number, source?: Pick<RowSource, 'lossyInt64'>): string {
  return `SELECT ${selectColumns(table, source)} FROM ${table.quoted} ORDER BY id LIMIT ${maxRows + 1}`;
}

/**
 * Reads the table's rows in insert order through `source`, asking for one row more than allowed: if that row
 * exists the table is too big and a SqltallyError is thrown, with no rows returned at all.
 */
export async function readRowsFrom(source: RowSource, table: WorkloadTable, options: ReadOptions = {}): Promise<Row[]> {
  const maxRows = options.maxRows ?? READ_LIMIT;
  if (!Number.isSafeInteger(maxRows) || maxRows < 1 || maxRows > READ_LIMIT) {
    throw new SqltallyError(`maxRows must be an integer from 1 to ${READ_LIMIT}, got ${String(maxRows)}`, { backend: table.backend, phase: 'config' });
  }
  const sql = readSql(table, maxRows, source);
  const records = await source.all(sql);
  if (records.length > maxRows) {
    throw new SqltallyError(`refusing to read ${table.name}: it holds more than ${maxRows} rows`, {
      backend: table.backend,
      phase: 'workload',
      statement: sql,
      hint: 'read a narrower range, or count with SELECT COUNT(*) instead',
    });
  }
  return records.map((record) => toRow(record, table));
}

/** {@link readRowsFrom} through a fresh plain connection of {@link readDriverFor}, closed afterwards. */
export async function readRows(backend: StartedBackend, table: string | WorkloadTable, options: ReadOptions = {}): Promise<Row[]> {
  const name = backend.description.name;
  const target = typeof table === 'string' ? workloadTable(name, table) : table;
  const driver = readDriverFor(name, options.cellDriver);
  const opened = await openPlainConnection(driver, backend.connection, {}, backend.description.id);
  try {
    return await readRowsFrom(rowSource(driver, opened.handle), target, options);
  } finally {
    await opened.close();
  }
}
