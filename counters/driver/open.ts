import type { Connection as Mysql2Connection } from 'mysql2/promise';
import type { Connection as MariadbConnection, ConnectionConfig as MariadbConfig } from 'mariadb';
import type { Client as PgClient } from 'pg';
import type { Database as SqliteDatabase } from 'better-sqlite3';
import type { ConnectionInfo, DriverName, NetworkConnection } from '../../containers/types';
import { SqltallyError } from '../../containers/errors';
import type { StatementSink } from '../events';
import { wrapBetterSqlite3 } from './better-sqlite3';
import { wrapMariadb } from './mariadb';
import { wrapMysql2 } from './mysql2';
import { wrapPg } from './pg';

/** The object a workload receives for each driver: always a single connection, never a pool. */
export interface DriverHandleMap {
  mysql2: Mysql2Connection;
  mariadb: MariadbConnection;
  pg: PgClient;
  'better-sqlite3': SqliteDatabase;
}
export type DriverHandle<D extends DriverName> = DriverHandleMap[D];

/** How to open a connection. */
export interface OpenOptions {
  /** Connect here instead of the backend's own address: the wire proxy's listening host/port. */
  host?: string;
  port?: number;
  /**
   * Passed to the driver as they are, over sqltally's defaults: `{ bulk: false }` for mariadb,
   * `{ pipeline: true }` for pg, `{ readonly: true }` for better-sqlite3.
   */
  driverOptions?: Record<string, unknown>;
  /** Backend name for error messages (`mariadb@10.11`). */
  backend?: string;
  /**
   * The package to load instead of the driver's own name: a second release installed under an npm alias
   * (`mariadb-3.3` for `npm:mariadb@3.3.2`), so two releases run side by side in one report.
   */
  driverPackage?: string;
}

/** An open connection. `close()` is idempotent. */
export interface OpenedConnection<D extends DriverName> {
  handle: DriverHandle<D>;
  /** Server thread id (MySQL/MariaDB) or backend pid (PostgreSQL); null for SQLite. */
  connectionId: number | null;
  close(): Promise<void>;
}

interface Opened<D extends DriverName> {
  handle: DriverHandle<D>;
  connectionId: number | null;
  close(): Promise<void>;
}

type Opener<D extends DriverName> = (connection: ConnectionInfo, opts: OpenOptions) => Promise<Opened<D>>;
type Wrapper<D extends DriverName> = (handle: DriverHandle<D>, sink: StatementSink) => DriverHandle<D>;

function network(driver: DriverName, connection: ConnectionInfo, opts: OpenOptions): NetworkConnection {
  if (connection.kind !== 'network') {
    throw new SqltallyError(`${driver} needs a network server, got a ${connection.kind} connection`, {
      phase: 'connect',
      backend: opts.backend,
    });
  }
  return { ...connection, host: opts.host ?? connection.host, port: opts.port ?? connection.port };
}

/*
 * Number handling is kept the same on both MySQL drivers: BIGINT and DECIMAL come back as strings (mysql2
 * `supportBigNumbers` + `bigNumberStrings`; the mariadb connector honours the same two options), so a
 * workload's verification reads identical values whichever driver wrote them.
 */
const OPENERS: { [D in DriverName]: Opener<D> } = {
  async mysql2(connection, opts) {
    const net = network('mysql2', connection, opts);
    const mysql: typeof import('mysql2/promise') = await import(opts.driverPackage ? `${opts.driverPackage}/promise` : 'mysql2/promise');
    const handle = await mysql.createConnection({
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      database: net.database,
      supportBigNumbers: true,
      bigNumberStrings: true,
      ...opts.driverOptions,
    });
    return { handle, connectionId: handle.threadId, close: () => handle.end() };
  },
  async mariadb(connection, opts) {
    const net = network('mariadb', connection, opts);
    const mariadb: typeof import('mariadb') = await import(opts.driverPackage ?? 'mariadb');
    const config: MariadbConfig = {
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      database: net.database,
      supportBigNumbers: true,
      bigNumberStrings: true,
      ...opts.driverOptions,
    };
    let handle = await mariadb.createConnection(config);
    // The connector does not learn the server's max_allowed_packet; it assumes up to 1 GiB and sizes bulk
    // commands by that, so a big batch would be refused by the server. Reopen with the server's value.
    if (opts.driverOptions?.maxAllowedPacket === undefined) {
      const rows: { packet: number | bigint | string }[] = await handle.query('SELECT @@max_allowed_packet AS packet');
      const serverPacket = Number(rows[0]?.packet);
      if (Number.isFinite(serverPacket) && serverPacket > 0) {
        await handle.end();
        handle = await mariadb.createConnection({ ...config, maxAllowedPacket: serverPacket });
      }
    }
    const opened = handle;
    return { handle: opened, connectionId: opened.threadId, close: () => opened.end() };
  },
  async pg(connection, opts) {
    const net = network('pg', connection, opts);
    const pg: typeof import('pg') = await import(opts.driverPackage ?? 'pg');
    const client = new pg.Client({
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      database: net.database,
      ...opts.driverOptions,
    });
    try {
      await client.connect();
    } catch (error) {
      // A failed connect leaves the socket half-open: end it so the process can exit.
      await client.end().catch(() => undefined);
      throw error;
    }
    // `processID` (the backend pid) is set by pg after the handshake but missing from @types/pg.
    const pid = (client as unknown as { processID?: number | null }).processID;
    return { handle: client, connectionId: typeof pid === 'number' ? pid : null, close: () => client.end() };
  },
  async 'better-sqlite3'(connection, opts) {
    if (connection.kind !== 'file') {
      throw new SqltallyError('better-sqlite3 opens a file, got a network connection', { phase: 'connect', backend: opts.backend });
    }
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(connection.filename, opts.driverOptions);
    return {
      handle: db,
      connectionId: null,
      close: async () => {
        db.close();
      },
    };
  },
};

