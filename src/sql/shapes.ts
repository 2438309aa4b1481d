import { z } from 'zod';
import type { DriverLayer } from './events';

export { SHAPE_FINGERPRINT_SHOWN_CHARS, ShapeStatSchema } from './events';
export type { ShapeStat } from './events';
import { ShapeStatSchema } from './events';

export const ShapeStatsSchema = z.array(ShapeStatSchema);

/** The driver layer with its shapes (every layer built by sqltally has them). */
export type DriverLayerWithShapes = DriverLayer;

export { shownFingerprintText as shownFingerprint } from './events';
