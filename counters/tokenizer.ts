import type { StatementClass } from './events';

/**
 * Lexical rules differ per server: MySQL escapes with backslashes inside '...' and "..." and has `#` comments,
 * PostgreSQL has `$tag$` strings, `E'...'` escapes and nested block comments, SQLite brackets identifiers.
 * `generic` accepts the union, for SQL whose server is unknown.
 */
export type SqlDialect = 'mysql' | 'postgres' | 'sqlite' | 'generic';

/** One lexical token; only what classification needs. Words are upper-cased. */
export interface SqlToken {
  type: 'word' | 'ident' | 'string' | 'number' | 'param' | 'punct';
  value: string;
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
  },
};

const DOLLAR_TAG = /\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;
const VERSION_COMMENT = /\/\*M?!\d*/y;
const WORD = /[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*/y;
const NUMBER = /[0-9][0-9A-Za-z_.]*/y;

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
      const ch = sql[pos]!;
      const next = sql[pos + 1];
      if (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r' || ch === '\f' || ch === '\v') {
        this.#pos++;
        continue;
      }
      // `--` starts a comment even without the space MySQL requires: `--comment` is common in scripts,
      // while `1--1` (MySQL arithmetic) never decides a statement's class.
      if (ch === '-' && next === '-') {
        this.#skipLine();
        continue;
      }
      if (ch === '#' && rules.hashComments) {
        this.#skipLine();
        continue;
      }
      if (ch === '/' && next === '*') {
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
      if (ch === '*' && next === '/' && this.#versionDepth > 0) {
        this.#versionDepth--;
        this.#pos += 2;
        continue;
      }
      if (ch === "'") {
        this.#pos = this.#skipQuoted(pos, "'", rules.backslashInQuotes);
        return { type: 'string', value: "'" };
      }
      if (ch === '"') {
        this.#pos = this.#skipQuoted(pos, '"', rules.backslashInQuotes && rules.doubleQuoteIsString);
        return rules.doubleQuoteIsString ? { type: 'string', value: '"' } : { type: 'ident', value: '"' };
      }
      if (ch === '`') {
        this.#pos = this.#skipQuoted(pos, '`', false);
        return { type: 'ident', value: '`' };
      }
      if (ch === '[' && rules.bracketIdentifiers) {
        const end = sql.indexOf(']', pos + 1);
        this.#pos = end < 0 ? sql.length : end + 1;
        return { type: 'ident', value: '[' };
      }
      if (ch === '$' && rules.dollarQuotes) {
        DOLLAR_TAG.lastIndex = pos;
        const m = DOLLAR_TAG.exec(sql);
        if (m) {
          const end = sql.indexOf(m[0], pos + m[0].length);
          this.#pos = end < 0 ? sql.length : end + m[0].length;
          return { type: 'string', value: '$' };
        }
      }
      if ((ch === 'E' || ch === 'e') && next === "'" && rules.escapeStringPrefix) {
        this.#pos = this.#skipQuoted(pos + 1, "'", true);
        return { type: 'string', value: "'" };
      }
      WORD.lastIndex = pos;
      const word = WORD.exec(sql);
      if (word) {
        this.#pos = pos + word[0].length;
        return { type: 'word', value: word[0].toUpperCase() };
      }
      NUMBER.lastIndex = pos;
      const num = NUMBER.exec(sql);
      if (num) {
        this.#pos = pos + num[0].length;
        return { type: 'number', value: num[0] };
      }
      this.#pos++;
      if (ch === '?') return { type: 'param', value: ch };
      return { type: 'punct', value: ch };
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
  #skipQuoted(start: number, quote: string, backslash: boolean): number {
    const sql = this.#sql;
    let i = start + 1;
    while (i < sql.length) {
      const c = sql[i];
      if (backslash && c === '\\') {
        i += 2;
      } else if (c === quote) {
        if (sql[i + 1] === quote) i += 2;
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
 * - `SAVEPOINT`, `RELEASE [SAVEPOINT]` and `ROLLBACK TO [SAVEPOINT]` are `other`: they neither start nor end a
 *   transaction, and `rollback` must mean "a transaction was abandoned".
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
    default:
      return 'other';
  }
}

function classifyRollback(lexer: SqlLexer): StatementClass {
  let token = lexer.next();
  if (token?.type === 'word' && (token.value === 'WORK' || token.value === 'TRANSACTION')) token = lexer.next();
  if (token?.type === 'word' && token.value === 'TO') return 'other';
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
  for (let token = lexer.next(); token; token = lexer.next()) if (token.type === 'param') count++;
  return count;
}
