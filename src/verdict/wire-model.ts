import { rangeText, UNBOUNDED, type Range } from '../driver/module';
import { REPREPARE } from '../server/mysql-family';
import type { ServerLayer, ServerSummary } from '../server/types';
import type { WireProtocol } from '../wire/tally';
import type { WireCounts, WireStatements } from '../wire/types';

/** What the wire model predicts for the server and how the layers line up, in the shape the verdict reads. */
export interface WireReconciliation {
  reconciliation: string[];
  discrepancies: string[];
  /** The most statements the wire's requests explain: what `beyondWindow` weighs the server's statement count with. */
  explainedStatements: number | undefined;
}

/**
 * MySQL commands that move `Questions` by none (ping, statistics, prepare, close, reset, long data, goodbye);
 * COM_QUERY and the executes count through their statements, and a command in neither list may count one.
 */
const NO_QUESTION = new Set(['COM_PING', 'COM_STATISTICS', 'COM_STMT_PREPARE', 'COM_STMT_CLOSE', 'COM_STMT_RESET', 'COM_STMT_SEND_LONG_DATA', 'COM_QUIT']);
const BY_STATEMENT = new Set(['COM_QUERY', 'COM_STMT_EXECUTE', 'COM_STMT_BULK_EXECUTE']);
/** Commands measured to move `Questions` by one each (MariaDB 10.11: mysqlslap's COM_INIT_DB). */
const ONE_QUESTION = new Set(['COM_INIT_DB']);

const exact = (n: number): Range => ({ min: n, max: n });
const atLeast = (n: number): Range => ({ min: n, max: UNBOUNDED });
const between = (min: number, max: number): Range => ({ min, max });
const widen = (r: Range, by: number): Range => ({ min: r.min, max: r.max + by });
const of = (record: Record<string, number>, key: string): number => record[key] ?? 0;

/** Statements of these classes write rows the wire reports with no count (DDL that copies, CALL, LOAD DATA, DO). */
function otherWriters(s: WireStatements): number {
  return of(s.completedByClass, 'ddl') + of(s.completedByClass, 'other');
}

/** Rows changed, from the answers: exact unless a statement failed part-way or something wrote rows no answer counts. */
function rowsRange(rows: number, s: WireStatements): Range | null {
  if (s.rowsUnsplit > 0) return null;
  return s.failed > 0 || otherWriters(s) > 0 ? atLeast(rows) : exact(rows);
}

interface Expectation {
  what: string;
  actual: number | null | undefined;
  range: Range | null;
}

/** PostgreSQL: pg_stat_statements counts every statement that finished, except utility statements re-run from a named statement. */
function postgresExpectations(s: WireStatements, server: ServerLayer): Expectation[] {
  const counted = (cls: string) => of(s.completedByClass, cls) - of(s.namedRepeatsByClass, cls);
  // A suspended portal's statement is counted when it ends, which may be after the window or never.
  const statements = s.suspended > 0 ? between(s.completed - s.namedRepeats, s.completed - s.namedRepeats + s.suspended) : exact(s.completed - s.namedRepeats);
  const g = server.global;
  return [
    { what: 'pg_stat_statements calls (statements)', actual: server.summary.statements, range: statements },
    { what: 'pg_stat_statements calls of INSERT (inserts)', actual: server.summary.inserts, range: s.suspended > 0 ? null : exact(counted('insert')) },
    { what: 'pg_stat_statements calls of BEGIN', actual: 'statements.begin_calls' in g ? g['statements.begin_calls'] : null, range: exact(counted('begin')) },
    { what: 'pg_stat_statements calls of COMMIT/END (commits)', actual: server.summary.commits, range: exact(counted('commit')) },
    { what: 'n_tup_ins (rows inserted)', actual: server.summary.rowsInserted, range: rowsRange(s.rowsInserted, s) },
    { what: 'n_tup_upd (rows updated)', actual: 'tables.n_tup_upd' in g ? g['tables.n_tup_upd'] : null, range: rowsRange(s.rowsUpdated, s) },
    { what: 'n_tup_del (rows deleted)', actual: 'tables.n_tup_del' in g ? g['tables.n_tup_del'] : null, range: rowsRange(s.rowsDeleted, s) },
  ];
}

/** MySQL and MariaDB: Questions counts each statement received, failed or not; Com_* count by class. */
function mysqlExpectations(wire: WireCounts, s: WireStatements, summary: ServerSummary, reprepares: number): Expectation[] {
  let maybe = 0;
  let run = s.completed + s.failed;
  for (const [command, n] of Object.entries(wire.commands)) {
    if (ONE_QUESTION.has(command)) run += n;
    else if (!BY_STATEMENT.has(command) && !NO_QUESTION.has(command)) maybe += n;
  }
  const byClass = (cls: string) => between(of(s.completedByClass, cls), of(s.completedByClass, cls) + of(s.failedByClass, cls));
  return [
    { what: 'Questions (statements)', actual: summary.statements, range: between(run, run + maybe) },
    // The global Com_insert counts an INSERT the server re-prepared once more; summary.prepares already leaves re-prepares out.
    { what: 'Com_insert (inserts)', actual: summary.inserts, range: widen(byClass('insert'), summary.inserts === null ? 0 : reprepares) },
    { what: 'Com_commit (commits)', actual: summary.commits, range: byClass('commit') },
    { what: 'Com_stmt_prepare (prepares)', actual: summary.prepares, range: exact(of(wire.commands, 'COM_STMT_PREPARE')) },
    {
      what: 'Com_stmt_execute (executes)',
      actual: summary.executes,
      range: exact(of(wire.commands, 'COM_STMT_EXECUTE') + of(wire.commands, 'COM_STMT_BULK_EXECUTE')),
    },
    { what: 'bulk executes', actual: summary.bulkExecutes, range: exact(of(wire.commands, 'COM_STMT_BULK_EXECUTE')) },
    { what: 'rows inserted', actual: summary.rowsInserted, range: rowsRange(s.rowsInserted, s) },
  ];
}

