import BetterSqlite3 from 'better-sqlite3';
import sqlite3 from 'sqlite3';
import { DriverRecorder, DriverTally } from './driver-layer';
import { StatementEventSchema } from '../sql/events';
import type { StatementEvent } from '../sql/events';
import { SqltallyError } from '../shared/errors';
import { markOf, WRAPPED } from './counted';
import { driverOf } from './registry';
import { countSqlite3Params, SQLITE3_DRIVER, wrapSqlite3 } from './sqlite3';

type Cb<R = unknown> = (err: Error | null, result?: R) => void;

/** Runs one callback-API call to its callback. */
function settled<R = unknown>(fn: (cb: Cb<R>) => unknown): Promise<R> {
  return new Promise((resolve, reject) => {
    fn((err, result) => (err ? reject(err) : resolve(result as R)));
  });
}

async function open(): Promise<sqlite3.Database> {
  const db = await new Promise<sqlite3.Database>((resolve, reject) => {
    const d = new sqlite3.Database(':memory:', (err) => (err ? reject(err) : resolve(d)));
  });
  await settled((cb) => db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b TEXT)', cb));
  return db;
}

const opened: sqlite3.Database[] = [];
async function fresh(): Promise<sqlite3.Database> {
  const db = await open();
  opened.push(db);
  return db;
}
afterAll(async () => {
  for (const db of opened.splice(0)) await settled((cb) => db.close(cb));
});

function brief(events: StatementEvent[]): string[] {
  return events.map((e) => `${e.method}/${e.kind}/${e.statementClass}/${e.bindValues}/${e.parameterSets}/${e.rowsAffected}`);
}

