import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { describeBackend, startedBackend } from './backend';
import type { BackendModule, ServerIdentity, StartOptions } from './backend';
import { launchServer, loopbackConnection } from './local-process';
import type { PrivateDir, RunningServer } from './local-process';
import { SqltallyError } from '../shared/errors';
import { withSqlClient } from './sql-client';
import type { NetworkConnection, StartedBackend } from './types';

/**
 * What MariaDB and MySQL share: the protocol, so one way to ask either what it is. Their counters differ,
 * which is why each still has its own backend file.
 */
const PING_CONNECT_TIMEOUT_MS = 3_000;
/** MariaDB answers COM_STMT_BULK_EXECUTE from 10.2.7 on; MySQL never does. */
const BULK_EXECUTE_SINCE = [10, 2, 7] as const;
/** The first of these the server's status has is its inserted-rows counter (MariaDB has no Innodb_rows_*). */
const ROW_COUNTERS = ['Innodb_rows_inserted', 'Handler_write'] as const;

/**
 * Memory options of every private MySQL-family server; each backend adds its own. What a server fills is most of a
 * start's cost, so what no probe reads is kept small, and the tables the probes read keep their sizes
 * (bench/HISTORY.md, *Server start*).
 */
export const MYSQL_FAMILY_MEMORY_OPTIONS = [
  '--innodb-buffer-pool-size=64M',
  '--innodb-log-buffer-size=8M',
  '--key-buffer-size=1M',
  '--performance-schema-digests-size=2000',
  '--performance-schema-events-statements-history-long-size=0',
  '--performance-schema-events-stages-history-long-size=0',
  '--performance-schema-events-waits-history-long-size=0',
  '--performance-schema-events-transactions-history-long-size=0',
  '--performance-schema-accounts-size=32',
  '--performance-schema-users-size=32',
  '--performance-schema-hosts-size=32',
] as const;

/** Every server sqltally starts is thrown away after the run (a private process or a container): durability costs time and buys nothing. */
export const THROWAWAY_DURABILITY_OPTIONS = ['--innodb-flush-log-at-trx-commit=0', '--skip-log-bin'] as const;

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
    const status = await c.query<{ Variable_name: string }>(`SHOW GLOBAL STATUS WHERE Variable_name IN (${ROW_COUNTERS.map((n) => `'${n}'`).join(', ')})`);
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

/** A private MySQL-family server to start: what differs between MySQL and MariaDB, the rest is {@link startPrivateMysqlFamily}. */
export interface PrivateMysqlFamily {
  module: BackendModule;
  binary: string;
  dir: PrivateDir;
  initFile: string;
  user: string;
  database: string;
  /** Makes the data directory (an install, a template copy); the private directory is removed if it throws. */
  prepare: () => Promise<void>;
  /** Init-file lines before the account's own (MariaDB removes the accounts its installer made). */
  initPrelude?: string[];
  args: (port: number) => string[];
  stopSignal: NodeJS.Signals;
  bindFailure: RegExp;
}

/** Prepares, starts and identifies a private server whose only account is `user`@127.0.0.1 with a fresh password. */
export async function startPrivateMysqlFamily(server: PrivateMysqlFamily, options: StartOptions): Promise<StartedBackend> {
  const password = randomBytes(12).toString('hex');
  const { user, database } = server;
  try {
    await server.prepare();
    fs.writeFileSync(
      server.initFile,
      [
        ...(server.initPrelude ?? []),
        // The install may already have made this account without a password: set ours either way.
        `CREATE USER IF NOT EXISTS '${user}'@'127.0.0.1' IDENTIFIED BY '${password}';`,
        `ALTER USER '${user}'@'127.0.0.1' IDENTIFIED BY '${password}';`,
        `GRANT ALL PRIVILEGES ON *.* TO '${user}'@'127.0.0.1' WITH GRANT OPTION;`,
        `CREATE DATABASE IF NOT EXISTS ${database};`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
  } catch (err) {
    await server.dir.remove();
    throw err;
  }
  const connectionFor = loopbackConnection(user, password, database);
  const running = await launchServer({
    id: options.id,
    binary: server.binary,
    args: server.args,
    dir: server.dir,
    stopSignal: server.stopSignal,
    bindFailure: server.bindFailure,
    ping: (port) => pingMysqlFamily(connectionFor(port), database),
    isFatal: isMysqlAuthFailure,
    env: options.env,
    ...(options.pickPort ? { pickPort: options.pickPort } : {}),
  });
  return startedPrivateServer(server.module, running, connectionFor(running.port), server.binary, options.id);
}

/**
 * A private server of the family that answered its readiness ping, described by what it says it is; stopped again
 * when that cannot be read, so nothing is left running.
 */
export async function startedPrivateServer(
  module: BackendModule,
  running: RunningServer,
  connection: NetworkConnection,
  origin: string,
  backendId: string,
): Promise<StartedBackend> {
  try {
    const identity = await identifyMysqlFamily(connection);
    return startedBackend(describeBackend(module, identity, 'local', origin, running.readyAt - running.spawnedAt, true), connection, running.stop, running);
  } catch (cause) {
    await running.stop();
    throw new SqltallyError('could not read the server version', {
      backend: backendId,
      phase: 'connect',
      provider: 'local',
      statement: 'SELECT VERSION()',
      cause,
    });
  }
}
