import type { StatementClass } from '../sql/events';
import { numberIsSafeInteger, toNumber } from '../shared/intrinsics';
import { classifyCached } from '../sql/statement-cache';
import { plainStatement, splitStatements } from '../sql/tokenizer';
import { LastText, Match } from './last-text';
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

/** What a request waiting for its answer is; its statements (a Query's) or statement (an Execute's) are beside it. */
const enum Request {
  Query,
  Execute,
  ExecuteNamed,
  Sync,
  Call,
}

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

/** Which row counter a tag's count goes to (INSERT's and COPY's depend on the statement too). */
const enum TagRows {
  None,
  Insert,
  Update,
  Delete,
  Copy,
  Merge,
}
const TAG_ROWS: ReadonlyMap<string, TagRows> = new Map([
  ['INSERT', TagRows.Insert],
  ['UPDATE', TagRows.Update],
  ['DELETE', TagRows.Delete],
  ['COPY', TagRows.Copy],
  ['MERGE', TagRows.Merge],
]);

const MAX_TRACKED_NAMES = 10_000;
const ON_CONFLICT = /\bon\s+conflict\b/i;

function isExecute(kind: Request | -1): boolean {
  return kind === Request.Execute || kind === Request.ExecuteNamed;
}

/** Tag words that carry a row count, as bytes; INSERT's count follows an oid (`INSERT 0 5000`). */
const TAG_INSERT = Buffer.from('INSERT ');
const COUNTED_TAGS = ['UPDATE ', 'DELETE ', 'MERGE ', 'COPY '].map((word) => Buffer.from(word));

/** Whether `bytes[at, end)` starts with `word`. */
function startsWith(bytes: Buffer, at: number, end: number, word: Buffer): boolean {
  if (end - at < word.length) return false;
  for (let k = 0; k < word.length; k += 1) if (bytes[at + k] !== word[k]) return false;
  return true;
}

/** End of the run of ASCII digits from `at` (at most `end`). */
function digitsEnd(bytes: Buffer, at: number, end: number): number {
  let k = at;
  while (k < end && (bytes[k] as number) >= 0x30 && (bytes[k] as number) <= 0x39) k += 1;
  return k;
}

/**
 * Rows affected by a CommandComplete tag `bytes[start, end)` (`INSERT 0 5000`, `UPDATE 3`, `COPY 10`...; 0 for others),
 * read from the bytes with no string made: as matching `^(?:INSERT \d+|UPDATE|DELETE|MERGE|COPY) (\d+)$`.
 */
function readCommandTag(bytes: Buffer, start: number, end: number): number {
  let at: number;
  if (startsWith(bytes, start, end, TAG_INSERT)) {
    const oidEnd = digitsEnd(bytes, start + TAG_INSERT.length, end);
    if (oidEnd === start + TAG_INSERT.length || oidEnd >= end || bytes[oidEnd] !== 0x20) return 0;
    at = oidEnd + 1;
  } else {
    const word = COUNTED_TAGS.find((w) => startsWith(bytes, start, end, w));
    if (!word) return 0;
    at = start + word.length;
  }
  if (at === end || digitsEnd(bytes, at, end) !== end) return 0;
  // Up to 15 digits add up exactly; a longer count goes through Number() like the string it is.
  if (end - at > 15) return toNumber(bytes.toString('latin1', at, end));
  let rows = 0;
  for (let k = at; k < end; k += 1) rows = rows * 10 + ((bytes[k] as number) - 0x30);
  return rows;
}

/** The NUL that ends a string starting at `at` within the body's head, or -1 when it is cut short. */
function nulAt(body: PgBody, at: number): number {
  const end = body.headStart + body.headLength;
  // The unnamed statement and portal: an empty name, the usual case.
  if (at < end && body.bytes[at] === 0) return at;
  const nul = body.bytes.indexOf(0, at);
  return nul < 0 || nul >= end ? -1 : nul;
}

