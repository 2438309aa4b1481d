/**
 * The wire proxy's cost per round trip, with this machine's noise floor beside every figure.
 *
 *   npx tsx bench/wire-cost.ts [--pairs 7] [--seconds 3] [--relay proxy|stream|worker|pipe|socat|passive|tcpdump-null|tcpdump-pipe] [--only 'name|name'] [--json]
 *   npm run bench -- wire-cost
 *
 * One private PostgreSQL and one MariaDB are started from local binaries (as the tests do). Each workload is run
 * in rounds of three: direct A, through the relay P, direct B, in an order that rotates every round, so drift and
 * cache warmth fall on every side. Per round the figures are P/A and, as the control, B/A: the control is direct
 * against direct, so its spread is the noise floor at this moment. Reported: medians and interquartile ranges
 * (nearest rank) over the rounds, raw samples kept in --json.
 *
 * Workloads (what the table lists): pgbench -S with 1 and 4 clients and TPC-B with 4 clients (tps),
 * 5000 single-row INSERTs in one transaction with pg and with mysql2 (time), mysqlslap `SELECT 1` with 1 and 4
 * clients (queries/s), and one 5000-row INSERT statement with pg and with mysql2 (time; per run the median of 11
 * after one untimed). A "ratio" is always proxied/direct of the figure named: for throughputs 1 is free and lower is
 * worse, for times higher is worse.
 *
 * `--relay` picks what sits in the middle: `proxy` (default; sqltally's wire proxy in this process, as a test runs
 * it), `stream` (the same proxy reached through `openStream()`, no loopback hop; in-process drivers only), `worker` (the same proxy in a worker thread of this process), `pipe` (a bare Node `pipe()` relay: Node's
 * own floor), `socat` (a relay in C in another process: the extra loopback hop's floor), `passive` (no relay: the
 * P side connects to the server itself while a passive capture, tcpdump on lo and the parser in this process, counts
 * it; started before each P run and stopped after it, so the A and B runs are not captured; the pg and mysql2
 * clients then run in child processes, since the capture sets this process's own connections aside), and its floors
 * `tcpdump-null` and `tcpdump-pipe` (tcpdump alone beside the P run, writing to /dev/null or to this process, which
 * drops it). For `passive` the CPU time of tcpdump and of this process per counted round trip is printed too.
 */
