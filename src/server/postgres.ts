import { messageOf, SqltallyError } from '../shared/errors';
import { openSqlClient, type SqlClient } from '../backends/sql-client';
import type { BackendDescription, NetworkConnection } from '../backends/types';
import { classifyCached } from '../sql/statement-cache';
import { isProbeConnection, registerProbeConnection } from './own-connections';
import type { ProbeOptions, WindowContext } from './probe';
import type { SeenSessions, Snapshot, SnapshotSource, WindowExtras } from './snapshot-probe';
import { connectionsOpenedCheck, type ServerLayer, type ServerSummary, type WindowCheck } from './types';
import type { ServerWorkCapabilities, ServerWorkFigure, WorkDeltas, WorkReading } from './server-work';
import { sumStatements } from './server-work';
import type { WorkSummary } from './snapshot-probe';
import type { Counters } from './window';
import type { WireStatements } from '../wire/types';
import { between, countOf, exact, rowsRange, type WireExpectation, type WireModel } from './wire-model';
import { POSTGRES_SETTLE_SQL } from '../wire/postgres';

/** `pg_stat_force_next_flush()` and `stats_fetch_consistency` arrived in 15; before that a collector process ran. */
const FORCED_FLUSH_MIN_VERSION = 150000;
/** `pg_stat_database.sessions` (client sessions established) arrived in 14. */
const SESSIONS_MIN_VERSION = 140000;
/** Pre-15 backends send statistics to the collector at most every PGSTAT_STAT_INTERVAL (500 ms). */
const PRE15_STABLE_FOR_MS = 600;
const PRE15_POLL_MS = 50;
const DEFAULT_SETTLE_TIMEOUT_MS = 5000;
const QUERY_CHARS = 200;
/** Enough of each pg_stat_statements text to classify and show it; a 5000-row VALUES list is 70 KB otherwise. */
const STATEMENT_TEXT_READ = 400;

/** The same text as the wire proxy's settle request, so both share one pg_stat_statements entry, set aside as own. */
const SQL_FORCE_FLUSH = POSTGRES_SETTLE_SQL;

/**
 * One statement reads every user table (an ORM writes tables sqltally was never told about), the sessions and, on 15+,
 * asks for its own flush. Not `pg_stat_database`: every session's transactions and catalog writes land there.
 */
function mainReadSql(forcedFlush: boolean, sessions: boolean, work: boolean): string {
  return [
    'SELECT',
    sessions ? "(SELECT json_build_object('sessions', sessions) FROM pg_stat_database WHERE datname = current_database()) AS db," : 'NULL::json AS db,',
    "(SELECT json_build_object('n_tup_ins', coalesce(sum(n_tup_ins), 0), 'n_tup_upd', coalesce(sum(n_tup_upd), 0), 'n_tup_del', coalesce(sum(n_tup_del), 0),",
    "  'relids', coalesce(json_agg(relid::text ORDER BY relid), '[]'::json)) FROM pg_stat_user_tables) AS tables,",
    "(SELECT json_build_object('n_tup_ins', n_tup_ins, 'n_tup_upd', n_tup_upd, 'n_tup_del', n_tup_del)",
    '  FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2) AS tbl,',
    work
      ? "(SELECT coalesce(json_agg(json_build_object('t', schemaname || '.' || relname, 's', coalesce(seq_scan, 0), 'sr', coalesce(seq_tup_read, 0),\n" +
        "  'i', coalesce(idx_scan, 0), 'if', coalesce(idx_tup_fetch, 0))), '[]'::json) FROM pg_stat_user_tables) AS work_tables,"
      : 'NULL::json AS work_tables,',
    "(SELECT coalesce(json_agg(json_build_object('pid', pid, 'backend_type', backend_type, 'usename', usename,",
    `  'client_addr', client_addr::text, 'state', state, 'query', left(query, ${QUERY_CHARS}))), '[]'::json) FROM pg_stat_activity) AS activity`,
    forcedFlush ? ', pg_stat_force_next_flush() AS flushed' : '',
  ].join('\n');
}

