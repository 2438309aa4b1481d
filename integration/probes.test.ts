// @waits 11: probe windows on every backend.
import Database from 'better-sqlite3';
import * as mariadb from 'mariadb';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { SqltallyError } from '../src/shared/errors';
import type { BackendName, NetworkConnection, StartedBackend } from '../src/backends/types';
import { createProbe, type ServerLayer, type ServerProbe, type ServerSummary, type WindowContext } from '../src/server';
import { nonZero } from '../src/server/window';
import { decideVerdict } from '../src/verdict/verdict';
import { describeEachBackend, withBackend } from './harness';

/**
 * Server probes on real servers: the control window is exactly 0, isolated inserts assert exact counts, a second writer
 * makes global counters `report` while per-connection stays exact, probe faults give `incomplete`/`report` with reasons.
 */

const CONTROL_REPEATS = 20;
const MULTI_ROW = 500;
const PER_ROW = 50;
const BATCH_ROWS = 1000;
const PG_ROWS = 5000;
const INTRUDER_ROWS = 10;

let tableSeq = 0;
function tableName(): string {
  tableSeq += 1;
  return `h4_probe_${process.pid}_${tableSeq}`;
}

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

/** The verdict a global-counter-only probe would give: same layer with the per-connection part removed. */
function globalOnly(layer: ServerLayer): ServerLayer {
  return { ...layer, perConnection: null, attribution: null, summarySource: 'global' };
}

/**
 * The verdict on a probe layer alone. `mine` (the default on these private servers): any other connection is the
 * workload's own code; `foreign`: the test declares the other connections somebody else's.
 */
function verdictOf(b: StartedBackend, layer: ServerLayer, otherConnections?: 'mine' | 'foreign') {
  return decideVerdict({ backend: b.description, driver: null, wire: null, server: layer, ...(otherConnections ? { otherConnections } : {}) });
}

function rows(n: number): [number, string][] {
  return Array.from({ length: n }, (_, i) => [i, `row-${i}`]);
}

/** Summary fields each backend states for each strategy, or the reason it has none. */
type Expected = Partial<ServerSummary>;

// ---------------------------------------------------------------------------------------------------------------
// MySQL and MariaDB
// ---------------------------------------------------------------------------------------------------------------

