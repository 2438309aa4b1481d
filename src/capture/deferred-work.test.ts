import { mkdtempSync, readFile, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import timers from 'node:timers';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { DeferredWorkTracker } from './deferred-work';

/** Runs `fn` as a window's function does, then waits up to `waitMs` for what it left running. */
async function leftRunning(fn: () => unknown, waitMs = 300) {
  const tracker = new DeferredWorkTracker();
  tracker.open();
  try {
    await Promise.resolve()
      .then(() => tracker.run(fn))
      .catch(() => undefined);
    return await tracker.settle(waitMs);
  } finally {
    tracker.close();
  }
}

const HERE = /^src\/capture\/deferred-work\.test\.ts:\d+:\d+$/;

/** The line of this file that holds `marker` (once, beside the code it marks). */
function lineOf(marker: string): number {
  const lines = readFileSync(__filename, 'utf8').split('\n');
  return lines.findIndex((l) => l.includes(marker) && !l.includes('lineOf(')) + 1;
}

describe('DeferredWorkTracker', () => {
  it('awaited work leaves nothing behind', async () => {
    expect(await leftRunning(async () => void (await new Promise((r) => setTimeout(r, 5))))).toBeNull();
    expect(await leftRunning(() => 42)).toBeNull();
  });

  it.each([
    ['setTimeout(0)', () => void setTimeout(() => undefined, 0), 'Timeout', /^a setTimeout\(…, 0-1\) timer$/],
    ['setTimeout(50)', () => void setTimeout(() => undefined, 50), 'Timeout', /^a setTimeout\(…, 50\) timer$/],
    ['process.nextTick', () => process.nextTick(() => undefined), 'TickObject', /^a process\.nextTick callback$/],
    ['queueMicrotask', () => queueMicrotask(() => undefined), 'Microtask', /^a queueMicrotask callback$/],
    ['setImmediate', () => void setImmediate(() => undefined), 'Immediate', /^a setImmediate callback$/],
    ['an un-awaited async call', async () => void (async () => new Promise((r) => setTimeout(r, 10)))(), 'PROMISE', /^a promise$/],
  ])('%s started and not awaited: named with its line, settled within the wait', async (_name, fn, type, what) => {
    const left = await leftRunning(fn);
    expect(left?.items[0]).toEqual({ what: expect.stringMatching(what), type, site: expect.stringMatching(HERE), settled: true });
  });

  it('a file operation started and not awaited: seen in flight at the return, with no line (V8 does not see its making)', async () => {
    const left = await leftRunning(() => readFile(__filename, () => undefined));
    expect(left?.items).toEqual([{ what: 'a file operation', type: 'FSREQCALLBACK', site: null, settled: true }]);
  });

  it("a timer started in a file operation's callback (which V8's hooks cannot follow) is not taken as done", async () => {
    let timer: NodeJS.Timeout | undefined;
    const left = await leftRunning(() => readFile(__filename, () => void (timer = setTimeout(() => undefined, 5_000))), 300);
    clearTimeout(timer);
    expect(timer).toBeDefined();
    expect(left?.items).toEqual([
      { what: 'a file operation', type: 'FSREQCALLBACK', site: null, settled: true },
      { what: expect.stringMatching(/^1 timer\(s\) or immediate\(s\) made after the function returned/), type: 'Timeout', site: null, settled: false },
    ]);
  });

  it("a timer from an ES module's `import { setTimeout } from 'node:timers'` is seen (the binding follows the wrapper)", () => {
    const script = [
      "import { setTimeout } from 'node:timers';",
      `const { DeferredWorkTracker } = await import(${JSON.stringify(join(__dirname, 'deferred-work.ts'))});`,
      'const tracker = new DeferredWorkTracker();',
      'tracker.open();',
      'await Promise.resolve().then(() => tracker.run(() => void setTimeout(() => undefined, 5000)));',
      'const left = await tracker.settle(100);',
      'tracker.close();',
      'console.log(JSON.stringify(left?.items.map((i) => [i.what, i.settled]) ?? null));',
      'process.exit(0);',
    ].join('\n');
    const file = join(mkdtempSync(join(tmpdir(), 'sqltally-esm-')), 'window.mjs');
    writeFileSync(file, script);
    const run = spawnSync(process.execPath, ['--import', 'tsx', file], { encoding: 'utf8', timeout: 60_000 });
    rmSync(dirname(file), { recursive: true, force: true });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual([['a setTimeout(…, 5000) timer', false]]);
  });

  it('a timer the function cleared, and an immediate it cleared, leave nothing behind', async () => {
    expect(await leftRunning(() => clearTimeout(setTimeout(() => undefined, 50)))).toBeNull();
    expect(await leftRunning(() => clearImmediate(setImmediate(() => undefined)))).toBeNull();
  });

  it('a timer of an hour: still pending after the bounded wait, which ends', async () => {
    let timer: NodeJS.Timeout | undefined;
    const started = Date.now();
    const left = await leftRunning(() => void (timer = setTimeout(() => undefined, 3_600_000)), 100);
    clearTimeout(timer);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(left).toEqual({
      waitMs: 100,
      items: [{ what: 'a setTimeout(…, 3600000) timer', type: 'Timeout', site: expect.stringMatching(HERE), settled: false }],
    });
  });

  it('work that work started is followed: a timer whose callback starts another', async () => {
    const left = await leftRunning(() => void setTimeout(() => void setTimeout(() => undefined, 20), 10));
    expect(left?.items.map((i) => [i.what, i.settled])).toEqual([
      ['a setTimeout(…, 10) timer', true],
      ['a setTimeout(…, 20) timer', true],
    ]);
  });

  it('a function that throws after starting work: the work is still listed', async () => {
    const left = await leftRunning(async () => {
      setTimeout(() => undefined, 5);
      throw new Error('boom');
    });
    expect(left?.items.map((i) => i.type)).toEqual(['Timeout']);
  });

  it("work outside the function's async context is not its own", async () => {
    const tracker = new DeferredWorkTracker();
    tracker.open();
    const outside = setTimeout(() => undefined, 20);
    await Promise.resolve().then(() => tracker.run(async () => undefined));
    const left = await tracker.settle(50);
    tracker.close();
    clearTimeout(outside);
    expect(left).toBeNull();
  });

  it("a library's own timer (not called from the user's code directly) is not the user's work", async () => {
    // A Node stream's write queues its callback with process.nextTick from inside Node: housekeeping, not the user's.
    const { PassThrough } = await import('node:stream');
    const s = new PassThrough();
    s.resume();
    const left = await leftRunning(async () => void (await new Promise<void>((r) => s.write('x', () => r()))));
    expect(left).toBeNull();
  });
});

describe("a measured function's window wraps the scheduling APIs while it is open", () => {
  const apis = () => [globalThis.setTimeout, globalThis.setImmediate, globalThis.queueMicrotask, globalThis.clearTimeout, process.nextTick, timers.setTimeout];

  it('puts the originals back when the last of two windows closes, whichever closes first', () => {
    const before = apis();
    const a = new DeferredWorkTracker();
    const b = new DeferredWorkTracker();
    a.open();
    b.open();
    const during = apis();
    a.close();
    const afterFirst = apis();
    b.close();
    expect(during.map((f, i) => f === before[i])).toEqual(before.map(() => false));
    expect(afterFirst.map((f, i) => f === during[i])).toEqual(before.map(() => true));
    expect(apis().map((f, i) => f === before[i])).toEqual(before.map(() => true));
  });

  it('two windows open at once: each follows its own function only', async () => {
    const a = new DeferredWorkTracker();
    const b = new DeferredWorkTracker();
    a.open();
    b.open();
    try {
      await Promise.resolve().then(() => a.run(() => void setTimeout(() => undefined, 5)));
      await Promise.resolve().then(() => b.run(async () => undefined));
      const [left, right] = await Promise.all([a.settle(100), b.settle(100)]);
      expect(left?.items.map((i) => [i.what, i.settled])).toEqual([['a setTimeout(…, 5) timer', true]]);
      expect(right).toBeNull();
    } finally {
      b.close();
      a.close();
    }
  });

  it("node:timers' own functions, and util.promisify(setTimeout), are followed too", async () => {
    const left = await leftRunning(() => {
      timers.setTimeout(() => undefined, 5);
      void promisify(setTimeout)(5).then(() => undefined);
    });
    expect(left?.items.map((i) => [i.type, HERE.test(i.site ?? '')])).toEqual(
      expect.arrayContaining([
        ['Timeout', true],
        ['PROMISE', true],
      ]),
    );
  });

  it('an interval is pending until cleared', async () => {
    let interval: NodeJS.Timeout | undefined;
    try {
      const left = await leftRunning(() => void (interval = setInterval(() => undefined, 5)), 30);
      expect(left?.items).toEqual([{ what: 'a setInterval(…, 5) timer', type: 'Timeout', site: expect.stringMatching(HERE), settled: false }]);
    } finally {
      clearInterval(interval);
    }
    expect(await leftRunning(() => clearInterval(setInterval(() => undefined, 5)))).toBeNull();
  });

  describe('fake timers installed before the window', () => {
    // The clock and the other APIs stay real: only setTimeout and clearTimeout are Jest's.
    const REAL = ['Date', 'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval'] as const;
    beforeEach(() => jest.useFakeTimers({ doNotFake: [...REAL] }));
    afterEach(() => jest.useRealTimers());

    it("one the function set and did not run is pending after the wait, which ends on Node's own timer", async () => {
      const left = await leftRunning(() => void setTimeout(() => undefined, 50), 20);
      expect(left).toEqual({ waitMs: 20, items: [{ what: 'a setTimeout(…, 50) timer', type: 'Timeout', site: expect.stringMatching(HERE), settled: false }] });
    });

    it('one it cleared, or ran by advancing the clock itself, leaves nothing behind', async () => {
      expect(await leftRunning(() => clearTimeout(setTimeout(() => undefined, 50)))).toBeNull();
      expect(
        await leftRunning(() => {
          setTimeout(() => undefined, 50);
          jest.advanceTimersByTime(50);
        }),
      ).toBeNull();
    });
  });
});

describe('what following a promise costs', () => {
  it('an awaited call that settles in the run that made it needs no stack: none is captured', async () => {
    const capture = jest.spyOn(Error, 'captureStackTrace');
    const call = async (i: number) => i + 1;
    try {
      const left = await leftRunning(async () => {
        capture.mockClear();
        for (let i = 0; i < 100; i++) await call(i);
      });
      // 100 calls, each an async function's promise (settled as it returns) and the promise of its await.
      expect(capture.mock.calls.length).toBeLessThanOrEqual(2);
      expect(left).toBeNull();
    } finally {
      capture.mockRestore();
    }
  });

  it('a promise still pending when its run makes more work is named at the line that made it, not a later one', async () => {
    // A library's query: a promise of its own type that starts nothing until a later run (postgres.js's execute()).
    // Declared here, its constructor is the first frame of this file (the line marked "site: query").
    class Query extends Promise<void> {
      static override get [Symbol.species]() {
        return Promise;
      }
    }
    const tracker = new DeferredWorkTracker();
    tracker.open();
    const release: (() => void)[] = [];
    try {
      await Promise.resolve().then(() =>
        tracker.run(async () => {
          await new Promise((r) => setTimeout(r, 1));
          void new Promise<void>((r) => release.push(r)).then(() => undefined); // site: chained
          void new Query((r) => release.push(() => r()));
          void (async () => void (await new Promise<void>((r) => release.push(r))))(); // site: async
          setTimeout(() => undefined, 0);
        }),
      );
      const sites = new Set(tracker.unawaitedPromises().map((i) => i.site?.replace(/:\d+$/, '')));
      expect([...sites].sort()).toEqual(
        [lineOf('// site: chained'), lineOf('class Query extends'), lineOf('// site: async')].map((l) => `src/capture/deferred-work.test.ts:${l}`).sort(),
      );
    } finally {
      for (const r of release) r();
      tracker.close();
    }
  });

  it("a promise made by a .then callback, with nothing after it in that run, is still the user's work", async () => {
    const release: (() => void)[] = [];
    try {
      const left = await leftRunning(async () => {
        let inner: Promise<void> | undefined;
        void Promise.resolve().then(() => void (inner = new Promise<void>((r) => release.push(r)))); // site: then
        await new Promise((r) => setTimeout(r, 1));
        void inner?.then(() => undefined);
      }, 50);
      expect(left?.items.filter((i) => !i.settled).map((i) => i.site?.replace(/:\d+$/, ''))).toEqual([
        `src/capture/deferred-work.test.ts:${lineOf('// site: then')}`,
      ]);
    } finally {
      for (const r of release) r();
    }
  });

  it('an un-awaited chain still names the line that made it', async () => {
    const left = await leftRunning(async () => void new Promise((r) => setTimeout(r, 10)).then(() => undefined).then(() => undefined), 300);
    expect(left?.items.filter((i) => i.type === 'PROMISE').map((i) => i.site)).toEqual(expect.arrayContaining([expect.stringMatching(HERE)]));
  });

  it("unawaitedPromises: the user's promises pending and those that settled after the function returned, observed or not", async () => {
    const tracker = new DeferredWorkTracker();
    tracker.open();
    try {
      await Promise.resolve().then(() =>
        tracker.run(async () => {
          void new Promise((r) => setTimeout(r, 5));
          void new Promise(() => undefined);
        }),
      );
      await new Promise((r) => setTimeout(r, 30));
      const items = tracker.unawaitedPromises();
      expect(items.map((i) => [i.settled, i.site !== null && HERE.test(i.site)])).toEqual([
        [true, true],
        [false, true],
      ]);
    } finally {
      tracker.close();
    }
  });
});

describe("a begin() window (no function of its own: the caller's context)", () => {
  /** Opens an ambient window, runs `body` as a test body would, and ends it from inside the body. */
  async function window(body: (end: () => Promise<unknown>) => Promise<unknown>, waitMs = 300) {
    const tracker = new DeferredWorkTracker();
    tracker.open(true);
    const ended: { left: Awaited<ReturnType<DeferredWorkTracker['settle']>> } = { left: null };
    try {
      await body(() => tracker.ending(async () => (ended.left = await tracker.settle(waitMs))));
      return ended.left;
    } finally {
      tracker.close();
    }
  }

  it('a timer and a promise the body started and did not await are named with their line', async () => {
    const left = await window(async (end) => {
      setTimeout(() => undefined, 20);
      void new Promise((r) => setTimeout(r, 30)).then(() => undefined);
      await end();
    });
    expect(left?.items.map((i) => [i.type, HERE.test(i.site ?? '')])).toEqual(
      expect.arrayContaining([
        ['Timeout', true],
        ['PROMISE', true],
      ]),
    );
  });

  it('awaited work, and the async functions waiting for the end, leave nothing behind', async () => {
    const left = await window(async (end) => {
      await new Promise((r) => setTimeout(r, 5));
      const helper = async () => {
        await new Promise((r) => setTimeout(r, 5));
        return end();
      };
      await helper();
    });
    expect(left).toBeNull();
  });

  it("a library's own timer, made while the window is open, is not the user's work", async () => {
    const { PassThrough } = await import('node:stream');
    const s = new PassThrough();
    s.resume();
    const left = await window(async (end) => {
      await new Promise<void>((r) => s.write('x', () => r()));
      await end();
    });
    expect(left).toBeNull();
  });
});
