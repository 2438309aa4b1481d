import { messageOf, SqltallyError } from '../shared/errors';
import type { StatementSink } from '../sql/events';
import { classifyCached } from '../sql/statement-cache';
import type { CallShape, CallSite, MethodHook, MethodHooks, ShapeMemo, WrapOptions, WrapperMark } from './counted';
import {
  callbackIndex,
  callerAtCall,
  countedProxy,
  countExpandedValues,
  countParameterValues,
  emit,
  memoShape,
  nowNs,
  toCount,
  track,
  trackCallback,
  wrapOnce,
} from './counted';
import { loadDriverPackage, networkTarget } from './load';
import { rangeText, type DriverModel, type DriverModule, type Range } from './module';
import { mysqlProtocolModel, one } from './mysql-model';
import { isArray, objectCreate, reflectGet, toText } from '../shared/intrinsics';
import { promiseViewMethods } from './compat/mysql2';

const DRIVER = 'mysql2';

/**
 * The subset of mysql2's promise `Connection` / `PoolConnection` that is counted: `query` (nested `VALUES ?` values as
 * the scalars they become), `execute` (its implicit prepare is no event of its own), `prepare` (its statement's
 * `execute` is counted), `beginTransaction`/`commit`/`rollback`. Not counted: `ping`, `changeUser`, `reset`, `end`,
 * `unprepare`, statement `close` (no statement the server counts). `connection` is handed out wrapped.
 */
export interface Mysql2PromiseConnection {
  query(sql: unknown, values?: unknown): Promise<unknown>;
  execute(sql: unknown, values?: unknown): Promise<unknown>;
  prepare(options: unknown): Promise<unknown>;
  beginTransaction(): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  readonly connection: object;
}

/**
 * The subset of mysql2's promise `Pool` that is counted: `query` and `execute` (recorded without a connection
 * id: the pool picks the connection internally and does not say which), and `getConnection`, whose connection
 * is returned wrapped (its calls carry their thread id).
 */
export interface Mysql2PromisePool {
  query(sql: unknown, values?: unknown): Promise<unknown>;
  execute(sql: unknown, values?: unknown): Promise<unknown>;
  getConnection(): Promise<unknown>;
  readonly pool: object;
}

/**
 * The subset of mysql2's callback `Connection` / `PoolConnection` that is counted: `query`, `execute`,
 * `prepare(options, cb)`, `beginTransaction`, `commit`, `rollback`; `promise()` returns a wrapped promise
 * connection. A call without a callback (event-emitter or streaming mode) is recorded when its command ends,
 * without error or row count: adding an `error` listener would swallow errors the caller never handles.
 */
export interface Mysql2CallbackConnection {
  query(...args: unknown[]): unknown;
  execute(...args: unknown[]): unknown;
  prepare(...args: unknown[]): unknown;
  promise(promiseImpl?: unknown): unknown;
  readonly threadId: number | null;
}

/** The subset of mysql2's callback `Pool` that is counted: `query`, `execute`, `getConnection(cb)`, `promise()`. */
export interface Mysql2CallbackPool {
  query(...args: unknown[]): unknown;
  execute(...args: unknown[]): unknown;
  getConnection(cb: (err: unknown, connection: unknown) => void): void;
  promise(promiseImpl?: unknown): unknown;
}

/** Any mysql2 object `wrapMysql2` accepts. */
export type Mysql2Countable = Mysql2PromiseConnection | Mysql2PromisePool | Mysql2CallbackConnection | Mysql2CallbackPool;

type Shape = 'promiseConnection' | 'promisePool' | 'callbackConnection' | 'callbackPool';

type Loose = Record<string, unknown>;

function fn(o: Loose, name: string): boolean {
  return typeof o[name] === 'function';
}

function shapeOfTarget(target: object): Shape | null {
  const o = target as Loose;
  if (fn(o, 'getConnection')) {
    if (o.pool !== null && typeof o.pool === 'object' && fn(o.pool as Loose, 'getConnection')) return 'promisePool';
    if (fn(o, 'promise')) return 'callbackPool';
    return null;
  }
  if (!fn(o, 'query') || !fn(o, 'execute')) return null;
  if (fn(o, 'promise')) return 'callbackConnection';
  if (o.connection !== null && typeof o.connection === 'object' && fn(o.connection as Loose, 'promise')) {
    return 'promiseConnection';
  }
  return null;
}

