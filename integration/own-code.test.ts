// @waits 15: timeouts, cancels and pools on every backend.
import Database from 'better-sqlite3';
import * as mariadb from 'mariadb';
import mysql from 'mysql2/promise';
import pg from 'pg';
import postgres from 'postgres';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CaptureSession } from '../src/capture/capture';
import type { Captured } from '../src/capture/capture';
import { SqltallyError } from '../src/shared/errors';
import type { BackendName, NetworkConnection, StartedBackend } from '../src/backends/types';
import { describeEachBackend, withBackend } from './harness';

/**
 * The user's own code as real projects run it: their pools and clients on `session.connection`, counted with
 * `session.count()`; counts from the real server, rows checked through a connection sqltally does not count.
 */

const POOL_SIZE = 4;
const ROWS_PER_WORKER = 250;

function network(c: CaptureSession['connection'] | StartedBackend['connection']): NetworkConnection {
  if (c.kind !== 'network') throw new Error('expected a network connection');
  return { kind: 'network', host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
}

/** A pool of one connection to `at`: pg's on PostgreSQL, mysql2's (promise API) on MySQL and MariaDB. */
function onePool(backend: BackendName, at: NetworkConnection): pg.Pool | mysql.Pool {
  return backend === 'postgres'
    ? new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, idleTimeoutMillis: 0 })
    : mysql.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: 1 });
}

/** One backend's own-code scenario: a pool the user creates, its inserts, a direct client and a slow statement. */
interface OwnCode {
  /** The user's pool of POOL_SIZE connections to `at`, and how to end it. */
  pool(at: NetworkConnection): { pool: object; end: () => Promise<void> };
  /** One single-row INSERT through the (counted) pool. */
  insert(pool: object, a: number): Promise<unknown>;
  /** The pool's keep-alive: a text `SELECT 1`. */
  keepAlive(pool: object): Promise<unknown>;
  /** A plain client straight to the server, not through the proxy. */
  direct(at: NetworkConnection): Promise<{ insert: (a: number) => Promise<unknown>; count: () => Promise<number>; end: () => Promise<void> }>;
  /**
   * A plain client to `at` whose socket can be destroyed with no goodbye (no COM_QUIT, no Terminate), as a pool does
   * when it throws a connection away; `insert` runs through its counted twin when one is given.
   */
  abrupt(at: NetworkConnection): Promise<{ client: object; insert: (client: object, a: number) => Promise<unknown>; destroy: () => void }>;
  create: string;
  /** An INSERT that sleeps on the server before it commits one row, long enough to be cancelled midway. */
  slowInsert: string;
  /**
   * Rows that slow INSERT still commits when cancelled on the server. MySQL interrupts SLEEP() (it returns 1) and
   * the INSERT goes on and commits its row; MariaDB and PostgreSQL abort the statement.
   */
  rowsAfterCancel: number;
}

const MYSQL_FAMILY: OwnCode = {
  pool: (at) => {
    const pool = mysql.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: POOL_SIZE });
    return { pool, end: () => pool.end() };
  },
  insert: (pool, a) => (pool as mysql.Pool).execute('INSERT INTO own_items (a) VALUES (?)', [a]),
  keepAlive: (pool) => (pool as mysql.Pool).query('SELECT 1'),
  direct: async (at) => {
    const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    return {
      insert: (a) => c.query('INSERT INTO own_items (a) VALUES (?)', [a]),
      count: async () => Number(((await c.query('SELECT COUNT(*) AS n FROM own_items'))[0] as { n: number }[])[0]?.n),
      end: () => c.end(),
    };
  },
  abrupt: async (at) => {
    const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    c.on('error', () => undefined);
    return { client: c, insert: (client, a) => (client as mysql.Connection).query('INSERT INTO own_items (a) VALUES (?)', [a]), destroy: () => c.destroy() };
  },
  create: 'CREATE TABLE own_items (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL)',
  slowInsert: 'INSERT INTO own_items (a) SELECT SLEEP(1.5) + 1',
  rowsAfterCancel: 0,
};

const POSTGRES: OwnCode = {
  pool: (at) => {
    const pool = new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: POOL_SIZE });
    pool.on('error', () => undefined);
    return { pool, end: () => pool.end() };
  },
  insert: (pool, a) => (pool as pg.Pool).query('INSERT INTO own_items (a) VALUES ($1)', [a]),
  keepAlive: (pool) => (pool as pg.Pool).query('SELECT 1'),
  direct: async (at) => {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    await c.connect();
    return {
      insert: (a) => c.query('INSERT INTO own_items (a) VALUES ($1)', [a]),
      count: async () => Number((await c.query('SELECT COUNT(*) AS n FROM own_items')).rows[0]?.n),
      end: () => c.end(),
    };
  },
  abrupt: async (at) => {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    c.on('error', () => undefined);
    await c.connect();
    const socket = (c as unknown as { connection: { stream: { destroy(): void } } }).connection.stream;
    return { client: c, insert: (client, a) => (client as pg.Client).query('INSERT INTO own_items (a) VALUES ($1)', [a]), destroy: () => socket.destroy() };
  },
  create: 'CREATE TABLE own_items (id serial PRIMARY KEY, a int NOT NULL)',
  slowInsert: 'INSERT INTO own_items (a) SELECT 1 FROM pg_sleep(1.5)',
  rowsAfterCancel: 0,
};

const OWN_CODE: Partial<Record<BackendName, OwnCode>> = { mariadb: MYSQL_FAMILY, mysql: { ...MYSQL_FAMILY, rowsAfterCancel: 1 }, postgres: POSTGRES };

