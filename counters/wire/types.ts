import { z } from 'zod';

/**
 * Wire counts for one proxied connection, or summed over several. Command names are the protocol's own
 * (`COM_QUERY`, `COM_STMT_EXECUTE`, `Parse`, `Bind`, `Sync`, ...); unknown MySQL commands are `COM_0xNN`.
 */
export const WireCountsSchema = z.object({
  protocol: z.enum(['mysql', 'postgres']),
  /** Client commands (MySQL) or frontend messages (PostgreSQL) by name, after the handshake. */
  commands: z.record(z.string(), z.number().int().nonnegative()),
  commandsTotal: z.number().int().nonnegative(),
  /** Requests answered: MySQL command -> final OK/ERR/EOF/result end; PostgreSQL Sync or Query -> ReadyForQuery. */
  roundTrips: z.number().int().nonnegative(),
  bytesClientToServer: z.number().int().nonnegative(),
  bytesServerToClient: z.number().int().nonnegative(),
  /** Socket writes from the client carrying at least one command: N commands in 1 write is pipelining. */
  clientWrites: z.number().int().nonnegative(),
  /** Connections these counts cover. */
  connections: z.number().int().nonnegative(),
  /** True when any covered connection could not be parsed to the end (TLS, parse error, cut mid-frame). */
  incomplete: z.boolean(),
  incompleteReasons: z.array(z.string()),
});
export type WireCounts = z.infer<typeof WireCountsSchema>;
