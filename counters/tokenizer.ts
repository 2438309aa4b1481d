import type { StatementClass } from './events';

/**
 * Lexical rules differ per server: MySQL escapes with backslashes inside '...' and "..." and has `#` comments,
 * PostgreSQL has `$tag$` strings, `E'...'` escapes and nested block comments, SQLite brackets identifiers.
 * `generic` accepts the union, for SQL whose server is unknown.
 */
export type SqlDialect = 'mysql' | 'postgres' | 'sqlite' | 'generic';

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

interface DialectRules {
  hashComments: boolean;
  /** MySQL `/*! ... *\/` and MariaDB `/*M! ... *\/`: the server runs their content, so we lex it as code. */
  versionComments: boolean;
  nestedBlockComments: boolean;
  backslashInQuotes: boolean;
  doubleQuoteIsString: boolean;
  dollarQuotes: boolean;
  escapeStringPrefix: boolean;
  bracketIdentifiers: boolean;
  /** `$1` (PostgreSQL), `$name` and `$1` (SQLite, whose `$` takes any identifier characters). */
  dollarParams: 'numbered' | 'named' | false;
  /** `:name`: SQLite's own, and mysql2's `namedPlaceholders` rewrite them on the client, so the wrapper sees them. */
  colonParams: boolean;
  /** `@name`: SQLite only; in MySQL `@name` is a user variable, in PostgreSQL `@` is an operator. */
  atParams: boolean;
  /** `?NNN`: SQLite's numbered form. */
  numberedQuestion: boolean;
}

const RULES: Record<SqlDialect, DialectRules> = {
  mysql: {
    hashComments: true,
    versionComments: true,
    nestedBlockComments: false,
    backslashInQuotes: true,
    doubleQuoteIsString: true,
    dollarQuotes: false,
    escapeStringPrefix: false,
    bracketIdentifiers: false,
    dollarParams: false,
    colonParams: true,
    atParams: false,
    numberedQuestion: false,
  },
  postgres: {
    hashComments: false,
    versionComments: false,
    nestedBlockComments: true,
    backslashInQuotes: false,
    doubleQuoteIsString: false,
    dollarQuotes: true,
    escapeStringPrefix: true,
    bracketIdentifiers: false,
    dollarParams: 'numbered',
    // `arr[1:n]` slices and `a::int` casts: a colon is never a placeholder the server or pg sees.
    colonParams: false,
    atParams: false,
    numberedQuestion: false,
  },
  sqlite: {
    hashComments: false,
    versionComments: false,
    nestedBlockComments: false,
    backslashInQuotes: false,
    doubleQuoteIsString: false,
    dollarQuotes: false,
    escapeStringPrefix: false,
    bracketIdentifiers: true,
    dollarParams: 'named',
    colonParams: true,
    atParams: true,
    numberedQuestion: true,
  },
  generic: {
    hashComments: true,
    versionComments: true,
    nestedBlockComments: false,
    backslashInQuotes: true,
    doubleQuoteIsString: false,
    dollarQuotes: true,
    escapeStringPrefix: true,
    bracketIdentifiers: false,
    dollarParams: 'numbered',
    colonParams: true,
    atParams: true,
    numberedQuestion: true,
  },
};

const DOLLAR_TAG = /\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;
const VERSION_COMMENT = /\/\*M?!\d*/y;
/** Operators of more than one character, longest first; anything else is one `punct` per character. */
const OPERATORS_3 = new Set(['<=>', '->>', '#>>', '!~*', '~~*', '!~~', '<->']);
const OPERATORS_2 = new Set(['<=', '>=', '<>', '!=', '||', '&&', '::', ':=', '->', '#>', '@>', '<@', '<<', '>>', '~~', '!~', '~*', '@@', '#-']);

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

/**
 * A lazy lexer: classification usually needs only the first word, and the multi-row INSERT it reads may be
 * megabytes long, so tokens are produced on demand and the rest of the text is never looked at.
 */