/** `affectedRows` of a ResultSetHeader, or the sum over a multi-statement result; null for row sets. */
export function mysql2RowsAffected(result: unknown): number | null {
  if (isResultSetHeader(result)) return toCount(result.affectedRows);
  if (!isArray(result)) return null;
  let sum: number | null = null;
  for (const part of result) {
    if (isResultSetHeader(part)) sum = (sum ?? 0) + (toCount(part.affectedRows) ?? 0);
  }
  return sum;
}

/** Structural, so a bundled (minified) mysql2 is recognised too; row objects never carry all three keys. */
function isResultSetHeader(value: unknown): value is { affectedRows: unknown } {
  return value !== null && typeof value === 'object' && !isArray(value) && 'affectedRows' in value && 'insertId' in value && 'fieldCount' in value;
}

/** Promise results are `[result, fields]`. */
function promiseRows(value: unknown): number | null {
  return isArray(value) ? mysql2RowsAffected(value[0]) : null;
}

const noRows = (): null => null;

function sqlOf(sql: unknown): string {
  if (typeof sql === 'string') return sql;
  if (sql !== null && typeof sql === 'object' && typeof (sql as Loose).sql === 'string') return (sql as Loose).sql as string;
  return toText(sql);
}

/** mysql2 takes values either as the second argument or inside an options object. */
function valuesOf(sql: unknown, values: unknown): unknown {
  if (values !== undefined && typeof values !== 'function') return values;
  if (sql !== null && typeof sql === 'object') return (sql as Loose).values;
  return undefined;
}

function shape(method: string, kind: CallShape['kind'], sql: string, bindValues: number, parameterSets = 1): CallShape {
  return { method, kind, sql, statementClass: classifyCached(sql, 'mysql'), bindValues, parameterSets };
}

function queryShape(sql: unknown, values: unknown, memo: ShapeMemo): CallShape {
  return memoShape(memo, 'query', 'query', sqlOf(sql), countExpandedValues(values), 1, 'mysql');
}

function executeShape(sql: unknown, values: unknown, memo: ShapeMemo): CallShape {
  return memoShape(memo, 'execute', 'execute', sqlOf(sql), countParameterValues(values), 1, 'mysql');
}

/**
 * `query` and `execute` of the promise API. Where a method reads as mysql2's, it runs on a counted view of its callback
 * object (viewHooks), adding no promise (Jest's promise hooks make one dear); any other keeps its promise, chained.
 */
function promiseCalls<T extends object>(site: CallSite, memo: ShapeMemo, target: T, core: 'connection' | 'pool', sink: StatementSink): MethodHooks<T> {
  const through = viewHooks(sink, target, core, ['query', 'execute'], (raw) => {
    const kind = shapeOfTarget(raw);
    if (kind !== 'callbackConnection' && kind !== 'callbackPool') return null;
    const rawSite: CallSite = { driver: DRIVER, sink, connectionId: kind === 'callbackConnection' ? () => threadIdOf(raw) : () => null };
    return callbackCalls(rawSite, { last: null });
  });
  const chained =
    (shapeOf: typeof queryShape): MethodHook<T> =>
    (original) =>
      function chained(...args: unknown[]) {
        const values = valuesOf(args[0], args[1]);
        return track(site, shapeOf(args[0], values, memo), () => original(...args), promiseRows, values);
      };
  return { query: through.query ?? chained(queryShape), execute: through.execute ?? chained(executeShape) };
}

/**
 * Hooks that run the promise object's `methods` on a receiver whose callback object is an `Object.create`d, counted view
 * of the raw one; built only for methods that read as mysql2's. Not a Proxy: its traps cost more than the promise saved.
 */
function viewHooks<T extends object>(
  sink: StatementSink,
  target: T,
  core: 'connection' | 'pool' | 'statement',
  methods: readonly string[],
  counted: (raw: Loose) => Partial<Record<string, MethodHook<Loose>>> | null,
): MethodHooks<T> {
  const reading = promiseViewMethods(sink, target, core, methods);
  const raw = (target as Loose)[core];
  if (reading.length === 0 || raw === null || typeof raw !== 'object') return {};
  const rawCore = raw as Loose;
  const hooks = counted(rawCore);
  if (hooks === null || reading.some((m) => typeof rawCore[m] !== 'function' || hooks[m] === undefined)) return {};
  const viewMethods: PropertyDescriptorMap = {};
  for (const m of reading) viewMethods[m] = { value: hooks[m]!((rawCore[m] as AnyMethod).bind(rawCore), rawCore, rawCore) };
  const receiver: object = objectCreate(target, { [core]: { value: objectCreate(rawCore, viewMethods), enumerable: true } });
  const out: MethodHooks<T> = {};
  for (const m of reading) {
    const run = reflectGet(target, m) as AnyMethod;
    out[m] = () =>
      function throughView(...args: unknown[]) {
        return run.apply(receiver, args);
      };
  }
  return out;
}

