import { parseBackendId } from '../backends/registry';
import { SqltallyError } from '../shared/errors';
import type { BackendName } from '../backends/types';
import { dialectOf } from '../server';
import { workloadDialect, type Dialect } from './dialects';
import { COLUMN_NAMES } from './rows';

export type { Dialect } from './dialects';

export const DEFAULT_TABLE_NAME = 'sqltally_rows';

/**
 * Lower-case letters, digits and `_`, starting with a letter or `_`, at most 63 characters (PostgreSQL's
 * identifier limit; MySQL allows 64). Names are also quoted when used, but only names matching this are ever
 * accepted, so quoting never has to defend against anything.
 */
export const TABLE_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

/** The workload table on one backend: a validated name with the SQL to make and fill it. */
export interface WorkloadTable {
  readonly backend: BackendName;
  /** As validated, unquoted. */
  readonly name: string;
  /** Quoted for this dialect, ready to paste into SQL. */
  readonly quoted: string;
  readonly dialect: Dialect;
}

export function assertTableName(name: unknown, backend?: string): asserts name is string {
  const problem =
    typeof name !== 'string'
      ? `must be a string, got ${typeof name}`
      : !TABLE_NAME_PATTERN.test(name)
        ? `must match ${TABLE_NAME_PATTERN} (lower-case letters, digits, _; at most 63 characters)`
        : name.startsWith('sqlite_')
          ? 'must not start with sqlite_ (reserved by SQLite)'
          : undefined;
  if (problem) {
    const shown = typeof name === 'string' ? JSON.stringify(name.slice(0, 80)) : String(name);
    throw new SqltallyError(`table name ${shown} ${problem}`, { backend, phase: 'config' });
  }
}

export function workloadTable(backend: BackendName | string, name: string = DEFAULT_TABLE_NAME): WorkloadTable {
  const backendName = parseBackendId(backend).name;
  assertTableName(name, backend);
  // Decided before any server answers, so by the flavour the backend's name declares; MySQL and MariaDB share one.
  const dialect = workloadDialect(dialectOf(backendName));
  return { backend: backendName, name, quoted: dialect.quoteIdent(name), dialect };
}

export function createTableSql(table: WorkloadTable): string {
  return table.dialect.createTableSql(table.quoted);
}

export function dropTableSql(table: WorkloadTable): string {
  return `DROP TABLE IF EXISTS ${table.quoted}`;
}

/** `INSERT INTO <t> (c1, ..., c6)`, the head every insert strategy shares. */
export function insertHead(table: WorkloadTable): string {
  return `INSERT INTO ${table.quoted} (${COLUMN_NAMES.join(', ')})`;
}

/** `(?, ?, ?, ?, ?, ?), ...` for `rows` rows, numbering PostgreSQL placeholders from 1. */
export function placeholderRows(table: WorkloadTable, rows: number): string {
  const { dialect } = table;
  const width = COLUMN_NAMES.length;
  const parts = new Array<string>(rows);
  for (let r = 0; r < rows; r++) {
    const cells = new Array<string>(width);
    for (let c = 0; c < width; c++) cells[c] = dialect.placeholder(r * width + c + 1);
    parts[r] = `(${cells.join(', ')})`;
  }
  return parts.join(', ');
}
