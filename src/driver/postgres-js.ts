import type { Sql } from 'postgres';
import type { CallProtocol, CallShape, StatementSink } from '../sql/events';
import { captureCaller } from '../shared/caller';
import { classifyCached } from '../sql/statement-cache';
import type { CallSite, ShapeMemo, WrapperMark } from './counted';
import { callEnd, callStart, emit, memoShape, nowNs, toCount, WRAPPED, wrapOnce } from './counted';
import { loadDriverPackage, networkTarget } from './load';
import { classCounts, UNBOUNDED, type CallGroup, type Contribution, type DriverModel, type DriverModule, type ModelContext, type Range } from './module';
import { mayBeCountedOnce, postgresServerCounts, withCopyIn, type ByProtocol } from './postgres-model';
import { defineProperty, ErrorClass, hasOwn, isArray, ownSymbols, reflectApply, reflectGet } from '../shared/intrinsics';

const DRIVER = 'postgres-js';

/**
 * The part of a postgres.js query object (`sql\`...\``, `sql.unsafe(...)`) the wrapper relies on. A query is a lazy
 * Promise: it runs when first awaited (or `.execute()`d), on a connection the pool picks, and a query that is only
 * nested into another one as a fragment never runs at all. So a call is counted when it runs and recorded when it
 * settles, never when it is merely built.
 */
interface PostgresJsQuery {
  /** Set on every query as it is built; its `handle` calls it once, as `this.handler(this)`, when the query runs. */
  handler: QueryHandler;
  resolve(value: unknown): unknown;
  reject(error: unknown): unknown;
  strings: readonly string[];
  /** Set when the query runs: the text sent and its parameters. */
  string?: string;
  parameters?: readonly unknown[];
  /** The backend that ran it (BackendKeyData), once it ran. */
  state?: { pid?: number } | null;
  options?: { simple?: boolean };
  /** Set when the query is built for its connection: whether it goes out as a named (cached) statement. */
  prepare?: boolean;
  /** `.describe()`: Parse and Describe only, nothing executed. */
  onlyDescribe?: boolean;
  /** `.cursor()`: one Execute per batch of rows. */
  cursorFn?: unknown;
  /** `.writable()` / `.readable()`: a COPY whose data goes through a stream. */
  streaming?: boolean;
}

/** postgres.js reads `debug` off a query's handler when it explains an error (`query.origin`). */
type QueryHandler = ((this: unknown, query: PostgresJsQuery) => unknown) & { debug?: unknown };

function isQuery(value: unknown): value is PostgresJsQuery {
  if (value === null || typeof value !== 'object') return false;
  const q = value as Record<string, unknown>;
  return typeof q.handler === 'function' && typeof q.resolve === 'function' && typeof q.reject === 'function' && isArray(q.strings);
}

const ROW_COUNTING_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE', 'COPY']);

/** postgres.js results are arrays carrying `command` and `count` (the CommandComplete tag's number). */
function rowsOf(result: unknown): number | null {
  if (result === null || typeof result !== 'object') return null;
  const { command, count } = result as { command?: unknown; count?: unknown };
  return typeof command === 'string' && ROW_COUNTING_COMMANDS.has(command) ? toCount(count) : null;
}

/** What a wrapped `sql` shares between the queries it builds. */
interface Site extends CallSite {
  /** The wrapper's last shape: a loop of one query settles into it without a new shape or a classification. */
  readonly memo: ShapeMemo;
  /** postgres.js's `CLOSE` (`sql.CLOSE`): what a cursor's loop answers a batch with when it stops early. */
  readonly close: unknown;
}

/**
 * A query's handler, replaced by one that counts the query as it runs, then hands it on. The handler is an own field
 * postgres.js sets on every query and calls once, when the query runs; so a query is counted without a global patch,
 * without a property its class does not have, and without touching its promise (a `.then` would run a query that the
 * user only meant as a fragment). A query built and never run costs a field write (and a template's query a second
 * one, its origin: keepOrigin): the `sql` and `unsafe` queries of one `sql` share their handler, and so share one
 * counting handler per method. Before (a state object under a
 * symbol, a shadowed `handle` and two settle closures written on every query built), a build added about 1 us,
 * most of it the young generation's collector copying what each query carried
 * (`bench/driver-overhead.ts --sections own-network`, "proxy cost per build on postgres.js").
 */
