import type { DriverName } from '../shared/driver-names';
import { CAPABILITIES } from './capabilities';
import type { BackendDescription, BackendName, Capabilities, ConnectionInfo, Flavour, NetworkConnection, ProviderKind, StartedBackend } from './types';

/**
 * Options a provider's `start` receives. `env` is the environment the caller resolved against (tests pass
 * their own); `pickPort` lets a test hand out a port that is already taken, to prove the bind retry.
 */
export interface StartOptions {
  env: NodeJS.ProcessEnv;
  /** Backend id as the user addressed it (`mariadb`, `postgres@15`), for error messages. */
  id: string;
  pickPort?: () => Promise<number>;
}

/**
 * A server binary (or the embedded engine) found on this machine. Each one is a variant of its backend,
 * addressable as `<backend>@<label>`. A new way to get binaries (a chroot, a tarball) is a new `InstallFinder`.
 */
export interface LocalInstall {
  backend: BackendName;
  provider: Extract<ProviderKind, 'local' | 'embedded'>;
  /** Version as the binary reports it, e.g. `10.11.19-MariaDB`. */
  version: string;
  /** Variant label used in ids: `10.11`, `15`. */
  label: string;
  /** The server binary (or library) path, shown to people as where the backend came from. */
  origin: string;
  start(options: StartOptions): Promise<StartedBackend>;
}

/** What a finder saw: the installs it found, or in words why there are none. */
export interface InstallSearch {
  installs: LocalInstall[];
  /** Short phrases such as "no mariadbd on PATH or in /usr/sbin", joined into the skip reason. */
  missing: string[];
}

export type InstallFinder = (env: NodeJS.ProcessEnv) => Promise<InstallSearch>;

/** What a server says about itself after the first query: the truth the description records. */
export interface ServerIdentity {
  flavour: Flavour;
  serverVersion: string;
  /**
   * Capabilities read from the server itself: they override the declared ones (an external MariaDB may have
   * performance_schema off, an account may not read pg_stat_statements, a SQLite build may allow more variables).
   */
  refined: Partial<Capabilities>;
}

/**
 * The plain description of a container a Testcontainers provider will start: kept as data so it can be checked
 * without a container engine.
 */
export interface ContainerPlan {
  image: string;
  command: string[];
  environment: Record<string, string>;
  /** Always false: two test files sharing a server would share its counters. */
  reuse: false;
  containerPort: number;
  user: string;
  password: string;
  database: string;
}

/**
 * Everything the registry needs to know about one backend. One object per backend file; the registry's
 * `satisfies Record<BackendName, BackendModule>` makes a forgotten backend a compile error.
 */
export interface BackendModule {
  readonly name: BackendName;
  /** Providers this backend can use, in the order they are tried. */
  readonly providers: readonly ProviderKind[];
  /** URL schemes accepted in `SQLTALLY_<BACKEND>_URL`. */
  readonly urlSchemes: readonly string[];
  /** The JDBC scheme of the backend's usual Java driver (PgJDBC `postgresql`, MariaDB Connector/J `mariadb`), for a child's `SQLTALLY_JDBC_URL`. */
  readonly jdbcScheme: string;
  /**
   * The driver that resets, checks and reads back the workload's table here (and whose raw-SQL strategy is the
   * backend's raw-SQL twin): the one with no batching surprises. It must list this backend in its `backends`.
   */
  readonly readDriver: DriverName;
  readonly defaultPort: number | null;
  /** The Testcontainers image used unless `SQLTALLY_<BACKEND>_IMAGE` says otherwise. */
  readonly defaultImage: string | null;
  /** Finishes the skip reason: what a person can do to get this backend. */
  readonly unavailableHint: string;
  readonly installFinders: readonly InstallFinder[];
  /**
   * Server options every private server of this backend is started with (local, root filesystem, container) so that
   * it does not offer TLS where the engine does by default: a client that takes TLS up cannot be read by a passive
   * wire capture. Empty where the engine offers none unless configured.
   */
  readonly plainTextOptions: readonly string[];
  /** `10.11.19-MariaDB-0+deb12u1` -> `10.11`: the part of a version a variant id names. */
  variantLabel(version: string): string;
  /** Reads version and flavour from the server with a real query. */
  identify?(connection: NetworkConnection): Promise<ServerIdentity>;
  /** Opens and closes one connection running one trivial query; throws if the server does not answer. */
  ping?(connection: NetworkConnection): Promise<void>;
  /** Creates what a freshly started server needs (database, extensions); not run against external servers. */
  prepare?(connection: NetworkConnection): Promise<void>;
  containerPlan?(image: string): ContainerPlan;
  /** How the plan becomes a Testcontainers container: absent where the backend has no container form. */
  readonly containerBuilder?: ContainerBuilder;
}

/** A container Testcontainers started, as far as sqltally uses it. */
export interface StartedContainer {
  getId(): string;
  getHost(): string;
  getMappedPort(port: number): number;
  stop(): Promise<unknown>;
}

/** A backend's Testcontainers module, loaded lazily (an optional peer dependency) once an engine has answered. */
export interface ContainerBuilder {
  /** Its npm package, for the hint when it is not installed. */
  readonly packageName: string;
  build(plan: ContainerPlan): Promise<{ start(): Promise<StartedContainer> }>;
}

/**
 * Builds the description every provider returns, so `id` is always derived the same way. This is the one place a
 * capability detected on the server (`identity.refined`) overrides the one declared for its flavour; probes,
 * chunking and reports all read the result from `description.capabilities`.
 */
export function describeBackend(
  module: BackendModule,
  identity: ServerIdentity,
  provider: ProviderKind,
  origin: string,
  readyNs: bigint,
  privateServer: boolean,
): BackendDescription {
  return {
    name: module.name,
    id: `${module.name}@${module.variantLabel(identity.serverVersion)}`,
    flavour: identity.flavour,
    serverVersion: identity.serverVersion,
    provider,
    origin,
    // Keyed by what the server turned out to be: a MariaDB reached through SQLTALLY_MYSQL_URL counts like MariaDB.
    capabilities: { ...CAPABILITIES[identity.flavour], ...identity.refined, privateServer },
    readyMs: Number(readyNs) / 1e6,
  };
}

/**
 * Wraps a stop function so it runs once whatever the number of callers, and makes the result disposable.
 */
export function startedBackend(
  description: BackendDescription,
  connection: ConnectionInfo,
  stop: () => Promise<void>,
  resources: { pid?: number; containerId?: string; dataDir?: string; logFile?: string } = {},
): StartedBackend {
  let stopping: Promise<void> | undefined;
  const once = (): Promise<void> => (stopping ??= stop());
  return {
    description,
    connection,
    ...(resources.pid !== undefined ? { pid: resources.pid } : {}),
    ...(resources.containerId !== undefined ? { containerId: resources.containerId } : {}),
    ...(resources.dataDir !== undefined ? { dataDir: resources.dataDir } : {}),
    ...(resources.logFile !== undefined ? { logFile: resources.logFile } : {}),
    stop: once,
    [Symbol.asyncDispose]: once,
  };
}

/** Leading dotted number of a version string, up to `parts` components: ('10.11.19-MariaDB', 2) -> '10.11'. */
export function leadingVersion(version: string, parts: number): string {
  const match = /^(\d+(?:\.\d+)*)/.exec(version.trim());
  if (!match?.[1]) return version.trim();
  return match[1].split('.').slice(0, parts).join('.');
}
