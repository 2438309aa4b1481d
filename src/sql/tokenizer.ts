import type { StatementClass } from './events';
import { mathFloor, mathMax, mathMin } from '../shared/intrinsics';
import { DIALECTS } from './dialects';
import type { DialectRules, SqlDialect } from './dialects';

export type { ServerDialect, SqlDialect } from './dialects';

/**
 * One lexical token. Words are upper-cased; `start`/`end` are offsets into the text, so a caller that needs the
 * spelling (an identifier's case, a quoted name's content) slices it instead of the lexer copying every token.
 * `string` and `ident` values are the opening quote (`'`, `"`, `` ` ``, `[`, `$`); `param` values are the
 * placeholder as written (`?`, `?3`, `$1`, `:name`, `@name`, `$name`); `punct` values are one character, or a
 * multi-character operator (`<=`, `::`, `->>`, ...).
 */
export interface SqlToken {
  type: 'word' | 'ident' | 'string' | 'number' | 'param' | 'punct';
  value: string;
  start: number;
  end: number;
}

const DOLLAR_TAG = /\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;
const VERSION_COMMENT = /\/\*M?!\d*/y;
/** Operators of more than one character, longest first; anything else is one `punct` per character. */
const OPERATORS_3 = new Set(['<=>', '->>', '#>>', '!~*', '~~*', '!~~', '<->']);
const OPERATORS_2 = new Set(['<=', '>=', '<>', '!=', '||', '&&', '::', ':=', '->', '#>', '@>', '<@', '<<', '>>', '~~', '!~', '~*', '@@', '#-']);
const OPERATOR_START = new Uint8Array(128);
for (const op of [...OPERATORS_3, ...OPERATORS_2]) OPERATOR_START[op.charCodeAt(0)] = 1;

// Character tests on char codes: the fingerprint lexes whole 200 KB statements, where a regex per token costs.
function isWordStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 0x80;
}
function isWordPart(c: number): boolean {
  return isWordStart(c) || (c >= 48 && c <= 57) || c === 36;
}
function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}
/** What a number literal may continue with: digits, `.`, exponent and hex/binary letters, `_` separators. */
function isNumberPart(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 46;
}

// Steps of a compiled reference row, for SqlLexer.skipSameShape.
const SHAPE_EXACT = 0;
const SHAPE_SPACE = 1;
/** Argument: the quote's char code, negated when backslashes escape inside it. */
const SHAPE_STRING = 2;
const SHAPE_NUMBER = 3;
const SHAPE_DOLLAR_QUOTE = 4;
/** Argument: the sigil's char code (`$` or `?`). */
const SHAPE_NUMBERED_PARAM = 5;

interface RowShape {
  text: string;
  /** False when every step is exact text or whitespace: then only the same text matches. */
  literals: boolean;
  ops: number[];
  args: (string | number | null)[];
}

/**
 * A lazy lexer: classification usually needs only the first word, and the multi-row INSERT it reads may be
 * megabytes long, so tokens are produced on demand and the rest of the text is never looked at.
 */
export class SqlLexer {
  readonly #sql: string;
  readonly #rules: DialectRules;
  #pos = 0;
  #versionDepth = 0;
  /** True when the last {@link skipSameShape} that passed matched the reference's exact text (it has no literal). */
  lastShapeWasText = false;
  // The reference row of skipSameShape, compiled once per reference rather than once per row.
  #shape: { start: number; end: number; value: RowShape | null } = { start: -1, end: -1, value: null };

  /** `start`: where to begin reading (after a word the caller has read itself). */
  constructor(sql: string, dialect: SqlDialect = 'generic', start = 0) {
    this.#sql = sql;
    this.#rules = DIALECTS[dialect];
    this.#pos = start;
  }

