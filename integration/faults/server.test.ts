// @waits 23: servers killed mid-insert, windows that give up.
import fs from 'node:fs';
import path from 'node:path';
import { writeReport } from '../../src/report/output';
import { readReportFile } from '../../src/report/schema';
import { runMatrix } from '../../src/run/matrix';
import { findLeaks } from '../global-teardown';
import { reportFiles } from '../report-files';
import { START_TIMEOUT_MS, describeEachBackend } from '../harness';
import { FAULT_ROWS, FAULT_TARGETS, FIRST_ROWS, faultEnv, scratchDir, type FaultTarget } from './fixture';
import { expectFailedReportKeepingTheFirstCell, runWithFault } from './main-job-fault';
import { EVERY_PROVIDER, STRIKES_SERVER, itForProvider, serverControl, type ServerControl } from './providers';

// The main job under a server that dies mid-insert, and one that goes on after the run gave up, each on a server of
// its own (never the pool's, which it would break); the frozen server is in freeze.cases.ts.
jest.setTimeout(START_TIMEOUT_MS * 2);

/**
 * The give-up window's cell timeouts, tried in turn: the timeout bounds the table's reset too, and a run whose reset
 * outlasts it never begins the cell, so it proves nothing and runs again with the next; each is far below the work.
 */
const LATE_TIMEOUTS_MS = [1000, 2000, 3000] as const;
/** The run's failure when the table's reset before the window outlasted the timeout (src/run/matrix.ts). */
const RESET_OUTLASTED = /resetting \S+ before the window did not finish within \d+ ms/;

describeEachBackend((b) => {
  const target: FaultTarget = FAULT_TARGETS[b.backend];
  if ('noServer' in target) {
    it.skip(`no server faults: ${target.noServer}`, () => undefined);
    return;
  }
  const { strategy, perRowStrategy } = target;

  // Local: SIGKILL of every process of the server; Testcontainers: `docker kill -s KILL` (see providers.ts).
  itForProvider(
    b,
    STRIKES_SERVER,
    'SIGKILL of the server mid-insert: a failed report keeps the cell before, the error names backend, phase and statement',
    async () => {
      const env = faultEnv('kill');
      let control: ServerControl | undefined;
      const o = await runWithFault(b.id, strategy, env, async (s) => {
        control = serverControl(s);
        await control.kill();
      });
      expect(await control?.gone()).toBe(true);
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
        expect(fs.readdirSync(out).sort()).toEqual(reportFiles(o.report));
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  itForProvider(
    b,
    // Nothing is done to the server here: the run's own timeout and cancel, on whatever server it was given.
    EVERY_PROVIDER,
    'a window that gives up while the server goes on: the cell says how many rows committed after the client stopped waiting',
    async () => {
      // One transaction of one-row inserts: at the give-up nothing is committed; the cancel (KILL QUERY,
      // pg_cancel_backend) fails the statement in flight and the strategy rolls back, or COMMIT got there first.
      const env = faultEnv('late');
      const run = (cellTimeoutMs: number) =>
        runMatrix(
          {
            backends: [b.id],
            strategies: [perRowStrategy],
            rows: [FAULT_ROWS],
            hotRows: [],
            warmups: 0,
            repeats: 5,
            driverReleases: 'default',
            cellTimeoutMs,
          },
          { env },
        );
      let timeoutMs: number = LATE_TIMEOUTS_MS[0];
      let report = await run(timeoutMs);
      const outlasted: string[] = [];
      for (const next of LATE_TIMEOUTS_MS.slice(1)) {
        if (report.cells.length > 0 || !RESET_OUTLASTED.test(report.failure?.message ?? '')) break;
        outlasted.push(`${timeoutMs} ms: ${report.failure?.message}`);
        timeoutMs = next;
        report = await run(timeoutMs);
      }
      if (process.env['FAULT_DEBUG']) console.log(JSON.stringify({ outlasted, failure: report.failure }, null, 1));
      expect(report.status).toBe('failed');
      const [cell] = report.cells;
      // With the run's failure beside it: a cell that never began says why.
      expect({ verdict: cell?.verdict.kind, failure: report.failure?.message }).toEqual({ verdict: 'incomplete', failure: expect.any(String) });
      expect(cell?.error?.message).toContain(`${perRowStrategy} at ${FAULT_ROWS} rows gave up after ${timeoutMs} ms (--cell-timeout-ms)`);
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
    },
  );
});
