import BetterSqlite3 from 'better-sqlite3';
import { SqltallyError } from '../shared/errors';
import { BACKEND_NAMES } from '../backends/types';
import { dialectOf } from '../server';
import { MYSQL_DIALECT } from './dialects/mysql';
import { POSTGRES_DIALECT } from './dialects/postgres';
import { SQLITE_DIALECT } from './dialects/sqlite';
import { exponentDouble, rowLiteral } from './dialects/types';
import { makeRows } from './rows';
import { assertTableName, createTableSql, dropTableSql, insertHead, placeholderRows, workloadTable } from './table';

describe('table names', () => {
  it.each(['sqltally_rows', '_t', 'a', 't1_2', 'x'.repeat(63)])('accepts %s', (name) => {
    expect(() => assertTableName(name)).not.toThrow();
  });

  it.each([
    ['upper case', 'Rows'],
    ['a quote', 'rows"; DROP TABLE x; --'],
    ['a backtick', 'r`ows'],
    ['a space', 'my rows'],
    ['a dot', 'public.rows'],
    ['a leading digit', '1rows'],
    ['empty', ''],
    ['64 characters', 'x'.repeat(64)],
    ['the sqlite_ prefix', 'sqlite_master'],
    ['non-ASCII', 'tàble'],
  ])('refuses %s with a config error', (_why, name) => {
    expect(() => workloadTable('postgres', name)).toThrow(SqltallyError);
    expect(() => assertTableName(name, 'postgres')).toThrow(/table name .* must/);
  });

  it('refuses a name that is not a string', () => {
    expect(() => assertTableName(42)).toThrow(/must be a string, got number/);
  });
});

describe('DDL and statement heads per dialect', () => {
  it("writes each backend's table in the dialect its probe source declares", () => {
    const names = Object.fromEntries(BACKEND_NAMES.map((b) => [b, workloadTable(b).dialect.name]));
    expect(names).toEqual({ sqlite: 'sqlite', mariadb: 'mysql', mysql: 'mysql', postgres: 'postgres' });
    for (const b of BACKEND_NAMES) expect(workloadTable(b).dialect.name).toBe(dialectOf(b));
  });

  it('quotes and types the table for each backend', () => {
    const my = workloadTable('mysql');
    expect(createTableSql(my)).toBe(
      'CREATE TABLE `sqltally_rows` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, c1 INT, c2 INT, c3 VARCHAR(32), ' +
        'c4 DOUBLE PRECISION, c5 BIGINT, c6 VARCHAR(32)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4',
    );
    expect(createTableSql(workloadTable('postgres', 't'))).toMatch(/^CREATE TABLE "t" \(id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, c1 INT/);
    expect(createTableSql(workloadTable('sqlite', 't'))).toMatch(/^CREATE TABLE "t" \(id INTEGER PRIMARY KEY, c1 INT/);
    expect(dropTableSql(workloadTable('mariadb', 't'))).toBe('DROP TABLE IF EXISTS `t`');
    expect(insertHead(workloadTable('mariadb', 't'))).toBe('INSERT INTO `t` (c1, c2, c3, c4, c5, c6)');
  });

  it('numbers PostgreSQL placeholders across rows and uses ? elsewhere', () => {
    expect(placeholderRows(workloadTable('postgres', 't'), 2)).toBe('($1, $2, $3, $4, $5, $6), ($7, $8, $9, $10, $11, $12)');
    expect(placeholderRows(workloadTable('mysql', 't'), 1)).toBe('(?, ?, ?, ?, ?, ?)');
    expect(placeholderRows(workloadTable('sqlite', 't'), 5000).match(/\?/g)).toHaveLength(30_000);
  });
});

describe('literal escaping', () => {
  it('MySQL: doubles quotes, and sends text with a backslash as utf8mb4 hex (same in NO_BACKSLASH_ESCAPES)', () => {
    expect(MYSQL_DIALECT.textLiteral("O'Brien")).toBe("'O''Brien'");
    expect(MYSQL_DIALECT.textLiteral('a\\b')).toBe("_utf8mb4 X'615c62'");
    expect(MYSQL_DIALECT.textLiteral('é')).toBe("'é'");
  });

  it('PostgreSQL: doubles quotes, and uses E strings only when a backslash is inside', () => {
    expect(POSTGRES_DIALECT.textLiteral("it's")).toBe("'it''s'");
    expect(POSTGRES_DIALECT.textLiteral("a\\'b")).toBe("E'a\\\\''b'");
    expect(POSTGRES_DIALECT.textLiteral('$1 ?')).toBe("'$1 ?'");
  });

  it('SQLite: doubling the quote is all', () => {
    expect(SQLITE_DIALECT.textLiteral("a'\\b")).toBe("'a''\\b'");
  });

  it('writes doubles with an exponent so MySQL reads DOUBLE, not DECIMAL', () => {
    expect(exponentDouble(1.25)).toBe('1.25e0');
    expect(exponentDouble(-3)).toBe('-3e0');
    expect(exponentDouble(1.5e-300)).toBe('1.5e-300');
    expect(exponentDouble(1e21)).toBe('1e+21');
  });

  it('writes a whole row literal with bigint digits', () => {
    expect(rowLiteral(POSTGRES_DIALECT, [1, -2, 'a', 0.5, -(2n ** 63n) + 1n, ''])).toBe("(1,-2,'a',0.5e0,-9223372036854775807,'')");
  });
});

describe('SQLite literals read back exactly (checked on a real in-memory SQLite)', () => {
  const db = new BetterSqlite3(':memory:');
  afterAll(() => db.close());
  const readBack = (literal: string): unknown => (db.prepare(`SELECT ${literal} AS v`).get() as { v: unknown }).v;

  it('every double, from subnormal to MAX_VALUE (plain decimal literals are off by an ulp beyond ~1e±84)', () => {
    const values = [5e-324, -5e-324, 2.2250738585072014e-308, Number.MAX_VALUE, -Number.MAX_VALUE, 1.5e-300, 0, -0.5, 1e60, 1.0000000000000002e61];
    let seed = 12345;
    const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
    for (let exponent = -323; exponent <= 308; exponent += 1) values.push((random() < 0.5 ? -1 : 1) * (1 + random() * 9) * 10 ** exponent);
    const wrong = values.filter((x) => Number.isFinite(x) && !Object.is(readBack(SQLITE_DIALECT.doubleLiteral(x)), x));
    expect(wrong).toEqual([]);
  });

  it('the rows of the workload, text and bigints included', () => {
    const rows = makeRows(400);
    db.exec(createTableSql(workloadTable('sqlite', 'lit')));
    db.exec(`INSERT INTO "lit" (c1, c2, c3, c4, c5, c6) VALUES ${rows.map((r) => rowLiteral(SQLITE_DIALECT, r)).join(', ')}`);
    const back = db.prepare('SELECT c1, c2, c3, c4, c5, c6 FROM "lit" ORDER BY id').safeIntegers(true).raw().all() as unknown[][];
    expect(back.map((r) => [Number(r[0]), Number(r[1]), r[2], r[3], r[4], r[5]])).toEqual(rows);
  });
});
