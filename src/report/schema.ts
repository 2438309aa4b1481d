import { DriverPathSchema } from '../driver/compat/path';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { BackendDescriptionSchema, BackendNameSchema, FlavourSchema } from '../backends/types';
import { DriverNameSchema } from '../shared/driver-names';
import { StatementEventSchema } from '../sql/events';
import { SqltallyError } from '../shared/errors';
import { EventLoopDelaySchema } from '../capture/event-loop';
import { absentMeansZero, BeyondWindowSchema, LayersSchema } from '../capture/tally';
import { LateCommitsSchema } from '../capture/late-commits';
import { WireChoiceSchema } from '../capture/wire-choice';
import { DRIVERS } from '../driver/registry';
import { FindingSchema, VerdictKindSchema, VerdictSchema } from '../verdict/types';
import { MIN_MEASURED_REPEATS, summariseSamples } from './timings';

/**
 * The one description of every file sqltally writes or reads back: report.json, the gate's baseline and the CLI's
 * JSON output. Bump SCHEMA_VERSION on any incompatible change; readers refuse other versions by name.
 */
export const SCHEMA_VERSION = 2 as const;
export const SchemaVersionSchema = z.literal(SCHEMA_VERSION);

const int = () => z.number().int();
const count = () => z.number().int().nonnegative();
const isoTime = () => z.iso.datetime({ offset: true });
/** A window's name is a key in reports and baselines, and a path segment of the control endpoint. */
export const WINDOW_NAME_MAX_CHARS = 200;

// ---------------------------------------------------------------------------------------------------------------
// Environment

/** The machine, runtime and code a report was produced with. Servers are described in `backends`. */
export const EnvironmentSchema = z.object({
  /**
   * Names this environment inside a report; cells point at it. A single run uses the CI job name or `local`;
   * `sqltally merge` keeps one entry per source report and makes the ids unique.
   */
  id: z.string().min(1),
  collectedAt: isoTime(),
  os: z.object({
    platform: z.string(),
    /** Kernel release (`os.release()`). */
    release: z.string(),
    /** `/etc/os-release` PRETTY_NAME, when the file exists. */
    prettyName: z.string().nullable(),
  }),
  arch: z.string(),
  cpu: z.object({ model: z.string(), cores: z.number().int().positive() }),
  memoryBytes: count(),
  node: z.string(),
  sqltallyVersion: z.string(),
  /**
   * Each driver's installed version as its package.json says; null when it is not installed. Partial: a report
   * written before a driver was added has no key for it, and must still be read.
   */
  drivers: z.partialRecord(DriverNameSchema, z.string().nullable()),
  git: z.object({
    commit: z.string().nullable(),
    /** Uncommitted changes in the work tree; null when git could not tell (no git, not a repository). */
    dirty: z.boolean().nullable(),
  }),
  /** The CI job that produced it, when there was one. */
  ci: z.object({ provider: z.string(), job: z.string().nullable(), runId: z.string().nullable(), runner: z.string().nullable() }).nullable(),
});
export type Environment = z.infer<typeof EnvironmentSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Timings

/** Nearest-rank percentiles over the measured samples; `n` is always shown beside them. */
export const TimingSummarySchema = z.object({
  n: z.number().int().positive(),
  minNs: count(),
  p50Ns: count(),
  p95Ns: count(),
  p99Ns: count(),
  maxNs: count(),
});
export type TimingSummary = z.infer<typeof TimingSummarySchema>;

/** Wall time of the insert path. Raw samples are kept; the summary is checked against them on read. */
export const TimingsSchema = z
  .object({
    /** Runs made before measuring (connection warm, statement caches filled); never in the summary. */
    warmupNs: z.array(count()),
    samplesNs: z.array(count()).min(MIN_MEASURED_REPEATS),
    summary: TimingSummarySchema,
    eventLoop: EventLoopDelaySchema.nullable(),
  })
  .superRefine((t, ctx) => {
    if (t.samplesNs.length < MIN_MEASURED_REPEATS) return;
    const expected = summariseSamples(t.samplesNs);
    for (const field of Object.keys(expected) as (keyof TimingSummary)[]) {
      if (expected[field] !== t.summary[field]) {
        ctx.addIssue({
          code: 'custom',
          path: ['summary', field],
          message: `does not match the samples (${t.summary[field]} written, ${expected[field]} computed)`,
        });
      }
    }
  });
export type Timings = z.infer<typeof TimingsSchema>;

/**
 * What the instrument adds: the counted windows' p50 minus the uninstrumented runs' p50, over the counted window's
 * driver calls and wire round trips. Medians of separate runs on a shared machine: it can come out negative.
 */
