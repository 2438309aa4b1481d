import BetterSqlite3 from 'better-sqlite3';
import { SqltallyError } from '../../shared/errors';
import { BACKEND_NAMES } from '../../backends/types';
import { executeSql, openPlainConnection, rowSource } from '../connect';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRows } from '../rows';
import type { Row } from '../rows';
import { createTableSql, workloadTable } from '../table';
import { verifyRowsWith } from '../verify';
import { findStrategy, rawSqlTwin, runStrategy, STRATEGIES, STRATEGY_NAMES, strategiesFor } from './index';
import type { AnyInsertStrategy } from './index';

const CAPS = { maxBindValues: 65_535 };
const SQLITE_CAPS = { maxBindValues: 32_766 };
const capsFor = (s: AnyInsertStrategy) => (s.backends.includes('sqlite') ? SQLITE_CAPS : CAPS);

function thrown(fn: () => unknown): SqltallyError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SqltallyError) return err;
    throw err;
  }
  throw new Error('expected a SqltallyError, nothing was thrown');
}

describe('registry', () => {
  it('keys every strategy by its own name, with the driver as prefix', () => {
    for (const [key, strategy] of Object.entries(STRATEGIES)) {
      expect(strategy.name).toBe(key);
      expect(key.startsWith(`${strategy.driver}.`)).toBe(true);
    }
    expect(new Set(STRATEGY_NAMES).size).toBe(25);
  });

  it('gives every backend strategies, including its raw-SQL twin', () => {
    for (const backend of BACKEND_NAMES) {
      const names = strategiesFor(backend).map((s) => s.name);
      expect(names).toContain(rawSqlTwin(backend).name);
      expect(names.length).toBeGreaterThanOrEqual(3);
    }
    expect(strategiesFor('mariadb@10.11').map((s) => s.name)).toEqual(strategiesFor('mysql').map((s) => s.name));
    expect(strategiesFor('postgres').map((s) => s.name)).toEqual([
      'pg.query-multirow',
      'pg.unnest',
      'pg.per-row-tx',
      'pg.raw-sql',
      'pg.copy',
      'postgres-js.multirow',
      'postgres-js.unnest',
      'postgres-js.pipelined-tx',
      'postgres-js.copy',
    ]);
  });

  it('carries bulk: false as a connection option for the no-bulk batch only', () => {
    expect(STRATEGIES['mariadb.batch-nobulk'].connectionOptions).toEqual({ bulk: false });
    expect(STRATEGY_NAMES.filter((n) => STRATEGIES[n].connectionOptions !== undefined)).toEqual(['mariadb.batch-nobulk', 'mariadb.load-data']);
    expect(STRATEGIES['mariadb.load-data'].connectionOptions).toEqual({ permitLocalInfile: true });
  });
});

describe('findStrategy (bad input)', () => {
  it('finds a strategy for its backend', () => {
    expect(findStrategy('pg.unnest', 'postgres@15').name).toBe('pg.unnest');
  });

  it('refuses an unknown name, listing the known ones', () => {
    const error = thrown(() => findStrategy('pg.copy-binary', 'postgres'));
    expect(error.phase).toBe('config');
    expect(error.message).toMatch(/unknown strategy "pg.copy-binary"; known: mysql2.query-multirow, .*pg.unnest.*pg.copy/);
  });

  it('refuses a strategy on a backend it does not run on, listing those that do', () => {
    const error = thrown(() => findStrategy('pg.unnest', 'mariadb'));
    expect(error.phase).toBe('config');
    expect(error.backend).toBe('mariadb');
    expect(error.message).toMatch(/"pg.unnest" does not run on mariadb \(it is for postgres\); strategies for mariadb: mysql2.query-multirow/);
  });

  it('refuses an unknown backend', () => {
    expect(() => findStrategy('pg.unnest', 'oracle')).toThrow(/unknown backend "oracle"/);
  });

  it('refuses a prototype key as a name', () => {
    expect(() => findStrategy('constructor', 'postgres')).toThrow(/unknown strategy "constructor"/);
  });
});

