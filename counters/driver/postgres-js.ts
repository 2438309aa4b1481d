import type { Sql } from 'postgres';
import type { StatementSink } from '../events';
import { captureCaller } from '../caller';
import { classifyCached } from '../statement-cache';
import type { CallSite, ShapeMemo, WrapperMark } from './counted';
import { emit, memoShape, nowNs, toCount, WRAPPED, wrapOnce } from './counted';
import { loadDriverPackage, networkTarget } from './load';
import type { DriverModel, DriverModule, Range } from './module';
import { ErrorClass, hasOwn, isArray, reflectApply, reflectGet } from '../intrinsics';

const DRIVER = 'postgres-js';

/**
 * The part of a postgres.js query object (`sql\`...\``, `sql.unsafe(...)`) the wrapper relies on. A query is a lazy
 * Promise: it runs when first awaited (or `.execute()`d), on a connection the pool picks, and a query that is only
 * nested into another one as a fragment never runs at all. So a call is counted when it runs and recorded when it
 * settles, never when it is merely built.
 */
interface PostgresJsQuery {
  handle(...args: unknown[]): unknown;
  resolve(value: unknown): unknown;
  reject(error: unknown): unknown;
  strings: readonly string[];
  /** Set when the query runs: the text sent and its parameters. */
  string?: string;
  parameters?: readonly unknown[];
  /** The backend that ran it (BackendKeyData), once it ran. */
  state?: { pid?: number } | null;
  options?: { simple?: boolean };
}

function isQuery(value: unknown): value is PostgresJsQuery {
  if (value === null || typeof value !== 'object') return false;
  const q = value as Record<string, unknown>;
  return typeof q.handle === 'function' && typeof q.resolve === 'function' && typeof q.reject === 'function' && isArray(q.strings);
}

const ROW_COUNTING_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE', 'COPY']);

/** postgres.js results are arrays carrying `command` and `count` (the CommandComplete tag's number). */
function rowsOf(result: unknown): number | null {
  if (result === null || typeof result !== 'object') return null;
  const { command, count } = result as { command?: unknown; count?: unknown };
  return typeof command === 'string' && ROW_COUNTING_COMMANDS.has(command) ? toCount(count) : null;
}

/** A counted query's state, under a symbol on the query: one object per query, read by the shared shadows below. */
const RUN: unique symbol = Symbol('sqltally.postgres-js.run');

interface Run {
  readonly site: CallSite;
  /** The wrapper's last shape: a loop of one query settles into it without a new shape or a classification. */
  readonly memo: ShapeMemo;
  readonly method: string;
  readonly asked: Asked | undefined;
  readonly handle: PostgresJsQuery['handle'];
  /** When it started running (-1 before); 0 when the window kept no more times then, and no clock was read. */
  start: number;
  running: boolean;
}

type CountedQuery = PostgresJsQuery & { [RUN]: Run };

/**
 * Counts one query when it runs. Its own `handle`, `resolve` and `reject` (instance members postgres.js gives every
 * query) are shadowed on the instance, so nothing global is patched and the query's promise is never touched:
 * observing it with `.then` would run a query that the user only meant as a fragment. Every query a wrapped `sql`
 * builds pays this, run or not and with or without a window: one state object and two closures (resolve and reject
 * may be called unbound, so they keep their query); the shadow of `handle`, a method postgres.js calls on its query,
 * is one function for all. Seven objects a build before (a closure per shadow, a context, a call site per query).
 */
function countQuery(query: PostgresJsQuery, site: CallSite, memo: ShapeMemo, method: string, asked: Asked | undefined): void {
  const run: Run = { site, memo, method, asked, handle: query.handle, start: -1, running: false };
  const resolve = query.resolve;
  const reject = query.reject;
  (query as CountedQuery)[RUN] = run;
  query.handle = countedHandle;
  query.resolve = (value: unknown) => {
    settle(query, run, rowsOf(value), null);
    return resolve(value);
  };
  query.reject = (error: unknown) => {
    settle(query, run, null, error ?? new ErrorClass('query rejected'));
    return reject(error);
  };
}

function countedHandle(this: CountedQuery): unknown {
  const run = this[RUN];
  if (!run.running && run.start < 0) {
    run.running = true;
    run.start = run.site.sink.timed !== false ? nowNs() : 0;
    run.site.sink.inFlight?.(1);
  }
  // eslint-disable-next-line prefer-rest-params
  return reflectApply(run.handle, this, arguments);
}

