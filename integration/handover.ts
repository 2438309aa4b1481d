import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { preparePostgres } from '../src/backends/postgres';
import type { BackendName, Flavour, NetworkConnection, StartedBackend } from '../src/backends/types';
import { MARIADB_TRAITS } from '../src/server/mariadb';
import { MYSQL_TRAITS } from '../src/server/mysql';
import type { MysqlFamilyTraits } from '../src/server/mysql-family';

/**
 * How a server lent by the per-worker pool (integration/pool.ts) is checked and cleaned between two test files:
 * one entry per backend, so a new backend must say how it is handed over or why it is never pooled.
 */

/** A client connection still open on a server that is being handed over. */
export interface ClientSession {
  /** Connection id (MySQL/MariaDB) or backend pid (PostgreSQL). */
  id: number;
  user: string | null;
  host: string | null;
  database: string | null;
  /** `Sleep`, `Query` (MySQL) or `idle`, `active` (PostgreSQL). */
  command: string | null;
  /** The statement it runs or last ran, truncated. */
  info: string | null;
}

/** The parts of a server one test file could change for the next: compared at every handover. */
export interface ServerState {
  /** Server-wide settings (global variables, `pg_settings`, role settings, performance_schema consumers). */
  settings: Record<string, string>;
  /** Databases and accounts: the reset removes those a file added. */
  databases: string[];
  accounts: string[];
}

/** An administrative session on a lent server, opened for one handover and closed after it. */
export interface HandoverSession {
  /** Client sessions other than this one; the server's own threads (event scheduler, autovacuum) are left out. */
  clientSessions(): Promise<ClientSession[]>;
  state(): Promise<ServerState>;
  /**
   * Brings the server back to `baseline`: drops the databases and accounts a file added, recreates the test
   * database empty (with its extensions) and clears statement statistics, as a freshly started server has them.
   */
  reset(baseline: ServerState): Promise<void>;
  close(): Promise<void>;
}

export interface PooledHandover {
  pooled: true;
  open(backend: StartedBackend): Promise<HandoverSession>;
}

export interface NotPooled {
  pooled: false;
  reason: string;
}

const INFO_CHARS = 200;
const CONNECT_TIMEOUT_MS = 5_000;

function network(backend: StartedBackend): NetworkConnection {
  if (backend.connection.kind !== 'network') throw new Error(`${backend.description.id} has no network connection to hand over`);
  return backend.connection;
}

function sorted(values: Iterable<string>): string[] {
  return [...values].sort();
}

// ---------------------------------------------------------------------------------------------------------------
// MySQL and MariaDB: one protocol, their own background threads.
// ---------------------------------------------------------------------------------------------------------------

/** Background threads by the flavour the server reported, from the probes' own tables. */
const MYSQL_FAMILY_TRAITS = { mysql: MYSQL_TRAITS, mariadb: MARIADB_TRAITS } satisfies Partial<Record<Flavour, MysqlFamilyTraits>>;

function quoteIdent(name: string): string {
  return `\`${name.replace(/`/g, '``')}\``;
}

