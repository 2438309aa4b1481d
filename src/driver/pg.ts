import { messageOf, SqltallyError } from '../shared/errors';
import type { CallProtocol, StatementSink } from '../sql/events';
import type { CallShape, CallSite, MethodHooks, ShapeMemo, WrapOptions } from './counted';
import { callbackIndex, callEnd, callerAtCall, callStart, countedProxy, memoShape, toCount, track, trackCallback, wrapOnce } from './counted';
import { classCounts, UNBOUNDED, type CallGroup, type Contribution, type DriverModel, type DriverModule, type ModelContext, type Range } from './module';
import { postgresServerCounts, withCopyIn, type ByProtocol } from './postgres-model';
import { loadDriverPackage, networkTarget } from './load';
import { ErrorClass, hasOwn, isArray } from '../shared/intrinsics';
import { isPgPool, ownPromiseOf, type OwnPromise } from './compat/pg';

const DRIVER = 'pg';

/**
 * The subset of node-postgres' `Client` that is counted: `query` in all its forms, each kind `query` (a named
 * statement's single parse shows on the wire, not here). A Submittable is recorded when submitted, with no row count
 * or error (listening would change how its errors surface), except a pg-copy-streams `from()`, one call until its COPY
 * ends. Connection id: the backend pid. Not counted: `connect`, `end`, `escapeLiteral`.
 */
export interface PgClient {
  query(...args: unknown[]): unknown;
  readonly processID?: number | null;
}

/**
 * The subset of node-postgres' `Pool` that is counted: `query` (no connection id: the pool does not say which
 * client ran it) and `connect()` (promise or callback), whose client is returned wrapped.
 */
export interface PgPool {
  query(...args: unknown[]): unknown;
  connect(...args: unknown[]): unknown;
}

type Loose = Record<string, unknown>;

const ROW_COUNTING_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/** `rowCount` of an INSERT/UPDATE/DELETE/MERGE result (summed over a multi-statement text query); else null. */
export function pgRowsAffected(result: unknown): number | null {
  if (isArray(result)) {
    let sum: number | null = null;
    for (const part of result) {
      const n = pgRowsAffected(part);
      if (n !== null) sum = (sum ?? 0) + n;
    }
    return sum;
  }
  if (result === null || typeof result !== 'object') return null;
  const { command, rowCount } = result as Loose;
  return typeof command === 'string' && ROW_COUNTING_COMMANDS.has(command) ? toCount(rowCount) : null;
}

const noRows = (): null => null;

function queryShape(args: unknown[], memo: ShapeMemo): { shape: CallShape; submittable: boolean; values: unknown[] } {
  const [config, values] = args;
  const object = config !== null && typeof config === 'object' ? (config as Loose) : undefined;
  const sql = typeof config === 'string' ? config : typeof object?.text === 'string' ? object.text : '';
  const bound = isArray(values) ? values : isArray(object?.values) ? (object.values as unknown[]) : [];
  const submittable = typeof object?.submit === 'function';
  // An array parameter (`unnest($1::int[])`) is one bind value: pg sends it as one parameter. A Submittable (a cursor,
  // a stream) speaks the protocol its own way: left untagged, the model gives a range.
  const protocol = submittable ? undefined : pgProtocol(object, bound.length);
  return { shape: memoShape(memo, 'query', 'query', sql, bound.length, 1, 'postgres', protocol), submittable, values: bound };
}

/**
 * The protocol node-postgres picks for a query (its `Query#requiresPreparation`): extended when the config asks for
 * it, names the statement or limits rows per portal, or when values are bound; a simple Query otherwise.
 */
function pgProtocol(config: Loose | undefined, boundValues: number): CallProtocol {
  if (typeof config?.name === 'string' && config.name !== '') return 'named';
  if (config?.queryMode === 'extended' || (typeof config?.rows === 'number' && config.rows > 0) || boundValues > 0) return 'extended';
  return 'simple';
}

