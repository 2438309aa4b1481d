import { messageOf, SqltallyError } from '../shared/errors';
import { openSqlClient, type SqlClient } from '../backends/sql-client';
import type { BackendDescription, NetworkConnection } from '../backends/types';
import type { ProbeOptions, WindowContext } from './probe';
import { classifyCached } from '../sql/statement-cache';
import { isProbeConnection, registerProbeConnection } from './own-connections';
import type { PreparedInstance, SeenSessions, Snapshot, SnapshotSource, WindowExtras } from './snapshot-probe';
import { connectionsOpenedCheck, type ServerSummary, type WindowCheck, type WindowComparison } from './types';
import { sumStatements, type ServerWorkCapabilities, type ServerWorkFigure, type WorkDeltas, type WorkReading } from './server-work';
import type { WorkSummary } from './snapshot-probe';
import type { Counters } from './window';
import type { WireCounts, WireStatements } from '../wire/types';
import { between, countOf, exact, rowsRange, widen, type WireExpectation, type WireModel } from './wire-model';
import { toNumber, toText } from '../shared/intrinsics';

const INTEGER = /^-?\d+$/;

/** The server's own re-prepares of a prepared statement, also counted in Com_stmt_prepare and the statement's Com_*. */
export const REPREPARE = 'Com_stmt_reprepare';

/**
 * What differs between MySQL and MariaDB, as data. The shared code below never asks which server it is; it reads
 * these tables and what the server itself reports (a counter is used only if `SHOW GLOBAL STATUS` has it).
 */
export interface MysqlFamilyTraits {
  /** Global status counters watched in every window, when present on the server. */
  trackedStatus: readonly string[];
  /** Per-thread status variables (`performance_schema.status_by_thread`). */
  perThreadStatus: readonly string[];
  /** The per-thread statement event of a bulk command, if this server family has one. */
  bulkExecuteEvent: string | null;
  /**
   * Process-list queries in order of preference; the first this account can read is used. Constant texts (see
   * below). MySQL 8.0.22+ has `performance_schema.processlist`; its `information_schema.PROCESSLIST` materialises
   * one row per connection into an InnoDB temporary table, which moves `Innodb_rows_inserted` with the number
   * of connections and so would make the probe's cost depend on who is connected.
   */
  processlistSql: readonly string[];
  /** Process-list users and commands that are the server's own threads, named rather than counted as intruders. */
  backgroundUsers: readonly string[];
  backgroundCommands: readonly string[];
  /** Server-work figures this family gives (`performance_schema` statement summaries). */
  work: ServerWorkCapabilities;
}

/** performance_schema's statement-summary columns, by the figure each one is. */
const WORK_COLUMNS = {
  rowsExamined: 'SUM_ROWS_EXAMINED',
  rowsSent: 'SUM_ROWS_SENT',
  fullScans: 'SUM_NO_INDEX_USED',
  noGoodIndex: 'SUM_NO_GOOD_INDEX_USED',
  fullJoins: 'SUM_SELECT_FULL_JOIN',
  sortRows: 'SUM_SORT_ROWS',
  sortMergePasses: 'SUM_SORT_MERGE_PASSES',
  tempTables: 'SUM_CREATED_TMP_TABLES',
  tempDiskTables: 'SUM_CREATED_TMP_DISK_TABLES',
  lockTimeNs: 'SUM_LOCK_TIME',
} as const satisfies Partial<Record<ServerWorkFigure, string>>;
type WorkColumnFigure = keyof typeof WORK_COLUMNS;
const WORK_FIGURES = Object.keys(WORK_COLUMNS) as WorkColumnFigure[];
/** performance_schema times are picoseconds. */
const PICOSECONDS_PER_NS = 1000;
const DIGEST_TEXT_READ = 400;

/**
 * Server work per window thread, summed over its statement events. Statement texts of this family carry no
 * per-table scan counters, so the PostgreSQL figures are unknown here (see MYSQL_FAMILY_WORK).
 */
const SQL_THREAD_WORK =
  'SELECT t.PROCESSLIST_ID AS ID, ' +
  WORK_FIGURES.map((f) => `SUM(e.${WORK_COLUMNS[f]}) AS ${f}`).join(', ') +
  ' FROM performance_schema.events_statements_summary_by_thread_by_event_name e ' +
  'JOIN performance_schema.threads t ON t.THREAD_ID = e.THREAD_ID ' +
  'WHERE t.PROCESSLIST_ID IS NOT NULL AND e.COUNT_STAR > 0 GROUP BY t.PROCESSLIST_ID';
