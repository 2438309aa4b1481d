import { z } from 'zod';
import { DriverNameSchema, type DriverName } from '../shared/driver-names';

/** Statement classes from the tokenizer; anything it cannot place is `other`, never guessed. */
export const STATEMENT_CLASSES = ['insert', 'select', 'update', 'delete', 'begin', 'commit', 'rollback', 'savepoint', 'set', 'show', 'ddl', 'other'] as const;
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

/** What one call was, before it ran: what a wrapper hands its sink with the call's outcome. */
export interface CallShape {
  method: string;
  kind: CallKind;
  sql: string;
  statementClass: StatementClass;
  bindValues: number;
  parameterSets: number;
  /**
   * How the call goes out, where the driver decides per call and the kind does not say: node-postgres sends a
   * simple Query, the unnamed extended statement (Parse every time) or a named one (parsed once per connection); a
   * cursor reads its rows through a portal in batches, one Execute each (postgres.js `cursor()`); a describe asks
   * for a statement's description and executes nothing (postgres.js `describe()`). Absent when the wrapper cannot
   * tell (a Submittable); the model then gives a range.
   */
  protocol?: CallProtocol;
}

export type CallProtocol = 'simple' | 'extended' | 'named' | 'cursor' | 'describe';

/**
 * Where wrappers send calls. Counters subscribe; the wrapper never counts anything itself. One call per settled
 * driver call, with times from `performance.now()` (ms since the process's time origin: no allocation per call).
 */
export interface StatementSink {
  record(
    driver: DriverName,
    shape: CallShape,
    startMs: number,
    endMs: number,
    rowsAffected: number | null,
    error: unknown,
    connectionId: number | null,
    /**
     * The call's bound values as the caller passed them (read only to tell duplicate calls from N+1); may be absent
     * from calls past the first ones of a window (see `epoch`), which are then not compared.
     */
    values?: unknown,
    /**
     * The user's line of this call, when the wrapper captured it already (see `needsCaller`); undefined when it did
     * not, and the sink captures it itself if it needs it.
     */
    caller?: string | null,
  ): void;
  /**
   * Whether the next `record` of `sql` would capture its caller. A wrapper that asks captures it itself, at the call,
   * few frames from the user's (cheaper, and still there before an asynchronous settlement), and may share it across a
   * call's statements. A true answer promises that caller to the text's `record`; it is given once per text until a
   * call of it is recorded, so concurrent calls of one text are not each captured.
   */
  needsCaller?(sql: string): boolean;
  /**
   * Hands back a `needsCaller` ask about a text other than the one the call then records, as that call is recorded
   * with the caller: postgres.js asks about a template's strings before the text it sends (`$1`, ...) is built.
   * Without it the ask would stay pending for the whole window and count against its caps beside the text recorded.
   */
  askAnswered?(askedSql: string): void;
  /**
   * A counter for further calls of `shape` on `connectionId` (the shape of the call just recorded) once they need
   * nothing from the sink but their count: its window keeps no more events and compares no more values of that
   * shape. Null when that is not so yet, or there is no window. A counter holds until that window closes; a per-row
   * call then costs a few additions instead of a `record` (see src/driver/better-sqlite3.ts).
   */
  steadyCounter?(driver: DriverName, shape: CallShape, connectionId: number | null): SteadyCounter | null;
  /**
   * Told +1 when a call is handed to the driver and -1 once it has settled (after its `record`), so that a window
   * can tell a call that was still in flight when the user's code returned (a query started without `await`).
   */
  inFlight?(delta: 1 | -1): void;
  /**
   * Told +1 when the user's code has let go of a call still in flight that the driver then finishes by itself, and
   * -1 once that call has settled (after its `inFlight(-1)`): a postgres.js cursor left with `break`, whose portal
   * postgres.js closes after the loop has ended, with nothing the code could await. A window waits for such calls
   * instead of taking them for a query started without `await`.
   */
  letGo?(delta: 1 | -1): void;
  /**
   * Told which path a wrapper took for one of its fast-path features (src/driver/compat): `reason` null for the
   * fast path, else why the plain one (forced, or what differs in this driver release).
   */
  notePath?(driver: DriverName, feature: string, reason: string | null): void;
  /**
   * False when the sink will not keep the next call's times (its event list is full, or no window is open): the
   * wrapper may then skip reading the clock and pass 0. A clock reading is the largest cost of a counted call.
   */
  readonly timed?: boolean;
  /**
   * Changes whenever the sink opens a new window. A wrapper may hand over `values` for only the first calls of each
   * window (the only ones a window compares) and pass `undefined` after them; a sink without windows leaves it
   * undefined and gets values for the first calls only.
   */
  readonly epoch?: number;
}

