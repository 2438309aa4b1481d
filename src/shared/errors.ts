/**
 * The phases a sqltally run goes through, in order. Every error names one, so a reader knows how far the run got.
 */
export type Phase =
  'config' | 'provision' | 'start' | 'connect' | 'setup' | 'wrap' | 'workload' | 'verify' | 'probe' | 'wire' | 'verdict' | 'report' | 'gate' | 'stop';

export interface SqltallyErrorContext {
  /** Backend name as the user addressed it (`mariadb`, `postgres@16`), when one is involved. */
  backend?: string;
  phase: Phase;
  /** The statement being sent, or the file being read; truncated when shown. */
  statement?: string;
  /** Which provider was in charge (`local`, `testcontainers`, `external`, `embedded`). */
  provider?: string;
  /** What a person can do about it. */
  hint?: string;
  cause?: unknown;
}

const STATEMENT_SHOWN_CHARS = 200;

/**
 * `user:password@` in a URL. The password runs to the last `@` before the path, so a password with an unencoded
 * `@` is hidden whole; quotes end it, so JSON text (report.json goes through here) keeps its structure.
 */
const URL_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^\s"'<>/?#@:]*:)([^\s"'<>/?#]*)@/gi;
/**
 * A secret-named parameter (`password`, `passwd`, `pwd`, `*secret`, `*token`, `api_key`...) in a URL query or a libpq
 * `key=value` word. Its value ends at a delimiter of either syntax or is libpq-quoted, never eating a JSON delimiter.
 */
const SECRET_PARAMETER = /(?<![a-z0-9_.-])((?:[a-z0-9_.-]*(?:password|passwd|secret|token)|pwd|pass|api[_-]?key)=)('[^'"\n]*'?|[^&;#\s"',)]*)/gi;

/**
 * A password literal in SQL: `IDENTIFIED BY '...'` (MySQL, MariaDB), `PASSWORD '...'` (PostgreSQL). It never runs
 * past a double quote or a line end, so in JSON text it cannot pair with a quote in another field.
 */
const SQL_PASSWORD = /((?:IDENTIFIED\s+BY|PASSWORD)\s+)'(?:[^'"\\\n]|\\.|'')*'/gi;

/**
 * Removes passwords from anything that looks like a connection URL, a connection string or a statement that sets
 * one, wherever it appears in a string: `user:***@`, `?password=***`, `IDENTIFIED BY '***'`.
 */
export function redactSecrets(text: string): string {
  return text.replace(URL_PASSWORD, '$1***@').replace(SECRET_PARAMETER, '$1***').replace(SQL_PASSWORD, "$1'***'");
}

/** Whitespace that folding would change: leading, two in a row, or any but a plain space. */
const NEEDS_FOLDING = /^\s|\s\s|[^\S ]/;
const WHITESPACE = /\s/;
const NON_WHITESPACE = /\S/;

/**
 * Whitespace folded, cut at `max` characters with the original length said. Only a prefix is folded: a 200 KB
 * multi-row INSERT must not be scanned whole to show its first 200 characters.
 */
export function truncateStatement(sql: string, max = STATEMENT_SHOWN_CHARS): string {
  // Generated SQL needs no folding in the part shown (single spaces only): then nothing beyond it is scanned or copied,
  // which every new text of a long multi-row INSERT would otherwise pay.
  if (sql.length <= max) {
    if (!NEEDS_FOLDING.test(sql)) return sql.trimEnd();
  } else {
    const cut = sql.slice(0, max + 1);
    // Nothing to fold up to the cut: folding would drop the marker only if all after the cut were whitespace, so only
    // a short text's tail needs a look.
    if (!NEEDS_FOLDING.test(cut) && (!WHITESPACE.test(cut.charAt(max)) || sql.length > max * 4 + 16 || NON_WHITESPACE.test(sql.slice(max + 1)))) {
      return `${cut.slice(0, max)}… (${sql.length} chars)`;
    }
  }
  const head = sql.length > max * 4 + 16 ? sql.slice(0, max * 4 + 16) : sql;
  const flat = head.replace(/\s+/g, ' ').trim();
  if (head === sql && flat.length <= max) return flat;
  return `${flat.slice(0, max)}… (${sql.length} chars)`;
}

/**
 * The one error type sqltally throws on purpose. The message already carries backend, phase and statement,
 * so a log line alone is enough to act on; the original error is kept as `cause`.
 */
export class SqltallyError extends Error {
  readonly backend: string | undefined;
  readonly phase: Phase;
  readonly statement: string | undefined;
  readonly provider: string | undefined;
  readonly hint: string | undefined;

  constructor(message: string, context: SqltallyErrorContext) {
    const where = [
      context.backend ? `backend ${context.backend}` : undefined,
      context.provider ? `provider ${context.provider}` : undefined,
      `phase ${context.phase}`,
    ]
      .filter(Boolean)
      .join(', ');
    const parts = [`[${where}] ${message}`];
    if (context.statement) parts.push(`statement: ${truncateStatement(context.statement)}`);
    if (context.cause !== undefined && !(context.cause instanceof SqltallyError)) {
      const causeText = context.cause instanceof Error ? context.cause.message : String(context.cause);
      if (causeText && !message.includes(causeText)) parts.push(`cause: ${causeText}`);
    }
    if (context.hint) parts.push(`what to do: ${context.hint}`);
    super(redactSecrets(parts.join('\n  ')), { cause: context.cause });
    this.name = 'SqltallyError';
    this.backend = context.backend;
    this.phase = context.phase;
    this.statement = context.statement;
    this.provider = context.provider;
    this.hint = context.hint;
  }
}

/** The message of anything thrown, without throwing itself (a getter, a `toString` or a primitive conversion may). */
export function messageOf(err: unknown): string {
  let message: unknown;
  try {
    message = err !== null && (typeof err === 'object' || typeof err === 'function') ? (err as { message?: unknown }).message : undefined;
  } catch {
    message = undefined;
  }
  if (typeof message === 'string') return message;
  try {
    return String(err);
  } catch {
    return 'a thrown value that could not be turned into text';
  }
}