function decode(bytes: Buffer, start: number, end: number): string {
  return end === start ? '' : bytes.toString('utf8', start, end);
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
  /**
   * Requests waiting for their answer, each a kind and what it runs (a Query's statements, an Execute's prepared
   * statement); `#head` is the oldest, so a deep pipeline is not shifted one by one.
   */
  readonly #kinds: Request[] = [];
  readonly #runs: (Statement[] | Prepared | null)[] = [];
  #head = 0;
  /** Requests are `[#head, #tail)`: the arrays are written over, never shrunk, so a round trip allocates nothing. */
  #tail = 0;
  /** Statements of the oldest Query already answered. */
  #done = 0;
  /** Prepared statements by name ('' is the unnamed one), with whether a utility statement already ran from it. */
  readonly #statements = new Map<string, Prepared>();
  readonly #portals = new Map<string, string>();
  #copyIn = false;
  readonly #lastQuery = new LastText<Statement>();
  readonly #lastParse = new LastText<Statement>();

  constructor(tally: StatementTally) {
    this.#tally = tally;
  }

  query(body: PgBody): void {
    const { bytes, headStart: start } = body;
    const whole = body.length - 4 === body.headLength;
    let text: string | null = null;
    let statements: Statement[] | null = null;
    if (!whole) {
      this.#tally.textUnread();
      this.#tally.lastSent = bytes.toString('utf8', start, start + body.headLength);
    } else {
      const end = start + body.headLength - 1;
      const last = this.#lastQuery;
      const match = last.match(bytes, start, end);
      if (match === Match.Same) {
        text = last.text;
        statements = last.statements;
      } else if (match === Match.Digits) {
        const plain = last.plain as readonly [number, number];
        text = bytes.toString('utf8', start, end);
        statements = [{ text: text.slice(plain[0], plain[1]), statementClass: (last.statements[0] as Statement).statementClass }];
        last.keep(bytes, start, end, text, statements, plain);
      } else {
        text = bytes.toString('utf8', start, end);
        statements = statementsOf(text);
        const plain = statements.length === 1 && text.indexOf(';') !== -1 ? plainStatement(text) : null;
        last.keep(bytes, start, end, text, statements, plain);
      }
      this.#tally.lastSent = text;
    }
    this.#push(Request.Query, statements);
    this.#statements.delete('');
    this.#portals.delete('');
  }

  parse(body: PgBody): void {
    const bytes = body.bytes;
    const nameEnd = nulAt(body, body.headStart);
    if (nameEnd < 0) return;
    const name = decode(bytes, body.headStart, nameEnd);
    const textEnd = nulAt(body, nameEnd + 1);
    if (textEnd < 0) this.#tally.textUnread();
    if (this.#statements.size >= MAX_TRACKED_NAMES && !this.#statements.has(name)) return;
    let text: string | null = null;
    let first: Statement | undefined;
    if (textEnd >= 0) {
      const last = this.#lastParse;
      if (last.match(bytes, nameEnd + 1, textEnd) === Match.Same) {
        text = last.text;
        first = last.statements[0];
      } else {
        text = decode(bytes, nameEnd + 1, textEnd);
        const statements = statementsOf(text).slice(0, 1);
        last.keep(bytes, nameEnd + 1, textEnd, text, statements, null);
        first = statements[0];
      }
    }
    this.#statements.set(name, { text, statementClass: first?.statementClass ?? null, ran: false });
  }

  bind(body: PgBody): void {
    const bytes = body.bytes;
    const portalEnd = nulAt(body, body.headStart);
    const statementEnd = portalEnd < 0 ? -1 : nulAt(body, portalEnd + 1);
    if (statementEnd < 0) return;
    const portal = decode(bytes, body.headStart, portalEnd);
    if (this.#portals.size >= MAX_TRACKED_NAMES && !this.#portals.has(portal)) return;
    this.#portals.set(portal, decode(bytes, portalEnd + 1, statementEnd));
  }

  execute(body: PgBody): void {
    const portalEnd = nulAt(body, body.headStart);
    const name = (portalEnd < 0 ? undefined : this.#portals.get(decode(body.bytes, body.headStart, portalEnd))) ?? '';
    const statement = this.#statements.get(name);
    this.#tally.lastSent = statement?.text ?? null;
    this.#push(name !== '' ? Request.ExecuteNamed : Request.Execute, statement ?? null);
  }

  close(body: PgBody): void {
    if (body.headLength < 2) return;
    const what = body.bytes[body.headStart];
    const nameEnd = nulAt(body, body.headStart + 1);
    if (nameEnd < 0) return;
    const name = decode(body.bytes, body.headStart + 1, nameEnd);
    if (what === 0x53 /* S */) this.#statements.delete(name);
    else this.#portals.delete(name);
  }

  #push(kind: Request, runs: Statement[] | Prepared | null): void {
    this.#kinds[this.#tail] = kind;
    this.#runs[this.#tail] = runs;
    this.#tail += 1;
  }

  /** The oldest request's kind, or -1 when none is waiting. */
  #front(): Request | -1 {
    return this.#head < this.#tail ? (this.#kinds[this.#head] as Request) : -1;
  }

  /** The oldest Query's statement that the next answer finishes. */
  #frontStatement(): Statement | undefined {
    return (this.#runs[this.#head] as Statement[] | null)?.[this.#done];
  }

  #shift(): void {
    this.#runs[this.#head] = null;
    this.#head += 1;
    this.#done = 0;
    if (this.#head === this.#tail) {
      this.#head = 0;
      this.#tail = 0;
    } else if (this.#head > 1024) {
      this.#kinds.copyWithin(0, this.#head, this.#tail);
      this.#runs.copyWithin(0, this.#head, this.#tail);
      this.#runs.fill(null, this.#tail - this.#head, this.#tail);
      this.#tail -= this.#head;
      this.#head = 0;
    }
  }

  sync(): void {
    this.#push(Request.Sync, null);
  }

  functionCall(): void {
    this.#push(Request.Call, null);
  }

  copyIn(): void {
    this.#copyIn = true;
  }

  /** The last tag: a client that repeats one statement gets one tag again and again, and a repeat is not read again. */
  readonly #lastTag = new LastText<never>();
  /** What the last tag says: its word's class, whether the planner ran it, which rows it counts and how many. */
  #tagClass: StatementClass | undefined = undefined;
  #tagPlannable = false;
  #tagRowKind = TagRows.None;
  #tagRows = 0;
  #tagAffected = 0;

  /**
   * Reads the tag up to its NUL into the `#tag*` fields above (`#tagAffected`: see readCommandTag), unless it is the
   * last tag again.
   */
  #readTag(body: PgBody): void {
    const { bytes, headStart: start } = body;
    const nul = bytes.indexOf(0, start);
    const end = nul < 0 || nul > start + body.headLength ? start + body.headLength : nul;
    if (this.#lastTag.match(bytes, start, end) === Match.Same) return;
    const tag = bytes.toString('latin1', start, end);
    const space = tag.indexOf(' ');
    const word = space < 0 ? tag : tag.slice(0, space);
    this.#tagClass = TAG_CLASS[word];
    this.#tagPlannable = PLANNABLE.has(word);
    this.#tagRowKind = TAG_ROWS.get(word) ?? TagRows.None;
    const rows = toNumber(tag.slice(tag.lastIndexOf(' ') + 1));
    this.#tagRows = numberIsSafeInteger(rows) ? rows : 0;
    this.#tagAffected = readCommandTag(bytes, start, end);
    this.#lastTag.keep(bytes, start, end, tag, [], null);
  }

  /** A CommandComplete: the statement it finishes, counted; returns the rows it says were affected (`rowsAffected`). */
  commandComplete(body: PgBody): number {
    this.#readTag(body);
    const front = this.#front();
    let statement: Statement | null | undefined;
    let named: Prepared | null = null;
    if (front === Request.Query) {
      statement = this.#frontStatement();
      this.#done += 1;
    } else if (isExecute(front)) {
      const prepared = this.#runs[this.#head] as Prepared | null;
      this.#shift();
      statement = prepared;
      if (front === Request.ExecuteNamed) named = prepared;
    }
    const statementClass = statement?.statementClass ?? this.#tagClass ?? 'other';
    // pg_stat_statements files a utility statement run again from a named statement's cached plan under no entry.
    if (named && !this.#tagPlannable) {
      if (named.ran) this.#tally.namedRepeat(statementClass);
      named.ran = true;
    }
    this.#tally.completed(statementClass, statement?.text ?? null);
    this.#rows(this.#tagRowKind, statement?.text ?? null);
    return this.#tagAffected;
  }

  #conflictText: string | null = null;
  #conflict = false;

  /** Whether `text` is an INSERT ... ON CONFLICT; the last answer is kept, for a client that repeats one INSERT. */
  #onConflict(text: string): boolean {
    if (text !== this.#conflictText) {
      this.#conflict = ON_CONFLICT.test(text);
      this.#conflictText = text;
    }
    return this.#conflict;
  }

  #rows(tagRows: TagRows, text: string | null): void {
    const copyIn = this.#copyIn;
    this.#copyIn = false;
    // An INSERT ... ON CONFLICT's tag counts the rows it updated beside those it inserted.
    const kind =
      tagRows === TagRows.Insert
        ? text !== null && this.#onConflict(text)
          ? 'unsplit'
          : 'inserted'
        : tagRows === TagRows.Update
          ? 'updated'
          : tagRows === TagRows.Delete
            ? 'deleted'
            : tagRows === TagRows.Copy && copyIn
              ? 'inserted'
              : tagRows === TagRows.Merge
                ? 'unsplit'
                : null;
    if (!kind) return;
    this.#tally.rows(kind, this.#tagRows);
  }

  emptyQuery(): void {
    const front = this.#front();
    if (isExecute(front)) this.#shift();
  }

  portalSuspended(): void {
    const front = this.#front();
    if (isExecute(front)) this.#shift();
    this.#tally.suspended();
  }

  error(): void {
    this.#copyIn = false;
    const front = this.#front();
    if (front === Request.Query) {
      this.#tally.failed(this.#frontStatement()?.statementClass ?? 'other');
      return;
    }
    if (!isExecute(front)) return;
    this.#tally.failed((this.#runs[this.#head] as Prepared | null)?.statementClass ?? 'other');
    // The server skips everything up to the next Sync.
    for (let kind = this.#front(); isExecute(kind); kind = this.#front()) this.#shift();
  }

  ready(): void {
    for (let kind = this.#front(); kind !== -1; kind = this.#front()) {
      this.#shift();
      if (!isExecute(kind)) return;
    }
  }
}
