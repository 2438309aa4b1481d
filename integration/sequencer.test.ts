import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The sequencer is plain JavaScript that Jest loads with Node's own require (integration/sequencer.js).

const WaitersFirst = require('./sequencer.js') as new (options: unknown) => {
  sort(tests: FakeTest[]): FakeTest[];
  _getCache(test: FakeTest): Record<string, [number, number]>;
};

interface FakeTest {
  path: string;
  duration?: number;
  context: { config: { cache: boolean }; hasteFS: { getSize(p: string): number } };
}

const FAIL = 0;
const SUCCESS = 1;

describe('the test sequencer', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-sequencer-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Files whose heads declare `waits` seconds (or nothing), each `size` bytes as Jest's haste map would say. */
  function order(files: { name: string; waits?: number; size?: number }[], cache: Record<string, [number, number]>): string[] {
    const sizes = new Map<string, number>();
    const tests: FakeTest[] = files.map((f) => {
      const file = path.join(dir, f.name);
      fs.writeFileSync(file, f.waits === undefined ? 'it("x", () => undefined);\n' : `// @waits ${f.waits}: why.\n`);
      sizes.set(file, f.size ?? 0);
      return { path: file, context: { config: { cache: true }, hasteFS: { getSize: (p) => sizes.get(p) ?? 0 } } };
    });
    const sequencer = new WaitersFirst({});
    const byPath = Object.fromEntries(Object.entries(cache).map(([name, entry]) => [path.join(dir, name), entry]));
    sequencer._getCache = () => byPath;
    return sequencer.sort(tests).map((t) => path.basename(t.path));
  }

  it('orders a fresh clone by the waits files declare, then the rest by size', () => {
    const files = [
      { name: 'big.ts', size: 900 },
      { name: 'short.ts', waits: 10 },
      { name: 'small.ts', size: 100 },
      { name: 'long.ts', waits: 60 },
    ];
    expect(order(files, {})).toEqual(['long.ts', 'short.ts', 'big.ts', 'small.ts']);
  });

  it('keeps the declared waits once some files have timings, and puts each file where its length says', () => {
    // Jest's own order runs every untimed file first, by size, so the small file that waits longest went after every
    // bigger untimed one; and every timed file after those, whatever its length.
    const files = [{ name: 'big-untimed.ts', size: 9_000 }, { name: 'frozen.ts', waits: 66, size: 100 }, { name: 'unit.ts' }, { name: 'timed-long.ts' }];
    const cache: Record<string, [number, number]> = { 'unit.ts': [SUCCESS, 2_000], 'timed-long.ts': [SUCCESS, 90_000] };
    expect(order(files, cache)).toEqual(['timed-long.ts', 'frozen.ts', 'unit.ts', 'big-untimed.ts']);
  });

  it('still runs the files that failed last time first', () => {
    const files = [{ name: 'frozen.ts', waits: 66 }, { name: 'failed.ts' }, { name: 'timed.ts' }];
    const cache: Record<string, [number, number]> = { 'failed.ts': [FAIL, 100], 'timed.ts': [SUCCESS, 5_000] };
    expect(order(files, cache)).toEqual(['failed.ts', 'frozen.ts', 'timed.ts']);
  });
});
