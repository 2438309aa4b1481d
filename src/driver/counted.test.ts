import { EventEmitter } from 'node:events';
import mysql2 from 'mysql2';
import { SqlLexer } from '../sql/tokenizer';
import { DriverRecorder, DriverTally } from './driver-layer';
import type { CallShape, CallSite } from './counted';
import { countedProxy, countExpandedValues, countParameterValues, memoShape, toCount, track, trackCallback, WRAPPED, wrapOnce } from './counted';
import { countBatch, mariadbRowsAffected } from './mariadb';
import { mysql2RowsAffected, wrapMysql2 } from './mysql2';
import { pgRowsAffected, wrapPg } from './pg';

const SHAPE: CallShape = { method: 'query', kind: 'query', sql: 'SELECT 1', statementClass: 'select', bindValues: 0, parameterSets: 1 };

function site(tally: DriverTally, id: number | null = 9): CallSite {
  return { driver: 'mysql2', sink: tally, connectionId: () => id };
}

describe('countExpandedValues (text protocol, client-side expansion)', () => {
  it('flattens nested arrays to their scalars', () => {
    expect(countExpandedValues(undefined)).toBe(0);
    expect(countExpandedValues([])).toBe(0);
    expect(countExpandedValues([1, 'a', null])).toBe(3);
    // mysql2 `VALUES ?` with rows: [[[1, 'a'], [2, 'b']]]
    expect(
      countExpandedValues([
        [
          [1, 'a'],
          [2, 'b'],
        ],
      ]),
    ).toBe(4);
    expect(countExpandedValues([[1, 2, 3], 4])).toBe(4);
    expect(countExpandedValues([[[[1]]]])).toBe(1);
  });

  it('counts one value per key of an object, and one for Buffers, Dates, bigints and toSqlString objects', () => {
    expect(countExpandedValues([{ a: 1, b: 2, c: 3 }])).toBe(3);
    expect(countExpandedValues({ id: 1, name: 'x' })).toBe(2);
    expect(countExpandedValues([{ id: 1, name: 'x', toJSON: () => 'skipped' }])).toBe(2);
    expect(countExpandedValues([Buffer.from('ab'), new Date(0), 5n, { toSqlString: () => 'NOW()' }])).toBe(4);
    expect(countExpandedValues(7)).toBe(1);
  });

  it("counts an object among the values as one where the driver writes it as one string (mariadb's JSON)", () => {
    expect(countExpandedValues([1, { a: 1, b: 2 }], 'one')).toBe(2);
    expect(countExpandedValues([1, { a: 1, b: 2 }], 'keys')).toBe(3);
    // A plain object as the values is named placeholders for both drivers.
    expect(countExpandedValues({ a: 1, b: 2 }, 'one')).toBe(2);
  });

  it('counts an object inside a list as one value: the drivers write it as one string there', () => {
    expect(
      countExpandedValues([
        [
          [1, { a: 1, b: 2 }],
          [2, { a: 3, b: 4 }],
        ],
      ]),
    ).toBe(4);
    expect(countExpandedValues([[{ a: 1 }, new Date(0), Buffer.from('x')]])).toBe(3);
  });

  // The model against mysql2's own `format`, which writes each bound value as one literal, so its output's literals
  // are the values bound (a `toSqlString` value is raw SQL, checked above instead).
  it.each<[string, string, unknown[]]>([
    [
      'VALUES ? with rows of every scalar type',
      'INSERT INTO t VALUES ?',
      [
        [
          [1, 'a', null, 1.5, 5n, new Date(0)],
          [2, "b'c", Buffer.from('x'), true, false, -3],
        ],
      ],
    ],
    ['a flat list', 'INSERT INTO t VALUES (?, ?), (?, ?)', [1, 'a', 2, 'b']],
    ['SET ? skips function values', 'INSERT INTO t SET ?', [{ a: 1, b: 'x', c: null, f: () => 1 }]],
    ['an object inside a row', 'INSERT INTO t VALUES ?', [[[1, { a: 1, b: 2 }]]]],
    ['IN (?)', 'SELECT * FROM t WHERE id IN (?) AND k = ?', [[1, 2, 3], 'k']],
    [
      'a list nested in a row',
      'INSERT INTO t VALUES ?',
      [
        [
          [1, [2, 3]],
          [4, [5, [6]]],
        ],
      ],
    ],
  ])('agrees with mysql2 format: %s', (_form, sql, values) => {
    const formatted = mysql2.format(sql, values as never);
    const lexer = new SqlLexer(formatted, 'mysql');
    let literals = 0;
    for (let t = lexer.next(); t; t = lexer.next()) {
      if (t.type === 'string' || t.type === 'number' || (t.type === 'word' && ['NULL', 'TRUE', 'FALSE'].includes(t.value))) literals++;
    }
    expect(formatted).not.toContain('?');
    expect(countExpandedValues(values)).toBe(literals);
  });
});