async function openMysqlFamily(backend: StartedBackend): Promise<HandoverSession> {
  const c = network(backend);
  const flavour = backend.description.flavour;
  if (flavour !== 'mysql' && flavour !== 'mariadb') throw new Error(`${backend.description.id} is ${flavour}, not MySQL or MariaDB`);
  const traits = MYSQL_FAMILY_TRAITS[flavour];
  // No default database: the reset drops and recreates it.
  const conn = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, connectTimeout: CONNECT_TIMEOUT_MS });
  const rows = async <T>(sql: string): Promise<T[]> => (await conn.query(sql))[0] as T[];
  const accountName = (user: string, host: string): string => `'${user.replace(/'/g, "''")}'@'${host.replace(/'/g, "''")}'`;
  const state = async (): Promise<ServerState> => {
    const settings: Record<string, string> = {};
    for (const r of await rows<{ Variable_name: string; Value: string | null }>('SHOW GLOBAL VARIABLES')) settings[r.Variable_name] = String(r.Value);
    // Turning a consumer or instrument off would silently empty the per-thread counts of every later file.
    for (const r of await rows<{ NAME: string; ENABLED: string }>('SELECT NAME, ENABLED FROM performance_schema.setup_consumers')) {
      settings[`performance_schema.setup_consumers.${r.NAME}`] = r.ENABLED;
    }
    const [instruments] = await rows<{ enabled: number | string; timed: number | string }>(
      "SELECT SUM(ENABLED = 'YES') AS enabled, SUM(TIMED = 'YES') AS timed FROM performance_schema.setup_instruments",
    );
    settings['performance_schema.setup_instruments.enabled'] = String(instruments?.enabled);
    settings['performance_schema.setup_instruments.timed'] = String(instruments?.timed);
    const databases = (await rows<{ Database: string }>('SHOW DATABASES')).map((r) => r.Database);
    const accounts = (await rows<{ user: string; host: string }>('SELECT User AS user, Host AS host FROM mysql.user')).map((r) => accountName(r.user, r.host));
    return { settings, databases: sorted(databases), accounts: sorted(accounts) };
  };
  return {
    async clientSessions() {
      const list = await rows<{ ID: number; USER: string | null; HOST: string | null; DB: string | null; COMMAND: string | null; INFO: string | null }>(
        `SELECT ID, USER, HOST, DB, COMMAND, LEFT(INFO, ${INFO_CHARS}) AS INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()`,
      );
      return list
        .filter((r) => !traits.backgroundUsers.includes(r.USER ?? '') && !traits.backgroundCommands.includes(r.COMMAND ?? ''))
        .map((r) => ({ id: Number(r.ID), user: r.USER, host: r.HOST, database: r.DB, command: r.COMMAND, info: r.INFO }));
    },
    state,
    async reset(baseline) {
      const now = await state();
      for (const account of now.accounts.filter((a) => !baseline.accounts.includes(a))) await conn.query(`DROP USER ${account}`);
      for (const db of now.databases.filter((d) => !baseline.databases.includes(d))) await conn.query(`DROP DATABASE ${quoteIdent(db)}`);
      await conn.query(`DROP DATABASE IF EXISTS ${quoteIdent(c.database)}`);
      await conn.query(`CREATE DATABASE ${quoteIdent(c.database)}`);
    },
    async close() {
      await conn.end().catch(() => conn.destroy());
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------------------------

/** The maintenance database: the test database is dropped and recreated from here. */
const PG_ADMIN_DATABASE = 'postgres';

async function openPostgres(backend: StartedBackend): Promise<HandoverSession> {
  const c = network(backend);
  const client = new Client({
    host: c.host,
    port: c.port,
    user: c.user,
    password: c.password,
    database: PG_ADMIN_DATABASE,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
  });
  // A server that dies mid-handover emits 'error' on the client; the failing query already says so.
  client.on('error', () => undefined);
  await client.connect();
  const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;
  const state = async (): Promise<ServerState> => {
    const settings: Record<string, string> = {};
    for (const s of (await client.query<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings')).rows) settings[s.name] = s.setting;
    // Per-role settings outlive the database reset (per-database ones of the test database do not).
    const roleSettings = await client.query<{ role: string; config: string }>(
      "SELECT r.rolname AS role, array_to_string(s.setconfig, ',') AS config FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE s.setdatabase = 0",
    );
    for (const s of roleSettings.rows) settings[`role ${s.role}`] = s.config;
    const databases = (await client.query<{ datname: string }>('SELECT datname FROM pg_database')).rows.map((r) => r.datname);
    const accounts = (await client.query<{ rolname: string }>('SELECT rolname FROM pg_roles')).rows.map((r) => r.rolname);
    return { settings, databases: sorted(databases), accounts: sorted(accounts) };
  };
  return {
    async clientSessions() {
      const r = await client.query<{
        pid: number;
        usename: string | null;
        client_addr: string | null;
        datname: string | null;
        state: string | null;
        query: string | null;
      }>(
        `SELECT pid, usename, client_addr::text AS client_addr, datname, state, left(query, ${INFO_CHARS}) AS query FROM pg_stat_activity ` +
          "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
      );
      return r.rows.map((s) => ({ id: s.pid, user: s.usename, host: s.client_addr, database: s.datname, command: s.state, info: s.query }));
    },
    state,
    async reset(baseline) {
      const now = await state();
      for (const db of now.databases.filter((d) => !baseline.databases.includes(d))) await client.query(`DROP DATABASE ${quote(db)}`);
      // A new database has new catalogs: no bloat from the last file's DDL for autovacuum to pick up mid-window.
      await client.query(`DROP DATABASE IF EXISTS ${quote(c.database)}`);
      for (const role of now.accounts.filter((a) => !baseline.accounts.includes(a))) await client.query(`DROP ROLE ${quote(role)}`);
      await preparePostgres(c);
      // Entries of the dropped database would otherwise fill pg_stat_statements until it evicts mid-window.
      const fresh = new Client({
        host: c.host,
        port: c.port,
        user: c.user,
        password: c.password,
        database: c.database,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      });
      fresh.on('error', () => undefined);
      await fresh.connect();
      try {
        await fresh.query('SELECT pg_stat_statements_reset()');
      } finally {
        await fresh.end().catch(() => undefined);
      }
    },
    async close() {
      await client.end().catch(() => undefined);
    },
  };
}

const MYSQL_FAMILY_HANDOVER: PooledHandover = { pooled: true, open: openMysqlFamily };

/** Per backend: how its pooled server is handed over, or why it is always started fresh. */
export const HANDOVER = {
  sqlite: { pooled: false, reason: 'in-process SQLite opens a new file in microseconds: there is nothing to share' },
  mariadb: MYSQL_FAMILY_HANDOVER,
  mysql: MYSQL_FAMILY_HANDOVER,
  postgres: { pooled: true, open: openPostgres },
} satisfies Record<BackendName, PooledHandover | NotPooled>;

/** The settings that differ between two states, as `name: before -> after` lines. */
export function changedSettings(before: ServerState, after: ServerState): string[] {
  const names = sorted(new Set([...Object.keys(before.settings), ...Object.keys(after.settings)]));
  return names
    .filter((n) => before.settings[n] !== after.settings[n])
    .map((n) => `${n}: ${before.settings[n] ?? '(unset)'} -> ${after.settings[n] ?? '(unset)'}`);
}

/** Databases and accounts that differ between two states, as `+name` / `-name`. */
export function changedObjects(before: ServerState, after: ServerState): string[] {
  const diff = (kind: string, a: string[], b: string[]): string[] => [
    ...b.filter((x) => !a.includes(x)).map((x) => `${kind} +${x}`),
    ...a.filter((x) => !b.includes(x)).map((x) => `${kind} -${x}`),
  ];
  return [...diff('database', before.databases, after.databases), ...diff('account', before.accounts, after.accounts)];
}

export function describeSession(s: ClientSession): string {
  const who = [s.user ?? '?', s.host ? `@${s.host}` : ''].join('');
  const what = [s.database ? `db ${s.database}` : undefined, s.command ?? undefined, s.info ? `"${s.info}"` : undefined].filter(Boolean).join(', ');
  return `#${s.id} ${who}${what ? ` (${what})` : ''}`;
}
