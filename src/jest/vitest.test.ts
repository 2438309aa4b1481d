// @waits 15: a Vitest project spawned and run.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

/**
 * The matchers under Vitest, run from Jest so one `npx jest` covers both: a small Vitest project, type-checked without
 * `@types/jest`, run twice (writing its count snapshot, then as CI with one statement more).
 */

const REPO = join(__dirname, '..', '..');
const VITEST = join(REPO, 'node_modules', 'vitest', 'vitest.mjs');
const TSC = require.resolve('typescript/bin/tsc');

let dir: string;

function from(path: string): string {
  return relative(dir, join(REPO, path)).split('\\').join('/');
}

function testFile(): string {
  return `
import { expect, Snapshots, test } from 'vitest';
import { captureCaller } from '${from('src/shared/caller')}';
import { installSqltallyVitestMatchers } from '${from('src/jest/vitest')}';
import { nPlusOneTally, serverWorkFixture, shapeOf, tallyFixture, withShapes, withWork } from '${from('src/jest/tally.fixture')}';

installSqltallyVitestMatchers(expect, Snapshots);

const threw = tallyFixture({ workloadError: { message: 'boom', phase: 'workload', statement: null, causes: [] } });

test('toHaveCounts and toHaveCountsAtMost', () => {
  expect(tallyFixture()).toHaveCounts({ driver: { calls: 2 }, wire: { roundTrips: 2 }, server: { statements: 2 } });
  expect(tallyFixture()).not.toHaveCounts({ driver: { calls: 3 } });
  expect(tallyFixture()).toHaveCountsAtMost({ driver: { calls: 2 } });
  expect(() => expect(tallyFixture()).toHaveCounts({ driver: { calls: 1 } })).toThrow(/driver.calls: expected 1, actual 2/);
});

test('toHaveVerdict', () => {
  expect(tallyFixture()).toHaveVerdict('assert');
  expect(tallyFixture()).not.toHaveVerdict('report');
});

test('toHaveNoRepeatedShapes fails an N+1 loop of 20', () => {
  expect(() => expect(nPlusOneTally(20)).toHaveNoRepeatedShapes()).toThrow(/N\\+1 \\(different parameters each time\\): 20 calls/);
  expect(nPlusOneTally(20)).not.toHaveNoRepeatedShapes();
  expect(nPlusOneTally(20)).toHaveNoRepeatedShapes({ threshold: 21 });
});

test('toWriteInBatches', () => {
  const loop = withShapes(tallyFixture(), [shapeOf('INSERT INTO t (a) VALUES (?)', { calls: 30, parameterSets: 30, rows: 30 })]);
  expect(() => expect(loop).toWriteInBatches()).toThrow(/30 INSERT calls of one row each/);
  expect(loop).not.toWriteInBatches();
});

test('error states fail with and without .not', () => {
  const both = (run: (negate: boolean) => void): void => {
    expect(() => run(false)).toThrow(/fails with and without .not/);
    expect(() => run(true)).toThrow(/fails with and without .not/);
  };
  const on = (value: unknown, negate: boolean) => (negate ? expect(value).not : expect(value));
  both((n) => on({}, n).toHaveCounts({ driver: { calls: 1 } }));
  both((n) => on(threw, n).toHaveCountsAtMost({ driver: { calls: 1 } }));
  both((n) => on(null, n).toHaveVerdict('assert'));
  both((n) => on(threw, n).toMatchCountSnapshot());
  both((n) => on(nPlusOneTally(), n).toHaveNoRepeatedShapes({ threshold: 1 }));
  both((n) => on(tallyFixture(), n).toHaveServerWork({ rowsExamined: 0 }));
  both((n) => on(tallyFixture(), n).toUseIndexes());
});

test('captureCaller names this file', () => {
  expect(captureCaller()).toMatch(/^sqltally\\.test\\.ts:\\d+:\\d+$/);
});

test('count snapshot', () => {
  const shapes = [shapeOf('INSERT INTO t (a, b) VALUES (1, 2)', { calls: 2, parameterSets: 2, distinctParameterSets: 2 })];
  if (process.env.SQLTALLY_EXTRA_STATEMENT) shapes.push(shapeOf('SELECT count(*) FROM t', { statementClass: 'select' }));
  expect(withShapes(tallyFixture(), shapes)).toMatchCountSnapshot();
});

test('count snapshot with server work', () => {
  const figures = { ...serverWorkFixture().figures, ...(process.env.SQLTALLY_EXTRA_STATEMENT ? { rowsExamined: 20002, lockTimeNs: 5 } : {}) };
  expect(withWork(tallyFixture(), serverWorkFixture({ figures }))).toMatchCountSnapshot({ serverWork: true });
  expect(() => expect(tallyFixture()).toMatchCountSnapshot({ serverWork: 1 } as never)).toThrow(/serverWork must be a boolean/);
});

test.runIf(process.env.SQLTALLY_FRESH_SNAPSHOT)('a snapshot never written', () => {
  expect(tallyFixture()).toMatchCountSnapshot();
});
`;
}