const WRAPPERS: { [D in DriverName]: Wrapper<D> } = {
  mysql2: (handle, sink) => wrapMysql2(handle, sink),
  mariadb: (handle, sink) => wrapMariadb(handle, sink),
  pg: (handle, sink) => wrapPg(handle, sink),
  'better-sqlite3': (handle, sink) => wrapBetterSqlite3(handle, sink),
};

async function open<D extends DriverName>(driver: D, connection: ConnectionInfo, opts: OpenOptions): Promise<Opened<D>> {
  const opener = OPENERS[driver] as Opener<D> | undefined;
  if (!opener) throw new SqltallyError(`unknown driver "${String(driver)}"`, { phase: 'connect', backend: opts.backend });
  try {
    return await opener(connection, opts);
  } catch (error) {
    if (error instanceof SqltallyError) throw error;
    const where = connection.kind === 'network' ? `${opts.host ?? connection.host}:${opts.port ?? connection.port}` : connection.filename;
    throw new SqltallyError(`${driver} could not connect to ${where}`, {
      phase: 'connect',
      backend: opts.backend,
      cause: error,
    });
  }
}

function once(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= close());
}

/** Opens a plain, uncounted connection (benchmarks compare against this). */
export async function openRawConnection<D extends DriverName>(
  driver: D,
  connection: ConnectionInfo,
  opts: OpenOptions = {},
): Promise<OpenedConnection<D>> {
  const opened = await open(driver, connection, opts);
  return { handle: opened.handle, connectionId: opened.connectionId, close: once(opened.close) };
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
  const opened = await open(driver, connection, opts);
  const wrap = WRAPPERS[driver] as Wrapper<D>;
  const handle = sink ? wrap(opened.handle, sink) : opened.handle;
  return { handle, connectionId: opened.connectionId, close: once(opened.close) };
}

/**
 * Wraps an already open handle. Lets a caller keep the raw handle beside the counted one, so its own SQL on the
 * same connection (a probe's forced statistics flush) never reaches the sink.
 */
export function wrapConnection<D extends DriverName>(driver: D, handle: DriverHandle<D>, sink: StatementSink): DriverHandle<D> {
  return (WRAPPERS[driver] as Wrapper<D>)(handle, sink);
}

// One runner for sqltally's own SQL (DDL, truncation, a probe's flush) on a raw handle of any driver.
const SQL_RUNNERS: { [D in DriverName]: (handle: DriverHandle<D>, sql: string) => Promise<unknown[]> } = {
  mysql2: async (h, sql) => (await h.query(sql))[0] as unknown[],
  mariadb: async (h, sql) => Array.from((await h.query(sql)) as unknown[]),
  pg: async (h, sql) => (await h.query(sql)).rows,
  'better-sqlite3': async (h, sql) => {
    const statement = h.prepare(sql);
    if (statement.reader) return statement.all();
    statement.run();
    return [];
  },
};

/**
 * Runs sqltally's own SQL on a handle and returns the rows. Hand it the raw handle: through a counted one the
 * statement would land in the driver layer.
 */
export function runSql<D extends DriverName>(driver: D, handle: DriverHandle<D>, sql: string): Promise<unknown[]> {
  return (SQL_RUNNERS[driver] as (h: DriverHandle<D>, s: string) => Promise<unknown[]>)(handle, sql);
}

// MySQL files a statement in performance_schema after answering it: a ping on the same connection waits that out
// (the server finishes one command before reading the next). COM_PING is not counted in `Questions`.
const PINGS: { [D in DriverName]: ((handle: DriverHandle<D>) => Promise<void>) | null } = {
  mysql2: (h) => h.ping(),
  mariadb: (h) => h.ping(),
  pg: null,
  'better-sqlite3': null,
};

/** Whether the driver has a no-op round trip that is not itself counted as a statement. */
export function canPing(driver: DriverName): boolean {
  return PINGS[driver] !== null;
}

/** A no-op round trip on a raw handle; does nothing for drivers without one (see {@link canPing}). */
export async function pingConnection<D extends DriverName>(driver: D, handle: DriverHandle<D>): Promise<void> {
  const ping = PINGS[driver] as ((h: DriverHandle<D>) => Promise<void>) | null;
  if (ping) await ping(handle);
}
