import { openRawConnection, runSql, type DriverHandle } from '../driver/open';
import type { RowSource } from '../driver/module';
import type { DriverName } from '../shared/driver-names';
import { driverModule } from '../driver/registry';
import { SqltallyError } from '../shared/errors';
import { BACKENDS } from '../backends/registry';
import type { BackendName, ConnectionInfo, StartedBackend } from '../backends/types';
import { createTableSql, dropTableSql } from './table';
import type { WorkloadTable } from './table';

export type { RowSource } from '../driver/module';

/** A plain (uncounted) driver connection and how to close it. */
export interface PlainConnection<D extends DriverName> {
  driver: D;
  handle: DriverHandle<D>;
  close(): Promise<void>;
}

/**
 * The driver that reads back, resets or checks the table a cell of `driver` writes: the cell's own when it is an
 * in-process engine, else the backend's `readDriver`. Two copies of an engine in one process must never have one file
 * open at once: the last connection of one copy to close deletes the WAL under the other's (sqlite.org/howtocorrupt.html
 * 2.2.1).
 */
export function readDriverFor(backend: BackendName, driver?: DriverName): DriverName {
  return driver !== undefined && driverModule(driver).embedded ? driver : BACKENDS[backend].readDriver;
}

/**
 * Opens a plain connection of `driver` to a started backend's connection info. Failures become a connect-phase
 * SqltallyError (password never shown). These connections are not counted; counted ones come from src/driver/.
 */
export async function openPlainConnection<D extends DriverName>(
  driver: D,
  connection: ConnectionInfo,
  options: Readonly<Record<string, unknown>> = {},
  backend?: string,
): Promise<PlainConnection<D>> {
  const opened = await openRawConnection(driver, connection, { driverOptions: { ...options }, ...(backend ? { backend } : {}) });
  return { driver, handle: opened.handle, close: opened.close };
}

/** A {@link RowSource} over a raw handle of any driver. */
export function rowSource<D extends DriverName>(driver: D, handle: DriverHandle<D>): RowSource {
  return driverModule(driver).rowSource(handle);
}

/** Runs one statement that returns no rows (DDL, TRUNCATE) on a handle of any driver. */
export async function executeSql<D extends DriverName>(driver: D, handle: DriverHandle<D>, sql: string): Promise<void> {
  await runSql(driver, handle, sql);
}

/**
 * Drops and creates the workload table through a fresh connection of {@link readDriverFor}, so the workload's own
 * (possibly counted) connection never carries the DDL.
 */
export async function recreateTable(backend: StartedBackend, table: WorkloadTable, cellDriver?: DriverName): Promise<void> {
  const driver = readDriverFor(backend.description.name, cellDriver);
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

/** Drops the workload table through a fresh connection of {@link readDriverFor}; a missing table is fine. */
export async function dropTable(backend: StartedBackend, table: WorkloadTable, cellDriver?: DriverName): Promise<void> {
  const driver = readDriverFor(backend.description.name, cellDriver);
  const opened = await openPlainConnection(driver, backend.connection, {}, backend.description.id);
  try {
    await executeSql(driver, opened.handle, dropTableSql(table));
  } finally {
    await opened.close();
  }
}