function countWhenRun(query: PostgresJsQuery, site: Site, method: string, asked: Asked | undefined, shared: SharedHandlers): void {
  const original = query.handler;
  if (asked !== undefined) {
    query.handler = countingHandler(site, method, original, asked);
    return;
  }
  const known = shared[method];
  if (known !== undefined && known.original === original) {
    query.handler = known.counting;
    return;
  }
  const counting = countingHandler(site, method, original, undefined);
  // `file` builds a handler per query: sharing it would keep the last file's query alive.
  if (method !== 'file') shared[method] = { original, counting };
  query.handler = counting;
}

type SharedHandlers = Record<string, { readonly original: QueryHandler; readonly counting: QueryHandler } | undefined>;

function countingHandler(site: Site, method: string, original: QueryHandler, asked: Asked | undefined): QueryHandler {
  const counting: QueryHandler = function countingRun(this: unknown, query: PostgresJsQuery): unknown {
    startRun(query, site, method, asked);
     
    return reflectApply(original, this, arguments);
  };
  counting.debug = original.debug;
  return counting;
}

/**
 * The query runs: it is in flight, and its settlement is recorded by shadowing its own `resolve` and `reject`
 * (instance members postgres.js gives every query, which it may call unbound, so each keeps its query).
 */
function startRun(query: PostgresJsQuery, site: Site, method: string, asked: Asked | undefined): void {
  const start = callStart(site);
  let resolve = query.resolve;
  let reject = query.reject;
  let running = true;
  // A cursor left early (below): the call settles after the code let go of it.
  let letGo = false;
  const onResolve = (value: unknown): unknown => {
    // A COPY's `writable()` / `readable()` resolves first with its stream; the query resolves again with its result
    // (`COPY n`) at ReadyForQuery: the call lasts until then.
    if (running && query.streaming === true && isStream(value)) return resolve(value);
    if (running) {
      running = false;
      settle(query, site, method, asked, start, rowsOf(value), null);
      if (letGo) site.sink.letGo?.(-1);
    }
    return resolve(value);
  };
  const onReject = (error: unknown): unknown => {
    if (running) {
      running = false;
      settle(query, site, method, asked, start, null, error ?? new ErrorClass('query rejected'));
      if (letGo) site.sink.letGo?.(-1);
    }
    return reject(error);
  };
  if (query.cursorFn === undefined) {
    query.resolve = onResolve;
    query.reject = onReject;
    return;
  }
  // A cursor read with `for await` gives its query a new resolve and reject at every batch: each is taken as the one
  // to hand on, and the query stays counted until the last batch settles it.
  defineProperty(query, 'resolve', { configurable: true, enumerable: true, get: () => onResolve, set: (f: PostgresJsQuery['resolve']) => void (resolve = f) });
  defineProperty(query, 'reject', { configurable: true, enumerable: true, get: () => onReject, set: (f: PostgresJsQuery['reject']) => void (reject = f) });
  // Each batch goes to the loop through `cursorFn`, and the loop answers with postgres.js's CLOSE when it stops early
  // (`break`). postgres.js then closes the portal by itself, after the loop has ended, with nothing the code could
  // await: from then on the call is one the code let go of (StatementSink.letGo), until it settles.
  let cursorFn = query.cursorFn as (value: unknown) => unknown;
  const answered = (answer: unknown): void => {
    if (answer !== site.close || site.close === undefined || !running || letGo) return;
    letGo = true;
    site.sink.letGo?.(1);
  };
  const onBatch = (value: unknown): unknown => {
    const answer = cursorFn(value);
    if (isPromiseLike(answer)) answer.then(answered, noop);
    else answered(answer);
    return answer;
  };
  defineProperty(query, 'cursorFn', { configurable: true, enumerable: true, get: () => onBatch, set: (f: typeof cursorFn) => void (cursorFn = f) });
}

const noop = (): undefined => undefined;

