import { AsyncResource } from 'node:async_hooks';
import { finished } from 'node:stream';
import type { Sql } from 'postgres';
import { messageOf } from '../shared/errors';
import type { CallProtocol, CallShape, StatementSink } from '../sql/events';
import { classifyCached } from '../sql/statement-cache';
import type { CallSite, WrapperMark } from './counted';
import { callEnd, callStart, emit, memoShape, nowNs, WRAPPED, wrapOnce } from './counted';
import { loadDriverPackage, networkTarget } from './load';
import { classCounts, UNBOUNDED, type CallGroup, type Contribution, type DriverModel, type DriverModule, type ModelContext, type Range } from './module';
import { mayBeCountedOnce, postgresServerCounts, withCopyIn, type ByProtocol } from './postgres-model';
import { defineProperty, ErrorClass, hasOwn, isArray, reflectApply, reflectGet } from '../shared/intrinsics';
import { FORCED_REASON, forcedPlain } from './compat/path';
import {
  callerAtBuild,
  isStream,
  countWhenRun,
  keepOrigin,
  originMismatch,
  POSTGRES_JS_ORIGIN,
  POSTGRES_JS_QUERY_HANDLER,
  queryHandlerMismatch,
  rowsOf,
  type PostgresJsQuery,
  type SharedHandlers,
  type Site,
} from './compat/postgres-js';

const DRIVER = 'postgres-js';

/**
 * A synthetic event for what postgres.js sends itself in `begin` and `savepoint`: BEGIN as a simple Query, the rest as
 * templates (named statements unless the `sql` has `prepare: false`).
 */
function control(site: CallSite, sql: string, protocol: CallProtocol, at = nowNs()): void {
  const shape: CallShape = { method: 'begin', kind: 'query', sql, statementClass: classifyCached(sql, 'postgres'), bindValues: 0, parameterSets: 1, protocol };
  emit(site, shape, at, at, null, null);
}

/** `prepare` of a `postgres(...)` instance's options: true unless turned off. A transaction's or a reserved `sql` has none of its own. */
function preparesOf(target: object): boolean | undefined {
  const options = reflectGet(target, 'options') as { prepare?: unknown } | undefined;
  return options !== null && typeof options === 'object' ? options.prepare !== false : undefined;
}

type AnyFunction = (...args: unknown[]) => unknown;

/** What a transaction's or reserved `sql` takes from the `sql` it came from. */
interface Inherited {
  named: boolean;
  close: unknown;
}

/**
 * Counts every query run through a postgres.js `sql` (also `sql.begin`'s and `sql.reserve()`'s) into `sink`; same
 * function and behaviour out. Templates, `unsafe` and `file` are one `query` event each when they run (a fragment is
 * part of its parent); `sql.begin(fn)` adds its BEGIN and COMMIT/ROLLBACK (method `begin`, no duration), `savepoint`
 * its SAVEPOINT; a cursor or `forEach` is one call until its last batch. Not counted: listen/notify, large objects, end.
 */
