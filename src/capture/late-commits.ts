import { z } from 'zod';
import { withSqlClient } from '../backends/sql-client';
import { driverModule, driversFor } from '../driver/registry';
import { SqltallyError } from '../shared/errors';
import type { SqlDialect } from '../sql/tokenizer';
import { quoteIdentifier } from '../sql/tokenizer';
import { protocolOf } from '../backends/protocols';
import type { StartedBackend } from '../backends/types';
import type { DriverName } from '../shared/driver-names';

/** What happened after a measured function gave up (timeout, abort) while the server went on. */
export const LateCommitsSchema = z.object({
  /** Statements the window's connections still had running on the server when the function gave up. */
  running: z.number().int().nonnegative(),
  /** Of those, how many the server confirmed cancelling (`KILL QUERY`, `pg_cancel_backend`). */
  cancelled: z.number().int().nonnegative(),
  /** The table counted through a fresh connection, or null when none was named. */
  table: z.string().nullable(),
  rowsAtGiveUp: z.number().int().nonnegative().nullable(),
  rowsAfterwards: z.number().int().nonnegative().nullable(),
  /** Rows that committed after the client stopped waiting: a client-side timeout does not cancel SQL. */
  rowsCommittedAfterGivingUp: z.number().int().nullable(),
  /**
   * sqltally's own reads after the give-up that failed or got no answer within their bound (a frozen or dead server),
   * each saying what was being read; once one fails nothing more is read, so the counts above may be null.
   */
  unread: z.array(z.string()).optional(),
  summary: z.string(),
});
export type LateCommits = z.infer<typeof LateCommitsSchema>;

/**
 * Rows in `table`, read through a fresh connection of sqltally's own (never one of the window's). An in-process
 * engine's file is read through `driver` when it is one of that engine's drivers: the window's handles are still
 * open, and a second copy of the engine must not open the file beside them.
 */
export async function countRows(backend: StartedBackend, table: { schema?: string; name: string }, driver?: DriverName): Promise<number> {
  const sql = (dialect: SqlDialect): string => {
    const quote = (name: string): string => quoteIdentifier(dialect, name);
    return `SELECT count(*) AS n FROM ${table.schema ? `${quote(table.schema)}.${quote(table.name)}` : quote(table.name)}`;
  };
  const c = backend.connection;
  if (c.kind === 'network') {
    const protocol = protocolOf(backend.description);
    return withSqlClient(protocol.name, c, { backend: backend.description.id }, async (client) => {
      const [row] = await client.query<Record<string, unknown>>(sql(protocol.dialect));
      return Number(row?.n);
    });
  }
  // An in-process engine: a read-only handle of its own embedded driver, never one of the window's.
  const candidates = driversFor(backend.description.name).filter((d) => driverModule(d).embedded);
  const reader = driver !== undefined && candidates.includes(driver) ? driver : candidates[0];
  if (!reader) throw new SqltallyError(`no embedded driver reads ${backend.description.name}`, { backend: backend.description.id, phase: 'verify' });
  const module = driverModule(reader);
  const opened = await module.open(c, { readOnly: true, backend: backend.description.id });
  try {
    const [row] = (await module.runSql(opened.handle, sql(module.dialect))) as Record<string, unknown>[];
    return Number(row?.n);
  } finally {
    await opened.close();
  }
}

/** Cancels what the given server connections are running; returns those the server confirmed. */
export async function cancelRunning(backend: StartedBackend, connectionIds: readonly number[]): Promise<number[]> {
  const c = backend.connection;
  // An in-process engine has no server connections to cancel: the give-up left nothing running elsewhere.
  if (c.kind !== 'network' || connectionIds.length === 0) return [];
  const protocol = protocolOf(backend.description);
  return withSqlClient(protocol.name, c, { backend: backend.description.id }, async (client) => {
    const done: number[] = [];
    for (const id of connectionIds) {
      if (!Number.isSafeInteger(id)) continue;
      if (await protocol.cancel(client, id)) done.push(id);
    }
    return done;
  });
}
