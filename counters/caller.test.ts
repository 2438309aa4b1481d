import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureCaller, isLibraryFile, ownCodeOf } from './caller';
import { throughSqltally } from './caller.fixture';

/** The line this helper is called from, read the same way captureCaller reads lines. */
function lineHere(): number {
  const frame = new Error().stack!.split('\n')[2]!;
  return Number(/:(\d+):\d+\)?$/.exec(frame)![1]);
}

// A package under node_modules that calls back, as an ORM between the user's line and the driver does.
let fakePackage: { call<T>(fn: () => T): T; later<T>(fn: () => T): Promise<T> };
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'caller-test-'));
  const pkg = join(dir, 'node_modules', 'fake-orm');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(
    join(pkg, 'index.js'),
    'exports.call = (fn) => fn();\nexports.later = (fn) => new Promise((done) => setImmediate(() => done(fn())));\n',
  );
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  fakePackage = require(join(pkg, 'index.js'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('captureCaller', () => {
  it('names the calling line, relative to the working directory', () => {
    const [where, line] = [captureCaller(), lineHere()];
    expect(where).toMatch(new RegExp(`^counters/caller\\.test\\.ts:${line}:\\d+$`));
  });

  it('skips sqltally frames and node_modules frames to reach the user line', () => {
    const [viaOwn, ownLine] = [throughSqltally(() => captureCaller()), lineHere()];
    expect(viaOwn).toMatch(new RegExp(`^counters/caller\\.test\\.ts:${ownLine}:\\d+$`));
    const [viaPackage, packageLine] = [fakePackage.call(() => throughSqltally(() => captureCaller())), lineHere()];
    expect(viaPackage).toMatch(new RegExp(`^counters/caller\\.test\\.ts:${packageLine}:\\d+$`));
  });

  it('is null when no frame is the user\'s', async () => {
    // Called from a timer inside a package: only its frame and Node's own are on the stack.
    await expect(fakePackage.later(captureCaller)).resolves.toBeNull();
  });

  it('leaves Error.stackTraceLimit as it found it', () => {
    const before = Error.stackTraceLimit;
    captureCaller();
    expect(Error.stackTraceLimit).toBe(before);
  });
});

describe('sqltally\'s own code', () => {
  it('is the library folders of a source checkout, but not the test files in them', () => {
    const own = ownCodeOf('/repo/counters/caller.ts');
    expect(isLibraryFile('/repo/counters/driver/mysql2.ts', own)).toBe(true);
    expect(isLibraryFile('/repo/capture/capture.ts', own)).toBe(true);
    expect(isLibraryFile('/repo/index.ts', own)).toBe(true);
    expect(isLibraryFile('/repo/counters/driver/mysql2.test.ts', own)).toBe(false);
    expect(isLibraryFile('/repo/integration/capture.test.ts', own)).toBe(false);
    expect(isLibraryFile('/repo/bench/caller-capture.ts', own)).toBe(false);
    expect(isLibraryFile('/other/app/src/users.ts', own)).toBe(false);
  });

  it('is all of dist/ and bin/ when compiled, and anything under node_modules', () => {
    const own = ownCodeOf('/repo/dist/counters/caller.js');
    expect(isLibraryFile('/repo/dist/capture/capture.js', own)).toBe(true);
    expect(isLibraryFile('/repo/bin/sqltally.js', own)).toBe(true);
    expect(isLibraryFile('/repo/test/users.test.js', own)).toBe(false);
    const installed = ownCodeOf('/app/node_modules/sqltally/dist/counters/caller.js');
    expect(isLibraryFile('/app/node_modules/sqltally/dist/jest/matchers.js', installed)).toBe(true);
    expect(isLibraryFile('/app/node_modules/knex/lib/runner.js', installed)).toBe(true);
    expect(isLibraryFile('/app/src/users.ts', installed)).toBe(false);
  });
});
