import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureCaller, isLibraryFile, ownCodeOf } from './caller';
import { capturerFor, throughSqltally } from './caller.fixture';

/** The line this helper is called from, read the same way captureCaller reads lines. */
function lineHere(): number {
  const frame = new Error().stack!.split('\n')[2]!;
  return Number(/:(\d+):\d+\)?$/.exec(frame)![1]);
}

// A package under node_modules that calls back, as an ORM between the user's line and the driver does.
let fakePackage: { call<T>(fn: () => T): T; later<T>(fn: () => T): Promise<T>; through<T>(n: number, fn: () => T): T };
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'caller-test-'));
  const pkg = join(dir, 'node_modules', 'fake-orm');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(
    join(pkg, 'index.js'),
    'exports.call = (fn) => fn();\nexports.later = (fn) => new Promise((done) => setImmediate(() => done(fn())));\n' +
      // n frames of the package between the caller and fn, as an ORM's query builder puts 20 to 30 there.
      'exports.through = (n, fn) => (n === 0 ? fn() : exports.through(n - 1, fn));\n',
  );

  fakePackage = require(join(pkg, 'index.js'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('captureCaller', () => {
  it('names the calling line, relative to the working directory', () => {
    const [where, line] = [captureCaller(), lineHere()];
    expect(where).toMatch(new RegExp(`^src/shared/caller\\.test\\.ts:${line}:\\d+$`));
  });

  it('skips sqltally frames and node_modules frames to reach the user line', () => {
    const [viaOwn, ownLine] = [throughSqltally(() => captureCaller()), lineHere()];
    expect(viaOwn).toMatch(new RegExp(`^src/shared/caller\\.test\\.ts:${ownLine}:\\d+$`));
    const [viaPackage, packageLine] = [fakePackage.call(() => throughSqltally(() => captureCaller())), lineHere()];
    expect(viaPackage).toMatch(new RegExp(`^src/shared/caller\\.test\\.ts:${packageLine}:\\d+$`));
  });

  it("is null when no frame is the user's", async () => {
    // Called from a timer inside a package: only its frame and Node's own are on the stack.
    await expect(fakePackage.later(captureCaller)).resolves.toBeNull();
  });

  describe('with a path named', () => {
    /** The frame limits of the stacks one capture took, in order (the last is the printing of a new position). */
    function limitsOf(capture: () => string | null): { caller: string | null; limits: number[] } {
      const limits: number[] = [];
      const original = Error.captureStackTrace;
      const spy = jest.spyOn(Error, 'captureStackTrace').mockImplementation((target, fn) => {
        limits.push(Error.stackTraceLimit);
        original(target, fn);
      });
      try {
        return { caller: capture(), limits };
      } finally {
        spy.mockRestore();
      }
    }
    // The user's frame is the arrow here; between it and captureCaller, sqltally's frame (and 30 of a package's).
    const shallow = (path: string): string | null => capturerFor(path)();
    const deep = (path?: string): string | null => fakePackage.through(30, capturerFor(path));

    it('takes first as many frames as reached the user last time, and more only when those miss', () => {
      const path = 'test-driver.shallow-then-deep';
      const first = limitsOf(() => shallow(path));
      expect(first.caller).toMatch(/^src\/shared\/caller\.test\.ts:\d+:\d+$/);
      // A new path looks 12 frames down, then prints the frames up to the user's: the second, after sqltally's.
      expect(first.limits).toEqual([12, 2]);
      const depth = 2;

      const again = limitsOf(() => shallow(path));
      expect(again).toEqual({ caller: first.caller, limits: [depth] });

      // 30 package frames deeper: the remembered depth misses, the deep look finds it, and its depth is kept.
      const deeper = limitsOf(() => deep(path));
      expect(deeper.caller).toMatch(/^src\/shared\/caller\.test\.ts:\d+:\d+$/);
      expect(deeper.caller).not.toBe(first.caller);
      const deepDepth = deeper.limits.at(-1)!;
      expect(deeper.limits).toEqual([depth, 60, deepDepth]);
      expect(deepDepth).toBeGreaterThan(31);
      expect(limitsOf(() => deep(path)).limits).toEqual([deepDepth]);
      // And the shallow call is found within those frames: a depth is never lowered, so a path that varies settles.
      expect(limitsOf(() => shallow(path))).toEqual({ caller: first.caller, limits: [deepDepth] });
    });

    it('keeps each path to itself, and a capture with no path looks 12 frames down every time', () => {
      deep('test-driver.deep-only');
      expect(limitsOf(() => deep('test-driver.deep-only')).limits).toHaveLength(1);
      expect(limitsOf(() => shallow('test-driver.other')).limits[0]).toBe(12);
      // Without a path every capture pays for 12 frames and then the deep look (its position is printed only once).
      for (let i = 0; i < 2; i++) expect(limitsOf(() => deep()).limits.slice(0, 2)).toEqual([12, 60]);
    });
  });

  it('leaves Error.stackTraceLimit as it found it', () => {
    const before = Error.stackTraceLimit;
    captureCaller();
    expect(Error.stackTraceLimit).toBe(before);
  });
});

describe("sqltally's own code", () => {
  it('is the library folders of a source checkout, but not the test files in them', () => {
    const own = ownCodeOf('/repo/src/shared/caller.ts');
    expect(isLibraryFile('/repo/src/driver/mysql2.ts', own)).toBe(true);
    expect(isLibraryFile('/repo/src/capture/capture.ts', own)).toBe(true);
    expect(isLibraryFile('/repo/src/index.ts', own)).toBe(true);
    expect(isLibraryFile('/repo/bin/sqltally.js', own)).toBe(true);
    expect(isLibraryFile('/repo/src/driver/mysql2.test.ts', own)).toBe(false);
    expect(isLibraryFile('/repo/integration/capture.test.ts', own)).toBe(false);
    expect(isLibraryFile('/repo/bench/caller-capture.ts', own)).toBe(false);
    expect(isLibraryFile('/other/app/src/users.ts', own)).toBe(false);
  });

  it('is all of dist/ and bin/ when compiled, and anything under node_modules', () => {
    const own = ownCodeOf('/repo/dist/shared/caller.js');
    expect(isLibraryFile('/repo/dist/capture/capture.js', own)).toBe(true);
    expect(isLibraryFile('/repo/bin/sqltally.js', own)).toBe(true);
    expect(isLibraryFile('/repo/test/users.test.js', own)).toBe(false);
    const installed = ownCodeOf('/app/node_modules/sqltally/dist/shared/caller.js');
    expect(isLibraryFile('/app/node_modules/sqltally/dist/jest/matchers.js', installed)).toBe(true);
    expect(isLibraryFile('/app/node_modules/knex/lib/runner.js', installed)).toBe(true);
    expect(isLibraryFile('/app/src/users.ts', installed)).toBe(false);
  });
});
