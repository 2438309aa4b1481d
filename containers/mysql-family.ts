import mysql from 'mysql2/promise';
import type { ServerIdentity } from './backend';
import type { NetworkConnection } from './types';

/**
 * What MariaDB and MySQL share: the protocol, so one way to ask either what it is. Their counters differ,
 * which is why each still has its own backend file.
 */
const PING_CONNECT_TIMEOUT_MS = 3_000;

async function withConnection<T>(connection: NetworkConnection, database: string | undefined, use: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const conn = await mysql.createConnection({
    host: connection.host,
    port: connection.port,
    user: connection.user,
    password: connection.password,
    ...(database ? { database } : {}),
    connectTimeout: PING_CONNECT_TIMEOUT_MS,
  });
  try {
    return await use(conn);
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}

export async function pingMysqlFamily(connection: NetworkConnection, database?: string): Promise<void> {
  await withConnection(connection, database, async (c) => {
    await c.query('SELECT 1');
  });
}

/**
 * Asks the server what it is. A server whose version says MariaDB is MariaDB, whatever URL or name it was
 * addressed by (`mysqld` on Debian is a symlink to `mariadbd`).
 */
export async function identifyMysqlFamily(connection: NetworkConnection): Promise<ServerIdentity> {
  return withConnection(connection, connection.database || undefined, async (c) => {
    const [rows] = await c.query('SELECT VERSION() AS version, @@version_comment AS comment, @@performance_schema AS ps');
    const row = (rows as { version: string; comment: string | null; ps: number | string | null }[])[0];
    const version = String(row?.version ?? '');
    const isMariadb = /mariadb/i.test(version) || /mariadb/i.test(String(row?.comment ?? ''));
    return {
      flavour: isMariadb ? 'mariadb' : 'mysql',
      serverVersion: version,
      refined: { perThreadStatements: Number(row?.ps ?? 0) === 1 },
    };
  });
}

/** A refused login will not fix itself by waiting: readiness polling stops on it. */
export function isMysqlAuthFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ER_ACCESS_DENIED_ERROR' || code === 'ER_DBACCESS_DENIED_ERROR';
}
