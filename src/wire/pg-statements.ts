import type { StatementClass } from '../sql/events';
import { classifyCached } from '../sql/statement-cache';
import { splitStatements } from '../sql/tokenizer';
import type { StatementTally } from './tally';

/** The part of a message the statement tracker reads: its body's first bytes (the whole body for Query and Parse). */
export interface PgBody {
  /** Value of the length field (includes itself). */
  length: number;
  readonly bytes: Buffer;
  readonly headStart: number;
  readonly headLength: number;
}

type Statement = { text: string | null; statementClass: StatementClass | null };
/** A prepared statement, as the Execute that runs it found it (a later Parse of the same name makes a new one). */
type Prepared = Statement & { ran: boolean };

/** A request whose answer is still to come, in the order the server answers them. */
type Pending =
  | { kind: 'query'; statements: Statement[] | null; next: number }
  | { kind: 'execute'; statement: Prepared | undefined; named: boolean }
  | { kind: 'sync' }
  | { kind: 'call' };

/** Tags of statements the planner runs; any other tag is a utility statement's (BEGIN, COMMIT, SET, COPY, DDL, ...). */
const PLANNABLE = new Set(['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/** A statement's class from its CommandComplete tag, for a statement whose text the wire did not carry whole. */
const TAG_CLASS: Readonly<Record<string, StatementClass>> = {
  SELECT: 'select',
  INSERT: 'insert',
  UPDATE: 'update',
  DELETE: 'delete',
  BEGIN: 'begin',
  START: 'begin',
  COMMIT: 'commit',
  ROLLBACK: 'rollback',
  SAVEPOINT: 'savepoint',
  RELEASE: 'savepoint',
  SET: 'set',
  SHOW: 'show',
  CREATE: 'ddl',
  ALTER: 'ddl',
  DROP: 'ddl',
  TRUNCATE: 'ddl',
};

const MAX_TRACKED_NAMES = 10_000;
const ON_CONFLICT = /\bon\s+conflict\b/i;

/** A NUL-terminated string at `at` within the body's head, and where the next field starts; null when cut short. */
function cstring(body: PgBody, at: number): { value: string; next: number } | null {
  const end = body.headStart + body.headLength;
  const nul = body.bytes.indexOf(0, at);
  if (nul < 0 || nul >= end) return null;
  return { value: body.bytes.toString('utf8', at, nul), next: nul + 1 };
}

function statementsOf(text: string): Statement[] {
  if (text.indexOf(';') === -1) return text.trim() === '' ? [] : [{ text, statementClass: classifyCached(text, 'postgres') }];
  return splitStatements(text, 'postgres');
}

/**
 * Follows which statement each PostgreSQL answer finishes: the statements of a simple Query (several in one text,
 * split by the tokenizer), the named or unnamed statement behind each Execute (Parse, Bind and Close say which), and
 * what each CommandComplete tag reports. Writes into the connection's `StatementTally`.
 */
export class PgStatementTracker {
  readonly #tally: StatementTally;
  /** Requests waiting for their answer; `#head` is the oldest, so a deep pipeline is not shifted one by one. */
  #pending: Pending[] = [];
  #head = 0;
  /** Prepared statements by name ('' is the unnamed one), with whether a utility statement already ran from it. */
  readonly #statements = new Map<string, Prepared>();
  readonly #portals = new Map<string, string>();
  #copyIn = false;

  constructor(tally: StatementTally) {
    this.#tally = tally;
  }

  query(body: PgBody): void {
    const whole = body.length - 4 === body.headLength;
    if (!whole) this.#tally.textUnread();
    const text = whole ? body.bytes.toString('utf8', body.headStart, body.headStart + body.headLength - 1) : null;
    this.#tally.lastSent = text ?? body.bytes.toString('utf8', body.headStart, body.headStart + body.headLength);
    this.#pending.push({ kind: 'query', statements: text === null ? null : statementsOf(text), next: 0 });
    this.#statements.delete('');
    this.#portals.delete('');
  }

  parse(body: PgBody): void {
    const name = cstring(body, body.headStart);
    if (!name) return;
    const text = cstring(body, name.next);
    if (!text) this.#tally.textUnread();
    if (this.#statements.size >= MAX_TRACKED_NAMES && !this.#statements.has(name.value)) return;
    const first = text ? statementsOf(text.value)[0] : undefined;
    this.#statements.set(name.value, { text: text?.value ?? null, statementClass: first?.statementClass ?? null, ran: false });
  }

  bind(body: PgBody): void {
    const portal = cstring(body, body.headStart);
    const statement = portal ? cstring(body, portal.next) : null;
    if (!portal || !statement) return;
    if (this.#portals.size >= MAX_TRACKED_NAMES && !this.#portals.has(portal.value)) return;
    this.#portals.set(portal.value, statement.value);
  }

  execute(body: PgBody): void {
    const portal = cstring(body, body.headStart);
    const name = (portal ? this.#portals.get(portal.value) : undefined) ?? '';
    const statement = this.#statements.get(name);
    this.#tally.lastSent = statement?.text ?? null;
    this.#pending.push({ kind: 'execute', statement, named: name !== '' });
  }

  close(body: PgBody): void {
    if (body.headLength < 2) return;
    const what = body.bytes[body.headStart];
    const name = cstring(body, body.headStart + 1);
    if (!name) return;
    if (what === 0x53 /* S */) this.#statements.delete(name.value);
    else this.#portals.delete(name.value);
  }

  #front(): Pending | undefined {
    return this.#pending[this.#head];
  }

  #shift(): Pending | undefined {
    const entry = this.#pending[this.#head];
    this.#head += 1;
    if (this.#head === this.#pending.length) {
      this.#pending = [];
      this.#head = 0;
    } else if (this.#head > 1024) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
    return entry;
  }

  sync(): void {
    this.#pending.push({ kind: 'sync' });
  }

  functionCall(): void {
    this.#pending.push({ kind: 'call' });
  }

  copyIn(): void {
    this.#copyIn = true;
  }

  commandComplete(body: PgBody): void {
    const end = body.bytes.indexOf(0, body.headStart);
    const tag = body.bytes.toString('latin1', body.headStart, end < 0 || end > body.headStart + body.headLength ? body.headStart + body.headLength : end);
    const space = tag.indexOf(' ');
    const word = space < 0 ? tag : tag.slice(0, space);
    const front = this.#front();
    let statement: Statement | undefined;
    let named: Prepared | undefined;
    if (front?.kind === 'query') {
      statement = front.statements?.[front.next];
      front.next += 1;
    } else if (front?.kind === 'execute') {
      this.#shift();
      statement = front.statement;
      if (front.named) named = front.statement;
    }
    const statementClass = statement?.statementClass ?? TAG_CLASS[word] ?? 'other';
    // pg_stat_statements files a utility statement run again from a named statement's cached plan under no entry.
    if (named && !PLANNABLE.has(word)) {
      if (named.ran) this.#tally.namedRepeat(statementClass);
      named.ran = true;
    }
    this.#tally.completed(statementClass, statement?.text ?? null);
    this.#rows(word, tag, statement?.text ?? null);
  }

  #rows(word: string, tag: string, text: string | null): void {
    const copyIn = this.#copyIn;
    this.#copyIn = false;
    // An INSERT ... ON CONFLICT's tag counts the rows it updated beside those it inserted.
    const kind =
      word === 'INSERT'
        ? text !== null && ON_CONFLICT.test(text)
          ? 'unsplit'
          : 'inserted'
        : word === 'UPDATE'
          ? 'updated'
          : word === 'DELETE'
            ? 'deleted'
            : word === 'COPY' && copyIn
              ? 'inserted'
              : word === 'MERGE'
                ? 'unsplit'
                : null;
    if (!kind) return;
    const rows = Number(tag.slice(tag.lastIndexOf(' ') + 1));
    this.#tally.rows(kind, Number.isSafeInteger(rows) ? rows : 0);
  }

  emptyQuery(): void {
    const front = this.#front();
    if (front?.kind === 'execute') this.#shift();
  }

  portalSuspended(): void {
    if (this.#front()?.kind === 'execute') this.#shift();
    this.#tally.suspended();
  }

  error(): void {
    this.#copyIn = false;
    const front = this.#front();
    if (front?.kind === 'query') {
      this.#tally.failed(front.statements?.[front.next]?.statementClass ?? 'other');
      return;
    }
    if (front?.kind !== 'execute') return;
    this.#tally.failed(front.statement?.statementClass ?? 'other');
    // The server skips everything up to the next Sync.
    while (this.#front()?.kind === 'execute') this.#shift();
  }

  ready(): void {
    for (let entry = this.#shift(); entry; entry = this.#shift()) if (entry.kind !== 'execute') return;
  }
}
