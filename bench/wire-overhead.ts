/**
 * What the wire proxy costs.
 *
 *   npx tsx bench/wire-overhead.ts [--backends mariadb,postgres] [--rows 5000] [--pairs 15] [--json]
 *
 * Per backend: the same N-row multi-row insert (mysql2 `query(... VALUES ?)`, one COM_QUERY; pg one parameterised
 * INSERT, one Parse/Bind/Execute/Sync) on a direct connection and on one through the proxy, both opened beforehand
 * so connection set-up is not timed. Runs go in pairs whose order alternates (direct first, then proxied first)
 * so drift and cache warmth fall on both sides; the figure is the median of the per-pair ratios proxied/direct.
 * Every run gets an emptied table and is checked to have inserted N rows; every proxied run is checked to have
 * crossed the wire as exactly one statement and one round trip, complete. Target: ratio <= 1.10.
 */
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { startBackend } from '../containers/registry';
import type { NetworkConnection, StartedBackend } from '../containers/types';
import { startWireProxy } from '../counters/wire/proxy';
import type { WireProxy } from '../counters/wire/proxy';

const TARGET_RATIO = 1.1;

interface Side {
  /** Empties the table (not timed). */
  reset(): Promise<void>;
  /** The timed insert. */
  insert(rows: [number, string][]): Promise<void>;
  count(): Promise<number>;
  end(): Promise<void>;
}

interface BackendBench {
  open(c: { host: string; port: number; user: string; password: string; database: string }, table: string): Promise<Side>;
    /** What one insert must look like on the wire. */
  expectedCommands: Record<string, number>;
  protocol: 'mysql' | 'postgres';
}

