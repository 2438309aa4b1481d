/**
 * Stand-ins for network drivers' objects whose calls settle at once, recognised by sqltally's wrappers as the real
 * ones by shape: what counting a network driver's call adds (its values counted, a text new to the window classified
 * and its caller captured, the event), measured where a real call's formatting and I/O would hide it. One place for
 * every bench that needs them (driver-overhead, driver-cpu, driver-jest).
 */
import { format as mysql2Format } from 'mysql2';

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
 * A mysql2 promise connection built as mysql2 3.x builds its own (`lib/promise/connection.js`): `query` and `execute`
 * make one promise and hand a callback to the callback connection underneath (`connection`), which answers on the
 * next microtask, as mysql2 does from its socket. With `formats`, that connection formats the values into the SQL
 * text with mysql2's own `format` (sql-escaper) before it answers, as the real `query()` does before it returns, so
 * counting is measured beside the work the real call does anyway. `prepare` hands out a statement whose `execute`
 * settles at once.
 */
export function mysql2StandIn(opts: { formats?: boolean } = {}): Mysql2StandIn {
  type Callback = (error: Error | null, rows?: unknown, fields?: unknown) => void;
  const answer = (cb: Callback): void => queueMicrotask(() => cb(null, RESULT_SET_HEADER, undefined));
  const core = {
    threadId: 1,
    config: {},
    query(sql: string, values: unknown, cb?: Callback): void {
      const done = typeof values === 'function' ? (values as Callback) : cb!;
      if (opts.formats && mysql2Format(sql, values as never).length < 0) throw new Error('never');
      answer(done);
    },
    execute(_sql: string, values: unknown, cb?: Callback): void {
      answer(typeof values === 'function' ? (values as Callback) : cb!);
    },
    promise: (): unknown => connection,
  };
  const settled = (): Promise<unknown> => Promise.resolve([RESULT_SET_HEADER, undefined]);
  // mysql2's PromisePreparedStatementInfo over the callback statement, as `lib/promise/prepared_statement_info.js`.
  class PromisePreparedStatementInfo {
    statement = { _connection: core, execute: (_values: unknown, cb: Callback): void => answer(cb), close: (): void => undefined };
    Promise = Promise;
    execute(parameters?: unknown): Promise<unknown> {
      const s = this.statement;
      return new this.Promise((resolve, reject) => {
        const done: Callback = (err, rows, fields) => (err ? reject(err) : resolve([rows, fields]));
        s.execute(parameters, done);
      });
    }
    close(): void {
      this.statement.close();
    }
  }
  const statement = new PromisePreparedStatementInfo();
  class PromiseConnection {
    connection = core;
    Promise = Promise;
    query(sql: string, params?: unknown): Promise<unknown> {
      const c = this.connection;
      return new this.Promise((resolve, reject) => {
        const done: Callback = (err, rows, fields) => (err ? reject(err) : resolve([rows, fields]));
        if (params !== undefined) c.query(sql, params, done);
        else c.query(sql, done);
      });
    }
    execute(sql: string, params?: unknown): Promise<unknown> {
      const c = this.connection;
      return new this.Promise((resolve, reject) => {
        const done: Callback = (err, rows, fields) => (err ? reject(err) : resolve([rows, fields]));
        if (params !== undefined) c.execute(sql, params, done);
        else c.execute(sql, done);
      });
    }
    prepare(): Promise<typeof statement> {
      return Promise.resolve(statement);
    }
    beginTransaction = settled;
    commit = settled;
    rollback = settled;
  }
  const connection = new PromiseConnection();
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