import { fork, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { startBackend } from '../src/backends/registry';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import { startPassiveCapture } from '../src/wire/passive';
import type { PassiveCapture } from '../src/wire/passive';
import { startWireProxy } from '../src/wire/proxy';
import type { WireCounts } from '../src/wire/types';
import type { ChildSetup } from './wire-cost-child';
import { mysqlInserts, pgInserts, ROWS } from './wire-cost-clients';
import type { Endpoint, Protocol, Workload } from './wire-cost-clients';

type RelayKind = 'proxy' | 'stream' | 'worker' | 'pipe' | 'socat' | 'passive' | 'tcpdump-null' | 'tcpdump-pipe';
const RELAYS: readonly RelayKind[] = ['proxy', 'stream', 'worker', 'pipe', 'socat', 'passive', 'tcpdump-null', 'tcpdump-pipe'];

/** What sits between the client and the server for the P side of each round. */
interface Relay {
  port: number;
  stream?: Endpoint['stream'];
  /** Wire counts since the relay started, when the relay counts (sqltally's proxy). */
  counts(): Promise<WireCounts | null>;
  close(): Promise<void>;
  /** Around each P run (the passive capture: started before, caught up and stopped after). */
  beforeRun?(): Promise<void>;
  afterRun?(): Promise<void>;
  /** CPU time per counted round trip, us: tcpdump's and this process's, summed over the P runs; and the wall time of the edges after them. */
  cpu?(): { tcpdumpUs: number; nodeUs: number; roundTrips: number; edgeMs: number[] };
}

/** A process's user + system CPU time in us, from /proc (clock ticks of 10 ms). */
function processCpuUs(pid: number | null): number {
  if (pid === null) return 0;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function passiveRelay(protocol: Protocol, target: Endpoint): Promise<Relay> {
  let capture: PassiveCapture | null = null;
  let before: ReturnType<PassiveCapture['snapshot']> | null = null;
  let cpuAt = { node: process.cpuUsage(), tcpdump: 0 };
  const total = { tcpdumpUs: 0, nodeUs: 0, roundTrips: 0, edgeMs: [] as number[] };
  const reasons: string[] = [];
  let counts: WireCounts | null = null;
  return {
    port: target.port,
    counts: async () => counts && { ...counts, incomplete: reasons.length > 0, incompleteReasons: reasons },
    close: async () => capture?.close(),
    beforeRun: async () => {
      capture = await startPassiveCapture({ protocol, target });
      before = capture.snapshot();
      cpuAt = { node: process.cpuUsage(), tcpdump: processCpuUs(capture.tcpdumpPid) };
    },
    afterRun: async () => {
      const c = capture as PassiveCapture;
      // The window's end edge: what the capture held unread is read here, after the run, not during it.
      const edge = process.hrtime.bigint();
      await c.caughtUp();
      total.edgeMs.push(Number(process.hrtime.bigint() - edge) / 1e6);
      const node = process.cpuUsage(cpuAt.node);
      total.nodeUs += node.user + node.system;
      total.tcpdumpUs += processCpuUs(c.tcpdumpPid) - cpuAt.tcpdump;
      const window = c.diff(before!, c.snapshot());
      total.roundTrips += window.roundTrips;
      reasons.push(...window.incompleteReasons);
      counts = window;
      await c.close();
      capture = null;
    },
    cpu: () => total,
  };
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { startWireProxy } = require(workerData.module);
startWireProxy({ protocol: workerData.protocol, target: workerData.target }).then((proxy) => {
  const first = proxy.snapshot();
  parentPort.on('message', async (m) => {
    if (m === 'counts') parentPort.postMessage({ counts: proxy.diff(first, proxy.snapshot()) });
    if (m === 'close') { await proxy.close(); parentPort.postMessage({ closed: true }); parentPort.close(); }
  });
  parentPort.postMessage({ port: proxy.port });
});
`;

/**
 * The passive capture's floors: tcpdump with the capture's filter running beside the P run, writing to /dev/null
 * (`tcpdump-null`) or to this process, which drops what it reads (`tcpdump-pipe`). Nothing is counted.
 */
function tcpdumpFloor(target: Endpoint, into: 'null' | 'pipe'): Relay {
  let child: ReturnType<typeof spawn> | null = null;
  const filter = `host ${target.host === 'localhost' ? '127.0.0.1' : target.host} and (tcp port ${target.port} or udp dst port ${target.port})`;
  return {
    port: target.port,
    counts: async () => null,
    close: async () => undefined,
    beforeRun: async () => {
      const args = ['-i', 'lo', '-n', '-s', '65549', '-B', '131072', '-w', into === 'null' ? '/dev/null' : '-', filter];
      const started = spawn('tcpdump', args, { stdio: ['ignore', into === 'null' ? 'ignore' : 'pipe', 'pipe'] });
      started.stdout?.on('data', () => undefined);
      await new Promise<void>((resolve, reject) => {
        let said = '';
        started.stderr!.on('data', (d: Buffer) => void ((said += d.toString()), /listening on/.test(said) && resolve()));
        started.once('exit', (code) => reject(new Error(`tcpdump exited ${code}: ${said}`)));
      });
      child = started;
    },
    afterRun: async () => {
      const c = child!;
      child = null;
      const closed = new Promise((resolve) => c.once('close', resolve));
      c.kill('SIGTERM');
      await closed;
    },
  };
}

async function startRelay(kind: RelayKind, protocol: Protocol, target: Endpoint): Promise<Relay> {
  if (kind === 'passive') return passiveRelay(protocol, target);
  if (kind === 'tcpdump-null' || kind === 'tcpdump-pipe') return tcpdumpFloor(target, kind === 'tcpdump-null' ? 'null' : 'pipe');
  if (kind === 'proxy' || kind === 'stream') {
    const proxy = await startWireProxy({ protocol, target });
    const first = proxy.snapshot();
    return {
      port: proxy.port,
      ...(kind === 'stream' ? { stream: () => proxy.openStream() } : {}),
      counts: async () => proxy.diff(first, proxy.snapshot()),
      close: () => proxy.close(),
    };
  }
  if (kind === 'worker') {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module: join(__dirname, '..', 'dist', 'wire', 'proxy.js'), protocol, target },
    });
    const ask = <T>(message: string, key: string): Promise<T> =>
      new Promise((resolve, reject) => {
        const on = (m: Record<string, unknown>): void => {
          if (key in m) {
            worker.off('message', on);
            resolve(m[key] as T);
          }
        };
        worker.on('message', on);
        worker.once('error', reject);
        if (message) worker.postMessage(message);
      });
    const port = await ask<number>('', 'port');
    return {
      port,
      counts: () => ask<WireCounts>('counts', 'counts'),
      close: async () => {
        await ask('close', 'closed');
        await worker.terminate();
      },
    };
  }
  if (kind === 'pipe') {
    const sockets = new Set<net.Socket>();
    const server = net.createServer({ noDelay: true }, (client) => {
      const upstream = net.connect(target);
      upstream.setNoDelay(true);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => sockets.delete(s));
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      port: (server.address() as net.AddressInfo).port,
      counts: async () => null,
      close: async () => {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }
  const port = await freePort();
  const child = spawn('socat', [`TCP-LISTEN:${port},bind=127.0.0.1,fork,reuseaddr,nodelay`, `TCP:${target.host}:${target.port},nodelay`], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 100; i++) {
    if (await canConnect(port)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    port,
    counts: async () => null,
    close: async () => {
      child.kill('SIGTERM');
    },
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function runTool(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} exited ${code}: ${out.slice(-500)}`))));
  });
}

