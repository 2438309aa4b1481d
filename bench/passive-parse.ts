/**
 * What the passive capture's parser costs per round trip, apart from the machine's load: a pgbench `-S` capture is
 * recorded once (tcpdump on lo against a private PostgreSQL), then replayed through the built parser in `dist/`
 * many times, and the CPU time per counted round trip is printed, part by part.
 *
 *   npm run build && npx tsx bench/passive-parse.ts [--seconds 1] [--replays 30]
 *
 * Parts: reading the pcap records; + decoding IPv4/TCP; + the connections' bookkeeping (the connection set aside as
 * this process's own, so nothing is reassembled or parsed); the whole (reassembly and the protocol session, which
 * the proxy runs too). Medians over the replays; the recording is kept in memory only.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startBackend } from '../src/backends/registry';

interface Dist {
  PcapStreamReader: new () => { push(chunk: Buffer, onRecord: (r: { data: Buffer }) => void): void };
  decodePacket(linkType: number, frame: Buffer): unknown;
  LoopbackTraffic: new (o: object) => {
    push(chunk: Buffer): void;
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

async function record(seconds: number): Promise<{ bytes: Buffer; port: number }> {
  const b = await startBackend('postgres');
  try {
    if (b.connection.kind !== 'network') throw new Error('postgres is not a network backend');
    const c = b.connection;
    const env = { PGHOST: c.host, PGPORT: String(c.port), PGUSER: c.user, PGPASSWORD: c.password, PGDATABASE: c.database };
    await run('pgbench', ['-i', '-q', '-s', '1'], env);
    const tcpdump = spawn('tcpdump', ['-i', 'lo', '-n', '-s', '65549', '-B', '131072', '-w', '-', `tcp port ${c.port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    tcpdump.stdout.on('data', (d: Buffer) => chunks.push(d));
    await new Promise((resolve) => tcpdump.stderr.once('data', resolve));
    await run('pgbench', ['-n', '-S', '-c', '1', '-T', String(seconds)], env);
    // A TPACKET_V3 block is handed over when full or a second old: wait for the last one before stopping.
    await new Promise((r) => setTimeout(r, 1500));
    tcpdump.kill('SIGTERM');
    await new Promise((r) => tcpdump.on('exit', r));
    return { bytes: Buffer.concat(chunks), port: c.port };
  } finally {
    await b.stop();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length / 2) - 1] ?? Number.NaN;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { seconds: { type: 'string', default: '1' }, replays: { type: 'string', default: '30' } } });
  const dist = {
    ...require(join(__dirname, '..', 'dist', 'wire', 'pcap.js')),
    ...require(join(__dirname, '..', 'dist', 'wire', 'loopback-traffic.js')),
  } as Dist;
  const { bytes, port } = await record(Number(values.seconds));
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 65536) chunks.push(bytes.subarray(i, i + 65536));
  const traffic = (owner: 'own' | 'other') => new dist.LoopbackTraffic({ protocol: 'postgres', server: { address: 0x7f000001, port }, ownerOf: () => owner });
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
      for (const chunk of chunks) reader.push(chunk, (r) => dist.decodePacket(1, r.data));
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
  console.log(`${bytes.length} bytes of pcap, ${roundTrips} round trips; CPU us per round trip, median of ${values.replays} replays:`);
  for (const [part, us] of Object.entries(parts)) console.log(`  ${part.padEnd(40)} ${us.toFixed(2)}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
