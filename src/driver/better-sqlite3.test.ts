import { itOnFastPath } from './compat/path.fixture';
import Database from 'better-sqlite3';
import { DriverRecorder, DriverTally } from './driver-layer';
import { StatementEventSchema } from '../sql/events';
import type { StatementEvent } from '../sql/events';
import { SqltallyError } from '../shared/errors';
import { CALLS_BEFORE_COUNTERS, countSqliteParams, wrapBetterSqlite3 } from './better-sqlite3';
import { WRAPPED } from './counted';

function open(): Database.Database {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b TEXT)');
  return db;
}

function brief(events: StatementEvent[]): string[] {
  return events.map((e) => `${e.method}/${e.kind}/${e.statementClass}/${e.bindValues}/${e.parameterSets}/${e.rowsAffected}`);
}

describe('wrapBetterSqlite3', () => {
  it('records one event per call with kind, class, bind values, parameter sets and rows affected', () => {
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(open(), tally);
    const insert = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
    insert.run(1, 'x');
    insert.run([2, 'y']);
    const named = db.prepare('INSERT INTO t (a, b) VALUES (@a, @b)');
    named.run({ a: 3, b: 'z' });
    const rows = db.prepare('SELECT * FROM t WHERE a > ?').all(0);
    db.prepare('SELECT count(*) AS n FROM t').get();
    db.exec('UPDATE t SET a = a + 1');
    db.pragma('user_version = 3');
    expect(rows).toHaveLength(3);
    expect(brief(tally.events)).toEqual([
      'prepare/prepare/insert/0/0/null',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
      'prepare/prepare/insert/0/0/null',
      'run/execute/insert/2/1/1',
      'prepare/prepare/select/0/0/null',
      'all/execute/select/1/1/null',
      'prepare/prepare/select/0/0/null',
      'get/execute/select/0/1/null',
      'exec/query/update/0/1/null',
      'pragma/query/other/0/1/null',
    ]);
    for (const e of tally.events) expect(StatementEventSchema.parse(e)).toEqual(e);
    expect(tally.events[10]!.sql).toBe('PRAGMA user_version = 3');
  });

  it('returns the same results and the same error instance as the unwrapped database', () => {
    const raw = open();
    const db = wrapBetterSqlite3(open(), new DriverTally());
    for (const d of [raw, db]) d.prepare('INSERT INTO t (a, b) VALUES (?, ?)').run(7, 'q');
    const rawRows = raw.prepare('SELECT * FROM t').all();
    expect(db.prepare('SELECT * FROM t').all()).toEqual(rawRows);
    expect(db.prepare('SELECT * FROM t').raw().all()).toEqual(raw.prepare('SELECT * FROM t').raw().all());
    expect(db.prepare('INSERT INTO t (a, b) VALUES (?, ?)').run(8, 'r')).toEqual(raw.prepare('INSERT INTO t (a, b) VALUES (?, ?)').run(8, 'r'));

    const tally = new DriverTally();
    const counted = wrapBetterSqlite3(open(), tally);
    const stmt = counted.prepare('INSERT INTO t (id, a) VALUES (?, ?)');
    stmt.run(1, 1);
    let thrown: unknown;
    try {
      stmt.run(1, 2);
    } catch (error) {
      thrown = error;
    }
    // Not toBeInstanceOf: the native addon keeps the SqliteError class of the first test file that loaded it in this
    // worker, and Jest gives every file its own module registry, so the classes differ across files in one run.
    expect((thrown as Error).constructor.name).toBe(Database.SqliteError.name);
    expect((thrown as { code?: string }).code).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
    const last = tally.events.at(-1)!;
    expect(last.error).toBe((thrown as Error).message);
    expect(last.rowsAffected).toBeNull();

    // A JavaScript error raised inside SQLite comes back as the very same instance.
    const boom = new Error('from a user function');
    counted.function('fail', () => {
      throw boom;
    });
    expect(() => counted.prepare('SELECT fail()').get()).toThrow(boom);
    expect(tally.events.at(-1)).toMatchObject({ method: 'get', error: 'from a user function' });

    let prepareError: unknown;
    try {
      counted.prepare('INSERT INTO nope VALUES (1)');
    } catch (error) {
      prepareError = error;
    }
    expect((prepareError as Error).message).toMatch(/no such table/);
    expect(tally.events.at(-1)).toMatchObject({ kind: 'prepare', error: (prepareError as Error).message });
  });

  it('keeps the TypeScript type, instanceof, properties and chaining', () => {
    const raw = open();
    const db: Database.Database = wrapBetterSqlite3(raw, new DriverTally());
    expect(db instanceof Database).toBe(true);
    expect(db.open).toBe(true);
    expect(db.name).toBe(':memory:');
    const stmt = db.prepare('SELECT a FROM t');
    expect(stmt.source).toBe('SELECT a FROM t');
    expect(stmt.reader).toBe(true);
    // `pluck()` returns its statement: the wrapper must come back, still counted.
    expect(stmt.pluck()).toBe(stmt);
    expect(db.exec('SELECT 1')).toBe(db);
    // Read-only and non-configurable on the statement, so the Proxy must hand out the raw Database.
    expect(stmt.database).toBe(raw);
  });

  it('counts a statement in place: the driver class, its getters, every arity and argument mix', () => {
    const raw = open();
    raw.exec('CREATE TABLE w (a, b, c, d, e, f, g, h, i)');
    const rawStatement = raw.prepare('SELECT 1');
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(raw, tally);
    const stmt = db.prepare('SELECT ?');
    // Still the driver's Statement: same class, its accessors answer, and a raw statement stays uncounted.
    expect(stmt).toBeInstanceOf(rawStatement.constructor);
    expect(stmt.busy).toBe(false);
    expect(stmt.columns().map((c) => c.name)).toEqual(['?']);
    const before = tally.size;
    rawStatement.get();
    expect(tally.size).toBe(before);
    for (let n = 0; n <= 9; n++) {
      const values = Array.from({ length: n }, (_, i) => (i % 3 === 2 ? null : i % 3 === 1 ? `v${i}` : i + 0.5));
      const sql =
        n === 0
          ? 'INSERT INTO w DEFAULT VALUES'
          : `INSERT INTO w (${'abcdefghi'.slice(0, n).split('').join(', ')}) VALUES (${values.map(() => '?').join(', ')})`;
      const insert = db.prepare(sql);
      expect(insert.run(...values)).toMatchObject({ changes: 1 });
      expect(tally.events.at(-1)).toMatchObject({ method: 'run', bindValues: n, rowsAffected: 1, error: null });
    }
    // Scalars mixed with an array and a named object (better-sqlite3 binds them all): 1 + 2 + 1.
    db.prepare('INSERT INTO w (a, b, c, d) VALUES (?, ?, ?, @d)').run(1, [2, 3], { d: 4 });
    expect(tally.events.at(-1)).toMatchObject({ bindValues: 4, rowsAffected: 1 });
    // The wrong number of values: the driver's own error, recorded with the count that was handed over.
    expect(() => db.prepare('INSERT INTO w (a) VALUES (?)').run(1, 2)).toThrow(/Too many parameter values/);
    expect(tally.events.at(-1)).toMatchObject({ bindValues: 2, rowsAffected: null, error: expect.stringMatching(/Too many parameter values/) });
    // A statement of a second database, counted into another sink, is its own.
    const other = new DriverTally();
    const second = wrapBetterSqlite3(open(), other);
    second.prepare('SELECT ?').get(1);
    expect(brief(other.events)).toEqual(['prepare/prepare/select/0/0/null', 'get/execute/select/1/1/null']);
    expect(stmt.get(7)).toEqual({ '?': 7 });
    expect(tally.events.at(-1)).toMatchObject({ method: 'get', bindValues: 1 });
  });

  it('does not count twice when wrapped twice, and refuses a second sink', () => {
    const tally = new DriverTally();
    const raw = open();
    const once = wrapBetterSqlite3(raw, tally);
    const twice = wrapBetterSqlite3(once, tally);
    const again = wrapBetterSqlite3(raw, tally);
    expect(twice).toBe(once);
    expect(again).toBe(once);
    expect((once as unknown as Record<symbol, unknown>)[WRAPPED]).toMatchObject({ driver: 'better-sqlite3', sink: tally });
    twice.prepare('SELECT 1').get();
    expect(tally.size).toBe(2);
    expect(() => wrapBetterSqlite3(once, new DriverTally())).toThrow(SqltallyError);
  });

  it('counts values bound with bind() on later executions', () => {
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(open(), tally);
    const stmt = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)').bind(1, 'x');
    stmt.run();
    expect(tally.events.at(-1)).toMatchObject({ method: 'run', bindValues: 2, rowsAffected: 1 });
  });

  it('records the transaction BEGIN and COMMIT around the counted body', () => {
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(open(), tally);
    const insert = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
    const mark = tally.mark();
    const insertMany = db.transaction((rows: [number, string][]) => {
      for (const r of rows) insert.run(r);
      return rows.length;
    });
    expect(
      insertMany([
        [1, 'a'],
        [2, 'b'],
        [3, 'c'],
      ]),
    ).toBe(3);
    // better-sqlite3 sets `database` on transaction functions; its typings omit it.
    expect((insertMany as unknown as { database: unknown }).database).toBe(db);
    expect(brief(tally.since(mark))).toEqual([
      'transaction/query/begin/0/1/null',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
      'run/execute/insert/2/1/1',
      'transaction/query/commit/0/1/null',
    ]);
    const immediate = tally.mark();
    insertMany.immediate([[4, 'd']]);
    expect(tally.since(immediate).map((e) => e.sql)).toEqual(['BEGIN IMMEDIATE', 'INSERT INTO t (a, b) VALUES (?, ?)', 'COMMIT']);
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(4);
  });

  it('records a ROLLBACK and rethrows the same error when the body throws; nested ones use savepoints', () => {
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(open(), tally);
    const insert = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
    const boom = new Error('boom');
    const failing = db.transaction(() => {
      insert.run(1, 'a');
      throw boom;
    });
    const mark = tally.mark();
    expect(() => failing()).toThrow(boom);
    expect(tally.since(mark).map((e) => e.statementClass)).toEqual(['begin', 'insert', 'rollback']);
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(0);

    const inner = db.transaction(() => insert.run(2, 'b'));
    const outer = db.transaction(() => inner());
    const nested = tally.mark();
    outer();
    expect(tally.since(nested).map((e) => `${e.statementClass}:${e.sql.split(' ')[0]}`)).toEqual([
      'begin:BEGIN',
      'savepoint:SAVEPOINT',
      'insert:INSERT',
      'savepoint:RELEASE',
      'commit:COMMIT',
    ]);
  });

  it('records iterate when the iterator is created', () => {
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(open(), tally);
    db.prepare('INSERT INTO t (a) VALUES (1), (2)').run();
    const seen = [...db.prepare('SELECT a FROM t').pluck().iterate()];
    expect(seen).toEqual([1, 2]);
    expect(tally.events.at(-1)).toMatchObject({ method: 'iterate', kind: 'execute', rowsAffected: null });
  });

  it('labels events with the connection id given in options', () => {
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(open(), tally, { connectionId: 7 });
    db.exec('SELECT 1');
    expect(tally.events[0]!.connectionId).toBe(7);
  });
});

