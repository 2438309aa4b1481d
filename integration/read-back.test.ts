// @waits 12: the main job at the read cap on every backend, one strategy each.
import { renderMarkdown, renderReconciliation } from '../src/report/markdown';
import type { Cell, ReadBack, Report } from '../src/report/schema';
import { ReportSchema } from '../src/report/schema';
import { runMatrix } from '../src/run/matrix';
import { BACKEND_NAMES, type BackendName } from '../src/backends/types';
import { READ_LIMIT } from '../src/workload/read';
import { integrationBackends } from './harness';

/**
 * The main job's read cap path: after a cell's inserts at READ_LIMIT rows, the table is read back in one capped
 * SELECT, in a window of its own, and the cell carries what the server did to answer it beside the statement counts.
 */
const selected = integrationBackends().filter((b) => !b.id.includes('@'));
const available = selected.filter((b) => b.available);

/** Per backend: the strategy that fills the table, and what the read back must show (figures exact, or why not). */
const EXPECTED: Record<BackendName, { strategy: string; readBack: Omit<ReadBack, 'reason' | 'unknown'> & { unknown: Record<string, RegExp> } }> = {
  sqlite: {
    strategy: 'better-sqlite3.multirow',
    readBack: {
      rows: READ_LIMIT,
      // prepare() and all().
      driverCalls: 2,
      serverStatements: null,
      rowsExamined: null,
      fullScans: null,
      verdict: 'assert',
      unknown: { serverStatements: /./, rowsExamined: /better-sqlite3 does not expose them/, fullScans: /better-sqlite3 does not expose them/ },
    },
  },
  // Reading the whole table in key order: MariaDB counts the statement as one that used no index and PostgreSQL one
  // sequential scan, where MySQL 9.7 reads through the primary key; all three examine each row once.
  mariadb: {
    strategy: 'mysql2.query-multirow',
    readBack: { rows: READ_LIMIT, driverCalls: 1, serverStatements: 1, rowsExamined: READ_LIMIT, fullScans: 1, verdict: 'assert', unknown: {} },
  },
  mysql: {
    strategy: 'mysql2.query-multirow',
    readBack: { rows: READ_LIMIT, driverCalls: 1, serverStatements: 1, rowsExamined: READ_LIMIT, fullScans: 0, verdict: 'assert', unknown: {} },
  },
  postgres: {
    strategy: 'pg.query-multirow',
    readBack: { rows: READ_LIMIT, driverCalls: 1, serverStatements: 1, rowsExamined: READ_LIMIT, fullScans: 1, verdict: 'assert', unknown: {} },
  },
};

describe('the main job reads back at the read cap', () => {
  let report: Report;
  beforeAll(async () => {
    if (available.length === 0) return;
    report = await runMatrix({
      backends: available.map((b) => b.id),
      strategies: [...new Set(available.map((b) => EXPECTED[b.backend].strategy))],
      rows: [READ_LIMIT, 100],
      hotRows: [],
      warmups: 0,
      repeats: 5,
    });
  }, 600_000);

  const cellOf = (name: BackendName, rows: number): Cell => {
    const c = report.cells.find((x) => x.backendName === name && x.strategy === EXPECTED[name].strategy && x.rows === rows && !x.hot);
    if (!c) throw new Error(`no ${name} cell at ${rows} rows: ${report.cells.map((x) => x.key).join(', ')}`);
    return c;
  };

  for (const name of BACKEND_NAMES) {
    const b = selected.find((s) => s.backend === name);
    const title = `${name}: the cell at ${READ_LIMIT} rows carries the read back's statements, rows examined and scans; the one at 100 rows none`;
    if (!b) it.skip(`${title} (skipped: not in SQLTALLY_BACKENDS)`, () => undefined);
    else if (!b.available) it.skip(`${title} (skipped: ${b.reason})`, () => undefined);
    else
      it(title, () => {
        const c = cellOf(name, READ_LIMIT);
        const { unknown, ...figures } = EXPECTED[name].readBack;
        const r = c.readBack;
        expect(r).toMatchObject({ ...figures, unknown: Object.fromEntries(Object.keys(unknown).map((k) => [k, expect.stringMatching(unknown[k]!)])) });
        expect(Object.keys(r!.unknown).sort()).toEqual(Object.keys(unknown).sort());
        expect(cellOf(name, 100).readBack).toBeUndefined();
        const fig = (n: number | null) => (n === null ? '?' : String(n));
        const column = `${fig(figures.serverStatements)} / ${fig(figures.rowsExamined)} / ${fig(figures.fullScans)}`;
        const md = renderMarkdown(report);
        expect(md).toContain('read back stmts/examined/scans');
        expect(md.split('\n').find((l) => l.includes(EXPECTED[name].strategy) && l.includes(`| ${READ_LIMIT} |`) && l.includes(c.backend))).toMatch(
          new RegExp(`\\| ${column.replace(/[?/]/g, '\\$&')} \\|$`),
        );
        for (const why of Object.values(r!.unknown)) expect(renderReconciliation(report)).toContain(why.slice(0, 40));
      });
  }

  it('writes a report the schema reads back', () => {
    if (available.length === 0) return;
    expect(ReportSchema.safeParse(JSON.parse(JSON.stringify(report))).success).toBe(true);
  });
});