/** What one protocol's statements predict for the server's counters. */
interface WireModel {
  /** The most statements the wire's requests explain (see {@link WireReconciliation.explainedStatements}). */
  explained(wire: WireCounts, s: WireStatements): number;
  expectations(wire: WireCounts, s: WireStatements, server: ServerLayer): Expectation[];
}

/** The wire model of each protocol, keyed so that a new protocol cannot be left without one. */
const WIRE_MODELS = {
  mysql: {
    explained: (wire, s) => s.completed + s.failed + (wire.commands.COM_INIT_DB ?? 0),
    expectations: (wire, s, server) => mysqlExpectations(wire, s, server.summary, server.summarySource === 'global' ? (server.global[REPREPARE] ?? 0) : 0),
  },
  postgres: {
    explained: (_wire, s) => s.completed - s.namedRepeats + s.suspended,
    expectations: (_wire, s, server) => postgresExpectations(s, server),
  },
} satisfies Record<WireProtocol, WireModel>;

/**
 * The wire as a model of its own, for a window whose work no counted driver explains (a client in another language,
 * an ORM's own pool): what the server's answers said it ran, statement by statement, against what the server's
 * counters say, both ways. A server that did less than the wire carried is a discrepancy too, unless the model
 * explains it (pg_stat_statements skipping a utility statement re-run from a named statement).
 */
export function reconcileWire(wire: WireCounts, server: ServerLayer | null): WireReconciliation {
  const s = wire.statements;
  if (!s) {
    return {
      reconciliation: ['the wire layer has no statement-by-statement counts: the server is not compared with it'],
      discrepancies: [],
      explainedStatements: undefined,
    };
  }
  const lines: string[] = [];
  const repeats =
    s.namedRepeats > 0
      ? `, of which ${s.namedRepeats} utility statement(s) re-run from a named prepared statement (${words(s.namedRepeatsByClass)}), which pg_stat_statements counts only at their first run on the connection`
      : '';
  lines.push(
    `wire model: ${s.completed} statement(s) finished (${words(s.completedByClass) || 'none'})${s.failed > 0 ? `, ${s.failed} failed (${words(s.failedByClass)})` : ''}${repeats}; rows ${s.rowsInserted} inserted, ${s.rowsUpdated} updated, ${s.rowsDeleted} deleted`,
  );
  if (s.connectStatements > 0) {
    lines.push(`connection set-up: ${s.connectStatements} statement(s) the clients ran as they connected, counted with the rest: ${s.connectTexts.join('; ')}`);
  }
  const gaps: string[] = [];
  if (s.textsUnread > 0)
    gaps.push(`${s.textsUnread} request text(s) longer than the proxy keeps: their statements are counted from the answers, their classes may be unknown`);
  if (s.rowsUnsplit > 0)
    gaps.push(
      `${s.rowsUnsplit} statement(s) (MERGE, an upsert, bulk unit results) changed rows the answers do not split into inserted, updated and deleted: rows are not compared`,
    );
  if (s.suspended > 0) gaps.push(`${s.suspended} Execute(s) suspended by a row limit: their statements count on the server when they end`);
  const model: WireModel = WIRE_MODELS[wire.protocol];
  const explained = model.explained(wire, s);
  if (!server) return { reconciliation: [...lines, ...gaps.map((g) => `not modelled: ${g}`)], discrepancies: [], explainedStatements: explained };

  const expectations = model.expectations(wire, s, server);
  const parts: string[] = [];
  const discrepancies: string[] = [];
  for (const e of expectations) {
    if (e.actual === null || e.actual === undefined || !e.range) continue;
    // Texts not read whole may hide statements of any class: only the total is still bounded.
    const range = s.textsUnread > 0 && !e.what.includes('(statements)') ? null : e.range;
    if (!range) continue;
    parts.push(`${e.what} ${e.actual} (wire: ${rangeText(range)})`);
    if (e.actual < range.min || e.actual > range.max) {
      discrepancies.push(
        `server layer: ${e.what} ${e.actual}, the wire's answers account for ${rangeText(range)}: ${
          e.actual > range.max
            ? `${e.actual - range.max} more than the statements the window's connections ran (a client around the proxy, a trigger or stored code)`
            : `${range.min - e.actual} fewer than the statements the window's connections ran: the server did not count all of the wire's work (statistics not settled, entries evicted, or a counting rule the wire model does not know)`
        }`,
      );
    }
  }
  if (parts.length > 0) lines.push(`server against the wire: ${parts.join(', ')}`);
  return { reconciliation: [...lines, ...gaps.map((g) => `not modelled: ${g}`)], discrepancies, explainedStatements: explained };
}

function words(record: Record<string, number>): string {
  return Object.entries(record)
    .filter(([, n]) => n !== 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
}
