import { baselineFromReport } from './gate';
import { batchCell, fixtureReport, sqliteCell, timings } from './report.fixture';
import { UnreadableFileError, cellKey, countsOf, formatIssuePath, makeCell, parseBaselineText, parseReportText, toJson } from './schema';

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected a throw');
}

describe('report schema', () => {
  it('round-trips a report through JSON unchanged', () => {
    const report = fixtureReport([sqliteCell(100), sqliteCell(1000), batchCell(5000)]);
    expect(parseReportText(toJson(report), 'report.json')).toEqual(report);
  });

  it('round-trips a baseline through JSON unchanged', () => {
    const baseline = baselineFromReport(fixtureReport([batchCell()]), new Date('2026-01-01T00:00:00Z'));
    expect(parseBaselineText(toJson(baseline), 'baseline.json')).toEqual(baseline);
  });

  it('derives a stable, readable key from the identity fields only', () => {
    const cell = batchCell(5000);
    expect(cell.key).toBe('mariadb@10.11|10.11.14-MariaDB|mariadb@3.5.4|mariadb.batch|5000|cold');
    expect(cellKey({ ...cell, hot: true })).toBe('mariadb@10.11|10.11.14-MariaDB|mariadb@3.5.4|mariadb.batch|5000|hot');
  });

  it('names the file and the path of every problem in a bad report', () => {
    const raw = JSON.parse(toJson(fixtureReport([sqliteCell(100)])));
    raw.cells[0].rows = 'many';
    raw.cells[0].layers.driver.calls = -1;
    const msg = messageOf(() => parseReportText(JSON.stringify(raw), 'out/report.json'));
    expect(msg).toContain('out/report.json: cells[0].rows: expected number, received string');
    expect(msg).toContain('out/report.json: cells[0].layers.driver.calls:');
  });

  it('names the counter in a corrupt baseline', () => {
    const raw = JSON.parse(toJson(baselineFromReport(fixtureReport([sqliteCell(100), sqliteCell(200), batchCell(100), batchCell(5000)]))));
    raw.cells[3].counts.driver.calls = 'one';
    const msg = messageOf(() => parseBaselineText(JSON.stringify(raw), 'baseline.json'));
    expect(msg).toContain('baseline.json: cells[3].counts.driver.calls: expected number, received string');
  });

  it('says which schema wrote an older file and what to do', () => {
    const raw = JSON.parse(toJson(baselineFromReport(fixtureReport([batchCell()]))));
    raw.schemaVersion = 0;
    let caught: unknown;
    try {
      parseBaselineText(JSON.stringify(raw), 'baseline.json');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(UnreadableFileError);
    expect((caught as UnreadableFileError).problem).toBe('version');
    expect((caught as Error).message).toContain('baseline.json: written by sqltally schema 0; this is 2: regenerate with sqltally gate --update');
  });

  it('refuses text that is not JSON, and a report given as a baseline', () => {
    expect(messageOf(() => parseBaselineText('{"schemaVersion": 1, ', 'b.json'))).toMatch(/b\.json: not valid JSON/);
    const report = toJson(fixtureReport([batchCell()]));
    expect(messageOf(() => parseBaselineText(report, 'b.json'))).toContain('b.json: is a sqltally "report", not a baseline');
    expect(messageOf(() => parseBaselineText('[]', 'b.json'))).toContain('not a sqltally baseline');
    expect(messageOf(() => parseBaselineText('{}', 'b.json'))).toContain('no schemaVersion');
  });

  it('refuses a key that does not match the cell, and a duplicate key', () => {
    const raw = JSON.parse(toJson(fixtureReport([sqliteCell(100)])));
    raw.cells[0].key = 'sqlite@3.50|whatever';
    expect(messageOf(() => parseReportText(JSON.stringify(raw), 'r.json'))).toContain('r.json: cells[0].key: is "sqlite@3.50|whatever" but');
    const dup = JSON.parse(toJson(fixtureReport([sqliteCell(100)])));
    dup.cells.push(dup.cells[0]);
    expect(messageOf(() => parseReportText(JSON.stringify(dup), 'r.json'))).toContain('cells[1].key: duplicate cell key');
  });

  it('refuses a failed run without its failure, and a success that records one', () => {
    const raw = JSON.parse(toJson(fixtureReport([sqliteCell(100)])));
    raw.status = 'failed';
    expect(messageOf(() => parseReportText(JSON.stringify(raw), 'r.json'))).toContain('r.json: failure: is required when status is "failed"');
    raw.status = 'ok';
    raw.failure = { message: 'boom' };
    expect(messageOf(() => parseReportText(JSON.stringify(raw), 'r.json'))).toContain('r.json: status: is "ok" but a failure is recorded');
  });

  it('refuses percentiles that do not match the raw samples, and fewer than 5 samples', () => {
    const raw = JSON.parse(toJson(fixtureReport([sqliteCell(100)])));
    raw.cells[0].timings.summary.p50Ns = 1;
    expect(messageOf(() => parseReportText(JSON.stringify(raw), 'r.json'))).toContain('cells[0].timings.summary.p50Ns: does not match the samples');
    expect(() => makeCell({ ...sqliteCell(100), timings: { ...timings(), samplesNs: [1, 2, 3, 4] } })).toThrow(/samplesNs/);
  });

  it('formats issue paths like code', () => {
    expect(formatIssuePath(['cells', 3, 'counts', 'driver', 'calls'])).toBe('cells[3].counts.driver.calls');
    expect(formatIssuePath([])).toBe('(root)');
  });
});

describe('countsOf', () => {
  it('keeps counts only, flattened, without timings or non-deterministic numbers', () => {
    const counts = countsOf(batchCell(5000));
    expect(counts.driver).toEqual({
      calls: 1,
      'byKind.batch': 1,
      'byClass.insert': 1,
      parameterSets: 5000,
      bindValues: 30000,
      maxBindValuesPerCall: 30000,
      rowsAffected: 5000,
      errors: 0,
    });
    expect(counts.wire).toEqual({
      'commands.COM_STMT_PREPARE': 1,
      'commands.COM_STMT_BULK_EXECUTE': 1,
      commandsTotal: 2,
      roundTrips: 2,
      bytesClientToServer: 2000,
      connections: 1,
    });
    expect(counts.server).toMatchObject({ statements: 1, bulkExecutes: 1, rowsInserted: 5000 });
  });

  it('leaves out what a backend cannot measure instead of writing zero', () => {
    const counts = countsOf(sqliteCell(100));
    expect(counts.wire).toBeNull();
    expect(counts.server).toEqual({ rowsInserted: 100 });
  });
});
