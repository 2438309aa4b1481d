import type { Database as SqliteDatabase } from 'better-sqlite3';
import type { StatementSink } from '../events';
import { classifyCached } from '../statement-cache';
import type { CallShape, CallSite, MethodHooks, WrapOptions, WrapperMark } from './counted';
import { countedProxy, emit, isPlainObject, nowNs, toCount, track, WRAPPED, wrapOnce } from './counted';
import { SqltallyError } from '../../containers/errors';
import { loadDriverPackage } from './load';
import type { DriverModel, DriverModule } from './module';

const DRIVER = 'better-sqlite3';

/**
 * The subset of better-sqlite3's `Database` that is counted. Every other member (`close`, `function`,
 * `backup`, `serialize`, `loadExtension`, `table`, ...) passes through uncounted.
 * - `prepare` -> one `prepare` event; the statement it returns is counted too.
 * - `exec` and `pragma` -> one `query` event each.
 * - `transaction(fn)` -> a counted transaction function: its BEGIN and COMMIT/ROLLBACK, which better-sqlite3
 *   issues itself, are recorded as `query` events with method `transaction` (durations 0: they run inside the
 *   driver and cannot be timed apart from the body), so the driver layer shows the transaction the server saw.
 *   Nested calls use SAVEPOINT/RELEASE/ROLLBACK TO, which classify as `savepoint`, the same on every driver.
 */
export interface BetterSqlite3Database {
  prepare(source: string): BetterSqlite3Statement;
  exec(source: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  transaction(fn: (...args: never[]) => unknown): unknown;
  readonly inTransaction: boolean;
}

/**
 * The subset of a prepared `Statement` that is counted: `run` (rows affected from `info.changes`), `get`, `all`
 * and `iterate` (recorded when the iterator is created; no row count). `bind` is not a call to the database,
 * but the values it binds are counted on the later executions. Everything else passes through.
 */
export interface BetterSqlite3Statement {
  readonly source: string;
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown;
  iterate(...params: unknown[]): unknown;
  bind(...params: unknown[]): unknown;
}

/**
 * Values bound by one better-sqlite3 call: positional scalars count one each, an array counts its elements,
 * a named-parameter object counts its keys.
 */
export function countSqliteParams(params: ArrayLike<unknown>): number {
  let n = 0;
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    n += scalar(p) ? 1 : objectParams(p as object);
  }
  return n;
}

/** The first `n` of up to 8 values, as a list (a copy of a call's arguments made without reading them by index). */
function firstOf(n: number, ...values: unknown[]): unknown[] {
  values.length = n;
  return values;
}

/** A value better-sqlite3 binds as one parameter by itself (not an array or a named-parameter object). */
function scalar(p: unknown): boolean {
  return p === null || typeof p !== 'object';
}

/** Values one object argument binds: an array its elements, a named-parameter object its keys, else (a Buffer) 1. */
function objectParams(p: object): number {
  if (Array.isArray(p)) return p.length;
  if (isPlainObject(p)) return Object.keys(p).length;
  return 1;
}

/**
 * Calls per statement and window whose values are handed to the sink: the window compares the first 64 calls of a
 * text (MAX_TRACKED_CALLS in counters/driver-layer.ts); a statement handing over as many covers them.
 */
const VALUES_PER_WINDOW = 64;

function runChanges(result: unknown): number | null {
  return result !== null && typeof result === 'object' ? toCount((result as { changes?: unknown }).changes) : null;
}

const noRows = (): null => null;

function siteFor(sink: StatementSink, opts: WrapOptions | undefined): CallSite {
  const id = opts?.connectionId ?? null;
  return { driver: DRIVER, sink, connectionId: () => id };
}

function shapeOf(method: string, kind: CallShape['kind'], sql: string, bindValues: number, parameterSets: number): CallShape {
  return { method, kind, sql, statementClass: classifyCached(sql, 'sqlite'), bindValues, parameterSets };
}

