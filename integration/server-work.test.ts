// @waits 20: a 20 000-row and a 10-row table on each backend, several windows each.
import pg from 'pg';
import { CaptureSession } from '../src/capture/capture';
import type { Tally } from '../src/capture/tally';
import type { BackendName } from '../src/backends/types';
import type { ServerWorkFigure } from '../src/server/server-work';
import { createSqltallyMatchers, installSqltallyMatchers, type SnapshotMatcher } from '../src/jest/matchers';
import { describeEachBackend, withBackend } from './harness';

installSqltallyMatchers();

/**
 * Server work read from the server's own counters, checked against the server's own actuals (ANALYZE FORMAT=JSON on
 * MariaDB, EXPLAIN ANALYZE on MySQL and PostgreSQL), never against a plan's estimates, on a large and a tiny table.
 */

type Db = { query(sql: string, values?: unknown[]): Promise<unknown> };
type SqliteDb = { exec(sql: string): unknown; prepare(sql: string): { run(...v: unknown[]): unknown } };

/** What the server's own ANALYZE says one statement did. */
interface Actuals {
  /** Rows the scans read: MariaDB/MySQL rows read by each table access, PostgreSQL seq-scan rows incl. those filtered out. */
  rowsRead: number;
  /** Table accesses without an index. */
  fullScans: number;
}

interface NetworkScenario {
  driver: 'mysql2' | 'pg';
  p: (n: number) => string;
  analyze(db: Db, sql: string, values: unknown[]): Promise<Actuals>;
  /** How the window figure for a statement is compared with the actuals. */
  rowsFigure: ServerWorkFigure;
  /**
   * A join of t and u without an index: table accesses without an index in ANALYZE, and `fullScans` in the window
   * (MySQL and MariaDB count statements that used no index; PostgreSQL counts sequential scans).
   */
  joinFullScans: { analyze: number; window: number };
  /**
   * MySQL-family `ROWS_EXAMINED` of that join of `rows` + 10 rows: MariaDB leaves out the rows a join-buffer join
   * reads from the buffered side, so it is not ANALYZE's rows read; MySQL's is. Null: not a MySQL-family figure.
   */
  joinRowsExamined: (rows: number) => number | null;
}

function collect(node: unknown, visit: (o: Record<string, unknown>) => void): void {
  if (Array.isArray(node)) for (const n of node) collect(n, visit);
  else if (node && typeof node === 'object') {
    visit(node as Record<string, unknown>);
    for (const v of Object.values(node)) collect(v, visit);
  }
}

function rowsOf(result: unknown): Record<string, unknown>[] {
  return (Array.isArray(result) ? result[0] : (result as { rows: unknown[] }).rows) as Record<string, unknown>[];
}

const MARIADB: NetworkScenario = {
  driver: 'mysql2',
  p: () => '?',
  rowsFigure: 'rowsExamined',
  joinFullScans: { analyze: 2, window: 1 },
  joinRowsExamined: () => 10,
  async analyze(db, sql, values) {
    const [row] = rowsOf(await db.query(`ANALYZE FORMAT=JSON ${sql}`, values));
    const plan = JSON.parse(String(Object.values(row!)[0]));
    let rowsRead = 0;
    let fullScans = 0;
    collect(plan, (o) => {
      if (typeof o['table_name'] !== 'string') return;
      rowsRead += Math.round(Number(o['r_rows'] ?? 0) * Number(o['r_loops'] ?? 1));
      if (o['access_type'] === 'ALL') fullScans += 1;
    });
    return { rowsRead, fullScans };
  },
};