/** Per statement digest, server-wide (the same figures; the digest NULL row is where statements go once the table is full). */
const SQL_DIGEST_WORK =
  `SELECT SCHEMA_NAME AS S, DIGEST AS K, LEFT(DIGEST_TEXT, ${DIGEST_TEXT_READ}) AS Q, COUNT_STAR AS N, ` +
  WORK_FIGURES.map((f) => `${WORK_COLUMNS[f]} AS ${f}`).join(', ') +
  ' FROM performance_schema.events_statements_summary_by_digest';
const SQL_DIGEST_SETUP =
  "SELECT @@performance_schema_digests_size AS size, (SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'statements_digest') AS enabled";
/** The key of the digest table's overflow row. */
const DIGEST_OVERFLOW_KEY = 'overflow';

const NOT_ON_MYSQL = 'MySQL and MariaDB keep no per-table scan counters';
/** What MySQL and MariaDB give through performance_schema's statement summaries, as data. */
export const MYSQL_FAMILY_WORK: ServerWorkCapabilities = {
  figures: {
    rowsExamined: null,
    rowsSent: null,
    statementRows: 'MySQL and MariaDB count rows examined and rows sent separately: see rowsExamined and rowsSent',
    fullScans: null,
    noGoodIndex: null,
    fullJoins: null,
    sortRows: null,
    sortMergePasses: null,
    tempTables: null,
    tempDiskTables: null,
    lockTimeNs: null,
    seqRowsRead: NOT_ON_MYSQL,
    indexScans: NOT_ON_MYSQL,
    indexRowsFetched: NOT_ON_MYSQL,
    sharedBlocksHit: 'MySQL and MariaDB keep no per-statement buffer-pool counters',
    sharedBlocksRead: 'MySQL and MariaDB keep no per-statement buffer-pool counters',
    tempBlocksWritten: 'MySQL and MariaDB count temporary tables, not temporary blocks: see tempTables and tempDiskTables',
  } satisfies Record<ServerWorkFigure, string | null>,
  statementFigures: WORK_FIGURES,
};

function workCounters(row: Record<string, unknown>): Counters {
  const out: Counters = {};
  for (const f of WORK_FIGURES) {
    const v = Number(row[f] ?? 0);
    out[f] = f === 'lockTimeNs' ? Math.round(v / PICOSECONDS_PER_NS) : v;
  }
  return out;
}

/**
 * Every statement the probe sends is a constant text, filtered in JavaScript: the same statements every time, so
 * the probe's cost in the global counters is the same for every reading, whatever connections are watched.
 */
const SQL_GLOBAL_STATUS = 'SHOW GLOBAL STATUS';
export const SQL_PROCESSLIST_INFORMATION_SCHEMA = 'SELECT ID, USER, HOST, COMMAND, TIME, INFO FROM information_schema.PROCESSLIST';
export const SQL_PROCESSLIST_PERFORMANCE_SCHEMA = 'SELECT ID, USER, HOST, COMMAND, TIME, INFO FROM performance_schema.processlist';
/**
 * Per-thread statement counts, without `statement/com/Ping`: sqltally pings every window connection before a reading,
 * so a ping is never the workload's, and it is filed after its answer, racing the reading that follows it.
 */
export const SQL_THREAD_EVENTS =
  'SELECT t.PROCESSLIST_ID AS ID, e.EVENT_NAME AS NAME, e.COUNT_STAR AS N ' +
  'FROM performance_schema.events_statements_summary_by_thread_by_event_name e ' +
  'JOIN performance_schema.threads t ON t.THREAD_ID = e.THREAD_ID ' +
  "WHERE t.PROCESSLIST_ID IS NOT NULL AND e.COUNT_STAR > 0 AND e.EVENT_NAME <> 'statement/com/Ping'";
export const SQL_THREAD_STATUS =
  'SELECT t.PROCESSLIST_ID AS ID, s.VARIABLE_NAME AS NAME, s.VARIABLE_VALUE AS N ' +
  'FROM performance_schema.status_by_thread s ' +
  'JOIN performance_schema.threads t ON t.THREAD_ID = s.THREAD_ID ' +
  'WHERE t.PROCESSLIST_ID IS NOT NULL';
/**
 * Prepared statements still open, per owner connection, with their executions: how `statement/com/Execute` is told apart
 * by statement class. Only the head of the text is read, enough to classify it.
 */
const SQL_PREPARED =
  'SELECT t.PROCESSLIST_ID AS ID, p.OBJECT_INSTANCE_BEGIN AS K, LEFT(p.SQL_TEXT, 200) AS Q, p.COUNT_EXECUTE AS N ' +
  'FROM performance_schema.prepared_statements_instances p ' +
  'JOIN performance_schema.threads t ON t.THREAD_ID = p.OWNER_THREAD_ID ' +
  'WHERE t.PROCESSLIST_ID IS NOT NULL';
