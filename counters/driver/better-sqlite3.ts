import type { Database as SqliteDatabase } from 'better-sqlite3';
import type { StatementSink } from '../events';
import { classifyCached } from '../statement-cache';
import type { CallShape, CallSite, MethodHooks, WrapOptions, WrapperMark } from './counted';
import { countedProxy, emit, isPlainObject, nowNs, toCount, track, WRAPPED, wrapOnce } from './counted';
import { SqltallyError } from '../../containers/errors';
import { loadDriverPackage } from './load';
import type { DriverModel, DriverModule } from './module';
import { arraySlice, isArray, objectKeys } from '../intrinsics';

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
  if (isArray(p)) return p.length;
  if (isPlainObject(p)) return objectKeys(p).length;
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
    // The string prepare() was given (better-sqlite3 keeps it as a frozen own property): the window's later lookups
    // of it are identity checks. The text never changes, so it is classified once: `run` is the per-row hot path.
    const sql = stmt.source;
    const state: StatementState = { sql, statementClass: classifyCached(sql, 'sqlite'), boundValues: 0 };
    const slots = stmt as unknown as Record<symbol, StatementState | ExecutionState>;
    // Symbol-keyed, so no listing of the statement's keys shows them. Assigned rather than defined: a store V8 has
    // seen before follows a cached map transition, where each `Object.defineProperty` is a runtime call of about 2k
    // instructions (callgrind), and some callers prepare before every run (knex on SQLite).
    slots[STATE] = state;
    // One record per counted method, each under its own key: the per-row call reaches everything it needs in one load.
    // One store per method written out: a loop over COUNTED's keys made one store site see four keys, 2.7k instructions
    // more per prepare. A method of COUNTED left out here runs uncounted, which its tests catch.
    const execution = (): ExecutionState => ({ statement: state, site, sink, shape: undefined, seenEpoch: -1, valuesLeft: 0 });
    slots[COUNTED.run.state] = execution();
    slots[COUNTED.get.state] = execution();
    slots[COUNTED.all.state] = execution();
    slots[COUNTED.iterate.state] = execution();
    Object.defineProperty(stmt, WRAPPED, { value: { driver: DRIVER, sink, target: stmt } satisfies WrapperMark });
    // The statement is sqltally's own (the counted `prepare` made it), so it is counted in place rather than behind a
    // Proxy: its prototype becomes a counting one that inherits from the driver's, and stays a driver Statement
    // (`instanceof`, every other method and getter). `statement.database` stays the raw Database, so calls made
    // through it are not counted.
    Object.setPrototypeOf(stmt, countingPrototype(Object.getPrototypeOf(stmt) as object));
    return stmt;
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
 * Why a prototype, not a method shadowed on each statement: a counted method that calls the native one through a
 * closure (a bound function, `apply`) makes V8 take its generic path into C++ on every call, about 400 instructions
 * more than the raw `stmt.run(...)`, whose native target it knows from the receiver's map and calls directly. Here
 * the native method sits on the prototype under a symbol and is called on `this` with a fixed number of arguments,
 * so V8 knows the target again and keeps its direct call (callgrind, 5000-row windows: +23 instructions a row for the
 * forwarding, against +403 through a bound function).
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
 * A counted `run`/`get`/`all`/`iterate`. Values are counted from the arguments of each call (an array counts its
 * elements, a named object its keys, with no walk over either), never from the SQL: counting a 100 KB text's
 * placeholders costs milliseconds, and a call with the wrong number of values fails in the driver anyway. `run` is
 * the per-row hot path of the recommended bulk insert, so its common path reads `arguments` at fixed positions only
 * (V8 then never allocates it), the clock is read only while the sink keeps times, and the values themselves are
 * handed over only for the first calls of each window (a copy, made then): the sink compares no more than those.
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
  // The common per-row call, up to 8 scalars: `arguments` read at fixed positions only, and the native method called
  // with as many arguments as were given (an arity V8 can see at each call site), on `this`, so V8 finds it from the
  // receiver's map and calls it directly (see countingPrototype).
  return function counted(this: CountedStatement): unknown {
    const execution = this[key] as unknown as ExecutionState | undefined;
    const n = arguments.length;
    const a0: unknown = arguments[0], a1: unknown = arguments[1], a2: unknown = arguments[2], a3: unknown = arguments[3];
    const a4: unknown = arguments[4], a5: unknown = arguments[5], a6: unknown = arguments[6], a7: unknown = arguments[7];
    // Called on a statement this module did not count (the method taken off a counted one and called with another
    // `this`): it runs uncounted, as the driver would run it.
    if (execution === undefined) return this[native]!.apply(this, arguments as unknown as unknown[]);
    if (n > 8 || objectAmong(n, a0, a1, a2, a3, a4, a5, a6, a7)) return general(this, execution, arraySlice.call(arguments) as unknown[]);
    const values = handsValues(execution) ? firstOf(n, a0, a1, a2, a3, a4, a5, a6, a7) : undefined;
    const call = shapeFor(execution, n === 0 ? execution.statement.boundValues : n);
    const timed = execution.sink.timed !== false;
    const start = timed ? nowNs() : 0;
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
    settle(execution, call, start, timed, result, NO_ERROR, values);
    return result;
  };
}

/**
 * Whether any of the first `n` (up to 8) arguments is an array or an object. Only those `n` are looked at: a test of a
 * value's type is some 20 instructions, and a prepared `get()` with none is the cheapest call there is.
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
