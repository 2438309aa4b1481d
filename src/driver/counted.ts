import type { DriverName } from '../shared/driver-names';
import { SqltallyError } from '../shared/errors';
import {
  getPrototypeOf,
  hasOwn,
  isArray,
  mathTrunc,
  numberIsFinite,
  OBJECT_PROTOTYPE,
  objectKeys,
  ownDescriptor,
  reflectGet,
  reflectSet,
  toNumber,
} from '../shared/intrinsics';
import type { CallProtocol, CallShape, StatementSink } from '../sql/events';
import { captureCaller } from '../shared/caller';
import { classifyCached } from '../sql/statement-cache';
import type { SqlDialect } from '../sql/tokenizer';

/**
 * Marks a counted wrapper. `Symbol.for` so that two copies of this module (Jest's per-file registry, a bundled
 * copy) still recognise each other's wrappers and never count one call twice.
 */
export const WRAPPED: unique symbol = Symbol.for('sqltally.driver.wrapped') as never;

/** What a wrapper answers when asked for {@link WRAPPED}. */
export interface WrapperMark {
  readonly driver: DriverName;
  readonly sink: StatementSink;
  /** The original object the wrapper stands for. */
  readonly target: object;
}

/** Options every `wrapX` function accepts. */
export interface WrapOptions {
  /**
   * Connection id to put on events when the driver cannot tell (SQLite has no server thread). Network drivers
   * read the real id (`threadId`, `processID`) at each call and ignore this.
   */
  connectionId?: number | null;
}

export type { CallShape } from '../sql/events';

/** The driver-specific part of an event: which driver, and which connection the call ran on. */
export interface CallSite {
  readonly driver: DriverName;
  readonly sink: StatementSink;
  connectionId(): number | null;
}

/** One clock reading per call edge: a double from `performance.now()`, no BigInt allocated on the hot path. */
export const nowNs: () => number = performance.now.bind(performance);

/**
 * Hands one settled call to the sink; the only place a wrapper reports a call. Errors from another realm (a native
 * driver's error class extends the Error of the realm that first loaded it) keep their message: the sink reads
 * `message`, never `instanceof`.
 */
export function emit(
  site: CallSite,
  shape: CallShape,
  startMs: number,
  endMs: number,
  rowsAffected: number | null,
  error: unknown,
  values?: unknown,
  caller?: string | null,
  /** The call's connection when the wrapper read it itself (a postgres.js query knows its backend's pid). */
  connectionId: number | null = site.connectionId(),
): void {
  site.sink.record(site.driver, shape, startMs, endMs, rowsAffected, error ?? null, connectionId, values, caller);
}

/**
 * A counted call starts: it is in flight, and its start time is read, or 0 once the window keeps no more events (the
 * sink's `timed`), when no clock is read at either edge of the call.
 */
export function callStart(site: CallSite): number {
  const sink = site.sink;
  sink.inFlight?.(1);
  return sink.timed !== false ? nowNs() : 0;
}

