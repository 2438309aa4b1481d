import type { Duplex } from 'node:stream';
import type { CallKind, CallProtocol, StatementClass, StatementSink } from '../sql/events';
import type { SqlDialect } from '../sql/tokenizer';
import type { DriverName } from '../shared/driver-names';
import type { BackendName, ConnectionInfo, ServerSummary, WireProtocol } from '../shared/servers';

/**
 * An in-process stream to the server (the wire proxy's `openStream()`, src/wire/proxy.ts), as drivers are handed it:
 * a Duplex that also answers a socket's `connect()`.
 */
export interface ServerStream extends Duplex {
  connect(...ignored: unknown[]): this;
}

/** How to open a connection. */
export interface OpenOptions {
  /** Connect here instead of the backend's own address: the wire proxy's listening host/port. */
  host?: string;
  port?: number;
  /**
   * Passed to the driver as they are, over sqltally's defaults: `{ bulk: false }` for mariadb,
   * `{ pipeline: true }` for pg, `{ readonly: true }` for better-sqlite3.
   */
  driverOptions?: Record<string, unknown>;
  /** Backend id for error messages (`mariadb@10.11`). */
  backend?: string;
  /**
   * The package to load instead of the driver's own name: a second release installed under an npm alias
   * (`mariadb-3.3` for `npm:mariadb@3.3.2`), so two releases run side by side in one report.
   */
  driverPackage?: string;
  /** Give up connecting after this long (sqltally's own SQL: readiness checks, probes); the driver's default otherwise. */
  connectTimeoutMs?: number;
  /** Open it read-only where the driver can (a SQLite file); network drivers ignore it. */
  readOnly?: boolean;
  /**
   * Connect through the in-process stream this returns (the wire proxy's `openStream()`) instead of a socket to
   * host and port, where the driver takes one ({@link DriverModule.streamOptions}); ignored where it does not.
   */
  stream?: () => ServerStream;
}

/**
 * A raw connection a module opened. `connectionId` is the server's own id for it (MySQL thread id, PostgreSQL
 * backend pid; null for SQLite, or when the driver keeps a pool that opens connections on demand).
 */
export interface Opened<H> {
  handle: H;
  connectionId: number | null;
  /**
   * Server ids of connections the module opened and closed itself on the way to this one (mariadb reads the server's
   * max_allowed_packet on a first connection). Their goodbyes may still be on their way when a window opens.
   */
  closedWhileOpening?: readonly number[];
  close(): Promise<void>;
}

/** One statement of sqltally's own SQL with its parameters (`?` or `$n`), and its rows keyed by column name. */
export type OwnSqlQuery = (sql: string, params?: readonly unknown[]) => Promise<Record<string, unknown>[]>;

