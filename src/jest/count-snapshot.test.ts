// @waits 9: Jest projects spawned for each step of a snapshot's life.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

/**
 * The snapshot life cycle, on Jest's real snapshot machinery: a small project in a temporary directory whose
 * test builds fixture tallies and calls toMatchCountSnapshot, run by a child Jest. Each step is one Jest run.
 */

const REPO = join(__dirname, '..', '..');
const JEST = require.resolve('jest/bin/jest');

interface Run {
  status: number | null;
  output: string;
}

let dir: string;

function testFile(extraStatement: boolean): string {
  const from = (path: string): string => relative(dir, join(REPO, path)).split('\\').join('/');
  return `
import { sqltallyMatchers } from '${from('src/jest/matchers')}';
import { serverWorkFixture, shapeOf, tallyFixture, withShapes, withWork } from '${from('src/jest/tally.fixture')}';

expect.extend(sqltallyMatchers);

test('an insert window', () => {
  const shapes = [shapeOf('INSERT INTO t (a, b) VALUES (1, 2)', { calls: 2, parameterSets: 2, distinctParameterSets: 2 })];
  ${extraStatement ? "shapes.push(shapeOf('SELECT count(*) FROM t', { statementClass: 'select', rows: 1 }));" : ''}
  expect(withShapes(tallyFixture(), shapes)).toMatchCountSnapshot();
});

test('a window with server work', () => {
  const work = serverWorkFixture(${extraStatement ? '{ figures: { ...serverWorkFixture().figures, rowsExamined: 20002, lockTimeNs: 5 } }' : ''});
  expect(withWork(tallyFixture(), work)).toMatchCountSnapshot({ serverWork: true }, 'with server work');
});
`;
}

function jest(...flags: string[]): Run {
  const env: NodeJS.ProcessEnv = { ...process.env, FORCE_COLOR: '0' };
  // The child decides --ci from the flags below only, not from this machine's CI variable.
  delete env.CI;
  delete env.CONTINUOUS_INTEGRATION;
  const result = spawnSync(process.execPath, [JEST, '--config', join(dir, 'jest.config.json'), '--runInBand', '--watchman=false', ...flags], {
    cwd: dir,
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` };
}

const snapFile = (): string => join(dir, '__snapshots__', 'counts.test.ts.snap');

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'count-snapshot-'));
  writeFileSync(
    join(dir, 'jest.config.json'),
    JSON.stringify({
      rootDir: dir,
      testEnvironment: 'node',
      testMatch: ['<rootDir>/*.test.ts'],
      cacheDirectory: join(dir, '.jest-cache'),
      // The repository's own transform (esbuild, see integration/esbuild-transform.js): the matchers are what is tested here,
      // and ts-jest loaded the TypeScript compiler afresh in each of these runs (the examples project runs under it).
      transform: { '^.+\\.ts$': join(REPO, 'integration', 'esbuild-transform.js') },
    }),
  );
  writeFileSync(join(dir, 'counts.test.ts'), testFile(false));
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('toMatchCountSnapshot on Jest snapshots', () => {
  it('writes the snapshot on the first run, with the format line', () => {
    const run = jest('--ci=false');
    expect(run).toMatchObject({ status: 0 });
    expect(run.output).toMatch(/2 snapshots written/);
    const stored = readFileSync(snapFile(), 'utf8');
    expect(stored).toContain('exports[`an insert window 1`]');
    expect(stored).toContain('sqltally-count-snapshot v1');
    expect(stored).toContain('driver.calls: 2');
    expect(stored).toMatch(/ {2}[0-9a-f]{12} insert\/query calls=2 parameterSets=2: INSERT INTO t \(a, b\) VALUES \(\?, \?\)/);
    // Caller lines and versions stay out of the stored counts.
    expect(stored).not.toContain('app.test.ts');
    expect(stored).not.toContain('10.11');
    expect(stored).toContain('exports[`a window with server work: with server work 1`]');
    expect(stored).toContain('server.work.rowsExamined: 20001');
    expect(stored).toContain('server.work.seqRowsRead: unknown (MySQL and MariaDB keep no per-table scan counters)');
    expect(stored).toContain('server.work.lockTimeNs: left out (a time, not a count: it differs on every run)');
  });

  it('passes on the second run, under --ci too', () => {
    const run = jest('--ci');
    expect(run).toMatchObject({ status: 0 });
    expect(run.output).toMatch(/2 passed/);
  });

  it('fails with a line-by-line diff when a statement is added, and on a missing snapshot under --ci', () => {
    writeFileSync(join(dir, 'counts.test.ts'), testFile(true));
    writeFileSync(join(dir, 'fresh.test.ts'), readFileSync(join(dir, 'counts.test.ts'), 'utf8'));
    const run = jest('--ci');
    expect(run.status).toBe(1);
    expect(run.output).toContain('toMatchCountSnapshot: the counts differ from the snapshot');
    // One line per counter: the diff names the counters that moved, and nothing else.
    expect(run.output).toMatch(/- driver\.calls: 2\n\s*\+ driver\.calls: 3\n/);
    expect(run.output).toMatch(/- shapes: 1\n\s*\+ shapes: 2\n/);
    expect(run.output).toMatch(/\+ {3}[0-9a-f]{12} select\/query calls=1 parameterSets=1: SELECT count\(\*\) FROM t\n/);
    expect(run.output).toMatch(/- Snapshot {2}- 2\n\s*\+ Received {2}\+ 3/);
    // A server-work figure that moved is one line of the diff; the lock time, which differs on every run, is none.
    expect(run.output).toMatch(/- server\.work\.rowsExamined: 20001\n\s*\+ server\.work\.rowsExamined: 20002\n/);
    expect(run.output).not.toMatch(/[-+] server\.work\.lockTimeNs/);
    expect(run.output).toContain('toMatchCountSnapshot: no snapshot is stored for this test, and this run writes none (--ci, or CI set)');
    expect(existsSync(join(dir, '__snapshots__', 'fresh.test.ts.snap'))).toBe(false);
    expect(readFileSync(snapFile(), 'utf8')).toContain('driver.calls: 2');
  });

  it('updates the snapshot with -u, after which it passes', () => {
    rmSync(join(dir, 'fresh.test.ts'));
    const update = jest('--ci=false', '-u');
    expect(update).toMatchObject({ status: 0 });
    expect(update.output).toMatch(/2 snapshots updated/);
    const stored = readFileSync(snapFile(), 'utf8');
    expect(stored).toContain('driver.calls: 3');
    expect(stored).toContain('SELECT count(*) FROM t');
    expect(jest('--ci')).toMatchObject({ status: 0 });
  });

  it('refuses a snapshot of another format version by name, pointing at -u', () => {
    writeFileSync(snapFile(), readFileSync(snapFile(), 'utf8').replace('sqltally-count-snapshot v1', 'sqltally-count-snapshot v0'));
    const run = jest('--ci');
    expect(run.status).toBe(1);
    expect(run.output).toContain(
      'toMatchCountSnapshot: the stored snapshot was written as sqltally-count-snapshot v0; this sqltally reads and writes sqltally-count-snapshot v1',
    );
    expect(run.output).toContain('jest -u');
  });
});