  /** The next token, or null at the end of the text (an unterminated string or comment also ends it). */
  next(): SqlToken | null {
    const sql = this.#sql;
    const rules = this.#rules;
    for (;;) {
      const pos = this.#pos;
      if (pos >= sql.length) return null;
      const c = sql.charCodeAt(pos);
      const n = sql.charCodeAt(pos + 1);
      // space, \t, \n, \v, \f, \r
      if (c === 32 || (c >= 9 && c <= 13)) {
        this.#pos++;
        continue;
      }
      // `--` starts a comment even without the space MySQL requires: `--comment` is common in scripts,
      // while `1--1` (MySQL arithmetic) never decides a statement's class.
      if (c === 45 /* - */ && n === 45) {
        this.#skipLine();
        continue;
      }
      if (c === 35 /* # */ && rules.hashComments) {
        this.#skipLine();
        continue;
      }
      if (c === 47 /* / */ && n === 42 /* * */) {
        if (rules.versionComments) {
          VERSION_COMMENT.lastIndex = pos;
          const m = VERSION_COMMENT.exec(sql);
          if (m) {
            this.#pos = pos + m[0].length;
            this.#versionDepth++;
            continue;
          }
        }
        this.#skipBlockComment();
        continue;
      }
      if (c === 42 /* * */ && n === 47 && this.#versionDepth > 0) {
        this.#versionDepth--;
        this.#pos += 2;
        continue;
      }
      if (isWordStart(c)) {
        if ((c === 69 || c === 101) /* E e */ && n === 39 && rules.escapeStringPrefix) {
          return this.#token('string', "'", pos, this.#skipQuoted(pos + 1, 39, true));
        }
        let i = pos + 1;
        while (i < sql.length && isWordPart(sql.charCodeAt(i))) i++;
        return this.#token('word', sql.slice(pos, i).toUpperCase(), pos, i);
      }
      if (isDigit(c)) return this.#token('number', '', pos, this.#skipNumber(pos), true);
      if (c === 39 /* ' */) return this.#token('string', "'", pos, this.#skipQuoted(pos, 39, rules.backslashInQuotes));
      if (c === 34 /* " */) {
        const end = this.#skipQuoted(pos, 34, rules.backslashInQuotes && rules.doubleQuoteIsString);
        return rules.doubleQuoteIsString ? this.#token('string', '"', pos, end) : this.#token('ident', '"', pos, end);
      }
      if (c === 96 /* ` */) return this.#token('ident', '`', pos, this.#skipQuoted(pos, 96, false));
      if (c === 91 /* [ */ && rules.bracketIdentifiers) {
        const close = sql.indexOf(']', pos + 1);
        return this.#token('ident', '[', pos, close < 0 ? sql.length : close + 1);
      }
      if (c === 36 /* $ */) {
        const tag = rules.dollarQuotes ? this.#dollarTagAt(pos) : null;
        if (tag !== null) {
          const close = sql.indexOf(tag, pos + tag.length);
          return this.#token('string', '$', pos, close < 0 ? sql.length : close + tag.length);
        }
        if (rules.dollarParams === 'numbered' && isDigit(n)) return this.#param(pos, this.#skipDigits(pos + 1));
        if (rules.dollarParams === 'named' && isWordPart(n)) return this.#param(pos, this.#skipWord(pos + 1));
      }
      if (c === 63 /* ? */) return this.#param(pos, rules.numberedQuestion ? this.#skipDigits(pos + 1) : pos + 1);
      // `::` (a cast) and `:=` are operators; `:name` only where some layer turns it into a placeholder.
      if (c === 58 /* : */ && rules.colonParams && isWordStart(n) && sql.charCodeAt(pos - 1) !== 58) {
        return this.#param(pos, this.#skipWord(pos + 1));
      }
      if (c === 64 /* @ */ && rules.atParams && isWordStart(n)) return this.#param(pos, this.#skipWord(pos + 1));
      if (c < 128 && OPERATOR_START[c] === 1) {
        const three = sql.slice(pos, pos + 3);
        if (OPERATORS_3.has(three)) return this.#token('punct', three, pos, pos + 3);
        const two = three.slice(0, 2);
        if (OPERATORS_2.has(two)) return this.#token('punct', two, pos, pos + 2);
      }
      return this.#token('punct', sql[pos]!, pos, pos + 1);
    }
  }

