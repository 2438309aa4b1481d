import { z } from 'zod';
import type { StatementSink } from '../../sql/events';
import type { DriverName } from '../../shared/driver-names';
import { functionToString } from '../../shared/intrinsics';

/**
 * Which path counted a driver. A fast path relies on something a driver does not promise (the source text of one of
 * its methods, a private field, its prototype layout); beside each sits a plain path that uses the driver's public
 * API only, taken when forced or when the release at hand does not look as the fast path expects.
 */
export type DriverPathKind = 'fast' | 'plain';

/** The environment variable that forces every driver onto its plain path (`SQLTALLY_DRIVER_PATH=plain`). */
export const DRIVER_PATH_ENV = 'SQLTALLY_DRIVER_PATH';

/** The paths one driver took in a session: fast features, and plain ones with the reason each was plain. */
export const DriverPathSchema = z.object({
  fast: z.array(z.string()),
  plain: z.array(z.object({ feature: z.string(), reason: z.string() })),
});
export type DriverPath = z.infer<typeof DriverPathSchema>;

/** The reason given when the switch, not the driver, chose the plain path. */
export const FORCED_REASON = `forced by ${DRIVER_PATH_ENV}=plain`;

/** Forced plain for this process (tests and benches flip it between runs): read at each decision, not at load. */
export function forcedPlain(): boolean {
  const value = process.env[DRIVER_PATH_ENV];
  if (value === undefined || value === '' || value === 'auto') return false;
  if (value === 'plain') return true;
  throw new Error(`${DRIVER_PATH_ENV}=${value}: use plain or auto`);
}

/**
 * Decides one fast-path feature: `mismatch` says why this release does not look as the fast path expects (null when
 * it does). The decision is told to the sink (StatementSink.notePath) so the tally can say which path counted.
 */
export function decide(sink: StatementSink, driver: DriverName, feature: string, mismatch: () => string | null): DriverPathKind {
  const reason = forcedPlain() ? FORCED_REASON : mismatch();
  sink.notePath?.(driver, feature, reason);
  return reason === null ? 'fast' : 'plain';
}

/**
 * Collects the decisions of a session's wrappers, per driver and feature (the last decision of a feature wins: a
 * feature decided again for a new object of the same release decides the same).
 */
export class PathLedger {
  readonly #byDriver = new Map<DriverName, Map<string, string | null>>();

  note(driver: DriverName, feature: string, reason: string | null): void {
    let features = this.#byDriver.get(driver);
    if (!features) this.#byDriver.set(driver, (features = new Map()));
    if (features.get(feature) !== reason) features.set(feature, reason);
  }

  /** The paths `driver` took; undefined when it decided nothing (a driver with no fast path, or nothing wrapped yet). */
  pathOf(driver: DriverName): DriverPath | undefined {
    const features = this.#byDriver.get(driver);
    if (!features || features.size === 0) return undefined;
    const out: DriverPath = { fast: [], plain: [] };
    for (const [feature, reason] of [...features].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (reason === null) out.fast.push(feature);
      else out.plain.push({ feature, reason });
    }
    return out;
  }
}

/** `fast path`, `plain path: <feature>: <reason>`, both for a mix, `public API` for a driver without a fast path. */
export function pathLabel(path: DriverPath | undefined): string {
  if (path === undefined) return 'public API';
  const plain = path.plain.map((p) => `${p.feature}: ${p.reason}`).join('; ');
  if (path.plain.length === 0) return 'fast path';
  if (path.fast.length === 0) return `plain path: ${plain}`;
  return `fast path: ${path.fast.join(', ')}; plain path: ${plain}`;
}

/**
 * A driver method's source text, or null where it has none to read: read once per function (a driver's methods sit
 * on its prototypes, shared by every connection, and a pool hands out a new promise connection at every checkout).
 * Only the compat modules read it, to tell whether a fast path fits the release at hand.
 */
export function sourceOf(method: unknown): string | null {
  if (typeof method !== 'function') return null;
  let source = SOURCES.get(method);
  if (source === undefined) {
    try {
      source = functionToString.call(method);
    } catch {
      source = '';
    }
    SOURCES.set(method, source);
  }
  return source === '' ? null : source;
}

const SOURCES = new WeakMap<object, string>();