export const InstrumentCostSchema = z.object({
  p50DifferenceNs: z.number().int(),
  /** Null when the window made no driver call. */
  perCallNs: z.number().int().nullable(),
  /** Null when there was no wire layer (SQLite, wire off) or no round trip. */
  perRoundTripNs: z.number().int().nullable(),
  /** The larger interquartile range of the two runs' samples: a difference within it is noise. */
  noiseNs: z.number().int().nonnegative().optional(),
  withinNoise: z.boolean().optional(),
});
export type InstrumentCost = z.infer<typeof InstrumentCostSchema>;

/**
 * The same insert timed with counting off: the strategy on a direct connection of the raw driver (no wire proxy,
 * no driver wrapper, no server readings), its repeats alternated with the counted ones in the same run. `error` is
 * set, and `timings` null, when those runs failed; the counted cell stands either way.
 */
export const UninstrumentedSchema = z.object({
  timings: TimingsSchema.nullable(),
  instrumentCost: InstrumentCostSchema.nullable(),
  error: z.string().optional(),
});
export type Uninstrumented = z.infer<typeof UninstrumentedSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Cells

/** The three layers side by side, exactly as a capture window produced them (src/capture/tally.ts). */
export const CellLayersSchema = LayersSchema;
export type CellLayers = z.infer<typeof CellLayersSchema>;

export const CellErrorSchema = z.object({
  message: z.string(),
  phase: z.string(),
  statement: z.string().optional(),
});
export type CellError = z.infer<typeof CellErrorSchema>;

/** What identifies a cell; the key is derived from these and nothing else. */
export const CellIdentitySchema = z.object({
  /** Backend id as in `backends[].id` (`mariadb@10.11`). */
  backend: z.string().min(1),
  backendName: BackendNameSchema,
  /** As the server reported it. */
  serverVersion: z.string().min(1),
  flavour: FlavourSchema,
  driver: DriverNameSchema,
  driverVersion: z.string().min(1),
  strategy: z.string().min(1),
  rows: z.number().int().positive(),
  /** A repeat on a warm table/connection (the "hot" point of the curve). */
  hot: z.boolean(),
});
export type CellIdentity = z.infer<typeof CellIdentitySchema>;

/** A stable, readable key: `mariadb@10.11|10.11.14-MariaDB|mysql2@3.24.6|mysql2.query-multirow|5000|cold`. */
export function cellKey(c: CellIdentity): string {
  return [c.backend, c.serverVersion, `${c.driver}@${c.driverVersion}`, c.strategy, String(c.rows), c.hot ? 'hot' : 'cold'].join('|');
}

/**
 * The same cell across version upgrades: what the gate pairs when the exact key is gone because a driver or a
 * server moved on, so the diff can say "driver 3.4 -> 3.5" instead of "cell missing".
 */
export function cellLineage(c: CellIdentity): string {
  return [c.backendName, c.driver, c.strategy, String(c.rows), c.hot ? 'hot' : 'cold'].join('|');
}

/**
 * The read cap path measured after a cell's inserts: the table read back in one capped SELECT (READ_LIMIT rows), in
 * a window of its own, with what the server did to answer it. A figure the server cannot give exactly is null, and
 * `unknown` says why; a null with no reason does not parse.
 */
export const ReadBackSchema = z
  .object({
    /** Rows the read handed back; null when it failed. */
    rows: count().nullable(),
    driverCalls: count().nullable(),
    serverStatements: count().nullable(),
    /** The server's rows examined (MySQL/MariaDB `ROWS_EXAMINED`; PostgreSQL `seq_tup_read + idx_tup_fetch`). */
    rowsExamined: count().nullable(),
    /** Scans without an index (MySQL/MariaDB statements with `NO_INDEX_USED`; PostgreSQL sequential scans). */
    fullScans: count().nullable(),
    /** Why a figure above is null, by its name. */
    unknown: z.record(z.string(), z.string()),
    verdict: VerdictKindSchema,
    reason: z.string(),
    /** The read's own error, when it threw. */
    error: z.string().optional(),
  })
  .superRefine((r, ctx) => {
    for (const key of ['rows', 'driverCalls', 'serverStatements', 'rowsExamined', 'fullScans'] as const) {
      if (r[key] === null && !r.unknown[key] && !(key === 'rows' && r.error))
        ctx.addIssue({ code: 'custom', path: [key], message: 'is null with no reason in unknown' });
    }
  });
export type ReadBack = z.infer<typeof ReadBackSchema>;

