/**
 * The measured side of bench/deferred-cpu.ts, bundled and run under callgrind:
 *   node deferred-cpu-child.js <scenario> <tracked|untracked> <warm-up units> <measured units>
 * Runs the warm-up units in windows of their own, then the measured units in one window; prints the window's verdict.
 */
// The build's code, as an installed sqltally runs it (see shipped.ts); the bundle keeps its require at run time.
import { createHook } from 'node:async_hooks';
import { promiseHooks } from 'node:v8';
import { sqliteLoop } from './deferred-cost-measure';
import { DeferredWorkTracker } from './shipped';

const call = async (i: number): Promise<number> => i + 1;

async function loop(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await call(i);
}

/** The no-database loop: the tracker of a measured function (`floor`) or of a begin() window (`floor-begin`). */
async function floor(ambient: boolean, tracked: boolean, n: number): Promise<void> {
  if (!tracked) return loop(n);
  const tracker = new DeferredWorkTracker();
  tracker.open(ambient);
  try {
    if (ambient) {
      await loop(n);
      await tracker.ending(() => tracker.settle(0));
    } else {
      await Promise.resolve().then(() => tracker.run(() => loop(n)));
      await tracker.settle(0);
    }
  } finally {
    tracker.close();
  }
}

/**
 * The no-database loop under empty hooks of a tracker's shape: `async`, async_hooks init, before and after, and V8's
 * settle hook (the tracker before issue 37's V8 branch, and a begin() window's); `init` without before and after;
 * `v8`, V8's four promise hooks alone (a measured function's tracker now). What Node's machinery costs before any of
 * the tracker's work.
 */
async function hooksOnly(tracked: boolean, shape: 'async' | 'init' | 'v8', n: number): Promise<void> {
  if (!tracked) return loop(n);
  let stop: () => void;
  if (shape === 'v8') {
    stop = promiseHooks.createHook({ init() {}, before() {}, after() {}, settled() {} }) as () => void;
  } else {
    const hook = (shape === 'init' ? createHook({ init() {} }) : createHook({ init() {}, before() {}, after() {} })).enable();
    const settled = promiseHooks.onSettled(() => undefined) as () => void;
    stop = () => {
      hook.disable();
      settled();
    };
  }
  try {
    await loop(n);
  } finally {
    stop();
  }
}

/** bench/deferred-cost.ts's loop: an awaited async function around a counted better-sqlite3 INSERT, in a window. */
async function sqlite(scenario: string, tracked: boolean, warmup: number, measured: number): Promise<void> {
  const { backend, open: openSide } = await sqliteLoop();
  const { session, db, call: run } = await openSide(tracked);
  const verdicts: string[] = [];
  const window = async (n: number): Promise<void> => {
    if (scenario === 'sqlite-empty') {
      for (let w = 0; w < n; w++) verdicts.push((await session.measure(async () => undefined)).verdict.kind);
    } else if (scenario === 'sqlite-begin') {
      const open = await session.begin();
      for (let i = 0; i < n; i++) await run(i);
      verdicts.push((await open.end()).verdict.kind);
    } else {
      const tally = await session.measure(async () => {
        for (let i = 0; i < n; i++) await run(i);
      });
      verdicts.push(tally.verdict.kind);
    }
  };
  try {
    // Warm-up in windows of at most 2000 calls (or 20 empty windows), then the measured units in one more.
    const chunk = scenario === 'sqlite-empty' ? 20 : 2000;
    for (let done = 0; done < warmup; done += chunk) await window(Math.min(chunk, warmup - done));
    await window(measured);
  } finally {
    db.close();
    await session.close();
    await backend.stop();
  }
  console.log(`verdicts: ${[...new Set(verdicts)].join(', ')}`);
}

async function main(): Promise<void> {
  const [scenario, side, warmup, measured] = process.argv.slice(2);
  const tracked = side === 'tracked';
  const w = Number(warmup);
  const m = Number(measured);
  if (scenario === 'floor-hooks' || scenario === 'floor-hooks-init' || scenario === 'floor-hooks-v8') {
    const shape = scenario === 'floor-hooks' ? 'async' : scenario === 'floor-hooks-init' ? 'init' : 'v8';
    await hooksOnly(tracked, shape, w);
    await hooksOnly(tracked, shape, m);
  } else if (scenario === 'floor' || scenario === 'floor-begin') {
    await floor(scenario === 'floor-begin', tracked, w);
    await floor(scenario === 'floor-begin', tracked, m);
  } else {
    await sqlite(scenario ?? '', tracked, w, m);
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
