import mysql from 'mysql2/promise';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { SqltallyError } from '../../containers/errors';
import type { BackendDescription, NetworkConnection } from '../../containers/types';
import type { WindowContext } from './probe';
import type { SeenSessions, Snapshot, SnapshotSource } from './snapshot-probe';
import type { ServerSummary } from './types';
import type { Counters } from './window';

/**
 * What differs between MySQL and MariaDB, as data. The shared code below never asks which server it is; it reads
 * these tables and what the server itself reports (a counter is used only if `SHOW GLOBAL STATUS` has it).
 */
export interface MysqlFamilyTraits {
  /** Global status counters watched in every window, when present on the server. */
  trackedStatus: readonly string[];
  /** Inserted-rows counters in order of preference; the first one the server has is used. */
  rowCounterCandidates: readonly string[];
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
}

/**
 * Every statement the probe sends is a constant text: `Bytes_received` counts statement bytes, so a text that
 * varied (an IN list of thread ids) would make the probe's cost vary too. Filtering happens in JavaScript.
 */
const SQL_GLOBAL_STATUS = 'SHOW GLOBAL STATUS';
export const SQL_PROCESSLIST_INFORMATION_SCHEMA = 'SELECT ID, USER, HOST, COMMAND, INFO FROM information_schema.PROCESSLIST';
export const SQL_PROCESSLIST_PERFORMANCE_SCHEMA = 'SELECT ID, USER, HOST, COMMAND, INFO FROM performance_schema.processlist';
/**
 * Per-thread statement counts, without `statement/com/Ping`: the probe's own ping is filed after its answer, racing
 * the reading that follows it (on a loaded machine MariaDB 10.11 showed 12 in 1000 pings not yet filed), which made
 * an empty control window move by a ping now and then.
 */
const SQL_THREAD_EVENTS =
  'SELECT t.PROCESSLIST_ID AS ID, e.EVENT_NAME AS NAME, e.COUNT_STAR AS N ' +
  'FROM performance_schema.events_statements_summary_by_thread_by_event_name e ' +
  'JOIN performance_schema.threads t ON t.THREAD_ID = e.THREAD_ID ' +
  "WHERE t.PROCESSLIST_ID IS NOT NULL AND e.COUNT_STAR > 0 AND e.EVENT_NAME <> 'statement/com/Ping'";
const SQL_THREAD_STATUS =
  'SELECT t.PROCESSLIST_ID AS ID, s.VARIABLE_NAME AS NAME, s.VARIABLE_VALUE AS N ' +
  'FROM performance_schema.status_by_thread s ' +
  'JOIN performance_schema.threads t ON t.THREAD_ID = s.THREAD_ID ' +
  'WHERE t.PROCESSLIST_ID IS NOT NULL';
const INFO_CHARS = 200;

interface ProcessRow extends RowDataPacket {
  ID: number;
  USER: string | null;
  HOST: string | null;
  COMMAND: string | null;
  INFO: string | null;
}
interface CounterRow extends RowDataPacket {
  ID: number;
  NAME: string;
  N: string | number;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Snapshots of a MySQL-protocol server: global status, per-thread `performance_schema`, the process list. */
export class MysqlFamilySource implements SnapshotSource {
  readonly description: BackendDescription;
  readonly #connection: NetworkConnection;
  readonly #traits: MysqlFamilyTraits;
  #conn: Connection | null = null;
  #ownId = -1;
  #tracked: string[] = [];
  #rowCounter: string | null = null;
  #perfSchema: 'on' | 'off' | 'unreadable' = 'off';
  #perfSchemaNote: string | null = null;
  #hasProcessPrivilege = false;
  #bulkEventKnown = false;
  #processlistSql: string = SQL_PROCESSLIST_INFORMATION_SCHEMA;

  constructor(description: BackendDescription, connection: NetworkConnection, traits: MysqlFamilyTraits) {
    this.description = description;
    this.#connection = connection;
    this.#traits = traits;
  }

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
      { global: 'Bytes_received', perConnection: 'Bytes_received' },
    ];
    if (this.#rowCounter) pairs.push({ global: this.#rowCounter, perConnection: 'Handler_write' });
    return pairs.filter((p) => this.#tracked.includes(p.global));
  }

  #fail(message: string, statement: string, cause: unknown): SqltallyError {
    return new SqltallyError(message, { backend: this.description.id, phase: 'probe', statement, cause });
  }

