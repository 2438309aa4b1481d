import { z } from 'zod';
import { BackendNameSchema, FlavourSchema, WireProtocolSchema, type BackendName, type ConnectionInfo } from '../shared/servers';

// Born in shared/ so that the driver layer, below this one, can name them too.
export { BACKEND_NAMES, BackendNameSchema, FlavourSchema, WIRE_PROTOCOLS, WireProtocolSchema } from '../shared/servers';
export type { BackendName, ConnectionInfo, Flavour, NetworkConnection, SqliteConnection, WireProtocol } from '../shared/servers';

/** How a backend was obtained, in the order they are tried (sqlite only ever uses `embedded`). */
export const PROVIDER_KINDS = ['external', 'testcontainers', 'local', 'embedded'] as const;
export const ProviderKindSchema = z.enum(PROVIDER_KINDS);
export type ProviderKind = z.infer<typeof ProviderKindSchema>;

/**
 * What a backend can tell us, as data the probes and the verdict read. Static per backend file, then refined
 * from what the started server reports (an external MariaDB may have `performance_schema` off).
 */
export const CapabilitiesSchema = z.object({
  /** A TCP protocol sqltally can proxy and parse (false for in-process SQLite). */
  wireProtocol: WireProtocolSchema.nullable(),
  /** Per-connection statement counts exist (MySQL/MariaDB `performance_schema`). */
  perThreadStatements: z.boolean(),
  /** Per-statement execution counts exist (`pg_stat_statements`). */
  statementStats: z.boolean(),
  /** The server-wide inserted-rows counter this server has, if any. */
  rowCounter: z.enum(['Innodb_rows_inserted', 'Handler_write', 'n_tup_ins', 'total_changes']).nullable(),
  /** `COM_STMT_BULK_EXECUTE` is advertised (MariaDB). */
  bulkExecute: z.boolean(),
  /** Most bind values one statement may carry on this backend's protocol. */
  maxBindValues: z.number().int().positive(),
  /** sqltally started this server privately, so any other client connection is unexpected. */
  privateServer: z.boolean(),
});
export type Capabilities = z.infer<typeof CapabilitiesSchema>;

/** A description of a started backend, fit for reports: no password, no live handles. */
export const BackendDescriptionSchema = z.object({
  name: BackendNameSchema,
  /** Addressable id: `mariadb@10.11`, `postgres@15`, `sqlite@3.50`. */
  id: z.string(),
  flavour: FlavourSchema,
  serverVersion: z.string(),
  provider: ProviderKindSchema,
  /** Binary path, image name, or URL without password. */
  origin: z.string(),
  capabilities: CapabilitiesSchema,
  /** Spawn (or connect) to first successful query, in ms. */
  readyMs: z.number().nonnegative(),
});
export type BackendDescription = z.infer<typeof BackendDescriptionSchema>;

/**
 * A server that is up and answering queries. Different from a configured backend (which may be skipped):
 * holding one means a real query has already succeeded. Dispose it with `await using` or call `stop()`.
 */
export interface StartedBackend extends AsyncDisposable {
  readonly description: BackendDescription;
  readonly connection: ConnectionInfo;
  /** The server process sqltally spawned (local provider only), so a test can prove it is gone after stop. */
  readonly pid?: number;
  /** The engine's id of the container sqltally started (Testcontainers provider only), for the same purpose. */
  readonly containerId?: string;
  /** The private directory sqltally created (local and embedded), removed by stop. */
  readonly dataDir?: string;
  /**
   * The server's own log file, where sqltally started the server with one (private PostgreSQL: the logging
   * collector's file in the data directory, one line per message prefixed `%m [%p] `). Statement logging is off
   * until someone turns it on (`ALTER SYSTEM SET log_statement = 'all'`); removed with the data directory.
   */
  readonly logFile?: string;
  /** Stops the server if sqltally started it and removes its private data; idempotent. */
  stop(): Promise<void>;
}

/** Why a backend cannot be had here, in words a person can act on. */
export interface Unavailable {
  available: false;
  backend: BackendName;
  /** The id as addressed (`mariadb`, `postgres@15`). */
  id?: string;
  reason: string;
  /** What each provider said, in the order they were tried. */
  tried: { provider: ProviderKind; reason: string }[];
  /**
   * Set when a person configured this backend and the configuration cannot be used (a malformed
   * `SQLTALLY_<BACKEND>_URL`): a run must fail on it, not skip it as if nothing had been asked.
   */
  misconfigured?: { variable: string };
}

/** A provider that can start the backend, chosen but not yet started. */
export interface Available {
  available: true;
  backend: BackendName;
  /** The id as addressed (`mariadb`, `postgres@15`). */
  id?: string;
  /** Version the provider expects to start, when known before starting (a local binary's `--version`). */
  expectedVersion?: string;
  provider: ProviderKind;
  /** Binary, image or redacted URL that will be used. */
  origin: string;
  /** Those tried first and passed over, with why. */
  tried: { provider: ProviderKind; reason: string }[];
  start(): Promise<StartedBackend>;
}

export type Resolution = Available | Unavailable;
