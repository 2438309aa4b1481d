import { toBenchJson } from './bench-json';
import { headline } from './headline';
import { renderMarkdown } from './markdown';
import { batchCell, fixtureReport, perRowLayers, timings } from './report.fixture';
import { CellSchema, ReportSchema } from './schema';
import { instrumentCost } from './timings';

/** A per-row cell whose counted windows are slower than its uninstrumented runs, as through the proxy. */
function perRowCell(countedMs: number[], ownMs: number[] | null) {
  const counted = timings(countedMs);
  const own = ownMs ? timings(ownMs) : null;
  return batchCell(5000, {
    strategy: 'mariadb.batch-nobulk',
    layers: perRowLayers(5000),
    timings: counted,
    uninstrumented: own
      ? { timings: { ...own, warmupNs: [] }, instrumentCost: instrumentCost(counted, own, 5000, 5001) }
      : { timings: null, instrumentCost: null, error: 'the uninstrumented run failed: connection refused' },
  });
}

describe('uninstrumented timings', () => {
  it('cost: the p50 difference over the counted calls and round trips, null where there is no such count', () => {
    const counted = timings([150, 151, 152, 153, 154]);
    const own = timings([100, 101, 102, 103, 104]);
    const noise = { noiseNs: 2_000_000, withinNoise: false };
    expect(instrumentCost(counted, own, 5000, 5001)).toEqual({
      p50DifferenceNs: 50_000_000,
      perCallNs: 10_000,
      perRoundTripNs: Math.round(50_000_000 / 5001),
      ...noise,
    });
    expect(instrumentCost(counted, own, 0, null)).toEqual({ p50DifferenceNs: 50_000_000, perCallNs: null, perRoundTripNs: null, ...noise });
    // Noise can put the counted p50 below the uninstrumented one: kept as measured, never clamped.
    expect(instrumentCost(own, counted, 5000, 5001).p50DifferenceNs).toBe(-50_000_000);
  });

  it('a difference within the noise floor (the larger interquartile range) is shown as ~0 with the noise per unit, never as a negative cost', () => {
    const counted = timings([90, 97, 100, 104, 110]);
    const own = timings([95, 99, 103, 106, 112]);
    const cost = instrumentCost(counted, own, 1, 2);
    expect(cost).toMatchObject({ p50DifferenceNs: -3_000_000, noiseNs: 7_000_000, withinNoise: true });
    const report = fixtureReport([batchCell(5000, { timings: counted, uninstrumented: { timings: { ...own, warmupNs: [] }, instrumentCost: cost } })]);
    const md = renderMarkdown(report);
    expect(md).toContain('~0 (±3500.0)');
    expect(md).not.toContain('-3000.0');
  });

  it("the headline ranks by the strategy's own time and says which timing each p50 is", () => {
    // Counted, the per-row path looks 3x slower than batch; uninstrumented it is faster.
    const report = fixtureReport([batchCell(5000, { timings: timings([20, 20, 20, 20, 20]) }), perRowCell([60, 60, 60, 60, 60], [15, 15, 15, 15, 15])]);
    const [mariadb] = headline(report);
    expect(mariadb!.strategies.map((s) => [s.strategy, s.p50Ns, s.timing])).toEqual([
      ['mariadb.batch-nobulk', 15_000_000, 'uninstrumented'],
      ['mariadb.batch', 20_000_000, 'counted'],
    ]);
    expect(mariadb!.strategies[0]!.addedPerRoundTripNs).toBe(Math.round(45_000_000 / 5001));
    const md = renderMarkdown(report);
    expect(md).toContain('| mariadb.batch | mariadb@3.5.4 | 1 | 2 | 1 | 5000 | 20.000000 * |');
    expect(md).toContain("p50 is the strategy's own time: runs with counting off");
    expect(md).toContain('| uninstrumented p50 ms | instrument us/call | instrument us/round trip |');
  });

  it('a failed uninstrumented run leaves the counted timing in the headline and says why in the timings table', () => {
    const report = fixtureReport([perRowCell([60, 60, 60, 60, 60], null)]);
    expect(headline(report)[0]!.strategies[0]).toMatchObject({ p50Ns: 60_000_000, timing: 'counted', addedPerRoundTripNs: null });
    expect(renderMarkdown(report)).toContain('the uninstrumented run failed: connection refused');
  });

  it('bench.json keeps the counted series under their old names and adds the uninstrumented p50 as its own', () => {
    const withOwn = toBenchJson(fixtureReport([perRowCell([60, 60, 60, 60, 60], [15, 15, 15, 15, 15])]));
    const without = toBenchJson(
      fixtureReport([batchCell(5000, { strategy: 'mariadb.batch-nobulk', layers: perRowLayers(5000), timings: timings([60, 60, 60, 60, 60]) })]),
    );
    expect(withOwn.filter((e) => !e.name.endsWith('uninstrumented'))).toEqual(without);
    expect(withOwn.find((e) => e.name.endsWith('p50 uninstrumented'))).toMatchObject({
      name: 'mariadb@10.11.14 mariadb.batch-nobulk 5000 rows p50 uninstrumented',
      unit: 'ms',
      value: 15,
    });
  });

  it('reports written before it existed still read, and a damaged one is refused', () => {
    const old = JSON.parse(JSON.stringify(fixtureReport([batchCell(5000)])));
    expect(old.cells[0].uninstrumented).toBeUndefined();
    expect(ReportSchema.safeParse(old).success).toBe(true);
    const cell = JSON.parse(JSON.stringify(perRowCell([60, 60, 60, 60, 60], [15, 15, 15, 15, 15])));
    expect(CellSchema.safeParse(cell).success).toBe(true);
    cell.uninstrumented.timings.summary.p50Ns += 1;
    expect(CellSchema.safeParse(cell).success).toBe(false);
  });
});
