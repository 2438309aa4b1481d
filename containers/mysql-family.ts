import type { ServerIdentity } from './backend';
import { withSqlClient } from './sql-client';
import type { NetworkConnection } from './types';

/**
 * What MariaDB and MySQL share: the protocol, so one way to ask either what it is. Their counters differ,
 * which is why each still has its own backend file.
 */
const PING_CONNECT_TIMEOUT_MS = 3_000;
/** MariaDB answers COM_STMT_BULK_EXECUTE from 10.2.7 on; MySQL never does. */
const BULK_EXECUTE_SINCE = [10, 2, 7] as const;
/** The first of these the server's status has is its inserted-rows counter (MariaDB has no Innodb_rows_*). */
const ROW_COUNTERS = ['Innodb_rows_inserted', 'Handler_write'] as const;

export async function pingMysqlFamily(connection: NetworkConnection, database?: string): Promise<void> {
  await withSqlClient('mysql', connection, { database: database ?? null, connectTimeoutMs: PING_CONNECT_TIMEOUT_MS }, async (c) => {
    await c.query('SELECT 1');
  });
}

function atLeast(version: string, minimum: readonly number[]): boolean {
  const parts = version.split(/[.-]/).map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < minimum.length; i++) {
    const diff = (parts[i] ?? 0) - (minimum[i] ?? 0);
    if (diff !== 0) return diff > 0;
  }
  return true;
}

/**
 * Asks the server what it is and what it can tell. A server whose version says MariaDB is MariaDB, whatever URL or
 * name it was addressed by (`mysqld` on Debian is a symlink to `mariadbd`). `performance_schema` counts only when
 * it is on AND this account can read it; the row counter is whichever the server's status has.
 */
export async function identifyMysqlFamily(connection: NetworkConnection): Promise<ServerIdentity> {
  return withSqlClient('mysql', connection, { database: connection.database || null, connectTimeoutMs: PING_CONNECT_TIMEOUT_MS }, async (c) => {
    const [row] = await c.query<{ version: string; comment: string | null; ps: unknown }>(
      'SELECT VERSION() AS version, @@version_comment AS comment, @@performance_schema AS ps',
    );
    const version = String(row?.version ?? '');
    const isMariadb = /mariadb/i.test(version) || /mariadb/i.test(String(row?.comment ?? ''));
    const status = await c.query<{ Variable_name: string }>(
      `SHOW GLOBAL STATUS WHERE Variable_name IN (${ROW_COUNTERS.map((n) => `'${n}'`).join(', ')})`,
    );
    const present = new Set(status.map((r) => String(r.Variable_name)));
    const rowCounter = ROW_COUNTERS.find((name) => present.has(name)) ?? null;
    let perThreadStatements = Number(row?.ps ?? 0) === 1;
    if (perThreadStatements) {
      perThreadStatements = await c.query('SELECT THREAD_ID FROM performance_schema.events_statements_summary_by_thread_by_event_name LIMIT 1').then(
        () => true,
        () => false,
      );
    }
    return {
      flavour: isMariadb ? 'mariadb' : 'mysql',
      serverVersion: version,
      refined: { perThreadStatements, rowCounter, bulkExecute: isMariadb && atLeast(version, BULK_EXECUTE_SINCE) },
    };
  });
}

/** A refused login will not fix itself by waiting: readiness polling stops on it. */
export function isMysqlAuthFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ER_ACCESS_DENIED_ERROR' || code === 'ER_DBACCESS_DENIED_ERROR' || code === 1045 || code === 1044;
}