const INFO_CHARS = 200;

interface ProcessRow {
  ID: number;
  USER: string | null;
  HOST: string | null;
  COMMAND: string | null;
  TIME: unknown;
  INFO: string | null;
}
/** A process-list TIME as the report's whole seconds; left out when the server gave none, or a value that is not one. */
function secondsOf(time: unknown): { seconds?: number } {
  const seconds = time === null || time === undefined ? Number.NaN : Number(time);
  return Number.isSafeInteger(seconds) && seconds >= 0 ? { seconds } : {};
}

interface PreparedRow {
  ID: unknown;
  K: unknown;
  Q: unknown;
  N: unknown;
}
export interface CounterRow {
  ID: number;
  NAME: string;
  N: string | number;
}

/**
 * The two per-thread reads of the given connections, by connection id. A thread with statement events but no status
 * rows is ending: the server has folded its status into the global counters and dropped it from status_by_thread,
 * while performance_schema still lists its events. Its counters are no longer whole, so it is left out like a
 * connection that has gone (MariaDB 10.11, a thread read in a loop after its COM_QUIT: 12 of 400 caught so).
 */
export function perThreadCounters(ids: readonly number[], events: CounterRow[], status: CounterRow[], statusNames: readonly string[]): Map<number, Counters> {
  const wanted = new Set(ids);
  const byId = new Map<number, Counters>();
  const withStatus = new Set<number>();
  for (const r of status) {
    const id = Number(r.ID);
    if (wanted.has(id)) withStatus.add(id);
  }
  const add = (rows: CounterRow[], keep: (name: string) => boolean): void => {
    for (const r of rows) {
      const id = Number(r.ID);
      if (!withStatus.has(id)) continue;
      let counters = byId.get(id);
      if (!counters) byId.set(id, (counters = {}));
      if (!keep(r.NAME)) continue;
      counters[r.NAME] = (counters[r.NAME] ?? 0) + Number(r.N);
    }
  };
  add(events, () => true);
  add(status, (name) => statusNames.includes(name));
  return byId;
}

/** Snapshots of a MySQL-protocol server: global status, per-thread `performance_schema`, the process list. */
export class MysqlFamilySource implements SnapshotSource {
  readonly description: BackendDescription;
  readonly #connection: NetworkConnection;
  readonly #traits: MysqlFamilyTraits;
  #conn: SqlClient | null = null;
  #ownId = -1;
  #tracked: string[] = [];
  #rowCounter: string | null = null;
  #perfSchema: 'on' | 'off' | 'unreadable' = 'off';
  #perfSchemaNote: string | null = null;
  #hasProcessPrivilege = false;
  #bulkEventKnown = false;
  #processlistSql: string = SQL_PROCESSLIST_INFORMATION_SCHEMA;
  #preparedReadable = false;
  #preparedNote: string | null = null;
  #unregister: () => void = () => undefined;
  /** Why per-digest figures cannot be read, or null when they can. */
  #digestsUnknown: string | null = 'performance_schema is not readable';

  readonly #serverWork: boolean;

  constructor(description: BackendDescription, connection: NetworkConnection, traits: MysqlFamilyTraits, opts: ProbeOptions = {}) {
    this.description = description;
    this.#connection = connection;
    this.#traits = traits;
    this.#serverWork = opts.serverWork !== false;
  }

  /** Digests are server-wide; the per-thread summaries are the window's own. */
  readonly workServerWide = ['statements'] as const;

  get work(): ServerWorkCapabilities {
    return this.#traits.work;
  }

  /**
   * A COM_QUIT goes through the server's command dispatch and counts in `Questions`, after the probe read the closing
   * connection's own counters: without this, every connection that quit inside a window looked like one statement
   * run beyond the window's connections.
   */
  readonly quitCost: Counters = { Questions: 1 };

  get attributionMethod(): 'performance_schema' | null {
    return this.#perfSchema === 'on' ? 'performance_schema' : null;
  }

  get connectionsKey(): string | null {
    return this.#tracked.includes('Connections') ? 'Connections' : null;
  }

  get degraded(): string[] {
    return this.#perfSchema === 'unreadable' && this.#perfSchemaNote ? [this.#perfSchemaNote] : [];
  }

