import type { BackendDescription } from '../backends/types';
import type { WindowContext } from './probe';
import type { Snapshot, SnapshotSource, WorkSummary } from './snapshot-probe';
import { SERVER_WORK_FIGURES, type ServerWorkCapabilities, type ServerWorkFigure } from './server-work';
import { connectionsOpenedCheck, type ServerSummary, type WindowCheck } from './types';
import type { Counters } from './window';
import { messageOf } from '../shared/errors';

const NO_WORK_COUNTERS =
  'SQLite keeps its work counters per prepared statement (sqlite3_stmt_status: full-scan steps, sorts, automatic indexes), and better-sqlite3 does not expose them';
/** Nothing: every figure unknown, with the reason. */
export const SQLITE_WORK: ServerWorkCapabilities = {
  figures: Object.fromEntries(SERVER_WORK_FIGURES.map((f) => [f, NO_WORK_COUNTERS])) as Record<ServerWorkFigure, string>,
  statementFigures: [],
};

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function firstNumber(rows: unknown[]): number {
  const row = rows[0];
  if (row === null || typeof row !== 'object') throw new Error(`expected one row, got ${JSON.stringify(rows).slice(0, 100)}`);
  return Number(Object.values(row)[0]);
}

/**
 * SQLite has no server and no statement counter. What it can honestly tell, per counted handle: `total_changes()`
 * (rows inserted, updated or deleted through that handle) and `PRAGMA data_version` (which moves when some OTHER
 * connection commits to the file: a handle the session does not count writing beside it); and, when a table is
 * named, its row count and the file's page count, which any connection to the file would move.
 */
export class SqliteSource implements SnapshotSource {
  readonly description: BackendDescription;
  readonly attributionMethod = 'total_changes' as const;
  readonly degraded: string[] = [];
  readonly connectionsKey = null;
  readonly comparable = [{ global: 'table.rows', perConnection: 'total_changes' }];
  readonly work = SQLITE_WORK;

  summarizeWork(): WorkSummary {
    return { figures: {}, unknown: {}, unindexedScans: null, scansUnknown: NO_WORK_COUNTERS, notes: [] };
  }

  constructor(description: BackendDescription) {
    this.description = description;
  }

  async open(): Promise<void> {
    // Nothing to open: every read goes through the workload's own handles.
  }

  async snapshot(ctx: WindowContext, _purpose: string, ids: readonly number[]): Promise<Snapshot> {
    const base: Snapshot = {
      global: {},
      perConnection: null,
      statements: null,
      sessions: { foreign: [], background: [], canSeeOtherSessions: false },
      notes: ['SQLite has no statement counter and no session list: statements, prepares and executes are null; other writers show as a moved data_version'],
      failures: [],
    };
    const run = ctx.onWorkloadConnection;
    if (!run) {
      base.failures.push("no workload-connection hook: SQLite's total_changes() can only be read on the workload's own handle");
      return base;
    }
    try {
      const perConnection = new Map<number, Counters>();
      for (const id of ids) perConnection.set(id, { total_changes: firstNumber(await run('SELECT total_changes()', id)) });
      const global: Counters = {};
      const first = ids[0];
      // The file's own change counter as one handle sees it: it moves when a connection other than that handle commits.
      if (first !== undefined && ids.length === 1) global.data_version = firstNumber(await run('PRAGMA data_version', first));
      if (ctx.table?.name && first !== undefined) {
        const table = ctx.table.schema ? `${quoteIdent(ctx.table.schema)}.${quoteIdent(ctx.table.name)}` : quoteIdent(ctx.table.name);
        global['table.rows'] = firstNumber(await run(`SELECT count(*) FROM ${table}`, first));
        global.page_count = firstNumber(await run('PRAGMA page_count', first));
      }
      // data_version moves only when another connection commits: with one counted handle that checks for other writers;
      // with several, each moves the others' and no writer can be told apart; with none, nothing reads the file.
      const sessions = { foreign: [], background: [], canSeeOtherSessions: ids.length === 1 };
      return { ...base, global, perConnection, sessions };
    } catch (err) {
      base.failures.push(`SQLite read failed: ${messageOf(err)}`);
      return base;
    }
  }

  summarize(_global: Counters, perConnection: Counters | null): { summary: ServerSummary; source: 'perConnection' | 'global'; notes: string[] } {
    return {
      summary: {
        statements: null,
        inserts: null,
        prepares: null,
        executes: null,
        bulkExecutes: null,
        commits: null,
        // No counted handle, no total_changes: unknown, not 0 (the rows went through a handle nothing read).
        rowsInserted: perConnection && perConnection.total_changes !== undefined ? perConnection.total_changes : null,
      },
      source: perConnection ? 'perConnection' : 'global',
      notes: ['rowsInserted is total_changes(): rows inserted, updated or deleted through the counted handles'],
    };
  }

  async close(): Promise<void> {
    // The handles belong to the workload.
  }
}

/** SQLite: a `data_version` that moved means another connection committed to the file. */
export const SQLITE_WINDOW_CHECKS: readonly WindowCheck[] = [
  connectionsOpenedCheck(() => 'Connections'),
  ({ server }) => ((server.global.data_version ?? 0) !== 0 ? [{ counter: 'data_version (commits by another connection)', server: 1, window: 0 }] : []),
];
