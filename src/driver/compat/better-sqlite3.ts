/**
 * What the better-sqlite3 wrapper relies on that is not promised: fast path `counting-prototype` swaps an extensible
 * statement's prototype (native methods there, `source` a string); plain path: a counting Proxy, slower, same counts.
 */
import { getPrototypeOf, hasOwn } from '../../shared/intrinsics';
import type { StatementSink } from '../../sql/events';
import { FORCED_REASON, forcedPlain } from './path';

export const BETTER_SQLITE3_COUNTING_PROTOTYPE = 'counting-prototype';

/** The methods the counting prototype replaces, each found on the driver's Statement prototype. */
export const PROTOTYPE_METHODS = ['run', 'get', 'all', 'iterate', 'bind'] as const;

// One answer per driver prototype: better-sqlite3 has one Statement class per loaded addon.
const MISMATCH = new WeakMap<object, string | null>();

/** Why `stmt` cannot be counted through a counting prototype; null when it can. */
export function countingPrototypeMismatch(stmt: object): string | null {
  const base = getPrototypeOf(stmt) as object | null;
  if (base === null) return 'the statement has no prototype';
  let reason = MISMATCH.get(base);
  if (reason === undefined) {
    reason = prototypeMismatch(base);
    MISMATCH.set(base, reason);
  }
  if (reason !== null) return reason;
  if (typeof (stmt as { source?: unknown }).source !== 'string') return 'the statement has no source string';
  if (!Object.isExtensible(stmt)) return 'the statement is not extensible';
  for (const m of PROTOTYPE_METHODS) if (hasOwn(stmt, m)) return `the statement has its own ${m}`;
  return null;
}

function prototypeMismatch(base: object): string | null {
  for (const m of PROTOTYPE_METHODS) if (typeof Reflect.get(base, m) !== 'function') return `Statement.prototype.${m} is not a function`;
  return null;
}

/**
 * The path one wrapped Database takes for its statements: forced plain is read once per Database (not per prepare,
 * which some callers make before every run), and each driver prototype's decision is told to the sink once.
 */
export class StatementPaths {
  readonly #forced = forcedPlain();
  readonly #told = new WeakSet<object>();
  readonly #sink: StatementSink;

  constructor(sink: StatementSink) {
    this.#sink = sink;
  }

  /** Whether `stmt` takes the fast path (see the module's comment). */
  fast(stmt: object): boolean {
    const reason = this.#forced ? FORCED_REASON : countingPrototypeMismatch(stmt);
    const base = getPrototypeOf(stmt) as object | null;
    if (base !== null && !this.#told.has(base)) {
      this.#told.add(base);
      this.#sink.notePath?.('better-sqlite3', BETTER_SQLITE3_COUNTING_PROTOTYPE, reason);
    } else if (base === null) this.#sink.notePath?.('better-sqlite3', BETTER_SQLITE3_COUNTING_PROTOTYPE, reason);
    return reason === null;
  }

  /** Counts `stmt` in place: its prototype becomes `counting(prototype)`, which inherits from the driver's. */
  static adopt(stmt: object, counting: (base: object) => object): void {
    Object.setPrototypeOf(stmt, counting(getPrototypeOf(stmt) as object));
  }
}
