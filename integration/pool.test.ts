// @waits 11: pooled servers lent, checked and reset.
import fs from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { processAlive } from '../src/backends/live';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import { changedSettings } from './handover';
import type { HandoverSession, PooledHandover, ServerState } from './handover';
import { sweepPooledServers } from './global-teardown';
import { integrationBackends, START_TIMEOUT_MS } from './harness';
import type { AvailableIntegrationBackend } from './harness';
import { poolMarker, pooledHandover, ServerPool } from './pool';

// jest's testTimeout is a global option, not a project one: these cases start real servers.
jest.setTimeout(START_TIMEOUT_MS);

// ---------------------------------------------------------------------------------------------------------------
// The lending rules, on a stand-in server: no real server needed.
// ---------------------------------------------------------------------------------------------------------------

const ROOT = path.resolve(__dirname, '..');
const file = (name: string): string => path.join(ROOT, 'integration', name);
const STATE: ServerState = { settings: { max_connections: '151' }, databases: ['sqltally'], accounts: ['root'] };

/** A server that is only a description, and a handover whose answers a test sets. */
function standIn() {
  let starts = 0;
  let stops = 0;
  const answer = { sessions: 0, state: STATE, resets: 0 };
  const start = async (id: string): Promise<StartedBackend> => {
    starts += 1;
    const pid = 1_000_000 + starts;
    return {
      description: { id } as StartedBackend['description'],
      connection: { kind: 'network', host: '127.0.0.1', port: 1, user: 'root', password: '', database: 'sqltally' },
      pid,
      stop: async () => {
        stops += 1;
      },
      [Symbol.asyncDispose]: async () => undefined,
    };
  };
  const session: HandoverSession = {
    clientSessions: async () =>
      Array.from({ length: answer.sessions }, (_, i) => ({
        id: 40 + i,
        user: 'root',
        host: '127.0.0.1:5555',
        database: 'sqltally',
        command: 'Sleep',
        info: null,
      })),
    state: async () => answer.state,
    reset: async () => {
      answer.resets += 1;
    },
    close: async () => undefined,
  };
  const handover: PooledHandover = { pooled: true, open: async () => session };
  const pool = new ServerPool({ start, sessionSettleMs: 0 });
  return { pool, handover, answer, starts: () => starts, stops: () => stops };
}