/** Per server family: MariaDB has COM_STMT_BULK_EXECUTE and the performance_schema event for it; MySQL has neither. */
const MYSQL_EXPECTED = {
  mariadb: {
    bulkExecutesWhenNone: 0,
    batch: { statements: 1, prepares: 1, executes: 1, bulkExecutes: 1, rowsInserted: BATCH_ROWS } as Expected,
  },
  mysql: {
    bulkExecutesWhenNone: null,
    batch: { statements: BATCH_ROWS, prepares: 1, executes: BATCH_ROWS, bulkExecutes: null, rowsInserted: BATCH_ROWS } as Expected,
  },
} satisfies Partial<Record<BackendName, unknown>>;

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    const expected = MYSQL_EXPECTED[b.backend as 'mariadb' | 'mysql'];
    let writer: mysql.Connection;
    let probe: ServerProbe;

    const connect = () => {
      const c = network(get());
      return mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
    };
    // The ping goes to the workload connection itself: it is what makes that connection's last statement visible.
    const ctxFor = (id: number, table: string, ping: () => Promise<void> = () => writer.ping()): WindowContext => ({
      workloadConnectionIds: [id],
      table: { name: table },
      settle: async () => {
        await ping();
        return [];
      },
    });
    const createTable = async (table: string) => {
      await writer.query(`CREATE TABLE ${table} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
    };

    beforeAll(async () => {
      writer = await connect();
      probe = await createProbe(get());
    });
    afterAll(async () => {
      await probe?.close();
      await writer?.end();
    });

    it('measures a stable probe cost and the control window is exactly 0 in 20 repeats', async () => {
      const table = tableName();
      await createTable(table);
      const ctx = ctxFor(writer.threadId, table);
      const cost = await probe.calibrate(ctx);
      expect(cost.stable).toBe(true);
      // SHOW GLOBAL STATUS counts itself: the cost is measured, and it is not 0.
      expect(cost.counters.Questions).toBeGreaterThan(0);
      for (let i = 0; i < CONTROL_REPEATS; i++) {
        const layer = await (await probe.begin(ctx)).end();
        expect({ i, control: nonZero(layer.control), global: nonZero(layer.global), incomplete: layer.incompleteReasons }).toEqual({
          i,
          control: {},
          global: {},
          incomplete: [],
        });
        expect(verdictOf(get(), layer).kind).toBe('assert');
      }
    });

    it('the probe cost does not depend on who is connected: idle extra connections leave the control window at 0', async () => {
      const table = tableName();
      await createTable(table);
      const ctx = ctxFor(writer.threadId, table);
      await probe.calibrate(ctx);
      const idle = await Promise.all([connect(), connect(), connect()]);
      try {
        const layer = await (await probe.begin(ctx)).end();
        expect({ control: nonZero(layer.control), global: nonZero(layer.global) }).toEqual({ control: {}, global: {} });
        expect(layer.foreignSessions.map((s) => s.id).sort()).toEqual(idle.map((c) => c.threadId).sort());
        // Idle or not, they are clients the verdict cannot rule out; per-connection attribution still asserts.
        expect(verdictOf(get(), globalOnly(layer)).kind).toBe('report');
        expect(verdictOf(get(), layer).kind).toBe('assert');
      } finally {
        for (const c of idle) await c.end();
      }
    });

    it('asserts exact counts for a multi-row INSERT (one statement)', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer.threadId, table));
      await writer.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(MULTI_ROW)]);
      const layer = await win.end();
      expect(layer.summarySource).toBe('perConnection');
      expect(layer.summary).toEqual({
        statements: 1,
        inserts: 1,
        prepares: 0,
        executes: 0,
        bulkExecutes: expected.bulkExecutesWhenNone,
        commits: 0,
        rowsInserted: MULTI_ROW,
      });
      const rowCounter = get().description.flavour === 'mysql' ? 'Innodb_rows_inserted' : 'Handler_write';
      expect({ Questions: layer.global.Questions, Com_insert: layer.global.Com_insert, rows: layer.global[rowCounter] }).toEqual({
        Questions: 1,
        Com_insert: 1,
        rows: MULTI_ROW,
      });
      expect(verdictOf(get(), layer).kind).toBe('assert');
    });

    it('asserts exact counts for a prepared INSERT per row (1 prepare, N executes)', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer.threadId, table));
      for (const [a, s] of rows(PER_ROW)) await writer.execute(`INSERT INTO ${table} (a, b) VALUES (?, ?)`, [a, s]);
      const layer = await win.end();
      expect(layer.summary).toEqual({
        statements: PER_ROW,
        inserts: PER_ROW,
        prepares: 1,
        executes: PER_ROW,
        bulkExecutes: expected.bulkExecutesWhenNone,
        commits: 0,
        rowsInserted: PER_ROW,
      });
      expect({ prepare: layer.global.Com_stmt_prepare, execute: layer.global.Com_stmt_execute, insert: layer.global.Com_insert }).toEqual({
        prepare: 1,
        execute: PER_ROW,
        insert: PER_ROW,
      });
      expect(verdictOf(get(), layer).kind).toBe('assert');
    });

    it('a statement the server prepares again by itself (its table changed after the prepare) is not a prepare the window sent', async () => {
      const table = tableName();
      await createTable(table);
      const statement = await writer.prepare(`INSERT INTO ${table} (a, b) VALUES (?, ?)`);
      await writer.query(`ALTER TABLE ${table} ADD COLUMN c INT NULL`);
      try {
        const win = await probe.begin(ctxFor(writer.threadId, table));
        await statement.execute([1, 'x']);
        const layer = await win.end();
        // Com_stmt_prepare moves with the re-prepare; the prepares the window's clients sent are 0 on either reading.
        expect({ prepare: layer.global.Com_stmt_prepare, reprepare: layer.global.Com_stmt_reprepare }).toEqual({ prepare: 1, reprepare: 1 });
        expect({ own: layer.summary.prepares, whole: layer.globalSummary?.prepares, executes: layer.summary.executes }).toEqual({
          own: 0,
          whole: 0,
          executes: 1,
        });
        expect(layer.notes.join('\n')).toMatch(/re-prepared 1 statement/);
        expect(verdictOf(get(), layer).kind).toBe('assert');
      } finally {
        statement.close();
      }
    });

    it('asserts exact counts for a transaction around a multi-row INSERT', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer.threadId, table));
      await writer.beginTransaction();
      await writer.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(MULTI_ROW)]);
      await writer.commit();
      const layer = await win.end();
      expect(layer.summary).toMatchObject({ statements: 3, inserts: 1, commits: 1, rowsInserted: MULTI_ROW });
      expect({ begin: layer.global.Com_begin, commit: layer.global.Com_commit }).toEqual({ begin: 1, commit: 1 });
      expect(verdictOf(get(), layer).kind).toBe('assert');
    });

    it('asserts exact counts for a mariadb connector batch', async () => {
      const table = tableName();
      await createTable(table);
      const c = network(get());
      const conn = await mariadb.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
      try {
        const win = await probe.begin(ctxFor(Number(conn.threadId), table, () => conn.ping()));
        await conn.batch(`INSERT INTO ${table} (a, b) VALUES (?, ?)`, rows(BATCH_ROWS));
        const layer = await win.end();
        expect(layer.summary).toMatchObject(expected.batch);
        expect(layer.attribution).toMatchObject({ exact: true, requested: [Number(conn.threadId)] });
        expect(verdictOf(get(), layer).kind).toBe('assert');
      } finally {
        await conn.end();
      }
    });

    it('a second connection writing during the window: global verdict reports it, per-connection counts stay exact', async () => {
      const table = tableName();
      await createTable(table);
      const intruder = await connect();
      try {
        const win = await probe.begin(ctxFor(writer.threadId, table));
        await writer.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(MULTI_ROW)]);
        for (let i = 0; i < 3; i++) await intruder.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(INTRUDER_ROWS)]);
        const layer = await win.end();

        // The workload's own counts, from performance_schema, are exact despite the intruder.
        expect(layer.summary).toMatchObject({ statements: 1, inserts: 1, rowsInserted: MULTI_ROW });
        expect(layer.global.Questions).toBe(1 + 3);
        expect(layer.foreignSessions.map((s) => s.id)).toContain(intruder.threadId);

        const global = verdictOf(get(), globalOnly(layer));
        expect(global.kind).toBe('report');
        expect(global.reason).toContain(`client connections outside the window: #${intruder.threadId}`);

        // On a private server the other writer can only be the workload's own code going around the window.
        const mine = verdictOf(get(), layer);
        expect(mine.kind).toBe('report');
        expect(mine.reason).toContain("the server counted 4 Questions (statements) where the window's connections account for 1 (+3)");
        expect(mine.reason).toContain(`the server counted ${MULTI_ROW + 3 * INTRUDER_ROWS} `);

        // Declared somebody else's: the window's own connection still asserts, and the reason names the rest.
        const foreign = verdictOf(get(), layer, 'foreign');
        expect(foreign.kind).toBe('assert');
        expect(foreign.reason).toMatch(/set aside: .*Questions \(statements\)/);
      } finally {
        await intruder.end();
      }
    });

    it('without a settle hook, per-connection counts are never called exact: incomplete, with the reason', async () => {
      const table = tableName();
      await createTable(table);
      const { settle: _settle, ...unsettled } = ctxFor(writer.threadId, table);
      const win = await probe.begin(unsettled);
      await writer.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(MULTI_ROW)]);
      const layer = await win.end();
      expect(layer.incomplete).toBe(true);
      expect(layer.incompleteReasons).toContain(
        'nothing settled the window connections before this reading (no settle hook): the server files a statement in performance_schema only after answering it, so their last statement may be missing',
      );
      expect(verdictOf(get(), layer).kind).toBe('incomplete');
    });

    it('a short-lived client that comes and goes inside the window is still caught', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer.threadId, table));
      await writer.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(MULTI_ROW)]);
      const ghost = await connect();
      await ghost.query(`INSERT INTO ${table} (a, b) VALUES ?`, [rows(INTRUDER_ROWS)]);
      await ghost.end();
      const layer = await win.end();
      expect(layer.connectionsOpened).toBe(1);
      const global = verdictOf(get(), globalOnly(layer));
      expect(global.kind).toBe('report');
      expect(global.reason).toContain("the server counted 1 Connections (connections opened) where the window's connections account for 0 (+1)");
      expect(layer.summary).toMatchObject({ statements: 1, rowsInserted: MULTI_ROW });
    });

    it('an account without PROCESS or performance_schema access gives report with the reason, not a silent 0', async () => {
      const user = `h4r${process.pid}`;
      const password = 'h4-restricted';
      for (const host of ['%', 'localhost', '127.0.0.1']) {
        await writer.query(`CREATE USER IF NOT EXISTS '${user}'@'${host}' IDENTIFIED BY '${password}'`);
        await writer.query(`GRANT SELECT, INSERT ON \`${network(get()).database}\`.* TO '${user}'@'${host}'`);
      }
      const table = tableName();
      await createTable(table);
      const restricted: StartedBackend = Object.assign(Object.create(get()) as StartedBackend, {
        connection: { ...network(get()), user, password },
        description: get().description,
      });
      const weak = await createProbe(restricted);
      try {
        const layer = await (await weak.begin(ctxFor(writer.threadId, table))).end();
        expect(layer.canSeeOtherSessions).toBe(false);
        expect(layer.perConnection).toBeNull();
        expect(layer.degraded?.[0]).toMatch(/performance_schema is ON but this account cannot read it/);
        const v = verdictOf(get(), layer);
        expect(v.kind).toBe('report');
        expect(v.reason).toContain('the account cannot see other sessions, so isolation cannot be verified');
      } finally {
        await weak.close();
      }
    });

    it('a probe that cannot connect fails with backend and phase, not a bare crash', async () => {
      const broken: StartedBackend = Object.assign(Object.create(get()) as StartedBackend, {
        connection: { ...network(get()), port: 1 },
        description: get().description,
      });
      const err = await createProbe(broken).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SqltallyError);
      expect((err as SqltallyError).phase).toBe('probe');
      expect((err as SqltallyError).message).toContain(`backend ${get().description.id}`);
    });
  },
  (b) => b.backend === 'mariadb' || b.backend === 'mysql',
);

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------------------------

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    let writer: Client;
    let probe: ServerProbe;

    const connect = async () => {
      const c = network(get());
      const client = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
      // The server stops in withBackend's afterAll; an idle client then emits 'error', which must not crash the run.
      client.on('error', () => undefined);
      await client.connect();
      return client;
    };
    const ctxFor = (client: Client, table: string, hook = true): WindowContext => ({
      workloadConnectionIds: [(client as unknown as { processID: number }).processID],
      table: { schema: 'public', name: table },
      ...(hook ? { onWorkloadConnection: async (sql: string) => (await client.query(sql)).rows } : {}),
    });
    const createTable = async (table: string) => {
      // Autovacuum on this table would move the database-wide counters at a time of its choosing.
      await writer.query(`CREATE TABLE public.${table} (id serial PRIMARY KEY, a int NOT NULL, b text NOT NULL) WITH (autovacuum_enabled = false)`);
    };
    // Every server sqltally starts preloads pg_stat_statements; only an external URL may lack it. Deciding from the
    // provider (not from what detection said) keeps a broken detection from turning these counts into silent nulls.
    const privateServer = b.provider !== 'external';
    const statementsExpected = () => privateServer || get().description.capabilities.statementStats;
    const itWithStatements = privateServer ? it : it.skip;
    const multiRowSql = (table: string, n: number) =>
      `INSERT INTO public.${table} (a, b) VALUES ${Array.from({ length: n }, (_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ')}`;

    beforeAll(async () => {
      writer = await connect();
      probe = await createProbe(get());
    });
    afterAll(async () => {
      await probe?.close();
      await writer?.end();
    });

    it('measures a stable probe cost and the control window is exactly 0 in 20 repeats', async () => {
      const table = tableName();
      await createTable(table);
      const ctx = ctxFor(writer, table);
      const cost = await probe.calibrate(ctx);
      expect(cost.stable).toBe(true);
      // Database-wide transaction and tuple counters are left out: other sessions' ends flush into any window.
      expect(Object.keys(cost.counters).filter((k) => /^db\.(xact|tup)_/.test(k))).toEqual([]);
      for (let i = 0; i < CONTROL_REPEATS; i++) {
        const layer = await (await probe.begin(ctx)).end();
        expect({ i, control: nonZero(layer.control), global: nonZero(layer.global), incomplete: layer.incompleteReasons }).toEqual({
          i,
          control: {},
          global: {},
          incomplete: [],
        });
        expect(layer.settleNs).not.toBeNull();
        expect(verdictOf(get(), layer).kind).toBe('assert');
      }
    });

    it('asserts exact counts for a 5000-row multi-row INSERT, with the settle time recorded', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer, table));
      await writer.query(multiRowSql(table, PG_ROWS), rows(PG_ROWS).flat());
      const layer = await win.end();
      expect(layer.summary).toEqual({
        statements: statementsExpected() ? 1 : null,
        inserts: statementsExpected() ? 1 : null,
        prepares: null,
        executes: null,
        bulkExecutes: null,
        commits: statementsExpected() ? 0 : null,
        rowsInserted: PG_ROWS,
      });
      expect(layer.global['table.n_tup_ins']).toBe(PG_ROWS);
      // pg_stat_database's transaction and tuple counters take in every session's late flushes (one INSERT read 4 to
      // 13 commits), so none is printed: only the session count, which is exact, from 14 on.
      expect(Object.keys(layer.global).filter((k) => k.startsWith('db.'))).toEqual(parseInt(get().description.serverVersion, 10) >= 14 ? ['db.sessions'] : []);
      expect(typeof layer.settleNs).toBe('number');
      if (statementsExpected()) {
        expect(layer.statements).toEqual([expect.objectContaining({ calls: 1, rows: PG_ROWS })]);
        expect(verdictOf(get(), layer).kind).toBe('assert');
      }
    });

    it('asserts exact counts for a named prepared INSERT per row and for an unnest INSERT', async () => {
      const table = tableName();
      await createTable(table);
      let win = await probe.begin(ctxFor(writer, table));
      for (const [a, s] of rows(PER_ROW)) {
        await writer.query({ name: `h4_${table}`, text: `INSERT INTO public.${table} (a, b) VALUES ($1, $2)`, values: [a, s] });
      }
      let layer = await win.end();
      expect(layer.summary.rowsInserted).toBe(PER_ROW);
      if (statementsExpected()) expect(layer.summary).toMatchObject({ statements: PER_ROW, inserts: PER_ROW });

      win = await probe.begin(ctxFor(writer, table));
      const data = rows(PG_ROWS);
      await writer.query(`INSERT INTO public.${table} (a, b) SELECT * FROM unnest($1::int[], $2::text[])`, [data.map((r) => r[0]), data.map((r) => r[1])]);
      layer = await win.end();
      expect(layer.summary.rowsInserted).toBe(PG_ROWS);
      if (statementsExpected()) {
        expect(layer.summary).toMatchObject({ statements: 1, inserts: 1 });
        expect(verdictOf(get(), layer).kind).toBe('assert');
      }
    });

    it('asserts exact counts for BEGIN, a multi-row INSERT and COMMIT', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer, table));
      await writer.query('BEGIN');
      await writer.query(multiRowSql(table, MULTI_ROW), rows(MULTI_ROW).flat());
      await writer.query('COMMIT');
      const layer = await win.end();
      expect(layer.summary.rowsInserted).toBe(MULTI_ROW);
      if (statementsExpected()) expect(layer.summary).toMatchObject({ statements: 3, inserts: 1, commits: 1 });
    });

    it('a second connection writing during the window turns the verdict into report, naming it', async () => {
      const table = tableName();
      await createTable(table);
      const intruder = await connect();
      try {
        const win = await probe.begin(ctxFor(writer, table));
        await writer.query(multiRowSql(table, MULTI_ROW), rows(MULTI_ROW).flat());
        await intruder.query(multiRowSql(table, INTRUDER_ROWS), rows(INTRUDER_ROWS).flat());
        // The intruder's own statistics must be visible too, or the table count would only sometimes include them.
        await intruder.query('SELECT pg_stat_force_next_flush()');
        const layer = await win.end();
        const intruderPid = (intruder as unknown as { processID: number }).processID;
        expect(layer.foreignSessions.map((s) => s.id)).toContain(intruderPid);
        expect(layer.global['table.n_tup_ins']).toBe(MULTI_ROW + INTRUDER_ROWS);
        const v = verdictOf(get(), layer);
        expect(v.kind).toBe('report');
        expect(v.reason).toContain(`client connections outside the window: #${intruderPid}`);
      } finally {
        await intruder.end();
      }
    });

    it('a short-lived client that comes and goes inside the window is still caught', async () => {
      const table = tableName();
      await createTable(table);
      const win = await probe.begin(ctxFor(writer, table));
      const ghost = await connect();
      await ghost.query(multiRowSql(table, INTRUDER_ROWS), rows(INTRUDER_ROWS).flat());
      await ghost.end();
      // The ghost's session count flushes as its backend exits; wait for the backend to be gone.
      const c = await connect();
      const pid = (ghost as unknown as { processID: number }).processID;
      for (let i = 0; i < 200; i++) {
        const r = await c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid]);
        if (r.rows[0].n === 0) break;
        await new Promise((res) => setTimeout(res, 10));
      }
      await c.end();
      const layer = await win.end();
      expect(layer.connectionsOpened).toBeGreaterThanOrEqual(1);
      const v = verdictOf(get(), layer);
      expect(v.kind).toBe('report');
      expect(v.reason).toMatch(/the server counted \d+ pg_stat_database.sessions \(connections opened\) where the window's connections account for 0/);
    });

    it('without a hook on the writer connection, statistics cannot settle: incomplete, never a pass', async () => {
      const table = tableName();
      await createTable(table);
      const layer = await (await probe.begin(ctxFor(writer, table, false))).end();
      expect(layer.incomplete).toBe(true);
      const v = verdictOf(get(), layer);
      expect(v.kind).toBe('incomplete');
      expect(v.reason).toContain('statistics did not settle: no workload-connection hook');
    });

    it('a private server has pg_stat_statements preloaded and readable', () => {
      if (privateServer) expect(get().description.capabilities.statementStats).toBe(true);
      else expect(typeof get().description.capabilities.statementStats).toBe('boolean');
    });

    itWithStatements(
      `pg_stat_statements absent from the database: report with the reason, statement counts null (not 0)${privateServer ? '' : ' (skipped: an external server may not have the extension to drop)'}`,
      async () => {
        const table = tableName();
        await createTable(table);
        await writer.query('DROP EXTENSION pg_stat_statements');
        try {
          const bare = await createProbe(get());
          try {
            const win = await bare.begin(ctxFor(writer, table));
            await writer.query(multiRowSql(table, MULTI_ROW), rows(MULTI_ROW).flat());
            const layer = await win.end();
            expect(layer.summary.statements).toBeNull();
            expect(layer.summary.rowsInserted).toBe(MULTI_ROW);
            expect(layer.degraded?.[0]).toMatch(/^pg_stat_statements is not available/);
            const v = verdictOf(get(), layer);
            expect(v.kind).toBe('report');
            expect(v.reason).toMatch(/pg_stat_statements is not available/);
          } finally {
            await bare.close();
          }
        } finally {
          await writer.query('CREATE EXTENSION pg_stat_statements');
        }
      },
    );
  },
  (b) => b.backend === 'postgres',
);