  /**
   * Where a stretch of text starting at `from` ends when it lexes exactly like `[refStart, refEnd)` but for literal
   * values and placeholder numbers, else -1: how a fingerprint steps over a multi-row INSERT's rows without tokens.
   * Stricter than the lexer (same spelling, same whitespace, no comment-like reference), so any doubt takes the lexer.
   */
  skipSameShape(refStart: number, refEnd: number, from: number): number {
    this.lastShapeWasText = false;
    if (this.#versionDepth !== 0) return -1;
    const sql = this.#sql;
    const shape = this.#shapeOf(refStart, refEnd);
    if (shape === null) return -1;
    let c = this.#skipSpace(from);
    // Rows of placeholders are the same text: one native comparison. Rows with literals almost never are.
    this.lastShapeWasText = !shape.literals;
    if (!shape.literals) return sql.startsWith(shape.text, c) ? c + shape.text.length : -1;
    const { ops, args } = shape;
    for (let i = 0; i < ops.length; i++) {
      const cc = sql.charCodeAt(c);
      switch (ops[i]) {
        case SHAPE_EXACT: {
          const text = args[i] as string;
          for (let k = 0; k < text.length; k++) if (sql.charCodeAt(c + k) !== text.charCodeAt(k)) return -1;
          c += text.length;
          break;
        }
        case SHAPE_SPACE:
          if (!(cc === 32 || (cc >= 9 && cc <= 13))) return -1;
          c = this.#skipSpace(c);
          break;
        case SHAPE_STRING: {
          const quote = args[i] as number;
          if (cc !== (quote > 0 ? quote : -quote)) return -1;
          c = this.#skipQuotedFast(c, quote > 0 ? quote : -quote, quote < 0);
          break;
        }
        case SHAPE_NUMBER:
          if (!isDigit(cc) || isWordPart(sql.charCodeAt(c - 1))) return -1;
          c = this.#skipNumber(c);
          break;
        case SHAPE_DOLLAR_QUOTE: {
          const tag = this.#dollarTagAt(c);
          const close = tag === null ? -1 : sql.indexOf(tag, c + tag.length);
          if (tag === null || close < 0) return -1;
          c = close + tag.length;
          break;
        }
        case SHAPE_NUMBERED_PARAM:
          // `$1` or `?1`: the sigil, then at least the digits the lexer would take.
          if (cc !== (args[i] as number)) return -1;
          c = this.#skipDigits(c + 1);
          break;
      }
      if (c > sql.length) return -1;
    }
    return c;
  }

  /**
   * The reference row as steps (exact text, whitespace, a literal to skip); null when it holds anything comment-like, or a
   * string whose escaping depends on a token boundary a character test cannot see.
   */
  #shapeOf(refStart: number, refEnd: number): RowShape | null {
    if (this.#shape.start === refStart && this.#shape.end === refEnd) return this.#shape.value;
    const sql = this.#sql;
    const rules = this.#rules;
    const text = sql.slice(refStart, refEnd);
    let value: RowShape | null = { text, literals: false, ops: [], args: [] };
    if (/--|\/\*|\*\/|#/.test(text)) value = null;
    let exact = -1;
    let r = refStart;
    const flush = (): void => {
      if (exact >= 0 && value) {
        value.ops.push(SHAPE_EXACT);
        value.args.push(sql.slice(exact, r));
      }
      exact = -1;
    };
    const step = (op: number, arg: string | number | null): void => {
      flush();
      value?.ops.push(op);
      value?.args.push(arg);
    };
    while (value && r < refEnd) {
      const rc = sql.charCodeAt(r);
      const before = sql.charCodeAt(r - 1);
      if (rc === 32 || (rc >= 9 && rc <= 13)) {
        step(SHAPE_SPACE, null);
        r = this.#skipSpace(r);
      } else if (rc === 39 || (rc === 34 && rules.doubleQuoteIsString)) {
        let backslash = rules.backslashInQuotes;
        if (rules.escapeStringPrefix && (before === 69 || before === 101)) {
          const beforeE = sql.charCodeAt(r - 2);
          // After a name, `E'` is that name and a string; after a placeholder's digits it would be `E'...'`.
          if (isDigit(beforeE)) value = null;
          else if (!isWordPart(beforeE)) backslash = true;
        }
        step(SHAPE_STRING, backslash ? -rc : rc);
        r = this.#skipQuoted(r, rc, backslash);
      } else if (isDigit(rc) && !isWordPart(before)) {
        step(SHAPE_NUMBER, null);
        r = this.#skipNumber(r);
      } else if (rc === 36 && rules.dollarQuotes && this.#dollarTagAt(r) !== null) {
        const tag = this.#dollarTagAt(r)!;
        const close = sql.indexOf(tag, r + tag.length);
        if (close < 0 || close + tag.length > refEnd) value = null;
        step(SHAPE_DOLLAR_QUOTE, null);
        r = close + tag.length;
      } else if ((rc === 36 && rules.dollarParams === 'numbered' && isDigit(sql.charCodeAt(r + 1))) || (rc === 63 && rules.numberedQuestion)) {
        step(SHAPE_NUMBERED_PARAM, rc);
        r = this.#skipDigits(r + 1);
      } else if (rc === 96 || (rc === 34 && !rules.doubleQuoteIsString) || (rc === 91 && rules.bracketIdentifiers)) {
        // A quoted name is exact text, taken whole: its content may hold quotes that are not strings.
        if (exact < 0) exact = r;
        const close = rc === 91 ? sql.indexOf(']', r + 1) + 1 : this.#skipQuoted(r, rc, false);
        if (close <= 0 || close > refEnd) value = null;
        r = close;
      } else {
        if (exact < 0) exact = r;
        r++;
      }
    }
    flush();
    if (r !== refEnd) value = null;
    if (value) value.literals = value.ops.some((op) => op !== SHAPE_EXACT && op !== SHAPE_SPACE);
    this.#shape = { start: refStart, end: refEnd, value };
    return value;
  }

  /**
   * {@link #skipQuoted} by `indexOf`, since most of a literal row's characters are in its strings. With
   * backslashes, a quote is escaped when an odd run of them stands before it.
   */
  #skipQuotedFast(start: number, quote: number, backslash: boolean): number {
    const sql = this.#sql;
    const q = quote === 39 ? "'" : '"';
    let i = start + 1;
    for (;;) {
      const close = sql.indexOf(q, i);
      if (close < 0) return sql.length;
      if (backslash) {
        let run = 0;
        while (close - run - 1 > start && sql.charCodeAt(close - run - 1) === 92) run++;
        if (run % 2 === 1) {
          i = close + 1;
          continue;
        }
      }
      if (sql.charCodeAt(close + 1) !== quote) return close + 1;
      i = close + 2;
    }
  }

  /**
   * Where the run of exact copies of the text `[start, end)` that follows `end` stops, in whole copies; `end` when
   * there is none. Called with a separator and a row that {@link skipSameShape} passed (so no comment in it), it
   * steps over 10 000 identical `, (?, ?, ?)` in a few comparisons of doubling length, in native code.
   */
  skipRepeats(start: number, end: number): number {
    const sql = this.#sql;
    const period = end - start;
    if (period <= 0) return end;
    let covered = end;
    let len = period;
    let growing = true;
    while (len >= period) {
      const room = sql.length - covered;
      const size = mathMin(len, room - (room % period));
      if (size >= period && sql.startsWith(sql.slice(start, start + size), covered)) {
        covered += size;
        if (growing) len = covered - start;
      } else {
        growing = false;
        len = mathFloor(mathMin(len, size) / period / 2) * period;
      }
    }
    return covered;
  }

  /** Moves to `pos`, which must be a token boundary (an end returned by {@link skipSameShape}). */
  seek(pos: number): void {
    this.#pos = pos;
  }

  /** The `$tag$` opening a dollar-quoted string at `i`, or null. */
  #dollarTagAt(i: number): string | null {
    DOLLAR_TAG.lastIndex = i;
    const m = DOLLAR_TAG.exec(this.#sql);
    return m ? m[0] : null;
  }

  #skipSpace(from: number): number {
    const sql = this.#sql;
    let i = from;
    for (;;) {
      const c = sql.charCodeAt(i);
      if (c === 32 || (c >= 9 && c <= 13)) i++;
      else return i;
    }
  }

