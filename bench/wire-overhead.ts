/**
 * What the wire proxy costs, with this machine's noise floor beside it.
 *
 *   npx tsx bench/wire-overhead.ts [--backends mariadb,postgres] [--rows 5000] [--pairs 41] [--replay-rounds 200] [--json]
 *
 * Per backend: the same N-row multi-row insert (mysql2 `query(... VALUES ?)`, one COM_QUERY; pg one parameterised
 * INSERT, one Parse/Bind/Describe/Execute/Sync) on three connections opened beforehand, so connection set-up is
 * not timed: direct A, direct B, and P through the proxy. Each round times two pairs, proxied (A, P) and control
 * (A, B), with the same pairing: the order inside a pair alternates (A first, then A second) and so does which
 * pair goes first, so drift and cache warmth fall on both sides of both. The figures are medians of the per-pair
 * ratios P/A and B/A, with their interquartile ranges (nearest rank): the control is direct against direct, so its
 * spread is the noise floor at this moment; a proxied ratio inside it cannot be told from noise.
 *
 * Wall time on a shared machine mostly measures the neighbours, so the proxy's cost is also given as CPU time of
 * this process (`process.cpuUsage`, user + system, so the kernel work of the extra loopback hop is in it): the
 * median per-pair difference P - A, beside the control's B - A, per run, per MB crossing the proxy and per command.
 * Then the parsers' own share: one connection's traffic (the same inserts) is recorded (`wire-capture.ts`) and
 * replayed in-process through a fresh session `--replay-rounds` times (`wire-replay.ts`); what is left of the CPU
 * difference is the relay's socket I/O. Instruction counts of the parsers: `wire-cpu.ts --callgrind`.
 *
 * Every run gets an emptied table and is checked to have inserted N rows; every proxied run is checked to have
 * crossed the wire as exactly the expected commands and one round trip, complete. Target: ratio <= 1.05.
 */
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { startBackend } from '../src/backends/registry';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import { startWireProxy } from '../src/wire/proxy';
import type { WireProxy } from '../src/wire/proxy';
import { startRecorder } from './wire-capture';
import { cpuNs, measureReplayCpu, streamSize } from './wire-replay';
import type { RecordedStream, StreamChunk } from './wire-replay';

const TARGET_RATIO = 1.05;
/** Inserts on the recorded connection whose traffic is replayed: enough that the handshake is a small part of it. */
const RECORDED_INSERTS = 5;

type Params = Omit<NetworkConnection, 'kind'>;

interface Side {
  /** Empties the table (not timed). */
  reset(): Promise<void>;
  /** The timed insert. */
  insert(rows: [number, string][]): Promise<void>;
  count(): Promise<number>;
  end(): Promise<void>;
}

interface BackendBench {
  protocol: 'mysql' | 'postgres';
  open(c: Params, table: string): Promise<Side>;
  createTable(c: Params, table: string): Promise<void>;
  /** What one insert must look like on the wire. */
  expectedCommands: Record<string, number>;
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
    async createTable(c, table) {
      const conn = await mysql.createConnection(c);
      await conn.query(`CREATE TABLE IF NOT EXISTS ${table} (id INT NOT NULL, label VARCHAR(40) NOT NULL)`);
      await conn.end();
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
    async createTable(c, table) {
      const client = new Client(c);
      await client.connect();
      await client.query(`CREATE TABLE IF NOT EXISTS ${table} (id int NOT NULL, label text NOT NULL)`);
      await client.end();
    },
  },
};

/** Nearest-rank percentile over raw samples. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] ?? Number.NaN;
}

/** A distribution of per-pair figures, raw samples kept. */
interface Spread {
  median: number;
  p25: number;
  p75: number;
  samples: number[];
}

function spread(samples: number[]): Spread {
  return { median: percentile(samples, 50), p25: percentile(samples, 25), p75: percentile(samples, 75), samples };
}

interface Figures {
  backend: string;
  serverVersion: string;
  rows: number;
  pairs: number;
  /** Per-pair wall-time ratios: proxied / direct, and the control direct B / direct A. */
  ratio: Spread;
  controlRatio: Spread;
  /** Median wall time per run, integer ns. */
  directMedianNs: number;
  proxiedMedianNs: number;
  /** Per-pair CPU differences of this process, integer ns: proxied - direct, and the control B - A. */
  cpuDiffNs: Spread;
  controlCpuDiffNs: Spread;
  /** What one proxied insert carried: bytes both ways, client commands. */
  bytesPerRun: number;
  commandsPerRun: number;
  /** The proxy's CPU (median proxied - direct difference) per 10^6 bytes and per command, ns. */
  proxyCpuNsPerMb: number;
  proxyCpuNsPerCommand: number;
  /**
   * The proxy's CPU (median proxied - direct difference) over the median direct wall time: its share of the run if
   * all of it lay on the critical path, which the wall ratio cannot resolve below the control's spread.
   */
  proxyCpuShare: number;
  /** The parsers alone, from replaying the recorded traffic: CPU per 10^6 bytes and per command, ns. */
  parse: { rounds: number; streamBytes: number; streamCommands: number; nsPerMb: number; nsPerCommand: number };
  withinTarget: boolean;
}