export function wrapPostgresJs<T extends object>(target: T, sink: StatementSink, inherited?: Inherited): T {
  return wrapOnce(DRIVER, target, sink, () => {
    // A transaction's or a reserved `sql` has neither of these of its own: they come from the `sql` it came from.
    // Whether postgres.js's own COMMIT, ROLLBACK and SAVEPOINT go out named:
    const named = preparesOf(target) ?? inherited?.named ?? true;
    const close: unknown = reflectGet(target, 'CLOSE') ?? inherited?.close;
    const passed: Inherited = { named, close };
    const tagged: CallProtocol = named ? 'named' : 'extended';
    const site: Site = { driver: DRIVER, sink, connectionId: () => null, memo: { last: null }, close };
    const mark: WrapperMark = { driver: DRIVER, sink, target };
    const shared: SharedHandlers = {};
    const forced = forcedPlain();
    // The last reasons told to the sink (null: the fast path): a query is checked as it is built, the sink told on a change.
    let toldHandler: string | null | undefined;
    let toldOrigin: string | null | undefined;
    const counted = (result: unknown, method: string, builder: AnyFunction, args: unknown[]): unknown => {
      // Only a query is thenable: `sql(rows)`, `sql('name')` and fragments build helpers, which are not calls.
      if (!isPromiseLike(result)) return result;
      const handlerWhy = forced ? FORCED_REASON : queryHandlerMismatch(result);
      if (handlerWhy !== toldHandler) sink.notePath?.(DRIVER, POSTGRES_JS_QUERY_HANDLER, (toldHandler = handlerWhy));
      if (handlerWhy !== null) {
        countWhenAwaited(result, site, method, args, tagged);
        return result;
      }
      const query = result as unknown as PostgresJsQuery;
      const originWhy = forced ? FORCED_REASON : originMismatch(query);
      if (originWhy !== toldOrigin) sink.notePath?.(DRIVER, POSTGRES_JS_ORIGIN, (toldOrigin = originWhy));
      if (originWhy === null) keepOrigin(query, method, builder);
      countWhenRun(query, site, method, callerAtBuild(sink, query.strings, method), shared);
      return result;
    };
    const hooks: Record<string, (original: AnyFunction) => AnyFunction> = {
      unsafe: (original) =>
        function unsafe(...args) {
          return counted(original(...args), 'unsafe', unsafe, args);
        },
      file: (original) =>
        function file(...args) {
          return counted(original(...args), 'file', file, args);
        },
      begin:
        (original) =>
        (...args) => {
          const fnIndex = args.length - 1;
          const body = args[fnIndex] as AnyFunction;
          args[fnIndex] = (tx: object) => body(wrapPostgresJs(tx, sink, passed));
          const options = typeof args[0] === 'string' && fnIndex > 0 ? ` ${args[0].replace(/[^a-z ]/gi, '')}` : '';
          sink.inFlight?.(1);
          control(site, `BEGIN${options}`, 'simple');
          return (original(...args) as Promise<unknown>).then(
            (value) => {
              control(site, 'COMMIT', tagged);
              sink.inFlight?.(-1);
              return value;
            },
            (error: unknown) => {
              control(site, 'ROLLBACK', tagged);
              sink.inFlight?.(-1);
              throw error;
            },
          );
        },
      savepoint:
        (original) =>
        (...args) => {
          const fnIndex = args.length - 1;
          const body = args[fnIndex] as AnyFunction;
          args[fnIndex] = (tx: object) => body(wrapPostgresJs(tx, sink, passed));
          control(site, 'SAVEPOINT', tagged);
          return (original(...args) as Promise<unknown>).catch((error: unknown) => {
            control(site, 'ROLLBACK TO SAVEPOINT', tagged);
            throw error;
          });
        },
      reserve:
        (original) =>
        (...args) =>
          (original(...args) as Promise<object>).then((reserved) => wrapPostgresJs(reserved, sink, passed)),
    };
    const replaced = new Map<PropertyKey, AnyFunction>();
    // sql`...` builds a query; sql(rows, ...columns) and sql('name') build helpers that are not calls.
    const build = function build(fn: T, thisArg: unknown, args: unknown[]): unknown {
      return counted(reflectApply(fn as AnyFunction, thisArg, args), 'sql', build as AnyFunction, args);
    };
    const proxy: T = new Proxy(target, {
      apply: build,
      get(t, prop) {
        if (prop === WRAPPED) return mark;
        const existing = replaced.get(prop);
        if (existing) return existing;
        const value: unknown = reflectGet(t, prop);
        const hook = typeof prop === 'string' && hasOwn(hooks, prop) ? hooks[prop] : undefined;
        if (!hook || typeof value !== 'function') return value;
        const replacement = hook((value as AnyFunction).bind(t));
        replaced.set(prop, replacement);
        return replacement;
      },
    });
    return proxy;
  });
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * The plain path (compat/postgres-js.ts): a query counted when first awaited (its `then` shadowed on the instance),
 * `.describe()` and `.cursor()` shadowed too, so a fragment, never awaited, is never counted, as on the fast path.
 */
function countWhenAwaited(query: PromiseLike<unknown>, site: Site, method: string, args: unknown[], tagged: CallProtocol): void {
  const then = query.then;
  const strings = method === 'sql' && isArray(args[0]) ? (args[0] as readonly string[]) : typeof args[0] === 'string' && method === 'unsafe' ? [args[0]] : null;
  const asked = strings !== null ? callerAtBuild(site.sink, strings, method) : undefined;
  const values = method === 'sql' ? args.slice(1) : isArray(args[1]) ? (args[1] as unknown[]) : [];
  let protocol = plainProtocol(method, args, tagged);
  let started = false;
  // The code stopped reading a cursor (`break`): postgres.js closes the portal by itself, and the call lasts until then.
  let running = false;
  let letGo = false;
  let batchStatement: Statement | undefined;
  const noteBatch = (batch: unknown): void => {
    batchStatement ??= (batch as { statement?: Statement } | null | undefined)?.statement;
  };
  const own = (name: string, value: AnyFunction): void => void defineProperty(query, name, { configurable: true, writable: true, value });
  const run = (): void => {
    if (!started) {
      started = true;
      running = true;
      const start = callStart(site);
      const end = (value: unknown, error: unknown): void => {
        running = false;
        // `.describe()` resolves with the statement itself; a cursor's last result may have none, its first batch has.
        const statement =
          protocol === 'describe' ? (value as Statement | undefined) : ((value as { statement?: Statement } | null | undefined)?.statement ?? batchStatement);
        const sql = typeof statement?.string === 'string' ? statement.string : strings !== null ? placeholdered(strings) : '';
        const bound = isArray(statement?.types) ? statement.types.length : values.length;
        const pid = (value as { state?: { pid?: unknown } } | null | undefined)?.state?.pid;
        const shape = memoShape(site.memo, method, 'query', sql, bound, 1, 'postgres', error === null ? protocol : undefined);
        if (asked !== undefined && asked.text !== sql) site.sink.askAnswered?.(asked.text);
        callEnd(site, shape, start, error === null ? rowsOf(value) : null, error, values, asked?.caller, typeof pid === 'number' ? pid : null);
        if (letGo) site.sink.letGo?.(-1);
      };
      // A COPY's `writable()` / `readable()` resolves with its stream: the call lasts until the stream is done. Its
      // `COPY n` resolves the query again, unseen by a public `then`, so its rows stay unknown here.
      const settled = (value: unknown): void =>
        isStream(value) ? void finished(value as NodeJS.ReadableStream, (error) => end(undefined, error ?? null)) : end(value, null);
      reflectApply(then, query, [settled, (error: unknown) => end(undefined, error ?? new ErrorClass('query rejected'))]);
    }
  };
  own('then', function countedThen(this: unknown, ...a: unknown[]): unknown {
    run();
    return reflectApply(then, this, a);
  });
  // `.execute()` runs the query at once, awaited or not: counted from then.
  const execute = reflectGet(query, 'execute');
  if (typeof execute === 'function') {
    own('execute', function countedExecute(this: unknown, ...a: unknown[]): unknown {
      run();
      return reflectApply(execute as AnyFunction, this, a);
    });
  }
  const describe = reflectGet(query, 'describe');
  if (typeof describe === 'function') {
    own('describe', function countedDescribe(this: unknown, ...a: unknown[]): unknown {
      protocol = 'describe';
      return reflectApply(describe as AnyFunction, this, a);
    });
  }
  const cursor = reflectGet(query, 'cursor');
  if (typeof cursor !== 'function') return;
  own('cursor', function countedCursor(this: unknown, ...a: unknown[]): unknown {
    protocol = 'cursor';
    const at = typeof a[0] === 'function' ? 0 : 1;
    const fn = a[at];
    if (typeof fn === 'function') {
      a[at] = (batch: unknown, ...rest: unknown[]): unknown => (noteBatch(batch), reflectApply(fn as AnyFunction, undefined, [batch, ...rest]));
      return reflectApply(cursor as AnyFunction, this, a);
    }
    const rows = typeof a[0] === 'number' ? a[0] : 1;
    return cursorIterator(
      (next) => reflectApply(cursor as AnyFunction, query, [rows, (batch: unknown) => (noteBatch(batch), next(batch))]) as PromiseLike<unknown>,
      site.close,
      () => {
        if (!running || letGo) return;
        letGo = true;
        site.sink.letGo?.(1);
      },
    );
  });
}

/** An async context of the wrapper's own, made at load, outside any window. */
const OWN_SCOPE = new AsyncResource('sqltally.postgres-js');

/**
 * A cursor's async iterator, as postgres.js's own, on the documented callback form: a batch waits until the code asks
 * for the next (or answers `close` when it stops), and the query settles when its portal is read or closed.
 */
function cursorIterator(
  run: (onBatch: (batch: unknown) => Promise<unknown>) => PromiseLike<unknown>,
  close: unknown,
  stopped: () => void,
): AsyncIterable<unknown> {
  let waiting: { resolve: (r: IteratorResult<unknown>) => void; reject: (e: unknown) => void } | null = null;
  let release: ((answer: unknown) => void) | null = null;
  let started = false;
  let done = false;
  let failure: { error: unknown } | null = null;
  const onBatch = (batch: unknown): Promise<unknown> => {
    const next = waiting;
    waiting = null;
    next?.resolve({ value: batch, done: false });
    return new Promise((resolve) => (release = resolve));
  };
  const settled = (error: { error: unknown } | null): void => {
    done = true;
    failure = error;
    const next = waiting;
    waiting = null;
    if (next) {
      if (error) next.reject(error.error);
      else next.resolve({ value: undefined, done: true });
    }
  };
  const iterator: AsyncIterator<unknown> = {
    next: () => {
      if (failure) return Promise.reject(failure.error);
      if (done) return Promise.resolve({ value: undefined, done: true });
      return new Promise<IteratorResult<unknown>>((resolve, reject) => {
        waiting = { resolve, reject };
        const go = release;
        release = null;
        if (go) go(undefined);
        else if (!started) {
          started = true;
          // Out of the caller's async context: the wrapper's wait for a portal closed after a `break` is not the code's work.
          OWN_SCOPE.runInAsyncScope(() =>
            run(onBatch).then(
              () => settled(null),
              (error: unknown) => settled({ error }),
            ),
          );
        }
      });
    },
    return: () => {
      const go = release;
      release = null;
      if (!done && go) {
        done = true;
        stopped();
        go(close);
      }
      return Promise.resolve({ value: undefined, done: true });
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

/** What postgres.js documents of a result's `statement` (and `.describe()` resolves with). */
type Statement = { string?: unknown; types?: unknown };

/** A template's text as postgres.js numbers its parameters (`$1`, `$2`, ...); a one-string array is that string. */
function placeholdered(strings: readonly string[]): string {
  let text = strings[0] ?? '';
  for (let i = 1; i < strings.length; i++) text += `$${i}${strings[i]}`;
  return text;
}

/**
 * The protocol postgres.js picks, from the call's documented options: `unsafe`/`file` without parameters a simple Query,
 * with them unnamed unless `prepare: true`; a template as the `sql` prepares. Open where they cannot tell.
 */
function plainProtocol(method: string, args: unknown[], tagged: CallProtocol): CallProtocol | undefined {
  if (method === 'sql') return tagged;
  const params = isArray(args[1]) ? args[1].length : 0;
  const options = (args.length === 2 && !isArray(args[1]) ? args[1] : args[2]) as { simple?: unknown; prepare?: unknown } | undefined;
  const simple = options !== null && typeof options === 'object' && 'simple' in options ? options.simple === true : params === 0;
  if (simple) return 'simple';
  if (method !== 'unsafe') return undefined;
  return options?.prepare === true ? 'named' : 'extended';
}

function isSql(value: unknown): boolean {
  if (typeof value !== 'function') return false;
  const o = value as unknown as Record<string, unknown>;
  return typeof o.unsafe === 'function' && typeof o.begin === 'function' && typeof o.end === 'function' && typeof o.array === 'function';
}

/**
 * postgres.js: a template is named, parsed once per connection (unnamed under `prepare: false`), `unsafe` unnamed or simple.
 * Calls whose protocol was seen get exact counts; the rest a range, a COMMIT or ROLLBACK taken for `sql.begin()`'s.
 */
const range = (min: number, max: number): Range => ({ min, max });

const postgresJsModel: DriverModel = (group, ctx) => {
  const { simple, extended: unnamed, named, cursor, describe } = group.byProtocol;
  if (group.calls > 0 && simple + unnamed + named + cursor + describe === group.calls) {
    return withCopyIn(postgresJsExactModel(group, ctx, { simple, unnamed, named, cursor, describe }), group, true);
  }
  const calls = group.calls;
  const extended = Math.min(calls, group.callsWithValues);
  const preparedControl = mayBeCountedOnce(group.statementClass);
  const counted = preparedControl ? range(0, ctx.claimPrepare()) : range(calls, calls);
  return withCopyIn(
    {
      wire: {
        Parse: range(0, calls),
        Describe: range(0, calls),
        Flush: range(0, calls),
        Bind: range(preparedControl ? calls : extended, calls),
        Execute: range(preparedControl ? calls : extended, calls),
        Sync: range(preparedControl ? calls : extended, calls),
        Query: range(0, preparedControl ? 0 : calls - extended),
      },
      server: { statements: counted, ...classCounts(group, counted) },
      wireWords: preparedControl
        ? 'Bind/Execute/Sync of its prepared statement (+ Parse once per connection)'
        : 'Bind/Execute/Sync (+ Parse/Describe/Flush once per connection and text), or Query',
      serverWords: preparedControl ? 'counted by pg_stat_statements only at its first execution on the connection' : '1 pg_stat_statements call',
    },
    group,
    true,
  );
};

/**
 * Every call's protocol is known: Query per simple call, Bind/Execute/Sync per other, Parse/Describe/Flush per unnamed
 * call and up to once per named one (new parameter types parse again); a cursor adds messages per batch.
 */
function postgresJsExactModel(group: CallGroup, ctx: ModelContext, n: ByProtocol & { cursor: number; describe: number }): Contribution {
  const exact = (v: number): Range => ({ min: v, max: v });
  const extended = n.unnamed + n.named + n.cursor;
  const parses = range(n.unnamed + n.describe, extended + n.describe);
  // Transaction control has no parameters, so its named statement is parsed once per connection.
  const firstRuns = n.named > 0 && mayBeCountedOnce(group.statementClass) ? range(0, ctx.claimPrepare()) : range(0, n.named);
  const words = [
    n.simple > 0 ? 'Query' : '',
    n.unnamed > 0 ? 'Parse/Describe/Bind/Execute/Sync' : '',
    n.named > 0 ? 'Bind/Execute/Sync (+ Parse/Describe once per connection)' : '',
    n.cursor > 0 ? 'a cursor: Bind, Execute/Flush per batch of rows, Sync (+ Parse/Describe)' : '',
    n.describe > 0 ? 'Parse/Describe/Flush/Sync, nothing executed' : '',
  ];
  const executes = n.cursor > 0 ? range(extended, UNBOUNDED) : exact(extended);
  return {
    wire: {
      Query: exact(n.simple),
      Parse: parses,
      Describe: parses,
      Flush: range(0, n.cursor > 0 ? UNBOUNDED : parses.max),
      Bind: exact(extended),
      Execute: executes,
      Sync: exact(extended + n.describe),
    },
    ...postgresServerCounts(group, { simple: n.simple, unnamed: n.unnamed + n.cursor, named: n.named }, firstRuns, n.describe),
    wireWords: words.filter(Boolean).join(' + '),
  };
}

type PostgresFactory = (options: Record<string, unknown>) => Sql;

/** postgres.js (`postgres` on npm): a `sql` function over its own pool; sqltally opens it with one connection. */
export const POSTGRES_JS_DRIVER: DriverModule<'postgres-js', Sql> = {
  name: 'postgres-js',
  packageName: 'postgres',
  backends: ['postgres'],
  dialect: 'postgres',
  embedded: false,
  isClosed: () => false,
  releases: [],
  compatReleases: ['postgres-3.4.0', 'postgres-3.4.10'],
  accepts: "a postgres.js sql instance (postgres(...)), a transaction's sql or a reserved one",
  recognises: isSql,
  wrap: (target, sink) => wrapPostgresJs(target, sink),
  async open(connection, opts) {
    const net = networkTarget('postgres-js', connection, opts);
    const loaded = await loadDriverPackage<{ default: PostgresFactory }>(opts.driverPackage ?? 'postgres', 'postgres-js', opts.backend);
    // One connection, so the window's per-connection facts hold; notices are the server's business, not stdout's.
    const sql = loaded.default({
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      database: net.database,
      max: 1,
      onnotice: () => undefined,
      ...(opts.connectTimeoutMs === undefined ? {} : { connect_timeout: Math.max(1, Math.ceil(opts.connectTimeoutMs / 1000)) }),
      ...opts.driverOptions,
    });
    try {
      // postgres.js connects lazily: connect now, outside any window, and learn the backend pid.
      const [row] = await sql.unsafe('SELECT pg_backend_pid() AS pid');
      const pid = Number((row as { pid?: unknown } | undefined)?.pid);
      return { handle: sql, connectionId: Number.isInteger(pid) ? pid : null, close: () => sql.end({ timeout: 5 }) };
    } catch (error) {
      await sql.end({ timeout: 1 }).catch(() => undefined);
      throw error;
    }
  },
  // Given a socket, postgres.js treats it as connected and starts its handshake at once.
  streamOptions: (open) => ({ socket: () => open() }),
  // postgres.js emits no event for a lost connection; its queries fail with CONNECTION_CLOSED instead.
  ownSql: (h, onLost) => async (sql, params) => {
    try {
      return [...(await h.unsafe(sql, params ? ([...params] as never[]) : []))] as Record<string, unknown>[];
    } catch (error) {
      if ((error as { code?: unknown }).code === 'CONNECTION_CLOSED') onLost(messageOf(error));
      throw error;
    }
  },
  runSql: async (h, sql) => [...(await h.unsafe(sql))],
  ping: null,
  rowSource: (h) => ({ all: async (sql, params = []) => [...(await h.unsafe(sql, [...params] as never[]))] as Record<string, unknown>[] }),
  model: postgresJsModel,
  // Statement names are a random per-connection prefix plus a counter (connection.js `statementId`).
  stableWireBytes: false,
};