/** One backend x server version x driver x strategy x rows point of the matrix. */
export const CellSchema = CellIdentitySchema.extend({
  key: z.string(),
  /** `environments[].id` of the machine this cell ran on. */
  environment: z.string().min(1),
  layers: CellLayersSchema,
  /** Rows found by a fresh connection after the window; null when not verified (the workload failed). */
  verifiedRows: count().nullable(),
  verdict: VerdictSchema,
  /** What the numbers show about the code, beside the verdict (a bulk fallback, late work); absent in older reports. */
  findings: z.array(FindingSchema).optional(),
  /** Which path counted the cell's driver (src/driver/compat): fast features, plain ones with their reason; absent for a driver with no fast path and in older reports. */
  driverPath: DriverPathSchema.optional(),
  /** Wall time of the counted windows: the instrument (wire proxy, counting wrapper) is in it. */
  timings: TimingsSchema.nullable(),
  /** Wall time with counting off (see {@link UninstrumentedSchema}); absent in reports written before it existed. */
  uninstrumented: UninstrumentedSchema.optional(),
  /** The read cap path after the inserts (see {@link ReadBackSchema}); only at READ_LIMIT rows, absent in older reports. */
  readBack: ReadBackSchema.optional(),
  /** The workload's own error, when it threw: shown instead of a count mismatch. */
  error: CellErrorSchema.optional(),
  /**
   * Set when the run gave up on a window (`--cell-timeout-ms`, Ctrl-C): what the server still did after the client
   * stopped waiting, rows committed anyway counted through a fresh connection.
   */
  lateCommits: LateCommitsSchema.optional(),
  /**
   * How many of this cell's driver events are in the events file beside the report (see {@link EventsFileSchema})
   * instead of `layers.driver.events`, which is then empty. Absent when the events are inline: every cell whose
   * verdict is not `assert`, or whose workload threw, keeps them here as evidence.
   */
  movedEvents: z.number().int().positive().optional(),
}).superRefine((c, ctx) => {
  const expected = cellKey(c);
  if (c.key !== expected) ctx.addIssue({ code: 'custom', path: ['key'], message: `is "${c.key}" but the cell's fields make "${expected}"` });
  if (c.movedEvents !== undefined && (c.layers.driver?.events.length ?? 0) > 0) {
    ctx.addIssue({ code: 'custom', path: ['movedEvents'], message: 'is set but the driver events are inline too' });
  }
});
export type Cell = z.infer<typeof CellSchema>;

/** What a cell is built from: everything except the derived key. */
export type CellInput = Omit<Cell, 'key'>;

/** Builds a cell with its key and validates it, so a bad cell fails where it is made, not when read back. */
export function makeCell(input: CellInput): Cell {
  return parseValue(CellSchema, { ...input, key: cellKey(input) }, 'cell');
}

// ---------------------------------------------------------------------------------------------------------------
// Windows: what `sqltally exec` and `sqltally proxy` measure around a command or a named window of its own

/** What identifies a window; the key is derived from these and nothing else. */
export const WindowIdentitySchema = z.object({
  /** Backend id as in `backends[].id`. */
  backend: z.string().min(1),
  backendName: BackendNameSchema,
  serverVersion: z.string().min(1),
  flavour: FlavourSchema,
  /** The command's window (`--name`, default the command's file name) or a name given to the control endpoint. */
  name: z.string().min(1).max(WINDOW_NAME_MAX_CHARS),
});
export type WindowIdentity = z.infer<typeof WindowIdentitySchema>;

/** `postgres@15|15.20|window|insert-100`. */
export function windowKey(w: WindowIdentity): string {
  return [w.backend, w.serverVersion, 'window', w.name].join('|');
}

/** The same window across a server upgrade (see {@link cellLineage}). */
export function windowLineage(w: WindowIdentity): string {
  return [w.backendName, 'window', w.name].join('|');
}

/**
 * One window measured around code sqltally did not write (any language, any client): the layers, the verdict and,
 * for a window that ended badly, why. There is no strategy, row count or timing series, so it is not a cell.
 */
export const WindowSchema = WindowIdentitySchema.extend({
  key: z.string(),
  environment: z.string().min(1),
  /** `command`: around the whole command of `sqltally exec`; `control`: begun and ended through the control endpoint. */
  source: z.enum(['command', 'control']),
  layers: CellLayersSchema,
  verdict: VerdictSchema,
  /** How much the server did beyond the window's own connections (see the tally's `beyondWindow`). */
  beyondWindow: z.array(BeyondWindowSchema),
  /** The command failed (exited non-zero, could not start) or the window was not ended by its owner. */
  error: CellErrorSchema.optional(),
  /** Set when the window was given up (timeout, Ctrl-C): rows committed anyway, read through a fresh connection. */
  lateCommits: LateCommitsSchema.optional(),
  /** Wall time of the window, integer ns. */
  durationNs: count(),
}).superRefine((w, ctx) => {
  const expected = windowKey(w);
  if (w.key !== expected) ctx.addIssue({ code: 'custom', path: ['key'], message: `is "${w.key}" but the window's fields make "${expected}"` });
});
export type Window = z.infer<typeof WindowSchema>;