function countedQuery(site: CallSite, ownPromise: OwnPromise | null) {
  const memo: ShapeMemo = { last: null };
  return (original: (...a: unknown[]) => unknown) =>
    function query(...args: unknown[]) {
      const { shape, submittable, values } = queryShape(args, memo);
      if (submittable) {
        if (isCopyInStream(args[0]))
          return trackCopyIn(site, memoShape(memo, 'query', 'query', shape.sql, 0, 1, 'postgres', 'simple'), args[0], args, original);
        return track(site, shape, () => original(...args), noRows, values);
      }
      const cb = callbackIndex(args);
      if (cb >= 0) return trackCallback(site, shape, args, cb, original, pgRowsAffected, values);
      if (ownPromise !== null && !callbackInConfig(args[0])) return throughCallback(site, shape, args, original, ownPromise, values);
      return track(site, shape, () => original(...args), pgRowsAffected, values);
    };
}

/** pg-copy-streams' `from(text)` (CopyStreamQuery): a Submittable that pg tells how its COPY ended. */
interface CopyInStream {
  rowCount: unknown;
  handleCopyInResponse(...a: unknown[]): unknown;
  handleReadyForQuery(...a: unknown[]): unknown;
  handleError(...a: unknown[]): unknown;
}

function isCopyInStream(value: unknown): value is CopyInStream {
  const o = value as Loose;
  return (
    typeof o.handleCopyInResponse === 'function' &&
    typeof o.handleReadyForQuery === 'function' &&
    typeof o.handleError === 'function' &&
    typeof o.write === 'function' &&
    'rowCount' in o
  );
}

/**
 * A COPY ... FROM STDIN stream is one call until pg hands it its ReadyForQuery (rows from `COPY n`) or an error, seen by
 * shadowing its `handle*` methods on the instance, so no listener changes how its errors surface.
 */
function trackCopyIn(site: CallSite, shape: CallShape, stream: CopyInStream, args: unknown[], original: (...a: unknown[]) => unknown): unknown {
  const caller = callerAtCall(site, shape);
  const start = callStart(site);
  let done = false;
  const end = (rows: number | null, error: unknown): void => {
    if (done) return;
    done = true;
    callEnd(site, shape, start, rows, error, undefined, caller);
  };
  const ready = stream.handleReadyForQuery;
  const failed = stream.handleError;
  stream.handleReadyForQuery = function handleReadyForQuery(this: unknown, ...a: unknown[]) {
    end(toCount(stream.rowCount), null);
    return ready.apply(this, a);
  };
  stream.handleError = function handleError(this: unknown, ...a: unknown[]) {
    end(null, a[0] ?? new ErrorClass('COPY failed'));
    return failed.apply(this, a);
  };
  try {
    return original(...args);
  } catch (error) {
    end(null, error);
    throw error;
  }
}

/** A config object carrying its own callback makes pg run the callback form and return nothing: left as it is. */
function callbackInConfig(config: unknown): boolean {
  return config !== null && typeof config === 'object' && typeof (config as Loose).callback === 'function';
}

/**
 * A promise-form call made through pg's callback form, inside a promise built as pg builds its own: the caller gets the
 * same promise, result, error and re-captured stack, and counting adds no promise (Jest's promise hooks make one dear).
 */
function throughCallback(
  site: CallSite,
  shape: CallShape,
  args: unknown[],
  original: (...a: unknown[]) => unknown,
  own: OwnPromise,
  values: unknown[],
): Promise<unknown> {
  // `trackCallback` written out: through it (a settle closure, an argument array, its own callback) a call took 112
  // instructions more (`driver-cpu.ts --scenarios pg-call`: +1730 against +1618).
  const caller = callerAtCall(site, shape);
  const start = callStart(site);
  let resolveOut!: (value: unknown) => void;
  let rejectOut!: (error: unknown) => void;
  const promise = new own.Promise((resolve, reject) => {
    resolveOut = resolve;
    rejectOut = reject;
  });
  let done = false;
  const callback = (error: unknown, result?: unknown): void => {
    if (done) return;
    done = true;
    callEnd(site, shape, start, error ? null : pgRowsAffected(result), error ?? null, values, caller);
    if (error) rejectOut(error);
    else resolveOut(result);
  };
  const config = args[0];
  const object = config !== null && typeof config === 'object' ? (config as Loose) : null;
  const hadOwn = object !== null && hasOwn(object, 'callback');
  const before = object?.callback;
  try {
    original(config, args[1], callback);
  } catch (error) {
    // Thrown before pg made its promise (a null config): thrown to the caller as pg throws it, ours never settles.
    if (!done) {
      done = true;
      callEnd(site, shape, start, null, error, values, caller);
    }
    throw error;
  } finally {
    // pg writes the callback onto a config object (its normalizeQueryConfig), which its promise form never does: a
    // config the caller reuses would carry ours into its next call. Put the object back as it was.
    if (object !== null && object.callback !== before) {
      if (hadOwn) object.callback = before;
      else delete object.callback;
    }
  }
  return own.restacks ? promise.catch(restack) : promise;
}

