import { DataTypes, Sequelize } from 'sequelize';
import type Sqlite3 from 'sqlite3';
import { installedReleases } from '../../src/driver/releases';
import type { Model, ModelStatic } from 'sequelize';
import type { CaptureSession } from '../../src/capture/capture';
import { PARENTS } from './fixture';
import type { ChildRow } from './fixture';
import { describeOrm } from './suite';
import type { OrmCase, OrmUnderTest } from './suite';

/**
 * Sequelize opens connections itself from a driver package: on SQLite a package whose `Database` is counted gives it the
 * driver layer; on network backends it is null (`tally.driverAbsent` says why), counted on the wire and the server.
 */
const WHY_NOT_COUNTED = 'Sequelize opens its connections itself from the driver package (dialectModule); it takes no pool or client to count';

// docs recipe: Sequelize on PostgreSQL, MariaDB and MySQL
async function sequelizeOn(session: CaptureSession, dialect: 'postgres' | 'mariadb' | 'mysql') {
  const at = session.connection;
  if (at.kind !== 'network') throw new Error('expected a network backend');
  const sequelize = new Sequelize({
    dialect, // 'postgres' uses pg, 'mariadb' the mariadb connector, 'mysql' mysql2
    host: at.host,
    port: at.port,
    username: at.user,
    password: at.password,
    database: at.database,
    logging: false,
    // min 1: Sequelize drops connections idle for 10 s; one reopened inside a window brings its set-up
    // statements (SET ... on each new connection) into it.
    pool: { min: 1, max: 2 },
  });
  await sequelize.authenticate(); // its start-up queries run here, outside every window
  return sequelize; // sequelize.close() ends its pool
}

// docs recipe: Sequelize on SQLite (node-sqlite3), its driver layer counted
async function sequelizeOnSqlite(session: CaptureSession) {
  const at = session.connection;
  if (at.kind !== 'file') throw new Error('expected SQLite');
  const { default: sqlite3 } = (await import('sqlite3')) as unknown as { default: typeof Sqlite3 };
  // The sqlite3 package with one change: each Database Sequelize constructs is counted into the session.
  const dialectModule = {
    ...sqlite3,
    Database: function CountedDatabase(...args: ConstructorParameters<typeof Sqlite3.Database>) {
      return session.count(new sqlite3.Database(...args));
    },
  };
  const sequelize = new Sequelize({ dialect: 'sqlite', storage: at.filename, dialectModule, logging: false });
  await sequelize.authenticate(); // opens the Database; its PRAGMA FOREIGN_KEYS=ON and the check run outside every window
  return sequelize;
}

function models(sequelize: Sequelize): { Parent: ModelStatic<Model>; Child: ModelStatic<Model> } {
  const Parent = sequelize.define(
    'Parent',
    { id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true }, name: { type: DataTypes.STRING, allowNull: false } },
    { tableName: 'parents', timestamps: false },
  );
  const Child = sequelize.define(
    'Child',
    {
      id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
      parentId: { type: DataTypes.INTEGER, allowNull: false, field: 'parent_id' },
      name: { type: DataTypes.STRING, allowNull: false },
    },
    { tableName: 'children', timestamps: false },
  );
  return { Parent, Child };
}

function workload(sequelize: Sequelize): OrmUnderTest {
  const { Parent, Child } = models(sequelize);
  return {
    bulkInsert: async (rows: ChildRow[]) => {
      // Sequelize's bulk API: one INSERT with every row.
      await Child.bulkCreate(rows.map((r) => ({ ...r })));
    },
    readLoop: async () => {
      let read = 0;
      const ps = await Parent.findAll({ attributes: ['id', 'name'], order: [['id', 'ASC']], limit: PARENTS });
      for (const p of ps) read += (await Child.findAll({ attributes: ['id', 'name'], where: { parentId: p.get('id') as number } })).length;
      return read;
    },
    end: () => sequelize.close(),
  };
}

// Read from the real servers: wire and server layers (the driver layer is null). Sequelize writes every value
// into the statement text itself, so each statement is one simple query (PostgreSQL `Query`, MySQL `COM_QUERY`).
function on(dialect: 'postgres' | 'mariadb' | 'mysql', driver: OrmCase['driver'], expected: Pick<OrmCase, 'bulk' | 'read'>): OrmCase {
  return { driver, driverLayer: { absent: WHY_NOT_COUNTED }, open: async (s) => workload(await sequelizeOn(s, dialect)), ...expected };
}

describeOrm('sequelize', {
  postgres: on('postgres', 'pg', {
    bulk: {
      verdict: 'assert',
      counts: {
        wire: { commands: { Query: 1 }, commandsTotal: 1, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        wire: { commands: { Query: 21 }, commandsTotal: 21, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, commits: 0, rowsInserted: 0 },
      },
    },
  }),
  mariadb: on('mariadb', 'mariadb', {
    bulk: {
      verdict: 'assert',
      counts: {
        wire: { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, prepares: 0, executes: 0, bulkExecutes: 0, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        wire: { commands: { COM_QUERY: 21 }, commandsTotal: 21, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, prepares: 0, executes: 0, bulkExecutes: 0, commits: 0, rowsInserted: 0 },
      },
    },
  }),
  mysql: on('mysql', 'mysql2', {
    bulk: {
      verdict: 'assert',
      counts: {
        wire: { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1, connections: 1 },
        server: { statements: 1, inserts: 1, prepares: 0, executes: 0, commits: 0, rowsInserted: 5000 },
      },
    },
    read: {
      verdict: 'assert',
      counts: {
        wire: { commands: { COM_QUERY: 21 }, commandsTotal: 21, roundTrips: 21, connections: 1 },
        server: { statements: 21, inserts: 0, prepares: 0, executes: 0, commits: 0, rowsInserted: 0 },
      },
    },
  }),
  // Values written into the text, one `run` for the bulk INSERT, a `PRAGMA table_info` before each SELECT (Sequelize
  // reads column types first on SQLite). No wire or statement counter: the server layer is total_changes().
  sqlite: !installedReleases('sqlite3').length
    ? { notSupported: 'Sequelize talks to SQLite through the sqlite3 package, which is not installed' }
    : {
        driver: 'sqlite3',
        driverLayer: 'counted',
        open: async (s) => workload(await sequelizeOnSqlite(s)),
        bulk: {
          verdict: 'assert',
          counts: {
            driver: { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, parameterSets: 1, bindValues: 0, rowsAffected: 5000 },
            server: { rowsInserted: 5000 },
          },
        },
        read: {
          verdict: 'assert',
          counts: {
            driver: { calls: 42, byKind: { query: 42 }, byClass: { select: 21, other: 21 }, parameterSets: 42, bindValues: 0, rowsAffected: 0 },
            server: { rowsInserted: 0 },
          },
          shapes: [
            ['PRAGMA table_info(parents)', 'query', 1],
            ['SELECT id, name FROM parents AS parent ORDER BY parent.id ASC LIMIT ?', 'query', 1],
            ['PRAGMA table_info(children)', 'query', PARENTS],
            ['SELECT id, name FROM children AS child WHERE child.parent_id = ?', 'query', PARENTS],
          ],
          callerUnknown:
            "Sequelize runs each SELECT on SQLite after an await inside a serialize() callback that nothing awaits: no user frame on the driver call's stack",
        },
      },
});