/** Exact counts a pool of 4 doing ROWS_PER_WORKER x 4 single-row inserts must show, per backend. */
const POOL_EXPECTED = {
  mariadb: (n: number) => ({ wire: { COM_STMT_EXECUTE: n }, server: { statements: n, inserts: n, executes: n, rowsInserted: n } }),
  mysql: (n: number) => ({ wire: { COM_STMT_EXECUTE: n }, server: { statements: n, inserts: n, executes: n, rowsInserted: n } }),
  postgres: (n: number) => ({ wire: { Bind: n, Execute: n, Sync: n }, server: { statements: n, inserts: n, rowsInserted: n } }),
} satisfies Partial<Record<BackendName, unknown>>;

/** One warm-pool INSERT and one ignored keep-alive: what the wire shows for the INSERT alone, and the keep-alive's share. */
const KEEPALIVE_EXPECTED = {
  mariadb: { insertWire: { COM_STMT_EXECUTE: 1 }, ignoredWire: { COM_QUERY: 1 } },
  mysql: { insertWire: { COM_STMT_EXECUTE: 1 }, ignoredWire: { COM_QUERY: 1 } },
  postgres: { insertWire: { Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 }, ignoredWire: { Query: 1 } },
} satisfies Partial<Record<BackendName, unknown>>;

/**
 * Calls that fail each their own way (a refused duplicate, a text that does not parse, a failed prepare), on a pool of
 * one connection so a warm-up leaves every window alike.
 */
