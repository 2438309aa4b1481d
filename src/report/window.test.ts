import { approvalBlockers, baselineFromReport, compareWithBaseline } from './gate';
import { renderMarkdown } from './markdown';
import { mergeReports } from './merge';
import { ASSERT, FIXTURE_TIME, MARIADB, fixtureEnvironment, fixtureReport, serverLayer, sqliteCell, wireCounts } from './report.fixture';
import { makeWindow, parseBaselineText, parseReportText, toJson } from './schema';
import type { CommandRun, Report, Window } from './schema';
import { renderWindows } from './table';

function window(name: string, statements: number, over: Partial<Window> = {}): Window {
  return makeWindow({
    backend: MARIADB.id,
    backendName: 'mariadb',
    serverVersion: MARIADB.serverVersion,
    flavour: 'mariadb',
    name,
    environment: 'local',
    source: 'control',
    layers: {
      driver: null,
      wire: wireCounts({ COM_QUERY: statements }, statements),
      server: serverLayer({ statements, inserts: statements, rowsInserted: statements }),
    },
    verdict: ASSERT,
    beyondWindow: [],
    durationNs: 1_000_000,
    ...over,
  });
}

const RUN: CommandRun = {
  mode: 'named',
  argv: ['pytest', '-q'],
  exitCode: 0,
  signal: null,
  stoppedBy: null,
  sqltallyExitCode: 0,
  exitReason: 'the command exited 0',
};

function execReport(windows: Window[], over: Partial<Report> = {}): Report {
  return fixtureReport([], {
    backends: [MARIADB],
    matrix: { backends: [MARIADB.id], strategies: [], rows: [], hotRows: [], warmups: 0, repeats: 0 },
    windows,
    command: RUN,
    ...over,
  });
}

describe('windows in a report (sqltally exec, proxy)', () => {
  it('round-trip through report.json, and a report of sqltally run without them reads as before', () => {
    const report = execReport([window('insert-1', 1), window('insert-10', 10)]);
    const back = parseReportText(toJson(report), 'report.json');
    expect(back.windows?.map((w) => w.key)).toEqual(['mariadb@10.11|10.11.14-MariaDB|window|insert-1', 'mariadb@10.11|10.11.14-MariaDB|window|insert-10']);
    const plain = fixtureReport([sqliteCell(100)]);
    expect(toJson(plain)).not.toContain('"windows"');
    expect(parseReportText(toJson(plain), 'report.json').windows).toBeUndefined();
  });

  it('refuse a window whose key does not match its fields, and two windows of one name', () => {
    const w = window('a', 1);
    expect(() => parseReportText(toJson(execReport([{ ...w, key: 'x' }])), 'r.json')).toThrow(/windows\[0\]\.key: is "x"/);
    expect(() => parseReportText(toJson(execReport([w, w])), 'r.json')).toThrow(/duplicate window key/);
  });

  it('keep the matrix rule for cells: a matrix of strategies still needs its repeats', () => {
    const bad = { ...fixtureReport([sqliteCell(100)]), matrix: { backends: ['sqlite'], strategies: ['x'], rows: [100], hotRows: [], warmups: 0, repeats: 0 } };
    expect(() => parseReportText(toJson(bad), 'r.json')).toThrow(/matrix\.repeats: is 0/);
  });

  it('are rendered as a table with each verdict, and in report.md with the command', () => {
    const report = execReport([
      window('insert-1', 1),
      window('stuck', 0, { verdict: { ...ASSERT, kind: 'incomplete', reason: 'a request was still in flight' } }),
    ]);
    const text = renderWindows(report.windows!);
    expect(text).toMatch(/window\s+wire cmds/);
    expect(text).toContain('INCOMPLETE stuck: a request was still in flight');
    const md = renderMarkdown(report);
    expect(md).toContain('## Windows');
    expect(md).toContain('Command: `pytest -q` · exited 0');
    expect(md).toContain('_None: this report holds windows');
    expect(md).not.toContain('Wire:');
  });

  it('keep how the wire was read and why, in report.json and report.md', () => {
    const wire = { requested: 'auto', capture: 'proxy', reason: 'tcpdump not found on PATH (apt-get install tcpdump)' } as const;
    const report = execReport([window('insert-1', 1)], { command: { ...RUN, wire } });
    expect(parseReportText(toJson(report), 'report.json').command?.wire).toEqual(wire);
    expect(renderMarkdown(report)).toContain('Wire: proxy (--wire auto: tcpdump not found on PATH (apt-get install tcpdump))');
    const bad = JSON.parse(toJson(report)) as { command: { wire: { capture: string } } };
    bad.command.wire.capture = 'tap';
    expect(() => parseReportText(JSON.stringify(bad), 'report.json')).toThrow(/command\.wire\.capture/);
  });

  it('are not merged with reports of sqltally run', () => {
    expect(() => mergeReports([{ label: 'a', report: execReport([window('a', 1)]) }])).toThrow(/a report of sqltally exec or proxy/);
  });
});

