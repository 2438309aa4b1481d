import type { CaptureSession, IgnoreEntry, OpenCapture } from '../capture/capture';
import type { Tally } from '../capture/tally';

/** The test hooks a runner gives: Jest's and Vitest's globals, or Vitest's imports when globals are off. */
export interface TestHooks {
  beforeEach(fn: () => Promise<void>): void;
  afterEach(fn: () => Promise<void>): void;
}

export interface WindowPerTestOptions {
  /** Run on each test's tally in `afterEach` (a budget: `(t) => expect(t).toHaveNoRepeatedShapes()`). */
  check?: (tally: Tally) => void | Promise<void>;
  /** More statements to leave out of each window (see CaptureOptions.ignore). */
  ignore?: IgnoreEntry[];
  /** The runner's hooks; default the global `beforeEach`/`afterEach` (Jest, Vitest with globals). */
  hooks?: TestHooks;
}

/** What a test reads its own window through. */
export interface TestWindows {
  /**
   * Closes this test's window now and returns its tally (what the test ran so far); `afterEach` then reuses it.
   * Call it at most once per test, after the code you want counted.
   */
  tally(): Promise<Tally>;
}

function globalHooks(): TestHooks {
  const g = globalThis as unknown as Partial<TestHooks>;
  if (typeof g.beforeEach !== 'function' || typeof g.afterEach !== 'function') {
    throw new Error('windowPerTest needs beforeEach/afterEach: pass { hooks: { beforeEach, afterEach } } (Vitest without globals)');
  }
  return { beforeEach: g.beforeEach.bind(globalThis), afterEach: g.afterEach.bind(globalThis) };
}

/**
 * Gives every test of the enclosing `describe` its own window on a capture session: opened in `beforeEach`, closed in
 * `afterEach` (or by the test reading `tally()`), checked by `check` if given. Register it after your own set-up hooks,
 * which would otherwise run inside the window.
 *
 * `const windows = windowPerTest(() => session, { check: (t) => expect(t).toHaveNoRepeatedShapes() });`
 */
export function windowPerTest(session: () => CaptureSession, options: WindowPerTestOptions = {}): TestWindows {
  const hooks = options.hooks ?? globalHooks();
  let open: OpenCapture | null = null;
  let closed: Promise<Tally> | null = null;
  hooks.beforeEach(async () => {
    closed = null;
    open = await session().begin(options.ignore ? { ignore: options.ignore } : {});
  });
  hooks.afterEach(async () => {
    const current = open;
    open = null;
    if (!current) return;
    const tally = await (closed ?? current.end());
    await options.check?.(tally);
  });
  return {
    tally: () => {
      if (!open) return Promise.reject(new Error('windowPerTest: no window is open (call tally() inside a test of the describe that registered it)'));
      closed ??= open.end();
      return closed;
    },
  };
}
