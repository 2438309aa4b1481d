import type { EventLoopDelay } from '../capture/event-loop';
import type { InstrumentCost, Timings, TimingSummary } from './schema';

/** Fewer measured runs than this give percentiles that mean nothing; the schema refuses them too. */
export const MIN_MEASURED_REPEATS = 5;

/** The percentiles a summary carries. */
export const PERCENTILES = [50, 95, 99] as const;
export type Percentile = (typeof PERCENTILES)[number];

/** 1-based nearest rank: the smallest sample with at least p% of the samples at or below it. */
export function nearestRank(p: number, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`nearest rank needs at least one sample, got n=${n}`);
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile must be in (0, 100], got ${p}`);
  // Round away float noise first: 0.95 * 20 must be 19, not 19.000000000000004 -> 20.
  return Math.max(1, Math.ceil(Number(((p / 100) * n).toFixed(9))));
}

/** Nearest-rank percentile of samples sorted ascending. */
export function percentile(sortedNs: readonly number[], p: number): number {
  const value = sortedNs[nearestRank(p, sortedNs.length) - 1];
  if (value === undefined) throw new RangeError('percentile of no samples');
  return value;
}

/**
 * True when, with n samples, the p-th percentile is simply the largest sample (p95 of fewer than 20 samples,
 * p99 of fewer than 100): the report then says "= max" rather than pretend to know a tail it never saw.
 */
export function percentileIsMax(p: number, n: number): boolean {
  return nearestRank(p, n) === n;
}

export function summariseSamples(samplesNs: readonly number[]): TimingSummary {
  if (samplesNs.length === 0) throw new RangeError('cannot summarise zero samples');
  const sorted = [...samplesNs].sort((a, b) => a - b);
  return {
    n: sorted.length,
    minNs: sorted[0]!,
    p50Ns: percentile(sorted, 50),
    p95Ns: percentile(sorted, 95),
    p99Ns: percentile(sorted, 99),
    maxNs: sorted[sorted.length - 1]!,
  };
}

/** Integer nanoseconds as milliseconds with six decimals: exact, no float rounding on the way. */
export function formatMs(ns: number | bigint): string {
  const big = BigInt(ns);
  const sign = big < 0n ? '-' : '';
  const abs = big < 0n ? -big : big;
  const whole = abs / 1_000_000n;
  const frac = (abs % 1_000_000n).toString().padStart(6, '0');
  return `${sign}${whole}.${frac}`;
}

/** `p95 <t> ms (= max of 10)` or `p95 <t> ms (n=40)`: never a tail the samples cannot show. */
export function describePercentile(summary: TimingSummary, p: Percentile): string {
  const value = p === 50 ? summary.p50Ns : p === 95 ? summary.p95Ns : summary.p99Ns;
  const suffix = percentileIsMax(p, summary.n) && summary.n > 1 ? `= max of ${summary.n}` : `n=${summary.n}`;
  return `p${p} ${formatMs(value)} ms (${suffix})`;
}

/** Builds a Timings value from samples measured elsewhere (e.g. by the capture API). */
export function timingsFromSamples(warmupNs: readonly number[], samplesNs: readonly number[], eventLoop: EventLoopDelay | null = null): Timings {
  return { warmupNs: [...warmupNs], samplesNs: [...samplesNs], summary: summariseSamples(samplesNs), eventLoop };
}

/** Spread of the middle half of the samples (p75 - p25, nearest rank): what one p50 may move by chance. */
export function interquartileNs(samplesNs: readonly number[]): number {
  const sorted = [...samplesNs].sort((a, b) => a - b);
  return percentile(sorted, 75) - percentile(sorted, 25);
}

/**
 * What the instrument added to a counted window: the difference of the p50s (counted minus uninstrumented), per
 * driver call and per wire round trip, and the noise floor beside it (the larger interquartile range of the two).
 */
export function instrumentCost(counted: Timings, uninstrumented: Timings, calls: number | null, roundTrips: number | null): InstrumentCost {
  const diff = counted.summary.p50Ns - uninstrumented.summary.p50Ns;
  const noiseNs = Math.max(interquartileNs(counted.samplesNs), interquartileNs(uninstrumented.samplesNs));
  return {
    p50DifferenceNs: diff,
    perCallNs: calls !== null && calls > 0 ? Math.round(diff / calls) : null,
    perRoundTripNs: roundTrips !== null && roundTrips > 0 ? Math.round(diff / roundTrips) : null,
    noiseNs,
    withinNoise: Math.abs(diff) <= noiseNs,
  };
}

/** A per-unit cost for a table cell: `-` when unknown, `~0` with the noise per unit when the difference is within noise. */
export function formatCostUs(cost: InstrumentCost | null | undefined, per: 'perCallNs' | 'perRoundTripNs', units: number | null): string {
  const value = cost?.[per];
  if (value == null) return '-';
  if (cost!.withinNoise && cost!.noiseNs !== undefined && units) return `~0 (±${(cost!.noiseNs / units / 1000).toFixed(1)})`;
  return (value / 1000).toFixed(1);
}
