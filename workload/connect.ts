import type { ExecuteValues } from 'mysql2';
import { openRawConnection, runSql } from '../counters/driver/open';
import { SqltallyError } from '../containers/errors';
import type { BackendName, ConnectionInfo, DriverName, StartedBackend } from '../containers/types';
import { createTableSql, dropTableSql } from './table';
import type { WorkloadTable } from './table';
import type { DriverHandle } from './strategies/types';

/** A plain (uncounted) driver connection and how to close it. */
export interface PlainConnection<D extends DriverName> {
  driver: D;
  handle: DriverHandle[D];
  close(): Promise<void>;
}

/** Row-reading over any of the four handles: the read and verify paths need nothing more. */
export interface RowSource {
  /** Runs a SELECT with positional parameters (`?` or `$n`, as the dialect writes them) and returns its rows. */
  all(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>;
}

/** Which driver reads back on each backend (verify, read path): the one with no batching surprises. */
export const READ_DRIVER_BY_BACKEND = {
  sqlite: 'better-sqlite3',
  mariadb: 'mysql2',
  mysql: 'mysql2',
  postgres: 'pg',
} as const satisfies Record<BackendName, DriverName>;

/**
 * Opens a plain connection of `driver` to a started backend's connection info. Failures become a connect-phase
 * SqltallyError (password never shown). These connections are not counted; counted ones come from counters/driver.
 */
export async function openPlainConnection<D extends DriverName>(
  driver: D,
  connection: ConnectionInfo,
  options: Readonly<Record<string, unknown>> = {},
  backend?: string,
): Promise<PlainConnection<D>> {
  try {
    const opened = await openRawConnection(driver, connection, { driverOptions: { ...options }, ...(backend ? { backend } : {}) });
    return { driver, handle: opened.handle, close: opened.close };
  } catch (err) {
    if (err instanceof SqltallyError) throw err;
    const where = connection.kind === 'network' ? `${connection.host}:${connection.port}` : connection.filename;
    throw new SqltallyError(`could not open a ${driver} connection to ${where}`, { backend, phase: 'connect', cause: err });
  }
}

/** A {@link RowSource} over a handle of any driver. */
export function rowSource<D extends DriverName>(driver: D, handle: DriverHandle[D]): RowSource {
  switch (driver) {
    // MySQL-family reads go through the binary protocol: MariaDB's text protocol prints a DOUBLE with 15
    // significant digits (942.9155000039999 reads back as 942.915500004), the binary one sends its 8 bytes.
    case 'mysql2': {
      const h = handle as DriverHandle['mysql2'];
      return { all: async (sql, params = []) => (await h.execute(sql, [...params] as ExecuteValues[]))[0] as Record<string, unknown>[] };
    }
    case 'mariadb': {
      const h = handle as DriverHandle['mariadb'];
      return { all: async (sql, params = []) => [...((await h.execute(sql, [...params])) as Record<string, unknown>[])] };
    }
    case 'pg': {
      const h = handle as DriverHandle['pg'];
      return { all: async (sql, params = []) => (await h.query(sql, [...params])).rows as Record<string, unknown>[] };
    }
    case 'better-sqlite3': {
      const h = handle as DriverHandle['better-sqlite3'];
      // safeIntegers: SQLite integers above 2^53 come back as bigint instead of being rounded.
      return { all: async (sql, params = []) => h.prepare(sql).safeIntegers(true).all(...params) as Record<string, unknown>[] };
    }
    default:
      throw new SqltallyError(`no row source for driver ${String(driver)}`, { phase: 'config' });
  }
}

/** Runs one statement that returns no rows (DDL, TRUNCATE) on a handle of any driver. */
export async function executeSql<D extends DriverName>(driver: D, handle: DriverHandle[D], sql: string): Promise<void> {
  await runSql(driver, handle, sql);
}

/**
 * Drops and creates the workload table through a fresh connection of the backend's read driver, so the workload's
 * own (possibly counted) connection never carries the DDL.
 */
export async function recreateTable(backend: StartedBackend, table: WorkloadTable): Promise<void> {
  const driver = READ_DRIVER_BY_BACKEND[backend.description.name];
  const opened = await openPlainConnection(driver, backend.connection, {}, backend.description.id);
  try {
    for (const sql of [dropTableSql(table), createTableSql(table)]) {
      try {
        await executeSql(driver, opened.handle, sql);
      } catch (err) {
        throw new SqltallyError(`could not set up table ${table.name}`, { backend: backend.description.id, phase: 'setup', statement: sql, cause: err });
      }
    }
  } finally {
    await opened.close();
  }
}

/** Drops the workload table through a fresh connection; a missing table is fine. */
export async function dropTable(backend: StartedBackend, table: WorkloadTable): Promise<void> {
  const driver = READ_DRIVER_BY_BACKEND[backend.description.name];
  const opened = await openPlainConnection(driver, backend.connection, {}, backend.description.id);
  try {
    await executeSql(driver, opened.handle, dropTableSql(table));
  } finally {
    await opened.close();
  }
}
