import { z } from 'zod';
import { BackendDescriptionSchema } from '../backends/types';
import { DriverNameSchema } from '../shared/driver-names';
import { DriverLayerSchema } from '../sql/events';
import { WireCountsSchema } from '../wire/types';
import { ServerLayerSchema } from '../server/types';
import { DriverPathSchema } from '../driver/compat/path';
import { FindingSchema, VerdictSchema } from '../verdict/types';
import { DeferredWorkSchema } from './deferred-work';
import { LateCommitsSchema } from './late-commits';

/** The three layers side by side; a layer the backend cannot have (wire on SQLite) or that was off is null. */
export const LayersSchema = z.object({
  driver: DriverLayerSchema.nullable(),
  wire: WireCountsSchema.nullable(),
  server: ServerLayerSchema.nullable(),
});
export type Layers = z.infer<typeof LayersSchema>;

/**
 * Counter maps that list only what occurred, so an absent name means 0 (a driver kind never called, a command never
 * sent, a per-connection statement event that did not happen). `server.global` is not one of them: an absent global
 * counter is one this server does not have, which is unknown, not 0. The matchers and the gate both read this.
 */
export const SPARSE_COUNTER_MAPS = ['byKind', 'byClass', 'commands', 'perConnection'] as const;

/** Whether the map a counter sits in lists only what occurred (see {@link SPARSE_COUNTER_MAPS}). */
export function absentMeansZero(map: string): boolean {
  return (SPARSE_COUNTER_MAPS as readonly string[]).includes(map);
}

/** The error the user's own code threw inside the window, kept apart from count mismatches. */
export const WorkloadErrorSchema = z.object({
  /** Truncated: a driver may quote a whole multi-row INSERT in its message. */
  message: z.string(),
  phase: z.string(),
  statement: z.string().nullable(),
  /** The messages of its `cause` chain, outermost first (an ORM's error wraps the driver's, which says why). */
  causes: z.array(z.string()),
});

/**
 * A driver package counted into a session, the version the app installed, and which path counted it (fast features,
 * plain ones with their reason; absent for a driver counted through its public API alone, and in older reports).
 */
export const CountedDriverSchema = z.object({ name: DriverNameSchema, version: z.string().nullable(), path: DriverPathSchema.optional() });
export type CountedDriver = z.infer<typeof CountedDriverSchema>;

/** One counter compared between the whole server and the window's own connections (see src/verdict/verdict.ts). */
export const BeyondWindowSchema = z.object({ counter: z.string(), server: z.number().int(), window: z.number().int() });
export type WorkloadError = z.infer<typeof WorkloadErrorSchema>;

/**
 * What the session's ignore list took out of the wire and server layers. Those layers cannot tell a statement by its
 * shape, so the share is the driver model's prediction for the ignored calls, taken out only where it is exact; the
 * verdict compared the layers with the ignored calls still in.
 */
export const IgnoredShareSchema = z.object({
  calls: z.number().int().nonnegative(),
  wire: z.record(z.string(), z.number().int().nonnegative()),
  server: z.record(z.string(), z.number().int().nonnegative()),
  /** What stayed in the layers and why: round trips, bytes, per-connection counters, inexact predictions. */
  leftIn: z.array(z.string()),
});
export type IgnoredShare = z.infer<typeof IgnoredShareSchema>;

/** What one captured window produced: serialisable, so it can go into a report as it is. */
export const TallySchema = z.object({
  backend: BackendDescriptionSchema,
  /** The driver of the session's own connection (what a measured function that takes a handle is given). */
  driver: DriverNameSchema,
  /** Every driver counted into the session, with the version the app installed. */
  drivers: z.array(CountedDriverSchema),
  /** Why `layers.driver` is null, when it is. */
  driverAbsent: z.string().nullable(),
  layers: LayersSchema,
  /** How much the server did beyond the window's own connections, counter by counter (only those that differ). */
  beyondWindow: z.array(BeyondWindowSchema),
  verdict: VerdictSchema,
  /**
   * What the numbers show about the code, apart from whether they are true (the verdict): a batch the connector sent
   * one command per row, work of the previous window that ran after it ended. True numbers with findings still assert.
   */
  findings: z.array(FindingSchema).default([]),
  /** Work the measured function started without awaiting it, pending when it returned; null when there was none. */
  deferredWork: DeferredWorkSchema.nullable().default(null),
  /** What ignored calls accounted for on the wire and on the server, taken out of those layers; null without any. */
  ignored: IgnoredShareSchema.nullable(),
  workloadError: WorkloadErrorSchema.nullable(),
  /** After a timeout or abort: what the server went on doing, and the rows that committed anyway. */
  lateCommits: LateCommitsSchema.nullable(),
  /** Wall time of the user's function alone, integer ns. */
  durationNs: z.number().int().nonnegative(),
});
export type Tally = z.infer<typeof TallySchema>;
