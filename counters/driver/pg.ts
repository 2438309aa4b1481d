import { SqltallyError } from '../../containers/errors';
import type { StatementSink } from '../events';
import { classifyStatement } from '../tokenizer';
import type { CallShape, CallSite, MethodHooks, WrapOptions } from './counted';
import { callbackIndex, countedProxy, toCount, track, trackCallback, wrapOnce } from './counted';

const DRIVER = 'pg';

/**
 * The subset of node-postgres' `Client` that is counted: `query` in all its forms (text, text + values, config
 * object with `{ text, values, name }`, callback or promise). Every call is kind `query`, named prepared
 * statements included (pg parses a named statement once per connection; that shows on the wire, not here).
 * A Submittable (`new pg.Query(...)`, a cursor) is recorded when it is submitted, with no row count or error:
 * listening to its events would change how its errors surface. Connection id: the backend pid (`processID`).
 * Not counted: `connect`, `end`, `copyFrom`-style streams, `escapeLiteral`.
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
  if (Array.isArray(result)) {
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

function queryShape(args: unknown[]): { shape: CallShape; submittable: boolean } {
  const [config, values] = args;
  const object = config !== null && typeof config === 'object' ? (config as Loose) : undefined;
  const sql = typeof config === 'string' ? config : typeof object?.text === 'string' ? object.text : '';
  const bound = Array.isArray(values) ? values : Array.isArray(object?.values) ? (object.values as unknown[]) : [];
  return {
    shape: {
      method: 'query',
      kind: 'query',
      sql,
      statementClass: classifyStatement(sql, 'postgres'),
      // An array parameter (`unnest($1::int[])`) is one bind value: pg sends it as one parameter.
      bindValues: bound.length,
      parameterSets: 1,
    },
    submittable: typeof object?.submit === 'function',
  };
}

function countedQuery(site: CallSite) {
  return (original: (...a: unknown[]) => unknown) =>
    function query(...args: unknown[]) {
      const { shape, submittable } = queryShape(args);
      if (submittable) return track(site, shape, () => original(...args), noRows);
      const cb = callbackIndex(args);
      if (cb >= 0) return trackCallback(site, shape, args, cb, (patched) => original(...patched), pgRowsAffected);
      return track(site, shape, () => original(...args), pgRowsAffected);
    };
}

/** Counts every query on a pg `Client` or `Pool` into `sink`; same type and behaviour out. */
export function wrapPg<T extends object>(target: T, sink: StatementSink, _opts?: WrapOptions): T {
  return wrapOnce(DRIVER, target, sink, () => {
    const o = target as Loose;
    if (typeof o.query !== 'function' || typeof o.connect !== 'function') {
      throw new SqltallyError('not a pg Client or Pool', { phase: 'wrap', hint: 'pass a `new pg.Client(...)` or `new pg.Pool(...)`' });
    }
    // pg-pool keeps its clients in `_clients`; a Client has `processID` (null until connected).
    const isPool = Array.isArray(o._clients) || ('totalCount' in o && 'idleCount' in o);
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
    const hooks: MethodHooks<T> = { query: countedQuery(site) };
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
