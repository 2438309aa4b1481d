import { ASSERT, fixtureEnvironment, fixtureReport, SQLITE, sqliteCell } from '../report/report.fixture';
import type { ReportInput } from '../report/output';
import { ReportSchema } from '../report/schema';
import type { Verdict } from '../verdict/types';
import { finishReport, summaryLine, verdictCounts } from './summary';

const INCOMPLETE: Verdict = { ...ASSERT, kind: 'incomplete', reason: 'the wire proxy lost a frame' };
const REPORT_ONLY: Verdict = { ...ASSERT, kind: 'report', reason: 'another client wrote during the window' };

/** A run's report input as runMatrix hands it over, before status is settled. */
function input(over: Partial<ReportInput> = {}): ReportInput {
  const { schemaVersion: _v, kind: _k, ...rest } = fixtureReport([sqliteCell(100)]);
  return { ...rest, ...over };
}

describe('summaryLine', () => {
  it('counts cells by verdict and says that incomplete ones fail the gate', () => {
    const cells = [sqliteCell(100), ...[200, 300, 400].map((rows) => sqliteCell(rows, { verdict: INCOMPLETE })), sqliteCell(500, { verdict: REPORT_ONLY })];
    const report = fixtureReport(cells);
    expect(verdictCounts(report.cells)).toEqual({ assert: 1, report: 1, incomplete: 3, errored: 0 });
    expect(summaryLine(report)).toBe('5 cell(s): 1 assert, 1 report, 3 incomplete; the 3 incomplete cell(s) fail sqltally gate');
  });

  it('11 of 12 incomplete, as in issue 13: the line says so plainly', () => {
    const cells = Array.from({ length: 12 }, (_, i) => sqliteCell(100 * (i + 1), i === 0 ? {} : { verdict: INCOMPLETE }));
    expect(summaryLine(fixtureReport(cells))).toBe('12 cell(s): 1 assert, 0 report, 11 incomplete; the 11 incomplete cell(s) fail sqltally gate');
  });

  it('names workload errors, skipped backends and a failed run', () => {
    const errored = sqliteCell(100, { verdict: INCOMPLETE, error: { message: 'boom', phase: 'workload' } });
    const report = fixtureReport([errored], {
      status: 'failed',
      failure: { message: 'boom', phase: 'workload' },
      skipped: [{ backend: 'mariadb', reason: 'no mariadbd', environment: 'local' }],
    });
    expect(summaryLine(report)).toBe('1 cell(s): 0 assert, 0 report, 1 incomplete; 1 with a workload error; 1 skipped (mariadb); run FAILED');
  });
});

describe('finishReport', () => {
  it('keeps an ok run with cells as it is', () => {
    expect(finishReport(input()).status).toBe('ok');
  });

  it('fails a run that measured nothing, saying why', () => {
    const report = finishReport(
      input({
        cells: [],
        backends: [],
        matrix: { ...input().matrix, backends: ['mariadb'] },
        skipped: [{ backend: 'mariadb', reason: 'SQLTALLY_MARIADB_URL not set\n  more', environment: 'local' }],
      }),
    );
    expect(report.status).toBe('failed');
    expect(report.failure).toEqual({
      message: 'nothing was measured: 0 cells, because every requested backend was skipped (mariadb: SQLTALLY_MARIADB_URL not set)',
      backend: 'mariadb',
      phase: 'provision',
    });
  });

  it('fails a run whose backends started but ran no strategy', () => {
    const report = finishReport(input({ cells: [] }));
    expect(report.failure?.message).toBe(`nothing was measured: 0 cells, because no strategy ran on the backends that started (${SQLITE.id})`);
  });

  it('turns a report that does not validate (two cells with one key) into a valid failed report, keeping one of each', () => {
    const cell = sqliteCell(100);
    const report = finishReport(input({ cells: [cell, cell, sqliteCell(200)] }));
    expect(ReportSchema.safeParse(report).success).toBe(true);
    expect(report.status).toBe('failed');
    expect(report.failure?.phase).toBe('report');
    expect(report.failure?.message).toContain('1 cell(s) with a repeated key were left out');
    expect(report.failure?.message).toContain(`duplicate cell key "${cell.key}"`);
    expect(report.cells.map((c) => c.rows)).toEqual([100, 200]);
  });

  it('keeps what was asked and where when even the cells cannot be kept', () => {
    const stray = sqliteCell(100, { environment: 'elsewhere' });
    const report = finishReport(input({ cells: [stray], environments: [fixtureEnvironment()] }));
    expect(report.status).toBe('failed');
    expect(report.cells).toEqual([]);
    expect(report.failure?.message).toContain('"elsewhere" is not in environments');
  });
});
