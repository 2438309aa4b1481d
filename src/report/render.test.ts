import { BenchJsonSchema, benchSeriesName, toBenchJson } from './bench-json';
import { ASSERT, batchCell, fixtureReport, sqliteCell, timings } from './report.fixture';
import { renderMarkdown, renderReconciliation } from './markdown';
import { markFailed, renderOutput } from './output';
import { buildReport } from './output';
import { makeCell } from './schema';
import type { Report } from './schema';
import { renderTable, shortVersion } from './table';

const ROWS = [100, 500, 1000, 2500, 5000, 10000];

function curveReport(): Report {
  const cells = ROWS.flatMap((n) => [sqliteCell(n), sqliteCell(n, { strategy: 'better-sqlite3.multirow', timings: timings([1, 2, 3, 4, 5]) })]);
  cells.push(sqliteCell(5000, { hot: true }));
  cells.push(batchCell(5000));
  return fixtureReport(cells);
}

describe('terminal table', () => {
  it('shows every cell on one aligned line with the columns a person looks for', () => {
    const lines = renderTable(curveReport()).split('\n');
    expect(lines[0]).toMatch(
      /^backend +server +driver +strategy +rows +driver calls +wire cmds +round trips +server stmts +server rows +verdict +p50 ms \(n\) +read back stmts\/examined\/scans$/,
    );
    const batch = lines.find((l) => l.includes('mariadb.batch'))!;
    expect(batch).toMatch(/mariadb@10\.11 +10\.11\.14 +mariadb@3\.5\.4 +mariadb\.batch +5000 +1 +2 +2 +1 +5000 +assert +12\.000000 \(5\) +-$/);
    expect(lines.some((l) => / 5000 hot /.test(l))).toBe(true);
    // Aligned: the verdict column starts at the same offset on every row.
    const col = lines[0]!.indexOf('verdict');
    expect(lines.slice(2).every((l) => /^(assert|report|incomplete)/.test(l.slice(col)))).toBe(true);
  });

  it('says loudly when the run failed or a cell is incomplete', () => {
    const incomplete = sqliteCell(100, { verdict: { ...ASSERT, kind: 'incomplete', reason: 'probe failed' } });
    const report = buildReport(markFailed(fixtureReport([incomplete]), new Error('postgres: connection refused')));
    const text = renderTable(report);
    expect(text).toContain(`INCOMPLETE ${incomplete.key}: probe failed`);
    expect(text).toContain('RUN FAILED: postgres: connection refused');
  });
});

