/**
 * What the pg wrapper reads that node-postgres does not promise: fast path `own-promise` runs a promise-form `query` through
 * the callback form inside pg's own kind of promise (pg 8's source); plain path: the returned promise chained.
 */
import type { StatementSink } from '../../sql/events';
import { isArray } from '../../shared/intrinsics';
import { decide, sourceOf } from './path';

export const PG_OWN_PROMISE = 'own-promise';

type Loose = Record<string, unknown>;

/** The promise pg builds around a query, and whether it re-captures a failed query's stack. */
export interface OwnPromise {
  readonly Promise: PromiseConstructor;
  readonly restacks: boolean;
}

/** What `query` must read as, and the promise constructor it uses, or why this release differs. */
export function ownPromiseMismatch(target: Loose, isPool: boolean): { own: OwnPromise } | { reason: string } {
  const ctor = isPool ? target.Promise : target._Promise;
  const source = sourceOf(target.query);
  if (typeof ctor !== 'function') return { reason: `no ${isPool ? 'Promise' : '_Promise'} constructor on the ${isPool ? 'Pool' : 'Client'}` };
  if (source === null) return { reason: 'the source text of query cannot be read' };
  const expected = isPool ? 'promisify(this.Promise' : 'new this._Promise(';
  if (!source.includes(expected)) return { reason: `query does not build ${expected}...)` };
  return { own: { Promise: ctor as PromiseConstructor, restacks: isPool || source.includes('captureStackTrace') } };
}

/** The promise to make promise-form calls in (the fast path), or null for the plain path; the decision told to `sink`. */
export function ownPromiseOf(sink: StatementSink, target: Loose, isPool: boolean): OwnPromise | null {
  let found: OwnPromise | null = null;
  decide(sink, 'pg', `${PG_OWN_PROMISE} ${isPool ? 'Pool' : 'Client'}.query`, () => {
    const read = ownPromiseMismatch(target, isPool);
    if ('reason' in read) return read.reason;
    found = read.own;
    return null;
  });
  return found;
}

/** A pg-pool `Pool`: its public counters, or (an older or stand-in pool without them) its private client list. */
export function isPgPool(o: Loose): boolean {
  return ('totalCount' in o && 'idleCount' in o) || isArray(o._clients);
}
