import { DriverRecorder } from './driver-layer';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { prepareBypassesCache, wrapMysql2 } from './mysql2';
import { readsCore } from './compat/mysql2';
import { PromiseConnection, type Mysql2Callback } from './mysql2.fixture';

const HEADER = { fieldCount: 0, affectedRows: 2, insertId: 0 };

/**
 * A promise connection built as mysql2 3.x builds its own, over a callback connection that answers on the next
 * microtask. `calls` lists what reached the callback connection.
 */
function promiseConnection(fails = false) {
  const calls: string[] = [];
  const core = {
    threadId: 12,
    config: { trace: false },
    query(sql: string, values: unknown, cb?: Mysql2Callback): void {
      calls.push(sql);
      const done = typeof values === 'function' ? (values as Mysql2Callback) : cb!;
      queueMicrotask(() => (fails ? done(new Error('ER_NO_SUCH_TABLE')) : done(null, HEADER, undefined)));
    },
    execute(sql: string, values: unknown, cb?: Mysql2Callback): void {
      this.query(sql, values, cb);
    },
    promise: (): unknown => undefined,
  };
  return { connection: new PromiseConnection(core), calls };
}

describe('mysql2 promise query and execute, counted on the callback connection underneath', () => {
  it('count each call once, with its rows, thread id and caller, and hand back what mysql2 resolves', async () => {
    const { connection, calls } = promiseConnection();
    const recorder = new DriverRecorder();
    const counted = wrapMysql2(connection, recorder);
    recorder.begin();
    expect(
      await counted.query('INSERT INTO t VALUES ?', [
        [
          [1, 'a'],
          [2, 'b'],
        ],
      ]),
    ).toEqual([HEADER, undefined]);
    await counted.execute('INSERT INTO t VALUES (?, ?), (?, ?)', [3, 'c', 4, 'd']);
    const { layer } = recorder.end();
    expect(calls).toEqual(['INSERT INTO t VALUES ?', 'INSERT INTO t VALUES (?, ?), (?, ?)']);
    expect(layer).toMatchObject({ calls: 2, bindValues: 8, rowsAffected: 4, byKind: { query: 1, execute: 1 } });
    expect(layer.events.map((e) => e.connectionId)).toEqual([12, 12]);
    expect(layer.shapes.map((s) => s.caller)).toEqual([expect.stringMatching(/mysql2\.test\.ts:\d+:\d+$/), expect.stringMatching(/mysql2\.test\.ts:\d+:\d+$/)]);
    // The raw objects are untouched: no property of ours on the connection or the one underneath.
    expect(Object.keys(connection).sort()).toEqual(['Promise', 'connection']);
    expect(Object.keys(connection.connection)).toEqual(['threadId', 'config', 'query', 'execute', 'promise']);
  });

  it("reject with the callback connection's error, counted as failed", async () => {
    const recorder = new DriverRecorder();
    const counted = wrapMysql2(promiseConnection(true).connection, recorder);
    recorder.begin();
    await expect(counted.query('SELECT * FROM nowhere')).rejects.toThrow('ER_NO_SUCH_TABLE');
    expect(recorder.end().layer).toMatchObject({ calls: 1, errors: 1 });
  });

  it('keep their own promise, chained, where the method does not read as mysql2 (a spy)', async () => {
    const { connection, calls } = promiseConnection();
    const own = connection.query;
    connection.query = (sql: string, params?: unknown) => own.call(connection, sql, params);
    const recorder = new DriverRecorder();
    const counted = wrapMysql2(connection, recorder);
    recorder.begin();
    await counted.query('SELECT 1');
    await counted.execute('SELECT 2');
    // Counted once each: the spy's query by the chain, execute through the callback connection.
    expect(recorder.end().layer.calls).toBe(2);
    expect(calls).toEqual(['SELECT 1', 'SELECT 2']);
  });
});

// The view is used only where mysql2's code reads as expected: the installed mysql2 must, or an upgrade has quietly
// put every promise call back on the chained path.
it("the installed mysql2's promise methods read as the counted view expects", () => {
  // Not among the package's exports: read from its folder, as mysql2's own promise prepare() loads it.
  const statementFile = path.join(path.dirname(require.resolve('mysql2')), 'lib', 'promise', 'prepared_statement_info.js');

  const statementInfo = require(statementFile) as { prototype: { execute: unknown } };
  const { PromiseConnection, PromisePool } = mysql as unknown as Record<
    'PromiseConnection' | 'PromisePool',
    { prototype: Record<'query' | 'execute', unknown> }
  >;
  expect([
    readsCore(PromiseConnection.prototype.query, 'connection'),
    readsCore(PromiseConnection.prototype.execute, 'connection'),
    readsCore(PromisePool.prototype.query, 'pool'),
    readsCore(PromisePool.prototype.execute, 'pool'),
    readsCore(statementInfo.prototype.execute, 'statement'),
  ]).toEqual([true, true, true, true, true]);
});

describe('prepareBypassesCache', () => {
  it('is true from mysql2 3.25.0 (prepare() sets no useCache), false before, null for a version not known', () => {
    expect(['3.11.5', '3.24.6', '3.24.5-canary.b1c39c8', '2.3.3'].map(prepareBypassesCache)).toEqual([false, false, false, false]);
    expect(['3.25.0', '3.26.1', '3.30.0', '4.0.0'].map(prepareBypassesCache)).toEqual([true, true, true, true]);
    expect([null, 'next'].map(prepareBypassesCache)).toEqual([null, null]);
  });
});
