import type { StatementClass } from './events';
import { fingerprint, fingerprintId } from './fingerprint';
import { SQL_DIALECTS } from './dialects';
import type { SqlDialect } from './dialects';
import { classifyStatement } from './tokenizer';

/** Distinct SQL texts remembered per dialect before the cache starts over. */
const MAX_TEXTS = 4096;
/**
 * Characters of SQL text (keys) and fingerprints (values) one cache holds before it starts over. The texts are the
 * cache's keys, so it holds them alive: a bulk load whose batch size changes from batch to batch would otherwise keep
 * every large INSERT text it ever saw. 16 Mi characters is 16-32 MB.
 */
export const MAX_CACHED_CHARS = 16 * 1024 * 1024;

/**
 * A value computed once per distinct SQL text, bounded by text count and characters held: full, it starts over (texts in
 * use come back in one call each), so a workload of unique texts cannot grow it without end.
 */
class TextCache<V> {
  #current = new Map<string, V>();
  #chars = 0;
  readonly #compute: (sql: string) => V;
  readonly #size: (value: V) => number;

  constructor(compute: (sql: string) => V, size: (value: V) => number) {
    this.#compute = compute;
    this.#size = size;
  }

  get(sql: string): V {
    const cached = this.#current.get(sql);
    if (cached !== undefined) return cached;
    const value = this.#compute(sql);
    const chars = sql.length + this.#size(value);
    // A text beyond the whole budget is computed each time rather than emptying the cache for itself.
    if (chars > MAX_CACHED_CHARS) return value;
    if (this.#current.size >= MAX_TEXTS || this.#chars + chars > MAX_CACHED_CHARS) {
      this.#current = new Map();
      this.#chars = 0;
    }
    this.#current.set(sql, value);
    this.#chars += chars;
    return value;
  }

  /** Texts and characters held now (tests). */
  get held(): { texts: number; chars: number } {
    return { texts: this.#current.size, chars: this.#chars };
  }
}

/** Statement class by SQL text: wrappers sit on every call of a user's suite, and a loop sends the same few texts. */
class ClassCache extends TextCache<StatementClass> {
  constructor(dialect: SqlDialect) {
    super(
      (sql) => classifyStatement(sql, dialect),
      () => 0,
    );
  }
}

/** One `T` per dialect, made by `make`. */
function perDialect<T>(make: (dialect: SqlDialect) => T): Record<SqlDialect, T> {
  return Object.fromEntries(SQL_DIALECTS.map((d) => [d, make(d)])) as Record<SqlDialect, T>;
}

const CACHES = perDialect((d) => new ClassCache(d));

/**
 * Texts longer than this are classified afresh instead of looked up: a lookup hashes or compares the whole text (a
 * 100 KB multi-row INSERT: microseconds per lookup), while classifying reads only its first words.
 */
const CACHED_MAX_CHARS = 4096;
/** Except a statement that starts with WITH: its class is that of the statement after the CTEs, which can be far in. */
const LEADING_WITH = /^[\s(;]*with\b/i;

/** {@link classifyStatement}, cached per distinct text (see {@link ClassCache}). */
export function classifyCached(sql: string, dialect: SqlDialect): StatementClass {
  if (sql.length > CACHED_MAX_CHARS && !LEADING_WITH.test(sql.slice(0, 64))) return classifyStatement(sql, dialect);
  return CACHES[dialect].get(sql);
}

/** Fingerprints (and their ids) by SQL text, computed once per distinct text, bounded the same way. */
class FingerprintCache extends TextCache<{ fingerprint: string; id: string }> {
  constructor(dialect: SqlDialect) {
    super(
      (sql) => {
        const fp = fingerprint(sql, dialect);
        return { fingerprint: fp, id: fingerprintId(fp) };
      },
      (entry) => entry.fingerprint.length + entry.id.length,
    );
  }
}

const FINGERPRINTS = perDialect((d) => new FingerprintCache(d));

/** What the fingerprint cache of `dialect` holds now (tests). */
export function fingerprintCacheHeld(dialect: SqlDialect): { texts: number; chars: number } {
  return FINGERPRINTS[dialect].held;
}

/** The statement's shape (see src/sql/fingerprint.ts) and its short id, cached per distinct text. */
export function fingerprintCached(sql: string, dialect: SqlDialect): { fingerprint: string; id: string } {
  return FINGERPRINTS[dialect].get(sql);
}