type AnyMethod = (this: unknown, ...a: unknown[]) => unknown;

const TRANSACTION_CONTROL = {
  beginTransaction: 'START TRANSACTION',
  commit: 'COMMIT',
  rollback: 'ROLLBACK',
} as const;

function threadIdOf(connection: unknown): number | null {
  const id = (connection as Loose | null)?.threadId;
  return typeof id === 'number' ? id : null;
}

/**
 * Counts every call on a mysql2 connection or pool (promise or callback API) into `sink`. The wrapper has the
 * same type and behaviour as the original; connections obtained from a wrapped pool are wrapped too.
 */
export function wrapMysql2<T extends object>(target: T, sink: StatementSink, _opts?: WrapOptions): T {
  return wrapOnce(DRIVER, target, sink, () => {
    const kind = shapeOfTarget(target);
    if (!kind) {
      throw new SqltallyError('not a mysql2 connection or pool (promise or callback API)', {
        phase: 'wrap',
        hint: 'pass what mysql2.createConnection/createPool or mysql2/promise returned; pool clusters are not counted',
      });
    }
    const mark: WrapperMark = { driver: DRIVER, sink, target };
    switch (kind) {
      case 'promiseConnection':
        return wrapPromiseConnection(target, sink, mark);
      case 'promisePool':
        return wrapPromisePool(target, sink, mark);
      case 'callbackConnection':
        return wrapCallbackConnection(target, sink, mark, { driver: DRIVER, sink, connectionId: () => threadIdOf(target) });
      case 'callbackPool':
        return wrapCallbackConnection(target, sink, mark, { driver: DRIVER, sink, connectionId: () => null });
    }
  });
}

function wrapPromiseConnection<T extends object>(target: T, sink: StatementSink, mark: WrapperMark): T {
  const site: CallSite = {
    driver: DRIVER,
    sink,
    connectionId: () => threadIdOf((target as Loose).connection),
  };
  const hooks: MethodHooks<T> = {
    ...promiseCalls<T>(site, { last: null }, target, 'connection', sink),
    prepare: (original) =>
      function prepare(...args: unknown[]) {
        const sql = sqlOf(args[0]);
        const prepared = track(site, shape('prepare', 'prepare', sql, 0, 0), () => original(...args), noRows) as Promise<object>;
        return prepared.then((statement) => wrapPromiseStatement(statement, sink, site, sql));
      },
  };
  for (const [method, sql] of Object.entries(TRANSACTION_CONTROL)) {
    hooks[method] = (original) =>
      function transactionControl(...args: unknown[]) {
        return track(site, shape(method, 'query', sql, 0), () => original(...args), noRows);
      };
  }
  return countedProxy(target, mark, hooks, { connection: (core) => wrapMysql2(core, sink) });
}

function wrapPromisePool<T extends object>(target: T, sink: StatementSink, mark: WrapperMark): T {
  const site: CallSite = { driver: DRIVER, sink, connectionId: () => null };
  const hooks: MethodHooks<T> = {
    ...promiseCalls<T>(site, { last: null }, target, 'pool', sink),
    getConnection: (original) =>
      function getConnection(...args: unknown[]) {
        return (original(...args) as Promise<object>).then((connection) => wrapMysql2(connection, sink));
      },
  };
  return countedProxy(target, mark, hooks, { pool: (core) => wrapMysql2(core, sink) });
}

/**
 * One counted call on the callback API: with a callback the event is recorded just before it runs; without one
 * (event-emitter mode) when the returned command emits `end`.
 */
function callbackCall(site: CallSite, callShape: CallShape, args: unknown[], original: (...a: unknown[]) => unknown, values?: unknown): unknown {
  const cb = callbackIndex(args);
  if (cb >= 0) return trackCallback(site, callShape, args, cb, original, mysql2RowsAffected, values);
  const caller = callerAtCall(site, callShape);
  const timed = site.sink.timed !== false;
  const start = timed ? nowNs() : 0;
  const end = (): number => (timed ? nowNs() : 0);
  let command: unknown;
  try {
    command = original(...args);
  } catch (error) {
    emit(site, callShape, start, end(), null, error, undefined, caller);
    throw error;
  }
  const emitter = command as { once?: (event: string, listener: () => void) => unknown } | null;
  if (emitter && typeof emitter.once === 'function') {
    emitter.once('end', () => emit(site, callShape, start, end(), null, null, undefined, caller));
  } else {
    emit(site, callShape, start, end(), null, null, undefined, caller);
  }
  return command;
}