async function timed(work: () => Promise<void>): Promise<{ wallNs: number; cpuNs: number }> {
  // With --expose-gc a run does not pay for the garbage of the one before (the row arrays of the driver).
  (globalThis as { gc?: () => void }).gc?.();
  const cpu = cpuNs();
  const start = process.hrtime.bigint();
  await work();
  return { wallNs: Number(process.hrtime.bigint() - start), cpuNs: cpuNs() - cpu };
}

/** Records one connection doing RECORDED_INSERTS inserts through a recording forwarder, for the parser replay. */
async function recordInserts(
  name: 'mariadb' | 'postgres',
  backend: StartedBackend,
  params: Params,
  table: string,
  rows: [number, string][],
): Promise<RecordedStream> {
  const bench = BENCHES[name];
  const recorder = await startRecorder({ host: params.host, port: params.port });
  try {
    const side = await bench.open({ ...params, host: '127.0.0.1', port: recorder.port }, table);
    for (let i = 0; i < RECORDED_INSERTS; i += 1) await side.insert(rows);
    await side.end();
    await recorder.closed();
  } finally {
    await recorder.stop();
  }
  return {
    protocol: bench.protocol,
    scenario: `insert-multirow-x${RECORDED_INSERTS}`,
    backend: backend.description.id,
    serverVersion: backend.description.serverVersion,
    chunks: recorder.connections[0] as StreamChunk[],
  };
}

