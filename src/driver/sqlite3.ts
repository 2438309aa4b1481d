import type { Database as Sqlite3Database } from 'sqlite3';
import { SqltallyError } from '../shared/errors';
import type { StatementSink } from '../sql/events';
import { classifyCached } from '../sql/statement-cache';
import type { CallShape, CallSite, MethodHooks, WrapperMark } from './counted';
import { callEnd, callerAtCall, callStart, countedProxy, isPlainObject, toCount, wrapOnce } from './counted';
import { loadDriverPackage } from './load';
import { isArray, objectKeys } from '../shared/intrinsics';
import type { DriverModel, DriverModule } from './module';

const DRIVER = 'sqlite3';

type Callback = (this: unknown, ...args: unknown[]) => unknown;

/**
 * The subset of node-sqlite3's `Database` that is counted; everything else passes through. Every call takes an optional
 * callback, and one without is counted too. `run`/`get`/`all`/`each`/`map` and `exec` are one `query` event each
 * (`run`'s rows from `this.changes`); `prepare` is a `prepare` event when the driver calls back, and its statement is counted.
 */
export interface Sqlite3DatabaseLike {
  run(sql: string, ...params: unknown[]): unknown;
  get(sql: string, ...params: unknown[]): unknown;
  all(sql: string, ...params: unknown[]): unknown;
  each(sql: string, ...params: unknown[]): unknown;
  exec(sql: string, callback?: (err: Error | null) => void): unknown;
  prepare(sql: string, ...params: unknown[]): unknown;
  serialize(callback?: () => void): void;
  parallelize(callback?: () => void): void;
}

/**
 * The subset of a prepared `Statement` that is counted: `run`, `get`, `all`, `each`, `map`, one `execute` event each.
 * `bind` sends nothing, but the values it binds are counted on the executions that pass none; `reset` and
 * `finalize` pass through (`finalize` hands back the counted database).
 */
export interface Sqlite3StatementLike {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown;
  each(...params: unknown[]): unknown;
  bind(...params: unknown[]): unknown;
  finalize(callback?: (err: Error | null) => void): unknown;
}

/**
 * Values one node-sqlite3 call binds, as its `Statement::Bind` reads them: a first argument that is an array binds
 * its elements, a plain object its keys (named parameters); otherwise every argument is one value (a Date, a RegExp,
 * a Buffer included).
 */
export function countSqlite3Params(params: readonly unknown[]): number {
  if (params.length === 0) return 0;
  const first = params[0];
  if (isArray(first)) return first.length;
  if (isPlainObject(first)) return objectKeys(first).length;
  return params.length;
}

/** The values handed to the sink: the one array or named object, or the list of positional values. */
function valuesOf(params: readonly unknown[]): unknown {
  const first = params[0];
  return params.length === 1 && (isArray(first) || isPlainObject(first)) ? first : params;
}

function shapeOf(method: string, kind: CallShape['kind'], sql: string, bindValues: number): CallShape {
  return { method, kind, sql, statementClass: classifyCached(sql, 'sqlite'), bindValues, parameterSets: kind === 'prepare' ? 0 : 1 };
}

/** How a failed call is raised when the caller gave no callback: as node-sqlite3 would have raised it. */
type Raise = (error: unknown) => void;

/**
 * One counted call: its callbacks (the caller's, or one added so the end is known) record the event once, then call the
 * caller's; without one, a failure is an `error` event on the object that ran it, as the driver does.
 */
function countedCall(
  site: CallSite,
  shape: CallShape,
  args: unknown[],
  values: unknown,
  raise: Raise,
  invoke: (...a: unknown[]) => unknown,
  each: boolean,
): unknown {
  const caller = callerAtCall(site, shape);
  const start = callStart(site);
  let done = false;
  const settle = (error: unknown, rows: number | null): void => {
    if (done) return;
    done = true;
    callEnd(site, shape, start, error ? null : rows, error ?? null, values, caller);
  };
  const rowsOf = shape.method === 'run' ? (self: unknown): number | null => toCount((self as { changes?: unknown } | null)?.changes) : () => null;
  const last = args.length - 1;
  if (each) {
    const hasRow = last >= 0 && typeof args[last] === 'function';
    const hasComplete = hasRow && last >= 1 && typeof args[last - 1] === 'function';
    const row = hasRow ? (hasComplete ? (args[last - 1] as Callback) : (args[last] as Callback)) : undefined;
    const complete = hasComplete ? (args[last] as Callback) : undefined;
    const countedRow = function (this: unknown, ...cbArgs: unknown[]): unknown {
      if (cbArgs[0]) settle(cbArgs[0], null);
      if (row) return row.apply(this, cbArgs);
      if (cbArgs[0]) raise(cbArgs[0]);
      return undefined;
    };
    // Called with an error only when the statement could not be prepared: the driver hands that to the last
    // function it was given, the row callback when the caller gave no completion.
    const countedComplete = function (this: unknown, ...cbArgs: unknown[]): unknown {
      settle(cbArgs[0], null);
      if (complete) return complete.apply(this, cbArgs);
      if (cbArgs[0]) {
        if (row) return row.call(this, cbArgs[0]);
        raise(cbArgs[0]);
      }
      return undefined;
    };
    const head = hasComplete ? args.slice(0, last - 1) : hasRow ? args.slice(0, last) : args;
    args = [...head, countedRow, countedComplete];
  } else {
    const user = last >= 0 && typeof args[last] === 'function' ? (args[last] as Callback) : undefined;
    const counted = function (this: unknown, ...cbArgs: unknown[]): unknown {
      const error = cbArgs[0];
      settle(error, error ? null : rowsOf(this));
      if (user) return user.apply(this, cbArgs);
      if (error) raise(error);
      return undefined;
    };
    if (user) args[last] = counted;
    else args.push(counted);
  }
  try {
    return invoke(...args);
  } catch (error) {
    settle(error, null);
    throw error;
  }
}

