import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { startBackend } from '../src/backends/registry';
import { withSqlClient } from '../src/backends/sql-client';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import { createProbe, type ServerLayer, type ServerProbe, type WindowContext } from '../src/server';
import { startWireProxy, type WireProxy } from '../src/wire/proxy';

/**
 * The race behind issue 12.8, and its fix, in figures. The server files a statement in its own bookkeeping after it
 * has answered it (MySQL/MariaDB performance_schema), or flushes a session's statistics on its own schedule
 * (PostgreSQL), so a reading taken right after the answer can miss the statement. N windows of one single-row
 * INSERT each, the writer's own counters read right after the INSERT's answer, in three ways:
 *
 * - `unsettled`: nothing settles the writer's connection before the reading (a user's pool, before the wire proxy
 *   settled connections itself);
 * - `driver ping` (MySQL family) / `own flush` (PostgreSQL): the writer settled by sqltally through the driver, as
 *   a `wire: false` session does (`src/capture/own-settle.ts`; PostgreSQL's probe flushes the session connection);
 * - `wire proxy`: the writer connected through the wire proxy, which settles every quiet connection it carries
 *   (`WireProxy.settle`: COM_PING, `SELECT pg_stat_force_next_flush()`), the default path.
 *
 * Two readings: `read` is one query on a connection of the bench's own, sent as soon as the INSERT is answered
 * (MySQL: the writer thread's `statement/sql/insert` count in performance_schema; PostgreSQL: the table's
 * `n_tup_ins`), the closest a reading can follow the answer; `probe` (with `--probe-windows N`) is the real probe's
 * window (control, start and end snapshots), whose end reading starts with the process list and so follows the
 * answer less closely. A window "missed" the INSERT when its reading does not show it: `read` compares with the
 * count every INSERT so far must have made, `probe` with a summary of exactly one statement, insert and row. Counts,
 * not times, are the result.
 *
 *   npx tsx bench/settle-race.ts [mariadb mysql postgres] [--windows 2000] [--probe-windows 0]
 */

const DEFAULT_WINDOWS = 2000;
const DEFAULT_PROBE_WINDOWS = 0;

type Mode = 'unsettled' | 'driver ping' | 'own flush' | 'wire proxy';

export interface RaceResult {
  backend: string;
  serverVersion: string;
  reading: 'read' | 'probe';
  mode: Mode;
  windows: number;
  /** Windows whose reading missed the INSERT in at least one field. */
  missed: number;
  /** Misses per summary field (statements, inserts, rowsInserted). */
  missedBy: Record<string, number>;
}

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

/** The fields one single-row INSERT must move by exactly 1; null fields (not counted by this server) are left out. */
function missedFields(layer: ServerLayer): string[] {
  const s = layer.summary;
  const fields = { statements: s.statements, inserts: s.inserts, rowsInserted: s.rowsInserted };
  return Object.entries(fields)
    .filter(([, v]) => v !== null && v !== 1)
    .map(([k]) => k);
}

/** One writer connection, whatever the protocol: its server id, an INSERT, its own settle, and its close. */
interface Writer {
  id: number;
  insert(i: number): Promise<void>;
  settle: (() => Promise<string[]>) | null;
  onWorkloadConnection?: (sql: string) => Promise<unknown[]>;
  close(): Promise<void>;
}

async function mysqlWriter(b: StartedBackend, table: string, mode: Mode, proxy: WireProxy | null): Promise<Writer> {
  const c = network(b);
  const conn = await mysql.createConnection({
    host: proxy?.host ?? c.host,
    port: proxy?.port ?? c.port,
    user: c.user,
    password: c.password,
    database: c.database,
  });
  return {
    id: conn.threadId,
    insert: async (i) => void (await conn.query(`INSERT INTO ${table} (a) VALUES (${i})`)),
    settle:
      mode === 'driver ping'
        ? async () => {
            await conn.ping();
            return [];
          }
        : mode === 'wire proxy' && proxy
          ? async () => (await proxy.settle()).busy.map((x) => `#${x.serverConnectionId}: ${x.why}`)
          : null,
    close: () => conn.end(),
  };
}

