import mysql from 'mysql2/promise';
import pg from 'pg';
import { capture, CaptureSession } from '../src/capture/capture';
import type { SessionConnection } from '../src/capture/connection';
import type { BackendName, StartedBackend } from '../src/backends/types';
import { departedBefore } from '../src/shared/departures';
import type { DriverName } from '../src/shared/driver-names';
import { openRawConnection } from '../src/driver/open';
import { DEPARTURE_WAIT_MS } from '../src/server/snapshot-probe';
import { startWireProxy } from '../src/wire/proxy';
import type { CountSpec } from '../src/jest/expectations';
import { installSqltallyMatchers } from '../src/jest/matchers';
import { describeEachBackend, withBackend } from './harness';

installSqltallyMatchers();

/** Windows in the wire: false test: enough to meet an unsettled reading now and then, were the settle missing. */
const WIRELESS_WINDOWS = 20;

/** Three rows in one statement, written the way each driver's users write it, and the SQL to make its table. */
interface Scenario {
  driver: DriverName;
  table: { schema?: string; name: string };
  create: string;
  insertThree: (handle: any) => Promise<unknown>;
  failing: (handle: any) => Promise<unknown>;
  /** Every count below comes from the real server in the test, compared exactly. */
  expected: CountSpec;
}

const MYSQL_FAMILY: Scenario = {
  driver: 'mysql2',
  table: { name: 'items' },
  create: 'CREATE TABLE items (id INT)',
  insertThree: (c) => c.query('INSERT INTO items VALUES ?', [[[1], [2], [3]]]),
  failing: (c) => c.query('INSERT INTO no_such_table VALUES (1)'),
  expected: {
    driver: { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, bindValues: 3 },
    wire: { commands: { COM_QUERY: 1 }, commandsTotal: 1, roundTrips: 1 },
    server: { statements: 1, inserts: 1, prepares: 0, executes: 0, rowsInserted: 3 },
  },
};

const SCENARIOS = {
  sqlite: {
    driver: 'better-sqlite3',
    table: { name: 'items' },
    create: 'CREATE TABLE items (id INTEGER)',
    insertThree: async (db) => db.prepare('INSERT INTO items VALUES (?), (?), (?)').run(1, 2, 3),
    failing: async (db) => db.prepare('INSERT INTO no_such_table VALUES (1)').run(),
    expected: {
      // Statement classes count executions: the prepare is a call of its own kind, not a second INSERT.
      driver: { calls: 2, byKind: { prepare: 1, execute: 1 }, byClass: { insert: 1 }, bindValues: 3 },
      server: { rowsInserted: 3 },
    },
  },
  mariadb: MYSQL_FAMILY,
  mysql: MYSQL_FAMILY,
  postgres: {
    driver: 'pg',
    table: { schema: 'public', name: 'items' },
    create: 'CREATE TABLE items (id int)',
    insertThree: (c) => c.query('INSERT INTO items VALUES ($1), ($2), ($3)', [1, 2, 3]),
    failing: (c) => c.query('INSERT INTO no_such_table VALUES (1)'),
    expected: {
      driver: { calls: 1, byKind: { query: 1 }, byClass: { insert: 1 }, bindValues: 3 },
      wire: { commands: { Parse: 1, Bind: 1, Execute: 1, Sync: 1, Query: 0 }, roundTrips: 1 },
      server: { statements: 1, rowsInserted: 3 },
    },
  },
} satisfies Record<BackendName, Scenario>;

/** How long the abandoned statement below keeps its server session alive after its client has gone. */
const ABANDONED_SLEEP_S = 1;

/**
 * A user's client that starts a long statement through the proxy and drops its socket: the proxy sees it close at once,
 * the server lists it until the statement ends. Resolves once the client is gone; null without a wire proxy (SQLite).
 */
const ABANDON = {
  sqlite: null,
  mariadb: abandonMysql,
  mysql: abandonMysql,
  postgres: async (at) => {
    const client = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    await client.connect();
    client.query(`SELECT pg_sleep(${ABANDONED_SLEEP_S})`).catch(() => undefined);
    client.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 100));
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  },
} satisfies Record<BackendName, ((at: Extract<SessionConnection, { kind: 'network' }>) => Promise<void>) | null>;

async function abandonMysql(at: Extract<SessionConnection, { kind: 'network' }>): Promise<void> {
  const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
  c.on('error', () => undefined);
  c.query(`SELECT SLEEP(${ABANDONED_SLEEP_S})`).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 100));
  c.destroy();
}

/**
 * The driver whose module closes a connection of its own while opening the one asked for (mariadb reads the server's
 * max_allowed_packet on a first one), per backend; null where no driver module does.
 */