/** The arguments before the callbacks: what is bound. */
function paramsOf(args: readonly unknown[]): unknown[] {
  let end = args.length;
  while (end > 0 && typeof args[end - 1] === 'function') end--;
  return args.slice(0, end);
}

const DATABASE_CALLS = ['run', 'get', 'all', 'each', 'map'] as const;
const STATEMENT_CALLS = ['run', 'get', 'all', 'each', 'map'] as const;

function siteFor(sink: StatementSink): CallSite {
  return { driver: DRIVER, sink, connectionId: () => null };
}

function emitterRaise(target: object): Raise {
  return (error) => {
    (target as { emit(event: string, error: unknown): unknown }).emit('error', error);
  };
}

/**
 * A failure of a call made on the database without a callback happens on a statement node-sqlite3 made for it and
 * never handed out: its `error` event has no listener, so the driver's emit throws; so does this.
 */
const rethrow: Raise = (error) => {
  throw error;
};

/** Counts every call on a node-sqlite3 `Database` into `sink`; the result has the same type and behaviour. */
export function wrapSqlite3<T extends Sqlite3DatabaseLike>(db: T, sink: StatementSink): T {
  return wrapOnce(DRIVER, db, sink, () => {
    const site = siteFor(sink);
    const mark: WrapperMark = { driver: DRIVER, sink, target: db };
    const hooks: MethodHooks<T> = {};
    for (const method of DATABASE_CALLS) {
      hooks[method] = (original) =>
        function (this: unknown, ...args: unknown[]) {
          const sql = String(args[0]);
          const rest = args.slice(1);
          const params = paramsOf(rest);
          const shape = shapeOf(method, 'query', sql, countSqlite3Params(params));
          const result = countedCall(site, shape, rest, valuesOf(params), rethrow, (...a) => original(sql, ...a), method === 'each');
          return result === db ? wrapper : result;
        };
    }
    hooks.exec = (original) =>
      function exec(this: unknown, ...args: unknown[]) {
        const sql = String(args[0]);
        const result = countedCall(site, shapeOf('exec', 'query', sql, 0), args.slice(1), undefined, emitterRaise(db), (...a) => original(sql, ...a), false);
        return result === db ? wrapper : result;
      };
    hooks.prepare = (original) =>
      function prepare(this: unknown, ...args: unknown[]) {
        const sql = String(args[0]);
        const rest = args.slice(1);
        const params = paramsOf(rest);
        const shape = shapeOf('prepare', 'prepare', sql, 0);
        // The statement exists only once the driver hands it back, but its failure is raised after that, on it.
        const made: { stmt?: object } = {};
        const raise: Raise = (error) => {
          if (made.stmt) emitterRaise(made.stmt)(error);
          else throw error;
        };
        made.stmt = countedCall(site, shape, rest, undefined, raise, (...a) => original(sql, ...a), false) as object;
        return wrapStatement(made.stmt as Sqlite3StatementLike, sql, countSqlite3Params(params), site, db, wrapper);
      };
    const wrapper: T = countedProxy(db, mark, hooks);
    return wrapper;
  });
}

