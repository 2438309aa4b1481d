import BetterSqlite3 from 'better-sqlite3';
import sqlite3 from 'sqlite3';
import { SqltallyError } from '../shared/errors';
import { rowSource } from './connect';
import { READ_LIMIT, readRowsFrom, readSql } from './read';
import { makeRows } from './rows';
import { STRATEGIES, runStrategy } from './strategies';
import { createTableSql, workloadTable } from './table';
import { verifyRowsWith } from './verify';

describe('read path (real in-memory SQLite)', () => {
  const table = workloadTable('sqlite', 'read_t');
  const strategy = STRATEGIES['better-sqlite3.multirow'];
  let db: BetterSqlite3.Database;

  beforeEach(() => {
    db = new BetterSqlite3(':memory:');
    db.exec(createTableSql(table));
  });
  afterEach(() => db.close());

  const fill = (count: number) => runStrategy(strategy, db, strategy.prepare(makeRows(count), table, strategy.plan(count, { maxBindValues: 32_766 })));

  it('asks for one row more than it may return', () => {
    expect(readSql(table, READ_LIMIT)).toBe('SELECT c1, c2, c3, c4, c5, c6 FROM "read_t" ORDER BY id LIMIT 5001');
  });

  it('returns exactly 5000 rows, values intact', async () => {
    await fill(5_000);
    const rows = await readRowsFrom(rowSource('better-sqlite3', db), table);
    expect(rows).toEqual(makeRows(5_000));
  });

  it('refuses 5001 rows with an error and no rows', async () => {
    await fill(5_001);
    const result = await readRowsFrom(rowSource('better-sqlite3', db), table).then(
      (rows) => ({ rows }),
      (error: unknown) => ({ error }),
    );
    expect(result).not.toHaveProperty('rows');
    const error = (result as { error: SqltallyError }).error;
    expect(error).toBeInstanceOf(SqltallyError);
    expect(error.phase).toBe('workload');
    expect(error.statement).toContain('LIMIT 5001');
    expect(error.message).toMatch(/refusing to read read_t: it holds more than 5000 rows/);
  });

  it('honours a lower cap and refuses a cap above the limit', async () => {
    await fill(11);
    await expect(readRowsFrom(rowSource('better-sqlite3', db), table, { maxRows: 11 })).resolves.toHaveLength(11);
    await expect(readRowsFrom(rowSource('better-sqlite3', db), table, { maxRows: 10 })).rejects.toThrow(/more than 10 rows/);
    await expect(readRowsFrom(rowSource('better-sqlite3', db), table, { maxRows: 5_001 })).rejects.toThrow(/maxRows must be an integer from 1 to 5000/);
  });
});

describe('read path through a driver that hands back 64-bit integers as numbers (node-sqlite3)', () => {
  const table = workloadTable('sqlite', 'read_t');
  const strategy = STRATEGIES['sqlite3.multirow'];

  it('reads and verifies every row exactly: the 64-bit column is selected as text', async () => {
    const db = await new Promise<sqlite3.Database>((resolve, reject) => {
      const d = new sqlite3.Database(':memory:', (err) => (err ? reject(err) : resolve(d)));
    });
    try {
      await new Promise<void>((resolve, reject) => db.exec(createTableSql(table), (err) => (err ? reject(err) : resolve())));
      const count = 300;
      await runStrategy(strategy, db, strategy.prepare(makeRows(count), table, strategy.plan(count, { maxBindValues: 32_766 })));
      const source = rowSource('sqlite3', db);
      expect(readSql(table, 10, source)).toBe('SELECT c1, c2, c3, c4, CAST(c5 AS TEXT) AS c5, c6 FROM "read_t" ORDER BY id LIMIT 11');
      // The rows include c5 values beyond 2^53, which a double cannot hold.
      expect(makeRows(count).some((row) => row[4] > BigInt(Number.MAX_SAFE_INTEGER))).toBe(true);
      expect(await readRowsFrom(source, table)).toEqual(makeRows(count));
      expect(await verifyRowsWith(source, table, count)).toBe(count);
    } finally {
      await new Promise<void>((resolve, reject) => db.close((err) => (err ? reject(err) : resolve())));
    }
  });
});
