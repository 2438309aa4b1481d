/**
 * One side of a bench/wire-cost.ts round run in a process of its own (forked with tsx), for a passive capture, which
 * counts other processes' connections only. Each `run` opens a connection, times the workload on it and closes it,
 * so that a capture started before the run sees the connection from its SYN.
 */
import { mysqlInserts, pgInserts } from './wire-cost-clients';
import type { Endpoint, Workload } from './wire-cost-clients';
import type { NetworkConnection } from '../src/backends/types';

export interface ChildSetup {
  client: 'pg' | 'mysql2';
  oneStatement: boolean;
  server: NetworkConnection;
  at: Endpoint;
}

let workload: Workload | null = null;
let setup: ChildSetup | null = null;

process.on('message', (message: { setup?: ChildSetup; run?: true; exit?: true }) => {
  if (message.setup) {
    setup = message.setup;
    workload = (setup.client === 'pg' ? pgInserts : mysqlInserts)(setup.client, setup.oneStatement);
    process.send?.({ ready: true });
  } else if (message.run && workload && setup) {
    const { server, at } = setup;
    void (async () => {
      const side = await workload.open(server, at);
      try {
        process.send?.({ result: await side.run() });
      } finally {
        await side.end();
      }
    })().catch((error: unknown) => process.send?.({ error: String(error) }));
  } else if (message.exit) process.exit(0);
});