describe('server pool lending rules', () => {
  it('lends one server to file after file, resetting it in between, and never to two files at once', async () => {
    const { pool, handover, answer, starts } = standIn();
    const first = await pool.borrow('mariadb', file('a.test.ts'), handover);
    await expect(pool.borrow('mariadb', file('b.test.ts'), handover)).rejects.toThrow(
      'mariadb is still lent to integration/a.test.ts: a pooled server is never shared by two files at once',
    );
    await expect(pool.borrow('mariadb', file('a.test.ts'), handover)).rejects.toThrow(
      /nested blocks on one backend need withBackend\('mariadb', \{ fresh: true \}\)/,
    );
    pool.giveBack('mariadb', file('a.test.ts'));
    expect(await pool.checkInAll(file('a.test.ts'))).toEqual([]);
    expect(answer.resets).toBe(1);
    const second = await pool.borrow('mariadb', file('b.test.ts'), handover);
    expect(second).toBe(first);
    expect(starts()).toBe(1);
  });

  it('checks a server given back by one describe block when the next block of the same file borrows it', async () => {
    const { pool, handover, answer } = standIn();
    await pool.borrow('postgres', file('a.test.ts'), handover);
    pool.giveBack('postgres', file('a.test.ts'));
    answer.sessions = 1;
    await expect(pool.borrow('postgres', file('a.test.ts'), handover)).rejects.toThrow(
      /handed back dirty by integration\/a\.test\.ts, so it was stopped: 1 client connection\(s\) still open: #40 root@127\.0\.0\.1:5555 \(db sqltally, Sleep\)/,
    );
  });

  it('a file that ends without giving a server back is checked all the same', async () => {
    const { pool, handover, answer, stops } = standIn();
    await pool.borrow('mysql', file('a.test.ts'), handover);
    answer.sessions = 2;
    const problems = await pool.checkInAll(file('a.test.ts'));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('2 client connection(s) still open: #40 root@127.0.0.1:5555 (db sqltally, Sleep); #41 ');
    expect(stops()).toBe(1);
    expect(pool.servers().size).toBe(0);
  });

  it('a changed setting stops the server and names the setting; a server that no longer answers is stopped too', async () => {
    const { pool, handover, answer, stops, starts } = standIn();
    await pool.borrow('mysql', file('a.test.ts'), handover);
    answer.state = { ...STATE, settings: { max_connections: '77' } };
    const [changed] = await pool.checkInAll(file('a.test.ts'));
    expect(changed).toContain(
      "server settings changed: max_connections: 151 -> 77; a test that reconfigures its server needs withBackend('mysql', { fresh: true })",
    );
    expect(answer.resets).toBe(0);

    answer.state = STATE;
    // Answers once (the baseline at start), then no more: the server went away while lent.
    let opens = 0;
    const broken: PooledHandover = {
      pooled: true,
      open: async (s) => (++opens === 1 ? handover.open(s) : Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1'))),
    };
    await pool.borrow('mysql', file('b.test.ts'), broken);
    const [gone] = await pool.checkInAll(file('b.test.ts'));
    expect(gone).toContain('the server did not answer the handover check (connect ECONNREFUSED 127.0.0.1:1)');
    expect(starts()).toBe(2);
    expect(stops()).toBe(2);
  });

  it('a reset that does not bring the server back to how it started fails the handover', async () => {
    const { pool, handover } = standIn();
    await pool.borrow('postgres', file('a.test.ts'), handover);
    let reads = 0;
    const session = await handover.open({} as StartedBackend);
    session.state = async () => (++reads === 1 ? STATE : { ...STATE, databases: ['extra', 'sqltally'] });
    const [problem] = await pool.checkInAll(file('a.test.ts'));
    expect(problem).toContain('the reset did not restore the server: database +extra');
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Handover on real servers: what each backend's check sees and what its reset restores.
// ---------------------------------------------------------------------------------------------------------------

const pooled = integrationBackends().filter((b): b is AvailableIntegrationBackend => pooledHandover(b) !== undefined && !b.id.includes('@'));

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network server`);
  return b.connection;
}

/** A plain client with the few calls these tests make, over either protocol. */
interface Plain {
  id: number;
  run(sql: string): Promise<unknown[]>;
  end(): Promise<void>;
}

async function connect(b: StartedBackend): Promise<Plain> {
  const c = network(b);
  if (b.description.flavour === 'postgres') {
    const client = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
    client.on('error', () => undefined);
    await client.connect();
    return {
      id: (client as unknown as { processID: number }).processID,
      run: async (sql) => (await client.query(sql)).rows,
      end: () => client.end(),
    };
  }
  const conn = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
  conn.on('error', () => undefined);
  return { id: conn.threadId, run: async (sql) => (await conn.query(sql))[0] as unknown[], end: () => conn.end() };
}

/** Per server family: an account, a setting a test could change for everyone (and how to undo it), its tables. */
const FAMILY = {
  mysql: {
    addAccount: "CREATE USER 'pool_probe'@'%' IDENTIFIED BY 'pool-probe'",
    findAccount: "SELECT User FROM mysql.user WHERE User = 'pool_probe'",
    changeSetting: 'SET GLOBAL max_connections = 77',
    changed: /^max_connections: \d+ -> 77$/,
    undoSetting: (before: ServerState) => `SET GLOBAL max_connections = ${before.settings['max_connections']}`,
    tables: "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sqltally'",
  },
  postgres: {
    addAccount: 'CREATE ROLE pool_probe',
    findAccount: "SELECT rolname FROM pg_roles WHERE rolname = 'pool_probe'",
    // A role setting shows at once; ALTER SYSTEM would need a reload that new sessions see only eventually.
    changeSetting: "ALTER ROLE postgres SET work_mem = '7MB'",
    changed: /^role postgres: \(unset\) -> work_mem=7MB$/,
    undoSetting: () => 'ALTER ROLE postgres RESET work_mem',
    tables: "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'",
  },
} as const;

function family(b: AvailableIntegrationBackend) {
  return b.backend === 'postgres' ? FAMILY.postgres : FAMILY.mysql;
}

if (pooled.length === 0) {
  describe.skip('server pool on real servers: skipped: no backend here runs from local binaries', () => {
    it('needs a local server', () => undefined);
  });
}

/** A run id of this file's own, so its pools' directories and sweeps never touch the pools of the running suite. */
const TEST_ENV = { ...process.env, SQLTALLY_RUN_ID: `${process.env['SQLTALLY_RUN_ID'] ?? 'pool'}t${process.pid}` };
/** Closing is asynchronous on the server too: how long a closed connection may take to leave its list. */
const CLOSE_SETTLE_MS = 3_000;

async function sessionsUntil(session: HandoverSession, done: (ids: number[]) => boolean): Promise<number[]> {
  const deadline = Date.now() + CLOSE_SETTLE_MS;
  let ids = (await session.clientSessions()).map((x) => x.id);
  while (!done(ids) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 25));
    ids = (await session.clientSessions()).map((x) => x.id);
  }
  return ids;
}

// One server per backend: the checks that would make the pool stop a server are made on the handover session
// directly and undone, and the pool's reaction to them is shown on the stand-in above.
for (const b of pooled) {
  describe(`server pool on ${b.id}`, () => {
    const handover = pooledHandover(b) as PooledHandover;
    const pool = new ServerPool({ env: TEST_ENV });
    const sql = family(b);
    afterAll(() => pool.close());

    it('hands a server back clean: the next file gets the same process, an empty test database and the accounts it started with', async () => {
      const first = await pool.borrow(b.id, 'a.test.ts', handover);
      const conn = await connect(first);
      await conn.run('CREATE TABLE left_behind (id int PRIMARY KEY)');
      await conn.run('INSERT INTO left_behind VALUES (1)');
      await conn.run(sql.addAccount);
      await conn.end();
      pool.giveBack(b.id, 'a.test.ts');
      expect(await pool.checkInAll('a.test.ts')).toEqual([]);

      const second = await pool.borrow(b.id, 'b.test.ts', handover);
      expect(second.pid).toBe(first.pid);
      const again = await connect(second);
      try {
        expect(await again.run(sql.tables)).toEqual([]);
        expect(await again.run(sql.findAccount)).toEqual([]);
      } finally {
        await again.end();
      }
      pool.giveBack(b.id, 'b.test.ts');
      expect(await pool.checkInAll('b.test.ts')).toEqual([]);
    });

    it("the check sees exactly the client connections left open (not the server's own threads), and a changed setting", async () => {
      const lent = await pool.borrow(b.id, 'c.test.ts', handover);
      const session = await handover.open(lent);
      const open = await connect(lent);
      try {
        expect(await session.clientSessions()).toEqual([expect.objectContaining({ id: open.id, user: network(lent).user, database: network(lent).database })]);
        const before = await session.state();
        await open.run(sql.changeSetting);
        const changed = changedSettings(before, await session.state());
        await open.run(sql.undoSetting(before));
        expect(changed).toHaveLength(1);
        expect(changed[0]).toMatch(sql.changed);
        expect(changedSettings(before, await session.state())).toEqual([]);
      } finally {
        await open.end();
      }
      expect(await sessionsUntil(session, (ids) => ids.length === 0)).toEqual([]);
      await session.close();
      pool.giveBack(b.id, 'c.test.ts');
      expect(await pool.checkInAll('c.test.ts')).toEqual([]);
    });
  });
}

// The exit path belongs to the pool, not to a backend: one backend shows it.
const [cheapest] = [...pooled].sort((x, y) => ['postgres', 'mariadb', 'mysql'].indexOf(x.backend) - ['postgres', 'mariadb', 'mysql'].indexOf(y.backend));
if (cheapest) {
  describe(`server pool on ${cheapest.id}: process exit`, () => {
    const handover = pooledHandover(cheapest) as PooledHandover;
    const pool = new ServerPool({ env: TEST_ENV });
    afterAll(() => pool.close());

    it('at process exit a server is only told to stop; global teardown waits for it and removes its data', async () => {
      const lent = await pool.borrow(cheapest.id, 'f.test.ts', handover);
      expect(lent.dataDir && path.basename(lent.dataDir).startsWith(poolMarker(TEST_ENV))).toBe(true);
      pool.handOverAllSync();
      expect(pool.servers().size).toBe(0);
      expect(await sweepPooledServers(TEST_ENV)).toEqual([]);
      expect(processAlive(lent.pid ?? -1)).toBe(false);
      expect(fs.existsSync(lent.dataDir ?? '/nonexistent')).toBe(false);
    });
  });
}