  get comparable(): { global: string; perConnection: string }[] {
    if (this.#perfSchema !== 'on') return [];
    const pairs = [
      { global: 'Questions', perConnection: 'Questions' },
      { global: 'Com_stmt_prepare', perConnection: 'statement/com/Prepare' },
      { global: 'Com_begin', perConnection: 'statement/sql/begin' },
      { global: 'Com_commit', perConnection: 'statement/sql/commit' },
    ];
    if (this.#rowCounter) pairs.push({ global: this.#rowCounter, perConnection: 'Handler_write' });
    return pairs.filter((p) => this.#tracked.includes(p.global));
  }

  #fail(message: string, statement: string, cause: unknown): SqltallyError {
    return new SqltallyError(message, { backend: this.description.id, phase: 'probe', statement, cause });
  }

  async #query<T = Record<string, unknown>>(sql: string): Promise<T[]> {
    if (!this.#conn) throw this.#fail('probe connection is not open', sql, undefined);
    // The client speaks the text protocol: a prepared statement would add the probe's own to Com_stmt_prepare.
    return this.#conn.query<T>(sql);
  }

  async open(): Promise<void> {
    const c = this.#connection;
    try {
      this.#conn = await openSqlClient('mysql', c, { backend: this.description.id });
    } catch (err) {
      throw this.#fail(`probe could not connect to ${c.host}:${c.port} as ${c.user}: ${messageOf(err)}`, 'connect', err);
    }
    const [idRow] = await this.#query<{ id: unknown; ps: unknown }>('SELECT CONNECTION_ID() AS id, @@performance_schema AS ps');
    this.#ownId = Number(idRow?.id);
    this.#unregister = registerProbeConnection(c, this.#ownId);
    const status = await this.#readGlobalStatus();
    const capabilities = this.description.capabilities;
    this.#rowCounter = capabilities.rowCounter !== null && capabilities.rowCounter in status ? capabilities.rowCounter : null;
    this.#tracked = [...this.#traits.trackedStatus, ...(this.#rowCounter ? [this.#rowCounter] : [])].filter((n) => n in status);

    for (const sql of this.#traits.processlistSql) {
      const readable = await this.#query(sql).then(
        () => true,
        () => false,
      );
      if (readable) {
        this.#processlistSql = sql;
        break;
      }
    }

    const grants = await this.#query('SHOW GRANTS').catch(() => [] as Record<string, unknown>[]);
    const grantText = grants.map((r) => String(Object.values(r)[0])).join('\n');
    this.#hasProcessPrivilege = /GRANT\s+(ALL PRIVILEGES|[^\n]*\bPROCESS\b)[^\n]*\sON\s+\*\.\*/i.test(grantText);

    if (Number(idRow?.ps) !== 1) {
      this.#perfSchema = 'off';
      this.#perfSchemaNote = 'performance_schema is OFF on this server: no per-connection attribution';
      return;
    }
    if (!capabilities.perThreadStatements) {
      this.#perfSchema = 'unreadable';
      this.#perfSchemaNote = 'performance_schema is ON but this account cannot read it: no per-connection attribution';
      return;
    }
    try {
      await this.#query(SQL_THREAD_EVENTS);
      await this.#query(SQL_THREAD_STATUS);
      this.#perfSchema = 'on';
      // prepared_statements_instances counts executes only while statement events are being recorded (MariaDB ships
      // with that consumer off): without it every COUNT_EXECUTE stays 0, which must not pass for "none".
      const [consumer] = await this.#query<{ ENABLED: unknown }>(
        "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'events_statements_current'",
      ).catch(() => [] as { ENABLED: unknown }[]);
      const counting = String(consumer?.ENABLED ?? '').toUpperCase() === 'YES';
      this.#preparedReadable =
        counting &&
        (await this.#query(SQL_PREPARED).then(
          () => true,
          () => false,
        ));
      if (!counting) this.#preparedNote = "performance_schema's events_statements_current consumer is off: prepared executes have no statement class";
      const [digests] = await this.#query<{ size: unknown; enabled: unknown }>(SQL_DIGEST_SETUP).catch(() => [] as { size: unknown; enabled: unknown }[]);
      if (Number(digests?.size ?? 0) === 0) this.#digestsUnknown = 'performance_schema_digests_size is 0 on this server: no per-statement figures';
      else if (String(digests?.enabled ?? '').toUpperCase() !== 'YES')
        this.#digestsUnknown = "performance_schema's statements_digest consumer is off: no per-statement figures";
      else {
        this.#digestsUnknown = await this.#query(SQL_DIGEST_WORK).then(
          () => null,
          (err: unknown) => `the statement digest table is not readable (${messageOf(err)}): no per-statement figures`,
        );
      }
      const bulk = this.#traits.bulkExecuteEvent;
      if (bulk) {
        // A constant name from the traits table, never user input.
        const found = await this.#query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM performance_schema.setup_instruments WHERE NAME = '${bulk}'`);
        this.#bulkEventKnown = Number(found[0]?.n) > 0;
      }
    } catch (err) {
      this.#perfSchema = 'unreadable';
      this.#perfSchemaNote = `performance_schema is ON but this account cannot read it (${messageOf(err)}): no per-connection attribution`;
    }
  }

  async #readGlobalStatus(): Promise<Counters> {
    const rows = await this.#query<{ Variable_name: unknown; Value: unknown }>(SQL_GLOBAL_STATUS);
    const out: Counters = {};
    // About 500 rows a read, several reads a cell: so no global lookups per row (src/shared/intrinsics.ts).
    for (const r of rows) {
      const value = toText(r.Value);
      if (INTEGER.test(value)) out[toText(r.Variable_name)] = toNumber(value);
    }
    return out;
  }

  async #readSessions(ids: readonly number[]): Promise<SeenSessions> {
    const rows = await this.#query<ProcessRow>(this.#processlistSql);
    const workload = new Set(ids);
    const sessions: SeenSessions = { foreign: [], background: [], canSeeOtherSessions: this.#hasProcessPrivilege };
    for (const r of rows) {
      const id = Number(r.ID);
      if (id === this.#ownId || workload.has(id)) continue;
      if (isProbeConnection(this.#connection, id)) {
        sessions.background.push({ id, name: 'another sqltally probe' });
        continue;
      }
      const user = r.USER ?? '';
      const command = r.COMMAND ?? '';
      if (this.#traits.backgroundUsers.includes(user) || this.#traits.backgroundCommands.includes(command)) {
        sessions.background.push({ id, name: `${user || 'system'} (${command || 'no command'})` });
        continue;
      }
      sessions.foreign.push({
        id,
        user: r.USER,
        host: r.HOST,
        command: r.COMMAND,
        ...secondsOf(r.TIME),
        info: r.INFO === null ? null : String(r.INFO).slice(0, INFO_CHARS),
      });
    }
    // Without PROCESS a user still sees its own other sessions; anything more means someone granted visibility.
    const otherClientUser = rows.some((r) => r.USER !== this.#connection.user && !this.#traits.backgroundUsers.includes(r.USER ?? ''));
    if (!this.#hasProcessPrivilege && otherClientUser) sessions.canSeeOtherSessions = true;
    return sessions;
  }

  /** Per-thread statement events and status variables of the given connections, by connection id. */
  async #readPerThread(ids: readonly number[]): Promise<Map<number, Counters>> {
    const events = await this.#query<CounterRow>(SQL_THREAD_EVENTS);
    const status = await this.#query<CounterRow>(SQL_THREAD_STATUS);
    return perThreadCounters(ids, events, status, this.#traits.perThreadStatus);
  }

  /** `present`: connections the server knows; one with no statement event yet has done no work (all 0). */
  async #readWorkPerThread(ids: readonly number[], present: Iterable<number>): Promise<Map<number, Counters>> {
    const wanted = new Set(ids);
    const out = new Map<number, Counters>();
    for (const id of present) if (wanted.has(id)) out.set(id, workCounters({}));
    for (const r of await this.#query<Record<string, unknown>>(SQL_THREAD_WORK)) {
      const id = Number(r.ID);
      // Only threads the counters were read for: one left out there is ending, its summaries no longer whole.
      if (out.has(id)) out.set(id, workCounters(r));
    }
    return out;
  }

  async #readWork(ids: readonly number[], present: Iterable<number>): Promise<WorkReading> {
    const reading: WorkReading = { perConnection: null, tables: null, statements: null, openTransactions: [], unreadable: { tables: NOT_ON_MYSQL } };
    if (this.#perfSchema !== 'on') {
      reading.unreadable.perConnection = this.#perfSchemaNote ?? 'performance_schema is not readable';
      reading.unreadable.statements = reading.unreadable.perConnection;
      return reading;
    }
    try {
      reading.perConnection = await this.#readWorkPerThread(ids, present);
    } catch (err) {
      reading.unreadable.perConnection = `performance_schema statement summaries unreadable: ${messageOf(err)}`;
    }
    if (this.#digestsUnknown) reading.unreadable.statements = this.#digestsUnknown;
    else {
      try {
        const statements = new Map<string, { text: string; calls: number; counters: Counters }>();
        for (const r of await this.#query<Record<string, unknown>>(SQL_DIGEST_WORK)) {
          const key = r.K === null || r.K === undefined ? DIGEST_OVERFLOW_KEY : `${String(r.S ?? '')}:${String(r.K)}`;
          statements.set(key, { text: String(r.Q ?? ''), calls: Number(r.N), counters: workCounters(r) });
        }
        reading.statements = statements;
      } catch (err) {
        reading.unreadable.statements = `the statement digest table is not readable: ${messageOf(err)}`;
      }
    }
    return reading;
  }

  async #readPrepared(ids: readonly number[]): Promise<Map<string, PreparedInstance> | null> {
    if (!this.#preparedReadable) return null;
    const wanted = new Set(ids);
    const out = new Map<string, PreparedInstance>();
    for (const r of await this.#query<PreparedRow>(SQL_PREPARED)) {
      const id = Number(r.ID);
      if (!wanted.has(id)) continue;
      out.set(`${id}:${String(r.K)}`, { connectionId: id, statementClass: classifyCached(String(r.Q ?? ''), 'mysql'), executes: Number(r.N) });
    }
    return out;
  }

  async readConnection(
    _ctx: WindowContext,
    connectionId: number,
  ): Promise<{ counters: Counters | null; prepared: Map<string, PreparedInstance> | null; work: Counters | null }> {
    if (this.#perfSchema !== 'on') return { counters: null, prepared: null, work: null };
    const counters = (await this.#readPerThread([connectionId])).get(connectionId) ?? null;
    const prepared = await this.#readPrepared([connectionId]);
    const work = this.#serverWork ? ((await this.#readWorkPerThread([connectionId], counters ? [connectionId] : [])).get(connectionId) ?? null) : null;
    return { counters, prepared, work };
  }

  summarizeWork(deltas: WorkDeltas, missing: { perConnection?: string; statements?: string }): WorkSummary {
    const summary: WorkSummary = { figures: {}, unknown: {}, unindexedScans: null, scansUnknown: null, notes: [] };
    const statements = deltas.statements;
    if (statements?.some((s) => s.key === DIGEST_OVERFLOW_KEY)) {
      summary.notes.push("the statement digest table was full: some of the window's statements were filed under no digest");
    }
    if (deltas.perConnection) {
      for (const f of WORK_FIGURES) summary.figures[f] = deltas.perConnection[f] ?? 0;
    } else {
      for (const f of WORK_FIGURES) summary.unknown[f] = missing.perConnection ?? "the window connections' statement summaries were not read";
    }
    // Which statement scanned without an index: per digest when the digests can be told apart, else the window's total.
    if (statements && deltas.perConnection && sumStatements(statements, 'fullScans') === deltas.perConnection.fullScans) {
      summary.unindexedScans = statements
        .filter((s) => (s.figures.fullScans ?? 0) > 0)
        .map((s) => ({
          table: null,
          statement: s.text,
          scans: s.figures.fullScans ?? 0,
          rowsRead: s.figures.rowsExamined ?? 0,
          basis: 'rows examined by the statement, through any table',
        }));
    } else if (deltas.perConnection) {
      const scans = deltas.perConnection.fullScans ?? 0;
      summary.unindexedScans =
        scans > 0
          ? [
              {
                table: null,
                statement: null,
                scans,
                rowsRead: deltas.perConnection.rowsExamined ?? 0,
                basis: "rows examined by all of the window's statements",
              },
            ]
          : [];
      if (scans > 0)
        summary.notes.push(
          `unindexed scans not attributed to statements: ${missing.statements ?? "the digests do not add up to the window connections' own figures"}`,
        );
    } else {
      summary.scansUnknown = missing.perConnection ?? "the window connections' statement summaries were not read";
    }
    return summary;
  }

  async snapshot(ctx: WindowContext, _purpose: string, ids: readonly number[]): Promise<Snapshot> {
    const failures: string[] = [];
    const notes: string[] = [];
    if (this.#perfSchemaNote) notes.push(this.#perfSchemaNote);
    if (!this.#hasProcessPrivilege) {
      notes.push(`account ${this.#connection.user} has no PROCESS privilege: other users' sessions are invisible, isolation cannot be verified`);
    }
    // The server files a statement in performance_schema after answering it, so a reading right after can miss it
    // (bench/settle-race.ts): only a later request answered on the same connection waits that out, else not exact.
    if (this.#perfSchema === 'on' && ids.length > 0 && !ctx.settle) {
      failures.push(
        'nothing settled the window connections before this reading (no settle hook): the server files a statement in performance_schema only after answering it, so their last statement may be missing',
      );
    }
    let sessions: SeenSessions = { foreign: [], background: [], canSeeOtherSessions: false };
    try {
      sessions = await this.#readSessions(ids);
    } catch (err) {
      failures.push(`process list unreadable: ${messageOf(err)}`);
    }
    let perConnection: Map<number, Counters> | null = null;
    let prepared: Map<string, PreparedInstance> | null = null;
    if (this.#perfSchema === 'on') {
      try {
        perConnection = await this.#readPerThread(ids);
        prepared = await this.#readPrepared(ids);
      } catch (err) {
        failures.push(`performance_schema read failed: ${messageOf(err)}`);
      }
    }
    let work: WorkReading | undefined;
    try {
      if (this.#serverWork) work = await this.#readWork(ids, perConnection ? perConnection.keys() : []);
    } catch (err) {
      notes.push(`server work not read: ${messageOf(err)}`);
    }
    // Read last so the interval between two global readings holds only this same fixed sequence of probe statements.
    let global: Counters = {};
    try {
      const status = await this.#readGlobalStatus();
      global = Object.fromEntries(this.#tracked.map((name) => [name, status[name] ?? 0]));
    } catch (err) {
      failures.push(`SHOW GLOBAL STATUS failed: ${messageOf(err)}`);
    }
    return { global, perConnection, prepared, statements: null, sessions, notes, failures, ...(work ? { work } : {}) };
  }

  summarize(
    global: Counters,
    perConnection: Counters | null,
    extras: WindowExtras,
  ): { summary: ServerSummary; source: 'perConnection' | 'global'; notes: string[] } {
    const g = (name: string): number | null => (this.#tracked.includes(name) ? (global[name] ?? 0) : null);
    if (perConnection) {
      const p = (name: string): number => perConnection[name] ?? 0;
      const bulk = this.#traits.bulkExecuteEvent && this.#bulkEventKnown ? p(this.#traits.bulkExecuteEvent) : null;
      const executes = p('statement/com/Execute') + (bulk ?? 0);
      const textInserts = p('statement/sql/insert') + p('statement/sql/insert_select') + p('statement/sql/replace') + p('statement/sql/replace_select');
      const notes: string[] = [];
      // A prepared execute is filed under statement/com/Execute; its class comes from the prepared statement it ran.
      const byClass = extras.preparedExecutes;
      const attributed = byClass ? Object.values(byClass).reduce((a, b) => a + b, 0) : 0;
      let inserts: number | null = textInserts;
      if (executes > 0) {
        if (byClass && attributed === executes && !extras.preparedUnknown) {
          inserts = textInserts + (byClass.insert ?? 0);
        } else {
          inserts = null;
          notes.push(
            byClass
              ? `${executes} prepared executes, of which ${attributed} could be given a statement class${extras.preparedUnknown ? ` (${extras.preparedUnknown})` : ''}: summary.inserts is null`
              : `${this.#preparedNote ?? 'performance_schema.prepared_statements_instances is not readable: prepared executes have no statement class'}, summary.inserts is null`,
          );
        }
      }
      const reprepares = g(REPREPARE);
      if (reprepares) notes.push(reprepareNote(reprepares));
      return {
        summary: {
          statements: p('Questions'),
          inserts,
          prepares: p('statement/com/Prepare'),
          executes,
          bulkExecutes: bulk,
          commits: p('statement/sql/commit'),
          rowsInserted: p('Handler_write'),
        },
        source: 'perConnection',
        notes,
      };
    }
    const notes = this.#rowCounter ? [] : ['no inserted-rows counter on this server'];
    const reprepares = g(REPREPARE);
    const prepared = g('Com_stmt_prepare');
    if (reprepares) notes.push(reprepareNote(reprepares));
    return {
      summary: {
        statements: g('Questions'),
        inserts: g('Com_insert'),
        prepares: prepared === null ? null : prepared - (reprepares ?? 0),
        executes: g('Com_stmt_execute'),
        bulkExecutes: g('Com_stmt_bulk_execute'),
        commits: g('Com_commit'),
        rowsInserted: this.#rowCounter ? g(this.#rowCounter) : null,
      },
      source: 'global',
      notes,
    };
  }

  async close(): Promise<void> {
    const conn = this.#conn;
    this.#conn = null;
    this.#unregister();
    await conn?.close();
  }
}

/** The server's own re-prepares are work a prepare caused, not prepares a client sent, so they are named apart. */
function reprepareNote(reprepares: number): string {
  return `the server re-prepared ${reprepares} statement(s) by itself (Com_stmt_reprepare: a bound parameter's type differed from the one derived at prepare, or a table changed); counted apart from prepares`;
}

/**
 * Rows inserted server-wide against the window connections' Handler_write, which also counts non-table writes (data
 * dictionary, temporary tables) where the server-wide counter (MySQL's Innodb_rows_inserted) does not: less says so.
 */
function rowsComparison(globalCounter: string | undefined, whole: number | null, own: number | null): WindowComparison {
  const comparison: WindowComparison = { counter: `${globalCounter ?? 'rows'} (rows inserted)`, server: whole, window: own };
  if (globalCounter === undefined || globalCounter === 'Handler_write') return comparison;
  return {
    ...comparison,
    belowMeans: `the window's connections' Handler_write counts writes that are not table rows (a write a duplicate key refused, the data dictionary rows DDL writes, internal temporary tables), so their rows inserted is not the rows their statements inserted`,
  };
}

/**
 * MySQL/MariaDB: with performance_schema attributing per connection, the global summary (Questions, Com_insert,
 * Innodb_rows_inserted / Handler_write, ...) against the window connections' own.
 */
export const MYSQL_FAMILY_WINDOW_CHECKS: readonly WindowCheck[] = [
  ({ server }) => {
    if (!(server.perConnection && server.summarySource === 'perConnection' && server.globalSummary && server.attribution?.method === 'performance_schema'))
      return [];
    const whole = server.globalSummary;
    const own = server.summary;
    // A re-prepare counts its statement's class again (Com_insert for an INSERT) with no question asked.
    const reprepares = server.global[REPREPARE] ?? 0;
    return [
      { counter: 'Questions (statements)', server: whole.statements, window: own.statements },
      {
        counter: reprepares ? `Com_insert (inserts, ${reprepares} of them possibly re-prepares)` : 'Com_insert (inserts)',
        server: whole.inserts,
        window: own.inserts === null ? null : own.inserts + reprepares,
      },
      rowsComparison(server.comparable?.find((c) => c.perConnection === 'Handler_write')?.global, whole.rowsInserted, own.rowsInserted),
      { counter: 'Com_stmt_prepare - Com_stmt_reprepare (prepares)', server: whole.prepares, window: own.prepares },
      { counter: 'Com_commit (commits)', server: whole.commits, window: own.commits },
    ];
  },
  connectionsOpenedCheck(() => 'Connections'),
];

/**
 * MySQL commands that move `Questions` by none (ping, statistics, prepare, close, reset, long data, goodbye);
 * COM_QUERY and the executes count through their statements, and a command in neither list may count one.
 */
const NO_QUESTION = new Set(['COM_PING', 'COM_STATISTICS', 'COM_STMT_PREPARE', 'COM_STMT_CLOSE', 'COM_STMT_RESET', 'COM_STMT_SEND_LONG_DATA', 'COM_QUIT']);
const BY_STATEMENT = new Set(['COM_QUERY', 'COM_STMT_EXECUTE', 'COM_STMT_BULK_EXECUTE']);
/** Commands measured to move `Questions` by one each (MariaDB 10.11: mysqlslap's COM_INIT_DB). */
const ONE_QUESTION = new Set(['COM_INIT_DB']);

/** MySQL and MariaDB: Questions counts each statement received, failed or not; Com_* count by class. */
function mysqlExpectations(wire: WireCounts, s: WireStatements, summary: ServerSummary, reprepares: number): WireExpectation[] {
  let maybe = 0;
  let run = s.completed + s.failed;
  for (const [command, n] of Object.entries(wire.commands)) {
    if (ONE_QUESTION.has(command)) run += n;
    else if (!BY_STATEMENT.has(command) && !NO_QUESTION.has(command)) maybe += n;
  }
  const byClass = (cls: string) => between(countOf(s.completedByClass, cls), countOf(s.completedByClass, cls) + countOf(s.failedByClass, cls));
  return [
    { what: 'Questions (statements)', actual: summary.statements, range: between(run, run + maybe) },
    // The global Com_insert counts an INSERT the server re-prepared once more; summary.prepares already leaves re-prepares out.
    { what: 'Com_insert (inserts)', actual: summary.inserts, range: widen(byClass('insert'), summary.inserts === null ? 0 : reprepares) },
    { what: 'Com_commit (commits)', actual: summary.commits, range: byClass('commit') },
    { what: 'Com_stmt_prepare (prepares)', actual: summary.prepares, range: exact(countOf(wire.commands, 'COM_STMT_PREPARE')) },
    {
      what: 'Com_stmt_execute (executes)',
      actual: summary.executes,
      range: exact(countOf(wire.commands, 'COM_STMT_EXECUTE') + countOf(wire.commands, 'COM_STMT_BULK_EXECUTE')),
    },
    { what: 'bulk executes', actual: summary.bulkExecutes, range: exact(countOf(wire.commands, 'COM_STMT_BULK_EXECUTE')) },
    { what: 'rows inserted', actual: summary.rowsInserted, range: rowsRange(s.rowsInserted, s) },
  ];
}

/** What the MySQL protocol's statements predict for a MySQL or MariaDB server's counters. */
export const MYSQL_WIRE_MODEL: WireModel = {
  explained: (wire, s) => s.completed + s.failed + (wire.commands.COM_INIT_DB ?? 0),
  expectations: (wire, s, server) => mysqlExpectations(wire, s, server.summary, server.summarySource === 'global' ? (server.global[REPREPARE] ?? 0) : 0),
};
