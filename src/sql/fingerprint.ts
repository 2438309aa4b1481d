import { createHash } from 'node:crypto';
import { SqlLexer } from './tokenizer';
import { DIALECTS } from './dialects';
import type { DialectRules, SqlDialect } from './dialects';

/**
 * Statement fingerprints: the shape of a statement with its values taken out, so that the statements of an N+1 loop,
 * or multi-row INSERTs of different lengths, are one shape. Literals and placeholders become `?`, `IN`, `ARRAY` and
 * multi-row `VALUES` lists collapse to their distinct elements, comments go, keywords are upper-cased and identifiers
 * keep the server's case rules: the full rules are in docs/capture-api.md (*Count snapshots and repeated shapes*).
 */
export function fingerprint(sql: string, dialect: SqlDialect, options: FingerprintOptions = {}): string {
  const rules = DIALECTS[dialect];
  let tokens = normalise(sql, dialect, rules, options.skipRepeatedRows ?? true);
  let collapser = new Collapser(tokens, rules);
  // Elements were stepped over on the promise that their list collapses; in SQL whose brackets do not pair up
  // it does not, and then the text is lexed again, in full.
  if (tokens.skippedIn.some((open) => !collapser.isMatched(open))) {
    tokens = normalise(sql, dialect, rules, false);
    collapser = new Collapser(tokens, rules);
  }
  const out = new Rendering();
  collapser.render(0, tokens.count, out);
  return out.text();
}

/** Hex characters in a {@link fingerprintId}. */
export const FINGERPRINT_ID_LENGTH = 12;
const FINGERPRINT_ID = /^[0-9a-f]{12}$/;

/**
 * A short stable id for a fingerprint: the first 12 hex characters of its SHA-256. The same on every run, machine
 * and dialect (it hashes the fingerprint text only), so it can go into snapshots and ignore lists.
 */
export function fingerprintId(fingerprintText: string): string {
  return createHash('sha256').update(fingerprintText).digest('hex').slice(0, FINGERPRINT_ID_LENGTH);
}

/** True for a string shaped like a {@link fingerprintId}. */
export function isFingerprintId(value: string): boolean {
  return FINGERPRINT_ID.test(value);
}

// Token kinds after normalisation.
const WORD = 0; // a keyword, upper-cased
const IDENT = 1;
const VALUE = 2; // a literal or a placeholder, rendered `?`
const OPEN = 3;
const CLOSE = 4;
const LBRACK = 5;
const RBRACK = 6;
const COMMA = 7;
const DOT = 8;
const SEMI = 9;
const OP = 10;

/**
 * Words rendered as keywords (upper-case). Any other word is an identifier and follows the dialect's case rule,
 * so the list only needs the words that appear in statements; a missing keyword is still a stable shape.
 */
