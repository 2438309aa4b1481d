/**
 * What the passive capture's parser costs per round trip, apart from the machine's load: a capture of pgbench `-S`
 * (private PostgreSQL, simple Query protocol), of a node `pg` client inserting single rows in a transaction (`pg-inserts`:
 * Parse/Bind/Describe/Execute/Sync per row, the extended protocol) or of mysqlslap `SELECT 1` (private MariaDB), 1 client,
 * is recorded once with tcpdump on lo,
 * then replayed through the built parser in `dist/` many times, and the CPU time per counted round trip is printed,
 * part by part.
 *
 *   npm run build && [SQLTALLY_BENCH_ROOT=<other checkout>] npx tsx bench/passive-parse.ts [--workload pgbench|pg-inserts|mysqlslap] [--seconds 1] [--replays 30]
 *     [--save FILE | --load FILE] [--profile]
 *
 * `--save` keeps the recording (and its port) so that two builds replay the same bytes (`--load`, with the same `--workload`); `--profile`
 * replays the whole parser for 5 s under the inspector's CPU profiler and prints its top functions.
 *
 * Parts: reading the pcap records; + decoding IPv4/TCP; + the connections' bookkeeping (the connection set aside as
 * this process's own, so nothing is reassembled or parsed); the whole (reassembly and the protocol session, which
 * the proxy runs too). Medians over the replays; the recording is kept in memory only.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startBackend } from '../src/backends/registry';

interface Dist {
  // `data`: builds before the records became offsets into the chunk (compared with `SQLTALLY_BENCH_ROOT`).
  PcapStreamReader: new () => {
    push(chunk: Buffer, onRecord: (r: { bytes: Buffer; start: number; end: number; data?: Buffer; offset?: number; included?: number }) => void): void;
  };
  decodePacket(linkType: number, frame: Buffer, start: number, end: number, captured?: number): unknown;
  LoopbackTraffic: new (o: object) => {
    push(chunk: Buffer): void;
    packets: number;
    connections(): object[];
    record(c: object): { counts: { roundTrips: number } };
  };
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

type Workload = 'pgbench' | 'pg-inserts' | 'mysqlslap';
const WORKLOADS: Record<Workload, { backend: 'postgres' | 'mariadb'; protocol: 'postgres' | 'mysql' }> = {
  pgbench: { backend: 'postgres', protocol: 'postgres' },
  'pg-inserts': { backend: 'postgres', protocol: 'postgres' },
  mysqlslap: { backend: 'mariadb', protocol: 'mysql' },
};

/** The pg-inserts client: one parameterised INSERT per row (Parse/Bind/Describe/Execute/Sync each), in one transaction. */
const PG_INSERTS = `
const { Client } = require('pg');
(async () => {
  const client = new Client();
  await client.connect();
  await client.query('DROP TABLE IF EXISTS bench_inserts');
  await client.query('CREATE TABLE bench_inserts (id integer PRIMARY KEY, label text NOT NULL)');
  await client.query('BEGIN');
  for (let i = 0; i < Number(process.argv[1]); i++) await client.query('INSERT INTO bench_inserts (id, label) VALUES ($1, $2)', [i, 'row ' + i]);
  await client.query('COMMIT');
  await client.end();
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

async function record(workload: Workload, seconds: number): Promise<{ bytes: Buffer; port: number }> {
  const b = await startBackend(WORKLOADS[workload].backend);
  try {
    if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
    const c = b.connection;
    const env = { PGHOST: c.host, PGPORT: String(c.port), PGUSER: c.user, PGPASSWORD: c.password, PGDATABASE: c.database, MYSQL_PWD: c.password };
    if (workload === 'pgbench') await run('pgbench', ['-i', '-q', '-s', '1'], env);
    const tcpdump = spawn('tcpdump', ['-i', 'lo', '-n', '-s', '65549', '-B', '131072', '-w', '-', `tcp port ${c.port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    tcpdump.stdout.on('data', (d: Buffer) => chunks.push(d));
    await new Promise((resolve) => tcpdump.stderr.once('data', resolve));
    if (workload === 'pgbench') await run('pgbench', ['-n', '-S', '-c', '1', '-T', String(seconds)], env);
    else if (workload === 'pg-inserts') {
      // In a child process, as a user's test runs its client: the parser here replays, it does not share the CPU.
      const rows = String(Math.round(5000 * seconds));
      await run(process.execPath, ['-e', PG_INSERTS, rows], { ...env, NODE_PATH: join(__dirname, '..', 'node_modules') });
    } else {
      // About 10k queries a second on this machine: a second's worth per requested second.
      const queries = String(Math.round(10_000 * seconds));
      const at = [`--host=${c.host}`, `--port=${c.port}`, `--user=${c.user}`, `--create-schema=${c.database}`];
      await run('mysqlslap', [...at, '--concurrency=1', '--iterations=1', `--number-of-queries=${queries}`, '--query=SELECT 1'], env);
    }
    // A TPACKET_V3 block is handed over when full or a second old: wait for the last one before stopping.
    await new Promise((r) => setTimeout(r, 1500));
    tcpdump.kill('SIGTERM');
    await new Promise((r) => tcpdump.on('exit', r));
    return { bytes: Buffer.concat(chunks), port: c.port };
  } finally {
    await b.stop();
  }
}

