/**
 * Where the wire proxy's time goes per round trip: pgbench -S (1 client) through the proxy running alone in a
 * child process (`wire-proxy-serve.ts`), once under `node --cpu-prof` (self time by function, top entries) and
 * once under `strace -c -f` (system calls per round trip, the proxy's own counts giving the round trips).
 *
 *   npx tsx bench/wire-profile.ts [--seconds 5] [--out /tmp/wire-profile]
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startBackend } from '../src/backends/registry';

function run(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} exited ${code}: ${out.slice(-500)}`))));
  });
}

/** Starts the proxy child under `wrapper`, runs pgbench -S through it, ends it; returns its stderr and tps. */
async function underProxy(
  wrapper: string[],
  nodeFlags: string[],
  target: { host: string; port: number; user: string; password: string; database: string },
  seconds: number,
) {
  const tsxLoader = join(__dirname, '..', 'node_modules', 'tsx', 'dist', 'loader.mjs');
  const [command, ...args] = [
    ...wrapper,
    process.execPath,
    ...nodeFlags,
    '--import',
    tsxLoader,
    join(__dirname, 'wire-proxy-serve.ts'),
    'postgres',
    target.host,
    String(target.port),
  ];
  const child = spawn(command as string, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once('close', () => reject(new Error(`proxy child ended: ${err}`)));
  });
  const out = await run('pgbench', ['-h', '127.0.0.1', '-p', String(port), '-U', target.user, '-n', '-S', '-c', '1', '-T', String(seconds), target.database], {
    PGPASSWORD: target.password,
  });
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  child.stdin.end();
  await new Promise<void>((resolve) => child.once('close', () => resolve()));
  const roundTrips = Number(/"roundTrips":(\d+)/.exec(err)?.[1]);
  return { err, tps, roundTrips };
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

function topSelf(file: string, top: number): { name: string; share: number }[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[] };
  const self = new Map<string, number>();
  let total = 0;
  for (const n of profile.nodes) {
    const hits = n.hitCount ?? 0;
    total += hits;
    const url = n.callFrame.url.replace(/^.*\/(node_modules|counters|bench)\//, '$1/').replace(/^node:/, '');
    const name = `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
    self.set(name, (self.get(name) ?? 0) + hits);
  }
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, hits]) => ({ name, share: hits / total }));
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, out: { type: 'string', default: '/tmp/wire-profile' } } });
  const seconds = Number(values.seconds);
  const out = values.out as string;
  mkdirSync(out, { recursive: true });
  const backend = await startBackend('postgres');
  try {
    const c = backend.connection;
    if (c.kind !== 'network') throw new Error('postgres is not a network backend');
    await run('pgbench', ['-i', '-q', '-s', '1', '-h', c.host, '-p', String(c.port), '-U', c.user, c.database], { PGPASSWORD: c.password });
    const direct = await run('pgbench', ['-h', c.host, '-p', String(c.port), '-U', c.user, '-n', '-S', '-c', '1', '-T', String(seconds), c.database], {
      PGPASSWORD: c.password,
    });
    console.log(`direct: ${/tps = ([\d.]+)/.exec(direct)?.[1]} tps`);

    const plain = await underProxy([], [], c, seconds);
    console.log(`proxied: ${plain.tps.toFixed(0)} tps, ${plain.roundTrips} round trips`);

    const before = new Set(readdirSync(out));
    const prof = await underProxy([], ['--cpu-prof', `--cpu-prof-dir=${out}`], c, seconds);
    const file = readdirSync(out).find((f) => f.endsWith('.cpuprofile') && !before.has(f));
    console.log(`under --cpu-prof: ${prof.tps.toFixed(0)} tps; ${join(out, file ?? '?')}`);
    if (file) for (const t of topSelf(join(out, file), 25)) console.log(`  ${(100 * t.share).toFixed(1).padStart(5)}%  ${t.name}`);

    const straced = await underProxy(['strace', '-c', '-f', '-o', join(out, 'strace.txt')], [], c, seconds);
    console.log(`under strace -c -f: ${straced.tps.toFixed(0)} tps, ${straced.roundTrips} round trips; calls per round trip:`);
    const table = readFileSync(join(out, 'strace.txt'), 'utf8');
    for (const line of table.split('\n')) {
      const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
      if (m && Number(m[1]) > straced.roundTrips / 20) console.log(`  ${(Number(m[1]) / straced.roundTrips).toFixed(2).padStart(6)}  ${m[2]}`);
    }
  } finally {
    await backend.stop();
  }
}

void main();