/** Builds a window with its key and validates it. */
export function makeWindow(input: Omit<Window, 'key'>): Window {
  return parseValue(WindowSchema, { ...input, key: windowKey(input) }, 'window');
}

/** The command `sqltally exec` ran (or none, for `sqltally proxy`), and how it ended. */
export const CommandRunSchema = z.object({
  /** `exec`: a command with one window around it; `named`: a command opening its own windows; `proxy`: no command. */
  mode: z.enum(['exec', 'named', 'proxy']),
  /** The command and its arguments, URL passwords masked. */
  argv: z.array(z.string()),
  /** Its exit code, or null when it was ended by a signal or never ran. */
  exitCode: int().nullable(),
  signal: z.string().nullable(),
  /** Why sqltally stopped it: its window timed out, or sqltally itself was interrupted. */
  stoppedBy: z.enum(['timeout', 'SIGINT', 'SIGTERM']).nullable(),
  /** Processes the command left running in its group when it exited, stopped inside its window. */
  strayProcessesStopped: z.number().int().positive().optional(),
  /** The exit code sqltally itself ended with, and which rule chose it. */
  sqltallyExitCode: int(),
  exitReason: z.string(),
  /** How the wire layer was read: `--wire` as given, the capture that ran, and why. Absent in reports before it was recorded. */
  wire: WireChoiceSchema.optional(),
});
export type CommandRun = z.infer<typeof CommandRunSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Report

/** What was asked for; the gate refuses to compare reports of different matrices. */
export const MatrixSchema = z
  .object({
    /** Backends as requested (`sqlite`, `mariadb`, `mariadb@11.4`), including those that turned out unavailable. */
    backends: z.array(z.string()),
    strategies: z.array(z.string()),
    rows: z.array(z.number().int().positive()),
    /** Row counts that also get a hot repeat. */
    hotRows: z.array(z.number().int().positive()),
    warmups: count(),
    /** Measured repeats per cell; 0 in a report of `sqltally exec` or `proxy`, which runs no strategy. */
    repeats: count(),
  })
  .superRefine((m, ctx) => {
    if (m.strategies.length > 0 && m.repeats < MIN_MEASURED_REPEATS) {
      ctx.addIssue({ code: 'custom', path: ['repeats'], message: `is ${m.repeats}; a matrix of strategies measures at least ${MIN_MEASURED_REPEATS}` });
    }
  });
export type Matrix = z.infer<typeof MatrixSchema>;

export const FailureSchema = z.object({
  message: z.string(),
  backend: z.string().optional(),
  phase: z.string().optional(),
  statement: z.string().optional(),
});
export type Failure = z.infer<typeof FailureSchema>;

/** A requested backend that could not be had, with the reason in words. */
export const SkippedBackendSchema = z.object({ backend: z.string(), reason: z.string(), environment: z.string() });
export type SkippedBackend = z.infer<typeof SkippedBackendSchema>;

export const ReportSchema = z
  .object({
    schemaVersion: SchemaVersionSchema,
    kind: z.literal('report'),
    status: z.enum(['ok', 'failed']),
    failure: FailureSchema.optional(),
    matrix: MatrixSchema,
    /** One per machine that contributed cells: one for a local run, one per CI job after `merge`. */
    environments: z.array(EnvironmentSchema).min(1),
    backends: z.array(BackendDescriptionSchema),
    skipped: z.array(SkippedBackendSchema),
    cells: z.array(CellSchema),
    /** Windows measured by `sqltally exec` or `proxy`, one per name; absent from reports of `sqltally run`. */
    windows: z.array(WindowSchema).optional(),
    /** The command `sqltally exec` ran, when the report is one of exec or proxy. */
    command: CommandRunSchema.optional(),
    startedAt: isoTime(),
    finishedAt: isoTime(),
    /**
     * The file beside this report that holds the driver events of its cells with `movedEvents` (passing cells: their
     * per-call lists are most of a report's size and nobody reads them to judge a pass). Absent when none moved.
     */
    eventsFile: z.literal('events.json').optional(),
  })
  .superRefine((r, ctx) => {
    if (!r.eventsFile && r.cells.some((c) => c.movedEvents !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['eventsFile'], message: 'is required when a cell has movedEvents' });
    }
    // A failed run must say why, and a run that says why cannot claim success.
    if (r.status === 'failed' && !r.failure) ctx.addIssue({ code: 'custom', path: ['failure'], message: 'is required when status is "failed"' });
    if (r.status === 'ok' && r.failure) ctx.addIssue({ code: 'custom', path: ['status'], message: 'is "ok" but a failure is recorded' });
    const envIds = new Set<string>();
    r.environments.forEach((e, i) => {
      if (envIds.has(e.id)) ctx.addIssue({ code: 'custom', path: ['environments', i, 'id'], message: `duplicate environment id "${e.id}"` });
      envIds.add(e.id);
    });
    const backendIds = new Set(r.backends.map((b) => b.id));
    const keys = new Set<string>();
    r.cells.forEach((c, i) => {
      if (keys.has(c.key)) ctx.addIssue({ code: 'custom', path: ['cells', i, 'key'], message: `duplicate cell key "${c.key}"` });
      keys.add(c.key);
      if (!envIds.has(c.environment)) ctx.addIssue({ code: 'custom', path: ['cells', i, 'environment'], message: `"${c.environment}" is not in environments` });
      if (!backendIds.has(c.backend)) ctx.addIssue({ code: 'custom', path: ['cells', i, 'backend'], message: `"${c.backend}" is not in backends` });
    });
    (r.windows ?? []).forEach((w, i) => {
      if (keys.has(w.key)) ctx.addIssue({ code: 'custom', path: ['windows', i, 'key'], message: `duplicate window key "${w.key}"` });
      keys.add(w.key);
      if (!envIds.has(w.environment))
        ctx.addIssue({ code: 'custom', path: ['windows', i, 'environment'], message: `"${w.environment}" is not in environments` });
      if (!backendIds.has(w.backend)) ctx.addIssue({ code: 'custom', path: ['windows', i, 'backend'], message: `"${w.backend}" is not in backends` });
    });
  });