  async #query<T extends RowDataPacket>(sql: string): Promise<T[]> {
    if (!this.#conn) throw this.#fail('probe connection is not open', sql, undefined);
    // Text protocol on purpose: `execute` would add the probe's own prepares to Com_stmt_prepare.
    const [rows] = await this.#conn.query<T[]>(sql);
    return rows;
  }

  async open(): Promise<void> {
    const c = this.#connection;
    try {
      this.#conn = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
      // A server stopping under an idle connection emits 'error'; unheard, that would take the whole process down.
      this.#conn.on('error', () => undefined);
    } catch (err) {
      throw this.#fail(`probe could not connect to ${c.host}:${c.port} as ${c.user}: ${messageOf(err)}`, 'connect', err);
    }
    const [idRow] = await this.#query<RowDataPacket>('SELECT CONNECTION_ID() AS id, @@performance_schema AS ps');
    this.#ownId = Number(idRow?.id);
    const status = await this.#readGlobalStatus();
    this.#rowCounter = this.#traits.rowCounterCandidates.find((name) => name in status) ?? null;
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

    const grants = await this.#query<RowDataPacket>('SHOW GRANTS').catch(() => [] as RowDataPacket[]);
    const grantText = grants.map((r) => String(Object.values(r)[0])).join('\n');
    this.#hasProcessPrivilege = /GRANT\s+(ALL PRIVILEGES|[^\n]*\bPROCESS\b)[^\n]*\sON\s+\*\.\*/i.test(grantText);

    if (Number(idRow?.ps) !== 1) {
      this.#perfSchema = 'off';
      this.#perfSchemaNote = 'performance_schema is OFF on this server: no per-connection attribution';
      return;
    }
    try {
      await this.#query(SQL_THREAD_EVENTS);
      await this.#query(SQL_THREAD_STATUS);
      this.#perfSchema = 'on';
      const bulk = this.#traits.bulkExecuteEvent;
      if (bulk) {
        const found = await this.#query<RowDataPacket>(
          `SELECT COUNT(*) AS n FROM performance_schema.setup_instruments WHERE NAME = ${mysql.escape(bulk)}`,
        );
        this.#bulkEventKnown = Number(found[0]?.n) > 0;
      }
    } catch (err) {
      this.#perfSchema = 'unreadable';
      this.#perfSchemaNote = `performance_schema is ON but this account cannot read it (${messageOf(err)}): no per-connection attribution`;
    }
  }

  async #readGlobalStatus(): Promise<Counters> {
    const rows = await this.#query<RowDataPacket>(SQL_GLOBAL_STATUS);
    const out: Counters = {};
    for (const r of rows) {
      const value = String(r.Value);
      if (/^-?\d+$/.test(value)) out[String(r.Variable_name)] = Number(value);
    }
    return out;
  }

  async #readSessions(ctx: WindowContext): Promise<SeenSessions> {
    const rows = await this.#query<ProcessRow>(this.#processlistSql);
    const workload = new Set(ctx.workloadConnectionIds);
    const sessions: SeenSessions = { foreign: [], background: [], canSeeOtherSessions: this.#hasProcessPrivilege };
    for (const r of rows) {
      const id = Number(r.ID);
      if (id === this.#ownId || workload.has(id)) continue;
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
        info: r.INFO === null ? null : String(r.INFO).slice(0, INFO_CHARS),
      });
    }
    // Without PROCESS a user still sees its own other sessions; anything more means someone granted visibility.
    const otherClientUser = rows.some((r) => r.USER !== this.#connection.user && !this.#traits.backgroundUsers.includes(r.USER ?? ''));
    if (!this.#hasProcessPrivilege && otherClientUser) sessions.canSeeOtherSessions = true;
    return sessions;
  }

  async #readPerThread(ctx: WindowContext): Promise<{ counters: Counters; found: number[] }> {
    const workload = new Set(ctx.workloadConnectionIds);
    const counters: Counters = {};
    const found = new Set<number>();
    const add = (rows: CounterRow[], keep: (name: string) => boolean): void => {
      for (const r of rows) {
        const id = Number(r.ID);
        if (!workload.has(id)) continue;
        found.add(id);
        if (!keep(r.NAME)) continue;
        counters[r.NAME] = (counters[r.NAME] ?? 0) + Number(r.N);
      }
    };
    add(await this.#query<CounterRow>(SQL_THREAD_EVENTS), () => true);
    add(await this.#query<CounterRow>(SQL_THREAD_STATUS), (name) => this.#traits.perThreadStatus.includes(name));
    return { counters, found: [...found] };
  }

  async snapshot(ctx: WindowContext): Promise<Snapshot> {
    const failures: string[] = [];
    const notes: string[] = [];
    if (ctx.pingWorkloadConnections) {
      try {
        await ctx.pingWorkloadConnections();
      } catch (err) {
        failures.push(`workload connection did not answer a ping before the reading: ${messageOf(err)}`);
      }
    }
    if (this.#perfSchemaNote) notes.push(this.#perfSchemaNote);
    if (!this.#hasProcessPrivilege) {
      notes.push(`account ${this.#connection.user} has no PROCESS privilege: other users' sessions are invisible, isolation cannot be verified`);
    }
    let sessions: SeenSessions = { foreign: [], background: [], canSeeOtherSessions: false };
    try {
      sessions = await this.#readSessions(ctx);
    } catch (err) {
      failures.push(`process list unreadable: ${messageOf(err)}`);
    }
    let perConnection: Counters | null = null;
    let attributed: number[] = [];
    if (this.#perfSchema === 'on') {
      try {
        const read = await this.#readPerThread(ctx);
        perConnection = read.counters;
        attributed = read.found;
      } catch (err) {
        failures.push(`performance_schema read failed: ${messageOf(err)}`);
      }
    }
    // Read last so the interval between two global readings holds only this same fixed sequence of probe statements.
    let global: Counters = {};
    try {
      const status = await this.#readGlobalStatus();
      global = Object.fromEntries(this.#tracked.map((name) => [name, status[name] ?? 0]));
    } catch (err) {
      failures.push(`SHOW GLOBAL STATUS failed: ${messageOf(err)}`);
    }
    return { global, perConnection, attributed, statements: null, sessions, notes, failures };
  }

  summarize(global: Counters, perConnection: Counters | null): { summary: ServerSummary; source: 'perConnection' | 'global'; notes: string[] } {
    const g = (name: string): number | null => (this.#tracked.includes(name) ? (global[name] ?? 0) : null);
    if (perConnection) {
      const p = (name: string): number => perConnection[name] ?? 0;
      const bulk = this.#traits.bulkExecuteEvent && this.#bulkEventKnown ? p(this.#traits.bulkExecuteEvent) : null;
      const executes = p('statement/com/Execute') + (bulk ?? 0);
      const textInserts = p('statement/sql/insert') + p('statement/sql/insert_select') + p('statement/sql/replace') + p('statement/sql/replace_select');
      const notes: string[] = [];
      // performance_schema files a prepared execute under statement/com/Execute, not under the statement's kind.
      if (executes > 0) notes.push('per-connection counters cannot tell which prepared executes were INSERTs: summary.inserts is null');
      return {
        summary: {
          statements: p('Questions'),
          inserts: executes > 0 ? null : textInserts,
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
    return {
      summary: {
        statements: g('Questions'),
        inserts: g('Com_insert'),
        prepares: g('Com_stmt_prepare'),
        executes: g('Com_stmt_execute'),
        bulkExecutes: g('Com_stmt_bulk_execute'),
        commits: g('Com_commit'),
        rowsInserted: this.#rowCounter ? g(this.#rowCounter) : null,
      },
      source: 'global',
      notes: this.#rowCounter ? [] : ['no inserted-rows counter on this server'],
    };
  }

  async close(): Promise<void> {
    const conn = this.#conn;
    this.#conn = null;
    if (conn) await conn.end().catch(() => conn.destroy());
  }
}
