import { driverModule } from '../driver/registry';
import { DRIVER_NAMES, type DriverName } from '../shared/driver-names';
import { noteDeparture } from '../shared/departures';
import { SqltallyError } from '../shared/errors';
import type { SqltallyErrorContext } from '../shared/errors';
import { CAPABILITIES } from './capabilities';
import { PROTOCOLS } from './protocols';
import type { NetworkConnection, WireProtocol } from './types';

/** The two network protocols sqltally speaks to servers in. */
export type SqlProtocol = WireProtocol;

/**
 * A plain client for sqltally's own SQL (readiness pings, version checks, probes): never counted, one connection,
 * text protocol on MySQL (a prepared statement would move the server's own `Com_stmt_prepare`). Rows come back
 * as objects keyed by column name; numbers may be number, bigint or string depending on the driver, so readers
 * convert with `Number()`.
 */
export interface SqlClient {
  /** The package that carries it (`mysql2`, `mariadb`, `pg`, `postgres`). */
  readonly driver: string;
  /** Positional parameters: `?` on MySQL, `$1` on PostgreSQL. */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** The error that broke the connection, once it has broken (a server that went away). */
  readonly lost: string | null;
  close(): Promise<void>;
}

export interface SqlClientOptions {
  /** Database to connect to; null for none (MySQL), default `connection.database`. */
  database?: string | null;
  connectTimeoutMs?: number;
  /** Backend id for error messages. */
  backend?: string;
}

/** No driver that could carry sqltally's own SQL is installed: waiting for the server will not help. */
export class NoSqlDriver extends SqltallyError {
  constructor(
    readonly what: string,
    context: SqltallyErrorContext,
  ) {
    super(what, context);
  }
}

function notInstalled(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND';
}

/**
 * The drivers that can carry sqltally's own SQL over a protocol, in registry order (the order of preference): those
 * that declare `ownSql` and talk to a backend of the protocol.
 */
export function sqlClientDrivers(protocol: SqlProtocol): DriverName[] {
  return DRIVER_NAMES.filter((name) => {
    const module = driverModule(name);
    return module.ownSql !== null && module.backends.some((backend) => CAPABILITIES[backend].wireProtocol === protocol);
  });
}

async function openWith(name: DriverName, connection: NetworkConnection, database: string | null, options: SqlClientOptions): Promise<SqlClient> {
  const module = driverModule(name);
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const opened = await module.open({ ...connection, database: database ?? '' }, { backend: options.backend, connectTimeoutMs });
  // sqltally's own as much as a workload's: a window opened next waits for them to leave (departures.ts).
  for (const closed of opened.closedWhileOpening ?? []) noteDeparture(connection, closed);
  const id = opened.connectionId;
  let lost: string | null = null;
  const query = module.ownSql!(opened.handle, (message) => (lost = message));
  return {
    driver: module.packageName,
    get lost() {
      return lost;
    },
    query: async <T>(sql: string, params?: readonly unknown[]) => (await query(sql, params)) as T[],
    close: () =>
      opened
        .close()
        .catch(() => undefined)
        .finally(() => {
          if (id !== null) noteDeparture(connection, id);
        }),
  };
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Opens a client through the module of the protocol's first driver installed here. The drivers are optional peer
 * dependencies, so an app that installed only one of them still gets probes and readiness checks.
 */
export async function openSqlClient(protocol: SqlProtocol, connection: NetworkConnection, options: SqlClientOptions = {}): Promise<SqlClient> {
  const database = options.database === undefined ? connection.database : options.database;
  const names = sqlClientDrivers(protocol);
  for (const name of names) {
    try {
      return await openWith(name, connection, database, options);
    } catch (error) {
      // A package that is not installed reaches here as the module's SqltallyError with the loader's error as cause.
      if (notInstalled(error instanceof SqltallyError ? error.cause : error)) continue;
      throw error;
    }
  }
  const packages = names.map((name) => driverModule(name).packageName);
  throw new NoSqlDriver(`no ${PROTOCOLS[protocol].displayName} driver is installed (tried ${packages.join(', ')})`, {
    backend: options.backend,
    phase: 'connect',
    hint: `npm install ${packages[0]} (or ${packages.slice(1).join(', ')}): sqltally uses it for its own SQL`,
  });
}

/** Runs `use` on a fresh client and closes it whatever happens. */
export async function withSqlClient<T>(
  protocol: SqlProtocol,
  connection: NetworkConnection,
  options: SqlClientOptions,
  use: (client: SqlClient) => Promise<T>,
): Promise<T> {
  const client = await openSqlClient(protocol, connection, options);
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}