/** `query` and `execute` of the callback API, on a connection or a pool. */
function callbackCalls<T>(site: CallSite, memo: ShapeMemo): { query: MethodHook<T>; execute: MethodHook<T> } {
  return {
    query: (original) =>
      function query(...args: unknown[]) {
        const values = valuesOf(args[0], args[1]);
        return callbackCall(site, queryShape(args[0], values, memo), args, original, values);
      },
    execute: (original) =>
      function execute(...args: unknown[]) {
        const values = valuesOf(args[0], args[1]);
        return callbackCall(site, executeShape(args[0], values, memo), args, original, values);
      },
  };
}

function wrapCallbackConnection<T extends object>(target: T, sink: StatementSink, mark: WrapperMark, site: CallSite): T {
  const hooks: MethodHooks<T> = {
    ...callbackCalls<T>(site, { last: null }),
    promise: (original) =>
      function promise(...args: unknown[]) {
        return wrapMysql2(original(...args) as object, sink);
      },
  };
  if (fn(target as Loose, 'getConnection')) {
    hooks.getConnection = (original) =>
      function getConnection(...args: unknown[]) {
        const cb = args[0] as (this: unknown, err: unknown, connection?: unknown) => unknown;
        return original(function (this: unknown, err: unknown, connection?: unknown) {
          return cb.call(this, err, connection ? wrapMysql2(connection, sink) : connection);
        });
      };
  } else {
    hooks.prepare = (original) =>
      function prepare(...args: unknown[]) {
        const sql = sqlOf(args[0]);
        const cb = callbackIndex(args);
        if (cb >= 0) {
          const user = args[cb] as (this: unknown, err: unknown, statement?: unknown) => unknown;
          args[cb] = function (this: unknown, err: unknown, statement?: unknown) {
            return user.call(this, err, statement ? wrapCallbackStatement(statement as object, sink, site, sql) : statement);
          };
        }
        return callbackCall(site, shape('prepare', 'prepare', sql, 0, 0), args, original);
      };
    for (const [method, sql] of Object.entries(TRANSACTION_CONTROL)) {
      hooks[method] = (original) =>
        function transactionControl(...args: unknown[]) {
          return callbackCall(site, shape(method, 'query', sql, 0), args, original);
        };
    }
  }
  return countedProxy(target, mark, hooks);
}

/**
 * The statement from promise `prepare()`: `execute(values)` is counted as `query` is (promiseCalls: a counted view of
 * `this.statement` where mysql2's source reads so, else its promise chained); `close` passes through.
 */
function wrapPromiseStatement(statement: object, sink: StatementSink, site: CallSite, sql: string): object {
  return wrapOnce(DRIVER, statement, sink, () => {
    // A loop of executes hands the window one shape: found by identity, its text asked about once per window.
    const memo: ShapeMemo = { last: null };
    const through = viewHooks(sink, statement, 'statement', ['execute'], () => ({ execute: callbackStatementExecute(site, sql, memo) }));
    const hooks: MethodHooks<object> = {
      execute:
        through.execute ??
        ((original) =>
          function chained(...args: unknown[]) {
            const callShape = memoShape(memo, 'execute', 'execute', sql, countParameterValues(args[0]), 1, 'mysql');
            return track(site, callShape, () => original(...args), promiseRows, args[0]);
          }),
    };
    return countedProxy(statement, { driver: DRIVER, sink, target: statement }, hooks);
  });
}

/** A callback statement's `execute(values, cb)`, counted. */
function callbackStatementExecute(site: CallSite, sql: string, memo: ShapeMemo): MethodHook<object> {
  return (original) =>
    function execute(...args: unknown[]) {
      const values = typeof args[0] === 'function' ? undefined : args[0];
      const callShape = memoShape(memo, 'execute', 'execute', sql, countParameterValues(values), 1, 'mysql');
      return callbackCall(site, callShape, args, original, values);
    };
}

/** The statement from callback `prepare(sql, cb)`: `execute(values, cb)` is counted. */
function wrapCallbackStatement(statement: object, sink: StatementSink, site: CallSite, sql: string): object {
  return wrapOnce(DRIVER, statement, sink, () => {
    const hooks: MethodHooks<object> = { execute: callbackStatementExecute(site, sql, { last: null }) };
    return countedProxy(statement, { driver: DRIVER, sink, target: statement }, hooks);
  });
}