describe('countParameterValues (binary protocol)', () => {
  it('counts top-level elements: an array parameter is one value', () => {
    expect(countParameterValues(undefined)).toBe(0);
    expect(countParameterValues([1, 2, 3])).toBe(3);
    expect(
      countParameterValues([
        [1, 2],
        ['a', 'b'],
      ]),
    ).toBe(2);
    expect(countParameterValues({ a: 1, b: 2 })).toBe(2);
    expect(countParameterValues(null)).toBe(1);
    expect(countParameterValues('x')).toBe(1);
  });
});

describe('countBatch (mariadb batch shapes)', () => {
  const sql2 = 'INSERT INTO t VALUES (?, ?)';
  const sql1 = 'INSERT INTO t VALUES (?) -- (?)';
  it('counts rows of arrays and rows of named objects', () => {
    expect(
      countBatch(sql2, [
        [1, 'a'],
        [2, 'b'],
        [3, 'c'],
      ]),
    ).toEqual({ parameterSets: 3, bindValues: 6 });
    expect(
      countBatch(sql2, [
        { a: 1, b: 2 },
        { a: 3, b: 4 },
      ]),
    ).toEqual({ parameterSets: 2, bindValues: 4 });
  });
  it('shapes a flat array like the connector: one row per value for one placeholder, else one row', () => {
    expect(countBatch(sql1, [1, 2, 3])).toEqual({ parameterSets: 3, bindValues: 3 });
    expect(countBatch(sql2, [1, 'a'])).toEqual({ parameterSets: 1, bindValues: 2 });
    expect(countBatch(sql2, 5)).toEqual({ parameterSets: 1, bindValues: 1 });
    expect(countBatch(sql2, [])).toEqual({ parameterSets: 0, bindValues: 0 });
  });
});

describe('rows affected', () => {
  it('reads mysql2 ResultSetHeaders and ignores row sets', () => {
    const header = { fieldCount: 0, affectedRows: 5, insertId: 1, info: '', serverStatus: 2, warningStatus: 0 };
    expect(mysql2RowsAffected(header)).toBe(5);
    expect(mysql2RowsAffected([header, [{ a: 1 }], { ...header, affectedRows: 2 }])).toBe(7);
    expect(mysql2RowsAffected([{ affectedRows: 1 }])).toBeNull();
    expect(mysql2RowsAffected([])).toBeNull();
  });
  it('reads mariadb OK packets with number or bigint counts', () => {
    expect(mariadbRowsAffected({ affectedRows: 3n, insertId: 0n, warningStatus: 0 })).toBe(3);
    expect(
      mariadbRowsAffected([
        { affectedRows: 1, insertId: 0, warningStatus: 0 },
        { affectedRows: 1, insertId: 0, warningStatus: 0 },
      ]),
    ).toBe(2);
    expect(mariadbRowsAffected(Object.assign([{ id: 1 }], { meta: [] }))).toBeNull();
  });
  it('reads pg rowCount only for INSERT/UPDATE/DELETE/MERGE', () => {
    expect(pgRowsAffected({ command: 'INSERT', rowCount: 4 })).toBe(4);
    expect(pgRowsAffected({ command: 'SELECT', rowCount: 4 })).toBeNull();
    expect(
      pgRowsAffected([
        { command: 'INSERT', rowCount: 1 },
        { command: 'SELECT', rowCount: 9 },
        { command: 'DELETE', rowCount: 2 },
      ]),
    ).toBe(3);
    expect(pgRowsAffected(undefined)).toBeNull();
  });
  it('never turns garbage into a count', () => {
    expect(toCount(-1)).toBeNull();
    expect(toCount(Number.NaN)).toBeNull();
    expect(toCount('3')).toBeNull();
    expect(toCount(2n)).toBe(2);
  });
});