describe('plan', () => {
  const statementsAt = (name: keyof typeof STRATEGIES, rows: number, options = {}) =>
    STRATEGIES[name].plan(rows, capsFor(STRATEGIES[name]), options).statementRows;

  it('bound multi-row: 5000 rows is exactly one statement at 30000 values, 10000 is two', () => {
    for (const name of ['mysql2.execute-multirow', 'pg.query-multirow', 'better-sqlite3.multirow'] as const) {
      expect(statementsAt(name, 4_999)).toEqual([4_999]);
      expect(statementsAt(name, 5_000)).toEqual([5_000]);
      expect(statementsAt(name, 5_001)).toEqual([5_000, 1]);
      expect(statementsAt(name, 10_000)).toEqual([5_000, 5_000]);
    }
  });

  it('text paths: one statement up to 10000 rows', () => {
    for (const name of ['mysql2.query-multirow', 'mysql2.raw-sql', 'mariadb.query-multirow', 'pg.raw-sql', 'better-sqlite3.raw-sql'] as const) {
      expect(statementsAt(name, 10_000)).toEqual([10_000]);
      expect(statementsAt(name, 10_001)).toEqual([10_000, 1]);
    }
  });

  it('batch and unnest: one call for any N; per-row: N', () => {
    expect(statementsAt('mariadb.batch', 10_000)).toEqual([10_000]);
    expect(statementsAt('pg.unnest', 100_000)).toEqual([100_000]);
    expect(statementsAt('pg.per-row-tx', 3)).toEqual([1, 1, 1]);
  });

  it('refuses budgets above each protocol limit before anything is sent', () => {
    expect(() => STRATEGIES['pg.query-multirow'].plan(100, CAPS, { bindBudget: 65_536 })).toThrow(/budget 65536 is above this backend's limit of 65535/);
    expect(STRATEGIES['pg.query-multirow'].plan(100_000, CAPS, { bindBudget: 65_535 }).statementRows[0]).toBe(10_922);
    expect(() => STRATEGIES['mysql2.execute-multirow'].plan(100, CAPS, { bindBudget: 70_000, backend: 'mysql' })).toThrow(/limit of 65535/);
    expect(() => STRATEGIES['better-sqlite3.multirow'].plan(100, SQLITE_CAPS, { bindBudget: 32_767 })).toThrow(/limit of 32766/);
    // A lower limit reported by the server wins over the protocol's.
    expect(() => STRATEGIES['better-sqlite3.multirow'].plan(100, { maxBindValues: 999 }, { bindBudget: 1_000 })).toThrow(/limit of 999/);
  });

  it.each([0, -1, 1.5])('refuses budget %p on every strategy, even those that bind nothing', (budget) => {
    for (const strategy of Object.values(STRATEGIES)) {
      const error = thrown(() => strategy.plan(10, capsFor(strategy), { bindBudget: budget }));
      expect(error.phase).toBe('config');
    }
  });

  it('refuses a backend the strategy does not run on', () => {
    expect(() => STRATEGIES['pg.unnest'].plan(10, CAPS, { backend: 'mariadb' })).toThrow(/does not run on mariadb/);
    expect(STRATEGIES['mysql2.raw-sql'].plan(10, CAPS, { backend: 'mariadb@10.11' }).backend).toBe('mariadb');
  });
});

describe('expectedDriverCounts follows the plan', () => {
  const counts = (name: keyof typeof STRATEGIES, rows: number) => STRATEGIES[name].expectedDriverCounts(rows, capsFor(STRATEGIES[name]));

  it('mysql2.execute-multirow: one execute per chunk, 30000 values each', () => {
    expect(counts('mysql2.execute-multirow', 10_000)).toMatchObject({
      calls: 2,
      parameterSets: 2,
      bindValuesPerCall: [30_000, 30_000],
      byKind: { execute: 2 },
    });
    expect(counts('mysql2.execute-multirow', 5_000)).toMatchObject({ calls: 1, bindValuesPerCall: [30_000] });
  });

  it('mysql2.query-multirow: one query expanding every value', () => {
    expect(counts('mysql2.query-multirow', 10_000)).toMatchObject({ calls: 1, parameterSets: 1, bindValuesPerCall: [60_000], byKind: { query: 1 } });
  });

  it('per-row in a transaction: BEGIN, N executes of 6 values, COMMIT', () => {
    const c = counts('mysql2.execute-per-row-tx', 100);
    expect(c).toMatchObject({ calls: 102, parameterSets: 102, byKind: { query: 2, execute: 100 }, byClass: { begin: 1, insert: 100, commit: 1 } });
    expect(c.bindValuesPerCall[0]).toBe(0);
    expect(c.bindValuesPerCall[1]).toBe(6);
    expect(c.bindValuesPerCall[101]).toBe(0);
    expect(counts('pg.per-row-tx', 100)).toMatchObject({ calls: 102, byKind: { query: 102 } });
  });

  it('mariadb batch: one call carrying N parameter sets, with or without bulk', () => {
    for (const name of ['mariadb.batch', 'mariadb.batch-nobulk'] as const) {
      expect(counts(name, 10_000)).toMatchObject({ calls: 1, parameterSets: 10_000, bindValuesPerCall: [60_000], byKind: { batch: 1 } });
    }
  });

  it('pg.unnest: one query with six array parameters whatever N', () => {
    expect(counts('pg.unnest', 10_000)).toMatchObject({ calls: 1, parameterSets: 1, bindValuesPerCall: [6] });
  });

  it('bulk paths: one call per COPY / LOAD DATA binding nothing, and the data messages one per 1000 rows on the wire', () => {
    expect(counts('pg.copy', 10_000)).toMatchObject({
      calls: 1,
      parameterSets: 1,
      bindValuesPerCall: [0],
      byClass: { other: 1 },
      wire: { Query: 1, CopyData: 10, CopyDone: 1, CopyFail: 0 },
    });
    expect(counts('pg.copy', 2_500).wire).toEqual({ Query: 1, CopyData: 3, CopyDone: 1, CopyFail: 0 });
    expect(counts('postgres-js.copy', 100).wire).toEqual({ Query: 1, CopyData: 1, CopyDone: 1, CopyFail: 1 });
    expect(counts('mysql2.load-data', 5_000).wire).toEqual({ COM_QUERY: 1, LocalInfileData: 5, LocalInfileEnd: 1 });
    expect(counts('mariadb.load-data', 5_000).wire).toEqual({ COM_QUERY: 1, LocalInfileEnd: 1 });
    // A cap per statement asked for: statements and data messages follow it.
    const capped = STRATEGIES['pg.copy'].expectedDriverCounts(10_000, CAPS, { bulkRowsPerStatement: 4_000 });
    expect(capped).toMatchObject({ calls: 3, wire: { Query: 3, CopyData: 10, CopyDone: 3 } });
    expect(STRATEGIES['pg.copy'].plan(10_000, CAPS, { bulkRowsPerStatement: 4_000 }).statementRows).toEqual([4_000, 4_000, 2_000]);
    expect(() => STRATEGIES['pg.copy'].plan(10, CAPS, { bulkRowsPerStatement: 0 })).toThrow(/rows per text statement must be a positive integer, got 0/);
  });

  it('bulk paths build one step per statement carrying its rows, and the COPY / LOAD text', () => {
    const pgTable = workloadTable('postgres', 't');
    const copy = STRATEGIES['pg.copy'];
    const input = copy.prepare(makeRows(10), pgTable, copy.plan(10, CAPS));
    expect(input.steps).toEqual([{ sql: 'COPY "t" (c1, c2, c3, c4, c5, c6) FROM STDIN', params: makeRows(10), rows: 10 }]);
    const load = STRATEGIES['mysql2.load-data'];
    const myTable = workloadTable('mariadb', 't');
    const loadInput = load.prepare(makeRows(3), myTable, load.plan(3, CAPS, { backend: 'mariadb' }));
    expect(loadInput.steps[0]?.sql).toBe("LOAD DATA LOCAL INFILE 'sqltally-rows.tsv' INTO TABLE `t` CHARACTER SET utf8mb4 (c1, c2, c3, c4, c5, c6)");
  });

  it('raw-SQL twins bind nothing', () => {
    expect(counts('pg.raw-sql', 10_000)).toMatchObject({ calls: 1, bindValuesPerCall: [0] });
    expect(counts('better-sqlite3.raw-sql', 10_001)).toMatchObject({ calls: 2, bindValuesPerCall: [0, 0], byKind: { query: 2 } });
  });

  it('better-sqlite3: one prepare per distinct chunk size; the transaction shows as BEGIN/COMMIT', () => {
    expect(counts('better-sqlite3.multirow', 10_000)).toMatchObject({
      calls: 3,
      parameterSets: 2,
      bindValuesPerCall: [0, 30_000, 30_000],
      byKind: { prepare: 1, execute: 2 },
    });
    expect(counts('better-sqlite3.multirow', 10_001)).toMatchObject({ calls: 5, bindValuesPerCall: [0, 30_000, 30_000, 0, 6] });
    expect(counts('better-sqlite3.per-row-tx', 100)).toMatchObject({ calls: 103, parameterSets: 102, byKind: { prepare: 1, query: 2, execute: 100 } });
  });

  it('every strategy: the sequence sums to the totals and binds rows x 6 unless it is raw SQL or unnest', () => {
    for (const strategy of Object.values(STRATEGIES)) {
      for (const rows of [1, 100, 5_000, 10_000]) {
        const c = strategy.expectedDriverCounts(rows, capsFor(strategy));
        expect(c.calls).toBe(c.sequence.length);
        expect(c.bindValuesPerCall).toHaveLength(c.calls);
        expect(Math.max(...c.bindValuesPerCall)).toBeLessThanOrEqual(
          strategy.name.endsWith('query-multirow') || strategy.name.includes('batch') ? 60_000 : 30_000,
        );
        const bound = c.bindValuesPerCall.reduce((a, b) => a + b, 0);
        const expected = strategy.name.endsWith('raw-sql') || /\.(copy|load-data)$/.test(strategy.name) ? 0 : strategy.name.endsWith('.unnest') ? 6 : rows * 6;
        expect(bound).toBe(expected);
      }
    }
  });
});

describe('prepare', () => {
  const table = workloadTable('postgres', 't');

  it('builds chunked SQL with as many placeholders as values', () => {
    const strategy = STRATEGIES['pg.query-multirow'];
    const input = strategy.prepare(makeRows(10_000), table, strategy.plan(10_000, CAPS));
    expect(input.steps).toHaveLength(2);
    for (const step of input.steps) {
      expect(step.sql.startsWith('INSERT INTO "t" (c1, c2, c3, c4, c5, c6) VALUES ($1, $2')).toBe(true);
      expect(step.sql.match(/\$\d+/g)).toHaveLength(30_000);
      expect(step.sql).toContain('$30000)');
      expect(step.params[0]).toHaveLength(30_000);
    }
  });

  it('pg.unnest: one array per column, typed', () => {
    const strategy = STRATEGIES['pg.unnest'];
    const rows = makeRows(3);
    const [step] = strategy.prepare(rows, table, strategy.plan(3, CAPS)).steps;
    expect(step?.sql).toBe(
      'INSERT INTO "t" (c1, c2, c3, c4, c5, c6) SELECT * FROM unnest($1::int[], $2::int[], $3::text[], $4::float8[], $5::int8[], $6::text[])',
    );
    expect(step?.params[0]).toEqual([0, 1, 2, 3, 4, 5].map((c) => rows.map((r) => r[c])));
  });

  it('raw SQL: escaped literals, no parameters', () => {
    const strategy = STRATEGIES['mysql2.raw-sql'];
    const mysqlTable = workloadTable('mysql', 't');
    const [step] = strategy.prepare(makeRows(12), mysqlTable, strategy.plan(12, CAPS, { backend: 'mysql' })).steps;
    expect(step?.params).toEqual([[]]);
    expect(step?.sql).toContain("'O''Brien ''''0'");
    expect(step?.sql).toContain("_utf8mb4 X'");
    expect(step?.sql).not.toContain('?,');
  });

  it('refuses bad rows before anything is built, naming backend, phase and statement', () => {
    const strategy = STRATEGIES['pg.query-multirow'];
    const rows: unknown[] = makeRows(3);
    rows[1] = [1, 2, 'x', Number.NaN, 1n, 'y'];
    const error = thrown(() => strategy.prepare(rows as Row[], table, strategy.plan(3, CAPS)));
    expect(error.phase).toBe('workload');
    expect(error.backend).toBe('postgres');
    expect(error.statement).toBe('INSERT INTO "t" (c1, c2, c3, c4, c5, c6)');
    expect(error.message).toMatch(/row 1 column c4 must be finite/);
  });

  it('refuses rows that do not match the plan, and a table of another backend', () => {
    const strategy = STRATEGIES['pg.unnest'];
    expect(() => strategy.prepare(makeRows(4), table, strategy.plan(3, CAPS))).toThrow(/plan is for 3 rows but 4 were given/);
    expect(() => strategy.prepare(makeRows(3), workloadTable('sqlite', 't'), strategy.plan(3, CAPS))).toThrow(
      /table is for sqlite but the plan is for postgres/,
    );
    expect(() => STRATEGIES['pg.raw-sql'].prepare(makeRows(3), table, strategy.plan(3, CAPS))).toThrow(/plan was made by pg.unnest/);
  });
});

describe('SQLite strategies run for real (in-memory database)', () => {
  const backend = 'sqlite';
  for (const strategy of strategiesFor(backend)) {
    // A file, written through the strategy's own driver and closed, then read back through better-sqlite3 (exact
    // 64-bit integers): two SQLite copies never have the file open at once.
    it.each([1, 100, 5_000, 10_001])(`${strategy.name} inserts %i rows that verify`, async (count) => {
      const dir = mkdtempSync(join(tmpdir(), 'sqltally-strategy-'));
      const filename = join(dir, 'rows.db');
      try {
        const table = workloadTable(backend, 'rows_t');
        const conn = await openPlainConnection(strategy.driver, { kind: 'file', filename });
        try {
          await executeSql(strategy.driver, conn.handle, createTableSql(table));
          const input = strategy.prepare(makeRows(count), table, strategy.plan(count, SQLITE_CAPS));
          await runStrategy(strategy, conn.handle as never, input);
        } finally {
          await conn.close();
        }
        const db = new BetterSqlite3(filename, { readonly: true });
        try {
          await expect(verifyRowsWith(rowSource('better-sqlite3', db), table, count)).resolves.toBe(count);
        } finally {
          db.close();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('verify catches a changed value, a missing row and an extra row', async () => {
    const db = new BetterSqlite3(':memory:');
    try {
      const table = workloadTable(backend, 'rows_t');
      db.exec(createTableSql(table));
      const strategy = STRATEGIES['better-sqlite3.multirow'];
      await runStrategy(strategy, db, strategy.prepare(makeRows(50), table, strategy.plan(50, SQLITE_CAPS)));
      const source = rowSource('better-sqlite3', db);
      await expect(verifyRowsWith(source, table, 51)).rejects.toThrow(/holds 50 rows, expected 51/);
      db.exec(`UPDATE "rows_t" SET c3 = 'O''Brien ''0' WHERE c1 = 0`);
      await expect(verifyRowsWith(source, table, 50)).rejects.toThrow(/not the expected content: textBytes/);
      db.exec(`UPDATE "rows_t" SET c3 = 'O''Brien ''''0', c5 = c5 - 1 WHERE c1 = 0`);
      await expect(verifyRowsWith(source, table, 50)).rejects.toThrow(/sumC5Lo: table/);
      db.exec(`UPDATE "rows_t" SET c5 = c5 + 1, c4 = c4 * 2 WHERE c1 = 0`);
      const error = await verifyRowsWith(source, table, 50).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SqltallyError);
      expect((error as SqltallyError).phase).toBe('verify');
      expect((error as Error).message).toMatch(/row c1=0 reads back as .*3e-300.*, expected .*1.5e-300/);
    } finally {
      db.close();
    }
  });
});
