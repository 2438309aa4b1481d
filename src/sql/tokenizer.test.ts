import { classifyStatement, countStatements, lexStatements, splitStatements, SqlLexer } from './tokenizer';
import type { SqlDialect } from './tokenizer';
import type { StatementClass } from './events';

type Case = [sql: string, expected: StatementClass, dialect?: SqlDialect];

function check(cases: Case[]): void {
  for (const [sql, expected, dialect] of cases) {
    expect({ sql, dialect, cls: classifyStatement(sql, dialect) }).toEqual({ sql, dialect, cls: expected });
  }
}

describe('classifyStatement', () => {
  it('classifies plain DML by its first word, case-insensitively', () => {
    check([
      ['INSERT INTO t VALUES (1)', 'insert'],
      ['insert into t values (1)', 'insert'],
      ['REPLACE INTO t VALUES (1)', 'insert'],
      ['SELECT 1', 'select'],
      ['select\n*\nfrom t', 'select'],
      ['UPDATE t SET a = 1', 'update'],
      ['DELETE FROM t', 'delete'],
      ['VALUES (1), (2)', 'select'],
      ['TABLE t', 'select'],
      ['(SELECT 1) UNION (SELECT 2)', 'select'],
      ['((SELECT 1))', 'select'],
    ]);
  });

  it('skips line, hash and block comments', () => {
    check([
      ['-- a comment\nINSERT INTO t VALUES (1)', 'insert'],
      ['--no space\nINSERT INTO t VALUES (1)', 'insert'],
      ['# mysql comment\nDELETE FROM t', 'delete', 'mysql'],
      ['/* SELECT */ INSERT INTO t VALUES (1)', 'insert'],
      ['/* multi\nline\n*/\n\tUPDATE t SET a = 1', 'update'],
      ['/*+ hint */ SELECT 1', 'select'],
      ['  \n\n -- one\n -- two\n /* three */ SELECT 1', 'select'],
      ['/* outer /* inner */ still comment */ SELECT 1', 'select', 'postgres'],
    ]);
  });

  it('lexes MySQL version comments as code', () => {
    check([
      ['/*!40101 SET NAMES utf8 */', 'set', 'mysql'],
      ['/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50001 VIEW v AS SELECT 1 */', 'ddl', 'mysql'],
      ['/*M!100100 SET sql_mode = "" */', 'set', 'mysql'],
      ['/*! INSERT */ INTO t VALUES (1)', 'insert', 'mysql'],
    ]);
  });

  it('treats # as an operator, not a comment, outside MySQL', () => {
    // In PostgreSQL `#` is XOR, so the "comment" does not hide the statement that follows it.
    expect(classifyStatement('# not a comment\nSELECT 1', 'postgres')).toBe('other');
    expect(classifyStatement('# comment\nSELECT 1', 'mysql')).toBe('select');
  });

  it('handles WITH ... main statement, skipping CTE bodies', () => {
    check([
      ['WITH x AS (SELECT 1) SELECT * FROM x', 'select'],
      ['WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x', 'insert'],
      ['WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r', 'select'],
      ['WITH a AS (DELETE FROM t RETURNING *), b AS (SELECT * FROM a) INSERT INTO u SELECT * FROM b', 'insert'],
      ['WITH a AS (INSERT INTO t VALUES (1) RETURNING id) UPDATE u SET x = 1', 'update'],
      ['WITH a AS (SELECT 1) DELETE FROM t', 'delete'],
      ['with a as materialized (select 1) select * from a', 'select', 'postgres'],
      ['WITH a AS NOT MATERIALIZED (SELECT 1) TABLE a', 'select', 'postgres'],
      ['WITH a AS (SELECT ")" AS p) SELECT 1', 'select', 'mysql'],
      ["WITH a AS (SELECT ')' AS p) REPLACE INTO t SELECT * FROM a", 'insert', 'mysql'],
      ['WITH a AS (SELECT 1) (SELECT * FROM a)', 'select'],
      ['WITH a AS (SELECT 1) VALUES (1)', 'select'],
      ['WITH RECURSIVE s(id) AS (SELECT 1) SEARCH DEPTH FIRST BY id SET ord SELECT * FROM s ORDER BY ord', 'select', 'postgres'],
      ['WITH -- SELECT\n a AS (/* INSERT */ SELECT 1) DELETE FROM t', 'delete'],
      ['WITH', 'other'],
      ['WITH a AS (SELECT 1); SELECT 2', 'other'],
    ]);
  });

  it('classifies transaction control', () => {
    check([
      ['BEGIN', 'begin'],
      ['begin work', 'begin'],
      ['BEGIN TRANSACTION', 'begin'],
      ['BEGIN IMMEDIATE', 'begin', 'sqlite'],
      ['START TRANSACTION', 'begin'],
      ['START TRANSACTION READ ONLY', 'begin'],
      ['START SLAVE', 'other'],
      ['BEGIN NOT ATOMIC SELECT 1; END', 'other', 'mysql'],
      ['COMMIT', 'commit'],
      ['COMMIT WORK AND NO CHAIN', 'commit'],
      ['END', 'commit', 'postgres'],
      ['END TRANSACTION', 'commit', 'sqlite'],
      ['ROLLBACK', 'rollback'],
      ['ROLLBACK WORK', 'rollback'],
      ['ABORT', 'rollback', 'postgres'],
      ['ROLLBACK TO SAVEPOINT s1', 'savepoint'],
      ['ROLLBACK TO s1', 'savepoint'],
      ['ROLLBACK WORK TO SAVEPOINT s1', 'savepoint'],
      ['ROLLBACK TRANSACTION TO s1', 'savepoint'],
      ['rollback to savepoint "s 1"', 'savepoint', 'postgres'],
      ['SAVEPOINT s1', 'savepoint'],
      ['savepoint `sp`', 'savepoint', 'mysql'],
      ['/* orm */ SAVEPOINT sa_savepoint_1', 'savepoint'],
      ['RELEASE SAVEPOINT s1', 'savepoint'],
      ['RELEASE s1', 'savepoint', 'postgres'],
      ['RELEASE `\t_bs3.\t`', 'savepoint', 'sqlite'],
      // MySQL's `RELEASE` also appears after COMMIT/ROLLBACK, where it closes the session: the verb decides.
      ['COMMIT AND NO RELEASE', 'commit', 'mysql'],
      ['ROLLBACK RELEASE', 'rollback', 'mysql'],
      ['ROLLBACK TRANSACTION', 'rollback'],
    ]);
  });

  it('classifies SET, SHOW and DDL', () => {
    check([
      ['SET autocommit = 0', 'set'],
      ['SET TRANSACTION ISOLATION LEVEL READ COMMITTED', 'set'],
      ['set @a := 1', 'set', 'mysql'],
      ['SHOW GLOBAL STATUS', 'show'],
      ['SHOW search_path', 'show', 'postgres'],
      ['CREATE TABLE t (a INT)', 'ddl'],
      ['CREATE TABLE t AS SELECT 1', 'ddl'],
      ['ALTER TABLE t ADD b INT', 'ddl'],
      ['DROP TABLE IF EXISTS t', 'ddl'],
      ['TRUNCATE t', 'ddl'],
      ['RENAME TABLE a TO b', 'ddl', 'mysql'],
    ]);
  });

  it('puts everything it cannot place in other', () => {
    check([
      ['', 'other'],
      ['   ', 'other'],
      ['-- only a comment', 'other'],
      ['/* unterminated', 'other'],
      ['EXPLAIN SELECT 1', 'other'],
      ['EXPLAIN ANALYZE INSERT INTO t VALUES (1)', 'other'],
      ['DESCRIBE t', 'other'],
      ['PRAGMA journal_mode = WAL', 'other', 'sqlite'],
      ['CALL p()', 'other'],
      ['USE test', 'other'],
      ['GRANT ALL ON t TO u', 'other'],
      ['LOAD DATA INFILE "x" INTO TABLE t', 'other', 'mysql'],
      ['COPY t FROM STDIN', 'other', 'postgres'],
      ["'INSERT'", 'other'],
      ['`insert` INTO', 'other', 'mysql'],
      ['"INSERT" INTO', 'other', 'postgres'],
      ['42', 'other'],
      ['(INSERT INTO t VALUES (1))', 'other'],
    ]);
  });

  it('classifies only the first of several statements', () => {
    check([
      [';; INSERT INTO t VALUES (1); SELECT 1', 'insert'],
      ['SELECT 1; INSERT INTO t VALUES (1)', 'select'],
    ]);
  });

  it('reads a leading word itself as the lexer would: the same class as after a comment, which only the lexer skips', () => {
    const texts = [
      'select 1',
      'Insert into t values (1)',
      '  \n\tUPDATE t SET a = 1',
      'delete from t',
      "E'x'",
      "e'x' SELECT",
      "N'x'",
      '_x SELECT',
      'SELECT1',
      'a$b',
      'x1 INSERT',
      'start transaction',
      'START',
      'begin not atomic',
      'begin',
      'rollback to s1',
      'rollback work',
      'with x as (select 1) delete from t',
      'with recursive x(a) as (values (1)) (select * from x)',
      'set a = 1',
      'show tables',
      'truncate t',
      'end',
      'abort',
      'release s1',
      'constructor',
      'values (1)',
    ];
    for (const sql of texts) {
      for (const dialect of ['mysql', 'postgres', 'sqlite', 'generic'] as const) {
        expect([sql, dialect, classifyStatement(sql, dialect)]).toEqual([sql, dialect, classifyStatement(`/* */${sql}`, dialect)]);
      }
    }
  });

  it('does not read past the first word of a huge statement', () => {
    // A 5000-row INSERT is megabytes; classification must stay O(prefix).
    const huge = `INSERT INTO t VALUES ${Array.from({ length: 200_000 }, (_, i) => `(${i}, 'x')`).join(',')}`;
    expect(classifyStatement(huge)).toBe('insert');
  });
});

