/**
 * mysql2 3.x's promise wrappers as `lib/promise/connection.js` and `prepared_statement_info.js` build them, over a
 * callback connection of the caller's: `query` and `execute` make one `new this.Promise(...)` around a call of
 * `this.connection`, a prepared statement's `execute` one around `this.statement`. The unit tests of the wrapper and
 * the benches' stand-ins share it, so both meet the structure the wrapper reads (see compat/mysql2.ts).
 */
export type Mysql2Callback = (error: Error | null, rows?: unknown, fields?: unknown) => void;

/** The callback connection underneath: its `query` and `execute` answer through the callback, as mysql2's do. */
export interface CallbackCore {
  query(sql: string, values: unknown, cb?: Mysql2Callback): void;
  execute(sql: string, values: unknown, cb?: Mysql2Callback): void;
}

class PromisePreparedStatementInfo {
  constructor(
    public statement: { execute(values: unknown, cb: Mysql2Callback): void; close(): void },
    public Promise: PromiseConstructor,
  ) {}
  execute(parameters?: unknown): Promise<unknown> {
    const s = this.statement;
    return new this.Promise((resolve, reject) => {
      const done: Mysql2Callback = (err, rows, fields) => (err ? reject(err) : resolve([rows, fields]));
      s.execute(parameters, done);
    });
  }
  close(): void {
    this.statement.close();
  }
}

export class PromiseConnection<C extends CallbackCore> {
  Promise: PromiseConstructor = Promise;
  constructor(public connection: C) {}
  // Written out in each method, as mysql2 writes them: the wrapper reads a method's own text (`this.connection`,
  // `new this.Promise(`) before it runs it on the counted view, and a shared helper would hide both.
  query(sql: string, params?: unknown): Promise<unknown> {
    const c = this.connection;
    return new this.Promise((resolve, reject) => {
      const done: Mysql2Callback = (err, rows, fields) => (err ? reject(err) : resolve([rows, fields]));
      c.query(sql, params, done);
    });
  }
  execute(sql: string, params?: unknown): Promise<unknown> {
    const c = this.connection;
    return new this.Promise((resolve, reject) => {
      const done: Mysql2Callback = (err, rows, fields) => (err ? reject(err) : resolve([rows, fields]));
      c.execute(sql, params, done);
    });
  }
  /** A statement whose `execute(values)` runs the callback connection's `execute` of the prepared text. */
  prepare(sql: string): Promise<PromisePreparedStatementInfo> {
    const c = this.connection;
    const statement = { _connection: c, execute: (values: unknown, cb: Mysql2Callback): void => c.execute(sql, values, cb), close: (): void => undefined };
    return Promise.resolve(new PromisePreparedStatementInfo(statement, this.Promise));
  }
}
