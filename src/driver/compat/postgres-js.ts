/**
 * What the postgres.js wrapper reads that postgres.js does not promise: fast paths `query-handler` (counted as it runs)
 * and `origin` (the user's line kept); plain paths count a query when first awaited and leave the origin as it was.
 */
import type { CallProtocol, StatementSink } from '../../sql/events';
import { captureCaller } from '../../shared/caller';
import type { CallSite, ShapeMemo } from '../counted';
import { callEnd, callStart, memoShape, toCount } from '../counted';
import { defineProperty, ErrorClass, isArray, ownSymbols, reflectApply } from '../../shared/intrinsics';

export const POSTGRES_JS_QUERY_HANDLER = 'query-handler';
export const POSTGRES_JS_ORIGIN = 'origin';

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * The part of a postgres.js query object (`sql\`...\``, `sql.unsafe(...)`) the wrapper relies on. A query is a lazy
 * Promise: it runs when first awaited (or `.execute()`d), on a connection the pool picks, and a query that is only
 * nested into another one as a fragment never runs at all. So a call is counted when it runs and recorded when it
 * settles, never when it is merely built.
 */
export interface PostgresJsQuery {
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

/** Why a thenable `sql` built is not a query the handler fast path can count; null when it is. */
export function queryHandlerMismatch(value: object): string | null {
  const q = value as Record<string, unknown>;
  if (typeof q.handler !== 'function') return 'queries of this release carry no handler function';
  if (typeof q.resolve !== 'function' || typeof q.reject !== 'function') return 'queries of this release carry no resolve/reject of their own';
  if (!isArray(q.strings)) return 'queries of this release carry no strings array';
  return null;
}

const ROW_COUNTING_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE', 'COPY']);

/** postgres.js results are arrays carrying `command` and `count` (the CommandComplete tag's number). */
export function rowsOf(result: unknown): number | null {
  if (result === null || typeof result !== 'object') return null;
  const { command, count } = result as { command?: unknown; count?: unknown };
  return typeof command === 'string' && ROW_COUNTING_COMMANDS.has(command) ? toCount(count) : null;
}

/** What a wrapped `sql` shares between the queries it builds. */
export interface Site extends CallSite {
  /** The wrapper's last shape: a loop of one query settles into it without a new shape or a classification. */
  readonly memo: ShapeMemo;
  /** postgres.js's `CLOSE` (`sql.CLOSE`): what a cursor's loop answers a batch with when it stops early. */
  readonly close: unknown;
}

/**
 * A query's handler, replaced by one that counts the query as it runs, then hands it on: an own field postgres.js calls
 * once, so a query is counted without a global patch and without touching its promise (a `.then` would run a query
 * meant as a fragment). A query built and never run costs a field write; one counting handler is shared per method.
 */
export function countWhenRun(query: PostgresJsQuery, site: Site, method: string, asked: Asked | undefined, shared: SharedHandlers): void {
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

export type SharedHandlers = Record<string, { readonly original: QueryHandler; readonly counting: QueryHandler } | undefined>;

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
  // A loop that stops early answers `cursorFn` with CLOSE, and postgres.js closes the portal after the loop, with nothing
  // to await: from then on the call is one the code let go of (StatementSink.letGo), until it settles.
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

export function isStream(value: unknown): boolean {
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
 * How a query that ran went out, as postgres.js built it: simple, named (parsed once per connection), unnamed, cursor or
 * `.describe()`. Left open for a failed query, which may have stopped anywhere: the model gives a range.
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
export function callerAtBuild(sink: StatementSink, strings: readonly string[], method: string): Asked | undefined {
  if (sink.needsCaller === undefined) return undefined;
  // As `callerAtCall`: a window's answer about a template stays no once given (asked, then answered or capped), so
  // a loop of one template asks once a window.
  const epoch = sink.epoch;
  if (strings === lastBuildAsk.strings && sink === lastBuildAsk.sink && epoch === lastBuildAsk.epoch && epoch !== undefined) return undefined;
  lastBuildAsk.strings = strings;
  lastBuildAsk.sink = sink;
  lastBuildAsk.epoch = epoch;
  const text = askedText(strings);
  return sink.needsCaller(text) ? { text, caller: captureCaller(`postgres-js.${method} (build)`) } : undefined;
}

/** The template {@link callerAtBuild} last asked a sink about, and in which of its windows (it keeps both alive). */
const lastBuildAsk: { strings: readonly string[] | null; sink: StatementSink | null; epoch: number | undefined } = {
  strings: null,
  sink: null,
  epoch: undefined,
};

/** A caller captured at build, and the text the window was asked about (handed back: StatementSink.askAnswered). */
export interface Asked {
  readonly text: string;
  readonly caller: string | null;
}

/**
 * What the wrapper keeps per template, keyed by the template's frozen strings array: its text and origin (keepOrigin),
 * each made once. The last one is kept beside the map, so a loop of one template needs no lookup.
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
export function askedText(strings: readonly string[]): string {
  if (strings.length === 1) return strings[0]!;
  const template = templateOf(strings);
  return (template.text ??= strings.join('?'));
}

/**
 * postgres.js explains a failed query with where it was built (`query.origin`, four frames deep), and through the
 * wrapper the user's line fell off those four. Each origin is replaced by one that reads as raw postgres.js's would,
 * the caller's line captured once per template; nothing is formatted until postgres.js reads it, under whatever
 * `prepareStackTrace` is in place then, as raw postgres.js's is.
 */
export function keepOrigin(query: PostgresJsQuery, method: string, builder: AnyFunction): void {
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

/** The symbol postgres.js keeps a query's origin Error under (module-private; found by its description). */
let originSymbol: symbol | undefined;

/** That symbol on `query`, or null when the query keeps no `OriginError` (another release): looked for again then. */
function originKey(query: object): symbol | null {
  if (originSymbol !== undefined && originSymbol in query) return originSymbol;
  for (const key of ownSymbols(query)) if (key.description === 'OriginError') return (originSymbol = key);
  return null;
}

/** Why the origin fast path does not fit a query: null when its origin Error is where postgres.js keeps it. */
export function originMismatch(query: object): string | null {
  return originKey(query) === null ? 'queries of this release keep no OriginError symbol' : null;
}
