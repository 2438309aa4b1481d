import { headline, headlineRows } from './headline';
import { batchCell, fixtureReport, perRowLayers, sqliteCell, timings } from './report.fixture';
import { chartFileName, countsChart } from './svg';

describe('headline', () => {
  const report = () =>
    fixtureReport([
      batchCell(5000),
      batchCell(1000),
      batchCell(5000, { strategy: 'mariadb.batch-nobulk', layers: perRowLayers(5000), timings: timings([50, 51, 52, 53, 54]) }),
      batchCell(1000, { strategy: 'mariadb.batch-nobulk', layers: perRowLayers(1000) }),
      batchCell(5000, { hot: true, timings: timings([1, 1, 1, 1, 1]) }),
      sqliteCell(100),
      sqliteCell(500, { strategy: 'better-sqlite3.multirow' }),
    ]);

  it('reads each backend at the largest row count all its strategies ran, hot cells left out, cheapest first', () => {
    const [mariadb, sqlite] = headline(report());
    expect(mariadb!.backend).toBe('mariadb@10.11');
    expect(mariadb!.rows).toBe(5000);
    expect(mariadb!.strategies.map((s) => [s.strategy, s.driverCalls, s.roundTrips, s.serverStatements, s.p50Ns])).toEqual([
      ['mariadb.batch', 1, 2, 1, 12_000_000],
      ['mariadb.batch-nobulk', 5000, 5001, 5000, 52_000_000],
    ]);
    expect(mariadb!.strategies[0]!.rowsPerSecond).toBe(Math.round(5000 / 0.012));
    // No row count shared by both strategies: the largest there is.
    expect(sqlite!.rows).toBe(500);
    expect(sqlite!.strategies.map((s) => s.strategy)).toEqual(['better-sqlite3.multirow']);
  });

  it('names the largest statement amplification in one sentence', () => {
    const [mariadb] = headline(report());
    expect(mariadb!.finding).toBe(
      'mariadb.batch-nobulk ran 5000 server statements (5000 driver calls) for 5000 rows where mariadb.batch ran 1; the fastest was mariadb.batch.',
    );
    const amplified = batchCell(5000, { strategy: 'mariadb.batch-fallback', layers: { ...perRowLayers(5000), driver: batchCell(5000).layers.driver } });
    const one = headline(fixtureReport([batchCell(5000), amplified]))[0]!;
    expect(one.finding).toBe(
      'mariadb.batch-fallback: 1 driver call became 5000 server statements for 5000 rows; mariadb.batch needed 1 statement; the fastest was mariadb.batch.',
    );
  });

  it('says when no strategy has both calls and statements, and gives no headline without cold cells', () => {
    const [sqlite] = headline(fixtureReport([sqliteCell(100)]));
    expect(sqlite!.finding).toBe(
      'every strategy made 100 driver calls for 100 rows (the server counts no statements here); the fastest was better-sqlite3.run-per-row.',
    );
    const two = headline(
      fixtureReport([
        sqliteCell(100),
        sqliteCell(100, { strategy: 'better-sqlite3.multirow', layers: { ...sqliteCell(100).layers, driver: batchCell(100).layers.driver } }),
      ]),
    )[0]!;
    expect(two.finding).toMatch(
      /^better-sqlite3\.run-per-row made 100 driver calls for 100 rows where better-sqlite3\.multirow made 1 \(the server counts no statements here\)/,
    );
    expect(headlineRows([batchCell(5000, { hot: true })])).toBeNull();
    expect(headline(fixtureReport([]))).toEqual([]);
  });
});

describe('count chart', () => {
  it('draws each strategy with its calls, statements and time, names in the file and escaped', () => {
    const h = headline(fixtureReport([batchCell(5000), batchCell(5000, { strategy: 'mariadb.<odd>&"name"', layers: perRowLayers(5000) })]))[0]!;
    const svg = countsChart(h);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).toContain('mariadb.&lt;odd&gt;&amp;&quot;name&quot;');
    expect(svg).not.toContain('<odd>');
    expect(svg).toContain('<title>mariadb.batch: 1 server statements</title>');
    expect(svg).toContain('<title>mariadb.&lt;odd&gt;&amp;&quot;name&quot;: 5000 server statements</title>');
    // Log axis: ticks 1, 10, ... up to the first power of ten at or above the largest count.
    expect(svg).toContain('>10k<');
    expect(chartFileName(h)).toBe('counts-mariadb-10.11-10.11.14.svg');
  });

  it('marks a missing figure with a dash, never a zero-length bar', () => {
    const cell = sqliteCell(100, { timings: null });
    const svg = countsChart(headline(fixtureReport([cell]))[0]!);
    expect(svg).toContain('fill="#999">-</text>');
  });
});