function settle(query: PostgresJsQuery, run: Run, rows: number | null, error: unknown): void {
  if (!run.running) return;
  run.running = false;
  const sql = query.string ?? askedText(query.strings);
  const shape = memoShape(run.memo, run.method, 'query', sql, query.parameters?.length ?? 0, 1, 'postgres');
  const { site, asked } = run;
  // The ask was about the template's strings; the text recorded says `$1`: answered here, or it stays pending.
  if (asked !== undefined && asked.text !== sql) site.sink.askAnswered?.(asked.text);
  emit(site, shape, run.start, run.start > 0 ? nowNs() : 0, rows, error, query.parameters, asked?.caller, query.state?.pid ?? null);
  site.sink.inFlight?.(-1);
}

/**
 * The user's line of a query built by a text the window has not seen, captured as it is built (`sql\`...\``,
 * `sql.unsafe`): the user's frame is on the stack then, and no longer when the query runs or settles, which
 * postgres.js does from its own callbacks. The text it will send is not built yet, so the window is asked about
 * the template's strings joined (the same text for `unsafe`, a stand-in for a template's).
 */
function callerAtBuild(sink: StatementSink, query: PostgresJsQuery, method: string): Asked | undefined {
  if (sink.needsCaller === undefined) return undefined;
  const text = askedText(query.strings);
  return sink.needsCaller(text) ? { text, caller: captureCaller(`postgres-js.${method} (build)`) } : undefined;
}

/** A caller captured at build, and the text the window was asked about (handed back: StatementSink.askAnswered). */
interface Asked {
  readonly text: string;
  readonly caller: string | null;
}

/**
 * A template's strings joined, once per template: a tagged template hands over the same frozen array at every call
 * of its line, so a loop of one template joined its strings at every build before (even with no window open).
 * `unsafe` and `file` hand a new one-string array each call, whose text is that string.
 */
const joinedTemplates = new WeakMap<readonly string[], string>();

function askedText(strings: readonly string[]): string {
  if (strings.length === 1) return strings[0]!;
  let text = joinedTemplates.get(strings);
  if (text === undefined) {
    text = strings.join('?');
    joinedTemplates.set(strings, text);
  }
  return text;
}

/** A synthetic event for what postgres.js sends itself inside `begin` and `savepoint` (BEGIN, COMMIT, ...). */
function control(site: CallSite, sql: string, at = nowNs()): void {
  emit(site, { method: 'begin', kind: 'query', sql, statementClass: classifyCached(sql, 'postgres'), bindValues: 0, parameterSets: 1 }, at, at, null, null);
}

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * Counts every query run through a postgres.js `sql` instance (`postgres(...)`), a transaction's `sql` inside
 * `sql.begin`, or a reserved connection from `sql.reserve()`, into `sink`. Same function and behaviour out.
 * - Tagged templates, `sql.unsafe` and `sql.file` -> one `query` event each when the query runs (with its text,
 *   parameter count, rows from the command tag and the backend pid that ran it). A query nested as a fragment runs
 *   as part of its parent and is not a call of its own. Concurrent queries are pipelined by postgres.js: that shows
 *   on the wire, not here.
 * - `sql.begin(fn)` -> BEGIN and COMMIT (or ROLLBACK when it rejects) as `query` events with method `begin` and no
 *   duration (postgres.js sends them itself), with `fn` handed a counted transaction `sql`; `savepoint(fn)` adds
 *   SAVEPOINT and, when it rejects, ROLLBACK TO SAVEPOINT.
 * - Not counted: `listen`/`notify`/`subscribe`, `largeObject`, `end`/`close`; cursors and `forEach` are counted once,
 *   when they start.
 */
