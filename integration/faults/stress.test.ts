// @waits 17: measured windows beside writers inserting in a loop, on every backend.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { CaptureSession, type Captured } from '../../src/capture/capture';
import { runSql } from '../../src/driver/open';
import type { BackendName, NetworkConnection, StartedBackend } from '../../src/backends/types';
import { START_TIMEOUT_MS, describeEachBackend, withBackend } from '../harness';
import { EVERY_PROVIDER, itForProvider } from './providers';

/**
 * Load without false verdicts: windows on one server while foreign writers of the same user insert beside them; every
 * `assert` is held against the workload's own counts, read apart through a connection of the test's own (`read`).
 */
jest.setTimeout(START_TIMEOUT_MS * 3);

// CI's size; `SQLTALLY_STRESS_WINDOWS=50` is the full one (README, "Faults").
const WINDOWS = Number(process.env['SQLTALLY_STRESS_WINDOWS'] ?? 12);
const WRITERS = 8;
/** Per window: two single-row INSERTs into the shared table, one five-row INSERT into the workload's own table. */
const STATEMENTS_PER_WINDOW = 3;
const ROWS_PER_WINDOW = 7;

function network(c: StartedBackend['connection']): NetworkConnection {
  if (c.kind !== 'network') throw new Error('expected a network connection');
  return c;
}

/** The workload's own counts, read apart: statements and rows its INSERTs made, and the own table's rows. */
interface Independent {
  statements: number;
  rows: number;
  ownTableRows: number;
}

interface Scenario {
  driver: 'mysql2' | 'pg';
  create: string[];
  /** The window's work on the counted connection: STATEMENTS_PER_WINDOW statements, ROWS_PER_WINDOW rows. */
  workload(h: any, i: number): Promise<void>;
  /** One writer's INSERT, a different statement shape from the workload's. */
  writerInsert(c: any, w: number, n: number): Promise<unknown>;
  openWriter(at: NetworkConnection): Promise<{ client: any; end: () => Promise<void> }>;
  idSql: string;
  /** The independent reading, on a client of the test's own. */
  read(c: any, workloadConnectionId: number): Promise<Independent>;
  /** Why this backend cannot run the check here, from what the server says it has; null when it can. */
  unsupported(backend: StartedBackend): string | null;
}

const MYSQL_FAMILY: Scenario = {
  driver: 'mysql2',
  create: [
    'DROP TABLE IF EXISTS stress_shared, stress_own, stress_other',
    'CREATE TABLE stress_shared (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, writer INT NULL)',
    'CREATE TABLE stress_own (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL)',
    'CREATE TABLE stress_other (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, writer INT NOT NULL)',
  ],
  async workload(h, i) {
    await h.query('INSERT INTO stress_shared (a) VALUES (?)', [i]);
    await h.query('INSERT INTO stress_shared (a) VALUES (?)', [-i]);
    await h.query('INSERT INTO stress_own (a) VALUES ?', [[[i], [i + 1], [i + 2], [i + 3], [i + 4]]]);
  },
  writerInsert: (c, w, n) => c.query(`INSERT INTO ${n % 2 === 0 ? 'stress_shared' : 'stress_other'} (a, writer) VALUES (?, ?)`, [n, w]),
  openWriter: async (at) => {
    const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    return { client: c, end: () => c.end() };
  },
  idSql: 'SELECT CONNECTION_ID() AS id',
  async read(c, id) {
    const [rows] = await c.query(
      `SELECT COALESCE(SUM(s.COUNT_STAR), 0) AS n, COALESCE(SUM(s.SUM_ROWS_AFFECTED), 0) AS r
         FROM performance_schema.events_statements_summary_by_thread_by_event_name s
         JOIN performance_schema.threads t ON t.THREAD_ID = s.THREAD_ID
        WHERE t.PROCESSLIST_ID = ? AND s.EVENT_NAME = 'statement/sql/insert'`,
      [id],
    );
    const [own] = await c.query('SELECT COUNT(*) AS n FROM stress_own');
    return { statements: Number(rows[0].n), rows: Number(rows[0].r), ownTableRows: Number(own[0].n) };
  },
  unsupported: (b) =>
    b.description.capabilities.perThreadStatements ? null : `${b.description.id} has no per-thread statement counts here (performance_schema off)`,
};

