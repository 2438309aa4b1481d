import { monitorEventLoopDelay } from 'node:perf_hooks';
import { z } from 'zod';

// 1 ms is the finest interval Node accepts; a coarser one would hide a short synchronous insert entirely.
const EVENT_LOOP_RESOLUTION_MS = 1;
const NS_PER_MS = 1_000_000;

/**
 * Event-loop delay while the measured runs executed (`perf_hooks.monitorEventLoopDelay`), as the excess over the
 * timer's own interval: a synchronous driver shows its whole insert here. Null values: the timer never fired.
 */
export const EventLoopDelaySchema = z.object({
  resolutionNs: z.number().int().positive(),
  /** Timer ticks observed. */
  count: z.number().int().nonnegative(),
  maxNs: z.number().int().nonnegative().nullable(),
  /** The largest per-run p99: an upper bound of the p99 over every tick (histograms of runs cannot be merged). */
  p99Ns: z.number().int().nonnegative().nullable(),
});
export type EventLoopDelay = z.infer<typeof EventLoopDelaySchema>;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Records the event-loop delay around the measured runs only, one histogram per run (a re-enabled histogram records the
 * idle gap as one huge delay). `around` waits a tick on both sides, outside the timed part: the first tick only sets a
 * reference point, and a synchronous insert shows up in the tick after it.
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
   * Over all runs: the largest delay seen, and as p99 the largest per-run p99. Node cannot merge histograms, and the
   * largest per-run p99 bounds the p99 over all ticks from above, where an average of percentiles bounds nothing.
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
