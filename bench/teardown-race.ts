import mysql from 'mysql2/promise';
import { startBackend } from '../src/backends/registry';
import type { NetworkConnection } from '../src/backends/types';
import { SQL_THREAD_EVENTS, SQL_THREAD_STATUS, perThreadCounters, type CounterRow } from '../src/server/mysql-family';

/**
 * What a reading of performance_schema finds of a connection that has just quit (MySQL family). A window's end
 * reading can come while the server is still tearing down a connection that closed inside the window: the server
 * has folded the thread's status into the global counters and dropped it from status_by_thread, while its
 * statement events are still listed. Read then, the connection has statements but no Questions or Handler_write of
 * its own. N connections each run 10 INSERTs, quit (COM_QUIT), and are read in a loop from another connection
 * until they are gone; each reading is sorted into: whole (events and status), ending (events, no status: what
 * `perThreadCounters` now leaves out), status only, gone. Counts, not times, are the result.
 *
 *   npx tsx bench/teardown-race.ts [mariadb mysql] [--connections 400]
 */

const INSERTS = 10;
type State = 'whole' | 'ending' | 'status only' | 'gone';

async function race(backendId: string, connections: number): Promise<void> {
  const backend = await startBackend(backendId);
  try {
    const c = backend.connection as NetworkConnection;
    const options = { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
    const reader = await mysql.createConnection(options);
    await reader.query('CREATE TABLE IF NOT EXISTS teardown_race (a int)');
    const readings: Record<State, number> = { whole: 0, ending: 0, 'status only': 0, gone: 0 };
    let caughtEnding = 0;
    let keptEnding = 0;
    for (let i = 0; i < connections; i++) {
      const writer = await mysql.createConnection(options);
      const id = writer.threadId;
      for (let k = 0; k < INSERTS; k++) await writer.query('INSERT INTO teardown_race VALUES (1)');
      const quitting = writer.end();
      let sawEnding = false;
      for (;;) {
        const [events] = (await reader.query(SQL_THREAD_EVENTS)) as unknown as [CounterRow[]];
        const [status] = (await reader.query(SQL_THREAD_STATUS)) as unknown as [CounterRow[]];
        const hasEvents = events.some((r) => Number(r.ID) === id);
        const hasStatus = status.some((r) => Number(r.ID) === id);
        const state: State = hasEvents && hasStatus ? 'whole' : hasEvents ? 'ending' : hasStatus ? 'status only' : 'gone';
        readings[state] += 1;
        if (state === 'ending') {
          sawEnding = true;
          if (perThreadCounters([id], events, status, ['Questions', 'Handler_write']).has(id)) keptEnding += 1;
        }
        if (state === 'gone') break;
      }
      if (sawEnding) caughtEnding += 1;
      await quitting;
    }
    await reader.end();
    console.log(
      `${backend.description.id}: ${connections} connections quit; readings after the quit: ${JSON.stringify(readings)}; ` +
        `connections caught ending: ${caughtEnding}; ending readings perThreadCounters kept: ${keptEnding}`,
    );
  } finally {
    await backend.stop();
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--connections');
  const connections = at >= 0 ? Number(args[at + 1]) : 400;
  const backends = args.filter((a, i) => !a.startsWith('--') && (at < 0 || i !== at + 1));
  for (const b of backends.length > 0 ? backends : ['mariadb', 'mysql']) await race(b, connections);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
