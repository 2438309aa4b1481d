import { z } from 'zod';
import { ServerSummarySchema } from '../shared/servers';
import { ServerWorkSchema } from './server-work';

// Born in shared/ so that a driver's model, in a layer below this one, can predict it.
export { ServerSummarySchema, type ServerSummary } from '../shared/servers';

/** A client connection the probe saw that is neither the workload's nor its own. */
export const ForeignSessionSchema = z.object({
  id: z.number().int(),
  user: z.string().nullable(),
  host: z.string().nullable(),
  command: z.string().nullable(),
  /** Seconds it had been in that command when read (MySQL and MariaDB `TIME`): a goodbye on its way reads 0. */
  seconds: z.number().int().nonnegative().optional(),
  /** The statement it was running, truncated. */
  info: z.string().nullable(),
});

/** A background thread named and set aside on purpose (MySQL `event_scheduler`, PostgreSQL autovacuum). */
export const BackgroundSessionSchema = z.object({ id: z.number().int(), name: z.string() });

/**
 * Which of the workload's connections the per-connection counters cover. `exact` only when every requested
 * connection was found and nothing else was summed: that is what lets a verdict assert on a busy server.
 */
export const AttributionSchema = z.object({
  /** How the server attributes: `performance_schema` threads, or SQLite's per-connection `total_changes()`. */
  method: z.enum(['performance_schema', 'total_changes']),
  requested: z.array(z.number().int()),
  found: z.array(z.number().int()),
  exact: z.boolean(),
  /** Why a requested connection is not in `found`, in words. */
  missing: z.array(z.string()).optional(),
});
export type Attribution = z.infer<typeof AttributionSchema>;

export const ServerLayerSchema = z.object({
  /** Window delta of the global counters, with the probe's own measured cost already subtracted. */
  global: z.record(z.string(), z.number().int()),
  /** Per-connection counters of the workload's own connections; null when the server cannot attribute. */
  perConnection: z.record(z.string(), z.number().int()).nullable(),
  /** Normalised view of `perConnection` when present, else of `global`. */
  summary: ServerSummarySchema,
  /** Which counters `summary` was taken from. */
  summarySource: z.enum(['perConnection', 'global']),
  /**
   * The same fields from the server-wide counters: beside a per-connection `summary`, how much the whole server did
   * (beyond the window's connections when they differ). Equal to `summary` when that is global already.
   */
  globalSummary: ServerSummarySchema.optional(),
  /** Per-statement calls and rows (`pg_stat_statements`), when loaded. */
  statements: z.array(z.object({ query: z.string(), calls: z.number().int(), rows: z.number().int() })).nullable(),
  /** What one snapshot pair costs in each counter, measured on this server, not hard-coded. */
  probeCost: z.record(z.string(), z.number().int()),
  /**
   * What the empty control window moved after subtracting the probe cost: only counters that did not come out 0
   * (the control reads every counter `global` does, and the window's own connections' as `perConnection.*`), so a
   * clean control is `{}`. Anything here means something else talked to the server.
   */
  control: z.record(z.string(), z.number().int()),
  /** PostgreSQL: time from the workload's end until its statistics were visible. */
  settleNs: z.number().int().nonnegative().nullable(),
  foreignSessions: z.array(ForeignSessionSchema),
  backgroundSessions: z.array(BackgroundSessionSchema),
  /** False when the account cannot see other sessions (no PROCESS privilege): isolation is then unverifiable. */
  canSeeOtherSessions: z.boolean(),
  notes: z.array(z.string()),
  incomplete: z.boolean(),
  incompleteReasons: z.array(z.string()),
  /** Which workload connections `perConnection` covers; null when there is no per-connection source. */
  attribution: AttributionSchema.nullable().optional(),
  /**
   * Pairs of global counters (global key, per-connection key) that mean the same thing, so the verdict can say by
   * how much the whole server moved beyond the workload's own connections.
   */
  comparable: z.array(z.object({ global: z.string(), perConnection: z.string() })).optional(),
  /**
   * Sources this backend normally has that could not be read (a missing privilege, `pg_stat_statements` not
   * loaded). What remains is exact, but a verdict must not assert on what is missing: it reports, with these words.
   */
  degraded: z.array(z.string()).optional(),
  /**
   * Client connections the server accepted during the window (MySQL `Connections`, PostgreSQL
   * `pg_stat_database.sessions`): a short-lived client that came and went between two session listings shows here.
   */
  connectionsOpened: z.number().int().nullable().optional(),
  /** Empty windows taken to measure `probeCost`; all of them agreed, or the layer is incomplete. */
  calibrationPairs: z.number().int().nonnegative().optional(),
  /**
   * What the server did to answer the window's statements (rows examined, scans, temporary tables), per window and
   * per statement entry; absent in layers written before it existed (see src/server/server-work.ts).
   */
  work: ServerWorkSchema.optional(),
});
export type ServerLayer = z.infer<typeof ServerLayerSchema>;

/** One server-wide counter beside what the window's own connections account for (either may be unknown). */
export interface WindowComparison {
  counter: string;
  server: number | null | undefined;
  window: number | null | undefined;
  /**
   * Set where the two sides are counted differently (MySQL's per-connection Handler_write against the server-wide
   * Innodb_rows_inserted): the server-wide count holds every row the window's figure should, so a server-wide count
   * below it means the window's figure counts something else. Why, in words.
   */
  belowMeans?: string;
}

/** What a {@link WindowCheck} reads: the server layer, the wire layer, and what the driver model explains. */
export interface WindowCheckInput {
  server: ServerLayer;
  wire: import('../wire/types').WireCounts | null;
  /** The most statements the window's counted driver calls can have run, from the driver model. */
  explainedStatements?: number;
}

/**
 * A comparison the verdict makes between a backend's counters and the window's own work, declared by the probe
 * source that reads those counters (SOURCES in index.ts). The verdict runs each and lists where the server did more.
 */
export type WindowCheck = (input: WindowCheckInput) => WindowComparison[];

/** Client connections the server accepted against those the window saw open (a client that came and went). */
export function connectionsOpenedCheck(counter: (server: ServerLayer) => string): WindowCheck {
  return ({ server, wire }) =>
    server.connectionsOpened === null || server.connectionsOpened === undefined
      ? []
      : [{ counter: `${counter(server)} (connections opened)`, server: server.connectionsOpened, window: wire?.setup?.connectionsOpened ?? 0 }];
}
