import { z } from 'zod';
import { withSqlClient } from '../backends/sql-client';
import type { StartedBackend } from '../backends/types';

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

function quoted(protocol: 'mysql' | 'postgres', name: string): string {
  return protocol === 'mysql' ? `\`${name.replace(/`/g, '``')}\`` : `"${name.replace(/"/g, '""')}"`;
}

/** Rows in `table`, read through a fresh connection of sqltally's own (never one of the window's). */
export async function countRows(backend: StartedBackend, table: { schema?: string; name: string }): Promise<number> {
  const c = backend.connection;
  if (c.kind === 'file') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(c.filename, { readonly: true });
    try {
      const name = table.schema ? `"${table.schema.replace(/"/g, '""')}"."${table.name.replace(/"/g, '""')}"` : `"${table.name.replace(/"/g, '""')}"`;
      return Number(Object.values(db.prepare(`SELECT count(*) FROM ${name}`).get() as object)[0]);
    } finally {
      db.close();
    }
  }
  const protocol = backend.description.capabilities.wireProtocol ?? 'mysql';
  const name = table.schema ? `${quoted(protocol, table.schema)}.${quoted(protocol, table.name)}` : quoted(protocol, table.name);
  return withSqlClient(protocol, c, { backend: backend.description.id }, async (client) => {
    const [row] = await client.query<Record<string, unknown>>(`SELECT count(*) AS n FROM ${name}`);
    return Number(row?.n);
  });
}

/** Cancels what the given server connections are running; returns those the server confirmed. */
export async function cancelRunning(backend: StartedBackend, connectionIds: readonly number[]): Promise<number[]> {
  const c = backend.connection;
  if (c.kind === 'file' || connectionIds.length === 0) return [];
  const protocol = backend.description.capabilities.wireProtocol ?? 'mysql';
  return withSqlClient(protocol, c, { backend: backend.description.id }, async (client) => {
    const done: number[] = [];
    for (const id of connectionIds) {
      if (!Number.isSafeInteger(id)) continue;
      if (protocol === 'mysql') {
        // KILL QUERY stops the statement and keeps the connection: the client sees the statement fail.
        const ok = await client.query(`KILL QUERY ${id}`).then(
          () => true,
          () => false,
        );
        if (ok) done.push(id);
      } else {
        const [row] = await client.query<{ ok: boolean }>('SELECT pg_cancel_backend($1) AS ok', [id]);
        if (row?.ok) done.push(id);
      }
    }
    return done;
  });
}