export type Report = z.infer<typeof ReportSchema>;

/** Where a report's moved driver events go, beside report.json. */
export const EVENTS_FILE = 'events.json' as const;

/**
 * events.json: the driver events of the report's cells with `movedEvents`, in the report's cell order, exactly as
 * the window kept them (capped per window; `layers.driver.eventsOmitted` still says how many calls were not kept).
 * `reportStartedAt` pairs it with its report.json, so an events file from another run is refused.
 */
export const EventsFileSchema = z
  .object({
    schemaVersion: SchemaVersionSchema,
    kind: z.literal('events'),
    reportStartedAt: isoTime(),
    cells: z.array(z.object({ key: z.string(), events: z.array(StatementEventSchema).min(1) })),
  })
  .superRefine((f, ctx) => {
    const keys = new Set<string>();
    f.cells.forEach((c, i) => {
      if (keys.has(c.key)) ctx.addIssue({ code: 'custom', path: ['cells', i, 'key'], message: `duplicate cell key "${c.key}"` });
      keys.add(c.key);
    });
  });
export type EventsFile = z.infer<typeof EventsFileSchema>;

/**
 * Moves the driver events of passing cells (verdict `assert`, no workload error) out of the report: the report to
 * write as report.json and the events file to write beside it (null when no cell had events to move). Nothing is
 * dropped: {@link joinEvents} puts them back.
 */
export function splitEvents(report: Report): { report: Report; events: EventsFile | null } {
  const moved: EventsFile['cells'] = [];
  const cells = report.cells.map((c) => {
    const events = c.layers.driver?.events ?? [];
    if (c.verdict.kind !== 'assert' || c.error || events.length === 0 || c.movedEvents !== undefined || !c.layers.driver) return c;
    moved.push({ key: c.key, events });
    return { ...c, layers: { ...c.layers, driver: { ...c.layers.driver, events: [] } }, movedEvents: events.length };
  });
  if (moved.length === 0) return { report, events: null };
  return {
    report: { ...report, cells, eventsFile: EVENTS_FILE },
    events: { schemaVersion: SCHEMA_VERSION, kind: 'events', reportStartedAt: report.startedAt, cells: moved },
  };
}

/** The report with every moved event back in its cell; refuses an events file that does not match it exactly. */
export function joinEvents(report: Report, events: EventsFile, label: string): Report {
  const refuse = (why: string): never => {
    throw new UnreadableFileError(`${label}: does not belong to its report: ${why}`, 'invalid', label, 'keep report.json and events.json of one run together');
  };
  if (events.reportStartedAt !== report.startedAt)
    refuse(`written for a report started at ${events.reportStartedAt}, the report started at ${report.startedAt}`);
  const byKey = new Map(events.cells.map((c) => [c.key, c.events]));
  const cells = report.cells.map((c) => {
    if (c.movedEvents === undefined) return c;
    const moved = byKey.get(c.key);
    if (!moved) return refuse(`no events for cell ${c.key}`);
    byKey.delete(c.key);
    if (moved.length !== c.movedEvents) refuse(`${moved.length} events for cell ${c.key}, the report says ${c.movedEvents}`);
    const { movedEvents: _moved, ...cell } = c;
    return { ...cell, layers: { ...cell.layers, driver: cell.layers.driver ? { ...cell.layers.driver, events: moved } : null } };
  });
  if (byKey.size > 0) refuse(`events for cells the report does not have or keeps inline: ${[...byKey.keys()].slice(0, 3).join(', ')}`);
  const { eventsFile: _file, ...rest } = report;
  return { ...rest, cells };
}