function wrapStatement(stmt: Sqlite3StatementLike, sql: string, bound: number, site: CallSite, db: object, dbWrapper: object): Sqlite3StatementLike {
  return wrapOnce(DRIVER, stmt, site.sink, () => {
    const mark: WrapperMark = { driver: DRIVER, sink: site.sink, target: stmt };
    const state = { boundValues: bound };
    const statementClass = classifyCached(sql, 'sqlite');
    const hooks: MethodHooks<Sqlite3StatementLike> = {};
    for (const method of STATEMENT_CALLS) {
      hooks[method] = (original) =>
        function (this: unknown, ...args: unknown[]) {
          const params = paramsOf(args);
          const bindValues = params.length === 0 ? state.boundValues : countSqlite3Params(params);
          if (params.length > 0) state.boundValues = bindValues;
          const shape: CallShape = { method, kind: 'execute', sql, statementClass, bindValues, parameterSets: 1 };
          const result = countedCall(site, shape, args, params.length === 0 ? undefined : valuesOf(params), emitterRaise(stmt), original, method === 'each');
          return result === stmt ? wrapper : result;
        };
    }
    hooks.bind = (original) =>
      function bind(this: unknown, ...args: unknown[]) {
        state.boundValues = countSqlite3Params(paramsOf(args));
        const result = original(...args);
        return result === stmt ? wrapper : result;
      };
    hooks.finalize = (original) =>
      function finalize(this: unknown, ...args: unknown[]) {
        const result = original(...args);
        return result === db ? dbWrapper : result;
      };
    const wrapper = countedProxy(stmt, mark, hooks);
    return wrapper;
  });
}

function isDatabase(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const o = value as Record<string, unknown>;
  // serialize/parallelize and each are node-sqlite3's own; better-sqlite3 has transaction/pragma instead.
  return ['run', 'get', 'all', 'each', 'exec', 'prepare', 'serialize', 'parallelize'].every((m) => typeof o[m] === 'function');
}

/**
 * In-process: nothing crosses a wire and SQLite keeps no statement counter, so the server layer the probe reads is
 * total_changes() (rows), not statements; every call that runs SQL is one statement, as on better-sqlite3.
 */
const sqlite3Model: DriverModel = (group) => {
  const n = group.kind === 'prepare' ? 0 : group.calls;
  return { wire: {}, server: { statements: { min: n, max: n } }, wireWords: 'no wire', serverWords: `${n} statement(s)` };
};

/** node-sqlite3's `Database`, under a name declarations can refer to. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface Sqlite3Handle extends Sqlite3Database {}

/** Runs `fn` with a node-style callback and resolves with what it hands back. */
function promised<R>(fn: (cb: (err: Error | null, result?: R) => void) => void): Promise<R> {
  return new Promise((resolve, reject) => fn((err, result) => (err ? reject(err) : resolve(result as R))));
}

export const SQLITE3_DRIVER: DriverModule<'sqlite3', Sqlite3Handle> = {
  name: 'sqlite3',
  packageName: 'sqlite3',
  backends: ['sqlite'],
  dialect: 'sqlite',
  releases: [],
  compatReleases: ['sqlite3-5.1.6', 'sqlite3-6.0.1'],
  accepts: 'a node-sqlite3 Database (new sqlite3.Database(file))',
  recognises: isDatabase,
  wrap: <T extends object>(target: T, sink: StatementSink): T => wrapSqlite3(target as T & Sqlite3DatabaseLike, sink),
  async open(connection, opts) {
    if (connection.kind !== 'file') {
      throw new SqltallyError('sqlite3 opens a file, got a network connection', { phase: 'connect', backend: opts.backend });
    }
    const sqlite3 = await loadDriverPackage<typeof import('sqlite3')>(opts.driverPackage ?? 'sqlite3', 'sqlite3', opts.backend);
    const Database = sqlite3.Database ?? (sqlite3 as unknown as { default: typeof import('sqlite3') }).default.Database;
    const mode = opts.readOnly || opts.driverOptions?.readonly === true ? sqlite3.OPEN_READONLY : undefined;
    const db = await new Promise<Sqlite3Handle>((resolve, reject) => {
      const opened: Sqlite3Handle = mode === undefined ? new Database(connection.filename, done) : new Database(connection.filename, mode, done);
      function done(err: Error | null): void {
        if (err) reject(err);
        else resolve(opened);
      }
    });
    return { handle: db, connectionId: null, close: () => promised<void>((cb) => db.close(cb)) };
  },
  streamOptions: null,
  ownSql: null,
  // `all` runs one statement and hands back its rows (none for DDL or a write); sqltally's own SQL is one statement.
  runSql: (h, sql) => promised<unknown[]>((cb) => h.all(sql, cb)),
  ping: null,
  // node-sqlite3 reads every INTEGER as a double.
  rowSource: (h) => ({ all: (sql, params = []) => promised<Record<string, unknown>[]>((cb) => h.all(sql, [...params], cb)), lossyInt64: true }),
  model: sqlite3Model,
  stableWireBytes: true,
  embedded: true,
  // node-sqlite3 sets `open` on the Database when it opens and clears it when it closes.
  isClosed: (h) => (h as { open?: unknown }).open === false,
};