describe('wrapSqlite3', () => {
  it('records one event per call on the database and on statements: kind, class, values, rows affected', async () => {
    const tally = new DriverTally();
    const db = wrapSqlite3(await fresh(), tally);
    await settled((cb) => db.run('INSERT INTO t (a, b) VALUES (?, ?)', 1, 'x', cb));
    await settled((cb) => db.run('INSERT INTO t (a, b) VALUES (?, ?)', [2, 'y'], cb));
    await settled((cb) => db.run('INSERT INTO t (a, b) VALUES ($a, $b)', { $a: 3, $b: 'z' }, cb));
    const row = await settled<{ n: number }>((cb) => db.get('SELECT count(*) AS n FROM t WHERE a > ?', 0, cb));
    const rows = await settled<unknown[]>((cb) => db.all('SELECT * FROM t', cb));
    const statement = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
    await settled((cb) => statement.run(4, 'w', cb));
    await settled((cb) => statement.finalize(cb));
    await settled((cb) => db.exec('UPDATE t SET a = a + 1; UPDATE t SET a = a - 1', cb));
    expect(row).toEqual({ n: 3 });
    expect(rows).toHaveLength(3);
    expect(brief(tally.events)).toEqual([
      'run/query/insert/2/1/1',
      'run/query/insert/2/1/1',
      'run/query/insert/2/1/1',
      'get/query/select/1/1/null',
      'all/query/select/0/1/null',
      'prepare/prepare/insert/0/0/null',
      'run/execute/insert/2/1/1',
      // Two statements in one exec: one call, as better-sqlite3's exec.
      'exec/query/update/0/1/null',
    ]);
    for (const e of tally.events) expect(StatementEventSchema.parse(e)).toEqual(e);
    expect(new Set(tally.events.map((e) => e.driver))).toEqual(new Set(['sqlite3']));
  });

  it('counts calls made without a callback, queued inside serialize(), and knows when each ended', async () => {
    const recorder = new DriverRecorder();
    const db = wrapSqlite3(await fresh(), recorder);
    recorder.begin();
    db.serialize(() => {
      db.run('BEGIN');
      const statement = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
      for (let i = 0; i < 50; i++) statement.run(i, 'r');
      statement.finalize();
      db.run('COMMIT');
    });
    // Nothing has run yet: every call is in flight until the driver's thread has run it.
    expect(recorder.callsInFlightInWindow).toBeGreaterThan(0);
    await settled((cb) => db.wait(cb));
    expect(recorder.callsInFlightInWindow).toBe(0);
    const window = recorder.end();
    expect(window.layer.calls).toBe(53);
    const inserts = window.layer.shapes.find((s) => s.kind === 'execute')!;
    expect(inserts).toMatchObject({ calls: 50, parameterSets: 50, rows: 50 });
    // byClass counts the calls that run SQL: the prepare is not among them.
    expect(window.layer.byClass).toMatchObject({ begin: 1, insert: 50, commit: 1 });
  });

  it('hands back the same results and the same errors as the raw driver', async () => {
    const raw = await fresh();
    const db = wrapSqlite3(await fresh(), new DriverTally());
    for (const d of [raw, db]) await settled((cb) => d.run('INSERT INTO t (id, a, b) VALUES (1, 7, ?)', 'q', cb));
    expect(await settled((cb) => db.all('SELECT * FROM t', cb))).toEqual(await settled((cb) => raw.all('SELECT * FROM t', cb)));
    // `this` in a run callback is the statement, with lastID and changes.
    const info = await new Promise<{ lastID: number; changes: number }>((resolve, reject) => {
      db.run('INSERT INTO t (a) VALUES (8)', function (this: sqlite3.RunResult, err: Error | null) {
        if (err) reject(err);
        else resolve({ lastID: this.lastID, changes: this.changes });
      });
    });
    expect(info).toEqual({ lastID: 2, changes: 1 });

    const tally = new DriverTally();
    const counted = wrapSqlite3(await fresh(), tally);
    await settled((cb) => counted.run('INSERT INTO t (id) VALUES (1)', cb));
    const failed = await settled((cb) => counted.run('INSERT INTO t (id) VALUES (1)', cb)).catch((e: unknown) => e);
    expect((failed as { code?: string }).code).toBe('SQLITE_CONSTRAINT');
    expect(tally.events.at(-1)).toMatchObject({ error: (failed as Error).message, rowsAffected: null });
    // A statement that cannot be prepared reaches the callback once, and is recorded once.
    const bad = await settled((cb) => counted.all('SELECT * FROM missing', cb)).catch((e: unknown) => e);
    expect((bad as Error).message).toMatch(/no such table: missing/);
    expect(tally.events.at(-1)).toMatchObject({ method: 'all', error: (bad as Error).message });
  });

  it('raises a failure of a call given no callback as the driver does: an error event on the object that ran it', async () => {
    const tally = new DriverTally();
    const raw = await fresh();
    const db = wrapSqlite3(raw, tally);
    const statement = db.prepare('INSERT INTO t (id) VALUES (?)');
    const seen: unknown[] = [];
    statement.on('error', (err: unknown) => seen.push(err));
    statement.run(1);
    statement.run(1);
    statement.finalize();
    await settled((cb) => db.wait(cb));
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toHaveLength(1);
    expect((seen[0] as { code?: string }).code).toBe('SQLITE_CONSTRAINT');
    const onDb: unknown[] = [];
    raw.on('error', (err: unknown) => onDb.push(err));
    db.exec('INSERT INTO missing VALUES (1)');
    await settled((cb) => db.wait(cb));
    await new Promise((resolve) => setImmediate(resolve));
    expect(onDb).toHaveLength(1);
    expect(brief(tally.events).slice(-3)).toEqual(['run/execute/insert/1/1/1', 'run/execute/insert/1/1/null', 'exec/query/insert/0/1/null']);
    expect(tally.events.at(-1)!.error).toMatch(/no such table/);
  });

  it('records a prepare when the driver has prepared it, in the order the driver ran the calls', async () => {
    const tally = new DriverTally();
    const db = wrapSqlite3(await fresh(), tally);
    const failures: unknown[] = [];
    const keep = (err: Error | null): void => {
      if (err) failures.push(err);
    };
    await new Promise<void>((resolve) => {
      db.serialize(() => {
        // node-sqlite3's documented bulk insert: the BEGIN queued, not awaited, before the prepare.
        db.run('BEGIN', keep);
        const statement = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)', keep);
        for (let i = 0; i < 3; i++) statement.run(i, 'r', keep);
        statement.finalize(() => undefined);
        db.run('COMMIT', () => resolve());
      });
    });
    expect(failures).toEqual([]);
    expect(brief(tally.events)).toEqual([
      'run/query/begin/0/1/0',
      'prepare/prepare/insert/0/0/null',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
      // SQLite's changes() is left as the last INSERT set it: COMMIT does not reset it.
      'run/query/commit/0/1/1',
    ]);
    // Without a callback the prepare is in flight until the driver has prepared it.
    const recorder = new DriverRecorder();
    const counted = wrapSqlite3(await fresh(), recorder);
    recorder.begin();
    const statement = counted.prepare('SELECT 1');
    expect(recorder.callsInFlightInWindow).toBe(1);
    await settled((cb) => statement.finalize(cb));
    expect(recorder.callsInFlightInWindow).toBe(0);
    expect(recorder.end().layer.calls).toBe(1);
  });

  it('raises a prepare that fails as the driver does: to the callback once, or as an error event on the statement', async () => {
    const tally = new DriverTally();
    const db = wrapSqlite3(await fresh(), tally);
    const calls: unknown[] = [];
    await new Promise<void>((resolve) => {
      db.prepare('INSERT INTO missing VALUES (?)', 1, (err: Error | null) => {
        calls.push(err);
        setImmediate(resolve);
      });
    });
    expect(calls).toHaveLength(1);
    expect((calls[0] as Error).message).toMatch(/no such table: missing/);
    const onStatement: unknown[] = [];
    const statement = db.prepare('SELECT * FROM missing');
    statement.on('error', (err: unknown) => onStatement.push(err));
    await settled((cb) => db.wait(cb));
    await new Promise((resolve) => setImmediate(resolve));
    expect(onStatement).toHaveLength(1);
    expect((onStatement[0] as Error).message).toMatch(/no such table: missing/);
    expect(brief(tally.events)).toEqual(['prepare/prepare/insert/0/0/null', 'prepare/prepare/select/0/0/null']);
    expect(tally.events.map((e) => e.error)).toEqual([(calls[0] as Error).message, (onStatement[0] as Error).message]);
  });

  it('ends each() at its completion, added when the caller gave only a row callback', async () => {
    const tally = new DriverTally();
    const db = wrapSqlite3(await fresh(), tally);
    await settled((cb) => db.exec('INSERT INTO t (a) VALUES (1), (2), (3)', cb));
    const seen: unknown[] = [];
    await new Promise<void>((resolve) => {
      db.each('SELECT a FROM t ORDER BY a', (err: Error | null, row: { a: number }) => {
        seen.push(row.a);
        if (seen.length === 3) setImmediate(resolve);
      });
    });
    const count = await new Promise<number>((resolve, reject) => {
      db.each(
        'SELECT a FROM t WHERE a > ?',
        1,
        () => undefined,
        (err: Error | null, n: number) => (err ? reject(err) : resolve(n)),
      );
    });
    expect(seen).toEqual([1, 2, 3]);
    expect(count).toBe(2);
    await settled((cb) => db.wait(cb));
    expect(brief(tally.events)).toEqual(['exec/query/insert/0/1/null', 'each/query/select/0/1/null', 'each/query/select/1/1/null']);
  });

  it('counts values bound by prepare() or bind() on later executions that pass none', async () => {
    const tally = new DriverTally();
    const db = wrapSqlite3(await fresh(), tally);
    const statement = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)', 1, 'x');
    await settled((cb) => statement.run(cb));
    await settled((cb) => statement.bind([2, 'y'], cb));
    await settled((cb) => statement.run(cb));
    await settled((cb) => statement.run(3, 'z', cb));
    await settled((cb) => statement.finalize(cb));
    expect(brief(tally.events)).toEqual([
      'prepare/prepare/insert/0/0/null',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
    ]);
    expect(countSqlite3Params([1, 'a', new Date()])).toBe(3);
    expect(countSqlite3Params([[1, 2, 3, 4]])).toBe(4);
    expect(countSqlite3Params([{ $a: 1, $b: 2 }])).toBe(2);
    expect(countSqlite3Params([Buffer.from('x')])).toBe(1);
  });

  it('keeps chaining on the wrapper, does not count twice when wrapped twice, and refuses a second sink', async () => {
    const tally = new DriverTally();
    const raw = await fresh();
    const db = wrapSqlite3(raw, tally);
    expect(wrapSqlite3(raw, tally)).toBe(db);
    expect(wrapSqlite3(db, tally)).toBe(db);
    expect(() => wrapSqlite3(db, new DriverTally())).toThrow(SqltallyError);
    expect(db).toBeInstanceOf(sqlite3.Database);
    const statement = db.prepare('SELECT 1');
    expect(statement).toBeInstanceOf(sqlite3.Statement);
    expect(markOf(statement)?.driver).toBe('sqlite3');
    // finalize() hands back the database: the counted one, so calls chained on it are counted.
    const back = statement.finalize();
    expect(back).toBe(db);
    expect(db.serialize()).toBe(db);
    expect(db.run('SELECT 2')).toBe(db);
    await settled((cb) => db.wait(cb));
    expect((db as unknown as Record<symbol, unknown>)[WRAPPED]).toBeDefined();
    // run() of a SELECT: the driver's `changes` is 0, as better-sqlite3's.
    expect(brief(tally.events)).toEqual(['prepare/prepare/select/0/0/null', 'run/query/select/0/1/0']);
  });

  it('is the module that recognises a node-sqlite3 Database, and no other module claims it', async () => {
    const db = await fresh();
    expect(driverOf(db)?.name).toBe('sqlite3');
    expect(SQLITE3_DRIVER.recognises(new BetterSqlite3(':memory:'))).toBe(false);
    expect(driverOf(new BetterSqlite3(':memory:'))?.name).toBe('better-sqlite3');
  });

  it('opens a file, runs its own SQL and reads rows back', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'sqltally-sqlite3-'));
    try {
      const o = await SQLITE3_DRIVER.open({ kind: 'file', filename: join(dir, 'x.db') }, {});
      expect(await SQLITE3_DRIVER.runSql(o.handle, 'CREATE TABLE x (v INT)')).toEqual([]);
      await SQLITE3_DRIVER.runSql(o.handle, 'INSERT INTO x VALUES (1), (2)');
      expect(await SQLITE3_DRIVER.runSql(o.handle, 'SELECT total_changes() AS n')).toEqual([{ n: 2 }]);
      expect(await SQLITE3_DRIVER.rowSource(o.handle).all('SELECT v FROM x WHERE v > ?', [1])).toEqual([{ v: 2 }]);
      await o.close();
      await expect(SQLITE3_DRIVER.open({ kind: 'network', host: 'h', port: 1, user: 'u', password: 'p', database: 'd' }, {})).rejects.toThrow(SqltallyError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('models every call that runs SQL as one statement and a prepare as none, with no wire', () => {
    const group = {
      kind: 'execute',
      sql: 'INSERT',
      statementClass: 'insert',
      connectionId: null,
      calls: 5,
      parameterSets: 5,
      callsWithParameterSets: 5,
      callsWithValues: 5,
      errors: 0,
      byProtocol: {},
    } as const;
    const ctx = { capabilities: { bulkExecute: false, wireProtocol: null }, driverOptions: {}, driverVersion: null, claimPrepare: () => 0 };
    expect(SQLITE3_DRIVER.model(group as never, ctx)).toMatchObject({ wire: {}, server: { statements: { min: 5, max: 5 } } });
    expect(SQLITE3_DRIVER.model({ ...group, kind: 'prepare' } as never, ctx)).toMatchObject({ server: { statements: { min: 0, max: 0 } } });
  });
});