// ---------------------------------------------------------------------------------------------------------------
// Baseline

/** Counter name -> value; nested maps are flattened (`byKind.batch`, `commands.COM_QUERY`). */
export const CounterMapSchema = z.record(z.string(), int());
export type CounterMap = z.infer<typeof CounterMapSchema>;

export const LAYER_NAMES = ['driver', 'wire', 'server'] as const;
export type LayerName = (typeof LAYER_NAMES)[number];

/** Counts only: timings are noise on shared CI and never gated. A null layer was not measured. */
export const CountsSchema = z.object({
  driver: CounterMapSchema.nullable(),
  wire: CounterMapSchema.nullable(),
  server: CounterMapSchema.nullable(),
});
export type Counts = z.infer<typeof CountsSchema>;

export const BaselineCellSchema = CellIdentitySchema.extend({
  key: z.string(),
  environment: z.string(),
  /** The verdict when approved, for the reader; the gate uses the current report's verdict. */
  verdict: VerdictKindSchema,
  counts: CountsSchema,
}).superRefine((c, ctx) => {
  const expected = cellKey(c);
  if (c.key !== expected) ctx.addIssue({ code: 'custom', path: ['key'], message: `is "${c.key}" but the cell's fields make "${expected}"` });
});
export type BaselineCell = z.infer<typeof BaselineCellSchema>;

export const BaselineWindowSchema = WindowIdentitySchema.extend({
  key: z.string(),
  environment: z.string(),
  verdict: VerdictKindSchema,
  counts: CountsSchema,
}).superRefine((w, ctx) => {
  const expected = windowKey(w);
  if (w.key !== expected) ctx.addIssue({ code: 'custom', path: ['key'], message: `is "${w.key}" but the window's fields make "${expected}"` });
});
export type BaselineWindow = z.infer<typeof BaselineWindowSchema>;

export const BaselineSchema = z
  .object({
    schemaVersion: SchemaVersionSchema,
    kind: z.literal('baseline'),
    approvedAt: isoTime(),
    matrix: MatrixSchema,
    environments: z.array(EnvironmentSchema).min(1),
    cells: z.array(BaselineCellSchema),
    /** Approved windows of `sqltally exec` / `proxy`, one per name; absent from baselines of `sqltally run`. */
    windows: z.array(BaselineWindowSchema).optional(),
  })
  .superRefine((b, ctx) => {
    const keys = new Set<string>();
    b.cells.forEach((c, i) => {
      if (keys.has(c.key)) ctx.addIssue({ code: 'custom', path: ['cells', i, 'key'], message: `duplicate cell key "${c.key}"` });
      keys.add(c.key);
    });
    (b.windows ?? []).forEach((w, i) => {
      if (keys.has(w.key)) ctx.addIssue({ code: 'custom', path: ['windows', i, 'key'], message: `duplicate window key "${w.key}"` });
      keys.add(w.key);
    });
  });
export type Baseline = z.infer<typeof BaselineSchema>;

/** True when a flattened counter (`byKind.batch`) missing from one side of a comparison simply did not occur. */
export function counterAbsentMeansZero(counter: string): boolean {
  const dot = counter.indexOf('.');
  return dot > 0 && absentMeansZero(counter.slice(0, dot));
}

/**
 * The deterministic counts of a cell, flattened. Only numbers that a rerun reproduces exactly: socket writes
 * (which depend on when the kernel flushes a pipelined batch), server-to-client bytes (which carry server-version
 * strings) and, for a driver whose statement names vary per connection, client-to-server bytes are left out, as
 * are timings.
 */
export function countsOf(cell: Cell): Counts {
  return countsOfLayers(cell.layers, DRIVERS[cell.driver].stableWireBytes);
}

/**
 * A window's counts, as for a cell. Its clients are not sqltally's drivers, so their bytes are left out like those
 * of a driver whose statement names vary.
 */
export function countsOfWindow(window: Window): Counts {
  return countsOfLayers(window.layers, false);
}

function countsOfLayers(layers: CellLayers, stableWireBytes: boolean): Counts {
  const { driver, wire, server } = layers;
  return {
    driver: driver
      ? {
          calls: driver.calls,
          ...prefixed('byKind', driver.byKind),
          ...prefixed('byClass', driver.byClass),
          parameterSets: driver.parameterSets,
          bindValues: driver.bindValues,
          maxBindValuesPerCall: driver.maxBindValuesPerCall,
          rowsAffected: driver.rowsAffected,
          errors: driver.errors,
        }
      : null,
    wire: wire
      ? {
          ...prefixed('commands', wire.commands),
          commandsTotal: wire.commandsTotal,
          roundTrips: wire.roundTrips,
          ...(stableWireBytes ? { bytesClientToServer: wire.bytesClientToServer } : {}),
          connections: wire.connections,
        }
      : null,
    server: server ? Object.fromEntries(Object.entries(server.summary).filter((e): e is [string, number] => e[1] !== null)) : null,
  };
}

