import type { Database as SqliteDatabase } from 'better-sqlite3';
import { captureCaller } from '../shared/caller';
import type { StatementSink, SteadyCounter } from '../sql/events';
import { classifyCached } from '../sql/statement-cache';
import type { CallShape, CallSite, MethodHooks, WrapOptions, WrapperMark } from './counted';
import { countedProxy, emit, isPlainObject, markOf, nowNs, toCount, track, WRAPPED, wrapOnce } from './counted';
import { SqltallyError } from '../shared/errors';
import { loadDriverPackage } from './load';
import { StatementPaths } from './compat/better-sqlite3';
import type { DriverModel, DriverModule } from './module';
import { arraySlice, isArray, objectKeys } from '../shared/intrinsics';

const DRIVER = 'better-sqlite3';

/**
 * The subset of better-sqlite3's `Database` that is counted; every other member passes through uncounted. `prepare`
 * is a `prepare` event and its statement is counted; `exec` and `pragma` a `query` event each; `transaction(fn)`
 * records the BEGIN and COMMIT/ROLLBACK better-sqlite3 issues itself (method `transaction`, duration 0: they run
 * inside the driver), so the driver layer shows the transaction the server saw.
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
  if (isArray(p)) return p.length;
  if (isPlainObject(p)) return objectKeys(p).length;
  return 1;
}

/**
 * Calls per statement and window whose values are handed to the sink: the window compares the first 64 calls of a
 * text (MAX_TRACKED_CALLS in src/driver/driver-layer.ts); a statement handing over as many covers them.
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

/**
 * The user's line for a text the window has not seen, captured here, fewer frames from the user than the sink
 * (StatementSink.needsCaller); undefined when none is needed. `path` keys the depth captureCaller remembers.
 */
function callerFor(sink: StatementSink, sql: string, path: string): string | null | undefined {
  return sink.needsCaller?.(sql) === true ? captureCaller(path) : undefined;
}

const PREPARE_CALLER = 'better-sqlite3.prepare (wrapper)';
const EXEC_CALLER = 'better-sqlite3.exec (wrapper)';
const PRAGMA_CALLER = 'better-sqlite3.pragma (wrapper)';
const TRANSACTION_CALLER = 'better-sqlite3.transaction (wrapper)';

function shapeOf(method: string, kind: CallShape['kind'], sql: string, bindValues: number, parameterSets: number): CallShape {
  return { method, kind, sql, statementClass: classifyCached(sql, 'sqlite'), bindValues, parameterSets };
}

