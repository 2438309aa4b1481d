import { fingerprint, fingerprintId, isFingerprintId } from './fingerprint';
import type { SqlDialect } from './tokenizer';

type Same = [dialect: SqlDialect, a: string, b: string];

function expectSame(cases: Same[]): void {
  for (const [dialect, a, b] of cases) {
    expect({ dialect, a, shape: fingerprint(a, dialect) }).toEqual({ dialect, a, shape: fingerprint(b, dialect) });
  }
}

function expectDifferent(cases: Same[]): void {
  for (const [dialect, a, b] of cases) {
    expect({ dialect, a, b, same: fingerprint(a, dialect) === fingerprint(b, dialect) }).toEqual({ dialect, a, b, same: false });
  }
}

describe('fingerprint', () => {
  it('turns literals and placeholders into ? and normalises case and spacing', () => {
    expect(fingerprint("insert into t (a,b)\n  values (1,'x')", 'mysql')).toBe('INSERT INTO t (a, b) VALUES (?, ?)');
    expect(fingerprint('SELECT * FROM users WHERE id = $1 AND name = $2', 'postgres')).toBe('SELECT * FROM users WHERE id = ? AND name = ?');
    expect(fingerprint('select count(*) from t where a >= -1.5e-3 and b<>.5 limit 10', 'postgres')).toBe(
      'SELECT count(*) FROM t WHERE a >= ? AND b <> ? LIMIT ?',
    );
    expect(fingerprint('UPDATE t SET a = a - 1 WHERE id = ?', 'mysql')).toBe('UPDATE t SET a = a - ? WHERE id = ?');
  });

  it('gives literals and placeholders the same shape, in every placeholder dialect', () => {
    expectSame([
      ['mysql', "SELECT * FROM t WHERE id = 42 AND name = 'bob' AND flag = TRUE", 'SELECT * FROM t WHERE id = ? AND name = ? AND flag = ?'],
      ['mysql', 'SELECT * FROM t WHERE id = :id', 'SELECT * FROM t WHERE id = ?'],
      [
        'mysql',
        "SELECT * FROM t WHERE a = 0x1F AND b = X'1F' AND c = b'01' AND d = _utf8mb4'x' AND e = N'y'",
        'SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ? AND e = ?',
      ],
      [
        'postgres',
        "SELECT * FROM t WHERE id = 42 AND name = E'bob' AND body = $$x$$ AND tag = $q$y$q$",
        'SELECT * FROM t WHERE id = $1 AND name = $2 AND body = $3 AND tag = $4',
      ],
      ['postgres', "SELECT '{1,2}'::int[], U&'d\\0061t'", 'SELECT $1::int[], $2'],
      ['sqlite', "SELECT * FROM t WHERE a = 1 AND b = 'x' AND c = x'00'", 'SELECT * FROM t WHERE a = ?1 AND b = :b AND c = @c'],
      ['sqlite', 'SELECT * FROM t WHERE a = $a', 'SELECT * FROM t WHERE a = ?'],
      ['generic', "INSERT INTO t VALUES (NULL, 'a' 'b', -7)", 'INSERT INTO t VALUES (?, ?, ?)'],
    ]);
  });

  it('keeps NULL, TRUE and FALSE where they are part of the operator', () => {
    expect(fingerprint('SELECT a FROM t WHERE b IS NULL AND c IS NOT NULL AND d IS TRUE', 'postgres')).toBe(
      'SELECT a FROM t WHERE b IS NULL AND c IS NOT NULL AND d IS TRUE',
    );
    expect(fingerprint('CREATE TABLE t (a INT NOT NULL, b TEXT DEFAULT NULL)', 'mysql')).toBe('CREATE TABLE t (a INT NOT NULL, b TEXT DEFAULT ?)');
    expectDifferent([['postgres', 'SELECT a FROM t WHERE b IS NULL', 'SELECT a FROM t WHERE b = ?']]);
  });

  it('drops comments of every kind', () => {
    expectSame([
      ['mysql', '-- leading\nSELECT a /* inline */ FROM t # trailing', 'SELECT a FROM t'],
      ['mysql', '/*+ MAX_EXECUTION_TIME(1000) */ SELECT a FROM t', 'SELECT a FROM t'],
      ['postgres', 'SELECT a /* outer /* nested */ still comment */ FROM t', 'SELECT a FROM t'],
      ['postgres', "SELECT a FROM t -- traceparent='00-abc'\n", 'SELECT a FROM t'],
      ['sqlite', 'SELECT a FROM t; -- done', 'SELECT a FROM t'],
    ]);
    // MySQL runs what is inside a version comment: it is code, not a comment.
    expect(fingerprint('SELECT /*!40001 SQL_NO_CACHE */ a FROM t', 'mysql')).toBe('SELECT SQL_NO_CACHE a FROM t');
  });

  it('does not see placeholders inside strings or comments', () => {
    expect(fingerprint("SELECT 'is it ?', a FROM t WHERE b = ?", 'mysql')).toBe('SELECT ?, a FROM t WHERE b = ?');
    expect(fingerprint('SELECT a /* $1 ? */ FROM t -- ?', 'postgres')).toBe('SELECT a FROM t');
    expect(fingerprint('SELECT $fn$ $1 ) ( $fn$, b FROM t', 'postgres')).toBe('SELECT ?, b FROM t');
    expect(fingerprint("SELECT 'a ?'' ?' FROM t", 'sqlite')).toBe('SELECT ? FROM t');
  });

  it("follows each dialect's string escapes", () => {
    // MySQL: a backslash escapes the quote, so this is one string.
    expect(fingerprint("SELECT 'a\\', b' FROM t", 'mysql')).toBe('SELECT ? FROM t');
    // PostgreSQL: a backslash is an ordinary character in standard strings, but escapes in E'' strings.
    expect(fingerprint("SELECT 'a\\', b FROM t", 'postgres')).toBe('SELECT ?, b FROM t');
    expect(fingerprint("SELECT E'a\\', b' FROM t", 'postgres')).toBe('SELECT ? FROM t');
    // MySQL double quotes are strings; elsewhere they quote names.
    expect(fingerprint('SELECT "x" FROM t', 'mysql')).toBe('SELECT ? FROM t');
    expect(fingerprint('SELECT "x" FROM t', 'postgres')).toBe('SELECT x FROM t');
  });

  it('collapses IN lists of any length, of literals or placeholders', () => {
    expectSame([
      ['mysql', 'SELECT * FROM t WHERE id IN (?, ?, ?, ?)', 'SELECT * FROM t WHERE id IN (?)'],
      ['mysql', 'SELECT * FROM t WHERE id IN (1, 2, 3)', 'SELECT * FROM t WHERE id IN (?)'],
      ['postgres', 'SELECT * FROM t WHERE id NOT IN ($1, $2, $3) AND x IN ($4)', 'SELECT * FROM t WHERE id NOT IN ($1) AND x IN ($2, $3)'],
      ['postgres', 'SELECT * FROM t WHERE (a, b) IN ((1, 2), (3, 4), (5, 6))', 'SELECT * FROM t WHERE (a, b) IN ((?, ?))'],
      ['postgres', 'SELECT * FROM t WHERE id = ANY(ARRAY[1, 2, 3])', 'SELECT * FROM t WHERE id = ANY(ARRAY[?])'],
    ]);
    expect(fingerprint('SELECT * FROM t WHERE id IN (1, 2, 3)', 'mysql')).toBe('SELECT * FROM t WHERE id IN (?)');
    expect(fingerprint('SELECT * FROM t WHERE id = ANY($1)', 'postgres')).toBe('SELECT * FROM t WHERE id = ANY(?)');
    expect(fingerprint('SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c IN (1, 2))', 'mysql')).toBe(
      'SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c IN (?))',
    );
    // Elements that are not all values keep what distinguishes them.
    expect(fingerprint('SELECT * FROM t WHERE a IN (1, b, 2, b)', 'mysql')).toBe('SELECT * FROM t WHERE a IN (?, b)');
    expectDifferent([['postgres', 'SELECT * FROM t WHERE id = ANY($1)', 'SELECT * FROM t WHERE id IN ($1)']]);
  });

  it('collapses multi-row VALUES lists of any length to one row', () => {
    const rows = (n: number, row: (i: number) => string): string => Array.from({ length: n }, (_, i) => row(i)).join(', ');
    expectSame([
      ['mysql', `INSERT INTO t (a, b) VALUES ${rows(500, (i) => `(${i}, 'v${i}')`)}`, 'INSERT INTO t (a, b) VALUES (?, ?)'],
      ['mysql', `INSERT INTO t (a, b) VALUES ${rows(3, () => '(?, ?)')}`, `INSERT INTO t (a, b) VALUES ${rows(7, () => '(?,?)')}`],
      [
        'postgres',
        `INSERT INTO t (a, b) VALUES ${rows(4, (i) => `($${2 * i + 1}, $${2 * i + 2})`)} RETURNING id`,
        'INSERT INTO t (a, b) VALUES ($1, $2) RETURNING id',
      ],
      ['sqlite', `INSERT INTO t VALUES ${rows(3, () => '(?, ?)')} ON CONFLICT (a) DO NOTHING`, 'INSERT INTO t VALUES (?, ?) ON CONFLICT (a) DO NOTHING'],
      ['mysql', 'INSERT INTO t VALUES ROW(1, 2), ROW(3, 4)', 'INSERT INTO t VALUES ROW(?, ?)'],
      [
        'mysql',
        'INSERT INTO t (a) VALUES (1), (2) ON DUPLICATE KEY UPDATE a = VALUES(a)',
        'INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = VALUES(a)',
      ],
      ['postgres', 'SELECT * FROM (VALUES (1, 2), (3, 4)) AS v (a, b)', 'SELECT * FROM (VALUES (?, ?)) AS v (a, b)'],
    ]);
    // Rows of different shapes are all kept, first seen first.
    expect(fingerprint('INSERT INTO t VALUES (1, 2), (3, DEFAULT), (4, 5), (6, DEFAULT)', 'mysql')).toBe('INSERT INTO t VALUES (?, ?), (?, DEFAULT)');
  });

  it('gives different tables, columns and statements different shapes', () => {
    expectDifferent([
      ['mysql', 'INSERT INTO a (x) VALUES (?)', 'INSERT INTO b (x) VALUES (?)'],
      ['mysql', 'INSERT INTO a (x) VALUES (?)', 'INSERT INTO a (y) VALUES (?)'],
      ['mysql', 'INSERT INTO a (x) VALUES (?)', 'INSERT INTO a (x, y) VALUES (?, ?)'],
      ['postgres', 'SELECT a FROM s1.t', 'SELECT a FROM s2.t'],
      ['postgres', 'SELECT a FROM t WHERE b = ?', 'SELECT a FROM t WHERE b > ?'],
      ['sqlite', 'SELECT a FROM t', 'SELECT b FROM t'],
      ['mysql', 'SELECT `my table`.a FROM `my table`', 'SELECT `my_table`.a FROM `my_table`'],
    ]);
  });

  it("follows each server's identifier case rules", () => {
    expectSame([
      // PostgreSQL folds unquoted names to lower case; a quoted lower-case name is the same name.
      ['postgres', 'SELECT Id FROM Users', 'select id from "users"'],
      // SQLite ignores case, quoted or not, and brackets, backticks and double quotes all quote names.
      ['sqlite', 'SELECT [Id] FROM [My Table]', 'SELECT "id" FROM `my table`'],
      ['sqlite', 'SELECT a FROM T', 'SELECT a FROM "t"'],
      // MySQL: backticks only quote.
      ['mysql', 'SELECT `a` FROM `t`', 'SELECT a FROM t'],
    ]);
    expectDifferent([
      ['postgres', 'SELECT a FROM "Users"', 'SELECT a FROM Users'],
      // MySQL table names are case-sensitive on Linux.
      ['mysql', 'SELECT a FROM Users', 'SELECT a FROM users'],
    ]);
    expect(fingerprint('SELECT "Order", "select", "a""b" FROM t', 'postgres')).toBe('SELECT "Order", "select", "a""b" FROM t');
    expect(fingerprint('SELECT `Order`, `select`, `a b` FROM t', 'mysql')).toBe('SELECT `Order`, `select`, `a b` FROM t');
  });

  it('ignores leading and trailing semicolons and survives malformed SQL', () => {
    expectSame([['mysql', ';; SELECT 1;;', 'SELECT 1']]);
    expect(fingerprint('', 'generic')).toBe('');
    expect(fingerprint('-- nothing', 'generic')).toBe('');
    expect(fingerprint('SELECT (1, (2', 'mysql')).toBe('SELECT (?, (?');
    expect(fingerprint("SELECT 'unterminated", 'postgres')).toBe('SELECT ?');
    expect(fingerprint('INSERT INTO t VALUES (1), (2', 'mysql')).toBe('INSERT INTO t VALUES (?), (?');
  });

  it('steps over repeated VALUES rows exactly as lexing them would', () => {
    // Any row the fast path accepts must lex to the same tokens: every ordered pair and triple of these rows (some
    // deliberately broken), with every separator, is checked against plain lexing.
    const variants: [SqlDialect, string[]][] = [
      [
        'mysql',
        [
          "(1, 'a')",
          "(22, 'b\\'c')",
          "(3,'d')",
          "( 4, 'e' )",
          "(5, X'1F')",
          "(6, X '1F')",
          "(-7, 'f')",
          '(8, NULL)',
          "(9, 'x' 'y')",
          "(10, 'g') /* c */",
          '(11, `q`)',
          "(12, 'h''i')",
          '(13, 0x1F)',
          "(1.5e-3, 'j')",
          "(15, 'm\\')",
          '(16, "n")',
          "(17, 'o\\\\')",
        ],
      ],
      [
        'postgres',
        [
          "(1, 'a')",
          "(2, E'b\\'c')",
          "(3, 'd\\')",
          "(3, E'd\\')",
          '($1, $2)',
          '($3, $4)',
          '($5,$6)',
          '(4, $$x$$)',
          '(5, $t$y$t$)',
          '(6, "Q")',
          "(7, 'a'::text)",
          '(8, ARRAY[1, 2])',
          '(9, ARRAY[3])',
          "(10, B'01')",
          '(11, e)',
          "(12, e'x')",
          "(13, e'p\\')",
          "(14, e'q\\'r')",
        ],
      ],
      ['sqlite', ['(?1, ?2)', '(?3, ?4)', '(?, ?)', '(:a, :b)', '([x], 1)', '([x y], 2)', "(3, 'z')", '(@p, $q)', '("a", 1)', "('a', 1)"]],
    ];
    const separators = [', ', ',', ' , ', ',\n  '];
    let checked = 0;
    for (const [dialect, rows] of variants) {
      const lists: string[][] = [];
      for (const a of rows) for (const b of rows) lists.push([a, b]);
      for (const a of rows) for (const b of rows) lists.push([a, b, a], [a, a, b]);
      for (const list of lists) {
        for (const separator of separators) {
          const sql = `INSERT INTO t (a, b) VALUES ${list.join(separator)} ON CONFLICT DO NOTHING`;
          expect({ sql, shape: fingerprint(sql, dialect) }).toEqual({ sql, shape: fingerprint(sql, dialect, { skipRepeatedRows: false }) });
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(5000);
  });

  it('steps over repeated IN list elements exactly as lexing them would', () => {
    const variants: [SqlDialect, string[]][] = [
      [
        'mysql',
        [
          '1',
          '22',
          "'a'",
          "'b\\'c'",
          '?',
          ':p',
          'x',
          '1 + 2',
          '1+2',
          '(1, 2)',
          'f(1)',
          '-1',
          'NULL',
          "'a' 'b'",
          '1 /* c */',
          "X'1F'",
          "X '1F'",
          '1e-5',
          "'m\\'",
        ],
      ],
      ['postgres', ['1', '$1', '$2', "E'x\\''", "'x\\'", '$$y$$', 'ARRAY[1, 2]', '1::int', 'e', "e'q'", 'a.b', '"Q"']],
      ['sqlite', ['?1', '?', ':a', '@b', '$c', '[x]', "'z'", '2']],
    ];
    const separators = [', ', ',', ' , '];
    let checked = 0;
    for (const [dialect, elements] of variants) {
      for (const a of elements) {
        for (const b of elements) {
          for (const list of [
            [a, b],
            [a, b, a],
            [a, a, b],
            [a, a, a, b],
          ]) {
            for (const separator of separators) {
              const sql = `SELECT * FROM t WHERE a IN (${list.join(separator)}) AND b IN (${list.join(separator)} ) + 1`;
              expect({ sql, shape: fingerprint(sql, dialect) }).toEqual({ sql, shape: fingerprint(sql, dialect, { skipRepeatedRows: false }) });
              checked++;
            }
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(5000);
    // A subquery's select list is not an IN list: its repeated items stay.
    expect(fingerprint('SELECT * FROM t WHERE x IN (SELECT a, a, a FROM u)', 'mysql')).toBe('SELECT * FROM t WHERE x IN (SELECT a, a, a FROM u)');
    expect(fingerprint(`SELECT * FROM t WHERE id IN (${Array.from({ length: 30_000 }, (_, i) => i).join(', ')})`, 'mysql')).toBe(
      'SELECT * FROM t WHERE id IN (?)',
    );
  });

  it('fingerprints a 200 KB multi-row INSERT to one row', () => {
    const rows = Array.from({ length: 4000 }, (_, i) => `(${i}, 'name-${i}', ${i * 1.5}, NULL)`).join(', ');
    const sql = `INSERT INTO bench (id, name, amount, note) VALUES ${rows}`;
    expect(sql.length).toBeGreaterThan(100_000);
    expect(fingerprint(sql, 'mysql')).toBe('INSERT INTO bench (id, name, amount, note) VALUES (?, ?, ?, ?)');
  });
});

describe('fingerprintId', () => {
  it('is 12 hex characters, stable across runs and releases', () => {
    const id = fingerprintId('INSERT INTO t (a, b) VALUES (?, ?)');
    expect(id).toMatch(/^[0-9a-f]{12}$/);
    expect(isFingerprintId(id)).toBe(true);
    // Pinned: ids go into committed snapshots and ignore lists, so the hash must never change silently.
    expect(id).toBe('89cfb92174ba');
    expect(fingerprintId('SELECT ?')).not.toBe(id);
    expect(isFingerprintId('INSERT INTO t')).toBe(false);
    expect(isFingerprintId('89CFB92174BA')).toBe(false);
  });
});