function pgbench(name: string, args: string[], seconds: number): Workload {
  return {
    name,
    protocol: 'postgres',
    unit: 'tps',
    async open(server, at) {
      return {
        run: async () => {
          const out = await runTool(
            'pgbench',
            ['-h', at.host, '-p', String(at.port), '-U', server.user, '-n', '-T', String(seconds), ...args, server.database],
            { PGPASSWORD: server.password },
          );
          const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
          if (!m) throw new Error(`pgbench printed no tps: ${out.slice(-300)}`);
          return Number(m[1]);
        },
        end: async () => undefined,
      };
    },
  };
}

function mysqlslap(name: string, concurrency: number, queries: number): Workload {
  return {
    name,
    protocol: 'mysql',
    unit: 'queries/s',
    async open(server, at) {
      return {
        run: async () => {
          const start = process.hrtime.bigint();
          await runTool(
            'mysqlslap',
            [
              `--host=${at.host}`,
              `--port=${at.port}`,
              `--user=${server.user}`,
              `--create-schema=${server.database}`,
              `--concurrency=${concurrency}`,
              '--iterations=1',
              `--number-of-queries=${queries}`,
              '--query=SELECT 1',
            ],
            { MYSQL_PWD: server.password },
          );
          // mysqlslap prints whole milliseconds; its own connection set-up is in this wall time for every side alike.
          return queries / (Number(process.hrtime.bigint() - start) / 1e9);
        },
        end: async () => undefined,
      };
    },
  };
}

function workloads(seconds: number): Workload[] {
  return [
    pgbench('pgbench -S, 1 client', ['-S', '-c', '1', '-j', '1'], seconds),
    pgbench('pgbench -S, 4 clients', ['-S', '-c', '4', '-j', '2'], seconds),
    pgbench('pgbench TPC-B, 4 clients', ['-c', '4', '-j', '2'], seconds),
    pgInserts('pg: 5000 single-row INSERTs in a transaction', false),
    mysqlInserts('mysql2 (MariaDB): 5000 single-row INSERTs in a transaction', false),
    mysqlslap('mysqlslap SELECT 1, 1 client (MariaDB)', 1, 10_000),
    mysqlslap('mysqlslap SELECT 1, 4 clients (MariaDB)', 4, 20_000),
    pgInserts('pg: one 5000-row INSERT', true),
    mysqlInserts('mysql2 (MariaDB): one 5000-row INSERT', true),
  ];
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil((p / 100) * sorted.length)) - 1] ?? Number.NaN;
}

interface Spread {
  median: number;
  p25: number;
  p75: number;
  samples: number[];
}
const spread = (samples: number[]): Spread => ({ median: percentile(samples, 50), p25: percentile(samples, 25), p75: percentile(samples, 75), samples });

