import fs from 'node:fs';
import path from 'node:path';
import { processAlive } from '../../containers/live';
import type { StartedBackend } from '../../containers/types';
import { writeReport } from '../../reports/output';
import { readReportFile, type Report } from '../../reports/schema';
import { runMatrix } from '../../run/matrix';
import { findLeaks } from '../global-teardown';
import { START_TIMEOUT_MS, describeEachBackend } from '../harness';
import { FAULT_ROWS, FAULT_TARGETS, FIRST_ROWS, faultEnv, scratchDir, signalServer, strikeMidInsert, thawQuietly, type FaultTarget } from './fixture';

// The main job (`sqltally run`, in-process) under a server that dies or freezes mid-insert. Each run starts a private
// server of its own (never one from the worker's pool) and must end with: a failed report that keeps the cell
// measured before the fault, an error naming backend, phase and statement, no success claimed, and nothing left
// running or on disk under the run's id.
jest.setTimeout(START_TIMEOUT_MS * 2);

/** A cell timeout far above what the 50-row cell takes, far below "never" (the frozen server). */
const CELL_TIMEOUT_MS = 8_000;

interface Observed {
  report: Report;
  progress: string[];
  backend: StartedBackend | undefined;
  seenRows: number;
}

async function runWithFault(id: string, strategy: string, env: NodeJS.ProcessEnv, fault: (b: StartedBackend) => void, cellTimeoutMs?: number): Promise<Observed> {
  let backend: StartedBackend | undefined;
  const progress: string[] = [];
  let firstCellDone = false;
  const running = runMatrix(
    { backends: [id], strategies: [strategy], rows: [FIRST_ROWS, FAULT_ROWS], hotRows: [], warmups: 0, repeats: 5, driverReleases: 'default', ...(cellTimeoutMs ? { cellTimeoutMs } : {}) },
    {
      env,
      progress: (line) => {
        progress.push(line);
        if (line.includes(`${strategy} ${FIRST_ROWS}:`)) firstCellDone = true;
      },
      started: (b) => (backend = b),
    },
  );
  const seenRows = await strikeMidInsert(() => (firstCellDone ? backend : undefined), FIRST_ROWS, FAULT_ROWS, fault);
  const report = await running;
  return { report, progress, backend, seenRows };
}

/** What every fault must leave: a failed report naming where, the earlier cell kept as measured, nothing behind. */
function expectFailedReportKeepingTheFirstCell(o: Observed, id: string, strategy: string, env: NodeJS.ProcessEnv): void {
  const { report } = o;
  if (process.env['FAULT_DEBUG']) console.log(JSON.stringify({ failure: report.failure, cells: report.cells.map((c) => ({ rows: c.rows, v: c.verdict.kind, e: c.error, l: c.lateCommits })), progress: o.progress }, null, 1));
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

describeEachBackend((b) => {
  const target: FaultTarget = FAULT_TARGETS[b.backend];
  if ('noServer' in target) {
    it.skip(`no server faults: ${target.noServer}`, () => undefined);
    return;
  }
  const { strategy, perRowStrategy } = target;

  it('SIGKILL of the server mid-insert: a failed report keeps the cell before, the error names backend, phase and statement', async () => {
    const env = faultEnv('kill');
    const o = await runWithFault(b.id, strategy, env, (s) => signalServer(s.pid, 'SIGKILL'));
    expect(o.seenRows).toBeGreaterThan(FIRST_ROWS);
    expectFailedReportKeepingTheFirstCell(o, b.id, strategy, env);
    expect(o.report.failure?.message).toContain(`${strategy} at ${FAULT_ROWS} rows failed`);
    expect(o.report.failure?.phase).toBe('workload');
    // The report writes and reads back through its schema like any other.
    const dir = scratchDir('kill');
    try {
      const out = path.join(dir, 'out');
      await writeReport(out, o.report);
      expect(readReportFile(path.join(out, 'report.json')).status).toBe('failed');
      expect(fs.readdirSync(out).sort()).toEqual(['bench.json', 'report.json', 'report.md']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it(`SIGSTOP of the server past the cell timeout: the run gives up after --cell-timeout-ms ${CELL_TIMEOUT_MS}, says what it could not read, and stops the frozen server`, async () => {
    const env = faultEnv('stop');
    let frozen: number[] = [];
    try {
      const o = await runWithFault(
        b.id,
        strategy,
        env,
        (s) => {
          frozen = signalServer(s.pid, 'SIGSTOP');
        },
        CELL_TIMEOUT_MS,
      );
      expectFailedReportKeepingTheFirstCell(o, b.id, strategy, env);
      const hit = o.report.cells.find((c) => c.rows === FAULT_ROWS);
      expect(hit?.verdict.kind).toBe('incomplete');
      expect(hit?.error?.message).toContain(`${strategy} at ${FAULT_ROWS} rows gave up after ${CELL_TIMEOUT_MS} ms (--cell-timeout-ms)`);
      expect(hit?.error?.statement).toMatch(/^INSERT INTO/);
      // The late-commit reading through a fresh connection is bounded too, and says it could not read.
      expect(hit?.lateCommits?.unread?.[0]).toMatch(/no answer within \d+ ms/);
      expect(hit?.lateCommits?.rowsCommittedAfterGivingUp).toBeNull();
      expect(hit?.lateCommits?.summary).toContain('the server did not answer, so nothing more was read');
      expect(o.report.failure?.phase).toBe('workload');
    } finally {
      await thawQuietly(frozen);
    }
    // Every process of the frozen server is gone once continued: nothing stays stopped behind the run.
    expect(frozen.filter((p) => processAlive(p))).toEqual([]);
  });

  it('a window that gives up while the server goes on: the cell says how many rows committed after the client stopped waiting', async () => {
    // One transaction of one-row inserts: at the give-up nothing is committed; the cancel (KILL QUERY,
    // pg_cancel_backend) fails the statement in flight and the strategy rolls back, or COMMIT got there first.
    const env = faultEnv('late');
    const report = await runMatrix(
      { backends: [b.id], strategies: [perRowStrategy], rows: [FAULT_ROWS], hotRows: [], warmups: 0, repeats: 5, driverReleases: 'default', cellTimeoutMs: 300 },
      { env },
    );
    expect(report.status).toBe('failed');
    const [cell] = report.cells;
    expect(cell?.verdict.kind).toBe('incomplete');
    expect(cell?.error?.message).toContain(`${perRowStrategy} at ${FAULT_ROWS} rows gave up after 300 ms (--cell-timeout-ms)`);
    const late = cell?.lateCommits;
    if (process.env['FAULT_DEBUG']) console.log(JSON.stringify({ error: cell?.error, late }, null, 1));
    expect(late?.table).toBe('sqltally_rows');
    expect(late?.rowsAtGiveUp).toBe(0);
    // A transaction is all or nothing, and the fresh connection read the table after the server settled.
    expect([0, FAULT_ROWS]).toContain(late?.rowsAfterwards);
    expect(late?.rowsCommittedAfterGivingUp).toBe(late?.rowsAfterwards);
    expect(late?.unread).toBeUndefined();
    expect(cell?.error?.message).toContain(`${late?.rowsCommittedAfterGivingUp} row(s) committed to sqltally_rows after the function gave up`);
    expect(report.failure?.message).toContain('row(s) committed to sqltally_rows after the function gave up');
    expect(findLeaks(env)).toEqual([]);
  });
});