async function postgresWriter(b: StartedBackend, table: string, mode: Mode, proxy: WireProxy | null): Promise<Writer> {
  const c = network(b);
  const client = new Client({ host: proxy?.host ?? c.host, port: proxy?.port ?? c.port, user: c.user, password: c.password, database: c.database });
  client.on('error', () => undefined);
  await client.connect();
  return {
    id: (client as unknown as { processID: number }).processID,
    insert: async (i) => void (await client.query(`INSERT INTO public.${table} (a) VALUES ($1)`, [i])),
    settle: mode === 'wire proxy' && proxy ? async () => (await proxy.settle()).busy.map((x) => `#${x.serverConnectionId}: ${x.why}`) : null,
    // Without the proxy, the probe flushes the one writer session itself through this hook (`own flush`).
    ...(mode === 'own flush' ? { onWorkloadConnection: async (sql: string) => (await client.query(sql)).rows } : {}),
    close: () => client.end(),
  };
}

export async function measureProbeRace(backend: StartedBackend, mode: Mode, windows: number): Promise<RaceResult> {
  const postgres = backend.description.flavour === 'postgres';
  const table = `settle_race_${process.pid}_${mode.replace(/\W/g, '_')}`;
  const c = network(backend);
  const proxy = mode === 'wire proxy' ? await startWireProxy({ protocol: postgres ? 'postgres' : 'mysql', target: { host: c.host, port: c.port } }) : null;
  const writer = postgres ? await postgresWriter(backend, table, mode, proxy) : await mysqlWriter(backend, table, mode, proxy);
  let probe: ServerProbe | null = null;
  const missedBy: Record<string, number> = {};
  let missed = 0;
  try {
    // DDL goes around the window, on a connection of its own.
    await runAdmin(
      backend,
      postgres
        ? `CREATE TABLE public.${table} (id serial PRIMARY KEY, a int NOT NULL) WITH (autovacuum_enabled = false)`
        : `CREATE TABLE ${table} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL) ENGINE=InnoDB`,
    );
    probe = await createProbe(backend);
    const ctx: WindowContext = {
      workloadConnectionIds: [writer.id],
      table: { ...(postgres ? { schema: 'public' } : {}), name: table },
      ...(writer.settle ? { settle: writer.settle } : {}),
      ...(writer.onWorkloadConnection ? { onWorkloadConnection: writer.onWorkloadConnection } : {}),
    };
    await probe.calibrate(ctx);
    for (let i = 0; i < windows; i++) {
      const win = await probe.begin(ctx);
      await writer.insert(i);
      const layer = await win.end();
      const fields = missedFields(layer);
      if (fields.length > 0) missed += 1;
      for (const f of fields) missedBy[f] = (missedBy[f] ?? 0) + 1;
    }
  } finally {
    await probe?.close();
    await writer.close();
    await proxy?.close();
  }
  return { backend: backend.description.id, serverVersion: backend.description.serverVersion, reading: 'probe', mode, windows, missed, missedBy };
}

/** The writer's own counter, read in one query on a connection of the bench's own: MySQL family, PostgreSQL. */
async function counterReader(backend: StartedBackend, table: string, writerId: number): Promise<{ read: () => Promise<number>; close: () => Promise<void> }> {
  const c = network(backend);
  if (backend.description.flavour === 'postgres') {
    const client = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
    await client.connect();
    // Re-read the shared statistics every time instead of caching the first read in the transaction.
    await client.query('SET stats_fetch_consistency = none');
    return {
      read: async () =>
        Number((await client.query(`SELECT n_tup_ins AS n FROM pg_stat_user_tables WHERE relid = 'public.${table}'::regclass`)).rows[0]?.n ?? 0),
      close: () => client.end(),
    };
  }
  const conn = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
  const sql =
    'SELECT e.COUNT_STAR AS n FROM performance_schema.events_statements_summary_by_thread_by_event_name e ' +
    'JOIN performance_schema.threads t ON t.THREAD_ID = e.THREAD_ID ' +
    `WHERE t.PROCESSLIST_ID = ${Number(writerId)} AND e.EVENT_NAME = 'statement/sql/insert'`;
  return {
    read: async () => Number(((await conn.query(sql))[0] as { n: number }[])[0]?.n ?? 0),
    close: () => conn.end(),
  };
}

