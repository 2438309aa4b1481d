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

/**
 * What a window's numbers show about the code, beside the verdict on whether they are true: a batch the connector
 * sent as one command per row, work that ran between windows. Never a doubt about the numbers (that is the verdict).
 */
export const FindingKindSchema = z.enum(['batch-fallback', 'batch-split', 'late-work']);
export type FindingKind = z.infer<typeof FindingKindSchema>;

export const FindingSchema = z.object({
  kind: FindingKindSchema,
  /** In words, with the figures: "1 driver batch became 5002 server statements (model 3-5002): ...". */
  message: z.string(),
});
export type Finding = z.infer<typeof FindingSchema>;