describe('wrapBetterSqlite3 values and windows', () => {
  it('counts more than 8 scalars, mixed forms and bound values the same way on every path', () => {
    const raw = new Database(':memory:');
    raw.exec('CREATE TABLE w (a, b, c, d, e, f, g, h, i, j)');
    const tally = new DriverTally();
    const db = wrapBetterSqlite3(raw, tally);
    const ten = db.prepare('INSERT INTO w VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
    ten.run(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    ten.run([1, 2, 3, 4, 5], 6, 7, 8, 9, 10);
    ten.run(1, 2, 3, 4, 5, 6, 7, [8, 9, 10]);
    const named = db.prepare('INSERT INTO w (a, b) VALUES (@a, @b)');
    named.run({ a: 1, b: 2 });
    const bound = db.prepare('SELECT ? + ?').bind(1, 2);
    bound.get();
    expect(tally.events.filter((e) => e.kind === 'execute').map((e) => `${e.method}:${e.bindValues}`)).toEqual([
      'run:10',
      'run:10',
      'run:10',
      'run:2',
      'get:2',
    ]);
    expect(raw.prepare('SELECT count(*) AS n FROM w').get()).toEqual({ n: 4 });
  });

  it('hands values over for the first 64 calls of each window only, and again in the next window', () => {
    const seen: boolean[] = [];
    let epoch = 0;
    const sink = {
      record: (_d: unknown, _s: unknown, _a: number, _b: number, _r: unknown, _e: unknown, _c: unknown, values?: unknown) =>
        void seen.push(values !== undefined),
      get epoch() {
        return epoch;
      },
      timed: false,
    };
    const db = wrapBetterSqlite3(open(), sink);
    const insert = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
    for (let i = 0; i < 100; i++) insert.run(i, 'x');
    epoch++;
    for (let i = 0; i < 10; i++) insert.run(i, 'y');
    // The prepare hands none (it binds nothing); then 64 of the first window's 100 runs, then the new window's.
    expect(seen.slice(1).filter(Boolean)).toHaveLength(64 + 10);
    expect(seen.slice(1, 65).every(Boolean)).toBe(true);
    expect(seen.slice(65, 101).some(Boolean)).toBe(false);
  });
});

/** The line this helper is called from, read the same way captureCaller reads lines. */
function lineHere(): number {
  const frame = new Error().stack!.split('\n')[2]!;
  return Number(/:(\d+):\d+\)?$/.exec(frame)![1]);
}

/** Stacks captured while `fn` runs (a caller capture takes one, plus one to print a position new to the process). */
function stacksTaken<T>(fn: () => T): { result: T; stacks: number } {
  const original = Error.captureStackTrace;
  let stacks = 0;
  const spy = jest.spyOn(Error, 'captureStackTrace').mockImplementation((target, at) => {
    stacks++;
    original(target, at);
  });
  try {
    return { result: fn(), stacks };
  } finally {
    spy.mockRestore();
  }
}

describe('wrapBetterSqlite3 callers', () => {
  const here = (line: number): RegExp => new RegExp(`^src/driver/better-sqlite3\\.test\\.ts:${line}:\\d+$`);

  it("gives a transaction's BEGIN and COMMIT the line that called it, from one capture, and a prepared text its prepare's", () => {
    const recorder = new DriverRecorder();
    const db = wrapBetterSqlite3(open(), recorder);
    const window = (): { callers: Record<string, string | null>; prepareLine: number; transactionLine: number } => {
      recorder.begin();
      const [insert, prepareLine] = [db.prepare('INSERT INTO t (a, b) VALUES (?, ?)'), lineHere()];
      const insertAll = db.transaction((n: number) => {
        for (let i = 0; i < n; i++) insert.run(i, 'x');
      });
      const [, transactionLine] = [insertAll(3), lineHere()];
      const callers = Object.fromEntries(recorder.end().layer.shapes.map((s) => [`${s.kind} ${s.statementClass}`, s.caller]));
      return { callers, prepareLine, transactionLine };
    };
    window();
    // Positions printed once per process; from the second window on a caller is one stack: the prepare's and the
    // transaction's (two before: COMMIT had its own).
    const { result, stacks } = stacksTaken(window);
    expect(stacks).toBe(2);
    expect(result.callers['prepare insert']).toMatch(here(result.prepareLine));
    expect(result.callers['execute insert']).toBe(result.callers['prepare insert']);
    expect(result.callers['query begin']).toMatch(here(result.transactionLine));
    expect(result.callers['query commit']).toBe(result.callers['query begin']);
  });

  it("gives a rolled back transaction's statements and exec's text their own lines", () => {
    const recorder = new DriverRecorder();
    const db = wrapBetterSqlite3(open(), recorder);
    const failing = db.transaction(() => {
      throw new Error('body failed');
    });
    const nested = db.transaction(() => {
      try {
        failing();
      } catch {
        // rolled back to the savepoint
      }
    });
    recorder.begin();
    const [, execLine] = [db.exec('DELETE FROM t'), lineHere()];
    const [, nestedLine] = [nested(), lineHere()];
    const callers = Object.fromEntries(recorder.end().layer.shapes.map((s) => [s.fingerprint.split(' ')[0], s.caller]));
    expect(callers['DELETE']).toMatch(here(execLine));
    expect(callers['BEGIN']).toMatch(here(nestedLine));
    expect(callers['COMMIT']).toBe(callers['BEGIN']);
    // The savepoint, its rollback and its release: the line in the outer body that called the failing transaction.
    const inner = callers['SAVEPOINT'];
    expect(inner).toMatch(/^src\/driver\/better-sqlite3\.test\.ts:\d+:\d+$/);
    expect(inner).not.toBe(callers['BEGIN']);
    expect([callers['ROLLBACK'], callers['RELEASE']]).toEqual([inner, inner]);
  });
});

describe('wrapBetterSqlite3 steady counting', () => {
  /** A window's totals, times and callers left out; the same with and without the sink's counters. */
  function counts(recorder: { end(): ReturnType<DriverRecorder['end']> }): unknown {
    const { layer, ...rest } = recorder.end();
    const { events, shapes, ...totals } = layer;
    return { totals, rest, shapes: shapes.map(({ caller, ...shape }) => shape), events: events.map((e) => `${e.method}/${e.rowsAffected}/${e.error}`) };
  }

  /** A recorder that hands out no counters: every call goes through record, as before counters. */
  function withoutCounters(recorder: DriverRecorder): DriverRecorder {
    return new Proxy(recorder, {
      get: (target, prop) => {
        if (prop === 'steadyCounter') return undefined;
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as DriverRecorder;
  }

  function workload(db: Database.Database, recorder: DriverRecorder): unknown[] {
    db.exec('CREATE TABLE s (id INTEGER PRIMARY KEY, b TEXT)');
    const insert = db.prepare('INSERT INTO s (id, b) VALUES (?, ?)');
    const select = db.prepare('SELECT b FROM s WHERE id = ?');
    const out: unknown[] = [];
    recorder.begin();
    db.transaction(() => {
      for (let i = 0; i < 500; i++) insert.run(i, 'x');
    })();
    for (let i = 0; i < 300; i++) select.get(i % 7);
    // A failing call once the statement is counted by the counter: an error, no rows.
    expect(() => insert.run(1, 'again')).toThrow(/UNIQUE/);
    for (let i = 500; i < 600; i++) insert.run(i, 'y');
    out.push(counts(recorder));
    // Between windows nothing counts; the next window starts over (events, values compared, then the counter).
    for (let i = 600; i < 700; i++) insert.run(i, 'z');
    recorder.begin();
    for (let i = 700; i < 1000; i++) insert.run(i, 'w');
    // Replaced unread: the calls after this count in the new window only.
    recorder.begin();
    for (let i = 1000; i < 1300; i++) insert.run(i, 'v');
    out.push(counts(recorder));
    return out;
  }

  itOnFastPath('counts every call, row, value and error as record does once the window keeps nothing else of them', () => {
    // Counters are asked for once the process has sent enough calls through record for V8 to have optimized it.
    const warm = wrapBetterSqlite3(open(), new DriverTally()).prepare('SELECT 1');
    for (let i = 0; i < CALLS_BEFORE_COUNTERS; i++) warm.get();
    const recorder = new DriverRecorder({ maxEvents: 50 });
    const reference = new DriverRecorder({ maxEvents: 50 });
    const records = jest.spyOn(recorder, 'record');
    const counted = workload(wrapBetterSqlite3(new Database(':memory:'), recorder), recorder);
    const expected = workload(wrapBetterSqlite3(new Database(':memory:'), withoutCounters(reference)), reference);
    expect(counted).toEqual(expected);
    expect(expected[0]).toMatchObject({ totals: { calls: 903, errors: 1, rowsAffected: 600 } });
    expect(expected[1]).toMatchObject({ totals: { calls: 300, rowsAffected: 300 }, shapes: [{ calls: 300, distinctParameterSets: 64, distinctOf: 64 }] });
    // The counter took most calls: record saw each window's first calls, the error and the calls between windows.
    expect(records.mock.calls.length).toBeLessThan(600);
  });
});

describe('countSqliteParams', () => {
  it('counts scalars, array elements and named keys', () => {
    expect(countSqliteParams([])).toBe(0);
    expect(countSqliteParams([1, 'a', null])).toBe(3);
    expect(countSqliteParams([[1, 2, 3]])).toBe(3);
    expect(countSqliteParams([{ a: 1, b: 2 }])).toBe(2);
    expect(countSqliteParams([1, [2, 3], { c: 4 }, Buffer.from('x')])).toBe(5);
  });
});