describe('track', () => {
  it('records a resolved promise once, with integer ns times and the rows', async () => {
    const tally = new DriverTally();
    const value = { affected: 2 };
    const out = await track(
      site(tally),
      SHAPE,
      () => Promise.resolve(value),
      (v) => (v as typeof value).affected,
    );
    expect(out).toBe(value);
    expect(tally.events).toHaveLength(1);
    const [e] = tally.events;
    expect(e).toMatchObject({ rowsAffected: 2, error: null, connectionId: 9 });
    expect(Number.isInteger(e!.startNs) && Number.isInteger(e!.durationNs)).toBe(true);
  });

  it('rethrows the same error instance, sync or async, and records its message', async () => {
    const tally = new DriverTally();
    const boom = new Error('boom');
    expect(() =>
      track(
        site(tally),
        SHAPE,
        () => {
          throw boom;
        },
        () => 1,
      ),
    ).toThrow(boom);
    await expect(
      track(
        site(tally),
        SHAPE,
        () => Promise.reject(boom),
        () => 1,
      ),
    ).rejects.toBe(boom);
    expect(tally.events.map((e) => [e.error, e.rowsAffected])).toEqual([
      ['boom', null],
      ['boom', null],
    ]);
  });
});

describe('trackCallback', () => {
  it('records before the callback runs, with the same this and arguments', () => {
    const tally = new DriverTally();
    const seen: unknown[] = [];
    const receiver = { name: 'receiver' };
    const callback = function (this: unknown, ...args: unknown[]) {
      seen.push(this, tally.size, ...args);
    };
    trackCallback(
      site(tally),
      SHAPE,
      ['SELECT 1', callback],
      1,
      (...args) => {
        (args[1] as (...a: unknown[]) => void).call(receiver, null, { fieldCount: 0, affectedRows: 3, insertId: 0 }, 'fields');
      },
      mysql2RowsAffected,
    );
    expect(seen).toEqual([receiver, 1, null, { fieldCount: 0, affectedRows: 3, insertId: 0 }, 'fields']);
    expect(tally.events[0]!.rowsAffected).toBe(3);
  });

  it('reads the clock only while the sink keeps times, as track does', () => {
    const times: Array<[number, number]> = [];
    const sink = { timed: true, record: (_d: unknown, _s: unknown, start: number, end: number) => void times.push([start, end]) };
    const callSite: CallSite = { driver: 'mysql2', sink, connectionId: () => 1 };
    const call = (): unknown =>
      trackCallback(
        callSite,
        SHAPE,
        [() => undefined],
        0,
        (...args) => (args[0] as (e: null) => void)(null),
        () => null,
      );
    call();
    sink.timed = false;
    call();
    expect(times[0]![0]).toBeGreaterThan(0);
    expect(times[0]![1]).toBeGreaterThanOrEqual(times[0]![0]);
    // A sink that keeps no more times is handed none: no clock read at either edge of the call.
    expect(times[1]).toEqual([0, 0]);
  });
});

class Secretive extends EventEmitter {
  #secret = 41;
  get secret(): number {
    return this.#secret;
  }
  bump(): this {
    this.#secret++;
    return this;
  }
  read(): number {
    return this.#secret;
  }
}

