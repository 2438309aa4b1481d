import Database from 'better-sqlite3';
import * as mariadb from 'mariadb';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { CaptureSession } from '../../src/capture/capture';
import type { CallKind } from '../../src/sql/events';
import { PARENTS } from './fixture';
import type { ChildRow } from './fixture';
import { describeOrm } from './suite';
import type { OrmCase, OrmUnderTest } from './suite';

/** Plain pools, no ORM: the pool object itself is counted, and each driver's own bulk path is used. */

// docs recipe: a pg Pool
async function pgPool(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = session.count(
    new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 2, idleTimeoutMillis: 0 }),
  );
  await pool.query('select 1'); // warm: the first connection opens here, outside every window
  return pool; // pool.end() before session.close()
}

// docs recipe: a mysql2 pool
async function mysql2Pool(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const pool = session.count(
    mysql.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: 2 }),
  );
  await pool.query('select 1');
  return pool;
}

// docs recipe: a mariadb connector pool
async function mariadbPool(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  // minDelayValidation: the pool pings a connection idle for more than 500 ms (the default) before handing it out,
  // and that COM_PING crosses the wire inside the window; a long delay keeps the counts the same in every window.
  const pool = session.count(
    mariadb.createPool({
      host: at.host,
      port: at.port,
      user: at.user,
      password: at.password,
      database: at.database,
      connectionLimit: 2,
      minDelayValidation: 600_000,
    }),
  );
  await pool.query('select 1');
  return pool;
}

// docs recipe: a better-sqlite3 Database
function sqliteDatabase(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'file') throw new Error('expected SQLite');
  return session.count(new Database(at.filename)); // db.close() before session.close()
}

function onPg(pool: pg.Pool): OrmUnderTest {
  return {
    // One statement for every row: one array per column, unnested on the server.
    bulkInsert: async (rows: ChildRow[]) =>
      void (await pool.query('INSERT INTO children (parent_id, name) SELECT * FROM unnest($1::int[], $2::text[])', [
        rows.map((r) => r.parentId),
        rows.map((r) => r.name),
      ])),
    readLoop: async () => {
      let read = 0;
      const { rows: parents } = await pool.query<{ id: number }>('SELECT id, name FROM parents ORDER BY id LIMIT $1', [PARENTS]);
      for (const p of parents) read += (await pool.query('SELECT id, name FROM children WHERE parent_id = $1', [p.id])).rows.length;
      return read;
    },
    end: () => pool.end(),
  };
}

function onMysql2(pool: mysql.Pool): OrmUnderTest {
  return {
    // `VALUES ?` with an array of rows: mysql2 expands it into one multi-row INSERT on the client.
    bulkInsert: async (rows: ChildRow[]) => void (await pool.query('INSERT INTO children (parent_id, name) VALUES ?', [rows.map((r) => [r.parentId, r.name])])),
    // query(), not execute(): execute() prepares once per connection, so the first window on each connection would
    // carry COM_STMT_PREPAREs the next ones do not.
    readLoop: async () => {
      let read = 0;
      const [parents] = await pool.query<mysql.RowDataPacket[]>('SELECT id, name FROM parents ORDER BY id LIMIT ?', [PARENTS]);
      for (const p of parents) read += (await pool.query<mysql.RowDataPacket[]>('SELECT id, name FROM children WHERE parent_id = ?', [p.id]))[0].length;
      return read;
    },
    end: () => pool.end(),
  };
}

function onMariadb(pool: mariadb.Pool): OrmUnderTest {
  return {
    // The connector's batch: COM_STMT_BULK_EXECUTE on MariaDB, one pipelined execute per row elsewhere.
    bulkInsert: async (rows: ChildRow[]) =>
      void (await pool.batch(
        'INSERT INTO children (parent_id, name) VALUES (?, ?)',
        rows.map((r) => [r.parentId, r.name]),
      )),
    readLoop: async () => {
      let read = 0;
      const parents: { id: number }[] = await pool.query('SELECT id, name FROM parents ORDER BY id LIMIT ?', [PARENTS]);
      for (const p of parents) read += ((await pool.query('SELECT id, name FROM children WHERE parent_id = ?', [p.id])) as unknown[]).length;
      return read;
    },
    end: () => pool.end(),
  };
}

function onSqlite(db: Database.Database): OrmUnderTest {
  return {
    // better-sqlite3's recommended bulk insert: one prepared statement run per row inside one transaction.
    bulkInsert: async (rows: ChildRow[]) => {
      const insert = db.prepare('INSERT INTO children (parent_id, name) VALUES (?, ?)');
      db.transaction(() => {
        for (const r of rows) insert.run(r.parentId, r.name);
      })();
    },
    readLoop: async () => {
      let read = 0;
      const parents = db.prepare('SELECT id, name FROM parents ORDER BY id LIMIT ?').all(PARENTS) as { id: number }[];
      const children = db.prepare('SELECT id, name FROM children WHERE parent_id = ?');
      for (const p of parents) read += children.all(p.id).length;
      return read;
    },
    end: async () => void db.close(),
  };
}