const BENCHES: Record<'mariadb' | 'postgres', BackendBench> = {
  mariadb: {
    protocol: 'mysql',
    expectedCommands: { COM_QUERY: 1 },
    async open(c, table) {
      const conn = await mysql.createConnection({ ...c, multipleStatements: false });
      return {
        reset: async () => void (await conn.query(`TRUNCATE TABLE ${table}`)),
        insert: async (rows) => void (await conn.query(`INSERT INTO ${table} (id, label) VALUES ?`, [rows])),
        count: async () => Number(((await conn.query(`SELECT COUNT(*) AS n FROM ${table}`))[0] as { n: number }[])[0]?.n),
        end: () => conn.end(),
      };
    },
  },
  postgres: {
    protocol: 'postgres',
    expectedCommands: { Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 },
    async open(c, table) {
      const client = new Client(c);
      await client.connect();
      return {
        reset: async () => void (await client.query(`TRUNCATE TABLE ${table}`)),
        insert: async (rows) => {
          const placeholders = rows.map((_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ');
          await client.query(`INSERT INTO ${table} (id, label) VALUES ${placeholders}`, rows.flat());
        },
        count: async () => Number((await client.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${table}`)).rows[0]?.n),
        end: () => client.end(),
      };
    },
  },
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

async function timed(work: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - start);
}

interface Figures {
  backend: string;
  serverVersion: string;
  rows: number;
  pairs: number;
  medianRatio: number;
  directMedianMs: number;
  proxiedMedianMs: number;
  ratios: number[];
  withinTarget: boolean;
}

async function benchOne(name: 'mariadb' | 'postgres', rowsCount: number, pairs: number): Promise<Figures> {
  const bench = BENCHES[name];
  const backend: StartedBackend = await startBackend(name);
  let proxy: WireProxy | null = null;
  const sides: Side[] = [];
  try {
    if (backend.connection.kind !== 'network') throw new Error(`${name} is not a network backend`);
    const c: NetworkConnection = backend.connection;
    const table = `h3_wire_bench_${process.pid}`;
    const params = { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
    proxy = await startWireProxy({ protocol: bench.protocol, target: { host: c.host, port: c.port } });
    const direct = await bench.open(params, table);
    sides.push(direct);
    const admin = name === 'mariadb' ? await mysql.createConnection(params) : null;
    if (admin) {
      await admin.query(`CREATE TABLE IF NOT EXISTS ${table} (id INT NOT NULL, label VARCHAR(40) NOT NULL)`);
      await admin.end();
    } else {
      const pg = new Client(params);
      await pg.connect();
      await pg.query(`CREATE TABLE IF NOT EXISTS ${table} (id int NOT NULL, label text NOT NULL)`);
      await pg.end();
    }
    const proxied = await bench.open({ ...params, host: proxy.host, port: proxy.port }, table);
    sides.push(proxied);
    const rows: [number, string][] = Array.from({ length: rowsCount }, (_, i) => [i, `row-${i}`]);

    const run = async (side: Side, viaProxy: boolean): Promise<number> => {
      await side.reset();
      const before = viaProxy ? proxy?.snapshot() : undefined;
      const ns = await timed(() => side.insert(rows));
      if (viaProxy && proxy && before) {
        const wire = proxy.diff(before, proxy.snapshot());
        const ok = JSON.stringify(wire.commands) === JSON.stringify(bench.expectedCommands) && wire.roundTrips === 1 && !wire.incomplete;
        if (!ok) throw new Error(`${name}: unexpected wire counts ${JSON.stringify(wire)}`);
      }
      const n = await side.count();
      if (n !== rowsCount) throw new Error(`${name}: inserted ${n} rows, expected ${rowsCount}`);
      return ns;
    };

    // One warm-up pair, not kept.
    await run(direct, false);
    await run(proxied, true);
    const ratios: number[] = [];
    const directNs: number[] = [];
    const proxiedNs: number[] = [];
    for (let i = 0; i < pairs; i += 1) {
      let d: number;
      let p: number;
      if (i % 2 === 0) {
        d = await run(direct, false);
        p = await run(proxied, true);
      } else {
        p = await run(proxied, true);
        d = await run(direct, false);
      }
      directNs.push(d);
      proxiedNs.push(p);
      ratios.push(p / d);
    }
    const medianRatio = median(ratios);
    return {
      backend: backend.description.id,
      serverVersion: backend.description.serverVersion,
      rows: rowsCount,
      pairs,
      medianRatio,
      directMedianMs: median(directNs) / 1e6,
      proxiedMedianMs: median(proxiedNs) / 1e6,
      ratios,
      withinTarget: medianRatio <= TARGET_RATIO,
    };
  } finally {
    for (const side of sides) await side.end().catch(() => undefined);
    await proxy?.close();
    await backend.stop();
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      backends: { type: 'string', default: 'mariadb,postgres' },
      rows: { type: 'string', default: '5000' },
      pairs: { type: 'string', default: '15' },
      json: { type: 'boolean', default: false },
    },
  });
  const rows = Number(values.rows);
  const pairs = Number(values.pairs);
  if (!Number.isInteger(rows) || rows <= 0 || !Number.isInteger(pairs) || pairs <= 0) {
    console.error('--rows and --pairs must be positive integers');
    return 2;
  }
  const names = (values.backends ?? '').split(',').filter(Boolean);
  const figures: Figures[] = [];
  for (const name of names) {
    if (name !== 'mariadb' && name !== 'postgres') {
      console.error(`unknown backend "${name}" (known: mariadb, postgres)`);
      return 2;
    }
    // One server at a time: the machine's cores are shared.
    figures.push(await benchOne(name, rows, pairs));
  }
  if (values.json) {
    console.log(JSON.stringify({ targetRatio: TARGET_RATIO, figures }, null, 2));
  } else {
    for (const f of figures) {
      console.log(
        `${f.backend} (${f.serverVersion}): ${f.rows}-row insert, ${f.pairs} pairs: proxied/direct median ratio ` +
          `${f.medianRatio.toFixed(3)} (target <= ${TARGET_RATIO}) ${f.withinTarget ? 'OK' : 'ABOVE TARGET'}; ` +
          `median direct ${f.directMedianMs.toFixed(6)} ms, proxied ${f.proxiedMedianMs.toFixed(6)} ms`,
      );
    }
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  },
);