export function wrapPostgresJs<T extends object>(target: T, sink: StatementSink): T {
  return wrapOnce(DRIVER, target, sink, () => {
    const site: CallSite = { driver: DRIVER, sink, connectionId: () => null };
    const mark: WrapperMark = { driver: DRIVER, sink, target };
    const memo: ShapeMemo = { last: null };
    const counted = (result: unknown, method: string): unknown => {
      if (isQuery(result)) countQuery(result, site, memo, method, callerAtBuild(sink, result, method));
      return result;
    };
    const hooks: Record<string, (original: AnyFunction) => AnyFunction> = {
      unsafe: (original) => (...args) => counted(original(...args), 'unsafe'),
      file: (original) => (...args) => counted(original(...args), 'file'),
      begin: (original) => (...args) => {
        const fnIndex = args.length - 1;
        const body = args[fnIndex] as AnyFunction;
        args[fnIndex] = (tx: object) => body(wrapPostgresJs(tx, sink));
        const options = typeof args[0] === 'string' && fnIndex > 0 ? ` ${args[0].replace(/[^a-z ]/gi, '')}` : '';
        sink.inFlight?.(1);
        control(site, `BEGIN${options}`);
        return (original(...args) as Promise<unknown>).then(
          (value) => {
            control(site, 'COMMIT');
            sink.inFlight?.(-1);
            return value;
          },
          (error: unknown) => {
            control(site, 'ROLLBACK');
            sink.inFlight?.(-1);
            throw error;
          },
        );
      },
      savepoint: (original) => (...args) => {
        const fnIndex = args.length - 1;
        const body = args[fnIndex] as AnyFunction;
        args[fnIndex] = (tx: object) => body(wrapPostgresJs(tx, sink));
        control(site, 'SAVEPOINT');
        return (original(...args) as Promise<unknown>).catch((error: unknown) => {
          control(site, 'ROLLBACK TO SAVEPOINT');
          throw error;
        });
      },
      reserve: (original) => (...args) => (original(...args) as Promise<object>).then((reserved) => wrapPostgresJs(reserved, sink)),
    };
    const replaced = new Map<PropertyKey, AnyFunction>();
    const proxy: T = new Proxy(target, {
      apply(fn, thisArg, args: unknown[]) {
        // sql`...` builds a query; sql(rows, ...columns) and sql('name') build helpers that are not calls.
        return counted(reflectApply(fn as AnyFunction, thisArg, args), 'sql');
      },
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

function isSql(value: unknown): boolean {
  if (typeof value !== 'function') return false;
  const o = value as unknown as Record<string, unknown>;
  return typeof o.unsafe === 'function' && typeof o.begin === 'function' && typeof o.end === 'function' && typeof o.array === 'function';
}

/**
 * postgres.js prepares every tagged query as a named statement once per connection (Parse/Describe/Flush, then
 * Bind/Execute/Sync; later calls Bind/Execute/Sync only), sends `unsafe` with parameters unnamed (Parse every time)
 * and `unsafe` without them as a simple Query. Its own BEGIN is such a simple Query; its COMMIT, ROLLBACK and
 * SAVEPOINT are tagged, hence prepared, and pg_stat_statements (measured on 15) counts a transaction-control
 * statement re-executed from a named prepared statement only the first time on a connection.
 */
const PREPARED_CONTROL = new Set(['commit', 'rollback', 'savepoint']);

const postgresJsModel: DriverModel = (group, ctx) => {
  const calls = group.calls;
  const extended = Math.min(calls, group.callsWithValues);
  const range = (min: number, max: number): Range => ({ min, max });
  const preparedControl = PREPARED_CONTROL.has(group.statementClass);
  const counted = preparedControl ? range(0, ctx.claimPrepare()) : range(calls, calls);
  return {
    wire: {
      Parse: range(0, calls),
      Describe: range(0, calls),
      Flush: range(0, calls),
      Bind: range(preparedControl ? calls : extended, calls),
      Execute: range(preparedControl ? calls : extended, calls),
      Sync: range(preparedControl ? calls : extended, calls),
      Query: range(0, preparedControl ? 0 : calls - extended),
    },
    server: { statements: counted, ...(group.statementClass === 'insert' ? { inserts: counted } : {}), ...(group.statementClass === 'commit' ? { commits: counted } : {}) },
    wireWords: preparedControl
      ? 'Bind/Execute/Sync of its prepared statement (+ Parse once per connection)'
      : 'Bind/Execute/Sync (+ Parse/Describe/Flush once per connection and text), or Query',
    serverWords: preparedControl
      ? 'counted by pg_stat_statements only at its first execution on the connection'
      : '1 pg_stat_statements call',
  };
};

type PostgresFactory = (options: Record<string, unknown>) => Sql;

/** postgres.js (`postgres` on npm): a `sql` function over its own pool; sqltally opens it with one connection. */
export const POSTGRES_JS_DRIVER: DriverModule<'postgres-js', Sql> = {
  name: 'postgres-js',
  packageName: 'postgres',
  backends: ['postgres'],
  dialect: 'postgres',
  releases: [],
  accepts: "a postgres.js sql instance (postgres(...)), a transaction's sql or a reserved one",
  recognises: isSql,
  wrap: (target, sink) => wrapPostgresJs(target, sink),
  async open(connection, opts) {
    const net = networkTarget('postgres-js', connection, opts);
    const loaded = await loadDriverPackage<{ default: PostgresFactory }>(opts.driverPackage ?? 'postgres', 'postgres-js', opts.backend);
    // One connection, so the window's per-connection facts hold; notices are the server's business, not stdout's.
    const sql = loaded.default({ host: net.host, port: net.port, user: net.user, password: net.password, database: net.database, max: 1, onnotice: () => undefined, ...opts.driverOptions });
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
  runSql: async (h, sql) => [...(await h.unsafe(sql))],
  ping: null,
  rowSource: (h) => ({ all: async (sql, params = []) => [...(await h.unsafe(sql, [...params] as never[]))] as Record<string, unknown>[] }),
  model: postgresJsModel,
  // Statement names are a random per-connection prefix plus a counter (connection.js `statementId`).
  stableWireBytes: false,
};
