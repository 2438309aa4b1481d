import { runMatrix } from './matrix';
import type { RunPlan } from './plan';

// SQLite runs in-process, so the run's own bookkeeping around a signal is checked here without a server; the same
// on every server backend, a real SIGINT to a real run, is integration/faults/interrupt.test.ts.
const PLAN: RunPlan = {
  backends: ['sqlite'],
  strategies: ['better-sqlite3.multirow'],
  rows: [20, 40],
  hotRows: [],
  warmups: 0,
  repeats: 5,
  driverReleases: 'default',
};

/** Runs the plan and aborts the run as soon as a progress line matches `when`. */
async function interruptedWhen(when: RegExp) {
  const controller = new AbortController();
  const lines: string[] = [];
  const report = await runMatrix(PLAN, {
    signal: controller.signal,
    progress: (line) => {
      lines.push(line);
      if (when.test(line) && !controller.signal.aborted) controller.abort('SIGINT');
    },
  });
  return { report, lines };
}

describe('runMatrix interrupted', () => {
  it('between two cells: the failure names the backend whose next cell was about to run, and keeps the cell before', async () => {
    const { report } = await interruptedWhen(/better-sqlite3\.multirow 20: assert/);
    expect(report.status).toBe('failed');
    expect(report.failure).toMatchObject({
      message: expect.stringMatching(/^interrupted \(SIGINT\) after 1 cell\(s\)/),
      backend: expect.stringMatching(/^sqlite/),
      phase: 'workload',
    });
    expect(report.cells.map((c) => [c.rows, c.verdict.kind])).toEqual([[20, 'assert']]);
  });

  it('after the backend started, before its first cell: the failure names it, in set-up', async () => {
    const { report } = await interruptedWhen(/^ready sqlite/);
    expect(report.failure).toMatchObject({
      message: expect.stringMatching(/^interrupted \(SIGINT\) after 0 cell\(s\)/),
      backend: expect.stringMatching(/^sqlite/),
      phase: 'setup',
    });
    expect(report.cells).toEqual([]);
  });
});
