import Database from 'better-sqlite3';
import { knex, KnexPool } from 'knex';
import type { Knex } from 'knex';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { CaptureSession } from '../../src/capture/capture';
import type { CallKind } from '../../src/sql/events';
import { PARENTS } from './fixture';
import type { ChildRow } from './fixture';
import { describeOrm } from './suite';
import type { OrmCase, OrmUnderTest } from './suite';

/**
 * knex 3.3 takes a driver pool of your own in `connectionPool` (pg.Pool, a mysql2 pool) and a tarn-style pool in
 * the same option (`KnexPool`, exported by knex), whose `create` hands it a better-sqlite3 Database you counted.
 */

// docs recipe: knex on PostgreSQL
async function knexOnPostgres(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  // idleTimeoutMillis 0: pg closes idle clients after 10 s, and a client reopened inside a window brings its
  // connection set-up (and knex's version check) into it.
  const pool = new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 2, idleTimeoutMillis: 0 });
  const db = knex({ client: 'pg', connectionPool: session.count(pool) });
  await db.raw('select 1'); // warm: the first connection and knex's `select version()` run here, outside every window
  const end = async () => {
    await db.destroy(); // knex only lets go of a pool it did not make: end the pool too
    await pool.end();
  };
  return { db, end };
}

// docs recipe: knex on MariaDB and MySQL
async function knexOnMysql(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = mysql.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: 2 });
  const db = knex({ client: 'mysql2', connectionPool: session.count(pool) });
  await db.raw('select 1');
  const end = async () => {
    await db.destroy(); // knex only lets go of a pool it did not make: end the pool too
    await pool.end();
  };
  return { db, end };
}

// docs recipe: knex on SQLite (better-sqlite3)
async function knexOnSqlite(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'file') throw new Error('expected SQLite');
  const pool = new KnexPool<Database.Database>({ min: 1, max: 1, create: async () => session.count(new Database(at.filename)), destroy: (d) => d.close() });
  const db = knex({ client: 'better-sqlite3', useNullAsDefault: true, connectionPool: pool });
  await db.raw('select 1');
  const end = async () => {
    await db.destroy(); // knex only lets go of a pool it did not make: end the pool too
    await pool.destroy();
  };
  return { db, end };
}

function workload(built: { db: Knex; end: () => Promise<unknown> }): OrmUnderTest {
  const { db } = built;
  return {
    bulkInsert: async (rows: ChildRow[]) => {
      // knex's bulk API: one INSERT per chunk, all in one transaction. 500 rows a chunk: on SQLite knex writes a
      // multi-row insert as `select ... union all select ...`, and SQLite refuses more than 500 terms.
      await db.batchInsert(
        'children',
        rows.map((r) => ({ parent_id: r.parentId, name: r.name })),
        500,
      );
    },
    readLoop: async () => {
      let read = 0;
      const parents = await db('parents').select('id', 'name').orderBy('id').limit(PARENTS);
      for (const p of parents) read += (await db('children').select('id', 'name').where({ parent_id: p.id })).length;
      return read;
    },
    end: async () => void (await built.end()),
  };
}

// Every count below was read from the real servers; each layer is exact: the per-kind and per-command maps list
// what is not 0, and their totals (calls, commandsTotal) leave no room for anything else.
const READ_SHAPES: [string, CallKind, number][] = [
  ['SELECT id, name FROM parents ORDER BY id ASC LIMIT ?', 'query', 1],
  ['SELECT id, name FROM children WHERE parent_id = ?', 'query', PARENTS],
];
// BEGIN, 10 INSERTs of 500 rows (1000 values each), COMMIT.
const BULK_DRIVER = {
  calls: 12,
  byKind: { query: 12 },
  byClass: { insert: 10, begin: 1, commit: 1 },
  parameterSets: 12,
  bindValues: 10_000,
  rowsAffected: 5000,
};
const READ_DRIVER = { calls: 21, byKind: { query: 21 }, byClass: { select: 21 }, parameterSets: 21, bindValues: 21, rowsAffected: 0 };

function mysqlFamily(bulkExecutes: { bulkExecutes: number } | Record<string, never>): OrmCase {
  return {
    driver: 'mysql2',
    driverLayer: 'counted',
    open: async (s) => workload(await knexOnMysql(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        driver: BULK_DRIVER,
        wire: { commands: { COM_QUERY: 12 }, commandsTotal: 12, roundTrips: 12, connections: 1 },
        server: { statements: 12, inserts: 10, prepares: 0, executes: 0, ...bulkExecutes, commits: 1, rowsInserted: 5000 },
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

describeOrm('knex', {
  postgres: {
    driver: 'pg',
    driverLayer: 'counted',
    open: async (s) => workload(await knexOnPostgres(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        driver: BULK_DRIVER,
        // BEGIN and COMMIT as simple queries, each INSERT extended (Parse/Bind/Describe/Execute/Sync).
        wire: { commands: { Query: 2, Parse: 10, Bind: 10, Describe: 10, Execute: 10, Sync: 10 }, commandsTotal: 52, roundTrips: 12, connections: 1 },
        server: { statements: 12, inserts: 10, commits: 1, rowsInserted: 5000 },
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
  // MariaDB counts bulk executes (0 here); MySQL has no such counter (null), so it is not named.
  mariadb: mysqlFamily({ bulkExecutes: 0 }),
  mysql: mysqlFamily({}),
  sqlite: {
    driver: 'better-sqlite3',
    driverLayer: 'counted',
    open: async (s) => workload(await knexOnSqlite(s)),
    bulk: {
      verdict: 'assert',
      // knex prepares every statement before it runs it, BEGIN and COMMIT included.
      counts: { driver: { ...BULK_DRIVER, calls: 24, byKind: { prepare: 12, execute: 12 } }, server: { rowsInserted: 5000 } },
    },
    read: {
      verdict: 'assert',
      counts: { driver: { ...READ_DRIVER, calls: 42, byKind: { prepare: 21, execute: 21 } }, server: { rowsInserted: 0 } },
      shapes: [
        ['SELECT id, name FROM parents ORDER BY id ASC LIMIT ?', 'prepare', 1],
        ['SELECT id, name FROM parents ORDER BY id ASC LIMIT ?', 'execute', 1],
        ['SELECT id, name FROM children WHERE parent_id = ?', 'prepare', PARENTS],
        ['SELECT id, name FROM children WHERE parent_id = ?', 'execute', PARENTS],
      ],
    },
  },
});