async function benchOne(name: 'mariadb' | 'postgres', rowsCount: number, pairs: number, replayRounds: number): Promise<Figures> {
  const bench = BENCHES[name];
  const backend: StartedBackend = await startBackend(name);
  let proxy: WireProxy | null = null;
  const sides: Side[] = [];
  try {
    if (backend.connection.kind !== 'network') throw new Error(`${name} is not a network backend`);
    const c: NetworkConnection = backend.connection;
    const table = `h3_wire_bench_${process.pid}`;
    const params: Params = { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
    await bench.createTable(params, table);
    proxy = await startWireProxy({ protocol: bench.protocol, target: { host: c.host, port: c.port } });
    const directA = await bench.open(params, table);
    sides.push(directA);
    const directB = await bench.open(params, table);
    sides.push(directB);
    const proxied = await bench.open({ ...params, host: proxy.host, port: proxy.port }, table);
    sides.push(proxied);
    const rows: [number, string][] = Array.from({ length: rowsCount }, (_, i) => [i, `row-${i}`]);
    let bytesPerRun = 0;
    let commandsPerRun = 0;

    const run = async (side: Side): Promise<{ wallNs: number; cpuNs: number }> => {
      await side.reset();
      const viaProxy = side === proxied && proxy !== null;
      const before = viaProxy ? proxy?.snapshot() : undefined;
      const t = await timed(() => side.insert(rows));
      if (viaProxy && proxy && before) {
        const wire = proxy.diff(before, proxy.snapshot());
        const ok = JSON.stringify(wire.commands) === JSON.stringify(bench.expectedCommands) && wire.roundTrips === 1 && !wire.incomplete;
        if (!ok) throw new Error(`${name}: unexpected wire counts ${JSON.stringify(wire)}`);
        bytesPerRun = wire.bytesClientToServer + wire.bytesServerToClient;
        commandsPerRun = wire.commandsTotal;
      }
      const n = await side.count();
      if (n !== rowsCount) throw new Error(`${name}: inserted ${n} rows, expected ${rowsCount}`);
      return t;
    };
    const pair = async (other: Side, directFirst: boolean) => {
      if (directFirst) {
        const d = await run(directA);
        return { d, o: await run(other) };
      }
      const o = await run(other);
      return { d: await run(directA), o };
    };

    // One warm-up round, not kept.
    for (const side of [directA, proxied, directB]) await run(side);
    const ratios: number[] = [];
    const controlRatios: number[] = [];
    const cpuDiffs: number[] = [];
    const controlCpuDiffs: number[] = [];
    const directNs: number[] = [];
    const proxiedNs: number[] = [];
    for (let i = 0; i < pairs; i += 1) {
      const directFirst = i % 2 === 0;
      const proxiedPairFirst = Math.floor(i / 2) % 2 === 0;
      const doProxied = async () => {
        const { d, o } = await pair(proxied, directFirst);
        ratios.push(o.wallNs / d.wallNs);
        cpuDiffs.push(o.cpuNs - d.cpuNs);
        directNs.push(d.wallNs);
        proxiedNs.push(o.wallNs);
      };
      const doControl = async () => {
        const { d, o } = await pair(directB, directFirst);
        controlRatios.push(o.wallNs / d.wallNs);
        controlCpuDiffs.push(o.cpuNs - d.cpuNs);
      };
      if (proxiedPairFirst) {
        await doProxied();
        await doControl();
      } else {
        await doControl();
        await doProxied();
      }
    }

    await directA.reset();
    const stream = await recordInserts(name, backend, params, table, rows);
    const size = streamSize(stream);
    if (size.counts.incomplete) throw new Error(`${name}: recorded traffic replays incomplete: ${size.counts.incompleteReasons.join('; ')}`);
    const parse = measureReplayCpu(stream, replayRounds);

    const ratio = spread(ratios);
    const cpuDiffNs = spread(cpuDiffs);
    return {
      backend: backend.description.id,
      serverVersion: backend.description.serverVersion,
      rows: rowsCount,
      pairs,
      ratio,
      controlRatio: spread(controlRatios),
      directMedianNs: Math.round(percentile(directNs, 50)),
      proxiedMedianNs: Math.round(percentile(proxiedNs, 50)),
      cpuDiffNs,
      controlCpuDiffNs: spread(controlCpuDiffs),
      bytesPerRun,
      commandsPerRun,
      proxyCpuNsPerMb: (cpuDiffNs.median * 1e6) / bytesPerRun,
      proxyCpuNsPerCommand: cpuDiffNs.median / commandsPerRun,
      proxyCpuShare: cpuDiffNs.median / percentile(directNs, 50),
      parse: { rounds: replayRounds, streamBytes: size.bytes, streamCommands: size.commands, nsPerMb: parse.nsPerMb, nsPerCommand: parse.nsPerCommand },
      withinTarget: ratio.median <= TARGET_RATIO,
    };
  } finally {
    for (const side of sides) await side.end().catch(() => undefined);
    await proxy?.close();
    await backend.stop();
  }
}

const ms = (ns: number): string => (ns / 1e6).toFixed(6);
const r3 = (x: number): string => x.toFixed(3);

function print(f: Figures): void {
  console.log(
    `${f.backend} (${f.serverVersion}): ${f.rows}-row insert, ${f.pairs} pairs\n` +
      `  wall  proxied/direct median ${r3(f.ratio.median)} [IQR ${r3(f.ratio.p25)}-${r3(f.ratio.p75)}]` +
      `   control direct/direct median ${r3(f.controlRatio.median)} [IQR ${r3(f.controlRatio.p25)}-${r3(f.controlRatio.p75)}]` +
      `   target <= ${TARGET_RATIO}: ${f.withinTarget ? 'OK' : 'ABOVE TARGET'}\n` +
      `        median direct ${ms(f.directMedianNs)} ms, proxied ${ms(f.proxiedMedianNs)} ms\n` +
      `  CPU   proxied - direct median ${ms(f.cpuDiffNs.median)} ms per run [IQR ${ms(f.cpuDiffNs.p25)} to ${ms(f.cpuDiffNs.p75)}]` +
      `   control ${ms(f.controlCpuDiffNs.median)} ms [IQR ${ms(f.controlCpuDiffNs.p25)} to ${ms(f.controlCpuDiffNs.p75)}]\n` +
      `        proxy CPU ${ms(f.proxyCpuNsPerMb)} ms/MB, ${ms(f.proxyCpuNsPerCommand)} ms/command ` +
      `(${f.bytesPerRun} bytes, ${f.commandsPerRun} commands per run), ${(100 * f.proxyCpuShare).toFixed(2)}% of the median direct run\n` +
      `  parse replay of the recorded traffic (${f.parse.streamBytes} bytes, ${f.parse.streamCommands} commands, median of ${f.parse.rounds}): ` +
      `${ms(f.parse.nsPerMb)} ms/MB, ${ms(f.parse.nsPerCommand)} ms/command`,
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      backends: { type: 'string', default: 'mariadb,postgres' },
      rows: { type: 'string', default: '5000' },
      pairs: { type: 'string', default: '41' },
      'replay-rounds': { type: 'string', default: '200' },
      json: { type: 'boolean', default: false },
    },
  });
  const rows = Number(values.rows);
  const pairs = Number(values.pairs);
  const replayRounds = Number(values['replay-rounds']);
  if (![rows, pairs, replayRounds].every((n) => Number.isInteger(n) && n > 0)) {
    console.error('--rows, --pairs and --replay-rounds must be positive integers');
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
    const f = await benchOne(name, rows, pairs, replayRounds);
    figures.push(f);
    if (!values.json) print(f);
  }
  if (values.json) console.log(JSON.stringify({ targetRatio: TARGET_RATIO, figures }, null, 2));
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
