import { DriverRecorder } from './driver-layer';
import pg from 'pg';
import { wrapPg } from './pg';
import { ownPromiseMismatch } from './compat/pg';

type Callback = (error: Error | null, result?: unknown) => void;
type Config = { text: string; values?: unknown[]; callback?: Callback };

/**
 * A Client whose `query` builds its promise as pg 8.x does and writes `values` and `callback` onto a given config as
 * pg up to 8.23.0 did. `restacks`: re-captures a failed query's stack, as pg 8.12 on does. `fails`: answers `failure`.
 */
function olderPgClient({ fails = false, restacks = true } = {}) {
  const answered: Config[] = [];
  const failure = new Error('boom');
  // normalizeQueryConfig, writing onto the caller's object; then the Query, an object of its own.
  const begin = (config: string | Config, values?: unknown[] | Callback, callback?: Callback): Config => {
    const normal: Config = typeof config === 'string' ? { text: config } : config;
    if (typeof values === 'function') normal.callback = values;
    else if (values) normal.values = values;
    if (callback) normal.callback = callback;
    return { ...normal };
  };
  const answer = (q: Config): void => {
    const done = q.callback!;
    answered.push(q);
    queueMicrotask(() => (fails ? done(failure) : done(null, { command: 'SELECT', rowCount: 1, rows: [{ n: 1 }] })));
  };
  // Two functions, not one with a branch: the wrapper reads `query`'s text for the re-capture.
  function restacking(this: { _Promise: PromiseConstructor }, config: string | Config, values?: unknown[] | Callback, callback?: Callback) {
    const q = begin(config, values, callback);
    let result: Promise<unknown> | undefined;
    if (!q.callback) {
      result = new this._Promise((resolve, reject) => {
        q.callback = (err, res) => (err ? reject(err) : resolve(res));
      }).catch((err: Error) => {
        Error.captureStackTrace(err);
        throw err;
      });
    }
    answer(q);
    return result;
  }
  function plain(this: { _Promise: PromiseConstructor }, config: string | Config, values?: unknown[] | Callback, callback?: Callback) {
    const q = begin(config, values, callback);
    let result: Promise<unknown> | undefined;
    if (!q.callback) {
      result = new this._Promise((resolve, reject) => {
        q.callback = (err, res) => (err ? reject(err) : resolve(res));
      });
    }
    answer(q);
    return result;
  }
  return { answered, failure, processID: 4, _Promise: Promise, connect: (): Promise<void> => Promise.resolve(), query: restacks ? restacking : plain };
}

describe('pg promise-form calls, made through the callback form', () => {
  it('leave a config object as pg leaves it: a reused config is not handed our callback', async () => {
    const recorder = new DriverRecorder();
    const raw = olderPgClient();
    const counted = wrapPg(olderPgClient(), recorder);
    recorder.begin();
    for (const client of [raw, counted]) {
      const reused: Config = { text: 'SELECT 1 AS n' };
      // Before the config was put back, the second call found our first callback on it, and pg returned no promise.
      expect(await client.query(reused)).toMatchObject({ rows: [{ n: 1 }] });
      expect(await client.query(reused)).toMatchObject({ rows: [{ n: 1 }] });
      expect(Object.keys(reused)).toEqual(['text']);
      const apart: Config = { text: 'SELECT $1::int AS n' };
      await client.query(apart, [1]);
      expect(Object.keys(apart)).toEqual(['text', 'values']);
    }
    const { layer } = recorder.end();
    expect(layer.calls).toBe(3);
    expect(layer.bindValues).toBe(1);
  });

  it("settle the caller's promise with the driver's error, counted as failed, and re-capture its stack", async () => {
    const recorder = new DriverRecorder();
    const client = olderPgClient({ fails: true });
    const counted = wrapPg(client, recorder);
    recorder.begin();
    const error = await (counted.query('SELECT 1') as Promise<unknown>).then(
      () => null,
      (e: unknown) => e as Error,
    );
    const { layer } = recorder.end();
    expect(error?.message).toBe('boom');
    expect(layer).toMatchObject({ calls: 1, errors: 1 });
    // Taken where the caller awaited: this file, with none of sqltally's frames on top.
    expect(error?.stack).toContain('pg.test.ts');
    expect(error?.stack?.split('\n')[1] ?? '').not.toMatch(/counters[\\/]driver[\\/]pg\.ts/);
  });

  it("re-capture a failed query's stack only where the client's own query does (pg 8.11 does not)", async () => {
    for (const restacks of [true, false]) {
      const client = olderPgClient({ fails: true, restacks });
      const stackAtFailure = client.failure.stack;
      const error = await (wrapPg(client, new DriverRecorder()).query('SELECT 1') as Promise<unknown>).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error).toBe(client.failure);
      expect(error!.stack === stackAtFailure).toBe(!restacks);
    }
  });

  it('keep their own promise, chained, when query builds it another way (a spy, another release)', async () => {
    const recorder = new DriverRecorder();
    const client = olderPgClient();
    const own = client.query;
    // A wrapper of query that does not read as pg's: its promise is the driver's own, chained by the counting.
    const spied = Object.assign(client, { query: (...a: unknown[]) => own.apply(client, a as never) });
    const counted = wrapPg(spied, recorder);
    recorder.begin();
    await counted.query({ text: 'SELECT 1' });
    expect(recorder.end().layer.calls).toBe(1);
    // The config went to pg with no callback of ours: the driver built its own promise.
    expect(client.answered).toHaveLength(1);
    expect(client.answered[0]!.callback).toBeInstanceOf(Function);
    expect(client.answered[0]!.callback!.toString()).toContain('reject');
  });
});

// The fast path is taken only where the driver's code reads as expected: the installed pg must, or an upgrade has
// quietly put every promise-form call back on the chained path.
it("the installed pg's Client and Pool build the promise throughCallback replaces", () => {
  expect(ownPromiseMismatch(new pg.Client() as never, false)).toEqual({ own: { Promise, restacks: true } });
  const pool = new pg.Pool();
  expect(ownPromiseMismatch(pool as never, true)).toEqual({ own: { Promise, restacks: true } });
  void pool.end();
});