/** Counts every call on a better-sqlite3 `Database` into `sink`; the result has the same type and behaviour. */
export function wrapBetterSqlite3<T extends BetterSqlite3Database>(db: T, sink: StatementSink, opts?: WrapOptions): T {
  return wrapOnce(DRIVER, db, sink, () => {
    const site = siteFor(sink, opts);
    const mark: WrapperMark = { driver: DRIVER, sink, target: db };
    const hooks: MethodHooks<T> = {
      prepare: (original) =>
        function prepare(...args: unknown[]) {
          const sql = typeof args[0] === 'string' ? args[0] : String(args[0]);
          const stmt = track(site, shapeOf('prepare', 'prepare', sql, 0, 0), () => original(...args), noRows);
          return wrapStatement(stmt as BetterSqlite3Statement, sink, site);
        },
      exec: (original, _target, wrapper) =>
        function exec(...args: unknown[]) {
          const sql = typeof args[0] === 'string' ? args[0] : String(args[0]);
          const result = track(site, shapeOf('exec', 'query', sql, 0, 1), () => original(...args), noRows);
          return result === db ? wrapper : result;
        },
      pragma: (original) =>
        function pragma(...args: unknown[]) {
          const sql = `PRAGMA ${String(args[0])}`;
          return track(site, shapeOf('pragma', 'query', sql, 0, 1), () => original(...args), noRows);
        },
      transaction: (original, target, wrapper) =>
        function transaction(...args: unknown[]) {
          const tx = original(...args) as TransactionFunction;
          return countedTransaction(tx, target, wrapper, site);
        },
    };
    return countedProxy(db, mark, hooks);
  });
}

function wrapStatement(stmt: BetterSqlite3Statement, sink: StatementSink, site: CallSite): BetterSqlite3Statement {
  return wrapOnce(DRIVER, stmt, sink, () => {
    const mark: WrapperMark = { driver: DRIVER, sink, target: stmt };
    // The string prepare() was given (better-sqlite3 keeps it as a frozen own property): the window's later lookups
    // of it are identity checks.
    const sql = stmt.source;
    // The statement's text never changes, so classify once: `run` is the per-row hot path.
    const statementClass = classifyCached(sql, 'sqlite');
    let boundValues = 0;
    // Values are counted from the arguments of each call (an array counts its elements, a named object its keys,
    // with no walk over either), never from the SQL: counting a 100 KB text's placeholders costs milliseconds, and
    // a call with the wrong number of values fails in the driver anyway. `run` is the per-row hot path of the
    // recommended bulk insert, so `arguments` is only ever read by index and forwarded (V8 then never allocates it),
    // one shape is reused while the bound-value count stays the same, the clock is read only while the sink keeps
    // times, and the values themselves are handed over only for the first calls of each window (a copy, made then):
    // the sink compares no more than those (see VALUES_PER_WINDOW).
    const execution = (method: string, rowsOf: (result: unknown) => number | null) => (original: (...a: unknown[]) => unknown) => {
      let shape: CallShape | undefined;
      let seenEpoch: number | undefined = -1;
      let valuesLeft = 0;
      const shapeFor = (bindValues: number): CallShape => {
        if (shape === undefined || shape.bindValues !== bindValues) shape = { method, kind: 'execute', sql, statementClass, bindValues, parameterSets: 1 };
        return shape;
      };
      /** Whether this call's values go to the sink: the first VALUES_PER_WINDOW calls of each window. */
      const handsValues = (): boolean => {
        const epoch = sink.epoch;
        if (epoch !== seenEpoch) {
          seenEpoch = epoch;
          valuesLeft = VALUES_PER_WINDOW;
        }
        if (valuesLeft === 0) return false;
        valuesLeft--;
        return true;
      };
      const failed = (call: CallShape, start: number, timed: boolean, error: unknown, values: unknown): void =>
        emit(site, call, start, timed ? nowNs() : 0, null, error, values);
      const settled = (call: CallShape, start: number, timed: boolean, result: unknown, values: unknown): void =>
        emit(site, call, start, timed ? nowNs() : 0, rowsOf(result), null, values);
      // Any call: arrays, named objects, more than 8 values. Rest parameters, because a loop over `arguments[i]` in
      // the common path below would make V8 build the arguments object on every call.
      const general = (...args: unknown[]): unknown => {
        const values = handsValues() ? (args.length === 1 && !scalar(args[0]) ? args[0] : args) : undefined;
        const call = shapeFor(args.length === 0 ? boundValues : countSqliteParams(args));
        const timed = sink.timed !== false;
        const start = timed ? nowNs() : 0;
        let result: unknown;
        try {
          result = original.apply(undefined, args);
        } catch (error) {
          failed(call, start, timed, error, values);
          throw error;
        }
        settled(call, start, timed, result, values);
        return result;
      };
      // The common per-row call, up to 8 scalars: `arguments` is only read at fixed positions and forwarded, which V8
      // compiles to a few compares with no arguments object (a loop over it cost about 200 instructions a call).
      return function counted(this: unknown) {
        const n = arguments.length;
        if (
          n > 8 ||
          !(n < 1 || scalar(arguments[0])) ||
          !(n < 2 || scalar(arguments[1])) ||
          !(n < 3 || scalar(arguments[2])) ||
          !(n < 4 || scalar(arguments[3])) ||
          !(n < 5 || scalar(arguments[4])) ||
          !(n < 6 || scalar(arguments[5])) ||
          !(n < 7 || scalar(arguments[6])) ||
          !(n < 8 || scalar(arguments[7]))
        )
          return general.apply(undefined, arguments as unknown as unknown[]);
        const values = handsValues() ? firstOf(n, arguments[0], arguments[1], arguments[2], arguments[3], arguments[4], arguments[5], arguments[6], arguments[7]) : undefined;
        const call = shapeFor(n === 0 ? boundValues : n);
        const timed = sink.timed !== false;
        const start = timed ? nowNs() : 0;
        let result: unknown;
        try {
          result = original.apply(undefined, arguments as unknown as unknown[]);
        } catch (error) {
          failed(call, start, timed, error, values);
          throw error;
        }
        settled(call, start, timed, result, values);
        return result;
      };
    };
    const hooks: MethodHooks<BetterSqlite3Statement> = {
      run: execution('run', runChanges),
      get: execution('get', noRows),
      all: execution('all', noRows),
      iterate: execution('iterate', noRows),
      bind: (original, _target, wrapper) =>
        function bind(...params: unknown[]) {
          const result = original(...params);
          boundValues = countSqliteParams(params);
          return result === stmt ? wrapper : result;
        },
    };
    // The statement is sqltally's own (the counted `prepare` made it), so its counted methods are shadowed on the
    // instance instead of behind a Proxy: the per-row path then pays no trap per call, and the object stays the
    // driver's own class. `statement.database` stays the raw Database, so calls made through it are not counted.
    return countInPlace(stmt, mark, hooks);
  });
}

