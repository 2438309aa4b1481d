import { TallySchema } from '../capture/tally';
import { cellFromTally } from './cell';
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
    const cell = cellFromTally(tally, { strategy: 'mariadb.batch', rows: 5000, hot: false, environment: fixtureEnvironment(), verifiedRows: 5000, timings: timings() });
    expect(cell).toEqual(batchCell(5000));
  });

  it('keeps the workload error apart from the counts', () => {
    const failed = { ...tally, workloadError: { message: 'Data too long for column c3', phase: 'workload', statement: null, causes: [] } };
    const cell = cellFromTally(failed, { strategy: 'mariadb.batch', rows: 5000, hot: true, environment: fixtureEnvironment(), driverVersion: '3.3.2', verifiedRows: null, timings: null });
    expect(cell.error).toEqual({ message: 'Data too long for column c3', phase: 'workload' });
    expect(cell.key).toBe('mariadb@10.11|10.11.14-MariaDB|mariadb@3.3.2|mariadb.batch|5000|hot');
  });
});
