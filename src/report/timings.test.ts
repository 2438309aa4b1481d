import { describePercentile, formatMs, nearestRank, percentile, percentileIsMax, summariseSamples } from './timings';

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

  it("does not reorder the caller's samples", () => {
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