/** Shadows the hooked methods on `target` itself (see {@link wrapStatement}); returns `target`. */
function countInPlace<T extends object>(target: T, mark: WrapperMark, hooks: MethodHooks<T>): T {
  for (const [name, hook] of Object.entries(hooks)) {
    const method = Reflect.get(target, name) as ((...a: unknown[]) => unknown) | undefined;
    if (!hook || typeof method !== 'function') continue;
    Object.defineProperty(target, name, { value: hook(method.bind(target), target, target), writable: true, configurable: true });
  }
  Object.defineProperty(target, WRAPPED, { value: mark });
  return target;
}

type TransactionFunction = ((...args: unknown[]) => unknown) & {
  default: TransactionFunction;
  deferred: TransactionFunction;
  immediate: TransactionFunction;
  exclusive: TransactionFunction;
};

const BEGIN_BY_VARIANT = {
  default: 'BEGIN',
  deferred: 'BEGIN DEFERRED',
  immediate: 'BEGIN IMMEDIATE',
  exclusive: 'BEGIN EXCLUSIVE',
} as const;
// better-sqlite3's own savepoint name (lib/methods/transaction.js).
const SAVEPOINT_NAME = '`\t_bs3.\t`';

function countedTransaction(
  tx: TransactionFunction,
  db: BetterSqlite3Database,
  dbWrapper: BetterSqlite3Database,
  site: CallSite,
): TransactionFunction {
  const control = (sql: string): CallShape => shapeOf('transaction', 'query', sql, 0, 1);
  const variants = {} as Record<keyof typeof BEGIN_BY_VARIANT, TransactionFunction>;
  for (const variant of Object.keys(BEGIN_BY_VARIANT) as (keyof typeof BEGIN_BY_VARIANT)[]) {
    const inner = tx[variant];
    const counted = function (this: unknown, ...args: unknown[]): unknown {
      const nested = db.inTransaction;
      const begin = nowNs();
      emit(site, control(nested ? `SAVEPOINT ${SAVEPOINT_NAME}` : BEGIN_BY_VARIANT[variant]), begin, begin, null, null);
      let result: unknown;
      try {
        result = inner.apply(this, args);
      } catch (error) {
        const end = nowNs();
        if (nested) {
          emit(site, control(`ROLLBACK TO ${SAVEPOINT_NAME}`), end, end, null, null);
          emit(site, control(`RELEASE ${SAVEPOINT_NAME}`), end, end, null, null);
        } else {
          // The rollback itself succeeded; the error belongs to the body and was recorded there.
          emit(site, control('ROLLBACK'), end, end, null, null);
        }
        throw error;
      }
      const end = nowNs();
      emit(site, control(nested ? `RELEASE ${SAVEPOINT_NAME}` : 'COMMIT'), end, end, null, null);
      return result;
    };
    variants[variant] = counted as TransactionFunction;
  }
  const properties: PropertyDescriptorMap = {
    default: { value: variants.default },
    deferred: { value: variants.deferred },
    immediate: { value: variants.immediate },
    exclusive: { value: variants.exclusive },
    database: { value: dbWrapper, enumerable: true },
  };
  for (const fn of Object.values(variants)) Object.defineProperties(fn, properties);
  return variants.default;
}