  #token(type: SqlToken['type'], value: string, start: number, end: number, sliceValue = false): SqlToken {
    this.#pos = end;
    return { type, value: sliceValue ? this.#sql.slice(start, end) : value, start, end };
  }

  #param(start: number, end: number): SqlToken {
    return this.#token('param', '', start, end, true);
  }

  #skipWord(from: number): number {
    let i = from;
    while (i < this.#sql.length && isWordPart(this.#sql.charCodeAt(i))) i++;
    return i;
  }

  #skipDigits(from: number): number {
    let i = from;
    while (i < this.#sql.length && isDigit(this.#sql.charCodeAt(i))) i++;
    return i;
  }

  /** `12`, `1.5`, `.5` is lexed as `.` then `5`; `1e-5` keeps its signed exponent; `0x1F`, `0b101`, `1_000`. */
  #skipNumber(from: number): number {
    const sql = this.#sql;
    let i = from + 1;
    for (;;) {
      while (i < sql.length && isNumberPart(sql.charCodeAt(i))) i++;
      const last = sql.charCodeAt(i - 1);
      const sign = sql.charCodeAt(i);
      const hex = sql.charCodeAt(from + 1) === 120 || sql.charCodeAt(from + 1) === 88;
      if ((last === 101 || last === 69) && !hex && (sign === 43 || sign === 45) && isDigit(sql.charCodeAt(i + 1))) {
        i += 2;
        continue;
      }
      return i;
    }
  }

  #skipLine(): void {
    const end = this.#sql.indexOf('\n', this.#pos);
    this.#pos = end < 0 ? this.#sql.length : end + 1;
  }

  #skipBlockComment(): void {
    const sql = this.#sql;
    let depth = 0;
    let i = this.#pos;
    while (i < sql.length) {
      if (sql[i] === '/' && sql[i + 1] === '*') {
        depth++;
        i += 2;
        if (!this.#rules.nestedBlockComments && depth > 1) depth = 1;
      } else if (sql[i] === '*' && sql[i + 1] === '/') {
        depth--;
        i += 2;
        if (depth === 0) break;
      } else {
        i++;
      }
    }
    this.#pos = i;
  }

  /** Returns the index just past the closing quote; a doubled quote is an escaped quote in every dialect. */
  #skipQuoted(start: number, quote: number, backslash: boolean): number {
    const sql = this.#sql;
    let i = start + 1;
    while (i < sql.length) {
      const c = sql.charCodeAt(i);
      if (backslash && c === 92) {
        i += 2;
      } else if (c === quote) {
        if (sql.charCodeAt(i + 1) === quote) i += 2;
        else return i + 1;
      } else {
        i++;
      }
    }
    return sql.length;
  }
}