/** N single-row INSERTs, each followed (after the mode's settle, if any) by one reading of the writer's counter. */
export async function measureReadRace(backend: StartedBackend, mode: Mode, windows: number): Promise<RaceResult> {
  const postgres = backend.description.flavour === 'postgres';
  const table = `settle_read_${process.pid}_${mode.replace(/\W/g, '_')}`;
  const c = network(backend);
  const proxy = mode === 'wire proxy' ? await startWireProxy({ protocol: postgres ? 'postgres' : 'mysql', target: { host: c.host, port: c.port } }) : null;
  await runAdmin(
    backend,
    postgres
      ? `CREATE TABLE public.${table} (id serial PRIMARY KEY, a int NOT NULL) WITH (autovacuum_enabled = false)`
      : `CREATE TABLE ${table} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL) ENGINE=InnoDB`,
  );
  const writer = postgres ? await postgresWriter(backend, table, mode, proxy) : await mysqlWriter(backend, table, mode, proxy);
  const reader = await counterReader(backend, table, writer.id);
  let missed = 0;
  try {
    const settle = async (): Promise<void> => {
      if (writer.settle) {
        const busy = await writer.settle();
        if (busy.length > 0) throw new Error(`could not settle: ${busy.join('; ')}`);
      } else if (writer.onWorkloadConnection) await writer.onWorkloadConnection('SELECT pg_stat_force_next_flush()');
    };
    await settle();
    const base = await reader.read();
    for (let i = 0; i < windows; i++) {
      await writer.insert(i);
      await settle();
      if ((await reader.read()) < base + i + 1) missed += 1;
    }
  } finally {
    await reader.close();
    await writer.close();
    await proxy?.close();
  }
  return { backend: backend.description.id, serverVersion: backend.description.serverVersion, reading: 'read', mode, windows, missed, missedBy: {} };
}

async function runAdmin(backend: StartedBackend, sql: string): Promise<void> {
  const protocol = backend.description.flavour === 'postgres' ? 'postgres' : 'mysql';
  await withSqlClient(protocol, network(backend), { backend: backend.description.id }, async (client) => void (await client.query(sql)));
}

function intOption(argv: string[], name: string, fallback: number): number | null {
  const at = argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(argv[at + 1]);
  return Number.isInteger(value) && value >= 0 ? value : null;
}

async function main(argv: string[]): Promise<number> {
  const windows = intOption(argv, '--windows', DEFAULT_WINDOWS);
  const probeWindows = intOption(argv, '--probe-windows', DEFAULT_PROBE_WINDOWS);
  if (windows === null || probeWindows === null) {
    console.error('--windows and --probe-windows need a whole number');
    return 2;
  }
  const ids = argv.filter((a, i) => !a.startsWith('--') && !['--windows', '--probe-windows'].includes(argv[i - 1] ?? ''));
  let settledMissed = 0;
  for (const id of ids.length > 0 ? ids : ['mariadb', 'mysql', 'postgres']) {
    let backend: StartedBackend;
    try {
      backend = await startBackend(id);
    } catch (err) {
      console.log(`${id}: not measured: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
      continue;
    }
    try {
      const modes: Mode[] = backend.description.flavour === 'postgres' ? ['unsettled', 'own flush', 'wire proxy'] : ['unsettled', 'driver ping', 'wire proxy'];
      const runs: [number, (m: Mode) => Promise<RaceResult>][] = [
        [windows, (m) => measureReadRace(backend, m, windows)],
        [probeWindows, (m) => measureProbeRace(backend, m, probeWindows)],
      ];
      for (const [n, run] of runs) {
        if (n === 0) continue;
        for (const mode of modes) {
          const r = await run(mode);
          const by = Object.entries(r.missedBy)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ');
          console.log(
            `${r.backend} (${r.serverVersion}) ${r.reading.padEnd(5)} ${r.mode.padEnd(11)}: ${r.missed}/${r.windows} readings missed the INSERT${by ? ` (${by})` : ''}`,
          );
          if (mode !== 'unsettled') settledMissed += r.missed;
        }
      }
    } finally {
      await backend.stop();
    }
  }
  // A settled reading that misses is the bug this bench exists to catch.
  return settledMissed === 0 ? 0 : 1;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 2;
    },
  );
}