function prefixed(prefix: string, map: Partial<Record<string, number>>): CounterMap {
  const out: CounterMap = {};
  // Zeros are dropped so that a counter map does not change shape when a new enum member appears.
  for (const [k, v] of Object.entries(map)) if (v !== undefined && v !== 0) out[`${prefix}.${k}`] = v;
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading and validating

type FileKind = 'report' | 'baseline' | 'events';

const REGENERATE: Record<FileKind, string> = {
  report: 'regenerate it with sqltally run (or the version of sqltally that wrote it)',
  baseline: 'regenerate with sqltally gate --update',
  events: 'regenerate it with sqltally run, together with its report.json',
};

/** `['cells', 3, 'counts', 'driver', 'calls']` -> `cells[3].counts.driver.calls`. */
export function formatIssuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(root)';
}

const ISSUES_SHOWN = 8;

/** A zod error as lines a person reads: `label: path: expected number, received string`. */
export function formatZodError(label: string, error: z.ZodError): string {
  const lines = error.issues.slice(0, ISSUES_SHOWN).map((i) => `${label}: ${formatIssuePath(i.path)}: ${i.message.replace(/^Invalid input: /, '')}`);
  if (error.issues.length > ISSUES_SHOWN) lines.push(`${label}: ... and ${error.issues.length - ISSUES_SHOWN} more problems`);
  return lines.join('\n');
}

/** Validates any value against a schema, throwing a SqltallyError (phase `report`) with readable paths. */
export function parseValue<S extends z.ZodType>(schema: S, value: unknown, label: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new SqltallyError(`invalid ${label}:\n${formatZodError(label, result.error)}`, { phase: 'report', statement: label });
  return result.data;
}

/** Why a file is not readable as a given kind; `older` lets `gate --update` replace an outdated baseline. */
export class UnreadableFileError extends SqltallyError {
  readonly problem: 'missing' | 'json' | 'version' | 'kind' | 'invalid';
  /** With `version`: whether the file is of an older schema than this sqltally's (the only kind `--update` replaces). */
  older = false;
  constructor(message: string, problem: UnreadableFileError['problem'], file: string, hint?: string, cause?: unknown) {
    super(message, { phase: 'report', statement: file, hint, cause });
    this.name = 'UnreadableFileError';
    this.problem = problem;
  }
}

function checkHeader(raw: unknown, kind: FileKind, label: string): void {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new UnreadableFileError(`${label}: not a sqltally ${kind} (expected a JSON object)`, 'kind', label);
  }
  const header = raw as { schemaVersion?: unknown; kind?: unknown };
  if (header.schemaVersion === undefined) {
    throw new UnreadableFileError(`${label}: not a sqltally ${kind} (no schemaVersion)`, 'kind', label);
  }
  if (header.schemaVersion !== SCHEMA_VERSION) {
    const older = typeof header.schemaVersion === 'number' && header.schemaVersion < SCHEMA_VERSION;
    const err = new UnreadableFileError(
      older || typeof header.schemaVersion !== 'number'
        ? `${label}: written by sqltally schema ${JSON.stringify(header.schemaVersion)}; this is ${SCHEMA_VERSION}: ${REGENERATE[kind]}`
        : `${label}: written by sqltally schema ${header.schemaVersion}, newer than this one (${SCHEMA_VERSION}): read it with a newer sqltally`,
      'version',
      label,
    );
    err.older = older;
    throw err;
  }
  if (header.kind !== kind) {
    throw new UnreadableFileError(`${label}: is a sqltally ${JSON.stringify(header.kind)}, not a ${kind}`, 'kind', label);
  }
}

/** Parses already-loaded JSON text as a report or baseline; `label` (usually the path) prefixes every message. */
export function parseReportText(text: string, label: string): Report {
  return parseText(text, label, 'report', ReportSchema);
}

export function parseBaselineText(text: string, label: string): Baseline {
  return parseText(text, label, 'baseline', BaselineSchema);
}

function parseText<S extends z.ZodType>(text: string, label: string, kind: FileKind, schema: S): z.infer<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new UnreadableFileError(`${label}: not valid JSON (${(err as Error).message})`, 'json', label, REGENERATE[kind], err);
  }
  checkHeader(raw, kind, label);
  const result = schema.safeParse(raw);
  if (!result.success) {
    throw new UnreadableFileError(`${label} is not a valid sqltally ${kind}:\n${formatZodError(label, result.error)}`, 'invalid', label);
  }
  return result.data;
}

