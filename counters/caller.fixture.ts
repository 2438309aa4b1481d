/**
 * A module inside sqltally's own folders that is not a test file: frames from here must be skipped, the way the
 * driver wrappers' frames are.
 */
export function throughSqltally<T>(fn: () => T): T {
  return fn();
}