function run(command: string, args: string[], extraEnv: NodeJS.ProcessEnv): { status: number | null; output: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', ...extraEnv };
  for (const [key, value] of Object.entries(extraEnv)) if (value === undefined) delete env[key];
  const result = spawnSync(command, args, { cwd: dir, env, encoding: 'utf8', timeout: 150_000 });
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` };
}

function vitest(extraEnv: NodeJS.ProcessEnv): { status: number | null; output: string } {
  return run(process.execPath, [VITEST, 'run', '--root', dir, '--config', join(dir, 'vitest.config.mjs')], extraEnv);
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'vitest-matchers-'));
  // The project resolves 'vitest' and '@types/node' from the repository's packages; nothing is installed.
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'sqltally-vitest-fixture', private: true, type: 'module' }));
  writeFileSync(join(dir, 'sqltally.test.ts'), testFile());
  // Vite's cache would otherwise go under the (linked) node_modules, that is into the repository's packages.
  writeFileSync(
    join(dir, 'vitest.config.mjs'),
    `export default { cacheDir: ${JSON.stringify(join(dir, '.vite'))}, test: { include: ['sqltally.test.ts'], watch: false } };\n`,
  );
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        lib: ['ES2023', 'ESNext.Disposable'],
        module: 'ESNext',
        moduleResolution: 'bundler',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        esModuleInterop: true,
        // Vitest's types and Node's, and not Jest's.
        types: ['node'],
      },
      files: ['sqltally.test.ts'],
    }),
  );
});

afterAll(() => {
  if (!dir) return;
  // The link first, by itself, so that nothing could ever follow it into the repository's packages.
  if (existsSync(join(dir, 'node_modules'))) unlinkSync(join(dir, 'node_modules'));
  rmSync(dir, { recursive: true, force: true });
});

describe('the matchers under Vitest', () => {
  it("type-check against Vitest's types, without @types/jest", () => {
    const tsc = run(process.execPath, [TSC, '-p', join(dir, 'tsconfig.json')], {});
    // The output rides along so that a failure shows tsc's own words.
    expect(tsc.status === 0 ? tsc.status : tsc).toBe(0);
    // The check can fail: a matcher Vitest's Assertion does not know is an error.
    writeFileSync(join(dir, 'unknown.ts'), "import { expect } from 'vitest';\nexpect(1).toHaveNoSuchMatcher();\n");
    const typo = run(
      process.execPath,
      [TSC, '--noEmit', '--strict', '--module', 'ESNext', '--moduleResolution', 'bundler', '--types', 'node', '--skipLibCheck', join(dir, 'unknown.ts')],
      {},
    );
    rmSync(join(dir, 'unknown.ts'));
    expect(typo.status).not.toBe(0);
    expect(typo.output).toContain("Property 'toHaveNoSuchMatcher' does not exist");
  });

  it('pass and fail as under Jest, and write the count snapshot on the first run', () => {
    const first = vitest({ CI: undefined, CONTINUOUS_INTEGRATION: undefined });
    expect({ status: first.status, tail: first.output.slice(-2000) }).toEqual({ status: 0, tail: expect.stringMatching(/Tests\s+8 passed/) });
    const stored = readFileSync(join(dir, '__snapshots__', 'sqltally.test.ts.snap'), 'utf8');
    expect(stored).toContain('exports[`count snapshot 1`]');
    expect(stored).toContain('sqltally-count-snapshot v1');
    expect(stored).toContain('driver.calls: 2');
    expect(stored).toContain('exports[`count snapshot with server work 1`]');
    expect(stored).toContain('server.work.rowsExamined: 20001');
    expect(stored).toContain('server.work.tempBlocksWritten: unknown (not read in this window)');
  });

  it('fail the snapshot with a diff when a statement is added, and a missing one under CI', () => {
    const second = vitest({ CI: 'true', SQLTALLY_EXTRA_STATEMENT: '1', SQLTALLY_FRESH_SNAPSHOT: '1' });
    expect(second.status).toBe(1);
    expect(second.output).toContain('toMatchCountSnapshot: the counts differ from the snapshot');
    expect(second.output).toMatch(/- driver\.calls: 2\n\s*\+ driver\.calls: 3\n/);
    expect(second.output).toMatch(/\+ {3}[0-9a-f]{12} select\/query calls=1 parameterSets=1: SELECT count\(\*\) FROM t"?\n/);
    expect(second.output).toContain('toMatchCountSnapshot: no snapshot is stored for this test');
    expect(second.output).toMatch(/- server\.work\.rowsExamined: 20001\n\s*\+ server\.work\.rowsExamined: 20002\n/);
    expect(second.output).not.toMatch(/[-+] server\.work\.lockTimeNs/);
    expect(second.output).toMatch(/Tests\s+3 failed \| 6 passed/);
    expect(readFileSync(join(dir, '__snapshots__', 'sqltally.test.ts.snap'), 'utf8')).toContain('driver.calls: 2');
  });
});
