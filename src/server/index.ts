import { SqltallyError } from '../shared/errors';
import type { ConnectionInfo, Flavour, NetworkConnection, StartedBackend } from '../backends/types';
import { MARIADB_TRAITS } from './mariadb';
import { MysqlFamilySource } from './mysql-family';
import { MYSQL_TRAITS } from './mysql';
import { PostgresSource } from './postgres';
import type { ProbeOptions, ServerProbe } from './probe';
import { SnapshotProbe, type SnapshotSource } from './snapshot-probe';
import { SqliteSource } from './sqlite';

export type { OpenWindow, ProbeCost, ProbeOptions, ServerProbe, WindowContext } from './probe';
export * from './types';
export * from './server-work';

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

/** One source per server flavour: the flavour the server reported, not the name it was addressed by. */
const SOURCES = {
  mysql: (b, _opts) => new MysqlFamilySource(b.description, network(b), MYSQL_TRAITS),
  mariadb: (b, _opts) => new MysqlFamilySource(b.description, network(b), MARIADB_TRAITS),
  postgres: (b, opts) => new PostgresSource(b.description, network(b), opts),
  sqlite: (b, _opts) => new SqliteSource(b.description),
} satisfies Record<Flavour, (backend: StartedBackend, opts: ProbeOptions) => SnapshotSource>;

/**
 * Opens a server probe for a started backend, on its own connection (SQLite reads through the workload's handle,
 * see `WindowContext.onWorkloadConnection`). Throws a SqltallyError (phase `probe`) only when the probe cannot
 * connect at all; counters it cannot read make the layer incomplete or add a note instead.
 */
export async function createProbe(backend: StartedBackend, opts: ProbeOptions = {}): Promise<ServerProbe> {
  const source = SOURCES[backend.description.flavour](backend, opts);
  await source.open();
  return new SnapshotProbe(source, opts);
}