const SELECT_WORDS = new Set(['SELECT', 'VALUES', 'TABLE']);
const DDL_WORDS = new Set(['CREATE', 'ALTER', 'DROP', 'TRUNCATE', 'RENAME']);
/** Words that can start the main statement of a `WITH` query. */
const WITH_MAIN: Record<string, StatementClass> = {
  SELECT: 'select',
  VALUES: 'select',
  TABLE: 'select',
  INSERT: 'insert',
  REPLACE: 'insert',
  UPDATE: 'update',
  DELETE: 'delete',
};

/**
 * The class of the first statement in `sql`, read by a lexer that skips comments, strings and quoted identifiers.
 * `SAVEPOINT`, `RELEASE` and `ROLLBACK ... TO` are `savepoint`, so `rollback` always means a transaction was abandoned;
 * `EXPLAIN`, `PRAGMA`, `COPY` and the like are `other` even when they write. Every rule: docs/capture-api.md.
 */
export function classifyStatement(sql: string, dialect: SqlDialect = 'generic'): StatementClass {
  // Most texts start with their word: it is read here as the lexer would, and a lexer made only if the class needs more.
  const start = leadingWordStart(sql, dialect);
  if (start >= 0) {
    let end = start + 1;
    while (end < sql.length && isWordPart(sql.charCodeAt(end))) end++;
    const word = sql.slice(start, end).toUpperCase();
    return classifyWord(word, FOLLOWED_WORDS.has(word) ? new SqlLexer(sql, dialect, end) : null);
  }
  const lexer = new SqlLexer(sql, dialect);
  let token = lexer.next();
  // Empty statements and a leading `(` do not change the class: `;;SELECT`, `((SELECT 1))`.
  let parens = 0;
  while (token && token.type === 'punct' && (token.value === ';' || token.value === '(')) {
    if (token.value === '(') parens++;
    token = lexer.next();
  }
  if (!token || token.type !== 'word') return 'other';
  const word = token.value;
  if (parens > 0) return word === 'SELECT' || word === 'VALUES' || word === 'TABLE' || word === 'WITH' ? 'select' : 'other';
  return classifyWord(word, lexer);
}