describe('SqlLexer', () => {
  function tokens(sql: string, dialect: SqlDialect): string[] {
    const lexer = new SqlLexer(sql, dialect);
    const out: string[] = [];
    for (let t = lexer.next(); t; t = lexer.next()) out.push(`${t.type}:${t.value}`);
    return out;
  }

  it('skips strings with doubled quotes and backslash escapes in MySQL', () => {
    expect(tokens(`SELECT 'it''s', 'a\\'b', "q\\"q" FROM t`, 'mysql')).toEqual([
      'word:SELECT',
      "string:'",
      'punct:,',
      "string:'",
      'punct:,',
      'string:"',
      'word:FROM',
      'word:T',
    ]);
  });

  it('does not treat backslash as an escape in standard PostgreSQL strings, but does in E strings', () => {
    expect(tokens(`SELECT 'C:\\' , E'it\\'s' x`, 'postgres')).toEqual(['word:SELECT', "string:'", 'punct:,', "string:'", 'word:X']);
  });

  it('skips dollar-quoted bodies with tags, and keeps $1 parameters apart', () => {
    expect(tokens('SELECT $$a ) b$$, $fn$ $$ ) $fn$, $1 FROM t', 'postgres')).toEqual([
      'word:SELECT',
      'string:$',
      'punct:,',
      'string:$',
      'punct:,',
      'param:$1',
      'word:FROM',
      'word:T',
    ]);
  });

  it('skips quoted identifiers per dialect', () => {
    expect(tokens('SELECT `a``b`, [c d] FROM "e""f"', 'sqlite')).toEqual(['word:SELECT', 'ident:`', 'punct:,', 'ident:[', 'word:FROM', 'ident:"']);
  });

  it('ends cleanly on unterminated strings and comments', () => {
    expect(tokens("SELECT 'abc", 'generic')).toEqual(['word:SELECT', "string:'"]);
    expect(tokens('SELECT $x$ abc', 'postgres')).toEqual(['word:SELECT', 'string:$']);
    expect(tokens('SELECT /* abc', 'generic')).toEqual(['word:SELECT']);
  });

  it('reports ? placeholders as params', () => {
    expect(tokens('VALUES (?, ?)', 'mysql')).toEqual(['word:VALUES', 'punct:(', 'param:?', 'punct:,', 'param:?', 'punct:)']);
  });
});

