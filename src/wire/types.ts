import { z } from 'zod';
import { WireProtocolSchema } from '../backends/types';

/**
 * Handshake traffic (MySQL greeting/auth, PostgreSQL startup/auth up to the first ReadyForQuery), kept apart from
 * the command counts so a connection opened inside a window does not inflate them.
 */
export const WireSetupSchema = z.object({
  /** Connections whose set-up these figures cover (opened inside the window, for a diff). */
  connectionsOpened: z.number().int().nonnegative(),
  bytesClientToServer: z.number().int().nonnegative(),
  bytesServerToClient: z.number().int().nonnegative(),
  /** Handshake packets/messages the client sent (MySQL handshake response, auth data; PostgreSQL startup, `p`). */
  clientMessages: z.number().int().nonnegative(),
  /** Handshake packets/messages the server sent (greeting, auth switch, OK; `R`, `S`, `K`, first `Z`). */
  serverMessages: z.number().int().nonnegative(),
  /** TLS/GSS requests the proxy answered "no" itself (`tls: 'refuse'`), so the session stayed readable. */
  tlsRefused: z.number().int().nonnegative(),
});
export type WireSetup = z.infer<typeof WireSetupSchema>;

/**
 * What the server's answers say it ran, statement by statement: what the wire model compares with the server's own
 * counters when no counted driver explains the window. Classes are the tokenizer's, from the statement's text where
 * the wire carried it whole, else from the server's CommandComplete tag (PostgreSQL).
 */
export const WireStatementsSchema = z.object({
  /** Statements the server finished: PostgreSQL CommandComplete; MySQL each result of a COM_QUERY or statement execute. */
  completed: z.number().int().nonnegative(),
  completedByClass: z.record(z.string(), z.number().int().nonnegative()),
  /** Statements the server refused or that failed as they ran (ErrorResponse, ERR). */
  failed: z.number().int().nonnegative(),
  failedByClass: z.record(z.string(), z.number().int().nonnegative()),
  /**
   * PostgreSQL: utility statements (BEGIN, COMMIT, SET, ...) run again from a named prepared statement after their
   * first run: pg_stat_statements counts such a statement only at its first execution on the connection.
   */
  namedRepeats: z.number().int().nonnegative(),
  namedRepeatsByClass: z.record(z.string(), z.number().int().nonnegative()),
  /** Requests whose text was not read whole (larger than the proxy keeps): their statements' classes may be unknown. */
  textsUnread: z.number().int().nonnegative(),
  /** Executes a portal suspended (a row limit): the statement may end later, or be closed unfinished. */
  suspended: z.number().int().nonnegative(),
  /** Rows by what changed them: INSERT tags / insert OK packets and `INSERT ... RETURNING` rows; COPY ... FROM rows count as inserted. */
  rowsInserted: z.number().int().nonnegative(),
  rowsUpdated: z.number().int().nonnegative(),
  rowsDeleted: z.number().int().nonnegative(),
  /** Statements whose rows cannot be put in one of the three (MERGE, an upsert): rows are then not exact. */
  rowsUnsplit: z.number().int().nonnegative(),
  /**
   * Session set-up a client ran right after connecting (SET, SHOW, a SELECT without FROM such as `SELECT VERSION()`),
   * before its first other statement: counted in `completed` like any statement, and listed here apart.
   */
  connectStatements: z.number().int().nonnegative(),
  /** Their texts (cut short), per connection: `#3 SET NAMES utf8mb4`. */
  connectTexts: z.array(z.string()),
});
export type WireStatements = z.infer<typeof WireStatementsSchema>;

/**
 * Wire counts for one proxied connection, or summed over several. Command names are the protocol's own
 * (`COM_QUERY`, `COM_STMT_EXECUTE`, `Parse`, `Bind`, `Sync`, ...); unknown MySQL commands are `COM_0xNN`.
 */