/** Counts calls of one shape into one window, from {@link StatementSink.steadyCounter}. */
export interface SteadyCounter {
  /** False once its window has closed (or the next window replaced it): the calls after that go to `record`. */
  readonly open: boolean;
  /** One more call of the shape that returned without an error: `record` with no times and no values, in effect. */
  count(rowsAffected: number | null): void;
}

/** Characters of a fingerprint kept in a {@link ShapeStat}; the id is taken from the whole fingerprint first. */
export const SHAPE_FINGERPRINT_SHOWN_CHARS = 300;

/** A fingerprint as a {@link ShapeStat} keeps it: whole when short, else cut with the full length said. */
export function shownFingerprintText(fingerprintText: string): string {
  if (fingerprintText.length <= SHAPE_FINGERPRINT_SHOWN_CHARS) return fingerprintText;
  return `${fingerprintText.slice(0, SHAPE_FINGERPRINT_SHOWN_CHARS)}… (${fingerprintText.length} chars)`;
}

/**
 * The driver calls of one window that share a statement shape (see `fingerprint` in src/sql/fingerprint.ts) and a
 * call kind. The driver layer carries them as `shapes`, first seen first; the matchers judge them.
 */
export const ShapeStatSchema = z.object({
  /** `fingerprintId` of the whole fingerprint: 12 hex characters, stable across runs, for snapshots and ignore lists. */
  id: z.string().regex(/^[0-9a-f]{12}$/, 'a shape id is 12 lower-case hex characters'),
  /** The fingerprint, cut to {@link SHAPE_FINGERPRINT_SHOWN_CHARS} characters for display (see {@link shownFingerprint}). */
  fingerprint: z.string(),
  statementClass: StatementClassSchema,
  kind: CallKindSchema,
  /** Driver calls of this shape and kind in the window. */
  calls: z.number().int().positive(),
  /** Parameter sets over those calls: one per plain call, N per batch of N rows, 0 per prepare. */
  parameterSets: z.number().int().nonnegative(),
  /**
   * How many of those parameter sets were different, counting the statement text with its bound values (so an
   * inlined literal that differs counts as different too); null when the driver layer did not track it. 1 with
   * more than one call is a duplicate; as many as the parameter sets is an N+1.
   */
  distinctParameterSets: z.number().int().nonnegative().nullable(),
  /**
   * How many parameter sets `distinctParameterSets` was counted over: all of them, or the first 64 calls of each text
   * when there were more (comparing every call's values would cost a loop more than the loop's own driver calls).
   * Null with `distinctParameterSets`; absent in tallies written before it existed (then: all of them).
   */
  distinctOf: z.number().int().nonnegative().nullable().optional(),
  /** Rows the calls affected or returned, as the driver reported them; null when it did not say. */
  rows: z.number().int().nonnegative().nullable(),
  /** `file:line:column` of the first call's user frame (`captureCaller`), or null when none was found. */
  caller: z.string().nullable(),
  /** Set by the capture's own ignore list: such a shape is listed, never judged. */
  ignored: z.boolean(),
});
export type ShapeStat = z.infer<typeof ShapeStatSchema>;

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
  /** The calls grouped by statement shape and kind, first seen first (capped; `shapesOmitted` says how many calls fell beyond). */
  shapes: z.array(ShapeStatSchema),
  /** Calls whose shape was not grouped (more distinct shapes than the cap): counted in every total above. */
  shapesOmitted: z.number().int().nonnegative(),
  /** Calls whose shape is on the session's ignore list: listed as ignored shapes, counted in none of the totals. */
  ignoredCalls: z.number().int().nonnegative(),
});
export type DriverLayer = z.infer<typeof DriverLayerSchema>;
