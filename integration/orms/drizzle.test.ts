import Database from 'better-sqlite3';
import { asc, eq } from 'drizzle-orm';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { integer as pgInteger, pgTable, serial, text as pgText } from 'drizzle-orm/pg-core';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { CaptureSession } from '../../src/capture/capture';
import type { CallKind } from '../../src/sql/events';
import { PARENTS } from './fixture';
import type { ChildRow } from './fixture';
import { describeOrm } from './suite';
import type { OrmCase, OrmUnderTest } from './suite';

/** drizzle is built on a client or pool you hand it (`drizzle({ client })`): count that one. */
const pgSchema = {
  parents: pgTable('parents', { id: serial('id').primaryKey(), name: pgText('name').notNull() }),
  children: pgTable('children', { id: serial('id').primaryKey(), parentId: pgInteger('parent_id').notNull(), name: pgText('name').notNull() }),
};
const mysqlSchema = {
  parents: mysqlTable('parents', { id: int('id').autoincrement().primaryKey(), name: varchar('name', { length: 64 }).notNull() }),
  children: mysqlTable('children', {
    id: int('id').autoincrement().primaryKey(),
    parentId: int('parent_id').notNull(),
    name: varchar('name', { length: 64 }).notNull(),
  }),
};
const sqliteSchema = {
  parents: sqliteTable('parents', { id: integer('id').primaryKey(), name: text('name').notNull() }),
  children: sqliteTable('children', { id: integer('id').primaryKey(), parentId: integer('parent_id').notNull(), name: text('name').notNull() }),
};

// docs recipe: drizzle on PostgreSQL
async function drizzleOnPostgres(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 2, idleTimeoutMillis: 0 });
  const db = drizzlePg({ client: session.count(pool) });
  await pool.query('select 1'); // warm: the pool's first connection opens here, outside every window
  return { db, end: () => pool.end() };
}

// docs recipe: drizzle on MariaDB and MySQL
async function drizzleOnMysql(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = mysql.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: 2 });
  const db = drizzleMysql({ client: session.count(pool) });
  await pool.query('select 1');
  return { db, end: () => pool.end() };
}

// docs recipe: drizzle on SQLite (better-sqlite3)
async function drizzleOnSqlite(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'file') throw new Error('expected SQLite');
  const sqlite = new Database(at.filename);
  const db = drizzleSqlite({ client: session.count(sqlite) });
  return { db, end: async () => sqlite.close() };
}

// One workload over three dialects' tables: the query builders are alike, their types are not.
function workload(built: { db: object; end: () => Promise<unknown> }, schema: typeof pgSchema | typeof mysqlSchema | typeof sqliteSchema): OrmUnderTest {
  const db = built.db as unknown as ReturnType<typeof drizzlePg>;
  const { parents, children } = schema as typeof pgSchema;
  return {
    bulkInsert: async (rows: ChildRow[]) => {
      // One INSERT with every row: drizzle does not chunk.
      await db.insert(children).values(rows);
    },
    readLoop: async () => {
      let read = 0;
      const ps = await db.select({ id: parents.id, name: parents.name }).from(parents).orderBy(asc(parents.id)).limit(PARENTS);
      for (const p of ps) read += (await db.select({ id: children.id, name: children.name }).from(children).where(eq(children.parentId, p.id))).length;
      return read;
    },
    end: async () => void (await built.end()),
  };
}

// Read from the real servers; maps list what is not 0 and their totals leave room for nothing else.
const PARENTS_SQL = 'SELECT id, name FROM parents ORDER BY parents.id ASC LIMIT ?';
const CHILDREN_SQL = 'SELECT id, name FROM children WHERE children.parent_id = ?';
const READ_SHAPES: [string, CallKind, number][] = [
  [PARENTS_SQL, 'query', 1],
  [CHILDREN_SQL, 'query', PARENTS],
];
// One INSERT of 5000 rows, 2 values each (the id is written as DEFAULT, or null on SQLite).
const BULK_DRIVER = { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, parameterSets: 1, bindValues: 10_000, rowsAffected: 5000 };
// drizzle's queries are thenables, not promises: `await` calls their `then` from a microtask of its own, where neither
// the stack nor V8's async frames hold the line that awaited, so the driver call has no user frame to name.
const CALLER_UNKNOWN = "drizzle's queries are thenables run by `await` from a microtask: no user frame on the driver call's stack";
const READ_DRIVER = { calls: 21, byKind: { query: 21 }, byClass: { select: 21 }, parameterSets: 21, bindValues: 21, rowsAffected: 0 };

function mysqlFamily(bulkExecutes: { bulkExecutes: number } | Record<string, never>): OrmCase {
  return {
    driver: 'mysql2',
    driverLayer: 'counted',
    open: async (s) => workload(await drizzleOnMysql(s), mysqlSchema),
    bulk: {
      verdict: 'assert',
      counts: {
        driver: BULK_DRIVER,
        // drizzle's mysql2 session uses query(): values interpolated on the client, one COM_QUERY.
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
      callerUnknown: CALLER_UNKNOWN,
    },
  };
}

describeOrm('drizzle', {
  postgres: {
    driver: 'pg',
    driverLayer: 'counted',
    open: async (s) => workload(await drizzleOnPostgres(s), pgSchema),
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
      callerUnknown: CALLER_UNKNOWN,
    },
  },
  mariadb: mysqlFamily({ bulkExecutes: 0 }),
  mysql: mysqlFamily({}),
  sqlite: {
    driver: 'better-sqlite3',
    driverLayer: 'counted',
    open: async (s) => workload(await drizzleOnSqlite(s), sqliteSchema),
    bulk: {
      verdict: 'assert',
      // drizzle prepares each statement, then runs it.
      counts: { driver: { ...BULK_DRIVER, calls: 2, byKind: { prepare: 1, execute: 1 } }, server: { rowsInserted: 5000 } },
    },
    read: {
      verdict: 'assert',
      counts: { driver: { ...READ_DRIVER, calls: 42, byKind: { prepare: 21, execute: 21 } }, server: { rowsInserted: 0 } },
      shapes: [
        [PARENTS_SQL, 'prepare', 1],
        [PARENTS_SQL, 'execute', 1],
        [CHILDREN_SQL, 'prepare', PARENTS],
        [CHILDREN_SQL, 'execute', PARENTS],
      ],
      callerUnknown: CALLER_UNKNOWN,
    },
  },
});