describe('report.md', () => {
  it('has the cells table, a mermaid chart per backend and driver, timings, environment', () => {
    const md = renderMarkdown(curveReport());
    expect(md).toContain(
      '| backend | server | driver | strategy | rows | driver calls | wire cmds | round trips | server stmts | server rows | verdict | p50 ms (n) |',
    );
    expect(md).toContain('```mermaid');
    expect(md).toContain('xychart-beta');
    expect(md).toContain('x-axis "rows" [100, 500, 1000, 2500, 5000, 10000]');
    expect(md).toMatch(/blue: `better-sqlite3\.multirow` · orange: `better-sqlite3\.run-per-row`/);
    // One point per row count, none invented; the hot repeat is not on the curve.
    expect(md.match(/^ {2}line \[/gm)).toHaveLength(2);
    expect(md).toContain('| Node | v20.20.2 |');
    expect(md).toContain('(= max)');
    expect(md).not.toContain('[!CAUTION]');
  });

  it('puts a failure first, where nobody can miss it', () => {
    const report = buildReport(markFailed(fixtureReport([sqliteCell(100)]), new Error('mariadb did not start')));
    const md = renderMarkdown(report);
    expect(md.indexOf('[!CAUTION]')).toBeGreaterThan(0);
    expect(md.indexOf('[!CAUTION]')).toBeLessThan(md.indexOf('## Cells'));
    expect(md).toContain('**This run failed.** mariadb did not start');
    expect(md).toContain('Status: **FAILED**');
  });

  it('escapes table-breaking characters', () => {
    const odd = sqliteCell(100, { verdict: { ...ASSERT, reason: 'a | b' } });
    expect(renderReconciliation(fixtureReport([odd]))).toContain('a \\| b');
  });

  it('opens with the headline and its count chart, and links the reconciliation instead of inlining it', () => {
    const text = renderMarkdown(curveReport());
    const headlineAt = text.indexOf('## Headline');
    expect(headlineAt).toBeGreaterThan(0);
    expect(headlineAt).toBeLessThan(text.indexOf('## Cells'));
    expect(text).toContain('### mariadb@10.11 (10.11.14), 5000 rows');
    expect(text).toContain('](counts-mariadb-10.11-10.11.14.svg)');
    expect(text).toContain('[reconciliation.md](reconciliation.md)');
    expect(text).not.toContain('<details>');
    expect(renderReconciliation(curveReport())).toContain('<details>');
  });
});

describe('bench.json', () => {
  it('has separate timing and count series whose names carry backend, server version, strategy and rows', () => {
    const bench = BenchJsonSchema.parse(toBenchJson(curveReport()));
    const names = bench.map((b) => b.name);
    expect(names).toContain('mariadb@10.11.14 mariadb.batch 5000 rows p50');
    expect(names).toContain('mariadb@10.11.14 mariadb.batch 5000 rows server statements');
    expect(names).toContain('sqlite@3.50.4 better-sqlite3.run-per-row 5000 rows hot p50');
    const p50 = bench.find((b) => b.name === 'mariadb@10.11.14 mariadb.batch 5000 rows p50')!;
    expect(p50).toMatchObject({ unit: 'ms', value: 12 });
    expect(bench.find((b) => b.name === 'mariadb@10.11.14 mariadb.batch 5000 rows p95')!.extra).toBe('n=5 samples: p95 is the maximum');
    expect(bench.find((b) => b.name === 'mariadb@10.11.14 mariadb.batch 5000 rows wire round trips')).toMatchObject({ unit: 'count', value: 2 });
    expect(new Set(names).size).toBe(names.length);
  });

  it('keeps two releases of one driver in separate series', () => {
    const names = toBenchJson(fixtureReport([batchCell(5000), batchCell(5000, { driverVersion: '3.3.2' })])).map((b) => b.name);
    expect(names).toContain('mariadb@10.11.14 mariadb.batch 5000 rows (mariadb@3.3.2) p50');
    expect(names).toContain('mariadb@10.11.14 mariadb.batch 5000 rows (mariadb@3.5.4) p50');
    expect(new Set(names).size).toBe(names.length);
  });

  it('leaves out cells whose workload failed', () => {
    const failed = makeCell({ ...sqliteCell(100), error: { message: 'boom', phase: 'workload' } });
    expect(toBenchJson(fixtureReport([failed]))).toEqual([]);
    expect(benchSeriesName(failed)).toBe('sqlite@3.50.4 better-sqlite3.run-per-row 100 rows');
  });

  it('shortens server versions to their number', () => {
    expect(shortVersion('10.11.14-MariaDB-ubu2204')).toBe('10.11.14');
    expect(shortVersion('16.4 (Debian 16.4-1.pgdg120+2)')).toBe('16.4');
  });
});

describe('renderOutput', () => {
  it('renders every file with report.json last and no password anywhere', () => {
    const leaky = buildReport(markFailed(fixtureReport([sqliteCell(100)]), new Error('cannot reach mysql://root:hunter2@127.0.0.1:3307/db')));
    const files = renderOutput(leaky);
    expect(files.map((f) => f.name)).toEqual([
      'counts-sqlite-3.50-3.50.4.svg',
      'reconciliation.md',
      'report.html',
      'report.md',
      'bench.json',
      'events.json',
      'report.json',
    ]);
    for (const f of files) expect(f.content).not.toContain('hunter2');
    expect(files.at(-1)!.content).toContain('mysql://root:***@127.0.0.1:3307/db');
  });
});