const MYSQL: NetworkScenario = {
  ...MARIADB,
  joinRowsExamined: (rows) => rows + 10,
  async analyze(db, sql, values) {
    const [row] = rowsOf(await db.query(`EXPLAIN ANALYZE ${sql}`, values));
    const tree = String(Object.values(row!)[0]);
    let rowsRead = 0;
    let fullScans = 0;
    for (const line of tree.split('\n')) {
      const m = /-> (Table scan|Index lookup|Single-row index lookup|Index range scan)[^(]*\(.*\(actual [^)]*rows=([\d.]+) loops=(\d+)\)/.exec(line);
      if (!m) continue;
      rowsRead += Math.round(Number(m[2]) * Number(m[3]));
      if (m[1] === 'Table scan') fullScans += 1;
    }
    return { rowsRead, fullScans };
  },
};

const POSTGRES: NetworkScenario = {
  driver: 'pg',
  p: (n) => `$${n}`,
  rowsFigure: 'seqRowsRead',
  joinFullScans: { analyze: 2, window: 2 },
  joinRowsExamined: () => null,
  async analyze(db, sql, values) {
    const [row] = rowsOf(await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values));
    let rowsRead = 0;
    let fullScans = 0;
    collect(Object.values(row!)[0], (o) => {
      if (o['Node Type'] !== 'Seq Scan') return;
      const loops = Number(o['Actual Loops'] ?? 1);
      rowsRead += (Number(o['Actual Rows'] ?? 0) + Number(o['Rows Removed by Filter'] ?? 0)) * loops;
      fullScans += loops;
    });
    return { rowsRead, fullScans };
  },
};

const NETWORK: Record<Exclude<BackendName, 'sqlite'>, NetworkScenario> = { mariadb: MARIADB, mysql: MYSQL, postgres: POSTGRES };

const SIZES = [20_000, 10] as const;
const PER_ROW_INSERTS = 20;

/**
 * toMatchCountSnapshot({ serverWork: true }) on a snapshot store of its own (the first window writes, the next ones
 * compare), so that no snapshot file of this suite depends on the machine's server versions.
 */
function snapshotStore(): { match(tally: Tally): { pass: boolean; message: string }; stored(): string } {
  let stored: string | undefined;
  const store: SnapshotMatcher = (received) => {
    if (stored === undefined) stored = String(received);
    const pass = stored === received;
    return { pass, message: () => `stored:\n${stored}\nreceived:\n${String(received)}` };
  };
  const m = createSqltallyMatchers(() => store);
  return {
    match(tally) {
      const r = m.toMatchCountSnapshot.call({ isNot: false }, tally, { serverWork: true });
      return { pass: r.pass, message: r.message() };
    },
    stored: () => stored ?? '',
  };
}

function workOf(tally: Tally) {
  const work = tally.layers.server?.work;
  if (!work) throw new Error(`no server work in the tally: ${tally.verdict.reason}`);
  return work;
}