const FAILING = {
  mysql2: async (pool: mysql.Pool, id: number): Promise<void> => {
    await pool.execute('INSERT INTO own_items (id, a) VALUES (?, ?)', [id, 1]);
    await expect(pool.execute('INSERT INTO own_items (id, a) VALUES (?, ?)', [id, 2])).rejects.toThrow(/Duplicate entry/);
    await expect(pool.query('SELEC 1')).rejects.toThrow(/SQL syntax/);
    await expect(pool.execute('SELECT * FROM own_missing WHERE a = ?', [1])).rejects.toThrow(/doesn't exist/);
  },
  pg: async (pool: pg.Pool, id: number): Promise<void> => {
    await pool.query('INSERT INTO own_items (id, a) VALUES ($1, $2)', [id, 1]);
    await expect(pool.query('INSERT INTO own_items (id, a) VALUES ($1, $2)', [id, 2])).rejects.toThrow(/duplicate key/);
    await expect(pool.query('SELEC 1')).rejects.toThrow(/syntax error/);
    await expect(pool.query('SELECT * FROM own_missing WHERE a = $1', [1])).rejects.toThrow(/does not exist/);
  },
};

/**
 * What those calls leave: 4 driver calls, 3 failed. A failed statement counts in Questions, not in pg_stat_statements; a
 * refused duplicate's row still counts as inserted; pg-pool replaces a client whose query failed, mysql2 keeps it.
 */
/**
 * MySQL also keeps Innodb_rows_inserted server-wide: below the connection's Handler_write (which counts the duplicate's
 * refused write too), it shows the window's rows figure is not rows inserted, so the verdict is report there.
 */
const HANDLER_WRITE_ABOVE_ROWS = { kind: 'report', reason: expect.stringMatching(/Handler_write counts writes that are not table rows/) };
const FAILING_EXPECTED = {
  mariadb: {
    wire: { COM_STMT_EXECUTE: 2, COM_QUERY: 1, COM_STMT_PREPARE: 1 },
    connectionsOpened: 0,
    server: { statements: 3, inserts: 2, rowsInserted: 2 },
    verdict: { kind: 'assert', reason: expect.any(String) },
  },
  mysql: {
    wire: { COM_STMT_EXECUTE: 2, COM_QUERY: 1, COM_STMT_PREPARE: 1 },
    connectionsOpened: 0,
    server: { statements: 3, inserts: 2, rowsInserted: 2 },
    verdict: HANDLER_WRITE_ABOVE_ROWS,
  },
  postgres: {
    wire: { Query: 1, Parse: 3, Describe: 3, Bind: 3, Execute: 3, Sync: 3, Terminate: 3 },
    connectionsOpened: 3,
    server: { statements: 1, inserts: 1, rowsInserted: 2 },
    verdict: { kind: 'assert', reason: expect.any(String) },
  },
} satisfies Partial<Record<BackendName, unknown>>;

/**
 * One upsert of a row already there and a new one: MySQL and MariaDB report the update as 2 affected rows and a write
 * attempt per row (Handler_write); PostgreSQL reports both affected, the new one in n_tup_ins, the other in n_tup_upd.
 */
const UPSERT_EXPECTED = {
  mariadb: {
    sql: 'INSERT INTO own_items (id, a) VALUES (1, 1), (2, 2) ON DUPLICATE KEY UPDATE a = a + 1',
    rows: { driverRows: 3, serverRows: 2 },
    verdict: { kind: 'assert', reason: expect.any(String) },
  },
  mysql: {
    sql: 'INSERT INTO own_items (id, a) VALUES (1, 1), (2, 2) ON DUPLICATE KEY UPDATE a = a + 1',
    rows: { driverRows: 3, serverRows: 2 },
    verdict: HANDLER_WRITE_ABOVE_ROWS,
  },
  postgres: {
    sql: 'INSERT INTO own_items (id, a) VALUES (1, 1), (2, 2) ON CONFLICT (id) DO UPDATE SET a = own_items.a + 1',
    rows: { driverRows: 2, serverRows: 1 },
    verdict: { kind: 'assert', reason: expect.any(String) },
  },
} satisfies Partial<Record<BackendName, unknown>>;

/**
 * A stored procedure that inserts two rows: the server counts its inner INSERTs (MySQL/MariaDB Com_insert server-wide)
 * or their rows (PostgreSQL n_tup_ins), and no answer on the wire reports them.
 */
const PROCEDURE = {
  mariadb: {
    create: 'CREATE PROCEDURE own_add(x INT) BEGIN INSERT INTO own_items (a) VALUES (x); INSERT INTO own_items (a) VALUES (x + 1); END',
    call: 'CALL own_add(5)',
    drop: 'DROP PROCEDURE own_add',
  },
  mysql: {
    create: 'CREATE PROCEDURE own_add(x INT) BEGIN INSERT INTO own_items (a) VALUES (x); INSERT INTO own_items (a) VALUES (x + 1); END',
    call: 'CALL own_add(5)',
    drop: 'DROP PROCEDURE own_add',
  },
  postgres: {
    create: 'CREATE PROCEDURE own_add(x int) LANGUAGE sql AS $$ INSERT INTO own_items (a) VALUES (x); INSERT INTO own_items (a) VALUES (x + 1) $$',
    call: 'CALL own_add(5)',
    drop: 'DROP PROCEDURE own_add',
  },
} satisfies Partial<Record<BackendName, unknown>>;

/** Drops and creates the table through a plain client straight to the server: DDL is never a window's. */
async function recreate(session: CaptureSession, code: OwnCode): Promise<void> {
  const at = network(session.backend.connection);
  if (session.backend.description.name === 'postgres') {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    await c.connect();
    try {
      await c.query('DROP TABLE IF EXISTS own_items');
      await c.query(code.create);
    } finally {
      await c.end();
    }
    return;
  }
  const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
  try {
    await c.query('DROP TABLE IF EXISTS own_items');
    await c.query(code.create);
  } finally {
    await c.end();
  }
}

function reasonOf(tally: Captured<unknown>): { kind: string; reason: string } {
  return { kind: tally.verdict.kind, reason: tally.verdict.reason };
}

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);
    const code = OWN_CODE[b.backend]!;
    const expected = POOL_EXPECTED[b.backend as keyof typeof POOL_EXPECTED];
    let session: CaptureSession;

    beforeAll(async () => {
      session = await CaptureSession.open({ backend: backend(), table: { name: 'own_items', ...(b.backend === 'postgres' ? { schema: 'public' } : {}) } });
    });
    afterAll(async () => {
      await session?.close();
    });
    beforeEach(async () => {
      await recreate(session, code);
    });

    it(`a pool of ${POOL_SIZE} connections doing concurrent inserts: counted on all three layers, summed over the ${POOL_SIZE} connections, assert`, async () => {
      const own = code.pool(network(session.connection));
      try {
        const pool = session.count(own.pool);
        // Warm the pool outside the window: its connections' handshakes and prepares are not the window's.
        await Promise.all(Array.from({ length: POOL_SIZE }, (_, i) => code.insert(pool, -1 - i)));
        const n = POOL_SIZE * ROWS_PER_WORKER;
        const tally = await session.measure(async () => {
          await Promise.all(
            Array.from({ length: POOL_SIZE }, async (_, w) => {
              for (let i = 0; i < ROWS_PER_WORKER; i++) await code.insert(pool, w * ROWS_PER_WORKER + i);
            }),
          );
        });
        expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
        expect(tally).toMatchObject({ layers: { driver: { calls: n, byClass: { insert: n } } } });
        expect(tally.layers.wire?.commands).toMatchObject(expected(n).wire);
        expect(tally.layers.wire?.connections).toBe(POOL_SIZE);
        expect(tally.layers.server?.summary).toMatchObject(expected(n).server);
        if (tally.layers.server?.attribution) expect(tally.layers.server.attribution.found).toHaveLength(POOL_SIZE);
        expect(tally.drivers.map((d) => d.name)).toContain(b.backend === 'postgres' ? 'pg' : 'mysql2');
        expect(tally.drivers[0]?.version).toMatch(/^\d+\.\d+\.\d+/);
        // Checked through a second, uncounted connection straight to the server.
        const check = await code.direct(network(session.backend.connection));
        try {
          expect(await check.count()).toBe(n + POOL_SIZE);
        } finally {
          await check.end();
        }
      } finally {
        await own.end();
      }
    });

    it('calls that fail (a duplicate key, a syntax error, a refused prepare): every layer as the server saw it, the same verdict in two windows (report on MySQL: Handler_write above Innodb_rows_inserted)', async () => {
      const at = network(session.connection);
      const isPg = b.backend === 'postgres';
      const own = onePool(b.backend, at);
      try {
        const pool = session.count(own);
        const run = (id: number): Promise<void> => (isPg ? FAILING.pg(pool as pg.Pool, id) : FAILING.mysql2(pool as mysql.Pool, id));
        await run(900_000);
        const want = FAILING_EXPECTED[b.backend as keyof typeof FAILING_EXPECTED];
        for (const id of [900_001, 900_002]) {
          const tally = await session.measure(() => run(id));
          expect(reasonOf(tally)).toEqual(want.verdict);
          expect(tally.layers.driver).toMatchObject({ calls: 4, errors: 3 });
          expect(tally.layers.wire?.commands).toEqual(want.wire);
          expect(tally.layers.wire?.setup?.connectionsOpened).toBe(want.connectionsOpened);
          expect(tally.layers.server?.summary).toMatchObject(want.server);
          expect(tally.verdict.reconciliation).toContain(
            `not modelled: 3 call(s) failed: each counts from nothing up to a whole call's share on the wire and the server, since a call can fail before it is sent, at its prepare or as it runs`,
          );
        }
      } finally {
        await own.end();
      }
    });

    it('a stored procedure that inserts, run with CALL: report, and the reason names server-side code beside a client around the proxy', async () => {
      const want = PROCEDURE[b.backend as keyof typeof PROCEDURE];
      const at = network(session.connection);
      const own = onePool(b.backend, at);
      try {
        const pool = session.count(own) as { query(sql: string): Promise<unknown> };
        await pool.query(want.create);
        await pool.query(want.call);
        const tally = await session.measure(() => pool.query(want.call));
        expect(tally.verdict.kind).toBe('report');
        expect(tally.verdict.reason).toContain(`where the window's connections account for 0 (+2)`);
        expect(tally.verdict.reason).toContain(
          "No other client session was there: server-side code the window's statements ran does work no answer reports (a trigger, a stored procedure or function; the window ran 1 CALL or DO statement(s))",
        );
        await pool.query(want.drop);
      } finally {
        await own.end();
      }
    });

    it('upserts (one row new, one already there): the driver counts updated rows, the server rows inserted; the rows are not compared (report on MySQL: Handler_write above Innodb_rows_inserted)', async () => {
      const want = UPSERT_EXPECTED[b.backend as keyof typeof UPSERT_EXPECTED];
      const at = network(session.connection);
      const own = onePool(b.backend, at);
      try {
        const pool = session.count(own) as { query(sql: string): Promise<unknown> };
        await pool.query('INSERT INTO own_items (id, a) VALUES (1, 0)');
        const tally = await session.measure(() => pool.query(want.sql));
        expect(reasonOf(tally)).toEqual(want.verdict);
        expect({ driverRows: tally.layers.driver?.rowsAffected, serverRows: tally.layers.server?.summary.rowsInserted }).toEqual(want.rows);
        expect(tally.verdict.reconciliation.some((l) => l.startsWith('not modelled: 1 upsert call(s)'))).toBe(true);
      } finally {
        await own.end();
      }
    });

    if (b.backend !== 'postgres') {
      it('mysql2 with multipleStatements, one COM_QUERY of three statements, one an INSERT: the server counts each, assert', async () => {
        const at = network(session.connection);
        const own = mysql.createPool({
          host: at.host,
          port: at.port,
          user: at.user,
          password: at.password,
          database: at.database,
          connectionLimit: 1,
          multipleStatements: true,
        });
        try {
          const pool = session.count(own);
          await pool.query('SELECT 1');
          const tally = await session.measure(() => pool.query('SELECT 1; INSERT INTO own_items (a) VALUES (7); SELECT 2'));
          expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
          expect(tally.layers.wire?.commands).toEqual({ COM_QUERY: 1 });
          expect(tally.layers.server?.summary).toMatchObject({ statements: 3, rowsInserted: 1 });
          expect(tally.verdict.reconciliation[0]).toBe('1 driver query [select] -> 1 COM_QUERY -> 3 statements');
        } finally {
          await own.end();
        }
      });
    }

    it('a window in which only a client the session never counted ran, beside a pool it did count: the driver layer has no calls and is not compared, assert', async () => {
      const counted = code.pool(network(session.connection));
      const uncounted = code.pool(network(session.connection));
      try {
        await code.insert(session.count(counted.pool), -31);
        await code.insert(uncounted.pool, -32);
        const tally = await session.measure(() => code.insert(uncounted.pool, -33));
        expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
        expect(tally.layers.driver?.calls).toBe(0);
        // The wire is then the model the server is compared with, statement by statement.
        expect(tally.verdict.reconciliation).toEqual([
          expect.stringMatching(/^no counted driver call in this window: its \d+ wire command\(s\) came from clients not passed to session.count\(\)/),
          expect.stringMatching(/^wire model: 1 statement\(s\) finished \(insert 1\); rows 1 inserted/),
          expect.stringMatching(/^server against the wire: .*\(statements\) 1 \(wire: 1\)/),
        ]);
        expect(tally.layers.server?.summary).toMatchObject({ statements: 1, inserts: 1, rowsInserted: 1 });
      } finally {
        await uncounted.end();
        await counted.end();
      }
    });

    it('a keep-alive SELECT 1 on the ignore list: in no driver total, its share taken out of the wire and server counts, still assert', async () => {
      const own = code.pool(network(session.connection));
      const keep = KEEPALIVE_EXPECTED[b.backend as keyof typeof KEEPALIVE_EXPECTED];
      try {
        const pool = session.count(own.pool);
        await code.insert(pool, -1);
        const tally = await session.measure(
          async () => {
            await code.keepAlive(pool);
            await code.insert(pool, 1);
          },
          { ignore: [/^SELECT \?$/] },
        );
        expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
        expect(tally.layers.driver).toMatchObject({ calls: 1, ignoredCalls: 1, byClass: { insert: 1, select: 0 } });
        expect(tally.layers.driver?.shapes.filter((s) => s.ignored)).toMatchObject([{ fingerprint: 'SELECT ?', calls: 1 }]);
        expect(tally.ignored).toMatchObject({ calls: 1, wire: keep.ignoredWire, server: { statements: 1 } });
        expect(tally.layers.wire?.commands).toEqual(keep.insertWire);
        expect(tally.layers.server?.summary).toMatchObject({ statements: 1, inserts: 1, rowsInserted: 1 });
        expect(tally.verdict.reconciliation.join('\n')).toMatch(/ignored: 1 call\(s\) left out of every total/);
      } finally {
        await own.end();
      }
    });

    it('a client connected straight to the server (around the proxy) never gives assert: the reason says the server did work the window did not see', async () => {
      const direct = await code.direct(network(session.backend.connection));
      try {
        const tally = await session.measure(async () => {
          for (let i = 0; i < 10; i++) await direct.insert(i);
        });
        expect(tally.verdict.kind).not.toBe('assert');
        expect(tally.verdict.reason).toMatch(/the server did work the window's connections do not account for/);
        expect(tally.beyondWindow.length).toBeGreaterThan(0);
        expect(tally.beyondWindow.some((row) => row.server - row.window >= 10)).toBe(true);
        expect(tally.layers.wire?.commandsTotal).toBe(0);
      } finally {
        await direct.end();
      }
    });

    it("a pool opened and ended inside the window, and one ended right before it: exact, assert (a driver's end() resolves before its goodbye reaches the server)", async () => {
      const before = code.pool(network(session.connection));
      await code.insert(session.count(before.pool), -1);
      await before.end();
      const tally = await session.measure(async () => {
        const own = code.pool(network(session.connection));
        const pool = session.count(own.pool);
        for (let i = 0; i < 3; i++) await code.insert(pool, i);
        await own.end();
      });
      expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
      expect(tally.layers.driver).toMatchObject({ calls: 3, byClass: { insert: 3 } });
      expect(tally.layers.server?.summary).toMatchObject({ statements: 3, inserts: 3, rowsInserted: 3 });
      expect(tally.beyondWindow).toEqual([]);
      expect(tally.layers.wire?.connections).toBe(1);
    });

    it('sockets destroyed with no goodbye, right before the window and inside it: exact, assert (the window waits for the server to let them go)', async () => {
      const before = await code.abrupt(network(session.connection));
      await before.insert(session.count(before.client), -1);
      before.destroy();
      const tally = await session.measure(async () => {
        const inside = await code.abrupt(network(session.connection));
        const counted = session.count(inside.client);
        for (let i = 0; i < 3; i++) await inside.insert(counted, i);
        inside.destroy();
      });
      expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
      expect(tally.layers.driver).toMatchObject({ calls: 3, byClass: { insert: 3 } });
      expect(tally.layers.server?.summary).toMatchObject({ statements: 3, inserts: 3, rowsInserted: 3 });
      expect(tally.beyondWindow).toEqual([]);
      expect(tally.layers.wire?.connections).toBe(1);
    });

    it('a query started without await is still running when the function returns: never assert, naming its line', async () => {
      const own = code.pool(network(session.connection));
      try {
        const pool = session.count(own.pool);
        await code.insert(pool, 0);
        let pending: Promise<unknown> | undefined;
        const tally = await session.measure(async () => {
          pending = code.insert(pool, 1);
        });
        await pending;
        expect(tally.verdict.kind).not.toBe('assert');
        expect(tally.verdict.reason).toMatch(
          /^the measured function returned (before|while) work it started .*created at integration\/own-code\.test\.ts:\d+:\d+/,
        );
      } finally {
        await own.end();
      }
    });

    it('a function that times out: incomplete, its statement cancelled on the server, the rows that committed anyway counted', async () => {
      const own = code.pool(network(session.connection));
      try {
        const pool = own.pool as { query(sql: string): Promise<unknown> };
        const cancelled = await session.measure(() => pool.query(code.slowInsert).catch(() => undefined), { timeoutMs: 300 });
        expect(cancelled.verdict.kind).toBe('incomplete');
        expect(cancelled.verdict.reason).toMatch(/timed out after 300 ms/);
        expect(cancelled.lateCommits).toMatchObject({ running: 1, cancelled: 1, table: 'own_items', rowsCommittedAfterGivingUp: code.rowsAfterCancel });
        const waited = await session.measure(() => pool.query(code.slowInsert), { timeoutMs: 300, onTimeout: 'wait' });
        expect(waited.verdict.kind).toBe('incomplete');
        expect(waited.lateCommits).toMatchObject({ running: 1, cancelled: 0, rowsCommittedAfterGivingUp: 1 });
        expect(waited.verdict.reason).toMatch(/1 row\(s\) committed to own_items after the function gave up/);
      } finally {
        await own.end();
      }
    });

    // The process-level half (no unhandled rejection) cannot be seen from inside Jest's sandbox: the
    // integration/faults/interrupt.test.ts child process shows it.
    it('aborted while the window opens: the function never starts, incomplete', async () => {
      const controller = new AbortController();
      controller.abort('SIGINT');
      let started = 0;
      const tally = await session.measure(
        async () => {
          started++;
          throw new Error('a statement on a connection closed under it');
        },
        { signal: controller.signal },
      );
      expect({ started, kind: tally.verdict.kind }).toEqual({ started: 0, kind: 'incomplete' });
      expect(tally.verdict.reason).toMatch(/aborted \(SIGINT\)/);
    });

    it('bad input: a value that is not a driver object, a driver of another backend, a closed session, a pool that outlives it', async () => {
      expect(() => session.count({ query: () => undefined })).toThrow(
        /session.count\(\) was given an object \(Object\), which is not a driver object sqltally counts/,
      );
      const wrongDb = new Database(':memory:');
      try {
        expect(() => session.count(wrongDb)).toThrow(/a better-sqlite3 object does not talk to/);
      } finally {
        wrongDb.close();
      }
      const other = await CaptureSession.open({ backend: backend() });
      const own = code.pool(network(other.connection));
      await code.insert(other.count(own.pool), 1).catch(() => undefined);
      await expect(other.close()).rejects.toThrow(/connection\(s\) through the session's proxy were still open when it closed, and were cut/);
      await own.end().catch(() => undefined);
      await expect(other.close()).resolves.toBeUndefined();
      await expect(other.measure(async () => undefined)).rejects.toThrow(SqltallyError);
      await expect(other.measure(async () => undefined)).rejects.toThrow(/this capture session is closed/);
    });

    if (b.backend === 'postgres') {
      it('postgres.js, which sqltally does not count here, on the wire and server layers: the driver layer is null and says why', async () => {
        await using bare = await CaptureSession.open({ backend: backend() });
        const at = network(bare.connection);
        const sql = postgres({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 2, onnotice: () => undefined });
        try {
          await sql`SELECT 1`;
          const rows = Array.from({ length: 100 }, (_, i) => ({ a: i }));
          const tally = await bare.measure(async () => {
            await sql`INSERT INTO own_items ${sql(rows, 'a')}`;
          });
          expect(tally.layers.driver).toBeNull();
          expect(tally.driverAbsent).toMatch(/no driver object was counted in this session/);
          expect({ kind: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ kind: 'assert', reason: expect.any(String) });
          expect(tally.layers.wire?.commands).toMatchObject({ Bind: 1, Execute: 1, Sync: 1 });
          expect(tally.layers.wire?.rowsAffected).toBe(100);
          expect(tally.layers.server?.summary).toMatchObject({ statements: 1, inserts: 1, rowsInserted: 100 });
        } finally {
          await sql.end();
        }
      });

      it("a window whose only traffic ran on a counted object's connection, by a call its wrapper did not see: report, never assert", async () => {
        // The raw sql shares its one connection with the counted wrapper of it: the call the window runs is missed, as a
        // call form a wrapper cannot see would be, and the wire ran on the connection the counted calls named.
        const at = network(session.connection);
        const raw = postgres({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, onnotice: () => undefined });
        try {
          await session.count(raw)`SELECT 1`;
          const tally = await session.measure(() => raw`SELECT 2`);
          expect(tally.layers.driver?.calls).toBe(0);
          expect(reasonOf(tally)).toEqual({ kind: 'report', reason: expect.stringMatching(/^the layers disagree/) });
          expect(tally.verdict.discrepancies[0]).toMatch(
            /^driver layer: no counted call in this window, yet \d+ wire command\(s\) ran on connection\(s\) #\d+, which counted calls ran on in this session/,
          );
        } finally {
          await raw.end();
        }
      });

      it('a postgres.js query started with execute() and not awaited is running when the function returns: never assert', async () => {
        // postgres.js hands a query to the counting handler a microtask after execute(); the window must still see it
        // as started (its in-flight count), not close as if nothing ran.
        const at = network(session.connection);
        const raw = postgres({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, onnotice: () => undefined });
        try {
          const sql = session.count(raw);
          await sql`SELECT 1`;
          let pending: Promise<unknown> | undefined;
          const tally = await session.measure(async () => {
            pending = sql`INSERT INTO own_items (a) VALUES (${-7})`.execute();
          });
          await pending;
          expect(tally.verdict.kind).not.toBe('assert');
          expect(tally.verdict.reason).toMatch(
            /^the measured function returned (before|while) work it started .*created at integration\/own-code\.test\.ts:\d+:\d+|^work was still in flight when the measured function returned/,
          );
        } finally {
          await raw.end();
        }
      });

      // sql.begin sends BEGIN as a Query and COMMIT as a template; a query builder on a reserved connection sends both
      // as Queries. Warmed once first, so every window is alike (pg_stat_statements counts a named COMMIT once per connection).
      const TRANSACTIONS = {
        'sql.begin': { prepare: true, wire: { Query: 2, Parse: 0, Describe: 0, Bind: 4, Execute: 4, Sync: 4 }, statements: 4 },
        'sql.begin under prepare: false': { prepare: false, wire: { Query: 2, Parse: 4, Describe: 4, Bind: 4, Execute: 4, Sync: 4 }, statements: 6 },
        'a reserved connection, BEGIN and COMMIT through unsafe()': {
          prepare: true,
          wire: { Query: 4, Parse: 0, Describe: 0, Bind: 2, Execute: 2, Sync: 2 },
          statements: 6,
        },
      } as const;
      it.each(Object.entries(TRANSACTIONS))('postgres.js transactions, %s: exact on the wire and the server in two windows, assert', async (how, expected) => {
        const at = network(session.connection);
        const raw = postgres({
          host: at.host,
          port: at.port,
          user: at.user,
          password: at.password,
          database: at.database,
          max: 1,
          prepare: expected.prepare,
          onnotice: () => undefined,
        });
        try {
          const sql = session.count(raw);
          const twoTransactions = async (): Promise<void> => {
            for (const a of [-11, -12]) {
              if (how.startsWith('sql.begin')) {
                await sql.begin(async (tx) => {
                  await tx`INSERT INTO own_items (a) VALUES (${a})`;
                });
              } else {
                const reserved = await sql.reserve();
                await reserved.unsafe('BEGIN');
                await reserved`INSERT INTO own_items (a) VALUES (${a})`;
                await reserved.unsafe('COMMIT');
                reserved.release();
              }
            }
          };
          await twoTransactions();
          for (let w = 0; w < 2; w++) {
            const tally = await session.measure(twoTransactions);
            const commands = tally.layers.wire?.commands ?? {};
            expect({ kind: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ kind: 'assert', reason: expect.any(String) });
            expect(Object.fromEntries(Object.keys(expected.wire).map((k) => [k, commands[k] ?? 0]))).toEqual(expected.wire);
            expect(tally.layers.driver?.calls).toBe(6);
            expect(tally.layers.server?.summary).toMatchObject({ statements: expected.statements, inserts: 2, rowsInserted: 2 });
          }
        } finally {
          await raw.end();
        }
      });

      // Calls whose messages differ from a plain query's, on 100 rows: a cursor executes once per batch, describe()
      // executes nothing, and a simple Query can carry several statements, each counted by pg_stat_statements.
      const POSTGRES_JS_FORMS: Record<string, { run: (sql: postgres.Sql) => Promise<unknown>; wire: Record<string, number>; statements: number }> = {
        'a cursor read to its end with for await': {
          run: async (sql) => {
            for await (const rows of sql`SELECT a FROM own_items WHERE a > ${-1}`.cursor(30)) expect(rows.length).toBeGreaterThan(0);
          },
          wire: { Bind: 1, Execute: 4, Flush: 4, Sync: 1 },
          statements: 1,
        },
        // postgres.js closes the portal after the loop has ended: the window waits for it, as the code cannot.
        'a cursor left with break after its first batch': {
          run: async (sql) => {
            for await (const rows of sql`SELECT a FROM own_items WHERE a > ${-1}`.cursor(30)) if (rows.length > 0) break;
          },
          wire: { Bind: 1, Execute: 1, Flush: 1, Close: 1, Sync: 1 },
          statements: 1,
        },
        'describe()': {
          run: (sql) => sql`SELECT a FROM own_items WHERE a = ${1}`.describe(),
          wire: { Parse: 1, Describe: 1, Flush: 1, Sync: 1 },
          statements: 0,
        },
        'a simple Query of two statements through unsafe()': {
          run: (sql) => sql.unsafe('SELECT count(*) FROM own_items; SELECT max(a) FROM own_items'),
          wire: { Query: 1 },
          statements: 2,
        },
      };
      it.each(Object.entries(POSTGRES_JS_FORMS))('postgres.js, %s: exact on the wire and the server, assert', async (_form, expected) => {
        const at = network(session.connection);
        const raw = postgres({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, onnotice: () => undefined });
        try {
          const sql = session.count(raw);
          await sql`INSERT INTO own_items (a) SELECT g FROM generate_series(1, 100) g`;
          await expected.run(sql);
          const tally = await session.measure(() => expected.run(sql));
          expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
          expect(tally.layers.driver?.calls).toBe(1);
          expect(tally.layers.wire?.commands).toEqual(expected.wire);
          expect(tally.layers.server?.summary.statements).toBe(expected.statements);
        } finally {
          await raw.end();
        }
      });

      it('pg Submittables: a pg-cursor read in batches of 30 (an Execute each) and a pg-copy-streams COPY FROM STDIN (its rows from `COPY n`): assert', async () => {
        // Neither package ships types: the parts used here.
        const Cursor = require('pg-cursor') as new (
          text: string,
          values: unknown[],
        ) => pg.Submittable & { read(rows: number): Promise<unknown[]>; close(): Promise<void> };
        const { from: copyFrom } = require('pg-copy-streams') as { from: (text: string) => pg.Submittable & NodeJS.WritableStream };
        const at = network(session.connection);
        const pool = session.count(
          new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, idleTimeoutMillis: 0 }),
        );
        try {
          await pool.query('INSERT INTO own_items (a) SELECT g FROM generate_series(1, 100) g');
          const client = await pool.connect();
          try {
            const cursor = await session.measure(async () => {
              const c = client.query(new Cursor('SELECT a FROM own_items WHERE a > $1', [0]));
              while ((await c.read(30)).length > 0);
              await c.close();
            });
            expect(reasonOf(cursor)).toEqual({ kind: 'assert', reason: expect.any(String) });
            expect(cursor.layers.wire?.commands).toMatchObject({ Parse: 1, Bind: 1, Execute: 4, Sync: 1 });
            expect(cursor.layers.server?.summary.statements).toBe(1);
            const copy = await session.measure(async () => {
              const stream = client.query(copyFrom('COPY own_items (a) FROM STDIN'));
              await pipeline(Readable.from(['1\n2\n3\n']), stream);
            });
            expect(reasonOf(copy)).toEqual({ kind: 'assert', reason: expect.any(String) });
            expect(copy.layers.wire?.commands).toEqual({ Query: 1, CopyData: 1, CopyDone: 1 });
            expect(copy.layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: 3 });
            // The COPY is one call until pg tells its stream how it ended, with the rows of `COPY 3`: compared exactly.
            expect(copy.layers.driver?.events.map((e) => [e.statementClass, e.rowsAffected, e.error])).toEqual([['other', 3, null]]);
            expect(copy.verdict.reconciliation).toContain('server: statements 1, rowsInserted 3');
            expect(copy.verdict.reconciliation.join('\n')).not.toMatch(/not modelled/);
          } finally {
            client.release();
          }
        } finally {
          await pool.end();
        }
      });

      it('pg, a simple Query of three statements, one an INSERT: each statement counted, rows compared as at least what the driver reported, assert', async () => {
        const at = network(session.connection);
        const pool = session.count(
          new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, idleTimeoutMillis: 0 }),
        );
        try {
          await pool.query('SELECT 1');
          const tally = await session.measure(() => pool.query('SELECT 1; INSERT INTO own_items (a) VALUES (7); SELECT 2'));
          expect(reasonOf(tally)).toEqual({ kind: 'assert', reason: expect.any(String) });
          expect(tally.layers.wire?.commands).toEqual({ Query: 1 });
          expect(tally.layers.server?.summary).toMatchObject({ statements: 3, rowsInserted: 1 });
          expect(tally.verdict.reconciliation).toContain(
            "not modelled: 1 call(s) sent several statements in one text: the rows their INSERTs wrote are in no INSERT call's result, so rows are compared as at least 0",
          );
        } finally {
          await pool.end();
        }
      });

      it('pg, COMMIT as a named statement: pg_stat_statements counts it at its first run on the connection only, and every window asserts', async () => {
        const at = network(session.connection);
        const pool = session.count(
          new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, idleTimeoutMillis: 0 }),
        );
        try {
          await pool.query('SELECT 1');
          const windows = [];
          for (let w = 0; w < 2; w++) {
            windows.push(
              await session.measure(async () => {
                const client = await pool.connect();
                for (const a of [-21, -22]) {
                  await client.query('BEGIN');
                  await client.query({ name: 'own_insert', text: 'INSERT INTO own_items (a) VALUES ($1)', values: [a] });
                  await client.query({ name: 'own_commit', text: 'COMMIT' });
                }
                client.release();
              }),
            );
          }
          expect(windows.map((t) => t.verdict.kind)).toEqual(['assert', 'assert']);
          expect(windows.map((t) => t.layers.wire?.commands.Parse)).toEqual([2, undefined]);
          // The first window parses and first runs the COMMIT: counted once of its two runs; the second not at all.
          expect(windows.map((t) => t.layers.server?.summary.statements)).toEqual([5, 4]);
        } finally {
          await pool.end();
        }
      });

      it("a pool that first connects inside a window: the proxy's statistics flush on its session is never counted, and the next windows assert", async () => {
        await using lazy = await CaptureSession.open({ backend: backend() });
        const at = network(lazy.connection);
        const pool = lazy.count(
          new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, idleTimeoutMillis: 0 }),
        );
        try {
          const windows = [];
          for (let i = 0; i < 3; i++) windows.push(await lazy.measure(() => pool.query('INSERT INTO own_items (a) VALUES ($1)', [i])));
          // The first window opened the connection: its handshake is set apart in the wire layer's setup bucket.
          expect(windows.map((t) => t.layers.wire?.setup?.connectionsOpened)).toEqual([1, 0, 0]);
          for (const tally of windows) {
            expect({ kind: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ kind: 'assert', reason: expect.any(String) });
            expect(tally.layers.server?.summary).toMatchObject({ statements: 1, inserts: 1, rowsInserted: 1 });
            expect(tally.layers.server?.statements?.map((s) => s.query)).toEqual(['INSERT INTO own_items (a) VALUES ($1)']);
          }
        } finally {
          await pool.end();
        }
      });

      it('every session of a pool flushes its statistics through the proxy: rows exact over 4 connections, with the settle time', async () => {
        const own = code.pool(network(session.connection));
        try {
          const pool = session.count(own.pool);
          await Promise.all(Array.from({ length: POOL_SIZE }, (_, i) => code.insert(pool, -1 - i)));
          const tally = await session.measure(async () => {
            await Promise.all(
              Array.from({ length: POOL_SIZE }, (_, w) =>
                (pool as pg.Pool).query('INSERT INTO own_items (a) SELECT g FROM generate_series(1, 500) g WHERE $1::int >= 0', [w]),
              ),
            );
          });
          expect(tally.verdict.kind).toBe('assert');
          expect(tally.layers.server?.summary.rowsInserted).toBe(POOL_SIZE * 500);
          expect(tally.layers.server?.settleNs).not.toBeNull();
        } finally {
          await own.end();
        }
      });
    }
  },
  (b) => b.backend !== 'sqlite',
);

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);

    it("the user's own better-sqlite3 Database, counted: driver and total_changes layers, other writers to the file seen", async () => {
      await using session = await CaptureSession.open({ backend: backend(), table: { name: 'own_items' } });
      const c = session.connection;
      if (c.kind !== 'file') throw new Error('expected a file');
      const raw = new Database(c.filename);
      const other = new Database(c.filename);
      try {
        raw.exec('DROP TABLE IF EXISTS own_items; CREATE TABLE own_items (id INTEGER PRIMARY KEY, a INTEGER NOT NULL)');
        const db = session.count(raw);
        const insert = db.prepare('INSERT INTO own_items (a) VALUES (?)');
        const tally = await session.measure(async () => {
          db.transaction(() => {
            for (let i = 0; i < 1000; i++) insert.run(i);
          })();
        });
        expect(tally.verdict.kind).toBe('assert');
        expect(tally.layers.driver).toMatchObject({ calls: 1002, byClass: { insert: 1000, begin: 1, commit: 1 } });
        expect(tally.layers.server?.summary.rowsInserted).toBe(1000);
        // Another handle on the same file, not counted, writes inside the window: never assert.
        const bypass = await session.measure(async () => {
          insert.run(1);
          other.prepare('INSERT INTO own_items (a) VALUES (?)').run(2);
        });
        expect(bypass.verdict.kind).not.toBe('assert');
        expect(bypass.verdict.reason).toMatch(/data_version/);
      } finally {
        raw.close();
        other.close();
      }
    });

    it('the same Database counted again (once per test, say) is read once: its rows are not added twice', async () => {
      await using session = await CaptureSession.open({ backend: backend() });
      const c = session.connection;
      if (c.kind !== 'file') throw new Error('expected a file');
      const raw = new Database(c.filename);
      try {
        raw.exec('DROP TABLE IF EXISTS own_items; CREATE TABLE own_items (id INTEGER PRIMARY KEY, a INTEGER NOT NULL)');
        const first = session.count(raw);
        for (const round of [1, 2, 3]) {
          const db = session.count(raw);
          expect(db).toBe(first);
          const tally = await session.measure(async () => {
            const insert = db.prepare('INSERT INTO own_items (a) VALUES (?)');
            db.transaction(() => {
              for (let i = 0; i < 500; i++) insert.run(i);
            })();
          });
          expect({ round, verdict: tally.verdict.kind, rows: tally.layers.server?.summary.rowsInserted, calls: tally.layers.driver?.calls }).toEqual({
            round,
            verdict: 'assert',
            rows: 500,
            calls: 503,
          });
        }
      } finally {
        raw.close();
      }
    });

    it('a Database the session never counted (an ORM that opens its own) writing to the file: never assert, the reason says why', async () => {
      await using session = await CaptureSession.open({ backend: backend() });
      const c = session.connection;
      if (c.kind !== 'file') throw new Error('expected a file');
      const own = new Database(c.filename);
      try {
        own.exec('DROP TABLE IF EXISTS own_items; CREATE TABLE own_items (id INTEGER PRIMARY KEY, a INTEGER NOT NULL)');
        const tally = await session.measure(async () => {
          own.prepare('INSERT INTO own_items (a) VALUES (?)').run(1);
        });
        expect(tally.layers.driver).toBeNull();
        expect({ kind: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({
          kind: 'report',
          reason: expect.stringMatching(/no SQLite handle is counted in the session, so nothing reads the file/),
        });
      } finally {
        own.close();
      }
    });
  },
  (b) => b.backend === 'sqlite',
);

// The mariadb connector's pool is counted the same way as mysql2's.
describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);
    it('a mariadb connector pool through the proxy, counted: batch and pool.query on the three layers', async () => {
      await using session = await CaptureSession.open({ backend: backend() });
      const at = network(session.connection);
      const raw = mariadb.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: 2 });
      try {
        await raw.query('DROP TABLE IF EXISTS own_batch');
        await raw.query('CREATE TABLE own_batch (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL)');
        const pool = session.count(raw);
        await pool.query('SELECT 1');
        const tally = await session.measure(async () => {
          await pool.batch(
            'INSERT INTO own_batch (a) VALUES (?)',
            Array.from({ length: 100 }, (_, i) => [i]),
          );
        });
        expect(tally.verdict.kind).toBe('assert');
        expect(tally.layers.driver).toMatchObject({ calls: 1, byKind: { batch: 1 }, parameterSets: 100 });
        expect(tally.layers.server?.summary.rowsInserted).toBe(100);
      } finally {
        await raw.end();
      }
    });
  },
  (b) => b.backend === 'mariadb',
);