/** A call begun with {@link callStart} settled: its event (its end read only if its start was), and out of flight. */
export function callEnd(
  site: CallSite,
  shape: CallShape,
  start: number,
  rowsAffected: number | null,
  error: unknown,
  values?: unknown,
  caller?: string | null,
  connectionId?: number | null,
): void {
  emit(site, shape, start, start > 0 ? nowNs() : 0, rowsAffected, error, values, caller, connectionId);
  site.sink.inFlight?.(-1);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * The user's line of a call whose text the window has not seen, captured as the call is handed to the driver
 * (StatementSink.needsCaller), not when it settles: by then the user's frames are gone from the stack. A promise's
 * settlement still shows them through V8's async frames, and a callback's or a driver event's shows none at all, so
 * such calls had no caller (knex and kysely on mysql2's callback API named no line). Undefined when the sink needs
 * none: the sink then captures one itself if it must.
 */
export function callerAtCall(site: CallSite, shape: CallShape): string | null | undefined {
  const sink = site.sink;
  if (sink.needsCaller === undefined) return undefined;
  // A loop of one statement asks about its text once per window (the answer stays no until the window closes); the
  // sink's epoch tells a new window, and a sink without one is asked every call.
  const epoch = sink.epoch;
  if (shape === lastAsk.shape && sink === lastAsk.sink && epoch === lastAsk.epoch && epoch !== undefined) return undefined;
  lastAsk.shape = shape;
  lastAsk.sink = sink;
  lastAsk.epoch = epoch;
  return sink.needsCaller(shape.sql) ? captureCaller(`${site.driver}.${shape.method} (call)`) : undefined;
}

/** The last shape {@link callerAtCall} asked a sink about, and in which of its windows (it keeps that one sink alive). */
const lastAsk: { shape: CallShape | null; sink: StatementSink | null; epoch: number | undefined } = { shape: null, sink: null, epoch: undefined };

/** A wrapper's last call shape (see {@link memoShape}). */
export interface ShapeMemo {
  last: CallShape | null;
}

/**
 * The shape of a call, the last one's again when the call repeats it (method, text, counts, protocol): a loop of the
 * same statement then allocates and classifies nothing per call, and the window finds its group by identity
 * (WindowTotals.add) instead of looking the text up. A shape is never changed once made, so sharing it is safe.
 */
export function memoShape(
  memo: ShapeMemo,
  method: string,
  kind: CallShape['kind'],
  sql: string,
  bindValues: number,
  parameterSets: number,
  dialect: SqlDialect,
  protocol?: CallProtocol,
): CallShape {
  const last = memo.last;
  if (
    last !== null &&
    last.sql === sql &&
    last.method === method &&
    last.kind === kind &&
    last.bindValues === bindValues &&
    last.parameterSets === parameterSets &&
    last.protocol === protocol
  ) {
    return last;
  }
  const shape: CallShape = { method, kind, sql, statementClass: classifyCached(sql, dialect), bindValues, parameterSets };
  if (protocol !== undefined) shape.protocol = protocol;
  return (memo.last = shape);
}

/**
 * Runs `invoke` and records one event when it settles: synchronously for a plain return or throw, on settlement
 * for a promise. The result and the error pass through untouched (same instance); a promise result is chained,
 * so a rejection the caller never handles is still reported as unhandled.
 */
export function track<R>(
  site: CallSite,
  shape: CallShape,
  invoke: () => R,
  rowsOf: (result: unknown) => number | null,
  values?: unknown,
  given?: string | null,
): R {
  const caller = given !== undefined ? given : callerAtCall(site, shape);
  const start = callStart(site);
  let result: R;
  try {
    result = invoke();
  } catch (error) {
    callEnd(site, shape, start, null, error, values, caller);
    throw error;
  }
  if (isThenable(result)) {
    return result.then(
      (value) => {
        callEnd(site, shape, start, rowsOf(value), null, values, caller);
        return value;
      },
      (error: unknown) => {
        callEnd(site, shape, start, null, error, values, caller);
        throw error;
      },
    ) as R;
  }
  callEnd(site, shape, start, rowsOf(result), null, values, caller);
  return result;
}

/**
 * Replaces a Node-style callback (`(err, result, ...)`) with one that records the event first, then calls the
 * original with the same `this` and arguments. A synchronous throw from the driver is recorded and rethrown.
 * `args` is the call's own arguments array (a hook's rest parameter, made for this call): its callback is replaced
 * in place and the array handed to `invoke` as its arguments, so a call copies nothing and makes one closure.
 */
export function trackCallback(
  site: CallSite,
  shape: CallShape,
  args: unknown[],
  callbackIndex: number,
  invoke: (...args: unknown[]) => unknown,
  rowsOf: (result: unknown) => number | null,
  values?: unknown,
): unknown {
  const caller = callerAtCall(site, shape);
  // As in `track`: no clock once the window keeps no more events (knex and kysely call mysql2 this way).
  const start = callStart(site);
  const original = args[callbackIndex] as (this: unknown, ...cbArgs: unknown[]) => unknown;
  let done = false;
  // `arguments` rather than rest parameters: handed on as they came, with no array made per callback.
  args[callbackIndex] = function counted(this: unknown): unknown {
    if (!done) {
      done = true;
      const error: unknown = arguments[0];
      callEnd(site, shape, start, error ? null : rowsOf(arguments[1]), error ?? null, values, caller);
    }
    return original.apply(this, arguments as unknown as unknown[]);
  };
  try {
    return invoke.apply(undefined, args);
  } catch (error) {
    if (!done) {
      done = true;
      callEnd(site, shape, start, null, error, values, caller);
    }
    throw error;
  }
}

/** Index of the last argument when it is a function (the callback), else -1. */
export function callbackIndex(args: readonly unknown[]): number {
  const last = args.length - 1;
  return last >= 0 && typeof args[last] === 'function' ? last : -1;
}

type AnyFunction = (this: unknown, ...args: unknown[]) => unknown;

/** A counted replacement for one method, built once per wrapper from the original method bound to the target. */
export type MethodHook<T> = (original: AnyFunction, target: T, wrapper: T) => AnyFunction;

/** Methods to count, by name; the rest of the object passes through. */
export type MethodHooks<T> = Partial<Record<string, MethodHook<T>>>;

/**
 * Object-valued properties to hand out wrapped (mysql2's `promiseConnection.connection`), so a caller reaching
 * past the wrapper still gets counted. The driver's own code reads the original through the bound target.
 */
export type PropertyHooks = Partial<Record<string, (value: object) => unknown>>;

// One wrapper per (sink, original): wrapping the same object twice for the same sink returns the same wrapper.
const WRAPPERS = new WeakMap<StatementSink, WeakMap<object, object>>();

export function markOf(value: unknown): WrapperMark | undefined {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return undefined;
  return (value as { [WRAPPED]?: WrapperMark })[WRAPPED];
}

/**
 * Returns the counted wrapper of `target` for `sink`, creating it at most once. An object that is already a
 * wrapper for this sink is returned as is; a wrapper for another sink is refused, because wrapping it again
 * would record each call twice (use one sink that fans out instead).
 */
export function wrapOnce<T extends object>(driver: DriverName, target: T, sink: StatementSink, create: () => T): T {
  const mark = markOf(target);
  if (mark) {
    if (mark.sink === sink) return target;
    throw new SqltallyError(`this ${driver} object is already counted into another sink`, {
      phase: 'wrap',
      hint: 'wrap the original driver object once, with a sink that fans events out to every listener',
    });
  }
  let bySink = WRAPPERS.get(sink);
  if (!bySink) {
    bySink = new WeakMap();
    WRAPPERS.set(sink, bySink);
  }
  const existing = bySink.get(target);
  if (existing) return existing as T;
  const wrapper = create();
  bySink.set(target, wrapper);
  return wrapper;
}

/**
 * A Proxy that counts the hooked methods and passes everything else through to the original.
 *
 * Why `Reflect.get(target, prop)` with the target as receiver, and functions bound to the target: the drivers
 * keep state in `#private` fields (mariadb) and native handles (better-sqlite3) that refuse any `this` but the
 * original object. A method that returns its own object (`on`, `bind`, `pluck`) returns the wrapper instead,
 * so chaining stays counted. Non-configurable read-only functions are returned untouched, as Proxy invariants
 * demand.
 */
export function countedProxy<T extends object>(target: T, mark: WrapperMark, hooks: MethodHooks<T>, properties: PropertyHooks = {}): T {
  const counted = new Map<PropertyKey, AnyFunction>();
  const bound = new Map<AnyFunction, AnyFunction>();
  const proxy: T = new Proxy(target, {
    get(t, prop) {
      if (prop === WRAPPED) return mark;
      const cached = counted.get(prop);
      if (cached) return cached;
      const value: unknown = reflectGet(t, prop);
      if (typeof value !== 'function' || prop === 'constructor') {
        const wrapProperty = typeof prop === 'string' && value !== null && typeof value === 'object' && hasOwn(properties, prop) ? properties[prop] : undefined;
        if (!wrapProperty) return value;
        const own = ownDescriptor(t, prop);
        return own && !own.configurable && !own.writable ? value : wrapProperty(value as object);
      }
      const original = value as AnyFunction;
      // `hasOwn`: a hooks object literal inherits `toString` and friends, which are not hooks.
      const hook = typeof prop === 'string' && hasOwn(hooks, prop) ? hooks[prop] : undefined;
      if (hook) {
        // A bound function, not a rest/spread closure: this sits on the per-row hot path.
        const replacement = hook(original.bind(t) as AnyFunction, t, proxy);
        counted.set(prop, replacement);
        return replacement;
      }
      let passThrough = bound.get(original);
      if (!passThrough) {
        const own = ownDescriptor(t, prop);
        if (own && !own.configurable && !own.writable) return original;
        passThrough = function (this: unknown, ...args: unknown[]): unknown {
          const result = original.apply(t, args);
          return result === t ? proxy : result;
        };
        bound.set(original, passThrough);
      }
      return passThrough;
    },
    set(t, prop, value) {
      return reflectSet(t, prop, value);
    },
  });
  return proxy;
}

/**
 * Values a text-protocol call binds, as the MySQL drivers expand them on the client: top-level arrays flatten to their
 * scalars, a plain object counts one value per non-function key where the driver expands it (`objects: 'keys'`) and is
 * one value where it writes it as one string (`'one'`); anything else is one value, and inside a list only a nested
 * array expands. Not modelled: mysql2's `??` identifiers, and sql-escaper's `'[object Object]'` outside `SET` lists.
 */
export function countExpandedValues(values: unknown, objects: 'keys' | 'one' = 'keys'): number {
  if (values === undefined) return 0;
  if (typeof values !== 'object' || values === null) return 1;
  if (!isArray(values)) return countObject(values);
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v: unknown = values[i];
    if (typeof v !== 'object' || v === null) n++;
    else if (isArray(v)) n += countList(v);
    else n += objects === 'keys' ? countObject(v) : 1;
  }
  return n;
}

// An import binding called per value compiles to a module-object load per call (`(0, m.isArray)(w)`); a local alias does not.
const listIsArray = isArray;

/**
 * A list's elements are one value each but a nested array, so an element needs only `isArray` (one field of its map):
 * a large `VALUES ?` walks every element at every call. Rows are walked in this frame; a call only for a third level.
 */
function countList(list: readonly unknown[]): number {
  let n = list.length;
  for (let i = 0; i < list.length; i++) {
    const row: unknown = list[i];
    if (!listIsArray(row)) continue;
    n += row.length - 1;
    for (let j = 0; j < row.length; j++) {
      const w: unknown = row[j];
      if (listIsArray(w)) n += countList(w) - 1;
    }
  }
  return n;
}

/** A plain object expands to one value per key (`SET ?`); a Buffer, a Date or a `toSqlString` object is one value. */
function countObject(value: object): number {
  if (!isPlainObject(value) || typeof (value as { toSqlString?: unknown }).toSqlString === 'function') return 1;
  const keys = objectKeys(value);
  let n = keys.length;
  for (let i = 0; i < keys.length; i++) if (typeof value[keys[i]!] === 'function') n--;
  return n;
}

/**
 * Values a binary-protocol call binds: one per array element (an array element is one parameter there, e.g. a
 * PostgreSQL array for `unnest`), one per key of a named-parameter object, one for a lone scalar.
 */
export function countParameterValues(values: unknown): number {
  if (values === undefined || values === null) return values === null ? 1 : 0;
  if (isArray(values)) return values.length;
  if (isPlainObject(values)) return objectKeys(values).length;
  return 1;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = getPrototypeOf(value) as unknown;
  return proto === OBJECT_PROTOTYPE || proto === null;
}

/** Affected-row counts come as number or bigint (mariadb with `bigIntAsNumber: false`). */
export function toCount(value: unknown): number | null {
  if (typeof value === 'number') return numberIsFinite(value) && value >= 0 ? mathTrunc(value) : null;
  if (typeof value === 'bigint') return value >= 0n ? toNumber(value) : null;
  return null;
}
