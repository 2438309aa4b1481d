// @waits 20: a Jest of its own over a plain JavaScript test file.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A plain JavaScript test under babel-jest (which moves lines) names the user's line where un-awaited work was made, in
 * `measure()` and `begin()` windows: positions mapped back through the transform's source map, as Jest's stacks are.
 */
const ROOT = path.join(__dirname, '..');

const TEST = `const { CaptureSession } = require('sqltally');

let session;
beforeAll(async () => {
  session = await CaptureSession.open({ backend: 'sqlite' });
});
afterAll(async () => {
  await session?.close();
});

test('measure', async () => {
  const tally = await session.measure(() => {
    setTimeout(() => {}, 20); // MEASURE
  });
  console.log('REASON ' + tally.verdict.reason);
});

test('begin', async () => {
  const w = await session.begin();
  setTimeout(() => {}, 20); // BEGIN
  const tally = await w.end();
  console.log('REASON ' + tally.verdict.reason);
});
`;

function lineOf(marker: string): number {
  return TEST.split('\n').findIndex((l) => l.includes(marker)) + 1;
}

it("names the user's own lines in a plain JavaScript file under babel-jest", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-js-sites-'));
  try {
    fs.writeFileSync(path.join(dir, 'sites.test.js'), TEST);
    const config = {
      rootDir: dir,
      testEnvironment: 'node',
      testMatch: ['<rootDir>/sites.test.js'],
      transform: { '^.+\\.ts$': path.join(ROOT, 'integration', 'esbuild-transform.js'), '^.+\\.js$': require.resolve('babel-jest') },
      moduleNameMapper: { '^sqltally$': path.join(ROOT, 'src', 'index.ts') },
      moduleDirectories: ['node_modules', path.join(ROOT, 'node_modules')],
    };
    const r = spawnSync(
      process.execPath,
      [path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), '--config', JSON.stringify(config), '--ci', '--colors=false'],
      {
        cwd: dir,
        encoding: 'utf8',
        env: { ...process.env, FORCE_COLOR: '0' },
        timeout: 120_000,
      },
    );
    const reasons = `${r.stdout}\n${r.stderr}`
      .split('\n')
      .filter((l) => l.includes('REASON '))
      .map((l) => l.trim());
    expect({ status: r.status, reasons: reasons.length }).toEqual({ status: 0, reasons: 2 });
    expect(reasons[0]).toContain(`a setTimeout(…, 20) timer created at sites.test.js:${lineOf('// MEASURE')}:`);
    expect(reasons[1]).toContain(`a setTimeout(…, 20) timer created at sites.test.js:${lineOf('// BEGIN')}:`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
