/**
 * Lexical rules differ per server: MySQL escapes with backslashes inside '...' and "..." and has `#` comments,
 * PostgreSQL has `$tag$` strings, `E'...'` escapes and nested block comments, SQLite brackets identifiers.
 * `generic` accepts the union, for SQL whose server is unknown.
 */
export type SqlDialect = 'mysql' | 'postgres' | 'sqlite' | 'generic';

/** The dialect of a server sqltally knows (each probe source declares one). */
export type ServerDialect = Exclude<SqlDialect, 'generic'>;

/** What the tokenizer and the fingerprint need to know of one dialect: a new dialect is one more entry in {@link DIALECTS}. */
export interface DialectRules {
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
  /** The quote sqltally's own SQL and the fingerprint put around an identifier (a doubled one inside stands for itself). */
  identifierQuote: '`' | '"';
  /** The server folds an unquoted identifier to lower case, so the fingerprint does too. */
  foldsUnquoted: boolean;
  /** The server compares even a quoted identifier without case (SQLite). */
  foldsQuoted: boolean;
  /** A quoted name that reads the same unquoted (the fingerprint then drops its quotes). */
  plainName: RegExp;
  /** `VALUE` as a synonym of `VALUES` (MySQL). */
  valueIsValues: boolean;
  /** A charset introducer before a string (`_utf8mb4'x'`), which the fingerprint folds into the literal; null where none exist. */
  charsetIntroducer: RegExp | null;
}

const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_$]*$/;
const PLAIN_LOWER_NAME = /^[a-z_][a-z0-9_$]*$/;
const CHARSET_INTRODUCER = /^_(?:binary|utf8\w*|latin\d|ascii|ucs2|utf16\w*|utf32|cp\d+|big5|gbk|gb2312|gb18030|euckr|sjis|ujis|koi8\w+)$/i;

export const DIALECTS: Readonly<Record<SqlDialect, DialectRules>> = {
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
    identifierQuote: '`',
    foldsUnquoted: false,
    foldsQuoted: false,
    plainName: PLAIN_NAME,
    valueIsValues: true,
    charsetIntroducer: CHARSET_INTRODUCER,
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
    identifierQuote: '"',
    foldsUnquoted: true,
    foldsQuoted: false,
    // Only a lower-case name reads the same unquoted: `"Name"` keeps its quotes.
    plainName: PLAIN_LOWER_NAME,
    valueIsValues: false,
    charsetIntroducer: null,
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
    identifierQuote: '"',
    foldsUnquoted: true,
    foldsQuoted: true,
    plainName: PLAIN_NAME,
    valueIsValues: false,
    charsetIntroducer: CHARSET_INTRODUCER,
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
    identifierQuote: '"',
    foldsUnquoted: false,
    foldsQuoted: false,
    plainName: PLAIN_NAME,
    valueIsValues: false,
    charsetIntroducer: CHARSET_INTRODUCER,
  },
};

/** Every dialect, for what is kept per dialect (the statement caches). */
export const SQL_DIALECTS = Object.keys(DIALECTS) as readonly SqlDialect[];
