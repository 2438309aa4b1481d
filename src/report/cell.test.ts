import { TallySchema } from '../capture/tally';
import { cellFromTally, readBackFromTally } from './cell';
import { CellSchema, ReadBackSchema } from './schema';
import { readBackColumn } from './table';
import { ASSERT, MARIADB, batchCell, fixtureEnvironment, timings } from './report.fixture';

describe('cellFromTally', () => {
  const tally = TallySchema.parse({
    backend: MARIADB,
    driver: 'mariadb',
    layers: batchCell(5000).layers,
    verdict: ASSERT,
    workloadError: null,
    drivers: [{ name: 'mariadb', version: '3.5.4' }],
    driverAbsent: null,
    beyondWindow: [],
    lateCommits: null,
    ignored: null,
    durationNs: 1234,
  });

  it('places a capture window in the matrix with the driver version from the environment', () => {
    const cell = cellFromTally(tally, {
      strategy: 'mariadb.batch',
      rows: 5000,
      hot: false,
      environment: fixtureEnvironment(),
      verifiedRows: 5000,
      timings: timings(),
    });
    expect(cell).toEqual(batchCell(5000));
  });

  it('keeps the workload error apart from the counts', () => {
    const failed = { ...tally, workloadError: { message: 'Data too long for column c3', phase: 'workload', statement: null, causes: [] } };
    const cell = cellFromTally(failed, {
      strategy: 'mariadb.batch',
      rows: 5000,
      hot: true,
      environment: fixtureEnvironment(),
      driverVersion: '3.3.2',
      verifiedRows: null,
      timings: null,
    });
    expect(cell.error).toEqual({ message: 'Data too long for column c3', phase: 'workload' });
    expect(cell.key).toBe('mariadb@10.11|10.11.14-MariaDB|mariadb@3.3.2|mariadb.batch|5000|hot');
  });
});

describe('readBackFromTally', () => {
  const base = TallySchema.parse({
    backend: MARIADB,
    driver: 'mariadb',
    layers: batchCell(5000).layers,
    verdict: ASSERT,
    workloadError: null,
    drivers: [],
    driverAbsent: null,
    beyondWindow: [],
    lateCommits: null,
    ignored: null,
    durationNs: 1,
  });
  const withWork = (work: NonNullable<NonNullable<typeof base.layers.server>['work']>) => ({
    ...base,
    layers: { ...base.layers, server: { ...base.layers.server!, work } },
  });
  const work = {
    figures: { rowsExamined: 5000, fullScans: 0 },
    unknown: {},
    tables: null,
    statements: null,
    statementsUnknown: 'x',
    statementFigures: [],
    unindexedScans: [],
    scansUnknown: null,
    notes: [],
  };

  it('takes the statements, rows examined and full scans the server gave, and the verdict', () => {
    const r = readBackFromTally(withWork(work), 5000);
    expect(r).toEqual({
      rows: 5000,
      driverCalls: 1,
      serverStatements: 1,
      rowsExamined: 5000,
      fullScans: 0,
      unknown: {},
      verdict: 'assert',
      reason: ASSERT.reason,
    });
    expect(ReadBackSchema.parse(r)).toEqual(r);
    expect(readBackColumn({ readBack: r })).toBe('1 / 5000 / 0');
  });

  it('names why a figure is unknown, never a 0', () => {
    const r = readBackFromTally(withWork({ ...work, figures: {}, unknown: { rowsExamined: 'SQLite keeps its work counters per prepared statement' } }), 5000);
    expect(r.rowsExamined).toBeNull();
    expect(r.unknown).toEqual({ rowsExamined: 'SQLite keeps its work counters per prepared statement', fullScans: 'not read in this window' });
    expect(readBackColumn({ readBack: r })).toBe('1 / ? / ?');
    const none = readBackFromTally(base, 5000);
    expect(none.unknown.rowsExamined).toBe('this server layer has no server-work section');
    const noServer = readBackFromTally({ ...base, layers: { ...base.layers, server: null } }, 5000);
    expect(noServer.unknown).toMatchObject({ serverStatements: 'the server layer was not captured', rowsExamined: 'the server layer was not captured' });
  });

  it("a null with no reason does not parse; the read's own error is kept", () => {
    const r = readBackFromTally(withWork(work), 5000);
    expect(ReadBackSchema.safeParse({ ...r, rowsExamined: null }).error?.issues[0]).toMatchObject({
      path: ['rowsExamined'],
      message: 'is null with no reason in unknown',
    });
    const failed = readBackFromTally(
      { ...withWork(work), workloadError: { message: 'refusing to read t', phase: 'workload', statement: null, causes: [] } },
      null,
    );
    expect(failed).toMatchObject({ rows: null, error: 'workload: refusing to read t' });
    expect(ReadBackSchema.safeParse(failed).success).toBe(true);
    expect(readBackColumn({ readBack: failed })).toBe('failed (assert)');
  });

  it('goes into the cell, which still parses without it (reports written before it)', () => {
    const r = readBackFromTally(withWork(work), 5000);
    const cell = cellFromTally(base, {
      strategy: 'mariadb.batch',
      rows: 5000,
      hot: false,
      environment: fixtureEnvironment(),
      verifiedRows: 5000,
      timings: timings(),
      readBack: r,
    });
    expect(cell.readBack).toEqual(r);
    expect(CellSchema.safeParse(batchCell(5000)).success).toBe(true);
    expect(readBackColumn(batchCell(5000))).toBe('-');
  });
});