const POSTGRES: Scenario = {
  driver: 'pg',
  create: [
    'DROP TABLE IF EXISTS stress_shared, stress_own, stress_other',
    'CREATE TABLE stress_shared (id serial PRIMARY KEY, a int NOT NULL, writer int NULL)',
    'CREATE TABLE stress_own (id serial PRIMARY KEY, a int NOT NULL)',
    'CREATE TABLE stress_other (id serial PRIMARY KEY, a int NOT NULL, writer int NOT NULL)',
    'CREATE EXTENSION IF NOT EXISTS pg_stat_statements',
  ],
  async workload(h, i) {
    await h.query('INSERT INTO stress_shared (a) VALUES ($1)', [i]);
    await h.query('INSERT INTO stress_shared (a) VALUES ($1)', [-i]);
    await h.query('INSERT INTO stress_own (a) VALUES ($1), ($2), ($3), ($4), ($5)', [i, i + 1, i + 2, i + 3, i + 4]);
  },
  writerInsert: (c, w, n) => c.query(`INSERT INTO ${n % 2 === 0 ? 'stress_shared' : 'stress_other'} (a, writer) VALUES ($1, $2)`, [n, w]),
  openWriter: async (at) => {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    c.on('error', () => undefined);
    await c.connect();
    return { client: c, end: () => c.end() };
  },
  idSql: 'SELECT pg_backend_pid() AS id',
  async read(c) {
    // Only the workload sends INSERTs without the writer column; matched on the normalised text pg_stat_statements keeps.
    const { rows } = await c.query(
      `SELECT COALESCE(SUM(calls), 0) AS n, COALESCE(SUM(rows), 0) AS r FROM pg_stat_statements
        WHERE query IN ('INSERT INTO stress_shared (a) VALUES ($1)', 'INSERT INTO stress_own (a) VALUES ($1), ($2), ($3), ($4), ($5)')`,
    );
    const own = await c.query('SELECT count(*) AS n FROM stress_own');
    return { statements: Number(rows[0].n), rows: Number(rows[0].r), ownTableRows: Number(own.rows[0].n) };
  },
  unsupported: (b) => (b.description.capabilities.statementStats ? null : `${b.description.id} has no pg_stat_statements here`),
};

const SCENARIOS: Record<BackendName, Scenario | { skip: string }> = {
  sqlite: { skip: 'SQLite is in-process and single-writer: there are no other connections to the same server to load it with' },
  mariadb: MYSQL_FAMILY,
  mysql: MYSQL_FAMILY,
  postgres: POSTGRES,
};

/** One window's outcome against the independent count. */
interface Outcome {
  window: number;
  kind: string;
  reason: string;
  claimed: { statements: number | null; inserts: number | null; rowsInserted: number | null; driverCalls: number | null };
  independent: { statements: number; rows: number; ownTableRows: number };
}

function claimed(t: Captured<unknown>): Outcome['claimed'] {
  const s = t.layers.server?.summary;
  return { statements: s?.statements ?? null, inserts: s?.inserts ?? null, rowsInserted: s?.rowsInserted ?? null, driverCalls: t.layers.driver?.calls ?? null };
}

/** An assert whose numbers differ from the independent count (or from the plan of the window): a false assert. */
function falseAssert(o: Outcome): string | null {
  if (o.kind !== 'assert') return null;
  const wrong: string[] = [];
  const check = (what: string, got: number | null, want: number) => {
    if (got !== want) wrong.push(`${what}: the tally says ${got}, independently ${want}`);
  };
  check('statements', o.claimed.statements, o.independent.statements);
  check('inserts', o.claimed.inserts, o.independent.statements);
  check('rows inserted', o.claimed.rowsInserted, o.independent.rows);
  check('driver calls', o.claimed.driverCalls, o.independent.statements);
  // The independent count must itself be the workload's: its own table gained exactly its five rows.
  check('rows in the own table', o.independent.ownTableRows, 5);
  check('independent statements vs the workload', o.independent.statements, STATEMENTS_PER_WINDOW);
  check('independent rows vs the workload', o.independent.rows, ROWS_PER_WINDOW);
  return wrong.length > 0 ? `window ${o.window}: ${wrong.join('; ')}` : null;
}

