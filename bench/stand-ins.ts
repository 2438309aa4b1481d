/**
 * Stand-ins for network drivers' objects whose calls settle at once, recognised by sqltally's wrappers as the real
 * ones by shape: what counting a network driver's call adds (its values counted, a text new to the window classified
 * and its caller captured, the event), measured where a real call's formatting and I/O would hide it. One place for
 * every bench that needs them (driver-overhead, driver-cpu, driver-jest).
 */
import { format as mysql2Format } from 'mysql2';
import { PromiseConnection, type Mysql2Callback } from '../counters/driver/mysql2.fixture';

/** The 2-value INSERT the per-call figures repeat, in each driver's placeholder style. */
export const STAND_IN_INSERT = { pg: 'INSERT INTO t (a, b) VALUES ($1, $2)', mysql2: 'INSERT INTO t (a, b) VALUES (?, ?)' } as const;

export const RESULT_SET_HEADER = { fieldCount: 0, affectedRows: 1, insertId: 0, info: '', serverStatus: 2, warningStatus: 0, changedRows: 0 };

export interface Mysql2StandIn {
  query(sql: string, values?: unknown): Promise<unknown>;
  execute(sql: string, values?: unknown): Promise<unknown>;
  prepare(sql: string): Promise<{ execute(values: unknown[]): Promise<unknown>; close(): void }>;
}

export interface PgStandIn {
  query(sql: string, values?: unknown[]): Promise<unknown>;
}

export interface Mysql2CallbackStandIn {
  query(sql: string, values: unknown, cb: (error: Error | null, result?: unknown) => void): void;
}

/**
 * A mysql2 promise connection built as mysql2 3.x builds its own (counters/driver/mysql2.fixture.ts): `query`,
 * `execute` and a prepared statement's `execute` make one promise and hand a callback to the callback connection
 * underneath, which answers on the next microtask, as mysql2 does from its socket. With `formats`, that connection
 * formats the values into the SQL text with mysql2's own `format` (sql-escaper) before it answers, as the real
 * `query()` does before it returns, so counting is measured beside the work the real call does anyway.
 */
export function mysql2StandIn(opts: { formats?: boolean } = {}): Mysql2StandIn {
  const answer = (cb: Mysql2Callback): void => queueMicrotask(() => cb(null, RESULT_SET_HEADER, undefined));
  const core = {
    threadId: 1,
    config: {},
    query(sql: string, values: unknown, cb?: Mysql2Callback): void {
      if (opts.formats && mysql2Format(sql, values as never).length < 0) throw new Error('never');
      answer(typeof values === 'function' ? (values as Mysql2Callback) : cb!);
    },
    execute(_sql: string, values: unknown, cb?: Mysql2Callback): void {
      answer(typeof values === 'function' ? (values as Mysql2Callback) : cb!);
    },
    promise: (): unknown => connection,
  };
  const settled = (): Promise<void> => Promise.resolve();
  const connection = Object.assign(new PromiseConnection(core), { beginTransaction: settled, commit: settled, rollback: settled });
  return connection as unknown as Mysql2StandIn;
}

/**
 * A pg `Client` answering on the next microtask, as pg does from its socket. Its promise form is built as pg 8.23
 * builds its own (`Client#query`): a promise the query's callback settles, then a `.catch` that re-captures a failed
 * query's stack. Its callback form makes no promise. A wrapper that counts through either form is then measured
 * against what pg really allocates.
 */
export function pgStandIn(): PgStandIn {
  type Callback = (error: Error | null, result?: unknown) => void;
  const result = { command: 'INSERT', rowCount: 1, rows: [] };
  const answer = (done: Callback): void => queueMicrotask(() => done(null, result));
  function query(this: { _Promise: PromiseConstructor }, _config: unknown, values?: unknown, callback?: Callback): Promise<unknown> | undefined {
    const cb = typeof values === 'function' ? (values as Callback) : callback;
    if (cb) {
      answer(cb);
      return undefined;
    }
    return new this._Promise((resolve, reject) => answer((err, res) => (err ? reject(err) : resolve(res)))).catch((err: Error) => {
      Error.captureStackTrace(err);
      throw err;
    });
  }
  return { processID: 1, _Promise: Promise, connect: (): Promise<void> => Promise.resolve(), query } as unknown as PgStandIn;
}

/** A mysql2 connection on the callback API (knex and kysely call it so), calling back on the next microtask. */
export function mysql2CallbackStandIn(): Mysql2CallbackStandIn {
  type Callback = (error: Error | null, result?: unknown) => void;
  return {
    query: (_s: string, _v: unknown, cb: Callback): void => queueMicrotask(() => cb(null, RESULT_SET_HEADER)),
    execute: (_s: string, _v: unknown, cb: Callback): void => queueMicrotask(() => cb(null, RESULT_SET_HEADER)),
    promise: (): unknown => ({}),
    threadId: 1,
  } as Mysql2CallbackStandIn;
}
