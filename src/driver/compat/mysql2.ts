/**
 * What the mysql2 wrapper reads that mysql2 does not promise: fast path `promise-view` runs a promise method whose source
 * reads as 3.x's on a counted view of its callback object; plain path: the returned promise chained.
 */
import type { StatementSink } from '../../sql/events';
import { decide, sourceOf } from './path';

export const MYSQL2_PROMISE_VIEW = 'promise-view';

/** Why `method` does not read as mysql2 3.x's promise method over `this.<core>`; null when it does. */
export function promiseViewMismatch(method: unknown, core: 'connection' | 'pool' | 'statement'): string | null {
  const source = sourceOf(method);
  if (source === null) return 'its source text cannot be read';
  if (!source.includes(`this.${core}`)) return `it does not call this.${core}`;
  if (!source.includes('new this.Promise(')) return 'it does not build new this.Promise(...)';
  if (source.includes('this.#')) return 'it reads #private state';
  return null;
}

/** Whether `method` reads as mysql2's (see {@link promiseViewMismatch}), without telling a sink. */
export function readsCore(method: unknown, core: 'connection' | 'pool' | 'statement'): boolean {
  return promiseViewMismatch(method, core) === null;
}

/**
 * Which of `methods` of `target` take the promise-view fast path, the decision told to `sink` per method: none when
 * forced plain, or when a method's source differs (then that method's promise is chained).
 */
export function promiseViewMethods(sink: StatementSink, target: object, core: 'connection' | 'pool' | 'statement', methods: readonly string[]): string[] {
  return methods.filter(
    (m) =>
      decide(sink, 'mysql2', `${MYSQL2_PROMISE_VIEW} ${core}.${m}`, () => {
        const why = promiseViewMismatch(Reflect.get(target, m), core);
        return why === null ? null : `${m} of this release: ${why}`;
      }) === 'fast',
  );
}