/** Always one row, so the flush request runs even when no statement matched. */
function statementsReadSql(forcedFlush: boolean): string {
  return [
    'SELECT',
    `(SELECT coalesce(json_agg(json_build_object('id', s.queryid::text, 'query', left(s.query, ${STATEMENT_TEXT_READ}), 'calls', s.calls, 'rows', s.rows,`,
    "  'hit', s.shared_blks_hit, 'read', s.shared_blks_read, 'tw', s.temp_blks_written)), '[]'::json)",
    '  FROM pg_stat_statements s',
    '  WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())',
    '    AND s.userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)) AS statements',
    forcedFlush ? ', pg_stat_force_next_flush() AS flushed' : '',
  ].join('\n');
}

interface ActivityRow {
  pid: number;
  backend_type: string | null;
  usename: string | null;
  client_addr: string | null;
  state: string | null;
  query: string | null;
}
interface MainRow {
  work_tables: { t: string; s: number; sr: number; i: number; if: number }[] | null;
  db: Record<string, number> | null;
  tables: { n_tup_ins: number; n_tup_upd: number; n_tup_del: number; relids: string[] } | null;
  tbl: Record<string, number> | null;
  activity: ActivityRow[];
}

interface StatementRow {
  id: string;
  query: string;
  calls: number;
  rows: number;
  hit: number;
  read: number;
  tw: number;
}

const NOT_ON_POSTGRES_SORT = 'PostgreSQL counts no sorts; a sort or hash that spilled to disk shows in tempBlocksWritten';
/** What PostgreSQL gives: table scans from pg_stat_user_tables, per-statement rows and blocks from pg_stat_statements. */
export const POSTGRES_WORK: ServerWorkCapabilities = {
  figures: {
    rowsExamined: null,
    rowsSent: 'PostgreSQL counts the rows a statement retrieved or affected as one figure: see statementRows',
    statementRows: null,
    fullScans: null,
    noGoodIndex: 'PostgreSQL keeps no count of statements that used a poor index',
    fullJoins: 'PostgreSQL counts scans per table, not joins: see fullScans and the tables',
    sortRows: NOT_ON_POSTGRES_SORT,
    sortMergePasses: NOT_ON_POSTGRES_SORT,
    tempTables: 'PostgreSQL counts temporary blocks, not internal temporary tables: see tempBlocksWritten',
    tempDiskTables: 'PostgreSQL counts temporary blocks, not internal temporary tables: see tempBlocksWritten',
    lockTimeNs: 'PostgreSQL keeps no per-statement lock time',
    seqRowsRead: null,
    indexScans: null,
    indexRowsFetched: null,
    sharedBlocksHit: null,
    sharedBlocksRead: null,
    tempBlocksWritten: null,
  } satisfies Record<ServerWorkFigure, string | null>,
  statementFigures: ['statementRows', 'sharedBlocksHit', 'sharedBlocksRead', 'tempBlocksWritten'],
};
const TABLE_FIGURES = ['rowsExamined', 'fullScans', 'seqRowsRead', 'indexScans', 'indexRowsFetched'] as const;

/**
 * PostgreSQL snapshots: the workload table's own counters (schema-qualified, bound as parameters), the
 * database's, `pg_stat_statements` for this database and user, and `pg_stat_activity` for other sessions.
 * There is no per-connection statement source, so `perConnection` is always null.
 */
export class PostgresSource implements SnapshotSource {
  readonly description: BackendDescription;
  readonly comparable: { global: string; perConnection: string }[] = [];
  readonly attributionMethod = null;
  /**
   * The wire proxy settles each window connection with this statement before a reading. A connection that first
   * appears inside a window (a pool connecting lazily) runs it for the first time there, after calibration, so the
   * probe cannot learn it as its own from the empty windows: it is known by its text.
   */
  readonly ownStatements: readonly string[] = [SQL_FORCE_FLUSH];
  readonly work = POSTGRES_WORK;
  /** A backend flushes its table counters only when idle outside a transaction; pg_stat_statements is written per statement. */
  readonly workHeldInTransaction = ['tables'] as const;
  readonly workServerWide = ['tables', 'statements'] as const;
  readonly #connection: NetworkConnection;
  readonly #settleTimeoutMs: number;
  #client: SqlClient | null = null;
  #ownPid = -1;
  #versionNum = 0;
  #statementStats: 'on' | string = 'on';
  #unregister: () => void = () => undefined;

