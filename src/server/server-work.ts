import { z } from 'zod';
import type { Counters } from './window';

/**
 * What the server did to answer the window's statements, in one vocabulary for every backend. Each backend's probe
 * says which of these it can give exactly (`ServerWorkCapabilities`) and why it cannot give the others.
 */
export const SERVER_WORK_FIGURES = [
  /** MySQL/MariaDB `ROWS_EXAMINED`; PostgreSQL `seq_tup_read + idx_tup_fetch` over the user tables. */
  'rowsExamined',
  /** MySQL/MariaDB `ROWS_SENT`: rows returned to the client. */
  'rowsSent',
  /** PostgreSQL `pg_stat_statements.rows`: rows each statement retrieved or affected. */
  'statementRows',
  /** MySQL/MariaDB `NO_INDEX_USED`: statements that scanned a table without an index; PostgreSQL `seq_scan`: sequential scans started. */
  'fullScans',
  /** MySQL/MariaDB `NO_GOOD_INDEX_USED`. */
  'noGoodIndex',
  /** MySQL/MariaDB `SELECT_FULL_JOIN`: joins that scanned a table without an index. */
  'fullJoins',
  'sortRows',
  'sortMergePasses',
  /** MySQL/MariaDB `CREATED_TMP_TABLES` (in memory or on disk). */
  'tempTables',
  /** MySQL/MariaDB `CREATED_TMP_DISK_TABLES`. */
  'tempDiskTables',
  /** MySQL/MariaDB `LOCK_TIME`, in nanoseconds. */
  'lockTimeNs',
  /** PostgreSQL `seq_tup_read`. */
  'seqRowsRead',
  /** PostgreSQL `idx_scan`. */
  'indexScans',
  /** PostgreSQL `idx_tup_fetch`. */
  'indexRowsFetched',
  /** PostgreSQL `pg_stat_statements.shared_blks_hit`. */
  'sharedBlocksHit',
  'sharedBlocksRead',
  'tempBlocksWritten',
] as const;
export const ServerWorkFigureSchema = z.enum(SERVER_WORK_FIGURES);
export type ServerWorkFigure = z.infer<typeof ServerWorkFigureSchema>;

/** Figures by name; a figure absent from such a map is not known (see `ServerWork.unknown`), never 0. */
export const WorkFiguresSchema = z.record(z.string(), z.number().int());
export type WorkFigures = Partial<Record<ServerWorkFigure, number>>;

/** One user table's scans in the window (PostgreSQL `pg_stat_user_tables`). */
export const TableWorkSchema = z.object({
  /** `schema.name`. */
  table: z.string(),
  seqScans: z.number().int(),
  seqRowsRead: z.number().int(),
  indexScans: z.number().int(),
  indexRowsFetched: z.number().int(),
});
export type TableWork = z.infer<typeof TableWorkSchema>;

/**
 * One server statement entry (MySQL digest, `pg_stat_statements` queryid) that ran in the window, with the figures
 * the server keeps per statement. Server-wide per entry: exact for the window when no other session ran the same
 * statement (`ServerWork.statementsScope` says what was seen).
 */
export const StatementWorkSchema = z.object({
  key: z.string(),
  /** The server's normalised text, truncated. */
  text: z.string(),
  calls: z.number().int(),
  figures: WorkFiguresSchema,
});
export type StatementWork = z.infer<typeof StatementWorkSchema>;

/**
 * A scan without an index, as the server attributes it: a table (PostgreSQL) or a statement entry (MySQL digest), or
 * neither when only the window's totals are known. `rowsRead / scans` is how large the table scanned was.
 */
export const UnindexedScanSchema = z.object({
  table: z.string().nullable(),
  statement: z.string().nullable(),
  scans: z.number().int(),
  rowsRead: z.number().int(),
  /** How `rowsRead` was counted, in words (it may include rows read through indexes, an upper bound then). */
  basis: z.string(),
});
export type UnindexedScan = z.infer<typeof UnindexedScanSchema>;

