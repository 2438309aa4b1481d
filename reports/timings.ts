import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SqltallyError } from '../containers/errors';
import type { EventLoopDelay, Timings, TimingSummary } from './schema';

/** Fewer measured runs than this give percentiles that mean nothing; the schema refuses them too. */
export const MIN_MEASURED_REPEATS = 5;

/** The percentiles a summary carries. */
export const PERCENTILES = [50, 95, 99] as const;
export type Percentile = (typeof PERCENTILES)[number];

// 1 ms is the finest interval Node accepts; a coarser one would hide a short synchronous insert entirely.
const EVENT_LOOP_RESOLUTION_MS = 1;
const NS_PER_MS = 1_000_000;

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

/** `p95 12.345678 ms (= max of 10)` or `p95 12.345678 ms (n=40)`: never a tail the samples cannot show. */
export function describePercentile(summary: TimingSummary, p: Percentile): string {
  const value = p === 50 ? summary.p50Ns : p === 95 ? summary.p95Ns : summary.p99Ns;
  const suffix = percentileIsMax(p, summary.n) && summary.n > 1 ? `= max of ${summary.n}` : `n=${summary.n}`;
  return `p${p} ${formatMs(value)} ms (${suffix})`;
}

/** What the runner does for one repetition; only `run` is timed. */
export interface MeasureRunsOptions {
  /** Runs before measuring, kept apart in `warmupNs`. */
  warmups: number;
  /** Measured runs; at least MIN_MEASURED_REPEATS. */
  repeats: number;
  /** Untimed preparation before each run (truncate the table, reset a counter window). */
  beforeEach?: (phase: 'warmup' | 'measured', index: number) => Promise<void> | void;
  /**
   * The insert path under test. When it returns a number, that is taken as the sample (integer ns) instead of
   * the time around the call: a capture window times the user's function alone, without the server probe.
   */
  run: (phase: 'warmup' | 'measured', index: number) => Promise<number | void> | number | void;
  /** Untimed clean-up after each run. */
  afterEach?: (phase: 'warmup' | 'measured', index: number) => Promise<void> | void;
  /** Skip the event-loop monitor (tests that must not wait on timers). Default true. */
  eventLoop?: boolean;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Records the event-loop delay around the measured runs only. Each run gets its own histogram: a histogram that
 * is disabled and enabled again records the idle gap in between as one huge delay (measured on Node 20: a 200 ms
 * pause between two runs showed up as a 229 ms "delay"). The timer needs one tick before the workload (its first
 * tick only sets a reference point) and one after (a synchronous insert shows up in the tick that follows it), so
 * `around` waits a little on both sides, outside the timed part.
 */
export class EventLoopDelayRecorder {
  readonly #runs: { count: number; maxNs: number; p99Ns: number }[] = [];

  async around<T>(work: () => Promise<T>): Promise<T> {
    const histogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
    histogram.enable();
    try {
      await sleep(EVENT_LOOP_RESOLUTION_MS + 1);
      const result = await work();
      await sleep(EVENT_LOOP_RESOLUTION_MS + 1);
      return result;
    } finally {
      histogram.disable();
      // The histogram records whole tick intervals, so the scheduled interval itself is subtracted.
      const excess = (v: number) => Math.max(0, Math.round(v) - EVENT_LOOP_RESOLUTION_MS * NS_PER_MS);
      if (histogram.count > 0) this.#runs.push({ count: histogram.count, maxNs: excess(histogram.max), p99Ns: excess(histogram.percentile(99)) });
    }
  }

  /**
   * Over all runs: the largest delay seen, and as p99 the largest per-run p99. Node cannot merge interval
   * histograms, and the largest per-run p99 is an upper bound of the p99 over all ticks (at least 99% of every
   * run's ticks are at or below it), where an average of percentiles would be no bound at all.
   */
  result(): EventLoopDelay {
    const resolutionNs = EVENT_LOOP_RESOLUTION_MS * NS_PER_MS;
    const count = this.#runs.reduce((sum, r) => sum + r.count, 0);
    if (this.#runs.length === 0) return { resolutionNs, count: 0, maxNs: null, p99Ns: null };
    return {
      resolutionNs,
      count,
      maxNs: Math.max(...this.#runs.map((r) => r.maxNs)),
      p99Ns: Math.max(...this.#runs.map((r) => r.p99Ns)),
    };
  }
}

/** Runs warm-ups, then the measured repeats, and returns raw samples (integer ns) with their summary. */
export async function measureRuns(options: MeasureRunsOptions): Promise<Timings> {
  const { warmups, repeats } = options;
  if (!Number.isInteger(warmups) || warmups < 0) {
    throw new SqltallyError(`warm-up runs must be a non-negative integer, got ${warmups}`, { phase: 'config' });
  }
  if (!Number.isInteger(repeats) || repeats < MIN_MEASURED_REPEATS) {
    throw new SqltallyError(`measured repeats must be an integer >= ${MIN_MEASURED_REPEATS}, got ${repeats}`, {
      phase: 'config',
      hint: `percentiles over fewer than ${MIN_MEASURED_REPEATS} samples mean nothing; use --repeats ${MIN_MEASURED_REPEATS} or more`,
    });
  }
  const warmupNs: number[] = [];
  const samplesNs: number[] = [];
  const loop = options.eventLoop === false ? null : new EventLoopDelayRecorder();

  const once = async (phase: 'warmup' | 'measured', index: number): Promise<number> => {
    await options.beforeEach?.(phase, index);
    const timed = async () => {
      const start = process.hrtime.bigint();
      const own = await options.run(phase, index);
      const around = Number(process.hrtime.bigint() - start);
      if (typeof own !== 'number') return around;
      if (!Number.isInteger(own) || own < 0) {
        throw new SqltallyError(`a run reported ${own} ns; expected a non-negative integer`, { phase: 'report' });
      }
      return own;
    };
    const ns = phase === 'measured' && loop ? await loop.around(timed) : await timed();
    await options.afterEach?.(phase, index);
    return ns;
  };

  for (let i = 0; i < warmups; i++) warmupNs.push(await once('warmup', i));
  for (let i = 0; i < repeats; i++) samplesNs.push(await once('measured', i));
  return { warmupNs, samplesNs, summary: summariseSamples(samplesNs), eventLoop: loop ? loop.result() : null };
}

/** Builds a Timings value from samples measured elsewhere (e.g. by the capture API). */
export function timingsFromSamples(warmupNs: readonly number[], samplesNs: readonly number[], eventLoop: EventLoopDelay | null = null): Timings {
  return { warmupNs: [...warmupNs], samplesNs: [...samplesNs], summary: summariseSamples(samplesNs), eventLoop };
}
