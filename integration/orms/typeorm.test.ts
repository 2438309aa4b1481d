import { DataSource, EntitySchema } from 'typeorm';
import type { CaptureSession } from '../../src/capture/capture';
import { PARENTS } from './fixture';
import type { ChildRow } from './fixture';
import { describeOrm } from './suite';
import type { OrmCase, OrmUnderTest } from './suite';

/**
 * TypeORM loads its driver package itself, so counting its driver layer would take a stand-in package, not the recipe:
 * the driver layer is null (`tally.driverAbsent` says why), and it is counted on the wire and the server.
 */
const WHY_NOT_COUNTED = 'TypeORM creates its pool from the driver package it loads itself; it takes no pool or client to count';

interface Parent {
  id: number;
  name: string;
}
interface Child {
  id: number;
  parentId: number;
  name: string;
}
const ParentEntity = new EntitySchema<Parent>({
  name: 'Parent',
  tableName: 'parents',
  columns: { id: { type: Number, primary: true, generated: true }, name: { type: String } },
});
const ChildEntity = new EntitySchema<Child>({
  name: 'Child',
  tableName: 'children',
  columns: { id: { type: Number, primary: true, generated: true }, parentId: { type: Number, name: 'parent_id' }, name: { type: String } },
});

// docs recipe: TypeORM on PostgreSQL
async function typeormOnPostgres(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const dataSource = new DataSource({
    type: 'postgres',
    host: at.host,
    port: at.port,
    username: at.user,
    password: at.password,
    database: at.database,
    entities: [ParentEntity, ChildEntity],
    poolSize: 2,
    extra: { idleTimeoutMillis: 0 }, // passed to pg.Pool: keep idle connections, so none reopens inside a window
  });
  await dataSource.initialize(); // its start-up queries run here, outside every window
  return dataSource; // dataSource.destroy() ends its pool
}

// docs recipe: TypeORM on MariaDB and MySQL
async function typeormOnMysql(session: CaptureSession, type: 'mariadb' | 'mysql') {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const dataSource = new DataSource({
    type,
    host: at.host,
    port: at.port,
    username: at.user,
    password: at.password,
    database: at.database,
    entities: [ParentEntity, ChildEntity],
    poolSize: 2,
  });
  await dataSource.initialize();
  return dataSource;
}

// docs recipe: TypeORM on SQLite (better-sqlite3)
async function typeormOnSqlite(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'file') throw new Error('expected SQLite');
  const dataSource = new DataSource({ type: 'better-sqlite3', database: at.filename, entities: [ParentEntity, ChildEntity] });
  await dataSource.initialize();
  return dataSource;
}

function workload(dataSource: DataSource): OrmUnderTest {
  const parents = dataSource.getRepository(ParentEntity);
  const children = dataSource.getRepository(ChildEntity);
  return {
    bulkInsert: async (rows: ChildRow[]) => {
      // TypeORM's bulk API: `insert` with every row (`save` would read each entity back).
      await children.insert(rows);
    },
    readLoop: async () => {
      let read = 0;
      const ps = await parents.find({ order: { id: 'ASC' }, take: PARENTS });
      for (const p of ps) read += (await children.findBy({ parentId: p.id })).length;
      return read;
    },
    end: () => dataSource.destroy(),
  };
}

// Read from the real servers: wire and server layers (the driver layer is null). Maps list what is not 0, and
// their totals leave room for nothing else.
function mysqlFamily(type: 'mariadb' | 'mysql', bulkExecutes: { bulkExecutes: number } | Record<string, never>): OrmCase {
  return {
    driver: 'mysql2',
    driverLayer: { absent: WHY_NOT_COUNTED },
    open: async (s) => workload(await typeormOnMysql(s, type)),
    bulk: {
      verdict: 'assert',
      counts: {
        // One INSERT of 5000 rows; TypeORM uses mysql2's query(), values interpolated on the client.
        wire: { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, prepares: 0, executes: 0, ...bulkExecutes, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        wire: { commands: { COM_QUERY: 21 }, commandsTotal: 21, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, prepares: 0, executes: 0, ...bulkExecutes, commits: 0, rowsInserted: 0 },
      },
    },
  };
}

describeOrm('typeorm', {
  postgres: {
    driver: 'pg',
    driverLayer: { absent: WHY_NOT_COUNTED },
    open: async (s) => workload(await typeormOnPostgres(s)),
    bulk: {
      verdict: 'assert',
      counts: {
        // One INSERT ... RETURNING "id" of 5000 rows, 10 000 parameters.
        wire: { commands: { Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 }, commandsTotal: 5, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        // The parents query has no parameter (TypeORM writes the LIMIT into the text): a simple Query.
        wire: { commands: { Query: 1, Parse: 20, Bind: 20, Describe: 20, Execute: 20, Sync: 20 }, commandsTotal: 101, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, commits: 0, rowsInserted: 0 },
      },
    },
  },
  mariadb: mysqlFamily('mariadb', { bulkExecutes: 0 }),
  mysql: mysqlFamily('mysql', {}),
  sqlite: {
    driver: 'better-sqlite3',
    driverLayer: { absent: WHY_NOT_COUNTED },
    open: async (s) => workload(await typeormOnSqlite(s)),
    // No wire, no counted handle: nothing reads the file, so nothing can be asserted, and the rows are unknown.
    bulk: {
      verdict: 'report',
      reason: /^no SQLite handle is counted in the session/,
      layers: { driver: false, wire: false, server: true },
      rowsInserted: null,
    },
    read: {
      verdict: 'report',
      reason: /^no SQLite handle is counted in the session/,
      layers: { driver: false, wire: false, server: true },
      rowsInserted: null,
    },
  },
});
