import type { StatementClass } from './events';
import { fingerprint, fingerprintId } from './fingerprint';
import { classifyStatement, type SqlDialect } from './tokenizer';

/** Distinct SQL texts remembered per dialect before the cache starts over. */
const MAX_TEXTS = 4096;

/**
 * Statement class by SQL text, computed once per distinct text: wrappers sit on every call of a user's suite, and a
 * loop sends the same few texts again and again. Bounded: when full it starts over (the texts in use come back in
 * one call each), so a workload of unique texts (literals inlined) cannot grow it without end.
 */
class ClassCache {
  #current = new Map<string, StatementClass>();
  readonly #dialect: SqlDialect;

  constructor(dialect: SqlDialect) {
    this.#dialect = dialect;
  }

  classify(sql: string): StatementClass {
    const cached = this.#current.get(sql);
    if (cached !== undefined) return cached;
    const statementClass = classifyStatement(sql, this.#dialect);
    if (this.#current.size >= MAX_TEXTS) this.#current = new Map();
    this.#current.set(sql, statementClass);
    return statementClass;
  }
}

const CACHES: Record<SqlDialect, ClassCache> = {
  mysql: new ClassCache('mysql'),
  postgres: new ClassCache('postgres'),
  sqlite: new ClassCache('sqlite'),
  generic: new ClassCache('generic'),
};

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
  return CACHES[dialect].classify(sql);
}

/** Fingerprints (and their ids) by SQL text, computed once per distinct text, bounded the same way. */
class FingerprintCache {
  #current = new Map<string, { fingerprint: string; id: string }>();
  readonly #dialect: SqlDialect;

  constructor(dialect: SqlDialect) {
    this.#dialect = dialect;
  }

  get(sql: string): { fingerprint: string; id: string } {
    const cached = this.#current.get(sql);
    if (cached !== undefined) return cached;
    const fp = fingerprint(sql, this.#dialect);
    const entry = { fingerprint: fp, id: fingerprintId(fp) };
    if (this.#current.size >= MAX_TEXTS) this.#current = new Map();
    this.#current.set(sql, entry);
    return entry;
  }
}

const FINGERPRINTS: Record<SqlDialect, FingerprintCache> = {
  mysql: new FingerprintCache('mysql'),
  postgres: new FingerprintCache('postgres'),
  sqlite: new FingerprintCache('sqlite'),
  generic: new FingerprintCache('generic'),
};

/** The statement's shape (see counters/fingerprint.ts) and its short id, cached per distinct text. */
export function fingerprintCached(sql: string, dialect: SqlDialect): { fingerprint: string; id: string } {
  return FINGERPRINTS[dialect].get(sql);
}
