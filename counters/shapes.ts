import { z } from 'zod';
import { CallKindSchema, StatementClassSchema } from './events';
import type { DriverLayer } from './events';

/** Characters of a fingerprint kept in a {@link ShapeStat}; the id is taken from the whole fingerprint first. */
export const SHAPE_FINGERPRINT_SHOWN_CHARS = 300;

/**
 * The driver calls of one window that share a statement shape (see `fingerprint` in counters/fingerprint.ts) and a
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
  /** Rows the calls affected or returned, as the driver reported them; null when it did not say. */
  rows: z.number().int().nonnegative().nullable(),
  /** `file:line:column` of the first call's user frame (`captureCaller`), or null when none was found. */
  caller: z.string().nullable(),
  /** Set by the capture's own ignore list: such a shape is listed, never judged. */
  ignored: z.boolean(),
});
export type ShapeStat = z.infer<typeof ShapeStatSchema>;

export const ShapeStatsSchema = z.array(ShapeStatSchema);

/** A driver layer as the shape-aggregating rewrite will produce it: `shapes` is absent on older layers. */
export type DriverLayerWithShapes = DriverLayer & { shapes?: ShapeStat[] };

/** A fingerprint as a {@link ShapeStat} keeps it: whole when short, else cut with the full length said. */
export function shownFingerprint(fingerprintText: string): string {
  if (fingerprintText.length <= SHAPE_FINGERPRINT_SHOWN_CHARS) return fingerprintText;
  return `${fingerprintText.slice(0, SHAPE_FINGERPRINT_SHOWN_CHARS)}… (${fingerprintText.length} chars)`;
}