/** The server-work part of a server layer (see docs/server-work.md). */
export const ServerWorkSchema = z.object({
  /** Window totals the server gave exactly, the probe's own cost removed. */
  figures: WorkFiguresSchema,
  /** Each figure this window cannot give, with the reason (the server keeps no such counter, an open transaction...). */
  unknown: z.record(z.string(), z.string()),
  /** Per user table; null when the server has no per-table counters or they cannot be known for this window. */
  tables: z.array(TableWorkSchema).nullable(),
  /** Per statement entry; null with `statementsUnknown` saying why. */
  statements: z.array(StatementWorkSchema).nullable(),
  statementsUnknown: z.string().nullable(),
  /** Figures a statement entry can carry on this server (the others are window-level only). */
  statementFigures: z.array(z.string()),
  /** Scans without an index, for `toUseIndexes`; null with `scansUnknown` when they cannot be told. */
  unindexedScans: z.array(UnindexedScanSchema).nullable(),
  scansUnknown: z.string().nullable(),
  notes: z.array(z.string()),
});
export type ServerWork = z.infer<typeof ServerWorkSchema>;

/**
 * What a probe source can say about server work, as data: for each figure, null when it gives it exactly, else why
 * not. `satisfies Record<ServerWorkFigure, ...>` in each source keeps the table complete.
 */
export interface ServerWorkCapabilities {
  figures: Record<ServerWorkFigure, string | null>;
  /** Figures kept per statement entry. */
  statementFigures: readonly ServerWorkFigure[];
}

/** One reading of the work counters, taken inside a snapshot. */
export interface WorkReading {
  /** Per window connection, counters keyed by figure (MySQL performance_schema per thread); null when not read. */
  perConnection: Map<number, Counters> | null;
  /** Per user table, counters keyed like `TableWork`; null when not read. */
  tables: Map<string, Counters> | null;
  /** Per statement entry; null when not read. */
  statements: Map<string, { text: string; calls: number; counters: Counters }> | null;
  /** Window connections inside an open transaction at this reading. */
  openTransactions: number[];
  /** Why a part could not be read, by part. */
  unreadable: { perConnection?: string; tables?: string; statements?: string };
}

/** The deltas of one window, handed to the source to map onto figures. */
export interface WorkDeltas {
  perConnection: Counters | null;
  tables: TableWork[] | null;
  statements: StatementWork[] | null;
}

const TABLE_KEYS = ['seqScans', 'seqRowsRead', 'indexScans', 'indexRowsFetched'] as const;

function sub(after: Counters, before: Counters | undefined): Counters {
  const out: Counters = {};
  for (const key of new Set([...Object.keys(after), ...Object.keys(before ?? {})])) out[key] = (after[key] ?? 0) - (before?.[key] ?? 0);
  return out;
}

/**
 * Per-table deltas. A table that appeared in the window counts from 0; one that was there at the start and is gone
 * at the end took its counts with it, so the tables cannot be known (returned as a reason).
 */
export function tableDeltas(before: Map<string, Counters>, after: Map<string, Counters>): TableWork[] | string {
  const dropped = [...before.keys()].filter((t) => !after.has(t));
  if (dropped.length > 0) return `table(s) ${dropped.join(', ')} were dropped inside the window and took their scan counts with them`;
  const out: TableWork[] = [];
  for (const [table, end] of after) {
    const d = sub(end, before.get(table));
    if (TABLE_KEYS.every((k) => (d[k] ?? 0) === 0)) continue;
    out.push({ table, seqScans: d.seqScans ?? 0, seqRowsRead: d.seqRowsRead ?? 0, indexScans: d.indexScans ?? 0, indexRowsFetched: d.indexRowsFetched ?? 0 });
  }
  return out.sort((a, b) => a.table.localeCompare(b.table));
}

/** Per-statement deltas without the probe's own entries; statements that did not run are left out. */
export function statementWorkDeltas(
  before: WorkReading['statements'] & object,
  after: WorkReading['statements'] & object,
  own: ReadonlySet<string>,
  figures: readonly ServerWorkFigure[],
): StatementWork[] {
  const out: StatementWork[] = [];
  for (const [key, s] of after) {
    if (own.has(key)) continue;
    const prev = before.get(key);
    const calls = s.calls - (prev?.calls ?? 0);
    if (calls === 0) continue;
    const d = sub(s.counters, prev?.counters);
    const kept: Record<string, number> = {};
    for (const f of figures) if (f in d) kept[f] = d[f]!;
    out.push({ key, text: s.text, calls, figures: kept });
  }
  return out.sort((a, b) => b.calls - a.calls || a.key.localeCompare(b.key));
}

/** Sums one figure over statement entries (0 over none). */
export function sumStatements(statements: readonly StatementWork[], figure: ServerWorkFigure): number {
  return statements.reduce((n, s) => n + (s.figures[figure] ?? 0), 0);
}