/*
 * BIGINT and DECIMAL come back as strings on both MySQL drivers (`supportBigNumbers` + `bigNumberStrings`, which the
 * mariadb connector honours too), so a workload's verification reads the same values whichever driver wrote them.
 */
export const MYSQL_NUMBER_OPTIONS = { supportBigNumbers: true, bigNumberStrings: true } as const;

/** The first mysql2 release whose explicit `prepare()` neither uses nor fills the statement cache (`execute()` still does). */
const PREPARE_BYPASSES_CACHE_FROM = [3, 25, 0] as const;

/** Whether this mysql2 release's `prepare()` bypasses the statement cache; null when the version is not known. */
export function prepareBypassesCache(version: string | null): boolean | null {
  const match = version === null ? null : /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!match) return null;
  for (let i = 0; i < PREPARE_BYPASSES_CACHE_FROM.length; i++) {
    const part = Number(match[i + 1]);
    if (part !== PREPARE_BYPASSES_CACHE_FROM[i]) return part > PREPARE_BYPASSES_CACHE_FROM[i]!;
  }
  return true;
}

// The MySQL protocol model, but `prepare()` on a release that bypasses the cache prepares once per call and claims
// no cached statement; an unknown release may do either.
const mysql2Model: DriverModel = (group, ctx) => {
  const bypass = group.kind === 'prepare' ? prepareBypassesCache(ctx.driverVersion) : false;
  if (bypass === false) return mysqlProtocolModel(group, ctx);
  const prepares: Range = bypass ? one(group.calls) : { min: 0, max: group.calls };
  return {
    wire: { COM_STMT_PREPARE: prepares },
    server: { prepares, statements: one(0) },
    wireWords: bypass
      ? `1 COM_STMT_PREPARE (mysql2 ${ctx.driverVersion}: prepare() bypasses the statement cache)`
      : `${rangeText(prepares)} COM_STMT_PREPARE (mysql2 release not known: prepare() may bypass the statement cache)`,
    serverWords: bypass ? '1 prepare' : `${rangeText(prepares)} prepares`,
  };
};

/** mysql2: promise and callback connections and pools; the connection sqltally opens is a promise one. */
export const MYSQL2_DRIVER: DriverModule<'mysql2', import('mysql2/promise').Connection> = {
  name: 'mysql2',
  packageName: 'mysql2',
  backends: ['mariadb', 'mysql'],
  dialect: 'mysql',
  embedded: false,
  isClosed: () => false,
  releases: [],
  compatReleases: ['mysql2-3.11', 'mysql2-3.26'],
  accepts: 'a mysql2 connection or pool, promise or callback API (mysql2.createConnection/createPool, mysql2/promise)',
  recognises: (value: unknown) => value !== null && typeof value === 'object' && shapeOfTarget(value) !== null,
  wrap: (target, sink) => wrapMysql2(target, sink),
  async open(connection, opts) {
    const net = networkTarget('mysql2', connection, opts);
    const mysql = await loadDriverPackage<typeof import('mysql2/promise')>(
      opts.driverPackage ? `${opts.driverPackage}/promise` : 'mysql2/promise',
      'mysql2',
      opts.backend,
    );
    const handle = await mysql.createConnection({
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      ...(net.database ? { database: net.database } : {}),
      ...(opts.connectTimeoutMs === undefined ? {} : { connectTimeout: opts.connectTimeoutMs }),
      ...MYSQL_NUMBER_OPTIONS,
      ...opts.driverOptions,
    });
    // A server that goes away under an idle connection emits 'error'; unheard, that takes the process down.
    handle.on('error', () => undefined);
    return { handle, connectionId: handle.threadId, close: () => handle.end() };
  },
  streamOptions: (open) => ({ stream: () => open() }),
  ownSql: (h, onLost) => {
    h.on('error', (error) => onLost(messageOf(error)));
    return async (sql, params) => (await h.query(sql, params ? [...params] : undefined))[0] as Record<string, unknown>[];
  },
  runSql: async (h, sql) => (await h.query(sql))[0] as unknown[],
  ping: (h) => h.ping(),
  // The binary protocol on purpose: MariaDB's text protocol prints a DOUBLE with 15 significant digits
  // (942.9155000039999 reads back as 942.915500004); the binary one sends its 8 bytes.
  rowSource: (h) => ({
    all: async (sql, params = []) => (await h.execute(sql, [...params] as import('mysql2').ExecuteValues[]))[0] as Record<string, unknown>[],
  }),
  model: mysql2Model,
  stableWireBytes: true,
};
