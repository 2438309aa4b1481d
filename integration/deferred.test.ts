import Database from 'better-sqlite3';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { integer as pgInteger, pgTable, serial, text as pgText } from 'drizzle-orm/pg-core';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { knex, KnexPool } from 'knex';
import type { Knex } from 'knex';
import { Kysely, MysqlDialect, PostgresDialect, sql as kyselySql, SqliteDialect } from 'kysely';
import type { Dialect as KyselyDialect, Generated } from 'kysely';
import * as mariadb from 'mariadb';
import mysql2Callback from 'mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import postgres from 'postgres';
import { CaptureSession } from '../src/capture/capture';
import type { Captured } from '../src/capture/capture';
import type { BackendName, NetworkConnection } from '../src/backends/types';
import type { Tally } from '../src/capture/tally';
import { installSqltallyMatchers } from '../src/jest/matchers';
import { windowPerTest } from '../src/jest/window';
import { describeEachBackend, withBackend } from './harness';
import { createTables } from './orms/fixture';

installSqltallyMatchers();

/**
 * Work the measured function starts and does not await (an ORM call, a timer, a tick, a microtask): never `assert`, the
 * reason naming the work and the line that started it; the same code awaited asserts. Keyed by backend where they differ.
 */

const ROWS = 400;
/** The line of this file a reason names: the site the work was created at. */
const HERE = /created at integration\/deferred\.test\.ts:\d+:\d+/;

interface Tables {
  parents: { id: Generated<number>; name: string };
  children: { id: Generated<number>; parent_id: number; name: string };
}

const drizzleChildren = {
  postgres: pgTable('children', { id: serial('id').primaryKey(), parentId: pgInteger('parent_id').notNull(), name: pgText('name').notNull() }),
  mysql: mysqlTable('children', {
    id: int('id').autoincrement().primaryKey(),
    parentId: int('parent_id').notNull(),
    name: varchar('name', { length: 64 }).notNull(),
  }),
  sqlite: sqliteTable('children', { id: integer('id').primaryKey(), parentId: integer('parent_id').notNull(), name: text('name').notNull() }),
};

let tagged = 0;
function rows(n = ROWS): { parent_id: number; name: string }[] {
  const tag = ++tagged;
  return Array.from({ length: n }, (_, i) => ({ parent_id: (i % 20) + 1, name: `deferred-${tag}-${i}` }));
}

