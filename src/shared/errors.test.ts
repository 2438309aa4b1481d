import { SqltallyError, redactSecrets, truncateStatement } from './errors';

describe('redactSecrets', () => {
  it.each([
    ['cannot reach mysql://app:hunter2@db:3306/x', 'cannot reach mysql://app:***@db:3306/x'],
    ['mysql://app:hun@ter2@db:3306/x', 'mysql://app:***@db:3306/x'],
    ['postgres://u@h/d?password=hunter2&x=1', 'postgres://u@h/d?password=***&x=1'],
    ['postgres://u@h/d?x=1&sslpassword=hunter2', 'postgres://u@h/d?x=1&sslpassword=***'],
    ['host=h user=u password=hunter2 dbname=d', 'host=h user=u password=*** dbname=d'],
    ["host=h password='hunter 2' dbname=d", 'host=h password=*** dbname=d'],
    ['PGPASSWORD=hunter2 psql', 'PGPASSWORD=*** psql'],
    ['?access_token=hunter2;pwd=hunter2', '?access_token=***;pwd=***'],
    ["CREATE USER 'root'@'%' IDENTIFIED BY 'hunter2';", "CREATE USER 'root'@'%' IDENTIFIED BY '***';"],
    ["ALTER ROLE app PASSWORD 'hun''ter2'", "ALTER ROLE app PASSWORD '***'"],
  ])('%s', (text, shown) => {
    expect(redactSecrets(text)).toBe(shown);
  });

  it('leaves words that merely end like a secret name alone', () => {
    expect(redactSecrets('bypass=1 compass=north')).toBe('bypass=1 compass=north');
  });

  it('keeps JSON text valid: a secret value ends at the closing quote', () => {
    const json = JSON.stringify({
      origin: 'postgres://u@h/d?password=hunter2',
      next: 'a@b',
      statement: 'x token=',
      sql: "SET PASSWORD 'trunc",
      c3: "O'Brien",
      more: 'mysql://u:p@h',
    });
    const shown = redactSecrets(json);
    expect(shown).not.toContain('hunter2');
    expect(JSON.parse(shown)).toEqual({
      origin: 'postgres://u@h/d?password=***',
      next: 'a@b',
      statement: 'x token=***',
      sql: "SET PASSWORD 'trunc",
      c3: "O'Brien",
      more: 'mysql://u:***@h',
    });
  });

  it('is what every SqltallyError message goes through', () => {
    const err = new SqltallyError('access denied at postgres://u@h/d?password=hunter2', { phase: 'connect', cause: new Error('password=hunter2 rejected') });
    expect(err.message).not.toContain('hunter2');
  });
});

describe('truncateStatement', () => {
  // The folding done the long way, on every input: the fast path for text that needs none must agree with it.
  function folded(sql: string, max: number): string {
    const head = sql.length > max * 4 + 16 ? sql.slice(0, max * 4 + 16) : sql;
    const flat = head.replace(/\s+/g, ' ').trim();
    if (head === sql && flat.length <= max) return flat;
    return `${flat.slice(0, max)}… (${sql.length} chars)`;
  }

  it('folds whitespace and cuts at max, saying the length', () => {
    expect(truncateStatement('SELECT  1\n FROM\tt ', 200)).toBe('SELECT 1 FROM t');
    expect(truncateStatement(`INSERT INTO t VALUES ${'(?, ?), '.repeat(5000)}(?, ?)`, 30)).toBe('INSERT INTO t VALUES (?, ?), (… (40027 chars)');
    expect(truncateStatement('abc ', 3)).toBe('abc');
    expect(truncateStatement('abc  ', 3)).toBe('abc');
    expect(truncateStatement('abcd', 3)).toBe('abc… (4 chars)');
  });

  it('agrees with folding the whole head on texts around the cut (spaces, tabs, runs, leading and trailing)', () => {
    const pieces = ['a', 'b', ' ', '  ', '\t', '\n', '\u00a0', '(?, ?)', ','];
    let seed = 7;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648);
    for (let i = 0; i < 20000; i++) {
      const max = 1 + (next() % 12);
      let sql = '';
      const parts = next() % 16;
      for (let p = 0; p < parts; p++) sql += pieces[next() % pieces.length];
      expect([sql, max, truncateStatement(sql, max)]).toEqual([sql, max, folded(sql, max)]);
    }
  });

  it('agrees with it at every cut of a multi-row INSERT, short and long, with and without trailing whitespace', () => {
    // The cut lands right before one of `?, ?`'s spaces at one max in three: the case the fast path must also take.
    for (const rows of [1, 3, 400]) {
      for (const tail of ['', ' ', '   ', ' \n']) {
        const sql = `INSERT INTO t VALUES ${Array.from({ length: rows }, () => '(?, ?, ?)').join(', ')}${tail}`;
        for (let max = 1; max <= 80; max++) expect([max, tail, truncateStatement(sql, max)]).toEqual([max, tail, folded(sql, max)]);
      }
    }
  });
});
