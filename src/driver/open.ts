import type { ConnectionInfo } from '../shared/servers';
import { SqltallyError } from '../shared/errors';
import { noteDeparture } from '../shared/departures';
import type { StatementSink } from '../sql/events';
import type { OpenOptions } from './module';
import type { DriverName } from '../shared/driver-names';
import { driverModule, type DriverHandle } from './registry';

export type { OpenOptions } from './module';
export type { DriverHandle } from './registry';

/** An open connection. `close()` is idempotent. */
export interface OpenedConnection<D extends DriverName> {
  handle: DriverHandle<D>;
  /** Server thread id (MySQL/MariaDB) or backend pid (PostgreSQL); null for SQLite. */
  connectionId: number | null;
  close(): Promise<void>;
}

function once(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= close());
}

/** Opens a plain, uncounted connection through the driver's module; a failure names the backend and the address. */
export async function openRawConnection<D extends DriverName>(driver: D, connection: ConnectionInfo, opts: OpenOptions = {}): Promise<OpenedConnection<D>> {
  try {
    const module = driverModule(driver);
    const through = opts.stream && module.streamOptions ? module.streamOptions(opts.stream) : null;
    const opened = await module.open(connection, through ? { ...opts, driverOptions: { ...through, ...opts.driverOptions } } : opts);
    const id = opened.connectionId;
    const server = connection.kind === 'network' ? { host: opts.host ?? connection.host, port: opts.port ?? connection.port } : null;
    // A window opened right after may still find the session on the server (departures.ts): note it as sqltally's.
    if (server) for (const closed of opened.closedWhileOpening ?? []) noteDeparture(server, closed);
    const close = server && id !== null ? () => opened.close().finally(() => noteDeparture(server, id)) : opened.close;
    return { handle: opened.handle, connectionId: id, close: once(close) };
  } catch (error) {
    if (error instanceof SqltallyError) throw error;
    const where = connection.kind === 'network' ? `${opts.host ?? connection.host}:${opts.port ?? connection.port}` : connection.filename;
    throw new SqltallyError(`${driver} could not connect to ${where}`, { phase: 'connect', backend: opts.backend, cause: error });
  }
}

/**
 * Opens a connection and, when `sink` is given, counts every call on it into `sink`. Connection set-up
 * (handshake, sqltally's own `SELECT @@max_allowed_packet` on mariadb) happens before wrapping, so it never
 * reaches the sink.
 */
export async function openCountedConnection<D extends DriverName>(
  driver: D,
  connection: ConnectionInfo,
  sink: StatementSink | undefined,
  opts: OpenOptions = {},
): Promise<OpenedConnection<D>> {
  const opened = await openRawConnection(driver, connection, opts);
  return sink ? { ...opened, handle: wrapConnection(driver, opened.handle, sink) } : opened;
}

/**
 * Wraps an already open handle. Lets a caller keep the raw handle beside the counted one, so its own SQL on the
 * same connection (a probe's forced statistics flush) never reaches the sink.
 */
export function wrapConnection<D extends DriverName>(driver: D, handle: DriverHandle<D>, sink: StatementSink): DriverHandle<D> {
  return driverModule(driver).wrap(handle, sink);
}

/**
 * Runs sqltally's own SQL on a handle and returns the rows. Hand it the raw handle: through a counted one the
 * statement would land in the driver layer.
 */
export function runSql<D extends DriverName>(driver: D, handle: DriverHandle<D>, sql: string): Promise<unknown[]> {
  return driverModule(driver).runSql(handle, sql);
}

/** Whether the driver has a no-op round trip that is not itself counted as a statement. */
export function canPing(driver: DriverName): boolean {
  return driverModule(driver).ping !== null;
}

/** A no-op round trip on a raw handle; does nothing for drivers without one (see {@link canPing}). */
export async function pingConnection<D extends DriverName>(driver: D, handle: DriverHandle<D>): Promise<void> {
  await driverModule(driver).ping?.(handle);
}