/** The inspector's CPU profile of `work`, as self time per function (top 25). */
function profile(work: () => void, ms: number): void {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object): unknown => {
    let result: unknown;
    session.post(method, params ?? {}, (error, r) => {
      if (error) throw error;
      result = r;
    });
    return result;
  };
  post('Profiler.enable');
  post('Profiler.setSamplingInterval', { interval: 100 });
  post('Profiler.start');
  const end = Date.now() + ms;
  while (Date.now() < end) work();
  const { profile: p } = post('Profiler.stop') as {
    profile: { nodes: { id: number; children?: number[]; callFrame: { functionName: string; url: string; lineNumber: number } }[]; samples: number[] };
  };
  session.disconnect();
  type Node = (typeof p.nodes)[number];
  const byNode = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, Node>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n);
  const label = (n: Node): string =>
    `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber + 1}`;
  const self = new Map<string, number>();
  for (const id of p.samples) {
    const node = byNode.get(id)!;
    // Node's own functions are named with the first caller of ours, so that a Buffer view says who made it.
    let caller: Node | undefined = node;
    while (caller && (caller.callFrame.url.startsWith('node:') || caller.callFrame.url === '')) caller = parent.get(caller.id);
    const name = caller && caller !== node ? `${label(node)} <- ${label(caller)}` : label(node);
    self.set(name, (self.get(name) ?? 0) + 1);
  }
  const total = p.samples.length;
  console.log(`CPU profile, ${total} samples, self time:`);
  for (const [name, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${((100 * n) / total).toFixed(1).padStart(5)}%  ${name}`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length / 2) - 1] ?? Number.NaN;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      workload: { type: 'string', default: 'pgbench' },
      seconds: { type: 'string', default: '1' },
      replays: { type: 'string', default: '30' },
      save: { type: 'string' },
      load: { type: 'string' },
      profile: { type: 'boolean', default: false },
    },
  });
  const workload = values.workload as Workload;
  if (!(workload in WORKLOADS)) throw new Error(`--workload must be ${Object.keys(WORKLOADS).join(', ')}`);
  const root = process.env['SQLTALLY_BENCH_ROOT'] ?? join(__dirname, '..');
  const dist = {
    ...require(join(root, 'dist', 'wire', 'pcap.js')),
    ...require(join(root, 'dist', 'wire', 'loopback-traffic.js')),
  } as Dist;
  // A saved recording: its port in 2 bytes, then the pcap stream.
  let bytes: Buffer;
  let port: number;
  if (values.load) {
    const file = readFileSync(values.load);
    port = file.readUInt16BE(0);
    bytes = file.subarray(2);
  } else {
    ({ bytes, port } = await record(workload, Number(values.seconds)));
    if (values.save) {
      const head = Buffer.alloc(2);
      head.writeUInt16BE(port);
      writeFileSync(values.save, Buffer.concat([head, bytes]));
    }
  }
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 65536) chunks.push(bytes.subarray(i, i + 65536));
  const traffic = (owner: 'own' | 'other') =>
    new dist.LoopbackTraffic({ protocol: WORKLOADS[workload].protocol, server: { address: 0x7f000001, port }, ownerOf: () => owner });
  const whole = traffic('other');
  for (const chunk of chunks) whole.push(chunk);
  const roundTrips = whole.connections().reduce((n: number, c) => n + whole.record(c).counts.roundTrips, 0);
  const cpuUs = (work: () => void): number => {
    const samples: number[] = [];
    for (let i = 0; i < Number(values.replays); i++) {
      const start = process.cpuUsage();
      work();
      const used = process.cpuUsage(start);
      samples.push((used.user + used.system) / roundTrips);
    }
    return median(samples);
  };
  const parts = {
    'pcap records': cpuUs(() => {
      const reader = new dist.PcapStreamReader();
      for (const chunk of chunks) reader.push(chunk, () => undefined);
    }),
    '+ IPv4/TCP decoding': cpuUs(() => {
      const reader = new dist.PcapStreamReader();
      for (const chunk of chunks)
        reader.push(chunk, (r) => {
          // A record's later pieces (builds that hand long records over in pieces) hold no headers.
          if (r.data) dist.decodePacket(1, r.data, 0, r.data.length);
          else if (!r.offset) dist.decodePacket(1, r.bytes, r.start, r.end, r.included);
        });
    }),
    '+ connection bookkeeping': cpuUs(() => {
      const t = traffic('own');
      for (const chunk of chunks) t.push(chunk);
    }),
    'whole (+ reassembly, protocol session)': cpuUs(() => {
      const t = traffic('other');
      for (const chunk of chunks) t.push(chunk);
    }),
  };
  console.log(
    `${workload}: ${bytes.length} bytes of pcap, ${whole.packets} packets, ${roundTrips} round trips; CPU us per round trip, median of ${values.replays} replays:`,
  );
  for (const [part, us] of Object.entries(parts)) console.log(`  ${part.padEnd(40)} ${us.toFixed(2)}`);
  if (values.profile) {
    profile(() => {
      const t = traffic('other');
      for (const chunk of chunks) t.push(chunk);
    }, 5000);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
