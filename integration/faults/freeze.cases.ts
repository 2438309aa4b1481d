import type { BackendName } from '../../src/backends/types';
import { START_TIMEOUT_MS, describeEachBackend } from '../harness';
import { FAULT_ROWS, FAULT_TARGETS, faultEnv, type FaultTarget } from './fixture';
import { expectFailedReportKeepingTheFirstCell, runWithFault } from './main-job-fault';
import { STRIKES_SERVER, itForProvider, serverControl, type FrozenServer, type ServerControl } from './providers';

// The main job under a server stopped with SIGSTOP past the cell timeout. Each case mostly waits, so each backend has a
// file of its own (freeze.<backend>.test.ts) that Jest runs beside the others.

/** A cell timeout far above what the 50-row cell takes, far below "never" (the frozen server). */
const CELL_TIMEOUT_MS = 8_000;

/** The cases for every variant of `backend` this run covers (each id a describe block, a skip saying why). */
export function freezeCases(backend: BackendName): void {
  jest.setTimeout(START_TIMEOUT_MS * 2);
  describeEachBackend(
    (b) => {
      const target: FaultTarget = FAULT_TARGETS[b.backend];
      if ('noServer' in target) {
        it.skip(`no server faults: ${target.noServer}`, () => undefined);
        return;
      }
      const { strategy } = target;

      // Local: SIGSTOP of every process of the server; Testcontainers: `docker pause` (see providers.ts).
      itForProvider(
        b,
        STRIKES_SERVER,
        `SIGSTOP of the server past the cell timeout: the run gives up after --cell-timeout-ms ${CELL_TIMEOUT_MS}, says what it could not read, and stops the frozen server`,
        async () => {
          const env = faultEnv('stop');
          let control: ServerControl | undefined;
          let frozen: FrozenServer | undefined;
          try {
            const o = await runWithFault(
              b.id,
              strategy,
              env,
              async (s) => {
                control = serverControl(s);
                frozen = await control.freeze();
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
            await frozen?.thaw();
          }
          // Every process of the frozen server is gone once continued: nothing stays stopped behind the run.
          expect({ frozen: frozen?.what, gone: await control?.gone() }).toEqual({ frozen: expect.any(String), gone: true });
        },
      );
    },
    (b) => b.backend === backend,
  );
}
