import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { descendantsOf, everyThreadStopped, processAlive } from '../../src/backends/live';
import { openSqlClient } from '../../src/backends/sql-client';
import type { BackendName, StartedBackend } from '../../src/backends/types';
import { workloadTable } from '../../src/workload/table';

/**
 * What the fault suite runs on each backend: a strategy whose rows become visible to other connections as it goes
 * (autocommitted chunks of 10 000 rows), so "mid-insert" is something a test can see on the server rather than guess
 * from a clock. SQLite has no server to kill, freeze or cut off: it says so.
 */
export type FaultTarget = { strategy: string; perRowStrategy: string } | { noServer: string };

export const FAULT_TARGETS = {
  sqlite: { noServer: 'SQLite runs in-process (better-sqlite3): there is no server process to kill or freeze, and no wire to cut' },
  mariadb: { strategy: 'mysql2.query-multirow', perRowStrategy: 'mysql2.execute-per-row-tx' },
  mysql: { strategy: 'mysql2.query-multirow', perRowStrategy: 'mysql2.execute-per-row-tx' },
  postgres: { strategy: 'pg.query-multirow', perRowStrategy: 'pg.per-row-tx' },
} satisfies Record<BackendName, FaultTarget>;

/** Rows of the cell the fault hits: 20 chunks, seconds of work on two busy cores, so a poll sees it half done. */
export const FAULT_ROWS = 200_000;
/** The cell before the fault: it must be kept, measured, in the failed report. */
export const FIRST_ROWS = 50;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A run id of the test's own, so leaks are told apart from what other workers' servers leave meanwhile. */
export function faultEnv(tag: string): NodeJS.ProcessEnv {
  return { ...process.env, SQLTALLY_RUN_ID: `flt${tag}${process.pid}` };
}

/**
 * Waits until the workload table holds more rows than the cell before left in it (`above`) but fewer than the
 * `rows`-row window inserts (the insert is under way on the server, a chunk of it committed), then runs `fault`
 * at once, before the poll's own connection closes. Returns how many rows were seen when it struck.
 */
export async function strikeMidInsert(
  backend: () => StartedBackend | undefined,
  above: number,
  rows: number,
  fault: (b: StartedBackend) => void | Promise<void>,
  deadlineMs = 150_000,
): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    const b = backend();
    const c = b?.connection;
    if (b && c && c.kind !== 'file') {
      const table = workloadTable(b.description.name);
      const protocol = b.description.capabilities.wireProtocol ?? 'mysql';
      const client = await openSqlClient(protocol, c, { backend: b.description.id, connectTimeoutMs: 2_000 }).catch(() => null);
      let struck: number | null = null;
      try {
        for (let i = 0; client && struck === null && i < 500; i++) {
          const [row] = await client.query<{ n: unknown }>(`SELECT count(*) AS n FROM ${table.quoted}`);
          const n = Number(row?.n);
          if (n > above && n < rows) struck = n;
          else await sleep(10);
        }
      } catch {
        // The table is between a DROP and a CREATE, or the server went: poll again.
      }
      try {
        // Outside the poll's catch: a fault that cannot strike fails the test at once, not at the deadline.
        if (struck !== null) await fault(b);
      } finally {
        // Not awaited: a frozen server never answers the goodbye; the socket closes when the run stops the server.
        void client?.close().catch(() => undefined);
      }
      if (struck !== null) return struck;
    }
    await sleep(20);
  }
  throw new Error(`the ${rows}-row window was never seen half done on the server`);
}

/**
 * Signals a server process and every process under it: a PostgreSQL postmaster alone frozen would leave its
 * backends serving the connections they have. The leader first, so it forks nothing new meanwhile.
 */
export function signalServer(pid: number | undefined, signal: NodeJS.Signals): number[] {
  if (pid === undefined) throw new Error('the backend has no server process id (not a local private server)');
  const all = [pid, ...descendantsOf(pid)];
  for (const p of all) {
    try {
      process.kill(p, signal);
    } catch {
      // Exited between the listing and the signal.
    }
  }
  return all;
}

/** Waits until every thread of every process in `pids` is stopped (`everyThreadStopped`); false if not within `ms`. */
export async function allThreadsStopped(pids: readonly number[], ms = 2_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (pids.every(everyThreadStopped)) return true;
    if (Date.now() > deadline) return false;
    await sleep(5);
  }
}

/**
 * Continues every process a freeze stopped that is still there. Stopping a server kills only its leader's group
 * (SIGKILL): PostgreSQL backends frozen in sessions of their own stay stopped until continued, then see the
 * postmaster gone and exit.
 */
export async function thawQuietly(frozen: readonly number[]): Promise<void> {
  for (const p of frozen) {
    if (!processAlive(p)) continue;
    try {
      process.kill(p, 'SIGCONT');
    } catch {
      // Gone meanwhile.
    }
  }
  for (let i = 0; i < 100 && frozen.some((p) => processAlive(p)); i++) await sleep(50);
}

export function scratchDir(name: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `sqltally-fault-${name}-`));
}