  readonly #serverWork: boolean;

  constructor(description: BackendDescription, connection: NetworkConnection, opts: ProbeOptions = {}) {
    this.description = description;
    this.#connection = connection;
    this.#settleTimeoutMs = opts.settleTimeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS;
    this.#serverWork = opts.serverWork !== false;
  }

  get connectionsKey(): string | null {
    return this.#versionNum >= SESSIONS_MIN_VERSION ? 'db.sessions' : null;
  }

  get degraded(): string[] {
    return this.#statementStats === 'on' ? [] : [this.#statementStats];
  }

  get #forcedFlush(): boolean {
    return this.#versionNum >= FORCED_FLUSH_MIN_VERSION;
  }

  #fail(message: string, statement: string, cause: unknown): SqltallyError {
    return new SqltallyError(message, { backend: this.description.id, phase: 'probe', statement, cause });
  }

  async open(): Promise<void> {
    const c = this.#connection;
    let client: SqlClient;
    try {
      client = await openSqlClient('postgres', c, { backend: this.description.id });
    } catch (err) {
      throw this.#fail(`probe could not connect to ${c.host}:${c.port} as ${c.user}: ${messageOf(err)}`, 'connect', err);
    }
    this.#client = client;
    const [info] = await client.query<{ v: string; pid: number }>("SELECT current_setting('server_version_num') AS v, pg_backend_pid() AS pid");
    this.#versionNum = Number(info?.v);
    this.#ownPid = Number(info?.pid);
    this.#unregister = registerProbeConnection(c, this.#ownPid);
    // Re-read statistics on every access instead of caching the first read of each object for the transaction.
    if (this.#forcedFlush) await client.query('SET stats_fetch_consistency = none');
    if (!this.description.capabilities.statementStats) {
      this.#statementStats =
        'pg_stat_statements is not available to this account (not preloaded, not created in this database, or not readable): no per-statement counts';
    } else {
      // Creates the probe's own entry now, so it does not appear in the first measured interval. The server may have
      // changed since it was identified (the extension dropped): then the layer degrades instead of failing.
      try {
        await client.query(statementsReadSql(false));
      } catch (err) {
        this.#statementStats = `pg_stat_statements is not available (${messageOf(err)}): no per-statement counts`;
      }
    }
    // The statements above are the probe's own; flush them now so they do not land in the first measured interval.
    if (this.#forcedFlush) await client.query(SQL_FORCE_FLUSH);
  }

  async #readMain(ctx: WindowContext): Promise<MainRow> {
    if (!this.#client) throw this.#fail('probe connection is not open', 'read', undefined);
    const sql = mainReadSql(this.#forcedFlush, this.#versionNum >= SESSIONS_MIN_VERSION, this.#serverWork);
    const [row] = await this.#client.query<MainRow>(sql, [ctx.table?.schema ?? 'public', ctx.table?.name ?? '']);
    if (!row) throw this.#fail('statistics read returned no row', sql, undefined);
    return row;
  }

  #countersOf(row: MainRow): Counters {
    const out: Counters = {};
    for (const [k, v] of Object.entries(row.db ?? {})) out[`db.${k}`] = Number(v);
    for (const key of ['n_tup_ins', 'n_tup_upd', 'n_tup_del'] as const) out[`tables.${key}`] = Number(row.tables?.[key] ?? 0);
    // The named table absent from this reading has no counters here, not zeros: created in the window still gives
    // the right delta, absent at both ends leaves its own rows unknown.
    if (row.tbl) for (const key of ['n_tup_ins', 'n_tup_upd', 'n_tup_del']) out[`table.${key}`] = Number(row.tbl[key] ?? 0);
    return out;
  }

  #sessions(ids: readonly number[], activity: ActivityRow[]): SeenSessions {
    const workload = new Set(ids);
    const seen: SeenSessions = { foreign: [], background: [], canSeeOtherSessions: true };
    for (const a of activity) {
      if (a.pid === this.#ownPid || workload.has(a.pid)) continue;
      if (isProbeConnection(this.#connection, a.pid)) {
        seen.background.push({ id: a.pid, name: 'another sqltally probe' });
        continue;
      }
      // autovacuum, walwriter, checkpointer, parallel workers...: the server's own, named and set aside.
      if (a.backend_type !== 'client backend') {
        seen.background.push({ id: a.pid, name: a.backend_type ?? 'unknown backend' });
        continue;
      }
      seen.foreign.push({ id: a.pid, user: a.usename, host: a.client_addr, command: a.state, info: a.query });
    }
    return seen;
  }

  /** Pre-15: no forced flush; wait until the counters stop moving for longer than the collector interval. */
  async #pollUntilStable(ctx: WindowContext, first: MainRow): Promise<{ row: MainRow; settled: boolean }> {
    const started = Date.now();
    let row = first;
    let last = JSON.stringify(this.#countersOf(row));
    let stableSince = Date.now();
    for (;;) {
      if (Date.now() - stableSince >= PRE15_STABLE_FOR_MS) return { row, settled: true };
      if (Date.now() - started >= this.#settleTimeoutMs) return { row, settled: false };
      await new Promise((r) => setTimeout(r, PRE15_POLL_MS));
      await this.#client?.query('SELECT pg_stat_clear_snapshot()');
      row = await this.#readMain(ctx);
      const now = JSON.stringify(this.#countersOf(row));
      if (now !== last) {
        last = now;
        stableSince = Date.now();
      }
    }
  }

  async snapshot(ctx: WindowContext, _purpose: string, ids: readonly number[]): Promise<Snapshot> {
    const startNs = process.hrtime.bigint();
    const failures: string[] = [];
    const notes: string[] = [];
    const work: WorkReading = {
      perConnection: null,
      tables: null,
      statements: null,
      openTransactions: [],
      unreadable: { perConnection: 'PostgreSQL keeps no per-connection work counters' },
    };
    const lost = this.#client?.lost;
    if (lost) failures.push(`probe connection lost: ${lost}`);
    let settleDetail = 'forced flush of every window session (pg_stat_force_next_flush, sent by the wire proxy)';
    let settled = true;

    // With a wire proxy, every window session was already flushed (ctx.settle runs before each reading). Without
    // one, only the session handed in through onWorkloadConnection can be made to flush.
    if (this.#forcedFlush && !ctx.settle) {
      if (!ctx.onWorkloadConnection) {
        settled = false;
        settleDetail = 'no workload-connection hook: the writer session cannot be made to flush its statistics';
      } else {
        settleDetail = 'forced flush of the writer session (pg_stat_force_next_flush)';
        try {
          await ctx.onWorkloadConnection(SQL_FORCE_FLUSH);
        } catch (err) {
          failures.push(`forcing the writer's statistics flush failed: ${messageOf(err)}`);
        }
        if (ids.length > 1) {
          settled = false;
          settleDetail = `only one of ${ids.length} workload connections can be force-flushed without a wire proxy; the others flush up to ~10 s later`;
        }
      }
    }

    let global: Counters = {};
    let objects: Set<string> | undefined;
    let sessions: SeenSessions = { foreign: [], background: [], canSeeOtherSessions: true };
    try {
      let row = await this.#readMain(ctx);
      if (!this.#forcedFlush) {
        notes.push(`PostgreSQL ${this.#versionNum} has no forced flush: waited for the statistics collector to go quiet`);
        const polled = await this.#pollUntilStable(ctx, row);
        row = polled.row;
        if (!polled.settled) {
          settled = false;
          settleDetail = `counters still moving after ${this.#settleTimeoutMs} ms`;
        }
      }
      if (!row.tbl && ctx.table?.name) {
        notes.push(`table ${ctx.table.schema ?? 'public'}.${ctx.table.name} not found in pg_stat_user_tables: its own counters are not shown`);
      }
      objects = new Set(row.tables?.relids ?? []);
      if (row.activity.some((a) => a.query === '<insufficient privilege>')) {
        notes.push('some sessions hide their query text from this account (needs pg_read_all_stats)');
      }
      global = this.#countersOf(row);
      sessions = this.#sessions(ids, row.activity);
      work.tables = new Map(
        (row.work_tables ?? []).map((t) => [
          t.t,
          { seqScans: Number(t.s), seqRowsRead: Number(t.sr), indexScans: Number(t.i), indexRowsFetched: Number(t.if) },
        ]),
      );
      const workload = new Set(ids);
      work.openTransactions = row.activity.filter((a) => workload.has(a.pid) && (a.state ?? '').startsWith('idle in transaction')).map((a) => a.pid);
    } catch (err) {
      failures.push(`statistics read failed: ${messageOf(err)}`);
    }
    // Settled means visible: the main read above is what a reader would see, so the clock stops there.
    const ns = Number(process.hrtime.bigint() - startNs);
    if (!work.tables) work.unreadable.tables = 'pg_stat_user_tables was not read';

    let statements: Snapshot['statements'] = null;
    if (this.#statementStats === 'on') {
      try {
        const [res] = await this.#client!.query<{ statements: StatementRow[] }>(statementsReadSql(this.#forcedFlush));
        const rows = (res?.statements ?? []).filter((s) => s.query !== SQL_FORCE_FLUSH);
        work.statements = new Map(
          rows.map((s) => [
            s.id,
            {
              text: s.query,
              calls: Number(s.calls),
              counters: { statementRows: Number(s.rows), sharedBlocksHit: Number(s.hit), sharedBlocksRead: Number(s.read), tempBlocksWritten: Number(s.tw) },
            },
          ]),
        );
        statements = new Map(
          (res?.statements ?? [])
            // The flush asked of each session is sqltally's, never the workload's: calibration cannot learn it from a
            // proxied session that first connects inside a window, which would count it in every window after.
            .filter((s) => s.query !== SQL_FORCE_FLUSH)
            .map((s) => [s.id, { query: s.query, calls: Number(s.calls), rows: Number(s.rows), statementClass: classifyCached(s.query, 'postgres') }]),
        );
      } catch (err) {
        failures.push(`pg_stat_statements read failed: ${messageOf(err)}`);
      }
    } else {
      notes.push(this.#statementStats);
    }
    if (!work.statements) work.unreadable.statements = this.#statementStats === 'on' ? 'pg_stat_statements was not read' : this.#statementStats;
    return {
      global,
      perConnection: null,
      ...(objects ? { objects } : {}),
      statements,
      sessions,
      notes,
      failures,
      settle: { ns, settled, detail: settleDetail },
      work,
    };
  }

  summarizeWork(deltas: WorkDeltas, missing: { tables?: string; statements?: string }): WorkSummary {
    const summary: WorkSummary = { figures: {}, unknown: {}, unindexedScans: null, scansUnknown: null, notes: [] };
    const tables = deltas.tables;
    if (tables) {
      const sum = (k: 'seqScans' | 'seqRowsRead' | 'indexScans' | 'indexRowsFetched'): number => tables.reduce((n, t) => n + t[k], 0);
      summary.figures.fullScans = sum('seqScans');
      summary.figures.seqRowsRead = sum('seqRowsRead');
      summary.figures.indexScans = sum('indexScans');
      summary.figures.indexRowsFetched = sum('indexRowsFetched');
      summary.figures.rowsExamined = sum('seqRowsRead') + sum('indexRowsFetched');
      summary.unindexedScans = tables
        .filter((t) => t.seqScans > 0)
        .map((t) => ({ table: t.table, statement: null, scans: t.seqScans, rowsRead: t.seqRowsRead, basis: 'rows read by sequential scans of the table' }));
    } else {
      const why = missing.tables ?? 'pg_stat_user_tables was not read';
      for (const f of TABLE_FIGURES) summary.unknown[f] = why;
      summary.scansUnknown = why;
    }
    const statements = deltas.statements;
    for (const f of POSTGRES_WORK.statementFigures) {
      if (statements) summary.figures[f] = sumStatements(statements, f);
      else summary.unknown[f] = missing.statements ?? 'pg_stat_statements was not read';
    }
    return summary;
  }

  summarize(global: Counters, _perConnection: Counters | null, extras: WindowExtras): { summary: ServerSummary; source: 'global'; notes: string[] } {
    const has = (k: string): number | null => (k in global ? (global[k] ?? 0) : null);
    const notes = ['PostgreSQL counts no prepares or executes on the server side: those are on the wire layer'];
    const dropped = extras.droppedObjects ?? [];
    if (dropped.length > 0)
      notes.push(`${dropped.length} user table(s) were dropped inside the window and took their row counts with them: rowsInserted is unknown`);
    return {
      summary: {
        statements: has('statements.calls'),
        inserts: has('statements.insert_calls'),
        prepares: null,
        executes: null,
        bulkExecutes: null,
        commits: has('statements.commit_calls'),
        rowsInserted: dropped.length > 0 ? null : has('tables.n_tup_ins'),
      },
      source: 'global',
      notes,
    };
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = null;
    this.#unregister();
    await client?.close();
  }
}

/**
 * PostgreSQL: pg_stat_statements calls against the statements the window's connections sent, the rows all user
 * tables changed against the rows the wire's answers reported, and the sessions opened against those the proxy saw.
 */
export const POSTGRES_WINDOW_CHECKS: readonly WindowCheck[] = [
  // A statement's pg_stat_statements entry is written when it ends, with no flush delay: executions the window's
  // connections did not send are someone else's, even before their row counts are flushed.
  ({ server, wire, explainedStatements }) => {
    const g = server.global;
    if (!('statements.calls' in g) || !wire) return [];
    return [
      {
        counter: 'pg_stat_statements calls (statements)',
        server: g['statements.calls'],
        window: Math.max((wire.commands.Execute ?? 0) + (wire.commands.Query ?? 0), explainedStatements ?? 0),
      },
    ];
  },
  // A statement that failed may have changed rows first (a duplicate key fails after its row is written, and
  // n_tup_ins counts it), which no answer reports: with an ErrorResponse in the window, rows bound nothing.
  ({ server, wire }) => {
    const g = server.global;
    if (!('tables.n_tup_ins' in g) || !wire || wire.rowsAffected === undefined || (wire.serverMessages?.ErrorResponse ?? 0)) return [];
    const changed = (g['tables.n_tup_ins'] ?? 0) + (g['tables.n_tup_upd'] ?? 0) + (g['tables.n_tup_del'] ?? 0);
    return [{ counter: 'n_tup_ins + n_tup_upd + n_tup_del (rows changed)', server: changed, window: wire.rowsAffected }];
  },
  connectionsOpenedCheck((server) => ('db.sessions' in server.global ? 'pg_stat_database.sessions' : 'Connections')),
];

/** PostgreSQL: pg_stat_statements counts every statement that finished, except utility statements re-run from a named statement. */
function postgresExpectations(s: WireStatements, server: ServerLayer): WireExpectation[] {
  const counted = (cls: string) => countOf(s.completedByClass, cls) - countOf(s.namedRepeatsByClass, cls);
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

/** What the PostgreSQL protocol's statements predict for the server's counters. */
export const POSTGRES_WIRE_MODEL: WireModel = {
  explained: (_wire, s) => s.completed - s.namedRepeats + s.suspended,
  expectations: (_wire, s, server) => postgresExpectations(s, server),
};
