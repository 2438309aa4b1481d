/**
 * Stand-ins for network drivers' objects whose calls settle at once, recognised by sqltally's wrappers as the real
 * ones by shape: what counting a network driver's call adds (its values counted, a text new to the window classified
 * and its caller captured, the event), measured where a real call's formatting and I/O would hide it. One place for
 * every bench that needs them (driver-overhead, driver-cpu, driver-jest).
 */
import { EventEmitter } from 'node:events';
import { format as mysql2Format } from 'mysql2';
import postgres, { type Sql } from 'postgres';
import { PromiseConnection, type Mysql2Callback } from '../src/driver/mysql2.fixture';

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
 * A mysql2 promise connection built as mysql2 3.x builds its own (src/driver/mysql2.fixture.ts): `query`,
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

/**
 * A socket that answers PostgreSQL's wire protocol in-process, on the next microtask, for a real postgres.js
 * (`postgres({ socket })`): the startup (trust), then per statement what a server sends for the extended protocol
 * postgres.js speaks (Parse/Describe/Flush once per text, Bind/Execute/Sync every call) or a simple Query. Every
 * statement returns one row of one int4 column `n` (1) and the tag `SELECT 1`. The driver then does all its own work
 * (building, serializing, parsing the answer, its promise), and only the server and the network are left out, so
 * what counting adds to an executed postgres.js query is measured, with no server's timing in the instruction count.
 */
export class PgWireStandInSocket extends EventEmitter {
  readyState = 'open';
  #in: Buffer = Buffer.alloc(0);
  #started = false;
  #out: Buffer[] = [];
  /** Parameter types of the last Parse, for the ParameterDescription its Describe answers with (unknown: text). */
  #paramTypes: number[] = [];

  write(chunk: Uint8Array | string, callback?: (error?: Error | null) => void): boolean {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.#in = this.#in.length === 0 ? bytes : Buffer.concat([this.#in, bytes]);
    this.#consume();
    if (callback) queueMicrotask(() => callback(null));
    return true;
  }

  end(): this {
    this.#close();
    return this;
  }

  destroy(): this {
    this.#close();
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  pause(): this {
    return this;
  }

  resume(): this {
    return this;
  }

  #close(): void {
    if (this.readyState === 'closed') return;
    this.readyState = 'closed';
    queueMicrotask(() => this.emit('close'));
  }

  #consume(): void {
    for (;;) {
      if (!this.#started) {
        if (this.#in.length < 4) return;
        const length = this.#in.readUInt32BE(0);
        if (this.#in.length < length) return;
        this.#in = this.#in.subarray(length);
        this.#started = true;
        this.#out.push(message('R', int32(0)), message('K', Buffer.concat([int32(4242), int32(1)])), READY);
        this.#flush();
        continue;
      }
      if (this.#in.length < 5) return;
      const length = this.#in.readUInt32BE(1);
      if (this.#in.length < length + 1) return;
      const type = String.fromCharCode(this.#in[0]!);
      const body = this.#in.subarray(5, length + 1);
      this.#in = this.#in.subarray(length + 1);
      this.#answer(type, body);
    }
  }

  #answer(type: string, body: Buffer): void {
    switch (type) {
      case 'P': {
        // name\0 query\0 int16 count, int32 oid each
        let at = body.indexOf(0) + 1;
        at = body.indexOf(0, at) + 1;
        const count = body.readUInt16BE(at);
        this.#paramTypes = Array.from({ length: count }, (_, i) => body.readUInt32BE(at + 2 + i * 4) || 25);
        this.#out.push(PARSE_COMPLETE);
        return;
      }
      case 'D': {
        const types = this.#paramTypes;
        const description = Buffer.alloc(2 + types.length * 4);
        description.writeUInt16BE(types.length, 0);
        types.forEach((oid, i) => description.writeUInt32BE(oid, 2 + i * 4));
        this.#out.push(message('t', description), ROW_DESCRIPTION);
        return;
      }
      case 'B':
        this.#out.push(BIND_COMPLETE);
        return;
      case 'E':
        this.#out.push(DATA_ROW, COMMAND_COMPLETE);
        return;
      case 'H':
        this.#flush();
        return;
      case 'S':
        this.#out.push(READY);
        this.#flush();
        return;
      case 'Q':
        this.#out.push(ROW_DESCRIPTION, DATA_ROW, COMMAND_COMPLETE, READY);
        this.#flush();
        return;
      case 'X':
        this.#close();
        return;
      default:
        return;
    }
  }

  #flush(): void {
    if (this.#out.length === 0) return;
    const data = Buffer.concat(this.#out);
    this.#out = [];
    queueMicrotask(() => this.emit('data', data));
  }
}

function int32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(value, 0);
  return b;
}

function message(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const READY = message('Z', Buffer.from('I'));
const PARSE_COMPLETE = message('1');
const BIND_COMPLETE = message('2');
// One column `n`: no table (0), no column number (0), int4 (23), 4 bytes, no modifier (-1), text format (0).
const ROW_DESCRIPTION = message(
  'T',
  (() => {
    const field = Buffer.alloc(2 + 2 + 18);
    field.writeUInt16BE(1, 0);
    field.write('n\0', 2, 'latin1');
    field.writeUInt32BE(0, 4);
    field.writeUInt16BE(0, 8);
    field.writeUInt32BE(23, 10);
    field.writeInt16BE(4, 14);
    field.writeInt32BE(-1, 16);
    field.writeUInt16BE(0, 20);
    return field;
  })(),
);
const DATA_ROW = message('D', Buffer.concat([Buffer.from([0, 1]), int32(1), Buffer.from('1')]));
const COMMAND_COMPLETE = message('C', Buffer.from('SELECT 1\0'));

/** A real postgres.js `sql` over {@link PgWireStandInSocket}: one connection, no type fetch, notices dropped. */
export function postgresJsStandIn(): Sql {
  // `socket` is a postgres.js option its type declarations leave out.
  const options = { socket: () => new PgWireStandInSocket(), max: 1, fetch_types: false, onnotice: () => undefined, host: 'stand-in', port: 1 };
  return postgres(options as never);
}
