import { z } from 'zod';

/**
 * `assert`: the counts are attributable and may gate. `report`: shown, not gated, and `reason` says why.
 * `incomplete`: some layer could not be read to the end; never a pass.
 */
export const VerdictKindSchema = z.enum(['assert', 'report', 'incomplete']);
export type VerdictKind = z.infer<typeof VerdictKindSchema>;

export const VerdictSchema = z.object({
  kind: VerdictKindSchema,
  reason: z.string(),
  /** How the layers line up: "1 driver batch -> 1 COM_STMT_BULK_EXECUTE -> 1 server execute (5000 rows)". */
  reconciliation: z.array(z.string()),
  /** Disagreements the driver model does not explain, each naming the layer, the amount and the likely cause. */
  discrepancies: z.array(z.string()),
});
export type Verdict = z.infer<typeof VerdictSchema>;
