import { z } from 'zod';
import { DriverNameSchema } from '../containers/types';

/** Statement classes from the tokenizer; anything it cannot place is `other`, never guessed. */
export const STATEMENT_CLASSES = [
  'insert',
  'select',
  'update',
  'delete',
  'begin',
  'commit',
  'rollback',
  'savepoint',
  'set',
  'show',
  'ddl',
  'other',
] as const;
export const StatementClassSchema = z.enum(STATEMENT_CLASSES);
export type StatementClass = z.infer<typeof StatementClassSchema>;

/**
 * What the code asked the driver to do. `batch` is one call carrying N parameter sets: never N events.
 * `prepare` is an explicit prepare the user called; implicit prepares inside `execute` are the driver's business
 * and show on the wire and server layers instead.
 */
export const CallKindSchema = z.enum(['query', 'execute', 'batch', 'prepare']);
export type CallKind = z.infer<typeof CallKindSchema>;

/** One call handed to a driver. Times are integer nanoseconds from `process.hrtime.bigint()`. */
export const StatementEventSchema = z.object({
  driver: DriverNameSchema,
  /** The method the user called: `query`, `execute`, `batch`, `prepare`, `run`, `exec`, `all`, ... */
  method: z.string(),
  kind: CallKindSchema,
  sql: z.string(),
  statementClass: StatementClassSchema,
  /** Values bound in this call, summed over every parameter set. */
  bindValues: z.number().int().nonnegative(),
  /** 1 for a plain call, N for a batch of N rows, 0 for a prepare. */
  parameterSets: z.number().int().nonnegative(),
  /** As the driver reported it; null when the driver does not say (a SELECT, a prepare). */
  rowsAffected: z.number().int().nonnegative().nullable(),
  startNs: z.number().int().nonnegative(),
  durationNs: z.number().int().nonnegative(),
  /** The driver's error message, when the call failed. */
  error: z.string().nullable(),
  /** Server connection/thread id, when the wrapper knows it; used for per-connection attribution. */
  connectionId: z.number().int().nullable(),
});
export type StatementEvent = z.infer<typeof StatementEventSchema>;

/** Where wrappers send events. Counters subscribe; the wrapper never counts anything itself. */
export interface StatementSink {
  record(event: StatementEvent): void;
}

/** Driver-layer totals over a window, derived from the events (the events are kept beside them). */
export const DriverLayerSchema = z.object({
  calls: z.number().int().nonnegative(),
  byKind: z.record(CallKindSchema, z.number().int().nonnegative()),
  byClass: z.record(StatementClassSchema, z.number().int().nonnegative()),
  parameterSets: z.number().int().nonnegative(),
  bindValues: z.number().int().nonnegative(),
  /** Largest bind-value count of any single call: the chunking budget shows here. */
  maxBindValuesPerCall: z.number().int().nonnegative(),
  rowsAffected: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  /** The calls themselves, SQL truncated, in order. Capped; `eventsOmitted` says how many were left out. */
  events: z.array(StatementEventSchema),
  eventsOmitted: z.number().int().nonnegative(),
});
export type DriverLayer = z.infer<typeof DriverLayerSchema>;