interface Row {
  workload: string;
  unit: string;
  relay: RelayKind;
  pairs: number;
  direct: Spread;
  relayed: Spread;
  /** Per round: relayed / direct A, and the control direct B / direct A. */
  ratio: Spread;
  control: Spread;
  /** Added time per round trip, us, from the medians (time workloads: per statement; throughput: per transaction). */
  addedUsPerUnit: number;
  /** `passive`: CPU time per counted round trip over the P runs, us. */
  captureCpu?: { tcpdumpUsPerRoundTrip: number; nodeUsPerRoundTrip: number; roundTrips: number; edgeMs: Spread };
}

/**
 * The same client in a process of its own, a new connection each run (wire-cost-child.ts): what a passive capture
 * counts. Every side of the round runs so, so that A, B and P differ only in the capture.
 */
function inChild(w: Workload, setup: Omit<ChildSetup, 'server' | 'at'>): Workload {
  return {
    ...w,
    async open(server, at) {
      const child = fork(join(__dirname, 'wire-cost-child.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const next = (): Promise<Record<string, unknown>> =>
        new Promise((resolve, reject) => {
          const exited = (code: number | null): void => reject(new Error(`wire-cost-child exited ${code}`));
          child.once('exit', exited);
          child.once('message', (m) => {
            child.off('exit', exited);
            resolve(m as Record<string, unknown>);
          });
        });
      const ready = next();
      child.send({ setup: { ...setup, server, at: { host: at.host, port: at.port } } satisfies ChildSetup });
      await ready;
      return {
        run: async () => {
          const answer = next();
          child.send({ run: true });
          const m = await answer;
          if (typeof m['result'] !== 'number') throw new Error(`wire-cost-child: ${String(m['error'])}`);
          return m['result'];
        },
        end: async () => {
          child.removeAllListeners('exit');
          child.send({ exit: true });
        },
      };
    },
  };
}

async function measure(w0: Workload, server: NetworkConnection, relay: Relay, relayKind: RelayKind, pairs: number): Promise<Row> {
  const w = (relayKind === 'passive' || relayKind.startsWith('tcpdump-')) && w0.child ? inChild(w0, w0.child) : w0;
  const direct = { host: server.host, port: server.port };
  const a = await w.open(server, direct);
  const b = await w.open(server, direct);
  const p = await w.open(server, { host: '127.0.0.1', port: relay.port, ...(relay.stream ? { stream: relay.stream } : {}) });
  const runP = async (): Promise<number> => {
    await relay.beforeRun?.();
    try {
      return await p.run();
    } finally {
      await relay.afterRun?.();
    }
  };
  try {
    // Warm-up, not kept.
    for (const side of [a.run, runP, b.run]) await side();
    const as: number[] = [];
    const ps: number[] = [];
    const ratios: number[] = [];
    const controls: number[] = [];
    const orders = [
      ['a', 'p', 'b'],
      ['p', 'b', 'a'],
      ['b', 'a', 'p'],
      ['a', 'b', 'p'],
      ['p', 'a', 'b'],
      ['b', 'p', 'a'],
    ] as const;
    for (let i = 0; i < pairs; i++) {
      const got: Record<string, number> = {};
      for (const k of orders[i % orders.length] as readonly string[]) got[k] = await (k === 'a' ? a.run : k === 'b' ? b.run : runP)();
      as.push(got['a'] as number);
      ps.push(got['p'] as number);
      ratios.push((got['p'] as number) / (got['a'] as number));
      controls.push((got['b'] as number) / (got['a'] as number));
    }
    const d = percentile(as, 50);
    const r = percentile(ps, 50);
    // Time per unit of work, so the added microseconds per transaction or per statement can be read off.
    const usPer = (x: number): number => (w.unit === 'ms' ? (x * 1000) / ROWS : 1e6 / x);
    const cpu = relay.cpu?.();
    return {
      ...(cpu && cpu.roundTrips > 0
        ? {
            captureCpu: {
              tcpdumpUsPerRoundTrip: cpu.tcpdumpUs / cpu.roundTrips,
              nodeUsPerRoundTrip: cpu.nodeUs / cpu.roundTrips,
              roundTrips: cpu.roundTrips,
              edgeMs: spread(cpu.edgeMs),
            },
          }
        : {}),
      workload: w.name,
      unit: w.unit,
      relay: relayKind,
      pairs,
      direct: spread(as),
      relayed: spread(ps),
      ratio: spread(ratios),
      control: spread(controls),
      addedUsPerUnit: usPer(r) - usPer(d),
    };
  } finally {
    for (const side of [a, b, p]) await side.end().catch(() => undefined);
  }
}

const f3 = (x: number): string => x.toFixed(3);
const fig = (x: number, unit: string): string => (unit === 'ms' ? `${x.toFixed(1)} ms` : `${(x / 1000).toFixed(2)}k ${unit}`);

function print(row: Row): void {
  console.log(
    `${row.workload} [${row.relay}, ${row.pairs} rounds]\n` +
      `  direct ${fig(row.direct.median, row.unit)}  relayed ${fig(row.relayed.median, row.unit)}  ` +
      `ratio ${f3(row.ratio.median)} [IQR ${f3(row.ratio.p25)}-${f3(row.ratio.p75)}]  ` +
      `control ${f3(row.control.median)} [IQR ${f3(row.control.p25)}-${f3(row.control.p75)}]  ` +
      `added ${row.addedUsPerUnit.toFixed(1)} us per ${row.unit === 'ms' ? 'statement' : row.unit === 'tps' ? 'transaction' : 'query'}` +
      (row.captureCpu
        ? `\n  capture CPU per round trip: tcpdump ${row.captureCpu.tcpdumpUsPerRoundTrip.toFixed(2)} us, this process ${row.captureCpu.nodeUsPerRoundTrip.toFixed(2)} us (${row.captureCpu.roundTrips} round trips counted); ` +
          `the window's end edge after each run (the held capture read, the marker seen) ${row.captureCpu.edgeMs.median.toFixed(1)} ms [IQR ${row.captureCpu.edgeMs.p25.toFixed(1)}-${row.captureCpu.edgeMs.p75.toFixed(1)}]`
        : ''),
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      pairs: { type: 'string', default: '7' },
      seconds: { type: 'string', default: '3' },
      relay: { type: 'string', default: 'proxy' },
      only: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const pairs = Number(values.pairs);
  const seconds = Number(values.seconds);
  const relays = (values.relay ?? 'proxy').split(',') as RelayKind[];
  if (!relays.every((r) => RELAYS.includes(r))) {
    console.error(`--relay must be ${RELAYS.join(', ')} (comma-separated for several)`);
    return 2;
  }
  if (relays.includes('socat') && spawnSync('socat', ['-V']).status !== 0) {
    console.error('socat is not installed');
    return 2;
  }
  const only = values.only?.split('|').map((s) => s.trim().toLowerCase());
  const chosen = workloads(seconds).filter((w) => !only || only.some((o) => w.name.toLowerCase().includes(o)));
  const backends: Partial<Record<Protocol, StartedBackend>> = {};
  const rows: Row[] = [];
  try {
    for (const protocol of new Set(chosen.map((w) => w.protocol))) {
      const b = await startBackend(protocol === 'postgres' ? 'postgres' : 'mariadb');
      backends[protocol] = b;
      if (b.connection.kind !== 'network') throw new Error(`${protocol} backend is not a network backend`);
      console.log(`${b.description.id} ${b.description.serverVersion}`);
      if (protocol === 'postgres' && chosen.some((w) => w.name.startsWith('pgbench'))) {
        const c = b.connection;
        await runTool('pgbench', ['-i', '-q', '-s', '1', '-h', c.host, '-p', String(c.port), '-U', c.user, c.database], { PGPASSWORD: c.password });
      }
    }
    for (const relayKind of relays) {
      for (const w of chosen) {
        if (relayKind === 'stream' && !w.inProcess) {
          console.log(`${w.name} [stream]: skipped, a client program cannot take an in-process stream`);
          continue;
        }
        const b = backends[w.protocol] as StartedBackend;
        const server = b.connection as NetworkConnection;
        const relay = await startRelay(relayKind, w.protocol, { host: server.host, port: server.port });
        try {
          const row = await measure(w, server, relay, relayKind, pairs);
          const counts = await relay.counts();
          if (counts?.incomplete) console.log(`  (the ${relayKind}'s counts are incomplete: ${counts.incompleteReasons.join('; ')})`);
          rows.push(row);
          print(row);
        } finally {
          await relay.close();
        }
      }
    }
  } finally {
    for (const b of Object.values(backends)) await b.stop();
  }
  if (values.json) console.log(JSON.stringify(rows));
  return 0;
}

main().then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