describe('countedProxy', () => {
  it('keeps #private state, getters, chaining and EventEmitter behaviour working', () => {
    const tally = new DriverTally();
    const target = new Secretive();
    const mark = { driver: 'mysql2' as const, sink: tally, target };
    const proxy = countedProxy(target, mark, {
      read: (original) => () =>
        track(
          site(tally),
          SHAPE,
          () => original(),
          () => null,
        ),
    });
    expect(proxy.secret).toBe(41);
    expect(proxy.bump()).toBe(proxy);
    expect(proxy.read()).toBe(42);
    expect(tally.size).toBe(1);
    let heard = 0;
    proxy.on('x', () => heard++);
    target.emit('x');
    expect(heard).toBe(1);
    expect(proxy instanceof Secretive).toBe(true);
    expect((proxy as unknown as Record<symbol, unknown>)[WRAPPED]).toBe(mark);
    // Inherited members of the hooks object are not hooks.
    expect(String(proxy)).toBe(String(target));
    proxy.setMaxListeners(3);
    expect(target.getMaxListeners()).toBe(3);
  });

  it('returns read-only non-configurable functions untouched (Proxy invariant)', () => {
    const target = {};
    const frozen = (): number => 1;
    Object.defineProperty(target, 'frozen', { value: frozen, writable: false, configurable: false });
    const tally = new DriverTally();
    const proxy = countedProxy(target, { driver: 'pg', sink: tally, target }, {}) as { frozen: () => number };
    expect(proxy.frozen).toBe(frozen);
  });

  it('wrapOnce returns the same wrapper per sink and original', () => {
    const tally = new DriverTally();
    const target = new Secretive();
    let created = 0;
    const make = () => {
      created++;
      return countedProxy(target, { driver: 'mysql2', sink: tally, target }, {});
    };
    const a = wrapOnce('mysql2', target, tally, make);
    const b = wrapOnce('mysql2', target, tally, make);
    const c = wrapOnce('mysql2', a, tally, make);
    expect(b).toBe(a);
    expect(c).toBe(a);
    expect(created).toBe(1);
    const other = new DriverTally();
    expect(wrapOnce('mysql2', target, other, () => countedProxy(target, { driver: 'mysql2', sink: other, target }, {}))).not.toBe(a);
  });
});

describe('callers of network calls', () => {
  const OK = { fieldCount: 0, affectedRows: 1, insertId: 0 };
  const THIS_FILE = /^src\/driver\/counted\.test\.ts:\d+:\d+$/;

  it('are captured when the call is handed to the driver: a callback run from the event loop still names the line', async () => {
    // mysql2's callback API, as a stand-in: the callback runs later, from a stack that holds none of this file's frames.
    const connection = {
      threadId: 7,
      query(_sql: string, cb: (err: unknown, result?: unknown) => void): void {
        setImmediate(() => cb(null, OK));
      },
      execute(_sql: string, cb: (err: unknown, result?: unknown) => void): void {
        setImmediate(() => cb(null, OK));
      },
      prepare(): void {},
      promise(): object {
        return {};
      },
    };
    const recorder = new DriverRecorder();
    const counted = wrapMysql2(connection, recorder);
    recorder.begin();
    await new Promise((resolve, reject) => counted.query('INSERT INTO t VALUES (1)', (err: unknown) => (err ? reject(err) : resolve(null))));
    const [shape] = recorder.end().layer.shapes;
    expect(shape).toMatchObject({ calls: 1, rows: 1 });
    expect(shape!.caller).toMatch(THIS_FILE);
  });

  it('are captured once for calls of one text in flight together, asked once per shape and window', async () => {
    const client = {
      processID: 3,
      connect: (): Promise<void> => Promise.resolve(),
      query: (_sql: string, _values?: unknown[]): Promise<unknown> =>
        new Promise((resolve) => setImmediate(() => resolve({ command: 'INSERT', rowCount: 1, rows: [] }))),
    };
    const recorder = new DriverRecorder();
    const asked = jest.spyOn(recorder, 'needsCaller');
    const counted = wrapPg(client, recorder);
    recorder.begin();
    await Promise.all([1, 2, 3, 4, 5].map((id) => counted.query('INSERT INTO t VALUES ($1)', [id])));
    // The first call asked and was told to capture; the other four, the same shape in the same window, did not ask.
    expect(asked.mock.results.map((r) => r.value)).toEqual([true]);
    // Another shape of the text (two values, then one again) asks, and is told no: the text has its caller.
    await Promise.all([counted.query('INSERT INTO t VALUES ($1)', [6, 7]), counted.query('INSERT INTO t VALUES ($1)', [8])]);
    expect(asked.mock.results.map((r) => r.value)).toEqual([true, false, false]);
    const window = recorder.end();
    // A new window asks again, once.
    recorder.begin();
    await Promise.all([9, 10].map((id) => counted.query('INSERT INTO t VALUES ($1)', [id])));
    expect(asked.mock.results.map((r) => r.value)).toEqual([true, false, false, true]);
    expect(recorder.end().layer.shapes[0]!.caller).toMatch(THIS_FILE);
    expect(window.layer.shapes).toHaveLength(1);
    expect(window.layer.shapes[0]).toMatchObject({ calls: 7, rows: 7 });
    expect(window.layer.shapes[0]!.caller).toMatch(THIS_FILE);
  });
});

