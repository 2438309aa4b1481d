import type { StartedBackend } from '../../src/backends/types';
import { processAlive } from '../../src/backends/live';
import type { Report } from '../../src/report/schema';
import { runMatrix } from '../../src/run/matrix';
import { findLeaks } from '../global-teardown';
import { FAULT_ROWS, FIRST_ROWS, strikeMidInsert } from './fixture';

// The main job (`sqltally run`, in-process) under a server that dies or freezes mid-insert, shared by the fault files
// that run it (one file per fault, so that Jest's workers run the slow ones side by side).

export interface Observed {
  report: Report;
  progress: string[];
  backend: StartedBackend | undefined;
  seenRows: number;
}

export async function runWithFault(
  id: string,
  strategy: string,
  env: NodeJS.ProcessEnv,
  fault: (b: StartedBackend) => void | Promise<void>,
  cellTimeoutMs?: number,
): Promise<Observed> {
  let backend: StartedBackend | undefined;
  const progress: string[] = [];
  let firstCellDone = false;
  const running = runMatrix(
    {
      backends: [id],
      strategies: [strategy],
      rows: [FIRST_ROWS, FAULT_ROWS],
      hotRows: [],
      warmups: 0,
      repeats: 5,
      driverReleases: 'default',
      ...(cellTimeoutMs ? { cellTimeoutMs } : {}),
    },
    {
      env,
      progress: (line) => {
        progress.push(line);
        if (line.includes(`${strategy} ${FIRST_ROWS}:`)) firstCellDone = true;
      },
      started: (b) => (backend = b),
    },
  );
  const seenRows = await strikeMidInsert(() => (firstCellDone ? backend : undefined), FIRST_ROWS, FAULT_ROWS, fault).catch(async (err: unknown) => {
    // The run goes on without the fault: let it end (its server stopped) before the test fails.
    await running.catch(() => undefined);
    throw err;
  });
  const report = await running;
  return { report, progress, backend, seenRows };
}

/** What every fault must leave: a failed report naming where, the earlier cell kept as measured, nothing behind. */
export function expectFailedReportKeepingTheFirstCell(o: Observed, id: string, strategy: string, env: NodeJS.ProcessEnv): void {
  const { report } = o;
  if (process.env['FAULT_DEBUG'])
    console.log(
      JSON.stringify(
        { failure: report.failure, cells: report.cells.map((c) => ({ rows: c.rows, v: c.verdict.kind, e: c.error, l: c.lateCommits })), progress: o.progress },
        null,
        1,
      ),
    );
  expect(report.status).toBe('failed');
  expect(report.failure).toMatchObject({ backend: expect.stringContaining(id), phase: expect.any(String), statement: expect.stringMatching(/^INSERT INTO/) });
  const first = report.cells.find((c) => c.rows === FIRST_ROWS);
  expect(first).toMatchObject({ strategy, verifiedRows: FIRST_ROWS, verdict: { kind: 'assert' } });
  expect(first?.error).toBeUndefined();
  // No success is claimed for the cell the fault hit: it is absent or carries the error, never assert.
  for (const c of report.cells.filter((x) => x.rows === FAULT_ROWS)) {
    expect(c.verdict.kind).not.toBe('assert');
    expect(c.error).toBeDefined();
  }
  expect(o.backend?.pid === undefined || !processAlive(o.backend.pid)).toBe(true);
  expect(findLeaks(env)).toEqual([]);
}
