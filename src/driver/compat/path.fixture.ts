import { DRIVER_PATH_ENV, forcedPlain } from './path';

/**
 * A test of a fast path's own mechanics (what it writes on a driver object, the sink's counters it takes), not of the
 * counts: on the plain path (SQLTALLY_DRIVER_PATH=plain) it is skipped, the reason in its name.
 */
export function itOnFastPath(name: string, fn: () => unknown, timeout?: number): void {
  if (forcedPlain()) it.skip(`${name} [fast path only: ${DRIVER_PATH_ENV}=plain]`, () => undefined);
  else it(name, fn as jest.ProvidesCallback, timeout);
}
