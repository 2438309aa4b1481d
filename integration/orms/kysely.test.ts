import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, sql, SqliteDialect } from 'kysely';
import type { Generated } from 'kysely';
import mysql2 from 'mysql2';
import pg from 'pg';
import type { CaptureSession } from '../../src/capture/capture';
import type { CallKind } from '../../src/sql/events';
import { PARENTS } from './fixture';
import type { ChildRow } from './fixture';
import { describeOrm } from './suite';
import type { OrmCase, OrmUnderTest } from './suite';

/** Kysely's dialects take the driver object itself (a pg Pool, a mysql2 callback pool, a better-sqlite3 Database). */
interface Tables {
  parents: { id: Generated<number>; name: string };
  children: { id: Generated<number>; parent_id: number; name: string };
}

// docs recipe: kysely on PostgreSQL
async function kyselyOnPostgres(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 2, idleTimeoutMillis: 0 });
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: session.count(pool) }) });
  await sql`select 1`.execute(db); // warm: the pool's first connection opens here, outside every window
  return db; // db.destroy() ends the pool
}

// docs recipe: kysely on MariaDB and MySQL
async function kyselyOnMysql(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = mysql2.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: 2 });
  const db = new Kysely<Tables>({ dialect: new MysqlDialect({ pool: session.count(pool) }) });
  await sql`select 1`.execute(db);
  return db;
}

// docs recipe: kysely on SQLite (better-sqlite3)
async function kyselyOnSqlite(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'file') throw new Error('expected SQLite');
  const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: session.count(new Database(at.filename)) }) });
  await sql`select 1`.execute(db);
  return db;
}

function workload(db: Kysely<Tables>): OrmUnderTest {
  return {
    bulkInsert: async (rows: ChildRow[]) => {
      // One INSERT with every row (2 values each): kysely does not chunk.
      await db
        .insertInto('children')
        .values(rows.map((r) => ({ parent_id: r.parentId, name: r.name })))
        .execute();
    },
    readLoop: async () => {
      let read = 0;
      const parents = await db.selectFrom('parents').select(['id', 'name']).orderBy('id').limit(PARENTS).execute();
      for (const p of parents) read += (await db.selectFrom('children').select(['id', 'name']).where('parent_id', '=', p.id).execute()).length;
      return read;
    },
    end: () => db.destroy(),
  };
}

// Read from the real servers; maps list what is not 0 and their totals leave room for nothing else.
const READ_SHAPES: [string, CallKind, number][] = [
  ['SELECT id, name FROM parents ORDER BY id LIMIT ?', 'query', 1],
  ['SELECT id, name FROM children WHERE parent_id = ?', 'query', PARENTS],
];
// One INSERT of 5000 rows, 2 values each.
const BULK_DRIVER = { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, parameterSets: 1, bindValues: 10_000, rowsAffected: 5000 };
const READ_DRIVER = { calls: 21, byKind: { query: 21 }, byClass: { select: 21 }, parameterSets: 21, bindValues: 21, rowsAffected: 0 };

function mysqlFamily(bulkExecutes: { bulkExecutes: number } | Record<string, never>): OrmCase {
  return {
    driver: 'mysql2',
    driverLayer: 'counted',
    open: async (s) => workload(await kyselyOnMysql(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        driver: BULK_DRIVER,
        // Kysely's MySQL dialect uses mysql2's query(): values interpolated on the client, one COM_QUERY.
        wire: { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, prepares: 0, executes: 0, ...bulkExecutes, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        driver: READ_DRIVER,
        wire: { commands: { COM_QUERY: 21 }, commandsTotal: 21, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, prepares: 0, executes: 0, ...bulkExecutes, commits: 0, rowsInserted: 0 },
      },
      shapes: READ_SHAPES,
    },
  };
}

describeOrm('kysely', {
  postgres: {
    driver: 'pg',
    driverLayer: 'counted',
    open: async (s) => workload(await kyselyOnPostgres(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        driver: BULK_DRIVER,
        wire: { commands: { Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 }, commandsTotal: 5, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        driver: READ_DRIVER,
        wire: { commands: { Parse: 21, Bind: 21, Describe: 21, Execute: 21, Sync: 21 }, commandsTotal: 105, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, commits: 0, rowsInserted: 0 },
      },
      shapes: READ_SHAPES,
    },
  },
  mariadb: mysqlFamily({ bulkExecutes: 0 }),
  mysql: mysqlFamily({}),
  sqlite: {
    driver: 'better-sqlite3',
    driverLayer: 'counted',
    open: async (s) => workload(await kyselyOnSqlite(s)),
    bulk: {
      verdict: 'assert',
      // Kysely prepares each statement, then runs it.
      counts: { driver: { ...BULK_DRIVER, calls: 2, byKind: { prepare: 1, execute: 1 } }, server: { rowsInserted: 5000 } },
    },
    read: {
      verdict: 'assert',
      counts: { driver: { ...READ_DRIVER, calls: 42, byKind: { prepare: 21, execute: 21 } }, server: { rowsInserted: 0 } },
      shapes: [
        ['SELECT id, name FROM parents ORDER BY id LIMIT ?', 'prepare', 1],
        ['SELECT id, name FROM parents ORDER BY id LIMIT ?', 'execute', 1],
        ['SELECT id, name FROM children WHERE parent_id = ?', 'prepare', PARENTS],
        ['SELECT id, name FROM children WHERE parent_id = ?', 'execute', PARENTS],
      ],
    },
  },
});