/** Row-reading over a raw handle: the read and verify paths need nothing more. */
export interface RowSource {
  /** Runs a SELECT with positional parameters (`?` or `$n`, as the dialect writes them) and returns its rows. */
  all(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /**
   * True when the driver hands back a 64-bit integer as a JS number, which loses digits above 2^53: a reader selects
   * such columns as text instead.
   */
  readonly lossyInt64?: boolean;
}

/** What the model expects a count to be: prepares may be cached from before the window, bulk may be chunked. */
export interface Range {
  min: number;
  max: number;
}

/** The server's statement-class counters a group of calls moves (inserts, commits), by the calls' own class. */
export function classCounts(group: CallGroup, calls: Range): Partial<Record<keyof ServerSummary, Range>> {
  const out: Partial<Record<keyof ServerSummary, Range>> = {};
  if (group.statementClass === 'insert') out.inserts = calls;
  if (group.statementClass === 'commit') out.commits = calls;
  return out;
}

/** `3` or `0-1`, for reconciliation lines and discrepancies. */
export function rangeText(r: Range): string {
  if (r.max >= UNBOUNDED) return `${r.min} or more`;
  return r.min === r.max ? `${r.min}` : `${r.min}-${r.max}`;
}

/** A range's max where nothing bounds it from above (rows a failed INSERT wrote before it failed). */
export const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * Calls of one kind with one SQL text on one connection: the unit a driver model reasons about. A driver caches
 * prepared statements per connection and SQL text, so that is what a group is keyed by.
 */
export interface CallGroup {
  kind: CallKind;
  sql: string;
  statementClass: StatementClass;
  connectionId: number | null;
  calls: number;
  parameterSets: number;
  /** Calls that carried at least one parameter set (a batch of 0 rows sends nothing). */
  callsWithParameterSets: number;
  /** Calls that bound at least one value. */
  callsWithValues: number;
  /** Calls that failed: anywhere from before anything was sent to after the server ran them. */
  errors: number;
  /** Calls by the protocol the wrapper saw them go out with ({@link CallShape.protocol}); the rest are untagged. */
  byProtocol: Record<CallProtocol, number>;
}

/** What one group of driver calls contributes, per layer, and the words for the reconciliation line. */
export interface Contribution {
  wire: Record<string, Range>;
  server: Partial<Record<keyof ServerSummary, Range>>;
  /** "1 COM_STMT_EXECUTE", "Parse/Bind/Execute/Sync". */
  wireWords: string;
  serverWords: string;
}

/** What the model may know beyond the calls: the server's bulk support and the driver options in force. */
export interface ModelContext {
  /** The backend's capabilities the models read (`Capabilities` in src/backends/types.ts). */
  capabilities: { bulkExecute: boolean; wireProtocol: WireProtocol | null };
  driverOptions: Readonly<Record<string, unknown>>;
  /** The counted driver package's version as installed (`3.26.1`), null when unknown: where releases behave differently. */
  driverVersion: string | null;
  /**
   * For a group whose calls need the statement prepared on its connection: at most how many prepares it causes
   * (fewer when cached from before the window). 1 when no earlier group of the window needed the same text prepared
   * on the same connection, 0 when one did. Calls whose connection the wrapper does not know (a pool's own methods)
   * may each run on another of the window's connections, each of which prepares the text once: up to as many as the
   * window has connections. The first group to ask claims them; a model asks only for calls that prepare.
   */
  claimPrepare(): number;
}

/** How a driver turns calls into wire commands and server statements, per group (see {@link CallGroup}). */
export type DriverModel = (group: CallGroup, ctx: ModelContext) => Contribution;

/**
 * Everything sqltally knows about one driver, in one object per driver file. The registry (registry.ts) is typed
 * `satisfies { [D in DriverName]: DriverModule<D, ...> }`, so a new driver is a compile error until every member
 * below is filled.
 */
export interface DriverModule<D extends DriverName, H extends object> {
  readonly name: D;
  /** The npm package a user installs (and the default one sqltally loads). */
  readonly packageName: string;
  /** Backends it talks to, in the order the default driver of a backend is picked. */
  readonly backends: readonly BackendName[];
  /** Lexical rules for its SQL (classification, placeholders, fingerprints, identifier quoting). */
  readonly dialect: SqlDialect;
  /**
   * Whether a handle of it is the server itself (an in-process engine): the probe then reads the engine's counters
   * through that very handle (SQLite's `total_changes()`), so capture keeps every one counted into a session, and
   * drops it once {@link isClosed} says so. False for a driver that talks to a server over a connection.
   */
  readonly embedded: boolean;
  /** Whether a handle has been closed (asked only of {@link embedded} drivers). */
  isClosed(handle: H): boolean;
  /**
   * Further releases installed beside the default under npm aliases (package.json:
   * `"mariadb-3.3": "npm:mariadb@3.3.2"`); the main job runs each installed one side by side.
   */
  readonly releases: readonly string[];
  /**
   * Older and newer releases installed under npm aliases for the compatibility tests alone
   * (integration/driver-paths.test.ts runs each on the fast and the plain path, src/driver/compat); the main job
   * does not run them, so its default matrix stays as long as it was.
   */
  readonly compatReleases: readonly string[];
  /** Opens one raw connection (never a pool) to the backend, with sqltally's defaults under `driverOptions`. */
  open(connection: ConnectionInfo, opts: OpenOptions): Promise<Opened<H>>;
  /** Counts every call on a driver object into `sink`; same type and behaviour out, idempotent. */
  wrap<T extends object>(target: T, sink: StatementSink): T;
  /** Whether `value` is an object of this driver that {@link wrap} counts (connection, pool, database). */
  recognises(value: unknown): boolean;
  /** A short description of what `wrap` accepts, for the error when something else is handed in. */
  readonly accepts: string;
  /**
   * The driver options that make it connect through an in-process stream `open()` returns instead of a socket
   * (pg's and mysql2's `stream`, postgres.js's `socket`, mariadb's `stream` callback), spread over its other
   * options; a function, so each connection of a pool gets its own. Null for a driver that cannot take one.
   */
  readonly streamOptions: ((open: () => ServerStream) => Record<string, unknown>) | null;
  /**
   * sqltally's own SQL with positional parameters on a raw handle from {@link open}, for the plain client that
   * starts, identifies and probes servers (src/backends/sql-client.ts): the text protocol on MySQL, since a prepared
   * statement would move the server's own `Com_stmt_prepare`. `onLost` hears the error that breaks the connection (a
   * server that went away). Null for an embedded engine: its own SQL runs on the counted handles ({@link runSql}).
   */
  readonly ownSql: ((handle: H, onLost: (message: string) => void) => OwnSqlQuery) | null;
  /** Runs sqltally's own SQL on a raw handle and returns the rows (DDL, truncation, a probe's flush). */
  runSql(handle: H, sql: string): Promise<unknown[]>;
  /**
   * A no-op round trip that is not itself counted as a statement (MySQL `COM_PING`), or null. MySQL files a
   * statement in performance_schema after answering it; a ping answered on the same connection waits that out.
   */
  ping: ((handle: H) => Promise<void>) | null;
  /** Reads rows back (verification, the read path) through a raw handle of this driver. */
  rowSource(handle: H): RowSource;
  /** How its calls become wire commands and server statements: the reconciliation's model. */
  readonly model: DriverModel;
  /**
   * Whether the bytes it sends for the same calls are the same on every connection. postgres.js names its prepared
   * statements with a random prefix per connection, so its Parse/Bind bytes differ from run to run: a rerun cannot
   * reproduce them, and a gate must not compare them.
   */
  readonly stableWireBytes: boolean;
}

/**
 * A module whatever its handle type: each driver file checks its own with `satisfies DriverModule<name, Handle>`,
 * and the registry needs only that every name has one (the handle sits on both sides of its methods, so no single
 * handle type would fit all).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type SomeDriverModule<D extends DriverName> = DriverModule<D, any>;