// Read from the real servers; maps list what is not 0 and their totals leave room for nothing else.
const READ_DRIVER = { calls: 21, byKind: { query: 21 }, byClass: { select: 21 }, parameterSets: 21, bindValues: 21, rowsAffected: 0 };
const READ_SHAPES: [string, CallKind, number][] = [
  ['SELECT id, name FROM parents ORDER BY id LIMIT ?', 'query', 1],
  ['SELECT id, name FROM children WHERE parent_id = ?', 'query', PARENTS],
];

function mysql2On(bulkExecutes: { bulkExecutes: number } | Record<string, never>): OrmCase {
  return {
    driver: 'mysql2',
    driverLayer: 'counted',
    open: async (s) => onMysql2(await mysql2Pool(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        driver: { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, parameterSets: 1, bindValues: 10_000, rowsAffected: 5000 },
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

describeOrm('plain pool', {
  postgres: {
    driver: 'pg',
    driverLayer: 'counted',
    open: async (s) => onPg(await pgPool(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        // Two bind values: one array per column.
        driver: { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, parameterSets: 1, bindValues: 2, rowsAffected: 5000 },
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
  mariadb: mysql2On({ bulkExecutes: 0 }),
  mysql: mysql2On({}),
  sqlite: {
    driver: 'better-sqlite3',
    driverLayer: 'counted',
    open: async (s) => onSqlite(sqliteDatabase(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        // One prepare, 5000 runs, and the transaction's BEGIN and COMMIT.
        driver: {
          calls: 5003,
          byKind: { prepare: 1, execute: 5000, query: 2 },
          byClass: { insert: 5000, begin: 1, commit: 1 },
          parameterSets: 5002,
          bindValues: 10_000,
          rowsAffected: 5000,
        },
        server: { rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      // Both statements prepared once, outside the loop.
      counts: { driver: { ...READ_DRIVER, calls: 23, byKind: { prepare: 2, execute: 21 } }, server: { rowsInserted: 0 } },
      shapes: [
        ['SELECT id, name FROM parents ORDER BY id LIMIT ?', 'prepare', 1],
        ['SELECT id, name FROM parents ORDER BY id LIMIT ?', 'execute', 1],
        ['SELECT id, name FROM children WHERE parent_id = ?', 'prepare', 1],
        ['SELECT id, name FROM children WHERE parent_id = ?', 'execute', PARENTS],
      ],
    },
  },
});

const MARIADB_READ: OrmCase['read'] = {
  verdict: 'assert',
  counts: {
    driver: READ_DRIVER,
    // The pool hands out its idle connections in turn: both of its 2 connections serve the loop.
    wire: { commands: { COM_QUERY: 21 }, commandsTotal: 21, roundTrips: 21, connections: 2 },
    server: { statements: 21, inserts: 0, prepares: 0, executes: 0, commits: 0, rowsInserted: 0 },
  },
  shapes: READ_SHAPES,
};

describeOrm('mariadb pool', {
  mariadb: {
    driver: 'mariadb',
    driverLayer: 'counted',
    open: async (s) => onMariadb(await mariadbPool(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        // MariaDB: one prepare and one COM_STMT_BULK_EXECUTE for all 5000 rows.
        driver: { calls: 1, byKind: { batch: 1 }, byClass: { insert: 1 }, parameterSets: 5000, bindValues: 10_000, rowsAffected: 5000 },
        wire: { commands: { COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 }, commandsTotal: 2, roundTrips: 2, connections: 1 },
        server: { statements: 1, inserts: 1, prepares: 1, executes: 1, bulkExecutes: 1, commits: 0, rowsInserted: 5000 },
      },
    },
    read: { ...MARIADB_READ, counts: { ...MARIADB_READ.counts, server: { ...MARIADB_READ.counts.server, bulkExecutes: 0 } } },
  },
  mysql: {
    driver: 'mariadb',
    driverLayer: 'counted',
    open: async (s) => onMariadb(await mariadbPool(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        // MySQL has no bulk command: the connector prepares once and pipelines one COM_STMT_EXECUTE per row.
        driver: { calls: 1, byKind: { batch: 1 }, byClass: { insert: 1 }, parameterSets: 5000, bindValues: 10_000, rowsAffected: 5000 },
        wire: { commands: { COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 5000 }, commandsTotal: 5001, roundTrips: 5001, connections: 1 },
        server: { statements: 5000, inserts: 5000, prepares: 1, executes: 5000, commits: 0, rowsInserted: 5000 },
      },
    },
    read: MARIADB_READ,
  },
  postgres: { notSupported: 'the mariadb connector talks to MariaDB and MySQL only' },
  sqlite: { notSupported: 'the mariadb connector talks to MariaDB and MySQL only' },
});
