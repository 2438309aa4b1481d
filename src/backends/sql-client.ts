import { messageOf, SqltallyError } from '../shared/errors';
import type { NetworkConnection } from './types';

/** The two network protocols sqltally speaks to servers in. */
export type SqlProtocol = 'mysql' | 'postgres';

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

type Opener = (connection: NetworkConnection, opts: Required<Omit<SqlClientOptions, 'backend'>>) => Promise<SqlClient>;

function notInstalled(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND';
}

const MYSQL2: Opener = async (c, o) => {
  const mysql = (await import('mysql2/promise')).default;
  let lost: string | null = null;
  const conn = await mysql.createConnection({
    host: c.host,
    port: c.port,
    user: c.user,
    password: c.password,
    ...(o.database ? { database: o.database } : {}),
    connectTimeout: o.connectTimeoutMs,
  });
  // A server stopping under an idle connection emits 'error'; unheard, that would take the whole process down.
  conn.on('error', (err) => (lost = messageOf(err)));
  return {
    driver: 'mysql2',
    get lost() {
      return lost;
    },
    query: async <T>(sql: string, params?: readonly unknown[]) => (await conn.query(sql, params ? [...params] : undefined))[0] as T[],
    close: () => conn.end().catch(() => conn.destroy()),
  };
};

const MARIADB: Opener = async (c, o) => {
  const mariadb = await import('mariadb');
  let lost: string | null = null;
  const conn = await mariadb.createConnection({
    host: c.host,
    port: c.port,
    user: c.user,
    password: c.password,
    ...(o.database ? { database: o.database } : {}),
    connectTimeout: o.connectTimeoutMs,
  });
  conn.on('error', (err: unknown) => (lost = messageOf(err)));
  return {
    driver: 'mariadb',
    get lost() {
      return lost;
    },
    query: async <T>(sql: string, params?: readonly unknown[]) => [...((await conn.query(sql, params ? [...params] : undefined)) as T[])],
    close: () => conn.end().catch(() => conn.destroy()),
  };
};

const PG: Opener = async (c, o) => {
  const { Client } = (await import('pg')).default;
  let lost: string | null = null;
  const client = new Client({
    host: c.host,
    port: c.port,
    user: c.user,
    password: c.password,
    database: o.database ?? c.database,
    connectionTimeoutMillis: o.connectTimeoutMs,
  });
  client.on('error', (err) => (lost = messageOf(err)));
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw error;
  }
  return {
    driver: 'pg',
    get lost() {
      return lost;
    },
    query: async <T>(sql: string, params?: readonly unknown[]) => (await client.query(sql, params ? [...params] : undefined)).rows as T[],
    close: () => client.end().catch(() => undefined),
  };
};

const POSTGRES_JS: Opener = async (c, o) => {
  const postgres = (await import('postgres')).default;
  let lost: string | null = null;
  const sql = postgres({
    host: c.host,
    port: c.port,
    user: c.user,
    password: c.password,
    database: o.database ?? c.database,
    max: 1,
    connect_timeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
    onnotice: () => undefined,
  });
  // postgres.js connects lazily: prove the server answers now, as the other clients do.
  await sql.unsafe('SELECT 1');
  return {
    driver: 'postgres',
    get lost() {
      return lost;
    },
    query: async <T>(text: string, params?: readonly unknown[]) => {
      try {
        return [...((await sql.unsafe(text, params ? ([...params] as never[]) : [])) as unknown as T[])];
      } catch (error) {
        if ((error as { code?: unknown }).code === 'CONNECTION_CLOSED') lost = messageOf(error);
        throw error;
      }
    },
    close: () => sql.end({ timeout: 5 }).catch(() => undefined),
  };
};

/** The packages that can carry each protocol, in order of preference: the first installed one is used. */
const CLIENTS = {
  mysql: [
    ['mysql2', MYSQL2],
    ['mariadb', MARIADB],
  ],
  postgres: [
    ['pg', PG],
    ['postgres', POSTGRES_JS],
  ],
} as const satisfies Record<SqlProtocol, readonly (readonly [string, Opener])[]>;

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Opens a client with the first driver package of the protocol that is installed here. The drivers are optional
 * peer dependencies, so an app that installed only one of them still gets probes and readiness checks.
 */
export async function openSqlClient(protocol: SqlProtocol, connection: NetworkConnection, options: SqlClientOptions = {}): Promise<SqlClient> {
  const opts = {
    database: options.database === undefined ? connection.database : options.database,
    connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
  };
  for (const [, open] of CLIENTS[protocol]) {
    try {
      return await open(connection, opts);
    } catch (error) {
      if (notInstalled(error)) continue;
      throw error;
    }
  }
  const names = CLIENTS[protocol].map(([name]) => name);
  throw new SqltallyError(`no ${protocol === 'mysql' ? 'MySQL' : 'PostgreSQL'} driver is installed (tried ${names.join(', ')})`, {
    backend: options.backend,
    phase: 'connect',
    hint: `npm install ${names[0]} (or ${names.slice(1).join(', ')}): sqltally uses it for its own SQL`,
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
