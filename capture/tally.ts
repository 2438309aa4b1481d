import { z } from 'zod';
import { BackendDescriptionSchema } from '../containers/types';
import { DriverNameSchema } from '../counters/driver/names';
import { DriverLayerSchema } from '../counters/events';
import { WireCountsSchema } from '../counters/wire/types';
import { ServerLayerSchema } from '../counters/probes/types';
import { VerdictSchema } from '../verdict/types';

/** The three layers side by side; a layer the backend cannot have (wire on SQLite) or that was off is null. */
export const LayersSchema = z.object({
  driver: DriverLayerSchema.nullable(),
  wire: WireCountsSchema.nullable(),
  server: ServerLayerSchema.nullable(),
});
export type Layers = z.infer<typeof LayersSchema>;

/** The error the user's own code threw inside the window, kept apart from count mismatches. */
export const WorkloadErrorSchema = z.object({
  message: z.string(),
  phase: z.string(),
  statement: z.string().nullable(),
});
export type WorkloadError = z.infer<typeof WorkloadErrorSchema>;

/** What one captured window produced: serialisable, so it can go into a report as it is. */
export const TallySchema = z.object({
  backend: BackendDescriptionSchema,
  driver: DriverNameSchema,
  layers: LayersSchema,
  verdict: VerdictSchema,
  workloadError: WorkloadErrorSchema.nullable(),
  /** Wall time of the user's function alone, integer ns. */
  durationNs: z.number().int().nonnegative(),
});
export type Tally = z.infer<typeof TallySchema>;
