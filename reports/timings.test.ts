import { SqltallyError } from '../containers/errors';
import {
  EventLoopDelayRecorder,
  describePercentile,
  formatMs,
  measureRuns,
  nearestRank,
  percentile,
  percentileIsMax,
  summariseSamples,
} from './timings';

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe('nearest-rank percentiles', () => {
  it('uses rank ceil(p/100 * n) over sorted samples', () => {
    expect(nearestRank(50, 10)).toBe(5);
    expect(nearestRank(95, 20)).toBe(19);
    expect(nearestRank(99, 100)).toBe(99);
    expect(percentile(range(100), 50)).toBe(50);
    expect(percentile(range(100), 95)).toBe(95);
    expect(percentile([10, 20, 30, 40], 50)).toBe(20); // never interpolated (25)
  });

  it('with one sample, every percentile is that sample', () => {
    expect(summariseSamples([42])).toEqual({ n: 1, minNs: 42, p50Ns: 42, p95Ns: 42, p99Ns: 42, maxNs: 42 });
  });

  it('p95 of 10 samples is the maximum, and says so', () => {
    const samples = [9, 1, 8, 2, 7, 3, 6, 4, 5, 100];
    const s = summariseSamples(samples);
    expect(s.p95Ns).toBe(100);
    expect(s.p95Ns).toBe(s.maxNs);
    expect(percentileIsMax(95, 10)).toBe(true);
    expect(describePercentile(s, 95)).toBe('p95 0.000100 ms (= max of 10)');
    expect(s.p50Ns).toBe(5);
  });

  it('p95 stops being the maximum at 20 samples, p99 at 100', () => {
    expect(percentileIsMax(95, 19)).toBe(true);
    expect(percentileIsMax(95, 20)).toBe(false);
    expect(percentileIsMax(99, 99)).toBe(true);
    expect(percentileIsMax(99, 100)).toBe(false);
    expect(summariseSamples(range(20)).p95Ns).toBe(19);
  });

  it('does not reorder the caller\'s samples', () => {
    const samples = [3, 1, 2, 5, 4];
    summariseSamples(samples);
    expect(samples).toEqual([3, 1, 2, 5, 4]);
  });

  it('refuses to summarise nothing', () => {
    expect(() => summariseSamples([])).toThrow(RangeError);
  });
});

describe('formatMs', () => {
  it('prints integer ns as ms with six decimals, exactly', () => {
    expect(formatMs(0)).toBe('0.000000');
    expect(formatMs(1)).toBe('0.000001');
    expect(formatMs(12_345_678)).toBe('12.345678');
    expect(formatMs(9_007_199_254_740_993n)).toBe('9007199254.740993');
  });
});

describe('measureRuns', () => {
  it('keeps warm-ups apart from measured runs and keeps every raw sample', async () => {
    const calls: string[] = [];
    const t = await measureRuns({
      warmups: 2,
      repeats: 6,
      eventLoop: false,
      beforeEach: (phase, i) => void calls.push(`before ${phase} ${i}`),
      run: (phase, i) => void calls.push(`run ${phase} ${i}`),
    });
    expect(t.warmupNs).toHaveLength(2);
    expect(t.samplesNs).toHaveLength(6);
    expect(t.summary.n).toBe(6);
    expect(t.samplesNs.every((ns) => Number.isInteger(ns) && ns >= 0)).toBe(true);
    expect(calls.slice(0, 4)).toEqual(['before warmup 0', 'run warmup 0', 'before warmup 1', 'run warmup 1']);
    expect(calls.filter((c) => c.startsWith('run measured'))).toHaveLength(6);
    expect(t.eventLoop).toBeNull();
  });

  it('takes the sample a run reports itself (a capture window times only the user\'s function)', async () => {
    let i = 0;
    const t = await measureRuns({ warmups: 1, repeats: 5, eventLoop: false, run: () => 1000 * ++i });
    expect(t.warmupNs).toEqual([1000]);
    expect(t.samplesNs).toEqual([2000, 3000, 4000, 5000, 6000]);
    await expect(measureRuns({ warmups: 0, repeats: 5, eventLoop: false, run: () => 1.5 })).rejects.toThrow(/reported 1.5 ns/);
  });

  it('refuses fewer than 5 measured repeats before running anything', async () => {
    const run = jest.fn();
    await expect(measureRuns({ warmups: 0, repeats: 4, run })).rejects.toThrow(SqltallyError);
    await expect(measureRuns({ warmups: 0, repeats: 4, run })).rejects.toThrow(/repeats must be an integer >= 5, got 4/);
    await expect(measureRuns({ warmups: -1, repeats: 5, run })).rejects.toThrow(/warm-up/);
    expect(run).not.toHaveBeenCalled();
  });
});

describe('EventLoopDelayRecorder', () => {
  it('does not count the idle gap between two runs as a delay', async () => {
    const recorder = new EventLoopDelayRecorder();
    const GAP_MS = 300;
    await recorder.around(async () => undefined);
    await new Promise((resolve) => setTimeout(resolve, GAP_MS));
    await recorder.around(async () => undefined);
    const r = recorder.result();
    expect(r.count).toBeGreaterThan(0);
    // Nothing held the loop in either run; the gap between them must not show as one 300 ms "delay".
    expect(r.maxNs!).toBeLessThan(GAP_MS * 1_000_000);
  });

  it('sees a synchronous block in the tick after it', async () => {
    const recorder = new EventLoopDelayRecorder();
    const BLOCK_NS = 30_000_000n;
    await recorder.around(async () => {
      const start = process.hrtime.bigint();
      while (process.hrtime.bigint() - start < BLOCK_NS) {
        // hold the loop like a synchronous driver does
      }
    });
    const r = recorder.result();
    expect(r.count).toBeGreaterThan(0);
    // A lower bound set by the block itself, which a slower machine can only raise: not a wall-clock guess.
    expect(r.maxNs).not.toBeNull();
    expect(r.maxNs!).toBeGreaterThanOrEqual(Number(BLOCK_NS) - r.resolutionNs);
  });
});
