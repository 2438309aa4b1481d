import type { ProbeCost } from './probe';

/** Counter readings by name. Absent means "this server has no such counter", not 0. */
export type Counters = Record<string, number>;

/** The keys present in either reading, sorted so outputs are stable. */
function keysOf(...records: Counters[]): string[] {
  return [...new Set(records.flatMap((r) => Object.keys(r)))].sort();
}

/** after - before for every counter in either reading (a counter that appeared counts from 0). */
export function delta(before: Counters, after: Counters): Counters {
  const out: Counters = {};
  for (const key of keysOf(before, after)) out[key] = (after[key] ?? 0) - (before[key] ?? 0);
  return out;
}

/**
 * A raw window minus the probe's measured cost. The cost comes from separate empty windows, never from this
 * window's own snapshots: `after - c.before - (m.before - c.before)` cancels to the raw window.
 */
export function subtractCost(raw: Counters, cost: Counters): Counters {
  const out: Counters = {};
  for (const key of keysOf(raw, cost)) out[key] = (raw[key] ?? 0) - (cost[key] ?? 0);
  return out;
}

/** The counters that are not 0, for messages. */
export function nonZero(counters: Counters): Counters {
  return Object.fromEntries(Object.entries(counters).filter(([, v]) => v !== 0));
}

/**
 * The common cost of several empty windows. Stable only when every window moved every counter by the same
 * amount: a cost that wanders cannot be subtracted, and pretending otherwise turns noise into counts.
 */
export function costFromEmptyWindows(windows: Counters[]): ProbeCost {
  if (windows.length === 0) return { counters: {}, pairs: 0, stable: false, unstable: {} };
  const counters: Counters = {};
  const unstable: Record<string, number[]> = {};
  for (const key of keysOf(...windows)) {
    const values = windows.map((w) => w[key] ?? 0);
    counters[key] = values[0] ?? 0;
    if (values.some((v) => v !== values[0])) unstable[key] = values;
  }
  return { counters, pairs: windows.length, stable: Object.keys(unstable).length === 0 && windows.length >= 2, unstable };
}

/** Renders counters as `a +1, b -3` for reasons and notes. */
export function describeCounters(counters: Counters): string {
  const entries = Object.entries(counters);
  if (entries.length === 0) return 'nothing';
  return entries.map(([k, v]) => `${k} ${v >= 0 ? '+' : ''}${v}`).join(', ');
}
