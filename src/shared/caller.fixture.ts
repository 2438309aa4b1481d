import { captureCaller } from './caller';
/**
 * A module inside sqltally's own folders that is not a test file: frames from here must be skipped, the way the
 * driver wrappers' frames are.
 */
export function throughSqltally<T>(fn: () => T): T {
  return fn();
}

/** A capture made from inside sqltally's own code, as the driver layer makes it: its frame is skipped too. */
export function capturerFor(path?: string): () => string | null {
  return () => captureCaller(path);
}
