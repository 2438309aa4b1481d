/**
 * The phases a sqltally run goes through, in order. Every error names one, so a reader knows how far the run got.
 */
export type Phase =
  | 'config'
  | 'provision'
  | 'start'
  | 'connect'
  | 'setup'
  | 'wrap'
  | 'workload'
  | 'verify'
  | 'probe'
  | 'wire'
  | 'verdict'
  | 'report'
  | 'gate'
  | 'stop';

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

/** Removes the password from anything that looks like a connection URL, wherever it appears in a string. */
export function redactSecrets(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)([^@\s/]*)@/gi, '$1***@');
}

/**
 * Whitespace folded, cut at `max` characters with the original length said. Only a prefix is folded: a 200 KB
 * multi-row INSERT must not be scanned whole to show its first 200 characters.
 */
export function truncateStatement(sql: string, max = STATEMENT_SHOWN_CHARS): string {
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