const KEYWORDS = new Set(
  (
    'ABORT ADD ALL ALTER ANALYZE AND ANY ARRAY AS ASC AUTOINCREMENT AUTO_INCREMENT BEGIN BETWEEN BIGINT BIGSERIAL ' +
    'BINARY BLOB BOOL BOOLEAN BOTH BY BYTEA CALL CASCADE CASE CAST CHAR CHARACTER CHECK COLLATE COLUMN COMMIT ' +
    'CONFLICT CONSTRAINT CREATE CROSS CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE DATE DATETIME DECIMAL ' +
    'DEFAULT DEFERRED DELAYED DELETE DESC DESCRIBE DISTINCT DIV DO DOUBLE DROP DUPLICATE ELSE END ESCAPE EXCEPT ' +
    'EXCLUSIVE EXISTS EXPLAIN FALSE FETCH FILTER FIRST FLOAT FOR FOREIGN FROM FULL GRANT GROUP HAVING ' +
    'HIGH_PRIORITY IF IGNORE ILIKE IMMEDIATE IN INDEX INNER INSERT INT INTEGER INTERSECT INTERVAL INTO IS JOIN ' +
    'JSON JSONB KEY LAST LATERAL LEADING LEFT LIKE LIMIT LOCK LOCKED LOW_PRIORITY MATCHED MERGE MOD NATURAL NEXT ' +
    'NOT NOTHING NOWAIT NULL NULLS NUMERIC OF OFFSET ON ONLY OR ORDER OUTER OVER PARTITION PRAGMA PRECISION ' +
    'PRIMARY QUICK REAL RECURSIVE REFERENCES REGEXP RELEASE RENAME REPLACE RESTRICT RETURNING REVOKE RIGHT RLIKE ' +
    'ROLLBACK ROW ROWS SAVEPOINT SELECT SERIAL SET SHARE SHOW SKIP SMALLINT SOME START STRAIGHT_JOIN TABLE TEMP ' +
    'TEMPORARY TEXT THEN TIME TIMESTAMP TINYINT TO TRAILING TRANSACTION TRUE TRUNCATE UNION UNIQUE UPDATE USE ' +
    'USING UUID VALUES VARCHAR VARYING VIEW WHEN WHERE WINDOW WITH WITHOUT WORK XOR ZONE'
  ).split(' '),
);
/** Keywords written against their `(` like a call: `ANY(?)`, `VARCHAR(?)`, `ARRAY[?]`. */
const TIGHT_WORDS = new Set(
  'ALL ANY ARRAY BIGINT CAST CHAR CHARACTER DECIMAL DOUBLE FLOAT INT INTEGER NUMERIC ROW SMALLINT SOME TIME TIMESTAMP TINYINT VARCHAR'.split(' '),
);
/** After these, `name (` is a column list, not a call: `INSERT INTO t (a)`, `CREATE TABLE t (a INT)`. */
const NAME_THEN_LIST = new Set(['INTO', 'TABLE', 'REFERENCES', 'EXISTS', 'VIEW', 'WITH', 'RECURSIVE']);
/** Words that glue to an adjacent string to make one literal: `X'1F'`, `B'101'`, `N'abc'`. */
const STRING_PREFIXES = new Set(['X', 'B', 'N']);
const SUBQUERY_WORDS = new Set(['SELECT', 'WITH', 'VALUES', 'TABLE']);

/**
 * Normalised tokens, in typed arrays that double when full (cheaper than pushing onto plain arrays token by token for a
 * long INSERT). Only keywords, identifiers and operators carry their own text; the rest is implied by the kind.
 */
class Tokens {
  kinds: Uint8Array;
  #textIndex: Int32Array;
  readonly #texts: string[] = [];
  count = 0;
  /** The `(` of every VALUES row or IN list whose repeated elements were stepped over without tokens. */
  readonly skippedIn: number[] = [];

  constructor(capacity: number) {
    this.kinds = new Uint8Array(capacity);
    this.#textIndex = new Int32Array(capacity);
  }