/** pg's own `.catch`: the stack of an error that comes from the socket, taken again where the caller awaits it. */
function restack(error: unknown): never {
  if (error !== null && typeof error === 'object') ErrorClass.captureStackTrace(error, restack);
  throw error;
}

/** Counts every query on a pg `Client` or `Pool` into `sink`; same type and behaviour out. */
export function wrapPg<T extends object>(target: T, sink: StatementSink, _opts?: WrapOptions): T {
  return wrapOnce(DRIVER, target, sink, () => {
    const o = target as Loose;
    if (typeof o.query !== 'function' || typeof o.connect !== 'function') {
      throw new SqltallyError('not a pg Client or Pool', { phase: 'wrap', hint: 'pass a `new pg.Client(...)` or `new pg.Pool(...)`' });
    }
    // A Client has `processID` (null until connected).
    const isPool = isPgPool(o);
    const site: CallSite = {
      driver: DRIVER,
      sink,
      connectionId: isPool
        ? () => null
        : () => {
            const pid = (target as Loose).processID;
            return typeof pid === 'number' ? pid : null;
          },
    };
    const hooks: MethodHooks<T> = { query: countedQuery(site, ownPromiseOf(sink, o, isPool)) };
    if (isPool) {
      hooks.connect = (original) =>
        function connect(...args: unknown[]) {
          const cb = callbackIndex(args);
          if (cb >= 0) {
            const user = args[cb] as (this: unknown, err: unknown, client?: unknown, release?: unknown) => unknown;
            const patched = args.slice();
            patched[cb] = function (this: unknown, err: unknown, client?: unknown, release?: unknown) {
              return user.call(this, err, client ? wrapPg(client as object, sink) : client, release);
            };
            return original(...patched);
          }
          return (original(...args) as Promise<object>).then((client) => wrapPg(client, sink));
        };
    }
    return countedProxy(target, { driver: DRIVER, sink, target }, hooks);
  });
}

/** `true` for a node-postgres `Client` (has `processID` once constructed) or `Pool` (counts its clients). */
function isPgObject(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const o = value as Loose;
  return typeof o.query === 'function' && typeof o.connect === 'function' && ('processID' in o || isPgPool(o));
}

/**
 * node-postgres: values, a name, a row limit or `queryMode: 'extended'` => extended protocol in one round trip, else a
 * simple Query. Tagged calls get exact counts; untagged a range (a portal reader executes once per batch).
 */
const pgModel: DriverModel = (group, ctx) => {
  const calls = group.kind === 'prepare' ? 0 : group.calls;
  const { simple: simpleCalls, extended: unnamed, named } = group.byProtocol;
  if (calls > 0 && simpleCalls + unnamed + named === calls) return withCopyIn(pgExactModel(group, ctx, { simple: simpleCalls, unnamed, named }), group, false);
  const extended = group.kind === 'execute' ? calls : Math.min(calls, group.callsWithValues);
  const simple = calls - extended;
  const range = (min: number, max: number): Range => ({ min, max });
  const statements = range(calls, calls);
  return withCopyIn(
    {
      wire: {
        Parse: range(0, calls),
        Bind: range(extended, calls),
        Execute: range(extended, UNBOUNDED),
        Sync: range(extended, calls),
        Describe: range(0, calls),
        Query: range(0, simple),
      },
      server: { statements, ...classCounts(group, statements) },
      wireWords: simple === 0 ? 'Parse/Bind/Describe?/Execute/Sync' : 'Query (or Parse/Bind/Execute/Sync)',
      serverWords: '1 pg_stat_statements call',
    },
    group,
    false,
  );
};