describe('the gate on windows', () => {
  const approved = () => baselineFromReport(execReport([window('insert-1', 1), window('insert-10', 10)]), new Date(FIXTURE_TIME));

  it('approves one baseline entry per window, and reads a baseline without windows as before', () => {
    const baseline = approved();
    expect(baseline.windows?.map((w) => [w.name, w.counts.server?.['statements']])).toEqual([
      ['insert-1', 1],
      ['insert-10', 10],
    ]);
    const plain = baselineFromReport(fixtureReport([sqliteCell(100)]), new Date(FIXTURE_TIME));
    expect(toJson(plain)).not.toContain('"windows"');
    expect(parseBaselineText(toJson(plain), 'b.json').windows).toBeUndefined();
  });

  it('passes the same counts, fails a window whose statements went up, naming the window and counter', () => {
    expect(compareWithBaseline(execReport([window('insert-1', 1), window('insert-10', 10)]), approved()).pass).toBe(true);
    const result = compareWithBaseline(execReport([window('insert-1', 1), window('insert-10', 11)]), approved());
    expect(result.pass).toBe(false);
    const entry = result.cells.find((c) => c.key.endsWith('|window|insert-10'))!;
    expect(entry.failures).toContain('server.statements increased 10 -> 11 (+1)');
  });

  it('fails a window missing from the report, and an incomplete or failed one; a new window passes with a note', () => {
    const missing = compareWithBaseline(execReport([window('insert-1', 1)]), approved());
    expect(missing.pass).toBe(false);
    expect(missing.cells.find((c) => c.status === 'missing')?.failures[0]).toMatch(/^baseline window missing from the report/);

    const failed = window('insert-10', 10, { error: { message: 'the command exited with code 3', phase: 'workload' } });
    const errored = compareWithBaseline(execReport([window('insert-1', 1), failed]), approved());
    expect(errored.pass).toBe(false);
    expect(errored.totals.errored).toBe(1);
    expect(approvalBlockers(execReport([failed]))).toEqual([`window ${failed.key} failed: the command exited with code 3`]);

    const added = compareWithBaseline(execReport([window('insert-1', 1), window('insert-10', 10), window('insert-100', 100)]), approved());
    expect(added.pass).toBe(true);
    expect(added.totals.new).toBe(1);
  });

  it('pairs a window across a server upgrade by its name', () => {
    const upgraded = execReport([window('insert-1', 1, { serverVersion: '10.11.15-MariaDB' }), window('insert-10', 10, { serverVersion: '10.11.15-MariaDB' })]);
    const result = compareWithBaseline(upgraded, approved());
    expect(result.pass).toBe(true);
    expect(result.environmentChanges).toContain('server mariadb@10.11 10.11.14-MariaDB -> 10.11.15-MariaDB');
  });

  it('checks each window against its environment', () => {
    expect(() => execReport([window('a', 1, { environment: 'elsewhere' })], { environments: [fixtureEnvironment()] })).toThrow(
      /windows\[0\]\.environment: "elsewhere" is not in environments/,
    );
  });
});