describeEachBackend((b) => {
  const backend = withBackend(b.id);

  if (b.backend === 'sqlite') {
    it('toWriteInBatches fails a per-row insert loop and passes one multi-row insert; server work is unknown, with the reason', async () => {
      await using session = await CaptureSession.open({ backend: backend(), driver: 'better-sqlite3' });
      await session.measure((db: SqliteDb) => db.exec('DROP TABLE IF EXISTS w; CREATE TABLE w (a INTEGER)'));
      const loop = await session.measure((db: SqliteDb) => {
        const insert = db.prepare('INSERT INTO w (a) VALUES (?)');
        for (let i = 0; i < PER_ROW_INSERTS; i++) insert.run(i);
      });
      expect(() => expect(loop).toWriteInBatches()).toThrow(
        new RegExp(`✗ ${PER_ROW_INSERTS} INSERT calls of one row each[\\s\\S]*called from integration/server-work\\.test\\.ts:\\d+`),
      );
      const multi = await session.measure((db: SqliteDb) => db.prepare('INSERT INTO w (a) VALUES (?), (?), (?)').run(1, 2, 3));
      expect(multi).toWriteInBatches();
      for (const negate of [false, true]) {
        const on = negate ? expect(multi).not : expect(multi);
        expect(() => on.toHaveServerWork({ rowsExamined: { max: 10 } })).toThrow(
          /rowsExamined: expected at most 10, unknown: SQLite keeps its work counters per prepared statement .*better-sqlite3 does not expose them/,
        );
        expect(() => on.toUseIndexes()).toThrow(/better-sqlite3 does not expose them/);
      }
    });

    it('a count snapshot with serverWork names every figure unknown with the reason, none as 0, and is the same on a rerun', async () => {
      await using session = await CaptureSession.open({ backend: backend(), driver: 'better-sqlite3' });
      await session.measure((db: SqliteDb) => db.exec('DROP TABLE IF EXISTS w; CREATE TABLE w (a INTEGER)'));
      const store = snapshotStore();
      for (let run = 0; run < 2; run++) {
        const tally = await session.measure((db: SqliteDb) => db.prepare('INSERT INTO w (a) VALUES (?), (?), (?)').run(1, 2, 3));
        expect(tally.verdict.kind).toBe('assert');
        expect(store.match(tally)).toEqual({ pass: true, message: expect.any(String) });
      }
      const text = store.stored();
      expect(text).toMatch(
        /^server\.work\.rowsExamined: unknown \(SQLite keeps its work counters per prepared statement.*better-sqlite3 does not expose them\)$/m,
      );
      expect(text).toMatch(/^server\.work\.statements: unknown \(/m);
      expect(text).not.toMatch(/^server\.work\.\w+: \d/m);
    });
    return;
  }

  const s = NETWORK[b.backend];
  const isPg = b.backend === 'postgres';
  let session: CaptureSession<'mysql2' | 'pg'>;
  beforeAll(async () => {
    session = (await CaptureSession.open({ backend: backend(), driver: s.driver })) as CaptureSession<'mysql2' | 'pg'>;
  });
  afterAll(async () => {
    await session?.close();
  });

  async function load(rows: number): Promise<void> {
    await session.measure(async (db: Db) => {
      for (const sql of ['DROP TABLE IF EXISTS t', 'DROP TABLE IF EXISTS u', 'DROP TABLE IF EXISTS w']) await db.query(sql);
      await db.query('CREATE TABLE t (id int PRIMARY KEY, a int, b int)');
      await db.query('CREATE INDEX t_a ON t (a)');
      await db.query('CREATE TABLE u (c int)');
      await db.query('CREATE TABLE w (a int)');
      for (let start = 1; start <= rows; start += 1000) {
        const ids = Array.from({ length: Math.min(1000, rows - start + 1) }, (_, i) => start + i);
        await db.query(`INSERT INTO t (id, a, b) VALUES ${ids.map((n) => `(${n}, ${n}, ${n})`).join(', ')}`);
      }
      await db.query(`INSERT INTO u (c) VALUES ${Array.from({ length: 10 }, (_, i) => `(${i + 1})`).join(', ')}`);
    });
  }

  async function actualsOf(sql: string, values: unknown[]): Promise<Actuals> {
    let out: Actuals | undefined;
    await session.measure(async (db: Db) => {
      out = await s.analyze(db, sql, values);
    });
    return out!;
  }

  for (const rows of SIZES) {
    describe(`${rows} rows`, () => {
      beforeAll(() => load(rows), 120_000);

      it('an unindexed lookup: the window and its shape read exactly what ANALYZE says, and the matchers fail it with its shape and line', async () => {
        const sql = `SELECT a FROM t WHERE b = ${s.p(1)}`;
        const tally = await session.measure((db: Db) => db.query(sql, [5]));
        const actual = await actualsOf(sql, [5]);
        const work = workOf(tally);
        expect(actual).toEqual({ rowsRead: rows, fullScans: 1 });
        expect(work.figures[s.rowsFigure]).toBe(actual.rowsRead);
        expect(work.figures.fullScans).toBe(actual.fullScans);
        expect(tally).toHaveServerWork({ [s.rowsFigure]: actual.rowsRead, fullScans: 1 });
        if (!isPg)
          expect(tally).toHaveServerWork(
            { rowsExamined: actual.rowsRead, fullScans: 1, tempTables: 0, tempDiskTables: 0, fullJoins: 0 },
            { shape: /WHERE b = / },
          );
        if (isPg) expect(tally).toHaveServerWork({ statementRows: 1 }, { shape: /WHERE b = / });
        expect(() => expect(tally).toHaveServerWork({ fullScans: 0 })).toThrow(/✗ fullScans: expected 0, actual 1/);
        expect(() => expect(tally).toUseIndexes()).toThrow(
          new RegExp(
            `toUseIndexes on ${b.id}[^:]*: 1 scan\\(s\\)[\\s\\S]*${rows} rows read[\\s\\S]*SELECT a FROM t WHERE b = \\?, called from integration/server-work\\.test\\.ts:\\d+`,
          ),
        );
        expect(tally).toUseIndexes({ minTableRows: rows + 1 });
      });

      it('an indexed lookup reads one row through the index; toUseIndexes passes', async () => {
        const sql = `SELECT b FROM t WHERE a = ${s.p(1)}`;
        const tally = await session.measure((db: Db) => db.query(sql, [5]));
        const actual = await actualsOf(sql, [5]);
        expect(actual.fullScans).toBe(0);
        const work = workOf(tally);
        expect(work.figures.fullScans).toBe(0);
        if (isPg) expect(work.figures).toMatchObject({ indexScans: 1, indexRowsFetched: 1, seqRowsRead: 0, rowsExamined: 1 });
        else expect(work.figures).toMatchObject({ rowsExamined: 1, rowsSent: 1 });
        expect(tally).toUseIndexes();
      });

      it('a join without an index: full scans and rows read as ANALYZE says, no temporary table on disk', async () => {
        const sql = 'SELECT t.id FROM t JOIN u ON u.c = t.b';
        const tally = await session.measure((db: Db) => db.query(sql));
        const actual = await actualsOf(sql, []);
        const work = workOf(tally);
        expect({ analyze: actual.fullScans, window: work.figures.fullScans }).toEqual(s.joinFullScans);
        if (isPg) expect(work.figures.seqRowsRead).toBe(actual.rowsRead);
        else {
          expect(tally).toHaveServerWork({ fullJoins: 1, tempDiskTables: 0 });
          expect({ window: work.figures.rowsExamined, analyze: actual.rowsRead }).toEqual({ window: s.joinRowsExamined(rows), analyze: rows + 10 });
        }
      });

      it('after CREATE INDEX on the column, the same lookup uses it and toUseIndexes passes', async () => {
        await session.measure((db: Db) => db.query('CREATE INDEX t_b ON t (b)'));
        try {
          const sql = `SELECT a FROM t WHERE b = ${s.p(1)}`;
          const tally = await session.measure((db: Db) => db.query(sql, [6]));
          const actual = await actualsOf(sql, [6]);
          // PostgreSQL reads a table of one page whole even with an index (its own EXPLAIN ANALYZE says so): the window
          // tells what the server did, and minTableRows is how a test lets such a small table pass.
          const scans = isPg && rows < 100 ? 1 : 0;
          expect({ window: workOf(tally).figures.fullScans, analyze: actual.fullScans }).toEqual({ window: scans, analyze: scans });
          expect(tally).toUseIndexes({ minTableRows: 11 });
          if (scans === 0) expect(tally).toUseIndexes();
        } finally {
          await session.measure((db: Db) => db.query(isPg ? 'DROP INDEX t_b' : 'DROP INDEX t_b ON t'));
        }
      });

      it('toWriteInBatches fails a per-row insert loop with its line, and passes one multi-row insert', async () => {
        const loop = await session.measure(async (db: Db) => {
          for (let i = 0; i < PER_ROW_INSERTS; i++) await db.query(`INSERT INTO w (a) VALUES (${s.p(1)})`, [i]);
        });
        expect(() => expect(loop).toWriteInBatches()).toThrow(
          new RegExp(`✗ ${PER_ROW_INSERTS} INSERT calls of one row each[\\s\\S]*called from integration/server-work\\.test\\.ts:\\d+`),
        );
        const multi = await session.measure((db: Db) => db.query(`INSERT INTO w (a) VALUES (${s.p(1)}), (${s.p(2)}), (${s.p(3)})`, [1, 2, 3]));
        expect(multi).toWriteInBatches();
      });

      it('a count snapshot with serverWork holds what ANALYZE reads, is the same on a rerun, and changes when the plan does', async () => {
        const sql = `SELECT a FROM t WHERE b = ${s.p(1)}`;
        const store = snapshotStore();
        for (let run = 0; run < 3; run++) {
          const tally = await session.measure((db: Db) => db.query(sql, [5]));
          expect(tally.verdict).toMatchObject({ kind: 'assert' });
          const r = store.match(tally);
          if (!r.pass) throw new Error(`run ${run + 1}: ${r.message}`);
        }
        const actual = await actualsOf(sql, [5]);
        const text = store.stored();
        expect(text).toContain(`server.work.${s.rowsFigure}: ${actual.rowsRead}`);
        expect(text).toContain(`server.work.fullScans: ${actual.fullScans}`);
        expect(text).toMatch(
          isPg ? /^server\.work\.lockTimeNs: unknown \(PostgreSQL keeps no per-statement lock time\)$/m : /^server\.work\.lockTimeNs: left out \(/m,
        );
        // Every figure has its line: a value, or why there is none.
        for (const line of text
          .split('\n')
          .filter((l) => l.startsWith('server.work.') && !l.startsWith('server.work.statements') && !l.startsWith('server.work.tables'))) {
          expect(line).toMatch(/^server\.work\.\w+: (\d+|unknown \(.+\)|left out \(.+\))$/);
        }
        if (isPg) expect(text).toMatch(/^ {2}public\.t seqScans=1 seqRowsRead=\d+ /m);
        else expect(text).toMatch(new RegExp(`^ {2}SELECT a FROM t WHERE b = \\? calls=1 rowsExamined=${rows}\\b`, 'm'));
        // The same code after CREATE INDEX is another snapshot (on a one-page PostgreSQL table the scan stays, by plan).
        await session.measure((db: Db) => db.query('CREATE INDEX t_b ON t (b)'));
        try {
          const indexed = await session.measure((db: Db) => db.query(sql, [5]));
          expect(store.match(indexed).pass).toBe(isPg && rows < 100);
        } finally {
          await session.measure((db: Db) => db.query(isPg ? 'DROP INDEX t_b' : 'DROP INDEX t_b ON t'));
        }
      });
    });
  }

  if (isPg) {
    it('inside a transaction that is rolled back, the table figures are unknown with the reason; the per-statement ones are still exact', async () => {
      await load(100);
      // The user's own client, as a transaction-per-test setup holds one: each window of the session's handle is a new connection.
      const at = session.connection;
      if (at.kind !== 'network') throw new Error('expected a network connection');
      const own = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
      await own.connect();
      const client = session.count(own);
      let tally: Tally;
      try {
        await client.query('BEGIN');
        tally = await session.measure(() => client.query('SELECT a FROM t WHERE b = $1', [5]));
        await client.query('ROLLBACK');
      } finally {
        await own.end();
      }
      const work = workOf(tally);
      for (const f of ['fullScans', 'seqRowsRead', 'rowsExamined', 'indexScans'] as const) {
        expect(work.figures[f]).toBeUndefined();
        expect(work.unknown[f]).toMatch(
          /sat in an open transaction at the end of the window, and the server publishes these counters only when a session is idle outside a transaction/,
        );
      }
      expect(work.tables).toBeNull();
      expect(work.figures.statementRows).toBe(1);
      for (const negate of [false, true]) {
        const on = negate ? expect(tally).not : expect(tally);
        expect(() => on.toHaveServerWork({ fullScans: 0 })).toThrow(/fullScans: expected 0, unknown: window connection\(s\) #\d+ sat in an open transaction/);
      }
      expect(tally).toHaveServerWork({ statementRows: 1 });
    });
  }
});