  push(kind: number, text: string | null = null): void {
    if (this.count === this.kinds.length) {
      const kinds = new Uint8Array(this.count * 2);
      kinds.set(this.kinds);
      this.kinds = kinds;
      const textIndex = new Int32Array(this.count * 2);
      textIndex.set(this.#textIndex);
      this.#textIndex = textIndex;
    }
    this.kinds[this.count] = kind;
    if (text === null) {
      this.#textIndex[this.count] = -1;
    } else {
      this.#textIndex[this.count] = this.#texts.length;
      this.#texts.push(text);
    }
    this.count++;
  }

  /** Drops the tokens from index `n` on. */
  truncate(n: number): void {
    for (let i = this.count - 1; i >= n; i--) if (this.#textIndex[i]! >= 0) this.#texts.pop();
    this.count = n;
  }

  kind(i: number): number {
    return i >= 0 && i < this.count ? this.kinds[i]! : -1;
  }

  text(i: number): string {
    const t = this.#textIndex[i]!;
    return t >= 0 ? this.#texts[t]! : IMPLIED_TEXT[this.kinds[i]!]!;
  }
}

const IMPLIED_TEXT: string[] = [];
IMPLIED_TEXT[VALUE] = '?';
IMPLIED_TEXT[OPEN] = '(';
IMPLIED_TEXT[CLOSE] = ')';
IMPLIED_TEXT[LBRACK] = '[';
IMPLIED_TEXT[RBRACK] = ']';
IMPLIED_TEXT[COMMA] = ',';
IMPLIED_TEXT[DOT] = '.';
IMPLIED_TEXT[SEMI] = ';';

function asciiLower(text: string): string {
  return /[A-Z]/.test(text) ? text.replace(/[A-Z]+/g, (m) => m.toLowerCase()) : text;
}

function unquote(raw: string, open: string): string {
  if (open === '[') return raw.slice(1, raw.endsWith(']') ? -1 : undefined);
  const body = raw.length >= 2 && raw.endsWith(open) ? raw.slice(1, -1) : raw.slice(1);
  return body.split(open + open).join(open);
}

function canonicalQuoted(raw: string, open: string, rules: DialectRules): string {
  let name = unquote(raw, open);
  if (rules.foldsQuoted) name = asciiLower(name);
  if (rules.plainName.test(name) && !KEYWORDS.has(name.toUpperCase())) return name;
  const quote = rules.identifierQuote;
  return quote + name.split(quote).join(quote + quote) + quote;
}

/** Internal switches, for tests that compare the fast path with the plain one. */
export interface FingerprintOptions {
  /** Step over VALUES rows shaped like the row before them without lexing them (default true). */
  skipRepeatedRows?: boolean;
}

/** One pass over the lexer: keywords, canonical identifiers, `?` for every value, comments gone. */
function normalise(sql: string, dialect: SqlDialect, rules: DialectRules, skipRepeatedRows: boolean): Tokens {
  // Skipped rows make far fewer tokens than characters: start small and grow.
  const tokens = new Tokens(Math.min(sql.length + 1, 1024));
  const lexer = new SqlLexer(sql, dialect);
  // What the previous lexer token was, for prefixes and concatenation that depend on adjacency.
  let prevWord: string | null = null;
  let prevEnd = -1;
  let prevString = false;
  let prevAmpAfterU = false;
  // VALUES rows: the last row lexed in full is the reference that the next rows are compared with.
  let depth = 0;
  let expectRow = false;
  let rowStart = -1;
  let rowDepth = -1;
  let inRow = false;
  let afterRow = false;
  let refStart = -1;
  let refEnd = -1;
  let rowOpen = -1;
  let refOpen = -1;
  // IN lists: the depth inside `IN (`, where the current element began, and the last element lexed in full.
  let listDepth = -1;
  let listOpen = -1;
  let elementStart = -1;
  let elementRefStart = -1;
  let elementRefEnd = -1;
  let listOpened = false;
  let listSkipped = false;
  let t = lexer.next();
  while (t) {
    if (listOpened) {
      // `IN (SELECT a, a ...)` is a subquery, whose repeated items are not a list to collapse.
      listOpened = false;
      if (t.type === 'word' && SUBQUERY_WORDS.has(t.value)) listDepth = -1;
    }
    if (skipRepeatedRows && listDepth === depth && t.type === 'punct' && t.value === ',') {
      if (!listSkipped) {
        elementRefStart = skipSpace(sql, elementStart);
        elementRefEnd = t.start;
      }
      listSkipped = false;
      // The next elements, while they lex like the last one and are all of their element (a `,` or `)` follows),
      // go with their commas: the collapse would keep one of them only anyway.
      const end = skipElementsLike(lexer, sql, elementRefStart, elementRefEnd, t.start, true);
      if (end >= 0) {
        tokens.skippedIn.push(listOpen);
        lexer.seek(end);
        prevWord = null;
        prevString = false;
        prevAmpAfterU = false;
        prevEnd = end;
        listSkipped = true;
        t = lexer.next();
        continue;
      }
      elementStart = t.end;
    }
    if (afterRow) {
      afterRow = false;
      if (skipRepeatedRows && t.type === 'punct' && t.value === ',') {
        // The comma and the row go, and the rows like it after them: the collapse would keep one of them only.
        const end = skipElementsLike(lexer, sql, refStart, refEnd, t.start, false);
        if (end >= 0) {
          tokens.skippedIn.push(refOpen);
          lexer.seek(end);
          prevWord = null;
          prevString = false;
          prevAmpAfterU = false;
          prevEnd = end;
          afterRow = true;
          t = lexer.next();
          continue;
        }
      }
      expectRow = t.type === 'punct' && t.value === ',';
      rowStart = -1;
    } else if (expectRow) {
      if (t.type === 'word' && t.value === 'ROW' && rowStart < 0) {
        rowStart = t.start;
      } else {
        if (t.type === 'punct' && t.value === '(') {
          if (rowStart < 0) rowStart = t.start;
          rowDepth = depth;
          rowOpen = -1;
          inRow = true;
        }
        expectRow = false;
      }
    }
    const adjacent = t.start === prevEnd;
    const wasWord = prevWord;
    const wasString = prevString;
    const wasAmpAfterU = prevAmpAfterU && adjacent;
    prevWord = null;
    prevString = false;
    prevAmpAfterU = false;
    prevEnd = t.end;
    const n = tokens.count;
    switch (t.type) {
      case 'param':
        tokens.push(VALUE);
        break;
      case 'word': {
        const word = t.value;
        prevWord = word;
        if (!KEYWORDS.has(word)) {
          const raw = sql.slice(t.start, t.end);
          tokens.push(IDENT, rules.foldsUnquoted ? asciiLower(raw) : raw);
        } else if (
          (word === 'NULL' || word === 'TRUE' || word === 'FALSE') &&
          !(tokens.kind(n - 1) === WORD && (tokens.text(n - 1) === 'IS' || tokens.text(n - 1) === 'NOT'))
        ) {
          tokens.push(VALUE);
        } else {
          tokens.push(WORD, word);
        }
        if (word === 'VALUES' || (word === 'VALUE' && rules.valueIsValues)) {
          expectRow = true;
          rowStart = -1;
        }
        break;
      }
      case 'string': {
        prevString = true;
        if (wasAmpAfterU) {
          tokens.truncate(n - 2); // `U` `&`
        } else if (wasWord !== null && ((adjacent && STRING_PREFIXES.has(wasWord)) || rules.charsetIntroducer?.test(wasWord) === true)) {
          tokens.truncate(n - 1);
        } else if (wasString) {
          break; // 'a' 'b' is one literal
        }
        tokens.push(VALUE);
        break;
      }
      case 'number': {
        let l = n;
        // `.5`: a dot that no name or value precedes starts the number.
        if (tokens.kind(l - 1) === DOT && adjacent && !isOperand(tokens.kind(l - 2))) l--;
        // A sign with no operand before it belongs to the number: `VALUES (-1)` is `VALUES (?)`, `a - 1` keeps it.
        if (tokens.kind(l - 1) === OP && (tokens.text(l - 1) === '-' || tokens.text(l - 1) === '+') && !isOperand(tokens.kind(l - 2))) l--;
        if (l !== n) tokens.truncate(l);
        tokens.push(VALUE);
        break;
      }
      case 'ident':
        tokens.push(IDENT, canonicalQuoted(sql.slice(t.start, t.end), t.value, rules));
        break;
      case 'punct': {
        const p = t.value;
        const kind = p.length === 1 ? punctKind(p.charCodeAt(0)) : OP;
        // Brackets count in the depth too, so the commas of an ARRAY[...] inside an IN list are not the list's.
        if (kind === OPEN || kind === LBRACK) {
          depth++;
          if (kind === OPEN && tokens.kind(n - 1) === WORD && tokens.text(n - 1) === 'IN') {
            listDepth = depth;
            listOpen = n;
            elementStart = t.end;
            listOpened = true;
            listSkipped = false;
          }
          if (kind === OPEN && inRow && rowOpen < 0) rowOpen = n;
        } else if (kind === CLOSE || kind === RBRACK) {
          if (depth === listDepth) listDepth = -1;
          depth--;
          if (inRow && depth === rowDepth) {
            inRow = false;
            afterRow = true;
            refStart = rowStart;
            refEnd = t.end;
            refOpen = rowOpen;
          }
        }
        if (kind === SEMI && (n === 0 || tokens.kind(n - 1) === SEMI)) break;
        if (kind === OP) {
          prevAmpAfterU = p === '&' && adjacent && wasWord === 'U';
          tokens.push(OP, p);
        } else {
          tokens.push(kind);
        }
        break;
      }
    }
    t = lexer.next();
  }
  let n = tokens.count;
  while (n > 0 && tokens.kind(n - 1) === SEMI) n--;
  tokens.truncate(n);
  return tokens;
}

/**
 * From the comma at `comma`, steps over elements that lex like `[refStart, refEnd)` ({@link SqlLexer.skipSameShape}) to
 * the end of the last one, or -1. With `whole`, an element counts only when a `,` or `)` follows it.
 */
function skipElementsLike(lexer: SqlLexer, sql: string, refStart: number, refEnd: number, comma: number, whole: boolean): number {
  if (refEnd <= refStart) return -1;
  let skipped = -1;
  let at = comma;
  while (sql.charCodeAt(at) === 44) {
    const next = lexer.skipSameShape(refStart, refEnd, at + 1);
    if (next < 0 || (whole && !endsElement(sql, next))) break;
    let end = next;
    if (lexer.lastShapeWasText) {
      end = lexer.skipRepeats(at, next);
      if (whole && !endsElement(sql, end)) end -= next - at;
    }
    skipped = end;
    at = skipSpace(sql, end);
  }
  return skipped;
}

function skipSpace(sql: string, from: number): number {
  let i = from;
  for (let c = sql.charCodeAt(i); c === 32 || (c >= 9 && c <= 13); c = sql.charCodeAt(++i));
  return i;
}

/** True when only whitespace stands between `at` and a `,` or `)`: the element before `at` is complete. */
function endsElement(sql: string, at: number): boolean {
  const c = sql.charCodeAt(skipSpace(sql, at));
  return c === 44 || c === 41;
}

function punctKind(c: number): number {
  switch (c) {
    case 40:
      return OPEN;
    case 41:
      return CLOSE;
    case 91:
      return LBRACK;
    case 93:
      return RBRACK;
    case 44:
      return COMMA;
    case 46:
      return DOT;
    case 59:
      return SEMI;
    default:
      return OP;
  }
}

function isOperand(kind: number): boolean {
  return kind === IDENT || kind === VALUE || kind === CLOSE || kind === RBRACK;
}

/** Joins tokens with single spaces by a fixed rule, so input spacing never changes the text. */
class Rendering {
  readonly #parts: string[] = [];
  #prevKind = -1;
  #prevText = '';
  #lastKeyword = '';

  push(kind: number, text: string): void {
    this.#space(kind, text);
    this.#parts.push(text);
    this.#prevKind = kind;
    this.#prevText = text;
    if (kind === WORD) this.#lastKeyword = text;
  }

  /** Text already rendered (a collapsed list), spaced as if it began with `first` and ended with `lastKind`. */
  chunk(text: string, first: number, lastKind: number): void {
    this.#space(first, '');
    this.#parts.push(text);
    this.#prevKind = lastKind;
    this.#prevText = '';
  }

  text(): string {
    return this.#parts.join('');
  }

  #space(kind: number, text: string): void {
    if (this.#parts.length === 0) return;
    const prev = this.#prevKind;
    if (prev === OPEN || prev === LBRACK || prev === DOT) return;
    if (kind === CLOSE || kind === RBRACK || kind === COMMA || kind === SEMI || kind === DOT) return;
    if (text === '::' || this.#prevText === '::') return;
    if (kind === OPEN || kind === LBRACK) {
      if (prev === IDENT && !(kind === OPEN && NAME_THEN_LIST.has(this.#lastKeyword))) return;
      if (prev === WORD && TIGHT_WORDS.has(this.#prevText)) return;
      if (kind === LBRACK && (prev === CLOSE || prev === RBRACK || prev === VALUE)) return;
    }
    this.#parts.push(' ');
  }
}

/** Renders token ranges, collapsing `IN (...)`, `ARRAY[...]` and `VALUES (...), ...` lists. */
class Collapser {
  readonly #tokens: Tokens;
  readonly #kinds: Uint8Array;
  readonly #rules: DialectRules;
  /** For each `(` or `[`, the index of its partner; -1 when unbalanced. */
  readonly #match: Int32Array;

  constructor(tokens: Tokens, rules: DialectRules) {
    this.#tokens = tokens;
    this.#kinds = tokens.kinds;
    this.#rules = rules;
    const n = tokens.count;
    const match = new Int32Array(n).fill(-1);
    const stack = new Int32Array(n);
    let depth = 0;
    for (let i = 0; i < n; i++) {
      const k = this.#kinds[i];
      if (k === OPEN || k === LBRACK) {
        stack[depth++] = i;
      } else if ((k === CLOSE || k === RBRACK) && depth > 0) {
        const open = stack[--depth]!;
        if (this.#kinds[open] === (k === CLOSE ? OPEN : LBRACK)) {
          match[open] = i;
          match[i] = open;
        } else {
          depth = 0; // mismatched brackets: nothing is matched across them
        }
      }
    }
    this.#match = match;
  }

  render(from: number, to: number, out: Rendering): void {
    const kinds = this.#kinds;
    let i = from;
    while (i < to) {
      const kind = kinds[i]!;
      const text = this.#tokens.text(i);
      if (kind === WORD) {
        if (text === 'IN' && kinds[i + 1] === OPEN && this.#closes(i + 1, to) && !this.#isSubquery(i + 2)) {
          out.push(WORD, text);
          i = this.#list(i + 1, out);
          continue;
        }
        if (text === 'ARRAY' && kinds[i + 1] === LBRACK && this.#closes(i + 1, to)) {
          out.push(WORD, text);
          i = this.#list(i + 1, out);
          continue;
        }
        if (text === 'VALUES' || (text === 'VALUE' && this.#rules.valueIsValues)) {
          out.push(WORD, text);
          i = this.#rows(i + 1, to, out);
          continue;
        }
      }
      out.push(kind, text);
      i++;
    }
  }

  /** True when the bracket at token `open` has its partner. */
  isMatched(open: number): boolean {
    return open >= 0 && this.#match[open]! > open;
  }

  #closes(open: number, to: number): boolean {
    const close = this.#match[open]!;
    return close > open && close < to;
  }

  #isSubquery(i: number): boolean {
    return this.#kinds[i] === WORD && SUBQUERY_WORDS.has(this.#tokens.text(i));
  }

  /** `(a, b, ...)` or `[a, b, ...]` at `open`: its distinct elements. Returns the index after the close. */
  #list(open: number, out: Rendering): number {
    const close = this.#match[open]!;
    const ranges: [number, number][] = [];
    let start = open + 1;
    for (let j = open + 1; j < close; j++) {
      const k = this.#kinds[j];
      if ((k === OPEN || k === LBRACK) && this.#match[j]! > j) j = this.#match[j]!;
      else if (k === COMMA) {
        ranges.push([start, j]);
        start = j + 1;
      }
    }
    if (start < close || ranges.length > 0) ranges.push([start, close]);
    out.push(this.#kinds[open]!, this.#tokens.text(open));
    if (ranges.length > 0) out.chunk(this.#distinct(ranges).join(', '), VALUE, VALUE);
    out.push(this.#kinds[close]!, this.#tokens.text(close));
    return close + 1;
  }

  /** The rows after `VALUES`: `(...)` or `ROW(...)`, comma-separated. Returns the index after the last row. */
  #rows(from: number, to: number, out: Rendering): number {
    const kinds = this.#kinds;
    const ranges: [number, number][] = [];
    let j = from;
    while (j < to && this.#isRowStart(j, to)) {
      const open = kinds[j] === OPEN ? j : j + 1;
      const end = this.#match[open]! + 1;
      ranges.push([j, end]);
      j = end;
      if (kinds[j] === COMMA && this.#isRowStart(j + 1, to)) j++;
      else break;
    }
    if (ranges.length === 0) return from;
    out.chunk(this.#distinct(ranges).join(', '), kinds[from] === OPEN ? OPEN : WORD, CLOSE);
    return j;
  }

  #isRowStart(j: number, to: number): boolean {
    const kinds = this.#kinds;
    if (kinds[j] === OPEN) return this.#closes(j, to);
    return kinds[j] === WORD && this.#tokens.text(j) === 'ROW' && kinds[j + 1] === OPEN && this.#closes(j + 1, to);
  }

  /**
   * Rendered elements without repeats, first seen first. A range whose tokens equal a kept one's is a repeat
   * without rendering it, so the 10 000 identical rows of a big INSERT cost one token comparison each.
   */
  #distinct(ranges: [number, number][]): string[] {
    const kept: { ranges: [number, number][]; text: string }[] = [];
    for (const range of ranges) {
      if (this.#seen(kept, range)) continue;
      const text = this.#renderRange(range);
      let same: { ranges: [number, number][]; text: string } | undefined;
      for (const k of kept) if (k.text === text) same = k;
      if (!same) kept.push({ ranges: [range], text });
      else if (same.ranges.length < 8) same.ranges.push(range);
    }
    return kept.map((k) => k.text);
  }

  #seen(kept: { ranges: [number, number][] }[], range: [number, number]): boolean {
    for (const k of kept) for (const r of k.ranges) if (this.#sameTokens(r, range)) return true;
    return false;
  }

  #renderRange([from, to]: [number, number]): string {
    if (to === from + 1 && this.#kinds[from] === VALUE) return '?';
    const out = new Rendering();
    this.render(from, to, out);
    return out.text();
  }

  #sameTokens([a, aEnd]: [number, number], [b, bEnd]: [number, number]): boolean {
    if (aEnd - a !== bEnd - b) return false;
    const kinds = this.#kinds;
    for (let i = 0; i < aEnd - a; i++) {
      const k = kinds[a + i];
      if (k !== kinds[b + i]) return false;
      if ((k === WORD || k === IDENT || k === OP) && this.#tokens.text(a + i) !== this.#tokens.text(b + i)) return false;
    }
    return true;
  }
}