/**
 * Every call's protocol is known: one Query per simple call; Bind/Describe/Execute/Sync per extended one; Parse per
 * unnamed call, and for a named statement at most once per connection that ran it (none if parsed before the window).
 */
function pgExactModel(group: CallGroup, ctx: ModelContext, n: ByProtocol): Contribution {
  const exact = (v: number): Range => ({ min: v, max: v });
  const extended = n.unnamed + n.named;
  // A named statement parsed before the window (a warm connection) is not parsed again: 0 up to one per connection.
  const namedParses: Range = n.named === 0 ? exact(0) : { min: 0, max: Math.min(n.named, ctx.claimPrepare()) };
  const words = [n.simple > 0 ? 'Query' : '', extended > 0 ? `${n.named > 0 ? 'Parse once/' : 'Parse/'}Bind/Describe/Execute/Sync` : ''].filter(Boolean);
  return {
    wire: {
      Query: exact(n.simple),
      Parse: { min: n.unnamed + namedParses.min, max: n.unnamed + namedParses.max },
      Bind: exact(extended),
      Describe: exact(extended),
      Execute: exact(extended),
      Sync: exact(extended),
    },
    // A named statement runs for the first time on its connection where it is parsed.
    ...postgresServerCounts(group, n, namedParses),
    wireWords: words.join(' + '),
  };
}

/** node-postgres (`pg`): one `Client` per connection; `Pool` and checked-out clients are counted the same way. */
export const PG_DRIVER: DriverModule<'pg', import('pg').Client> = {
  name: 'pg',
  packageName: 'pg',
  backends: ['postgres'],
  dialect: 'postgres',
  embedded: false,
  isClosed: () => false,
  releases: [],
  compatReleases: ['pg-8.11'],
  accepts: 'a pg Client or Pool (new pg.Client(...), new pg.Pool(...)) or a client from pool.connect()',
  recognises: isPgObject,
  wrap: (target, sink) => wrapPg(target, sink),
  async open(connection, opts) {
    const net = networkTarget('pg', connection, opts);
    const pg = await loadDriverPackage<typeof import('pg')>(opts.driverPackage ?? 'pg', 'pg', opts.backend);
    const client = new pg.Client({
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      database: net.database,
      ...(opts.connectTimeoutMs === undefined ? {} : { connectionTimeoutMillis: opts.connectTimeoutMs }),
      ...opts.driverOptions,
    });
    // A server that dies under an idle client emits 'error'; unheard, that takes the whole process down. The next
    // query then fails with pg's own "not queryable" error, which names the cause.
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      // A failed connect leaves the socket half-open: end it so the process can exit.
      await client.end().catch(() => undefined);
      throw error;
    }
    // `processID` (the backend pid) is set by pg after the handshake but missing from @types/pg.
    const pid = (client as unknown as { processID?: number | null }).processID;
    return { handle: client, connectionId: typeof pid === 'number' ? pid : null, close: () => client.end() };
  },
  // pg calls it with its config and then `connect()` on the stream, waiting for 'connect'.
  streamOptions: (open) => ({ stream: () => open() }),
  ownSql: (h, onLost) => {
    h.on('error', (error) => onLost(messageOf(error)));
    return async (sql, params) => (await h.query(sql, params ? [...params] : undefined)).rows as Record<string, unknown>[];
  },
  runSql: async (h, sql) => (await h.query(sql)).rows,
  ping: null,
  rowSource: (h) => ({ all: async (sql, params = []) => (await h.query(sql, [...params])).rows as Record<string, unknown>[] }),
  model: pgModel,
  stableWireBytes: true,
};
