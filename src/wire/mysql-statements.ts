import type { StatementClass } from '../sql/events';
import { classifyCached } from '../sql/statement-cache';
import { splitStatements } from '../sql/tokenizer';
import { LastText, Match } from './last-text';
import type { StatementTally } from './tally';

/** The part of a client command the tracker reads: its payload's first bytes (all of a COM_QUERY or prepare text). */
export interface MysqlPayload {
  /** Payload bytes over all packets. */
  length: number;
  readonly bytes: Buffer;
  readonly headStart: number;
  readonly headLength: number;
}

type Statement = { text: string | null; statementClass: StatementClass };

/**
 * What one command runs, as the tracker follows its answer: a COM_QUERY's statements in order (several when the
 * client allows multiple statements), or the prepared statement an execute runs. Each result of the answer (an OK,
 * a result set's end, an ERR) finishes the next statement; results beyond them (a CALL's) are the same statement's.
 */
export interface CommandStatements {
  statements: Statement[];
  next: number;
  /** Affected rows of the result being read (from its OK), or rows of its result set. */
  rows: number;
  resultSet: boolean;
  /** The answer carries its row counts in a form not read (MariaDB bulk unit results). */
  rowsElsewhere: boolean;
}

/** An INSERT whose affected rows are not rows inserted: upserts and INSERT IGNORE (as the driver models say). */
const UPSERT = /\bon\s+duplicate\s+key\s+update\b|^[\s(]*(?:replace|insert\s+ignore)\b/i;
const MAX_PREPARED = 10_000;
const LAST_PREPARED = 0xffffffff;

function statementsOf(text: string): Statement[] {
  if (text.indexOf(';') === -1) return text.trim() === '' ? [] : [{ text, statementClass: classifyCached(text, 'mysql') }];
  return splitStatements(text, 'mysql');
}

/**
 * Follows which statement each MySQL answer finishes: a COM_QUERY's text split by the tokenizer, prepared
 * statements by the id their PrepareOK gave them, what each OK packet or result set reports. Writes into the
 * connection's `StatementTally`.
 */
export class MysqlStatementTracker {
  readonly #tally: StatementTally;
  readonly #returnedRows: (rows: number) => void;
  readonly #prepared = new Map<number, Statement>();
  /** The statement of the last COM_STMT_PREPARE sent: an execute of id 0xFFFFFFFF (pipelined by the connector) runs it. */
  #lastPrepared: Statement | null = null;
  /**
   * Both sides agreed on CLIENT_QUERY_ATTRIBUTES (MySQL 8.0.23+ with mysql2, say): a COM_QUERY's text then follows a
   * parameter count and a parameter set count, and the attributes' values when there are any.
   */
  queryAttributes = false;
  readonly #last = new LastText<Statement>();

  /** `returnedRows` hears of rows an INSERT reported as a result set instead of an OK packet's count. */
  constructor(tally: StatementTally, returnedRows: (rows: number) => void) {
    this.#tally = tally;
    this.#returnedRows = returnedRows;
  }

  /** The command's text, read into the last text (compared with it as bytes, not decoded again); null when not kept whole. */
  #read(payload: MysqlPayload, skip = 0): LastText<Statement> | null {
    if (payload.length !== payload.headLength || skip < 0) {
      this.#tally.textUnread();
      return null;
    }
    const start = payload.headStart + 1 + skip;
    const end = payload.headStart + payload.headLength;
    const last = this.#last;
    if (last.match(payload.bytes, start, end) !== Match.Same) {
      const text = payload.bytes.toString('utf8', start, end);
      last.keep(payload.bytes, start, end, text, statementsOf(text), null);
    }
    return last;
  }

  /**
   * Bytes before a COM_QUERY's text: with query attributes, the two counts; -1 when attributes with values come
   * first, whose sizes depend on their types (never sent by the drivers counted here).
   */
  #attributesBefore(payload: MysqlPayload): number {
    if (!this.queryAttributes) return 0;
    const at = payload.headStart + 1;
    const end = payload.headStart + payload.headLength;
    let skipped = 0;
    let params = -1;
    for (let i = 0; i < 2; i++) {
      const p = at + skipped;
      if (p >= end) return -1;
      const first = payload.bytes[p]!;
      const size = first < 0xfb ? 1 : first === 0xfc ? 3 : first === 0xfd ? 4 : first === 0xfe ? 9 : -1;
      if (size < 0 || p + size > end) return -1;
      if (i === 0)
        params =
          size === 1 ? first : size === 3 ? payload.bytes.readUInt16LE(p + 1) : size === 4 ? payload.bytes.readUIntLE(p + 1, 3) : Number.MAX_SAFE_INTEGER;
      skipped += size;
    }
    return params === 0 ? skipped : -1;
  }

  /** COM_QUERY: its statements, or one of unknown class when the text was not kept whole. */
  query(payload: MysqlPayload): CommandStatements {
    const skip = this.#attributesBefore(payload);
    const last = this.#read(payload, skip);
    this.#tally.lastSent = last?.text ?? payload.bytes.toString('utf8', payload.headStart + 1 + Math.max(skip, 0), payload.headStart + payload.headLength);
    return fresh(last === null ? [{ text: null, statementClass: 'other' }] : last.statements);
  }

  /** COM_STMT_PREPARE: its statement, filed under the id the PrepareOK gives it. */
  prepare(payload: MysqlPayload): CommandStatements {
    const last = this.#read(payload);
    const command = fresh(last === null ? [{ text: null, statementClass: 'other' }] : last.statements.slice(0, 1));
    this.#lastPrepared = command.statements[0] ?? null;
    return command;
  }

  prepared(command: CommandStatements, statementId: number): void {
    const statement = command.statements[0];
    if (!statement || (this.#prepared.size >= MAX_PREPARED && !this.#prepared.has(statementId))) return;
    this.#prepared.set(statementId, statement);
  }

  /** COM_STMT_EXECUTE or COM_STMT_BULK_EXECUTE: the statement prepared under the id at payload bytes 1..4. */
  execute(payload: MysqlPayload, rowsElsewhere = false): CommandStatements {
    const id = payload.headLength >= 5 ? payload.bytes.readUInt32LE(payload.headStart + 1) : -1;
    const statement = (id === LAST_PREPARED ? this.#lastPrepared : this.#prepared.get(id)) ?? { text: null, statementClass: 'other' as const };
    this.#tally.lastSent = statement.text;
    return { ...fresh([statement]), rowsElsewhere };
  }

  close(payload: MysqlPayload): void {
    if (payload.headLength >= 5) this.#prepared.delete(payload.bytes.readUInt32LE(payload.headStart + 1));
  }

  /** One result of the answer ended (OK, or a result set's last row); `ok` carries the OK's affected rows. */
  resultEnded(command: CommandStatements): void {
    const statement = command.statements[command.next];
    const rows = command.rows;
    const resultSet = command.resultSet;
    command.rows = 0;
    command.resultSet = false;
    if (!statement) return;
    command.next += 1;
    this.#tally.completed(statement.statementClass, statement.text);
    if (command.rowsElsewhere) return this.#tally.rows('unsplit', 0);
    switch (statement.statementClass) {
      case 'insert':
        // A result set answering an INSERT is its RETURNING rows (MariaDB): no OK packet follows with a count.
        if (statement.text !== null && UPSERT.test(statement.text)) return this.#tally.rows('unsplit', 0);
        if (resultSet) this.#returnedRows(rows);
        return this.#tally.rows('inserted', rows);
      case 'update':
        return resultSet ? undefined : this.#tally.rows('updated', rows);
      case 'delete':
        return resultSet ? undefined : this.#tally.rows('deleted', rows);
      default:
        return;
    }
  }

  /** The answer ended in ERR: the statement it was on failed, and a multi-statement text stops there. */
  failed(command: CommandStatements): void {
    const statement = command.statements[command.next];
    if (!statement) return;
    command.next = command.statements.length;
    this.#tally.failed(statement.statementClass);
  }
}

function fresh(statements: Statement[]): CommandStatements {
  return { statements, next: 0, rows: 0, resultSet: false, rowsElsewhere: false };
}
