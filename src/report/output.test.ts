import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqltallyError } from '../shared/errors';
import { fixtureReport, sqliteCell } from './report.fixture';
import { buildReport, failureOf, markFailed, writeReport } from './output';
import { readReportFile } from './schema';

describe('writeReport', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqltally-output-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes a failed run as failed, keeping the cells it had, and it reads back', async () => {
    const err = new SqltallyError('server went away', { backend: 'mariadb@10.11', phase: 'workload', statement: 'INSERT INTO t VALUES (?)' });
    const report = buildReport(markFailed(fixtureReport([sqliteCell(100)]), err));
    await writeReport(join(dir, 'out'), report);
    const back = readReportFile(join(dir, 'out'));
    expect(back.status).toBe('failed');
    expect(back.failure).toEqual({
      message: err.message,
      backend: 'mariadb@10.11',
      phase: 'workload',
      statement: 'INSERT INTO t VALUES (?)',
    });
    expect(back.cells).toHaveLength(1);
    expect(readFileSync(join(dir, 'out', 'report.md'), 'utf8')).toContain('**This run failed.**');
  });

  it('describes any thrown value as a failure', () => {
    expect(failureOf('plain string')).toEqual({ message: 'plain string' });
    expect(failureOf(new Error('x'))).toEqual({ message: 'x' });
  });

  it('refuses to build an invalid report', () => {
    expect(() => buildReport({ ...fixtureReport([sqliteCell(100)]), environments: [] })).toThrow(
      /report: environments: Too small: expected array to have >=1 items/,
    );
  });
});
