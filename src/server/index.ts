import { SqltallyError } from '../shared/errors';
import type { ConnectionInfo, Flavour, NetworkConnection, StartedBackend, WireProtocol } from '../backends/types';
import { MARIADB_TRAITS } from './mariadb';
import { MYSQL_FAMILY_WINDOW_CHECKS, MYSQL_WIRE_MODEL, MysqlFamilySource } from './mysql-family';
import { MYSQL_TRAITS } from './mysql';
import { POSTGRES_WINDOW_CHECKS, POSTGRES_WIRE_MODEL, PostgresSource } from './postgres';
import type { ProbeOptions, ServerProbe } from './probe';
import { SnapshotProbe, type SnapshotSource } from './snapshot-probe';
import { SQLITE_WINDOW_CHECKS, SqliteSource } from './sqlite';
import type { ServerDialect } from '../sql/tokenizer';
import type { WindowCheck } from './types';
import type { WireModel } from './wire-model';

export type { OpenWindow, ProbeCost, ProbeOptions, ServerProbe, WindowContext } from './probe';
export * from './types';
export * from './server-work';
export type { WireExpectation, WireModel } from './wire-model';

function network(backend: StartedBackend): NetworkConnection {
  const c: ConnectionInfo = backend.connection;
  if (c.kind !== 'network') {
    throw new SqltallyError(`backend ${backend.description.id} has no network connection for a probe`, {
      backend: backend.description.id,
      phase: 'probe',
    });
  }
  return c;
}

/** What the probes know about one server flavour: how to read it, and what the verdict compares on its counters. */
export interface ProbeSourceModule {
  create(backend: StartedBackend, opts: ProbeOptions): SnapshotSource;
  /** Comparisons of the server's counters with the window's own work (run by the verdict's `beyondWindow`). */
  readonly windowChecks: readonly WindowCheck[];
  /** How the server's SQL is written: the statement texts it reports are fingerprinted by these rules. */
  readonly dialect: ServerDialect;
}

/** One source per server flavour: the flavour the server reported, not the name it was addressed by. */
const SOURCES = {
  mysql: {
    create: (b, opts) => new MysqlFamilySource(b.description, network(b), MYSQL_TRAITS, opts),
    windowChecks: MYSQL_FAMILY_WINDOW_CHECKS,
    dialect: 'mysql',
  },
  mariadb: {
    create: (b, opts) => new MysqlFamilySource(b.description, network(b), MARIADB_TRAITS, opts),
    windowChecks: MYSQL_FAMILY_WINDOW_CHECKS,
    dialect: 'mysql',
  },
  postgres: { create: (b, opts) => new PostgresSource(b.description, network(b), opts), windowChecks: POSTGRES_WINDOW_CHECKS, dialect: 'postgres' },
  sqlite: { create: (b) => new SqliteSource(b.description), windowChecks: SQLITE_WINDOW_CHECKS, dialect: 'sqlite' },
} satisfies Record<Flavour, ProbeSourceModule>;

/** The comparisons the verdict makes on a server of this flavour (see {@link ProbeSourceModule.windowChecks}). */
export function windowChecksOf(flavour: Flavour): readonly WindowCheck[] {
  return SOURCES[flavour].windowChecks;
}

/** The SQL dialect of a server of this flavour (see {@link ProbeSourceModule.dialect}). */
export function dialectOf(flavour: Flavour): ServerDialect {
  return SOURCES[flavour].dialect;
}

/**
 * What each wire protocol's statements predict for its servers' counters, keyed so that a new protocol cannot be
 * left without one (the verdict's wire model, src/verdict/wire-model.ts, asks it).
 */
const WIRE_MODELS = {
  mysql: MYSQL_WIRE_MODEL,
  postgres: POSTGRES_WIRE_MODEL,
} satisfies Record<WireProtocol, WireModel>;

/** The wire model of a protocol's servers (see {@link WIRE_MODELS}). */
export function wireModelOf(protocol: WireProtocol): WireModel {
  return WIRE_MODELS[protocol];
}

/**
 * Opens a server probe for a started backend, on its own connection (SQLite reads through the workload's handle,
 * see `WindowContext.onWorkloadConnection`). Throws a SqltallyError (phase `probe`) only when the probe cannot
 * connect at all; counters it cannot read make the layer incomplete or add a note instead.
 */
export async function createProbe(backend: StartedBackend, opts: ProbeOptions = {}): Promise<ServerProbe> {
  const source = SOURCES[backend.description.flavour].create(backend, opts);
  await source.open();
  return new SnapshotProbe(source, opts);
}