// ---------------------------------------------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------------------------------------------

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    let db: Database.Database;
    let probe: ServerProbe;

    const filename = () => {
      const c = get().connection;
      if (c.kind !== 'file') throw new Error('sqlite backend without a file');
      return c.filename;
    };
    const ctxFor = (handle: Database.Database, table: string, hook = true): WindowContext => ({
      workloadConnectionIds: [0],
      table: { name: table },
      ...(hook ? { onWorkloadConnection: async (sql: string) => handle.prepare(sql).all() } : {}),
    });
    const createTable = (table: string) => db.exec(`CREATE TABLE ${table} (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b TEXT NOT NULL)`);

    beforeAll(async () => {
      db = new Database(filename());
      probe = await createProbe(get());
    });
    afterAll(async () => {
      await probe?.close();
      db?.close();
    });

    it('the control window is exactly 0 in 20 repeats', async () => {
      const table = tableName();
      createTable(table);
      const ctx = ctxFor(db, table);
      expect((await probe.calibrate(ctx)).stable).toBe(true);
      for (let i = 0; i < CONTROL_REPEATS; i++) {
        const layer = await (await probe.begin(ctx)).end();
        expect({ i, control: nonZero(layer.control), global: nonZero(layer.global), incomplete: layer.incompleteReasons }).toEqual({
          i,
          control: {},
          global: {},
          incomplete: [],
        });
      }
    });

    it('asserts exact rows for a prepared run per row inside a transaction, and for a multi-row INSERT', async () => {
      const table = tableName();
      createTable(table);
      let win = await probe.begin(ctxFor(db, table));
      const insert = db.prepare(`INSERT INTO ${table} (a, b) VALUES (?, ?)`);
      db.transaction((all: [number, string][]) => {
        for (const r of all) insert.run(r[0], r[1]);
      })(rows(BATCH_ROWS));
      let layer = await win.end();
      expect(layer.summary).toEqual({
        statements: null,
        inserts: null,
        prepares: null,
        executes: null,
        bulkExecutes: null,
        commits: null,
        rowsInserted: BATCH_ROWS,
      });
      expect(layer.global['table.rows']).toBe(BATCH_ROWS);
      expect(verdictOf(get(), layer).kind).toBe('assert');

      win = await probe.begin(ctxFor(db, table));
      db.prepare(`INSERT INTO ${table} (a, b) VALUES ${Array.from({ length: MULTI_ROW }, () => '(?, ?)').join(', ')}`).run(rows(MULTI_ROW).flat());
      layer = await win.end();
      expect(layer.summary.rowsInserted).toBe(MULTI_ROW);
      expect(verdictOf(get(), layer).kind).toBe('assert');
    });

    it('a second handle writing during the window: per-connection total_changes stays exact, the row count does not', async () => {
      const table = tableName();
      createTable(table);
      const other = new Database(filename());
      try {
        const win = await probe.begin(ctxFor(db, table));
        db.prepare(`INSERT INTO ${table} (a, b) VALUES (?, ?)`).run(1, 'mine');
        const theirs = other.prepare(`INSERT INTO ${table} (a, b) VALUES (?, ?)`);
        for (const [a, s] of rows(INTRUDER_ROWS)) theirs.run(a, s);
        const layer = await win.end();
        expect(layer.summary.rowsInserted).toBe(1);
        expect(layer.global['table.rows']).toBe(1 + INTRUDER_ROWS);
        // The other handle's commits move this one's data_version: on a private file that is the workload's own code.
        const mine = verdictOf(get(), layer);
        expect(mine.kind).toBe('report');
        expect(mine.reason).toContain('data_version (commits by another connection)');
        expect(verdictOf(get(), layer, 'foreign').kind).toBe('assert');
        expect(verdictOf(get(), globalOnly(layer)).kind).toBe('report');
      } finally {
        other.close();
      }
    });

    it('without the workload handle the probe is incomplete, never a silent 0', async () => {
      const table = tableName();
      createTable(table);
      const layer = await (await probe.begin(ctxFor(db, table, false))).end();
      expect(layer.incomplete).toBe(true);
      expect(verdictOf(get(), layer).kind).toBe('incomplete');
    });
  },
  (b) => b.backend === 'sqlite',
);