const OPENS_TWICE = {
  sqlite: null,
  mariadb: 'mariadb',
  mysql: 'mariadb',
  postgres: null,
} satisfies Record<BackendName, DriverName | null>;

/** How long the relay below holds that first connection's goodbye at most: well inside the probe's departure wait. */
const HELD_GOODBYE_MS = DEPARTURE_WAIT_MS / 4;

async function runSql(driver: DriverName, handle: any, sql: string): Promise<void> {
  if (driver === 'better-sqlite3') handle.exec(sql);
  else await handle.query(sql);
}

describeEachBackend((b) => {
  const backend = withBackend(b.id);
  const scenario: Scenario = SCENARIOS[b.backend];
  const setup = async (handle: unknown) => {
    await runSql(scenario.driver, handle, 'DROP TABLE IF EXISTS items');
    await runSql(scenario.driver, handle, scenario.create);
  };

  it('captures the three layers of one multi-row insert exactly, with an assert verdict', async () => {
    const tally = await capture({ backend: backend(), driver: scenario.driver, table: scenario.table }, scenario.insertThree, { setup });
    expect(tally).toHaveVerdict('assert');
    expect(tally).toHaveCounts(scenario.expected);
    expect(tally).toHaveCountsAtMost({ driver: { calls: 2 } });
  });

  it('fails a wrong count with the evidence: expected vs actual and the numbered statements', async () => {
    const tally = await capture({ backend: backend(), driver: scenario.driver, table: scenario.table }, scenario.insertThree, { setup });
    expect(() => expect(tally).toHaveCounts({ driver: { calls: 5 } })).toThrow(/driver\.calls: expected 5, actual \d[\s\S]*1\. /);
  });

  it('shows the workload error, not a count mismatch, when the captured code throws', async () => {
    const tally = await capture({ backend: backend(), driver: scenario.driver, table: scenario.table }, scenario.failing, { setup });
    expect(tally.workloadError?.message).toMatch(/no_such_table|doesn't exist|does not exist/);
    expect(tally.verdict.kind).toBe('incomplete');
    // Every matcher shows the workload's error, and fails with and without .not: nothing about the counts is known.
    expect(() => expect(tally).toHaveCounts({ driver: { calls: 1 } })).toThrow(/the captured code threw/);
    expect(() => expect(tally).not.toHaveCounts({ driver: { calls: 1 } })).toThrow(/the captured code threw/);
    expect(() => expect(tally).toHaveVerdict('incomplete')).toThrow(/the captured code threw[\s\S]*(no_such_table|doesn't exist|does not exist)/);
  });

  it('without a named table, the server rows are counted or unknown, never a silent 0', async () => {
    const tally = await capture({ backend: backend(), driver: scenario.driver }, scenario.insertThree, { setup });
    expect([3, null]).toContain(tally.layers.server?.summary.rowsInserted);
    expect(tally).toHaveCounts({ driver: scenario.expected.driver });
  });

  it('without the wire proxy (wire: false), the session connection is settled before each reading: every window exact', async () => {
    const { wire: _wire, ...withoutWire } = scenario.expected;
    await using session = await CaptureSession.open({ backend: backend(), driver: scenario.driver, table: scenario.table, wire: false });
    await session.prepare(setup);
    // Windows back to back on a warm connection: the reading follows the INSERT's answer as closely as it can.
    for (let i = 0; i < WIRELESS_WINDOWS; i++) {
      const tally = await session.measure(scenario.insertThree, { hot: true });
      expect({ i, verdict: tally.verdict.kind, reason: tally.verdict.reason, wire: tally.layers.wire }).toEqual({
        i,
        verdict: 'assert',
        reason: expect.any(String),
        wire: null,
      });
      expect(tally).toHaveCounts(withoutWire);
    }
  });

  it('counts a second window on a warm connection apart from the first', async () => {
    const started: StartedBackend = backend();
    await using session = await CaptureSession.open({ backend: started, driver: scenario.driver, table: scenario.table });
    await session.prepare(setup);
    const first = await session.measure(scenario.insertThree, { hot: true });
    const second = await session.measure(scenario.insertThree, { hot: true });
    expect(first).toHaveCounts(scenario.expected);
    // Each window holds its own calls only; the table's rows keep growing, the window's count does not.
    expect(second).toHaveCounts({ driver: scenario.expected.driver, server: { rowsInserted: 3 } });
  });

  const abandon = ABANDON[b.backend];
  if (abandon === null) {
    it.skip(`a connection closed before the window, still on the server: not applicable to ${b.id} (no wire proxy, no server sessions)`, () => undefined);
  } else {
    it('a connection the workload closed before the window but the server still lists is waited for, not taken for a client around the proxy', async () => {
      await using session = await CaptureSession.open({ backend: backend(), driver: scenario.driver, table: scenario.table });
      await session.prepare(setup);
      const at = session.connection;
      if (at.kind !== 'network') throw new Error('expected a network connection');
      const dropped = Date.now();
      await abandon(at);
      const tally = await session.measure(scenario.insertThree);
      // The window opened only once the dropped session had left: its statement ran on for the rest of its sleep.
      expect(Date.now() - dropped).toBeGreaterThanOrEqual(ABANDONED_SLEEP_S * 1000 - 150);
      expect({ verdict: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ verdict: 'assert', reason: expect.any(String) });
      expect(tally).toHaveCounts(scenario.expected);
      expect(tally.layers.server?.foreignSessions).toEqual([]);
    });

    it('a connection another session closed before the window, still on the server, is waited for too', async () => {
      // From the drop, as in the test above: closing the earlier session takes time of its own.
      let dropped = 0;
      {
        await using earlier = await CaptureSession.open({ backend: backend(), driver: scenario.driver, table: scenario.table });
        await earlier.prepare(setup);
        const at = earlier.connection;
        if (at.kind !== 'network') throw new Error('expected a network connection');
        dropped = Date.now();
        await abandon(at);
      }
      await using session = await CaptureSession.open({ backend: backend(), driver: scenario.driver, table: scenario.table });
      const tally = await session.measure(scenario.insertThree);
      expect({ verdict: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ verdict: 'assert', reason: expect.any(String) });
      expect(Date.now() - dropped).toBeGreaterThanOrEqual(ABANDONED_SLEEP_S * 1000 - 250);
      expect(tally).toHaveCounts(scenario.expected);
      expect(tally.layers.server?.foreignSessions).toEqual([]);
    });

    const twice = OPENS_TWICE[b.backend];
    if (twice === null) {
      it.skip(`a connection a driver module closed while opening another: not applicable to ${b.id} (no driver module opens twice)`, () => undefined);
    } else {
      it(`a connection the ${twice} module closed while opening another, still on the server, is waited for: its goodbye is not work around the proxy`, async () => {
        const started = backend();
        if (started.connection.kind !== 'network') throw new Error('expected a network connection');
        await using session = await CaptureSession.open({ backend: started, driver: scenario.driver, table: scenario.table });
        await session.prepare(setup);
        // The first window measures the probe's cost: the held goodbye must fall in the window under test, not there.
        await session.measure(scenario.insertThree);
        // A relay that holds the goodbye of the module's first connection: the server lists it, idle, meanwhile, as a
        // server slow to read a COM_QUIT does. A direct open (the uninstrumented timings) has nothing else to note it.
        await using relay = await startWireProxy({ protocol: 'mysql', target: { host: started.connection.host, port: started.connection.port } });
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        let first: number | null = null;
        relay.onClosing(async (c) => {
          if (c.id !== 1) return;
          first = c.serverConnectionId;
          await Promise.race([released, new Promise((resolve) => setTimeout(resolve, HELD_GOODBYE_MS))]);
        });
        const opened = await openRawConnection(twice, started.connection, { stream: () => relay.openStream(), backend: started.description.id });
        await opened.close();
        const tally = await session.measure(async (h: any) => {
          release();
          // Until the server has dropped it: had the window opened with it still listed, its goodbye counts in here.
          for (;;) {
            const [rows] = await h.query('SELECT COUNT(*) AS n FROM performance_schema.threads WHERE PROCESSLIST_ID = ?', [first]);
            if (Number(rows[0].n) === 0) break;
          }
          await scenario.insertThree(h);
        });
        expect(first).toEqual(expect.any(Number));
        expect({ verdict: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ verdict: 'assert', reason: expect.any(String) });
        expect(tally.layers.server?.foreignSessions).toEqual([]);
      });
    }

    it('a raw connection sqltally opens and closes itself (table resets, row checks) is noted as its own departure', async () => {
      const b = backend();
      if (b.connection.kind !== 'network') throw new Error('expected a network connection');
      const opened = await openRawConnection(scenario.driver, b.connection);
      const id = opened.connectionId;
      expect(id).toEqual(expect.any(Number));
      expect(departedBefore(b.connection, Number(process.hrtime.bigint()))).not.toContain(id);
      await opened.close();
      expect(departedBefore(b.connection, Number(process.hrtime.bigint()))).toContain(id);
    });
  }
});