/** Counts every call on a better-sqlite3 `Database` into `sink`; the result has the same type and behaviour. */
export function wrapBetterSqlite3<T extends BetterSqlite3Database>(db: T, sink: StatementSink, opts?: WrapOptions): T {
  return wrapOnce(DRIVER, db, sink, () => {
    const site = siteFor(sink, opts);
    const paths = new StatementPaths(sink);
    const mark: WrapperMark = { driver: DRIVER, sink, target: db };
    const hooks: MethodHooks<T> = {
      prepare: (original) =>
        function prepare(...args: unknown[]) {
          const sql = typeof args[0] === 'string' ? args[0] : String(args[0]);
          const caller = callerFor(sink, sql, PREPARE_CALLER);
          const shape = shapeOf('prepare', 'prepare', sql, 0, 0);
          const stmt = track(site, shape, () => original(...args), noRows, undefined, caller);
          const statement = stmt as BetterSqlite3Statement;
          if (markOf(statement) === undefined && !paths.fast(statement)) return plainStatement(statement, sink, site, shape.statementClass);
          return wrapStatement(statement, sink, site, shape.statementClass);
        },
      exec: (original, _target, wrapper) =>
        function exec(...args: unknown[]) {
          const sql = typeof args[0] === 'string' ? args[0] : String(args[0]);
          const caller = callerFor(sink, sql, EXEC_CALLER);
          const result = track(site, shapeOf('exec', 'query', sql, 0, 1), () => original(...args), noRows, undefined, caller);
          return result === db ? wrapper : result;
        },
      pragma: (original) =>
        function pragma(...args: unknown[]) {
          const sql = `PRAGMA ${String(args[0])}`;
          const caller = callerFor(sink, sql, PRAGMA_CALLER);
          return track(site, shapeOf('pragma', 'query', sql, 0, 1), () => original(...args), noRows, undefined, caller);
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

function wrapStatement(stmt: BetterSqlite3Statement, sink: StatementSink, site: CallSite, statementClass: CallShape['statementClass']): BetterSqlite3Statement {
  // A statement already marked is wrapOnce's to answer. An unmarked one is wrapped here without wrapOnce's WeakMap:
  // the statement carries the mark itself, sparing the WeakMap's insert and an entry per statement for the collector.
  if (markOf(stmt) !== undefined) return wrapOnce(DRIVER, stmt, sink, () => stmt);
  // The string prepare() was given (a frozen own property), so later lookups are identity checks, and it is classified
  // once, by the prepare (a text over 4 KB afresh at each lookup, see statement-cache.ts): `run` is the per-row path.
  const sql = stmt.source;
  const state: StatementState = { sql, statementClass, boundValues: 0 };
  const slots = stmt as unknown as Record<symbol, StatementState | ExecutionState>;
  // Symbol-keyed, so no listing of the statement's keys shows them. Assigned rather than defined: V8 caches a seen
  // store's map transition, `Object.defineProperty` is a runtime call, and some callers prepare before every run.
  slots[STATE] = state;
  // One record per counted method under its own key, one load per row. Stores written out (a loop made one store site
  // see four keys, dearer per prepare); a method of COUNTED left out here runs uncounted, which its tests catch.
  const execution = (): ExecutionState => ({
    statement: state,
    site,
    sink,
    shape: undefined,
    seenEpoch: -1,
    valuesLeft: 0,
    steady: null,
    steadyValues: -1,
    refusedEpoch: -1,
  });
  slots[COUNTED.run.state] = execution();
  slots[COUNTED.get.state] = execution();
  slots[COUNTED.all.state] = execution();
  slots[COUNTED.iterate.state] = execution();
  Object.defineProperty(stmt, WRAPPED, { value: { driver: DRIVER, sink, target: stmt } satisfies WrapperMark });
  // The counted `prepare` made this statement, so it is counted in place, not behind a Proxy: its prototype becomes a
  // counting one that inherits the driver's, so it stays a driver Statement. `statement.database` stays raw: uncounted.
  StatementPaths.adopt(stmt, countingPrototype);
  return stmt;
}

/**
 * The plain path for a statement (compat/better-sqlite3.ts): a counting Proxy over its public methods. Same events as
 * the counting prototype (rows from `run`'s `changes`, values bound by `bind` counted on executions that pass none).
 */
function plainStatement(
  stmt: BetterSqlite3Statement,
  sink: StatementSink,
  site: CallSite,
  statementClass: CallShape['statementClass'],
): BetterSqlite3Statement {
  return wrapOnce(DRIVER, stmt, sink, () => {
    const sql = stmt.source;
    let boundValues = 0;
    const execution = (method: ExecutionMethod) => (original: (...a: unknown[]) => unknown) => {
      const rowsOf = COUNTED[method].rowsOf;
      let last: CallShape | undefined;
      // As the counting prototype: values handed over for the first calls of each window only.
      let seenEpoch: number | undefined = -1;
      let valuesLeft = 0;
      return function counted(...args: unknown[]): unknown {
        const bind = args.length === 0 ? boundValues : countSqliteParams(args);
        const shape =
          last !== undefined && last.bindValues === bind ? last : (last = { method, kind: 'execute', sql, statementClass, bindValues: bind, parameterSets: 1 });
        if (sink.epoch !== seenEpoch) {
          seenEpoch = sink.epoch;
          valuesLeft = VALUES_PER_WINDOW;
        }
        const values = valuesLeft > 0 ? (valuesLeft--, args.length === 1 && !scalar(args[0]) ? args[0] : args) : undefined;
        return track(site, shape, () => original(...args), rowsOf, values);
      };
    };
    const hooks: MethodHooks<BetterSqlite3Statement> = {
      run: execution('run'),
      get: execution('get'),
      all: execution('all'),
      iterate: execution('iterate'),
      bind: (original, target, wrapper) =>
        function bind(...args: unknown[]) {
          const result = original(...args);
          boundValues = countSqliteParams(args);
          return result === target ? wrapper : result;
        },
    };
    return countedProxy(stmt, { driver: DRIVER, sink, target: stmt }, hooks);
  });
}

/** A wrapped statement's counting state, an own property under {@link STATE}. */
interface StatementState {
  readonly sql: string;
  readonly statementClass: CallShape['statementClass'];
  /** Values bound by `bind()`, counted on the executions that pass none. */
  boundValues: number;
}

/**
 * Per statement and method, an own property under the method's `state` key in {@link COUNTED}: the shape reused while
 * the bound-value count stays the same, and how many more calls hand their values over in this window.
 */
interface ExecutionState {
  readonly statement: StatementState;
  readonly site: CallSite;
  readonly sink: StatementSink;
  shape: CallShape | undefined;
  seenEpoch: number | undefined;
  valuesLeft: number;
  /** Counts the calls of `shape` while its window needs nothing else of them (StatementSink.steadyCounter). */
  steady: SteadyCounter | null;
  /** The bound values of the shape `steady` counts. */
  steadyValues: number;
  /** The epoch in which the sink last refused a counter: not asked again before the next window. */
  refusedEpoch: number | undefined;
}

const STATE = Symbol('sqltally.better-sqlite3.statement');

/**
 * The counted executions: rows affected from their result; `native`, the key of the driver's own method on the
 * counting prototype; `state`, the key of the statement's {@link ExecutionState} for it.
 */
const COUNTED = {
  run: { rowsOf: runChanges, native: Symbol('better-sqlite3 run'), state: Symbol('sqltally run') },
  get: { rowsOf: noRows, native: Symbol('better-sqlite3 get'), state: Symbol('sqltally get') },
  all: { rowsOf: noRows, native: Symbol('better-sqlite3 all'), state: Symbol('sqltally all') },
  iterate: { rowsOf: noRows, native: Symbol('better-sqlite3 iterate'), state: Symbol('sqltally iterate') },
} as const;
type ExecutionMethod = keyof typeof COUNTED;
const EXECUTION_METHODS = Object.keys(COUNTED) as ExecutionMethod[];
/** The driver's own `bind`, on the counting prototype. */
const NATIVE_BIND = Symbol('better-sqlite3 bind');

// One counting prototype per driver prototype: better-sqlite3 has one Statement class per loaded addon.
const COUNTING_PROTOTYPES = new WeakMap<object, object>();

/**
 * A prototype, not a method shadowed per statement: a native method called through a closure takes V8's generic path
 * into C++, while on the prototype, called on `this` at a fixed arity, it keeps the raw call's direct path.
 */
function countingPrototype(base: object): object {
  let proto = COUNTING_PROTOTYPES.get(base);
  if (proto) return proto;
  proto = Object.create(base) as object;
  const methods: PropertyDescriptorMap = {};
  const install = (name: string, key: symbol, counted: (this: CountedStatement, ...a: unknown[]) => unknown): void => {
    const native = Reflect.get(base, name) as unknown;
    if (typeof native !== 'function') return;
    methods[key] = { value: native };
    methods[name] = { value: counted, writable: true, configurable: true };
  };
  for (const method of EXECUTION_METHODS) install(method, COUNTED[method].native, countedExecution(method));
  install('bind', NATIVE_BIND, countedBind);
  Object.defineProperties(proto, methods);
  COUNTING_PROTOTYPES.set(base, proto);
  return proto;
}

type Native = (...a: unknown[]) => unknown;
type CountedStatement = BetterSqlite3Statement & { [STATE]?: StatementState } & Record<symbol, Native>;

/** `bind` is not a call to the database, but the values it binds are counted on the later executions. */
function countedBind(this: CountedStatement, ...params: unknown[]): unknown {
  const result = this[NATIVE_BIND]!.apply(this, params);
  const state = this[STATE];
  if (state) state.boundValues = countSqliteParams(params);
  return result;
}

/**
 * A counted `run`/`get`/`all`/`iterate`: values counted from the arguments, never the SQL (dear for a long text). `run` is
 * the bulk insert's per-row path: fixed `arguments` positions, the clock only while kept, values only for first calls.
 */
function countedExecution(method: ExecutionMethod) {
  const { rowsOf, native, state: key } = COUNTED[method];
  const shapeFor = (execution: ExecutionState, bindValues: number): CallShape => {
    const shape = execution.shape;
    if (shape !== undefined && shape.bindValues === bindValues) return shape;
    const { sql, statementClass } = execution.statement;
    return (execution.shape = { method, kind: 'execute', sql, statementClass, bindValues, parameterSets: 1 });
  };
  /** Whether this call's values go to the sink: the first VALUES_PER_WINDOW calls of each window. */
  const handsValues = (execution: ExecutionState): boolean => {
    const epoch = execution.sink.epoch;
    if (epoch !== execution.seenEpoch) {
      execution.seenEpoch = epoch;
      execution.valuesLeft = VALUES_PER_WINDOW;
    }
    if (execution.valuesLeft === 0) return false;
    execution.valuesLeft--;
    return true;
  };
  const settle = (execution: ExecutionState, call: CallShape, start: number, timed: boolean, result: unknown, error: unknown, values: unknown): void =>
    emit(execution.site, call, start, timed ? nowNs() : 0, error === NO_ERROR ? rowsOf(result) : null, error === NO_ERROR ? null : error, values);
  // Any call: arrays, named objects, more than 8 values.
  const general = (self: CountedStatement, execution: ExecutionState, args: unknown[]): unknown => {
    const values = handsValues(execution) ? (args.length === 1 && !scalar(args[0]) ? args[0] : args) : undefined;
    const call = shapeFor(execution, args.length === 0 ? execution.statement.boundValues : countSqliteParams(args));
    const timed = execution.sink.timed !== false;
    const start = timed ? nowNs() : 0;
    let result: unknown;
    try {
      result = args.length === 1 ? self[native]!(args[0]) : self[native]!.apply(self, args);
    } catch (error) {
      settle(execution, call, start, timed, undefined, error, values);
      throw error;
    }
    settle(execution, call, start, timed, result, NO_ERROR, values);
    return result;
  };
  // The common per-row call, up to 8 scalars, with the native method called on `this` at a visible arity (see
  // countingPrototype). Once the window keeps no more events or values, calls go to the sink's plain counter, not `emit`.
  return function counted(this: CountedStatement): unknown {
    const execution = this[key] as unknown as ExecutionState | undefined;
    const n = arguments.length;
    const a0: unknown = arguments[0],
      a1: unknown = arguments[1],
      a2: unknown = arguments[2],
      a3: unknown = arguments[3];
    const a4: unknown = arguments[4],
      a5: unknown = arguments[5],
      a6: unknown = arguments[6],
      a7: unknown = arguments[7];
    // Called on a statement this module did not count (the method taken off a counted one and called with another
    // `this`): it runs uncounted, as the driver would run it.
    if (execution === undefined) return this[native]!.apply(this, arguments as unknown as unknown[]);
    if (n > 8 || objectAmong(n, a0, a1, a2, a3, a4, a5, a6, a7)) return general(this, execution, arraySlice.call(arguments) as unknown[]);
    const bind = n === 0 ? execution.statement.boundValues : n;
    let steady = execution.steady;
    if (steady !== null && (!steady.open || bind !== execution.steadyValues)) steady = execution.steady = null;
    let values: unknown[] | undefined;
    let call: CallShape;
    let timed = false;
    let start = 0;
    if (steady === null) {
      values = handsValues(execution) ? firstOf(n, a0, a1, a2, a3, a4, a5, a6, a7) : undefined;
      call = shapeFor(execution, bind);
      timed = execution.sink.timed !== false;
      start = timed ? nowNs() : 0;
    } else call = execution.shape as CallShape;
    let result: unknown;
    try {
      const f = native;
      // prettier-ignore
      result = n === 0 ? this[f]!() : n === 1 ? this[f]!(a0) : n === 2 ? this[f]!(a0, a1) : n === 3 ? this[f]!(a0, a1, a2)
        : n === 4 ? this[f]!(a0, a1, a2, a3) : n === 5 ? this[f]!(a0, a1, a2, a3, a4) : n === 6 ? this[f]!(a0, a1, a2, a3, a4, a5)
        : n === 7 ? this[f]!(a0, a1, a2, a3, a4, a5, a6) : this[f]!(a0, a1, a2, a3, a4, a5, a6, a7);
    } catch (error) {
      settle(execution, call, start, timed, undefined, error, values);
      throw error;
    }
    if (steady !== null) steady.count(rowsOf(result));
    else {
      settle(execution, call, start, timed, result, NO_ERROR, values);
      if (callsThroughEmit < CALLS_BEFORE_COUNTERS) callsThroughEmit++;
      else if (!timed && values === undefined && execution.refusedEpoch !== execution.seenEpoch) askSteady(execution, call);
    }
    return result;
  };
}

/**
 * Calls this module sends through `emit` before it asks for counters at all: V8 optimizes a function only after a few
 * thousand runs, and with counters from the first window on, `emit`'s path would stay unoptimized for many windows.
 */
export const CALLS_BEFORE_COUNTERS = 5000;
let callsThroughEmit = 0;

/** Asks the sink for a counter of `call`'s shape (just recorded); remembers a refusal until the next window. */
function askSteady(execution: ExecutionState, call: CallShape): void {
  const steady = execution.sink.steadyCounter?.(DRIVER, call, execution.site.connectionId()) ?? null;
  if (steady === null) execution.refusedEpoch = execution.seenEpoch;
  else {
    execution.steady = steady;
    execution.steadyValues = call.bindValues;
  }
}

/**
 * Whether any of the first `n` (up to 8) arguments is an array or an object. Only those `n` are looked at: a prepared
 * `get()` with none is the cheapest call there is, and a type test per value would show in it.
 */
function objectAmong(n: number, a0: unknown, a1: unknown, a2: unknown, a3: unknown, a4: unknown, a5: unknown, a6: unknown, a7: unknown): boolean {
  return (
    (n > 0 && !scalar(a0)) ||
    (n > 1 && !scalar(a1)) ||
    (n > 2 && !scalar(a2)) ||
    (n > 3 && !scalar(a3)) ||
    (n > 4 && !scalar(a4)) ||
    (n > 5 && !scalar(a5)) ||
    (n > 6 && !scalar(a6)) ||
    (n > 7 && !scalar(a7))
  );
}

/** Marks a call that returned: `undefined` and `null` are errors a JavaScript function inside SQLite may throw. */
const NO_ERROR = Symbol('no error');

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

function countedTransaction(tx: TransactionFunction, db: BetterSqlite3Database, dbWrapper: BetterSqlite3Database, site: CallSite): TransactionFunction {
  const sink = site.sink;
  const control = (sql: string): CallShape => shapeOf('transaction', 'query', sql, 0, 1);
  const variants = {} as Record<keyof typeof BEGIN_BY_VARIANT, TransactionFunction>;
  for (const variant of Object.keys(BEGIN_BY_VARIANT) as (keyof typeof BEGIN_BY_VARIANT)[]) {
    const inner = tx[variant];
    const counted = function (this: unknown, ...args: unknown[]): unknown {
      const nested = db.inTransaction;
      const begin = nowNs();
      // Every statement this call records has one caller, the line that called the transaction function (the body runs
      // synchronously), so the first capture serves the others (undefined: none taken yet).
      const opening = nested ? `SAVEPOINT ${SAVEPOINT_NAME}` : BEGIN_BY_VARIANT[variant];
      let caller = callerFor(sink, opening, TRANSACTION_CALLER);
      const closing = (sql: string, at: number): void => {
        if (caller === undefined) caller = callerFor(sink, sql, TRANSACTION_CALLER);
        emit(site, control(sql), at, at, null, null, undefined, caller);
      };
      emit(site, control(opening), begin, begin, null, null, undefined, caller);
      let result: unknown;
      try {
        result = inner.apply(this, args);
      } catch (error) {
        const end = nowNs();
        if (nested) {
          closing(`ROLLBACK TO ${SAVEPOINT_NAME}`, end);
          closing(`RELEASE ${SAVEPOINT_NAME}`, end);
        } else {
          // The rollback itself succeeded; the error belongs to the body and was recorded there.
          closing('ROLLBACK', end);
        }
        throw error;
      }
      closing(nested ? `RELEASE ${SAVEPOINT_NAME}` : 'COMMIT', nowNs());
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
  embedded: true,
  isClosed: (h) => (h as { open?: unknown }).open === false,
  releases: [],
  compatReleases: ['better-sqlite3-11.10', 'better-sqlite3-12.11'],
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
    const db = new Database(connection.filename, opts.readOnly ? { readonly: true, ...opts.driverOptions } : opts.driverOptions);
    return {
      handle: db,
      connectionId: null,
      close: async () => {
        db.close();
      },
    };
  },
  streamOptions: null,
  ownSql: null,
  runSql: async (h, sql) => {
    const statement = h.prepare(sql);
    if (statement.reader) return statement.all();
    statement.run();
    return [];
  },
  ping: null,
  // safeIntegers: SQLite integers above 2^53 come back as bigint instead of being rounded.
  rowSource: (h) => ({
    all: async (sql, params = []) =>
      h
        .prepare(sql)
        .safeIntegers(true)
        .all(...params) as Record<string, unknown>[],
  }),
  model: sqliteModel,
  stableWireBytes: true,
};
