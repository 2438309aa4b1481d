import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { command as mergeCommand } from '../cli/merge';
import { batchCell, fixtureEnvironment, fixtureReport, sqliteCell } from './report.fixture';
import { mergeReports } from './merge';
import { parseReportText, readReportFile, toJson } from './schema';
import type { Cell, Report } from './schema';

function job(name: string, cells: Cell[], over: Parameters<typeof fixtureReport>[1] = {}): Report {
  return fixtureReport(
    cells.map((c) => ({ ...c, environment: 'run' })),
    { environments: [fixtureEnvironment({ id: 'run', ci: { provider: 'github-actions', job: 'run', runId: '42', runner: name } })], ...over },
  );
}

describe('mergeReports', () => {
  it('combines CI jobs, keeping each environment apart under a unique id', () => {
    const a = job('runner-a', [sqliteCell(100), sqliteCell(1000)], {
      skipped: [{ backend: 'mariadb', reason: 'not requested in this job', environment: 'run' }],
    });
    const b = job('runner-b', [batchCell(5000)], { startedAt: '2026-01-02T02:00:00.000Z' });
    const merged = mergeReports([
      { label: 'sqlite/report.json', report: a },
      { label: 'mariadb/report.json', report: b },
    ]);
    expect(merged.status).toBe('ok');
    expect(merged.cells).toHaveLength(3);
    expect(merged.environments.map((e) => [e.id, e.ci?.runner])).toEqual([
      ['run', 'runner-a'],
      ['run#2', 'runner-b'],
    ]);
    expect(merged.cells.find((c) => c.backend === 'mariadb@10.11')!.environment).toBe('run#2');
    expect(merged.matrix.backends).toEqual(['mariadb', 'sqlite']);
    expect(merged.matrix.rows).toEqual([100, 1000, 5000]);
    expect(merged.backends.map((x) => x.id).sort()).toEqual(['mariadb@10.11', 'sqlite@3.50']);
    // A job that skipped mariadb does not make it missing when another job ran it.
    expect(merged.skipped).toEqual([]);
    expect(merged.startedAt).toBe('2026-01-02T02:00:00.000Z');
    expect(parseReportText(toJson(merged), 'merged')).toEqual(merged);
  });

  it('refuses the same cell from two sources', () => {
    expect(() =>
      mergeReports([
        { label: 'a.json', report: job('a', [sqliteCell(100)]) },
        { label: 'b.json', report: job('b', [sqliteCell(100)]) },
      ]),
    ).toThrow(`duplicate cell ${sqliteCell(100).key}: in a.json and in b.json`);
  });

  it('refuses sources measured with different repeat counts', () => {
    const a = job('a', [sqliteCell(100)]);
    const b = job('b', [batchCell(5000)], { matrix: { ...job('b', [batchCell(5000)]).matrix, repeats: 10 } });
    expect(() =>
      mergeReports([
        { label: 'a.json', report: a },
        { label: 'b.json', report: b },
      ]),
    ).toThrow(/different repeats: a\.json has 5, b\.json has 10/);
  });

  it('keeps a failed job visible: the merged report is failed and names the source', () => {
    const a = job('a', [sqliteCell(100)]);
    const b = job('b', [], { status: 'failed', failure: { message: 'mariadb did not start', phase: 'start', backend: 'mariadb' } });
    const merged = mergeReports([
      { label: 'a.json', report: a },
      { label: 'b.json', report: b },
    ]);
    expect(merged.status).toBe('failed');
    expect(merged.failure).toMatchObject({ message: 'b.json: mariadb did not start', phase: 'start', backend: 'mariadb' });
  });

  it('refuses nothing to merge', () => {
    expect(() => mergeReports([])).toThrow(/nothing to merge/);
  });
});

describe('sqltally merge (CLI)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqltally-merge-'));
    jest.spyOn(console, 'log').mockImplementation(() => undefined);
    jest.spyOn(console, 'error').mockImplementation(() => undefined);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    rmSync(dir, { recursive: true, force: true });
  });

  function artifact(name: string, report: Report | string): string {
    const d = join(dir, 'artifacts', name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'report.json'), typeof report === 'string' ? report : toJson(report));
    return d;
  }

  it('writes report.json, report.md and bench.json from job directories', async () => {
    const a = artifact('sqlite', job('a', [sqliteCell(100), sqliteCell(1000)]));
    const b = artifact('mariadb', job('b', [batchCell(5000)]));
    const out = join(dir, 'merged');
    expect(await mergeCommand.run(['--out', out, a, join(b, 'report.json')])).toBe(0);
    expect(readReportFile(out).cells).toHaveLength(3);
    expect(readFileSync(join(out, 'report.md'), 'utf8')).toContain('# sqltally report');
    expect(JSON.parse(readFileSync(join(out, 'bench.json'), 'utf8')).length).toBeGreaterThan(0);
    // An existing output directory is not overwritten without --force.
    expect(await mergeCommand.run(['--out', out, a, b])).toBe(2);
    expect(await mergeCommand.run(['--out', out, '--force', a, b])).toBe(0);
  });

  it('exits 2 and writes nothing for a report of another schema', async () => {
    const old = JSON.parse(toJson(job('a', [sqliteCell(100)])));
    old.schemaVersion = 3;
    const a = artifact('old', JSON.stringify(old));
    const b = artifact('mariadb', job('b', [batchCell(5000)]));
    const out = join(dir, 'merged');
    expect(await mergeCommand.run(['--out', out, a, b])).toBe(2);
    expect(existsSync(out)).toBe(false);
    expect((console.error as jest.Mock).mock.calls.join('\n')).toContain('written by sqltally schema 3, newer than this one (2)');
  });

  it('exits 2 on missing arguments', async () => {
    expect(await mergeCommand.run(['--out', join(dir, 'x')])).toBe(2);
    expect(await mergeCommand.run([join(dir, 'x')])).toBe(2);
  });
});