function network(c: CaptureSession['connection']): NetworkConnection {
  if (c.kind !== 'network') throw new Error('expected a network connection');
  return { kind: 'network', host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
}

/** The clients a test starts work on, all connected to the session, and how to end them. */
interface Clients {
  /** knex over a pool counted into the session (the README recipe). */
  knexCounted: Knex;
  /** knex with its own pool, connected to the session but not counted. */
  knexOwn: Knex;
  kysely: Kysely<Tables>;
  drizzle: { insert: (rows: { parent_id: number; name: string }[]) => Promise<unknown> };
  /** One single-row INSERT through a counted driver object. */
  insert: (name: string) => Promise<unknown>;
  end: () => Promise<void>;
}

async function clientsFor(backend: BackendName, session: CaptureSession): Promise<Clients> {
  const c = session.connection;
  if (c.kind === 'file') {
    // One counted handle for every counted client: with several, the SQLite probe cannot see a writer beside them.
    const counted = session.count(new Database(c.filename));
    const pool = new KnexPool<Database.Database>({ min: 1, max: 1, create: async () => counted, destroy: () => undefined });
    const knexCounted = knex({ client: 'better-sqlite3', useNullAsDefault: true, connectionPool: pool });
    const knexOwn = knex({ client: 'better-sqlite3', useNullAsDefault: true, connection: { filename: c.filename } });
    const kysely = new Kysely<Tables>({ dialect: new SqliteDialect({ database: counted }) });
    const d = drizzleSqlite({ client: counted });
    const insertOne = counted.prepare('INSERT INTO children (parent_id, name) VALUES (1, ?)');
    await knexCounted.raw('select 1');
    await knexOwn.raw('select 1');
    return {
      knexCounted,
      knexOwn,
      kysely,
      drizzle: {
        insert: (r) =>
          d
            .insert(drizzleChildren.sqlite)
            .values(r.map((x) => ({ parentId: x.parent_id, name: x.name })))
            .execute(),
      },
      // better-sqlite3 is synchronous: the promise is only there to start it the way an async driver's call is.
      insert: async (name) => insertOne.run(name),
      end: async () => {
        await knexCounted.destroy();
        await pool.destroy();
        await knexOwn.destroy();
        await kysely.destroy(); // closes the counted handle
      },
    };
  }
  const at = network(c);
  const options = { host: at.host, port: at.port, user: at.user, password: at.password, database: at.database };
  const { pool, knexClient, knexOwnPool, kyselyDialect, drizzleInsert, insertSql } = NETWORK_CLIENTS[backend === 'postgres' ? 'postgres' : 'mysql'](
    session,
    options,
  );
  const knexCounted = knex({ client: knexClient, connectionPool: pool });
  const knexOwn = knex({ client: knexClient, connection: options, pool: knexOwnPool });
  const kysely = new Kysely<Tables>({ dialect: kyselyDialect });
  await knexCounted.raw('select 1');
  await knexOwn.raw('select 1');
  await kyselySql`select 1`.execute(kysely);
  return {
    knexCounted,
    knexOwn,
    kysely,
    drizzle: { insert: drizzleInsert },
    insert: (name) => pool.query(insertSql, [name]),
    end: async () => {
      await knexCounted.destroy();
      await knexOwn.destroy();
      await kysely.destroy();
      await pool.end();
    },
  };
}

type NetworkOptions = Omit<NetworkConnection, 'kind'>;

/** What differs between the two protocols' clients: the counted pools, knex's client, Kysely's dialect, drizzle. */
interface NetworkClients {
  /** Counted into the session; knex's counted client and drizzle share it. */
  pool: Knex.ConnectionPool & { query(sql: string, values: unknown[]): Promise<unknown>; end(): Promise<void> };
  knexClient: string;
  knexOwnPool: Knex.PoolConfig;
  /** Over a second counted pool of one connection. */
  kyselyDialect: KyselyDialect;
  drizzleInsert: Clients['drizzle']['insert'];
  insertSql: string;
}

const NETWORK_CLIENTS: Record<'postgres' | 'mysql', (session: CaptureSession, options: NetworkOptions) => NetworkClients> = {
  postgres: (session, options) => {
    const pool = session.count(new pg.Pool({ ...options, max: 2, idleTimeoutMillis: 0 }));
    const d = drizzlePg({ client: pool });
    return {
      pool,
      knexClient: 'pg',
      knexOwnPool: { min: 1, max: 1, idleTimeoutMillis: 3_600_000 },
      kyselyDialect: new PostgresDialect({ pool: session.count(new pg.Pool({ ...options, max: 1, idleTimeoutMillis: 0 })) }),
      drizzleInsert: (r) =>
        d
          .insert(drizzleChildren.postgres)
          .values(r.map((x) => ({ parentId: x.parent_id, name: x.name })))
          .execute(),
      insertSql: 'INSERT INTO children (parent_id, name) VALUES (1, $1)',
    };
  },
  mysql: (session, options) => {
    const pool = session.count(mysql.createPool({ ...options, connectionLimit: 2 }));
    const d = drizzleMysql({ client: pool });
    return {
      pool,
      knexClient: 'mysql2',
      knexOwnPool: { min: 1, max: 1 },
      kyselyDialect: new MysqlDialect({ pool: session.count(mysql2Callback.createPool({ ...options, connectionLimit: 1 })) }),
      drizzleInsert: (r) =>
        d
          .insert(drizzleChildren.mysql)
          .values(r.map((x) => ({ parentId: x.parent_id, name: x.name })))
          .execute(),
      insertSql: 'INSERT INTO children (parent_id, name) VALUES (1, ?)',
    };
  },
};

/** Work started one way, awaited or not. */
interface Case {
  name: string;
  start: (c: Clients) => Promise<unknown>;
}

const CASES: Case[] = [
  {
    name: 'a knex insert (counted pool, the README recipe)',
    start: (c) =>
      c
        .knexCounted('children')
        .insert(rows())
        .then(() => undefined),
  },
  {
    name: 'a knex insert (knex with its own pool)',
    start: (c) =>
      c
        .knexOwn('children')
        .insert(rows())
        .then(() => undefined),
  },
  { name: 'a Kysely insert', start: (c) => c.kysely.insertInto('children').values(rows()).execute() },
  { name: 'a drizzle insert', start: (c) => c.drizzle.insert(rows()) },
  { name: 'a query from setTimeout(0)', start: (c) => new Promise((resolve, reject) => setTimeout(() => c.insert('timer-0').then(resolve, reject), 0)) },
  { name: 'a query from setTimeout(50)', start: (c) => new Promise((resolve, reject) => setTimeout(() => c.insert('timer-50').then(resolve, reject), 50)) },
  { name: 'a query from process.nextTick', start: (c) => new Promise((resolve, reject) => process.nextTick(() => c.insert('tick').then(resolve, reject))) },
  { name: 'a query from queueMicrotask', start: (c) => new Promise((resolve, reject) => queueMicrotask(() => c.insert('microtask').then(resolve, reject))) },
];

/**
 * The awaited window's verdict where it is not `assert` today, by backend and case. knex with its own pool on SQLite
 * writes through a better-sqlite3 handle nobody counted, which the SQLite probe cannot see: the window says so.
 */
const AWAITED_NOT_ASSERT: Partial<Record<BackendName, Record<string, RegExp>>> = {
  sqlite: { 'a knex insert (knex with its own pool)': /data_version|no SQLite handle|writer beside them/ },
};

/**
 * Not awaited, and still the window's: drizzle over better-sqlite3 runs the statement synchronously inside
 * `execute()`, so it is done before the function returns, every time, and the window counts it whole.
 */
const RUNS_SYNCHRONOUSLY: Partial<Record<BackendName, string[]>> = {
  sqlite: ['a drizzle insert'],
};

/**
 * Not awaited, not `assert`, line not named: knex's own SQLite handle is counted nowhere and there is no wire, so only the
 * probe sees the file change (data_version) and says `report`.
 */
const UNNAMED: Partial<Record<BackendName, Record<string, RegExp>>> = {
  sqlite: { 'a knex insert (knex with its own pool)': /data_version/ },
};

/** The cases a begin()/end() or windowPerTest window is tried with: its code runs in the test body's own context. */
const WINDOW_CASES = ['a knex insert (counted pool, the README recipe)', 'a knex insert (knex with its own pool)', 'a query from setTimeout(50)'];

/**
 * Left running by a test body, finished before afterEach ended the window: knex over a counted better-sqlite3 handle
 * inserts a few microtasks after the call, so the window holds the awaited counts and nothing pending.
 */
const FINISHED_BEFORE_AFTER_EACH: Partial<Record<BackendName, string[]>> = {
  sqlite: ['a knex insert (counted pool, the README recipe)'],
};

function describeVerdict(t: Tally): string {
  return `${t.verdict.kind}: ${t.verdict.reason}`;
}

describeEachBackend((b) => {
  const backend = withBackend(b.id);
  let session: CaptureSession;
  let clients: Clients | undefined;
  afterAll(async () => {
    await clients?.end();
    await session?.close();
  });
  beforeAll(async () => {
    await createTables(backend());
    session = await CaptureSession.open({ backend: backend() });
    clients = await clientsFor(b.backend, session);
  });

  const awaitedCounts = new Map<string, { calls: number | undefined; rows: number | undefined }>();
  for (const c of CASES) {
    it(`${c.name}, awaited: the verdict of today (assert), the work counted`, async () => {
      const tally = await session.measure(async () => {
        await c.start(clients!);
      });
      const expected = AWAITED_NOT_ASSERT[b.backend]?.[c.name];
      if (expected) expect(describeVerdict(tally)).toMatch(expected);
      else expect(describeVerdict(tally)).toMatch(/^assert: /);
      expect(tally.deferredWork).toBeNull();
      awaitedCounts.set(c.name, { calls: tally.layers.driver?.calls, rows: tally.layers.driver?.rowsAffected });
    });

    it(`${c.name}, not awaited: never assert, the reason names the pending work and its line`, async () => {
      let pending: Promise<unknown> | undefined;
      const tally = await session.measure(async () => {
        pending = c.start(clients!);
      });
      await pending;
      if (RUNS_SYNCHRONOUSLY[b.backend]?.includes(c.name)) {
        expect(describeVerdict(tally)).toMatch(/^assert: /);
        expect({ calls: tally.layers.driver?.calls, rows: tally.layers.driver?.rowsAffected, deferred: tally.deferredWork }).toEqual({
          ...awaitedCounts.get(c.name),
          deferred: null,
        });
        return;
      }
      expect(tally.verdict.kind).not.toBe('assert');
      const unnamed = UNNAMED[b.backend]?.[c.name];
      if (unnamed) {
        expect(tally.verdict.reason).toMatch(unnamed);
        return;
      }
      expect(tally.verdict.reason).toMatch(HERE);
      expect(tally.verdict.reason).toMatch(/^the measured function returned (before|while) work it started/);
      expect(tally.deferredWork?.items.length).toBeGreaterThan(0);
    });
  }

  /** A window the test body's code ran in, not awaited: never assert, and where it can be, named with its line. */
  function expectNotAssert(name: string, tally: Tally | undefined): void {
    expect(tally).toBeDefined();
    const t = tally!;
    expect(t.verdict.kind).not.toBe('assert');
    const unnamed = UNNAMED[b.backend]?.[name];
    if (unnamed) {
      expect(t.verdict.reason).toMatch(unnamed);
      return;
    }
    expect(t.verdict.reason).toMatch(HERE);
    expect(t.verdict.reason).toMatch(/^end\(\) was called (before|while) work started in the window/);
    expect(t.deferredWork?.items.length).toBeGreaterThan(0);
  }

  function expectAwaited(name: string, tally: Tally): void {
    const expected = AWAITED_NOT_ASSERT[b.backend]?.[name];
    if (expected) expect(describeVerdict(tally)).toMatch(expected);
    else expect(describeVerdict(tally)).toMatch(/^assert: /);
    expect(tally.deferredWork).toBeNull();
    const counts = awaitedCounts.get(name);
    if (counts) expect({ calls: tally.layers.driver?.calls, rows: tally.layers.driver?.rowsAffected }).toEqual(counts);
  }

  // begin()/end() has no function to run in a context of its own: the code between them is the test body's.
  for (const name of WINDOW_CASES) {
    const c = CASES.find((x) => x.name === name)!;
    it(`begin()/end(): ${name}, awaited: assert, the same counts as measure()`, async () => {
      const open = await session.begin();
      await c.start(clients!);
      expectAwaited(name, await open.end());
    });

    it(`begin()/end(): ${name}, not awaited: never assert, the reason names the pending work and its line`, async () => {
      const open = await session.begin();
      const pending = c.start(clients!);
      const tally = await open.end();
      await pending;
      expectNotAssert(name, tally);
    });
  }

  it('begin()/end() called from an async helper the window started: the helper waiting for the end is not work', async () => {
    const open = await session.begin();
    const helper = async () => {
      await clients!.insert('helper');
      return open.end();
    };
    const tally = await helper();
    expect(describeVerdict(tally)).toMatch(/^assert: /);
    expect(tally.deferredWork).toBeNull();
  });

  /** Tallies of windowPerTest windows the runner's afterEach ended, by case: the test body had returned by then. */
  const endedByRunner = new Map<string, Tally>();
  describe('windowPerTest', () => {
    let current: string | null = null;
    const windows = windowPerTest(() => session, {
      check: (t) => {
        if (current !== null) endedByRunner.set(current, t);
        current = null;
      },
    });
    for (const name of WINDOW_CASES) {
      const c = CASES.find((x) => x.name === name)!;
      it(`${name}, awaited, tally() in the test: assert, the same counts as measure()`, async () => {
        await c.start(clients!);
        expectAwaited(name, await windows.tally());
      });

      it(`${name}, not awaited, tally() in the test: never assert, the reason names the pending work and its line`, async () => {
        const pending = c.start(clients!);
        const tally = await windows.tally();
        await pending;
        expectNotAssert(name, tally);
      });

      it(`${name}, not awaited, the window ended by afterEach: never assert (checked in the next test)`, () => {
        current = name;
        void c.start(clients!).catch(() => undefined);
      });
    }
  });

  it('windowPerTest windows the runner ended after a test left work running: never assert, named', () => {
    for (const name of WINDOW_CASES) {
      const tally = endedByRunner.get(name);
      if (!FINISHED_BEFORE_AFTER_EACH[b.backend]?.includes(name)) {
        expectNotAssert(name, tally);
        continue;
      }
      expect(tally && describeVerdict(tally)).toMatch(/^assert: /);
      const counts = awaitedCounts.get(name);
      if (counts) expect({ calls: tally?.layers.driver?.calls, rows: tally?.layers.driver?.rowsAffected }).toEqual(counts);
    }
  });

  // Issue 36, item 3: the same code counted 1 or 2 calls from run to run, under `assert`, and a gate on it flapped.
  it('a counted call started by setTimeout(0) after an awaited one: every window counts both, none asserts', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      let pending: Promise<unknown> | undefined;
      const tally = await session.measure(async () => {
        await clients!.insert(`flap-a-${i}`);
        pending = new Promise((resolve, reject) => setTimeout(() => clients!.insert(`flap-b-${i}`).then(resolve, reject), 0));
      });
      await pending;
      seen.push(`${tally.verdict.kind} ${tally.layers.driver?.calls}`);
    }
    expect(seen).toEqual(Array.from({ length: 6 }, () => 'report 2'));
  });

  it('a timer of an hour: incomplete after the bounded wait, naming it; close() does not wait for it', async () => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const tally = await session.measure(
        async () => {
          timer = setTimeout(() => void clients!.insert('never'), 3_600_000);
        },
        { deferredWaitMs: 200 },
      );
      expect(tally.verdict.kind).toBe('incomplete');
      expect(tally.verdict.reason).toMatch(
        /still pending after a 200 ms wait: a setTimeout\(…, 3600000\) timer created at integration\/deferred\.test\.ts:\d+:\d+ \(still pending\)/,
      );
      const other = await CaptureSession.open({ backend: backend() });
      await other.measure(async () => void (timer ??= setTimeout(() => undefined, 3_600_000)), { deferredWaitMs: 50 });
      await expect(other.close()).resolves.toBeUndefined();
    } finally {
      clearTimeout(timer);
    }
  });

  // The pool's only connections are held in transactions opened before the window, by nobody counted: the insert
  // waits for a connection longer than the window waits for it, so nothing reaches the database in the window.
  it.each([
    ['knex with its own pool (1 connection)', (c: Clients) => ({ knex: c.knexOwn, held: 1 })],
    ['knex over the counted pool (the README recipe)', (c: Clients) => ({ knex: c.knexCounted, held: b.backend === 'sqlite' ? 1 : 2 })],
  ])(
    'an un-awaited insert whose pool connection is held past the wait, %s: incomplete, naming the pending work and its line, whether or not the database moved',
    async (_name, pick) => {
      const { knex: k, held } = pick(clients!);
      const transactions: Knex.Transaction[] = [];
      for (let i = 0; i < held; i++) transactions.push(await k.transaction());
      let pending: Promise<unknown> | undefined;
      let tally: Captured<void> | undefined;
      try {
        tally = await session.measure(
          async () => {
            pending = k('children')
              .insert(rows(5))
              .then(() => undefined);
          },
          { deferredWaitMs: 300 },
        );
      } finally {
        for (const t of transactions) await t.commit();
        await pending;
      }
      expect(describeVerdict(tally)).toMatch(/^incomplete: the measured function returned while work it started was still pending after a 300 ms wait: /);
      expect(tally.verdict.reason).toMatch(new RegExp(`a promise ${HERE.source} \\(still pending\\)`));
      expect(tally.deferredWork?.items.some((i) => i.type === 'PROMISE' && !i.settled)).toBe(true);
    },
  );

  it('a workload that throws after starting work it does not await: incomplete, naming both', async () => {
    let pending: Promise<unknown> | undefined;
    const tally = await session.measure(async () => {
      pending = new Promise((resolve, reject) => setTimeout(() => clients!.insert('after-throw').then(resolve, reject), 20));
      throw new Error('the workload failed after starting a timer');
    });
    await pending;
    expect(tally.verdict.kind).toBe('incomplete');
    expect(tally.verdict.reason).toMatch(/^the workload threw: the workload failed after starting a timer; it left work running that it did not await: /);
    expect(tally.verdict.reason).toMatch(/a setTimeout\(…, 20\) timer created at integration\/deferred\.test\.ts:\d+:\d+/);
  });

  it("late work: a window's work that ran after it ended is a finding of the next window and of the session, counted in neither", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let pending: Promise<unknown> | undefined;
    const first = await session.measure(
      async () => {
        // A timer the window waits 100 ms for, in vain: the insert it leads to runs after the window.
        pending = new Promise((resolve) => setTimeout(resolve, 300)).then(() => gate).then(() => clients!.insert('late'));
      },
      { deferredWaitMs: 100 },
    );
    expect(first.verdict.kind).toBe('incomplete');
    release();
    await pending;
    const second = await session.measure(async () => {
      await clients!.insert('next');
    });
    // The late INSERT is in neither window: the next one counts its own call alone, and asserts.
    expect({ verdict: second.verdict.kind, calls: second.layers.driver?.calls }).toEqual({ verdict: 'assert', calls: 1 });
    expect(second.findings).toEqual([
      { kind: 'late-work', message: expect.stringMatching(/^late work of window \d+: 1 counted driver call\(s\) .*INSERT INTO children/) },
    ]);
    expect(() => expect(second).toHaveNoFindings()).toThrow(/late-work: late work of window/);
    expect(session.lateWork.at(-1)).toEqual(second.findings[0]);
    if (b.backend !== 'sqlite') expect(second.findings[0]?.message).toMatch(/the wire saw \d+ command\(s\) on your connections after it ended \(/);
  });

  it('deferredWaitMs that is not a whole number of ms is refused, naming the value', async () => {
    await expect(session.measure(async () => undefined, { deferredWaitMs: Number.NaN })).rejects.toThrow(/deferredWaitMs null is not a whole number of ms/);
    await expect(session.measure(async () => undefined, { deferredWaitMs: -5 })).rejects.toThrow(/deferredWaitMs -5 is not a whole number/);
  });

  if (b.backend === 'postgres') {
    it('a postgres.js query, awaited: assert; started with execute() and not awaited: never assert, naming its line', async () => {
      const at = network(session.connection);
      const raw = postgres({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: 1, onnotice: () => undefined });
      try {
        const sql = session.count(raw);
        await sql`SELECT 1`;
        const awaited = await session.measure(async () => {
          await sql`INSERT INTO children (parent_id, name) VALUES (1, ${'pgjs-awaited'})`;
        });
        expect(describeVerdict(awaited)).toMatch(/^assert: /);
        // The query's line is named whether it was still running when the wait began or had finished by then: five
        // windows, as the query's speed decides which.
        const seen: string[] = [];
        for (let i = 0; i < 5; i++) {
          let pending: Promise<unknown> | undefined;
          const tally = await session.measure(async () => {
            pending = sql`INSERT INTO children (parent_id, name) VALUES (1, ${`pgjs-deferred-${i}`})`.execute();
          });
          await pending;
          seen.push(
            `${tally.verdict.kind === 'assert' ? 'assert' : 'not assert'}, ${HERE.test(tally.verdict.reason) ? 'named' : `unnamed: ${tally.verdict.reason}`}`,
          );
        }
        expect(seen).toEqual(Array.from({ length: 5 }, () => 'not assert, named'));
      } finally {
        await raw.end();
      }
    });
  }

  if (b.backend === 'mariadb') {
    it('a mariadb batch whose value types change between rows, beside two other calls: assert, the bulk split as a finding', async () => {
      const at = network(session.connection);
      const raw = mariadb.createPool({
        host: at.host,
        port: at.port,
        user: at.user,
        password: at.password,
        database: at.database,
        connectionLimit: 1,
        minDelayValidation: 600_000,
      });
      try {
        const pool = session.count(raw);
        await pool.query('SELECT 1');
        // A number, then a string, for the same column: the connector starts a new bulk command at each change.
        const mixed = Array.from({ length: 200 }, (_, i) => [(i % 20) + 1, i % 2 === 0 ? `mixed-${i}` : i]);
        const tally = await session.measure(async () => {
          await pool.query('SELECT 1');
          await pool.batch('INSERT INTO children (parent_id, name) VALUES (?, ?)', mixed);
          await pool.query('SELECT 1');
        });
        expect(describeVerdict(tally)).toMatch(/^assert: /);
        expect(tally.verdict.discrepancies).toEqual([]);
        expect(tally.findings.map((f) => f.kind)).toEqual(expect.arrayContaining([expect.stringMatching(/^batch-(fallback|split)$/)]));
        expect(() => expect(tally).toHaveNoFindings()).toThrow(/batch/);
      } finally {
        await raw.end();
      }
    });
  }
});