export const WireCountsSchema = z.object({
  protocol: WireProtocolSchema,
  /** Client commands (MySQL) or frontend messages (PostgreSQL) by name, after the handshake. */
  commands: z.record(z.string(), z.number().int().nonnegative()),
  commandsTotal: z.number().int().nonnegative(),
  /** Requests answered: MySQL command -> final OK/ERR/EOF/result end; PostgreSQL Sync or Query -> ReadyForQuery. */
  roundTrips: z.number().int().nonnegative(),
  bytesClientToServer: z.number().int().nonnegative(),
  bytesServerToClient: z.number().int().nonnegative(),
  /** Socket writes from the client carrying at least one command: N commands in 1 write is pipelining. */
  clientWrites: z.number().int().nonnegative(),
  /** Connections these counts cover (for a window: those that carried traffic in it or were opened in it). */
  connections: z.number().int().nonnegative(),
  /** True when any covered connection could not be parsed to the end (TLS, parse error, cut mid-frame). */
  incomplete: z.boolean(),
  incompleteReasons: z.array(z.string()),
  /**
   * Server responses by name after the handshake: MySQL `OK`, `ERR`, `EOF`, `ResultSet`, `ColumnDefinition`, `Row`,
   * `PrepareOK`; PostgreSQL backend messages (`ParseComplete`, `CommandComplete`, `ErrorResponse`, ...).
   */
  serverMessages: z.record(z.string(), z.number().int().nonnegative()).optional(),
  /**
   * Rows the server reported changed: MySQL OK packets' affected rows and the rows of an `INSERT ... RETURNING`
   * result set (MariaDB answers it with no OK packet); PostgreSQL INSERT/UPDATE/DELETE/MERGE/COPY
   * tags. Absent when some answer carried its counts elsewhere (MariaDB 11.5+ bulk unit results), never a guess.
   */
  rowsAffected: z.number().int().nonnegative().optional(),
  /** Requests still waiting for their answer when the count was taken; a window with any is `incomplete`. */
  unansweredRequests: z.number().int().nonnegative().optional(),
  /**
   * One connection's counts only: the client had sent part of a message and not the rest when the count was taken
   * (a network cut mid-write shows here before the proxy sees the socket close). A window with one is `incomplete`.
   */
  clientMidMessage: z.boolean().optional(),
  /** Handshake traffic, outside the command counts above. */
  setup: WireSetupSchema.optional(),
  /** One connection's counts only: the text of the last statement its client sent (cut short), to name a request in flight. */
  lastRequestText: z.string().optional(),
  /** Statement by statement, as the server's answers tell it. */
  statements: WireStatementsSchema.optional(),
});
export type WireCounts = z.infer<typeof WireCountsSchema>;

/** One proxied client connection, with cumulative counts since it was accepted. */
export const WireConnectionSchema = z.object({
  /** The proxy's own number for the connection, from 1, never reused within one proxy. */
  id: z.number().int().positive(),
  /** MySQL connection (thread) id from the greeting; PostgreSQL backend pid from BackendKeyData; null until seen. */
  serverConnectionId: z.number().int().nullable(),
  openedAtNs: z.number().int().nonnegative(),
  closedAtNs: z.number().int().nonnegative().nullable(),
  /** Cumulative counts; `connections` is 1. */
  counts: WireCountsSchema,
});
export type WireConnection = z.infer<typeof WireConnectionSchema>;

/** Every connection a proxy has seen (closed ones included), at one instant. Diff two of them for a window. */
export const WireSnapshotSchema = z.object({
  /** Identifies the proxy, so snapshots of different proxies are never diffed. */
  proxyId: z.string(),
  /** The proxy's protocol: what an empty window's counts are counts of. */
  protocol: WireProtocolSchema,
  takenAtNs: z.number().int().nonnegative(),
  connections: z.array(WireConnectionSchema),
  /**
   * A passive capture's faults so far, oldest first (kernel drops, a capture process that died, a window edge it did
   * not reach): a window whose `after` holds more than its `before` is `incomplete` for those.
   */
  captureFaults: z.array(z.string()).optional(),
});
export type WireSnapshot = z.infer<typeof WireSnapshotSchema>;
