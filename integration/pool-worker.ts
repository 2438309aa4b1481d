import { integrationBackends } from './harness';
import { pooledHandover, processPool } from './pool';

/**
 * Loaded into a real Jest worker process by leaks-sweep.test.ts: borrows a server from that process's pool, as the
 * integration environment does for a test file, and says which server it got.
 */
export async function borrow(id: string): Promise<{ pid: number | null; dataDir: string | null }> {
  const b = integrationBackends().find((x) => x.id === id);
  const handover = b ? pooledHandover(b) : undefined;
  if (!handover) throw new Error(`${id} is not lent from the pool in this run`);
  const started = await processPool().borrow(id, 'integration/leaks-sweep.test.ts', handover);
  return { pid: started.pid ?? null, dataDir: started.dataDir ?? null };
}