describeEachBackend((b) => {
  const scenario = SCENARIOS[b.backend];
  if ('skip' in scenario) {
    it.skip(`stress: ${scenario.skip}`, () => undefined);
    return;
  }
  // A server of its own: the load and the tables must not reach other files' servers.
  const backend = withBackend(b.id, { fresh: true });
  // Writers beside the windows, on whatever server the provider gave.
  const on = (title: string, body: () => Promise<void>) => itForProvider(b, EVERY_PROVIDER, title, body);

  on(`${WINDOWS} windows while ${WRITERS} writers insert in a loop (other connections, same user, shared and other tables): 0 false asserts`, async () => {
    const started = backend();
    const why = scenario.unsupported(started);
    if (why) throw new Error(`cannot check attribution independently: ${why}`);
    const at = network(started.connection);
    const reader = await scenario.openWriter(at);
    const writers: { client: any; end: () => Promise<void> }[] = [];
    let stop = false;
    let writerInserts = 0;
    const loops: Promise<void>[] = [];
    await using session = await CaptureSession.open({
      backend: started,
      driver: scenario.driver,
      otherConnections: 'foreign',
      table: { name: 'stress_own', ...(b.backend === 'postgres' ? { schema: 'public' } : {}) },
    });
    try {
      for (const sql of scenario.create) await reader.client.query(sql);
      let workloadId = -1;
      await session.prepare(async (h) => {
        const [row] = (await runSql(scenario.driver, h as never, scenario.idSql)) as { id: unknown }[];
        workloadId = Number(row?.id);
      });
      // One window before the load: the probe calibrates its own cost on the first window (empty windows read the
      // server-wide counters, which 8 writers would make unstable, and every window would be incomplete).
      const calibration = await session.measure((h) => scenario.workload(h, -100), { hot: true });
      for (let w = 0; w < WRITERS; w++) writers.push(await scenario.openWriter(at));
      for (const [w, writer] of writers.entries()) {
        loops.push(
          (async () => {
            for (let n = 0; !stop; n++) {
              await scenario.writerInsert(writer.client, w, n);
              writerInserts++;
            }
          })(),
        );
      }
      const outcomes: Outcome[] = [];
      for (let i = 0; i < WINDOWS; i++) {
        await reader.client.query(b.backend === 'postgres' ? 'TRUNCATE stress_own' : 'DELETE FROM stress_own');
        const before = await scenario.read(reader.client, workloadId);
        const tally = await session.measure((h) => scenario.workload(h, i * 10), { hot: true });
        const after = await scenario.read(reader.client, workloadId);
        outcomes.push({
          window: i + 1,
          kind: tally.verdict.kind,
          reason: tally.verdict.reason,
          claimed: claimed(tally),
          independent: { statements: after.statements - before.statements, rows: after.rows - before.rows, ownTableRows: after.ownTableRows },
        });
      }
      stop = true;
      await Promise.all(loops);
      const asserts = outcomes.filter((o) => o.kind === 'assert');
      const reported = outcomes.filter((o) => o.kind !== 'assert');
      // Grouped with the numbers taken out: the same reason with other counts is one reason.
      const reasons = [...new Set(reported.map((o) => `${o.kind}: ${o.reason.replace(/\d+/g, 'N').slice(0, 200)}`))];
      const falses = outcomes.map(falseAssert).filter((x): x is string => x !== null);
      // The figures the README quotes: printed on every run, not only on failure.
      process.stdout.write(
        `stress ${started.description.id}: calibration window (no load yet) ${calibration.verdict.kind}; ${WINDOWS} windows under load, ${asserts.length} assert, ${reported.length} report/incomplete, ${falses.length} false assert; ${writerInserts} writer inserts meanwhile` +
          `${reasons.length > 0 ? `\n  reasons: ${reasons.join('\n           ')}` : ''}\n`,
      );
      expect(falses).toEqual([]);
      expect(outcomes).toHaveLength(WINDOWS);
      // The load was real: the writers inserted throughout, and every window's own table holds its five rows.
      expect(writerInserts).toBeGreaterThan(WINDOWS * WRITERS);
      for (const o of outcomes) expect(o.independent.ownTableRows).toBe(5);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
      for (const w of writers) await w.end().catch(() => undefined);
      await reader.end().catch(() => undefined);
    }
  });
});