/** Words whose class depends on the tokens after them (read from `rest` by {@link classifyWord}). */
const FOLLOWED_WORDS = new Set(['WITH', 'START', 'BEGIN', 'ROLLBACK']);

/**
 * Where the first token of `sql` starts when it is a plain ASCII word with only whitespace before it (what the lexer
 * would read first: no comment, string or quoted name can come before a letter), else -1.
 */
function leadingWordStart(sql: string, dialect: SqlDialect): number {
  let i = 0;
  while (i < sql.length && isSpace(sql.charCodeAt(i))) i++;
  const c = sql.charCodeAt(i);
  if (!((c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95)) return -1;
  if ((c === 69 || c === 101) /* E e */ && sql.charCodeAt(i + 1) === 39 && DIALECTS[dialect].escapeStringPrefix) return -1;
  return i;
}

/** The class of a statement that starts with `word`; `rest` reads what follows it, for the {@link FOLLOWED_WORDS}. */
function classifyWord(word: string, rest: SqlLexer | null): StatementClass {
  if (SELECT_WORDS.has(word)) return 'select';
  if (DDL_WORDS.has(word)) return 'ddl';
  switch (word) {
    case 'INSERT':
    case 'REPLACE':
      return 'insert';
    case 'UPDATE':
      return 'update';
    case 'DELETE':
      return 'delete';
    case 'WITH':
      return classifyWith(rest!);
    case 'SET':
      return 'set';
    case 'SHOW':
      return 'show';
    case 'START': {
      const second = rest!.next();
      return second?.type === 'word' && second.value === 'TRANSACTION' ? 'begin' : 'other';
    }
    case 'BEGIN': {
      const second = rest!.next();
      return second?.type === 'word' && second.value === 'NOT' ? 'other' : 'begin';
    }
    case 'COMMIT':
    case 'END':
      return 'commit';
    case 'ABORT':
      return 'rollback';
    case 'ROLLBACK':
      return classifyRollback(rest!);
    case 'SAVEPOINT':
    case 'RELEASE':
      return 'savepoint';
    default:
      return 'other';
  }
}

function classifyRollback(lexer: SqlLexer): StatementClass {
  let token = lexer.next();
  if (token?.type === 'word' && (token.value === 'WORK' || token.value === 'TRANSACTION')) token = lexer.next();
  if (token?.type === 'word' && token.value === 'TO') return 'savepoint';
  return 'rollback';
}

/**
 * Skips the common table expressions (parenthesised, so depth tracking is enough) and classifies the main statement: the
 * first top-level DML word, or a top-level `(` right after a CTE body (`WITH x AS (...) (SELECT ...)`).
 */
function classifyWith(lexer: SqlLexer): StatementClass {
  let depth = 0;
  let previous: SqlToken | null = null;
  for (let token = lexer.next(); token; previous = token, token = lexer.next()) {
    if (token.type === 'punct') {
      if (token.value === '(') {
        if (depth === 0 && previous?.type === 'punct' && previous.value === ')') return 'select';
        depth++;
      } else if (token.value === ')') {
        depth = mathMax(0, depth - 1);
      } else if (token.value === ';' && depth === 0) {
        return 'other';
      }
      continue;
    }
    if (depth === 0 && token.type === 'word') {
      const main = WITH_MAIN[token.value];
      // A CTE named like a reserved word must be quoted, so a bare DML word at depth 0 is the main statement.
      if (main) return main;
    }
  }
  return 'other';
}

/**
 * Statements in a text sent as one simple Query: those separated by `;` outside strings, comments and quoted bodies,
 * empty ones not counted (a trailing `;`). At least 1, as the server counts an empty Query too.
 */
/** One identifier quoted for `dialect`, whatever it contains. */
export function quoteIdentifier(dialect: SqlDialect, name: string): string {
  const q = DIALECTS[dialect].identifierQuote;
  return `${q}${name.split(q).join(q + q)}${q}`;
}

export function countStatements(sql: string, dialect: SqlDialect): number {
  if (sql.indexOf(';') === -1) return 1;
  const lexer = new SqlLexer(sql, dialect);
  let statements = 0;
  let pending = false;
  for (let token = lexer.next(); token; token = lexer.next()) {
    if (token.type === 'punct' && token.value === ';') {
      if (pending) statements++;
      pending = false;
    } else pending = true;
  }
  if (pending) statements++;
  return mathMax(1, statements);
}

/** Number of `?` placeholders outside strings and comments (MySQL-style positional parameters). */
export function countPlaceholders(sql: string, dialect: SqlDialect = 'mysql'): number {
  const lexer = new SqlLexer(sql, dialect);
  let count = 0;
  // Only the bare `?`: mysql2 and mariadb bind by position, and `:name` is a different contract.
  for (let token = lexer.next(); token; token = lexer.next()) if (token.type === 'param' && token.value === '?') count++;
  return count;
}

/**
 * One statement and a final `;`, and no character that could open a string, a quoted name or a comment: the `;` is
 * the statement's end, no lexing needed (a client sending values written into its texts would lex every one).
 */
const ONE_THEN_SEMICOLON = /^[^;'"`$#\\\-/[\]\u0080-\uffff]*;[ \t\n\v\f\r]*$/;

/** space, \t, \n, \v, \f, \r: what the lexer skips between tokens. */
function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13);
}