describe('mysql2 callback API, prepared statements', () => {
  it('hands the values of statement.execute(values, cb) to the window: different values are not duplicates', async () => {
    const OK_ROW = { fieldCount: 0, affectedRows: 1, insertId: 0 };
    const statement = {
      execute(_values: unknown[], cb: (err: unknown, result?: unknown) => void): void {
        setImmediate(() => cb(null, OK_ROW));
      },
      close(): void {},
    };
    const connection = {
      threadId: 7,
      query(): void {},
      execute(): void {},
      prepare(_sql: string, cb: (err: unknown, st?: unknown) => void): void {
        setImmediate(() => cb(null, statement));
      },
      promise(): object {
        return {};
      },
    };
    const recorder = new DriverRecorder();
    const counted = wrapMysql2(connection, recorder);
    recorder.begin();
    const st = await new Promise<typeof statement>((resolve, reject) =>
      counted.prepare('INSERT INTO t VALUES (?)', (err: unknown, s?: unknown) => (err ? reject(err) : resolve(s as typeof statement))),
    );
    for (const id of [1, 2, 2]) await new Promise((resolve, reject) => st.execute([id], (err: unknown) => (err ? reject(err) : resolve(null))));
    const execute = recorder.end().layer.shapes.find((s) => s.kind === 'execute');
    // Values 1, 2, 2: two distinct sets. The wrapper used to hand over `[id].values` (Array.prototype.values), a
    // function the window read as an empty list, so every call looked like the same set: one.
    expect(execute).toMatchObject({ calls: 3, distinctParameterSets: 2 });
  });
});

describe('memoShape', () => {
  it('hands the last shape out again while a call repeats it, and makes a new one when anything differs', () => {
    const memo = { last: null };
    const first = memoShape(memo, 'query', 'query', 'SELECT $1', 1, 1, 'postgres', 'extended');
    expect(first).toEqual({
      method: 'query',
      kind: 'query',
      sql: 'SELECT $1',
      statementClass: 'select',
      bindValues: 1,
      parameterSets: 1,
      protocol: 'extended',
    });
    // The same text as another string object: still the same shape.
    expect(memoShape(memo, 'query', 'query', ['SELECT', '$1'].join(' '), 1, 1, 'postgres', 'extended')).toBe(first);
    const others = [
      memoShape({ last: first }, 'query', 'query', 'SELECT $1', 2, 1, 'postgres', 'extended'),
      memoShape({ last: first }, 'query', 'query', 'SELECT $2', 1, 1, 'postgres', 'extended'),
      memoShape({ last: first }, 'query', 'query', 'SELECT $1', 1, 1, 'postgres', 'named'),
      memoShape({ last: first }, 'query', 'query', 'SELECT $1', 1, 1, 'postgres'),
      memoShape({ last: first }, 'execute', 'execute', 'SELECT $1', 1, 1, 'postgres', 'extended'),
      memoShape({ last: first }, 'query', 'query', 'SELECT $1', 1, 2, 'postgres', 'extended'),
    ];
    for (const other of others) expect(other).not.toBe(first);
    // A shape made without a protocol has no such key: the driver's model then gives a range.
    expect('protocol' in others[3]!).toBe(false);
  });
});