function isDatabase(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const o = value as Record<string, unknown>;
  return ['prepare', 'exec', 'pragma', 'transaction'].every((m) => typeof o[m] === 'function');
}

/** In-process: every run/exec is one statement, nothing crosses a wire, and SQLite counts no statements. */
const sqliteModel: DriverModel = (group) => {
  const n = group.kind === 'prepare' ? 0 : group.kind === 'batch' ? group.parameterSets : group.calls;
  return { wire: {}, server: { statements: { min: n, max: n } }, wireWords: 'no wire', serverWords: `${n} statement(s)` };
};

/** better-sqlite3: one synchronous `Database` per file handle. */
/**
 * The `Database` better-sqlite3 hands out, under a name declarations can refer to (`BetterSqlite3.Database` sits in
 * an `export =` namespace that TypeScript cannot name from another file).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface SqliteHandle extends SqliteDatabase {}

export const BETTER_SQLITE3_DRIVER: DriverModule<'better-sqlite3', SqliteHandle> = {
  name: 'better-sqlite3',
  packageName: 'better-sqlite3',
  backends: ['sqlite'],
  dialect: 'sqlite',
  releases: [],
  accepts: 'a better-sqlite3 Database (new Database(file))',
  recognises: isDatabase,
  wrap: <T extends object>(target: T, sink: StatementSink): T => wrapBetterSqlite3(target as T & BetterSqlite3Database, sink),
  async open(connection, opts) {
    if (connection.kind !== 'file') {
      throw new SqltallyError('better-sqlite3 opens a file, got a network connection', { phase: 'connect', backend: opts.backend });
    }
    const { default: Database } = await loadDriverPackage<{ default: typeof import('better-sqlite3') }>(
      opts.driverPackage ?? 'better-sqlite3',
      'better-sqlite3',
      opts.backend,
    );
    const db = new Database(connection.filename, opts.driverOptions);
    return {
      handle: db,
      connectionId: null,
      close: async () => {
        db.close();
      },
    };
  },
  runSql: async (h, sql) => {
    const statement = h.prepare(sql);
    if (statement.reader) return statement.all();
    statement.run();
    return [];
  },
  ping: null,
  // safeIntegers: SQLite integers above 2^53 come back as bigint instead of being rounded.
  rowSource: (h) => ({ all: async (sql, params = []) => h.prepare(sql).safeIntegers(true).all(...params) as Record<string, unknown>[] }),
  model: sqliteModel,
  stableWireBytes: true,
};