describe('countStatements', () => {
  it.each([
    ['SELECT 1', 'postgres', 1],
    ['SELECT 1;', 'postgres', 1],
    ['SELECT 1; SELECT 2', 'postgres', 2],
    ["SELECT ';'; SELECT 2;", 'postgres', 2],
    ['-- a; b\nSELECT 1', 'postgres', 1],
    ['/* ; */ SELECT 1 ; ; SELECT 2', 'postgres', 2],
    ['DO $$ BEGIN PERFORM 1; END $$; SELECT 2', 'postgres', 2],
    ['; ;', 'postgres', 1],
    ["INSERT INTO t VALUES ('a;b'); # ;\nSELECT 1", 'mysql', 2],
  ] as [string, SqlDialect, number][])('%j (%s): %i', (sql, dialect, n) => {
    expect(countStatements(sql, dialect)).toBe(n);
  });
});

describe('splitStatements', () => {
  it('gives what the lexer gives for one statement and a final semicolon, without lexing', () => {
    // Every character class the shortcut lets through, and those it must leave to the lexer.
    const alphabet = [
      'SELECT',
      'insert',
      'x',
      '_',
      '1',
      '2.5e3',
      ' ',
      '\t',
      '\n',
      '\r',
      '\v',
      '\f',
      '(',
      ')',
      ',',
      '.',
      '=',
      '*',
      '+',
      '<',
      '>',
      '!',
      '%',
      '&',
      '|',
      '^',
      '~',
      '?',
      ':',
      '@',
      '{',
      '}',
      '\u0000',
      '\u0001',
      '\u007f',
    ];
    const rest = [';', "'", '"', '`', '$1', '$$', '#', '--', '/*', '*/', '[', ']', '\\', '\u00a0', '\u2028', 'é', '-', '/'];
    // mulberry32: a fixed seed, so a failure repeats.
    let seed = 7;
    const random = (n: number): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
    };
    let shortcuts = 0;
    for (let i = 0; i < 4_000; i++) {
      const parts: string[] = [];
      const length = random(12);
      for (let p = 0; p < length; p++) parts.push(random(8) === 0 ? rest[random(rest.length)]! : alphabet[random(alphabet.length)]!);
      parts.push(';');
      for (let p = random(3); p > 0; p--) parts.push([' ', '\n', '\t', 'x', ';'][random(5)]!);
      const sql = parts.join('');
      for (const dialect of ['mysql', 'postgres', 'sqlite', 'generic'] as const) {
        expect([sql, dialect, splitStatements(sql, dialect)]).toEqual([sql, dialect, lexStatements(sql, dialect)]);
      }
      if (/^[^;]*;\s*$/.test(sql)) shortcuts++;
    }
    // Enough of the texts were of the shape the shortcut takes for the comparison to mean something.
    expect(shortcuts).toBeGreaterThan(400);
  });

  it("splits a pgbench statement with its value written in, the semicolon's string and comment cases", () => {
    expect(splitStatements('SELECT abalance FROM pgbench_accounts WHERE aid = 4242;\n', 'postgres')).toEqual([
      { text: 'SELECT abalance FROM pgbench_accounts WHERE aid = 4242', statementClass: 'select' },
    ]);
    expect(splitStatements("INSERT INTO t VALUES ('a;b');", 'mysql').map((s) => s.text)).toEqual(["INSERT INTO t VALUES ('a;b')"]);
    expect(splitStatements('SELECT 1 -- x;', 'postgres').map((s) => s.text)).toEqual(['SELECT 1']);
    expect(splitStatements('  ;  ', 'postgres')).toEqual([]);
  });
});