function isStream(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const o = value as { on?: unknown; pipe?: unknown; write?: unknown };
  return typeof o.on === 'function' && (typeof o.pipe === 'function' || typeof o.write === 'function');
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

function settle(query: PostgresJsQuery, site: Site, method: string, asked: Asked | undefined, start: number, rows: number | null, error: unknown): void {
  const sql = query.string ?? askedText(query.strings);
  const protocol = error === null ? protocolOf(query) : undefined;
  const shape = memoShape(site.memo, method, 'query', sql, query.parameters?.length ?? 0, 1, 'postgres', protocol);
  // The ask was about the template's strings; the text recorded says `$1`: answered here, or it stays pending.
  if (asked !== undefined && asked.text !== sql) site.sink.askAnswered?.(asked.text);
  callEnd(site, shape, start, rows, error, query.parameters, asked?.caller, query.state?.pid ?? null);
}

/**
 * How a query that ran went out, as postgres.js decided when it built it for its connection: a simple Query (`unsafe`
 * without parameters, `.simple()`, a stream), a named statement parsed once per connection (a template, unless the
 * `sql` was made with `prepare: false`) or the unnamed one, parsed every time; a cursor, which executes once per
 * batch of rows; or `.describe()`, which parses and executes nothing. Left open for a failed query, which may have
 * stopped anywhere: the model gives a range for it.
 */
function protocolOf(query: PostgresJsQuery): CallProtocol | undefined {
  if (query.options?.simple === true) return 'simple';
  if (query.cursorFn !== undefined) return 'cursor';
  if (query.onlyDescribe === true) return 'describe';
  return query.prepare === true ? 'named' : query.prepare === false ? 'extended' : undefined;
}

/**
 * The user's line of a query built by a text the window has not seen, captured as it is built (`sql\`...\``,
 * `sql.unsafe`): the user's frame is on the stack then, and no longer when the query runs or settles, which
 * postgres.js does from its own callbacks. The text it will send is not built yet, so the window is asked about
 * the template's strings joined (the same text for `unsafe`, a stand-in for a template's).
 */
function callerAtBuild(sink: StatementSink, query: PostgresJsQuery, method: string): Asked | undefined {
  if (sink.needsCaller === undefined) return undefined;
  // As `callerAtCall`: a window's answer about a template stays no once given (asked, then answered or capped), so
  // a loop of one template asks once a window.
  const epoch = sink.epoch;
  if (query.strings === lastBuildAsk.strings && sink === lastBuildAsk.sink && epoch === lastBuildAsk.epoch && epoch !== undefined) return undefined;
  lastBuildAsk.strings = query.strings;
  lastBuildAsk.sink = sink;
  lastBuildAsk.epoch = epoch;
  const text = askedText(query.strings);
  return sink.needsCaller(text) ? { text, caller: captureCaller(`postgres-js.${method} (build)`) } : undefined;
}

/** The template {@link callerAtBuild} last asked a sink about, and in which of its windows (it keeps both alive). */
const lastBuildAsk: { strings: readonly string[] | null; sink: StatementSink | null; epoch: number | undefined } = { strings: null, sink: null, epoch: undefined };

/** A caller captured at build, and the text the window was asked about (handed back: StatementSink.askAnswered). */
interface Asked {
  readonly text: string;
  readonly caller: string | null;
}

/**
 * What the wrapper keeps per template, found by the frozen strings array a tagged template hands over at every call
 * of its line: the strings joined into the text asked about, and the template's origin (keepOrigin), each made once.
 * The last template is kept beside the map: a loop of one template finds it without a lookup.
 */
interface Template {
  text: string | undefined;
  origin: TemplateOrigin | undefined;
}

const templates = new WeakMap<readonly string[], Template>();
const lastTemplate: { strings: readonly string[] | null; template: Template | null } = { strings: null, template: null };

function templateOf(strings: readonly string[]): Template {
  if (strings === lastTemplate.strings && lastTemplate.template !== null) return lastTemplate.template;
  let template = templates.get(strings);
  if (template === undefined) {
    template = { text: undefined, origin: undefined };
    templates.set(strings, template);
  }
  lastTemplate.strings = strings;
  lastTemplate.template = template;
  return template;
}

/** The text asked about: `unsafe` and `file` hand a new one-string array each call, whose text is that string. */
function askedText(strings: readonly string[]): string {
  if (strings.length === 1) return strings[0]!;
  const template = templateOf(strings);
  return (template.text ??= strings.join('?'));
}

/**
 * postgres.js explains a failed query with where it was built (`query.origin`, appended to the error's stack): a
 * tagged template's is an Error made the first time the template was built, four frames deep (its own three and the
 * caller's) and shared by every query of that template; with `debug`, every query's is an Error made as it is built.
 * Built through the wrapper, the frame below postgres.js's own is the wrapper's: the user's line fell off the four,
 * or came one frame lower. Each query's origin is replaced by one that reads as raw postgres.js's would have: for a
 * template, postgres.js's frames and then the caller's line (captured once per template); with `debug`, the query's
 * own stack without the wrapper's frame. Nothing is formatted as the query is built: a stack is formatted when
 * postgres.js reads it, after a failure, under whatever `prepareStackTrace` is in place then, as raw postgres.js's
 * is (formatted at build, a stack made under a caller's passing `prepareStackTrace` stayed that, and postgres.js
 * failed on it).
 */
function keepOrigin(query: PostgresJsQuery, method: string, builder: AnyFunction): void {
  const debug = query.handler.debug;
  // Without `debug`, `unsafe` and `file` queries have no origin.
  if (!debug && method !== 'sql') return;
  const key = originKey(query);
  if (key === null) return;
  const made = (query as unknown as Record<symbol, unknown>)[key];
  if (!(made instanceof ErrorClass)) return;
  (query as unknown as Record<symbol, unknown>)[key] = debug ? new DebugOrigin(made) : templateOrigin(query.strings, made, builder);
}

/** Lines of an origin stack: the header, then postgres.js's frames (`cachedError`, `Query`, `sql`), then the caller. */
const TEMPLATE_CALLER_LINE = 4;
/** With `debug`: the header, `Query`, `sql` (or `unsafe`, `file`), then the wrapper's frame. */
const DEBUG_WRAPPER_LINE = 3;

/** A template's origin, made at its first build through a wrapper: the same for every query of it, as postgres.js's. */
function templateOrigin(strings: readonly string[], made: Error, builder: AnyFunction): TemplateOrigin {
  const template = templateOf(strings);
  if (template.origin === undefined) {
    // The caller's frame, captured now and formatted only when read.
    const caller: { stack?: unknown } = {};
    const limit = ErrorClass.stackTraceLimit;
    try {
      ErrorClass.stackTraceLimit = 1;
      ErrorClass.captureStackTrace(caller, builder);
    } finally {
      ErrorClass.stackTraceLimit = limit;
    }
    template.origin = new TemplateOrigin(made, caller);
  }
  return template.origin;
}

/**
 * What postgres.js reads of an origin is its `stack`: postgres.js's Error's, its last frame the caller's. Read after
 * a failure, and once per template at that (postgres.js keeps the text it read per template).
 */
class TemplateOrigin {
  constructor(
    private readonly made: Error,
    private readonly caller: { stack?: unknown },
  ) {}

  get stack(): unknown {
    const stack: unknown = this.made.stack;
    const captured: unknown = this.caller.stack;
    const line = typeof captured === 'string' ? captured.split('\n')[1] : undefined;
    if (typeof stack !== 'string' || line === undefined) return stack;
    const lines = stack.split('\n');
    if (lines.length <= TEMPLATE_CALLER_LINE) return stack;
    lines[TEMPLATE_CALLER_LINE] = line;
    return lines.slice(0, TEMPLATE_CALLER_LINE + 1).join('\n');
  }
}

/** A `debug` query's origin: its own stack without the wrapper's frame. */
class DebugOrigin {
  constructor(private readonly made: Error) {}

  get stack(): unknown {
    const stack: unknown = this.made.stack;
    if (typeof stack !== 'string') return stack;
    const lines = stack.split('\n');
    if (lines.length > DEBUG_WRAPPER_LINE) lines.splice(DEBUG_WRAPPER_LINE, 1);
    return lines.join('\n');
  }
}

/** The symbol postgres.js keeps a query's origin Error under (module-private; found by its description once). */
let originSymbol: symbol | null | undefined;

function originKey(query: PostgresJsQuery): symbol | null {
  if (originSymbol !== undefined) return originSymbol;
  originSymbol = null;
  for (const key of ownSymbols(query)) if (key.description === 'OriginError') originSymbol = key;
  return originSymbol;
}

/**
 * A synthetic event for what postgres.js sends itself inside `begin` and `savepoint`: its BEGIN goes out as a simple
 * Query (`unsafe`), the rest (COMMIT, ROLLBACK, SAVEPOINT ...) as templates, named statements unless the `sql` was
 * made with `prepare: false`.
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
 * Counts every query run through a postgres.js `sql` instance (`postgres(...)`), a transaction's `sql` inside
 * `sql.begin`, or a reserved connection from `sql.reserve()`, into `sink`. Same function and behaviour out.
 * - Tagged templates, `sql.unsafe` and `sql.file` -> one `query` event each when the query runs (with its text,
 *   parameter count, rows from the command tag and the backend pid that ran it). A query nested as a fragment runs
 *   as part of its parent and is not a call of its own. Concurrent queries are pipelined by postgres.js: that shows
 *   on the wire, not here.
 * - `sql.begin(fn)` -> BEGIN and COMMIT (or ROLLBACK when it rejects) as `query` events with method `begin` and no
 *   duration (postgres.js sends them itself), with `fn` handed a counted transaction `sql`; `savepoint(fn)` adds
 *   SAVEPOINT and, when it rejects, ROLLBACK TO SAVEPOINT.
 * - Not counted: `listen`/`notify`/`subscribe`, `largeObject`, `end`/`close`. A cursor and a `forEach` are one call
 *   each, in flight from their start until their last batch of rows.
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
    const counted = (result: unknown, method: string, builder: AnyFunction): unknown => {
      if (isQuery(result)) {
        keepOrigin(result, method, builder);
        countWhenRun(result, site, method, callerAtBuild(sink, result, method), shared);
      }
      return result;
    };
    const hooks: Record<string, (original: AnyFunction) => AnyFunction> = {
      unsafe: (original) =>
        function unsafe(...args) {
          return counted(original(...args), 'unsafe', unsafe);
        },
      file: (original) =>
        function file(...args) {
          return counted(original(...args), 'file', file);
        },
      begin: (original) => (...args) => {
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
      savepoint: (original) => (...args) => {
        const fnIndex = args.length - 1;
        const body = args[fnIndex] as AnyFunction;
        args[fnIndex] = (tx: object) => body(wrapPostgresJs(tx, sink, passed));
        control(site, 'SAVEPOINT', tagged);
        return (original(...args) as Promise<unknown>).catch((error: unknown) => {
          control(site, 'ROLLBACK TO SAVEPOINT', tagged);
          throw error;
        });
      },
      reserve: (original) => (...args) => (original(...args) as Promise<object>).then((reserved) => wrapPostgresJs(reserved, sink, passed)),
    };
    const replaced = new Map<PropertyKey, AnyFunction>();
    // sql`...` builds a query; sql(rows, ...columns) and sql('name') build helpers that are not calls.
    const build = function build(fn: T, thisArg: unknown, args: unknown[]): unknown {
      return counted(reflectApply(fn as AnyFunction, thisArg, args), 'sql', build as AnyFunction);
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

function isSql(value: unknown): boolean {
  if (typeof value !== 'function') return false;
  const o = value as unknown as Record<string, unknown>;
  return typeof o.unsafe === 'function' && typeof o.begin === 'function' && typeof o.end === 'function' && typeof o.array === 'function';
}

/**
 * postgres.js prepares every tagged query as a named statement once per connection (Parse/Describe/Flush, then
 * Bind/Execute/Sync; later calls Bind/Execute/Sync only), sends `unsafe` with parameters unnamed (Parse every time)
 * and `unsafe` without them as a simple Query; a `sql` made with `prepare: false` sends its templates unnamed too.
 * A call whose protocol the wrapper saw (every query that ran and succeeded, and what postgres.js sends itself in
 * `begin`) gets exact counts; the rest (events rebuilt from a report, a failed query) a range, in which a COMMIT,
 * ROLLBACK or SAVEPOINT is taken for `sql.begin()`'s own, a template.
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
  return withCopyIn({
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
    serverWords: preparedControl
      ? 'counted by pg_stat_statements only at its first execution on the connection'
      : '1 pg_stat_statements call',
  }, group, true);
};

/**
 * Every call's protocol is known: a Query per simple call, Bind/Execute/Sync per other call, Parse and Describe per
 * unnamed call and for a named one at most once per connection (postgres.js parses again when the same text comes
 * with other parameter types, so up to once per call; a Flush after each Parse that waits for its Describe). A
 * cursor is a Bind, an Execute and a Flush per batch of rows (how many batches, the rows decide), and a Sync. A
 * describe is a Parse, a Describe, a Flush and a Sync, and nothing runs on the server.
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