export class SqlLexer {
  readonly #sql: string;
  readonly #rules: DialectRules;
  #pos = 0;
  #versionDepth = 0;

  constructor(sql: string, dialect: SqlDialect = 'generic') {
    this.#sql = sql;
    this.#rules = RULES[dialect];
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
        if (rules.dollarQuotes) {
          DOLLAR_TAG.lastIndex = pos;
          const m = DOLLAR_TAG.exec(sql);
          if (m) {
            const close = sql.indexOf(m[0], pos + m[0].length);
            return this.#token('string', '$', pos, close < 0 ? sql.length : close + m[0].length);
          }
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
      const three = sql.slice(pos, pos + 3);
      if (OPERATORS_3.has(three)) return this.#token('punct', three, pos, pos + 3);
      const two = three.slice(0, 2);
      if (OPERATORS_2.has(two)) return this.#token('punct', two, pos, pos + 2);
      return this.#token('punct', sql[pos]!, pos, pos + 1);
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
 * The class of the first statement in `sql`. Comments, strings and quoted identifiers are skipped by a real lexer,
 * never matched by the first characters.
 *
 * Decisions worth knowing:
 * - Only the first statement of a multi-statement string counts.
 * - `SAVEPOINT x`, `RELEASE [SAVEPOINT] x` and `ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] x` are `savepoint`:
 *   they neither start nor end a transaction, and `rollback` must mean "a transaction was abandoned". ORMs emit
 *   them for nested transactions, so they get their own class on every driver rather than hiding in `other`.
 * - `START TRANSACTION`, `BEGIN [WORK|TRANSACTION|DEFERRED|IMMEDIATE|EXCLUSIVE]` are `begin`; MariaDB's
 *   `BEGIN NOT ATOMIC` compound statement is `other`. `COMMIT`, `END` (PostgreSQL, SQLite) are `commit`;
 *   `ROLLBACK`, `ABORT` are `rollback`; the two-phase `COMMIT PREPARED` / `ROLLBACK PREPARED` keep their verb.
 * - `REPLACE` is `insert`; `VALUES` and `TABLE` are `select`; `(SELECT ...)` is `select`.
 * - `EXPLAIN`, `DESCRIBE`, `PRAGMA`, `CALL`, `MERGE`, `COPY`, `LOAD DATA`, `GRANT` are `other`, even when they
 *   execute or write: `other` is the honest bucket for "not one of the classes".
 */
export function classifyStatement(sql: string, dialect: SqlDialect = 'generic'): StatementClass {
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
      return classifyWith(lexer);
    case 'SET':
      return 'set';
    case 'SHOW':
      return 'show';
    case 'START': {
      const second = lexer.next();
      return second?.type === 'word' && second.value === 'TRANSACTION' ? 'begin' : 'other';
    }
    case 'BEGIN': {
      const second = lexer.next();
      return second?.type === 'word' && second.value === 'NOT' ? 'other' : 'begin';
    }
    case 'COMMIT':
    case 'END':
      return 'commit';
    case 'ABORT':
      return 'rollback';
    case 'ROLLBACK':
      return classifyRollback(lexer);
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
 * Skips the common table expressions (their bodies are parenthesised, so depth tracking is enough) and classifies
 * the main statement: the first top-level DML word, or a top-level `(` right after a CTE body (`WITH x AS (...)
 * (SELECT ...)`).
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
        depth = Math.max(0, depth - 1);
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

/** Number of `?` placeholders outside strings and comments (MySQL-style positional parameters). */
export function countPlaceholders(sql: string, dialect: SqlDialect = 'mysql'): number {
  const lexer = new SqlLexer(sql, dialect);
  let count = 0;
  // Only the bare `?`: mysql2 and mariadb bind by position, and `:name` is a different contract.
  for (let token = lexer.next(); token; token = lexer.next()) if (token.type === 'param' && token.value === '?') count++;
  return count;
}