/**
 * The statements of a text sent as one simple Query or COM_QUERY, in order: each one's text and class, split at `;`
 * outside strings, comments and quoted bodies, empty ones left out (the server runs nothing for them).
 */
export function splitStatements(sql: string, dialect: SqlDialect): { text: string; statementClass: StatementClass }[] {
  const one = (text: string) => ({ text, statementClass: classifyStatement(text, dialect) });
  if (sql.indexOf(';') === -1) return sql.trim() === '' ? [] : [one(sql)];
  const plain = plainStatement(sql);
  if (plain) return plain[0] === plain[1] ? [] : [one(sql.slice(plain[0], plain[1]))];
  return lexStatements(sql, dialect);
}

/**
 * Where the statement of a text that {@link ONE_THEN_SEMICOLON} describes lies, `[start, end)`: what the lexer would
 * give, the text between the first and the last character that is not whitespace before the `;` (empty when there
 * is none); null for any other text.
 */
export function plainStatement(sql: string): [number, number] | null {
  if (!ONE_THEN_SEMICOLON.test(sql)) return null;
  let start = 0;
  let end = sql.indexOf(';');
  while (start < end && isSpace(sql.charCodeAt(start))) start++;
  while (end > start && isSpace(sql.charCodeAt(end - 1))) end--;
  return [start, end];
}

/** The statements of `sql` as the lexer splits them (exported for the test that holds the shortcut above to it). */
export function lexStatements(sql: string, dialect: SqlDialect): { text: string; statementClass: StatementClass }[] {
  const one = (text: string) => ({ text, statementClass: classifyStatement(text, dialect) });
  const lexer = new SqlLexer(sql, dialect);
  const out: { text: string; statementClass: StatementClass }[] = [];
  let start = -1;
  let end = 0;
  for (let token = lexer.next(); token; token = lexer.next()) {
    if (token.type === 'punct' && token.value === ';') {
      if (start >= 0) out.push(one(sql.slice(start, end)));
      start = -1;
    } else {
      if (start < 0) start = token.start;
      end = token.end;
    }
  }
  if (start >= 0) out.push(one(sql.slice(start, end)));
  return out;
}