function readText(file: string, kind: FileKind): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : (err as Error).message;
    throw new UnreadableFileError(`${file}: cannot read ${kind}: ${why}`, code === 'ENOENT' ? 'missing' : 'json', file, undefined, err);
  }
}

export function parseEventsText(text: string, label: string): EventsFile {
  return parseText(text, label, 'events', EventsFileSchema);
}

export interface ReadReportOptions {
  /**
   * `join` (the default) puts the driver events a report moved to events.json back into its cells, and refuses a
   * report whose events file is missing or belongs to another run; `skip` reads report.json alone (the gate, which
   * reads counts only), leaving moved cells with empty event lists and `movedEvents` set.
   */
  events?: 'join' | 'skip';
}

/** Reads a report from `report.json` or from a run's output directory (with its events.json, see the options). */
export function readReportFile(fileOrDir: string, options: ReadReportOptions = {}): Report {
  let file = fileOrDir;
  try {
    if (statSync(fileOrDir).isDirectory()) file = join(fileOrDir, 'report.json');
  } catch {
    // Missing: readText says so with the path.
  }
  const report = parseReportText(readText(file, 'report'), file);
  if (!report.eventsFile || options.events === 'skip') return report;
  const eventsPath = join(dirname(file), report.eventsFile);
  return joinEvents(report, parseEventsText(readText(eventsPath, 'events'), eventsPath), eventsPath);
}

export function readBaselineFile(file: string): Baseline {
  return parseBaselineText(readText(file, 'baseline'), file);
}

/** Serialises a validated value the same way everywhere, so files diff cleanly in review. */
export function toJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/**
 * Like {@link toJson}, but each element of the named top-level arrays on one line of its own: report.json and
 * events.json, whose cells are most of their size. Indenting a cell's deep layers costs more bytes than its numbers
 * (3.0 MB against 1.7 MB for the same report), while a cell per line still diffs cell by cell.
 */
export function toLinesJson(value: Record<string, unknown>, lineArrays: readonly string[]): string {
  const members: string[] = [];
  for (const [key, member] of Object.entries(value)) {
    if (member === undefined) continue;
    let text: string;
    if (Array.isArray(member) && lineArrays.includes(key)) {
      text = member.length === 0 ? '[]' : `[\n${member.map((item) => `    ${JSON.stringify(item)}`).join(',\n')}\n  ]`;
    } else {
      text = JSON.stringify(member, null, 2).replace(/\n/g, '\n  ');
    }
    members.push(`  ${JSON.stringify(key)}: ${text}`);
  }
  return `{\n${members.join(',\n')}\n}\n`;
}

// ---------------------------------------------------------------------------------------------------------------
// The gate's verdict (`sqltally gate --json`)

/** One counter that differs; null on a side means the counter was not measured there. */
export const CounterDiffSchema = z.object({
  layer: z.enum(LAYER_NAMES),
  counter: z.string(),
  baseline: int().nullable(),
  actual: int().nullable(),
  /** Whether this counter can fail the gate for this cell's verdict. */
  gated: z.boolean(),
});
export type CounterDiff = z.infer<typeof CounterDiffSchema>;

export const CellComparisonSchema = z.object({
  /** The baseline's key, or the report's for a new cell. */
  key: z.string(),
  /** The report's key when it differs from the baseline's (paired across a version change). */
  reportKey: z.string().nullable(),
  status: z.enum(['same', 'changed', 'missing', 'new', 'incomplete', 'errored']),
  diffs: z.array(CounterDiffSchema),
  /** "driver mysql2 3.24.6 -> 3.25.0", "server 10.11.14 -> 11.4.2", "node v20.1.0 -> v20.20.2". */
  environmentChanges: z.array(z.string()),
  notes: z.array(z.string()),
  /** Why this cell fails the gate; empty when it passes. */
  failures: z.array(z.string()),
});
export type CellComparison = z.infer<typeof CellComparisonSchema>;

export const GateResultSchema = z.object({
  schemaVersion: SchemaVersionSchema,
  kind: z.literal('gate-result'),
  pass: z.boolean(),
  /** Failures not tied to one cell: the run failed, the matrix differs. */
  failures: z.array(z.string()),
  matrixDifferences: z.array(z.string()),
  /** Every environment difference seen across cells, deduplicated. */
  environmentChanges: z.array(z.string()),
  cells: z.array(CellComparisonSchema),
  totals: z.object({
    same: count(),
    increased: count(),
    decreased: count(),
    missing: count(),
    new: count(),
    incomplete: count(),
    errored: count(),
  }),
});
export type GateResult = z.infer<typeof GateResultSchema>;
