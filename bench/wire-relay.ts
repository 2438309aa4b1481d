/**
 * The wire proxy's relay alone: CPU of this process per MB and per round trip, with no database in the way. A
 * sink in a child process (so its CPU is not counted) reads requests of `bytes` bytes and answers each with 11
 * bytes; a client in this process does `roundTrips` of them directly and through a real `startWireProxy`, in
 * alternating rounds. The sink speaks no protocol, so the proxy's session stops parsing at the first bytes and only
 * relays: the difference is the relay's socket I/O, the part replay (`wire-replay.ts`) cannot see.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { startWireProxy } from '../src/wire/proxy';
import { cpuNs, median } from './wire-replay';

const SINK = `
const net = require('net');
const size = Number(process.argv[1]);
const server = net.createServer({ noDelay: true }, (s) => {
  let got = 0;
  s.on('error', () => {});
  s.on('data', (d) => { got += d.length; while (got >= size) { got -= size; s.write(Buffer.alloc(11)); } });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
`;

export interface RelayFigures {
  bytes: number;
  roundTrips: number;
  rounds: number;
  /** Median CPU per round trip, ns: direct, proxied, and the proxy's difference. */
  directNs: number;
  proxiedNs: number;
  proxyNsPerRoundTrip: number;
  /** The proxy's CPU per 10^6 bytes relayed (request and answer), ns. */
  proxyNsPerMb: number;
}

async function timedRoundTrips(port: number, bytes: number, n: number): Promise<number> {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const request = Buffer.alloc(bytes, 7);
  let answered = 0;
  let wanted = 0;
  let wake: () => void = () => undefined;
  socket.on('data', (d: Buffer) => {
    answered += d.length;
    if (answered >= wanted) wake();
  });
  const start = cpuNs();
  for (let i = 0; i < n; i += 1) {
    wanted = 11 * (i + 1);
    const answer = new Promise<void>((resolve) => (wake = resolve));
    socket.write(request);
    await answer;
  }
  const spent = cpuNs() - start;
  socket.destroy();
  return spent / n;
}

/** `rounds` alternating rounds of `roundTrips` round trips of a `bytes`-byte request, direct and proxied. */
export async function measureRelay(bytes: number, roundTrips: number, rounds = 7): Promise<RelayFigures> {
  const sink = spawn(process.execPath, ['-e', SINK, String(bytes)], { stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      sink.once('error', reject);
      sink.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    });
    // Passthrough: the proxy must not answer anything itself; the sink's bytes are no protocol, so parsing stops.
    const proxy = await startWireProxy({ protocol: 'postgres', target: { host: '127.0.0.1', port }, tls: 'passthrough' });
    try {
      await timedRoundTrips(port, bytes, Math.ceil(roundTrips / 5));
      await timedRoundTrips(proxy.port, bytes, Math.ceil(roundTrips / 5));
      const direct: number[] = [];
      const proxied: number[] = [];
      const diffs: number[] = [];
      for (let i = 0; i < rounds; i += 1) {
        let d: number;
        let p: number;
        if (i % 2 === 0) {
          d = await timedRoundTrips(port, bytes, roundTrips);
          p = await timedRoundTrips(proxy.port, bytes, roundTrips);
        } else {
          p = await timedRoundTrips(proxy.port, bytes, roundTrips);
          d = await timedRoundTrips(port, bytes, roundTrips);
        }
        direct.push(d);
        proxied.push(p);
        diffs.push(p - d);
      }
      const proxyNsPerRoundTrip = median(diffs);
      return {
        bytes,
        roundTrips,
        rounds,
        directNs: median(direct),
        proxiedNs: median(proxied),
        proxyNsPerRoundTrip,
        proxyNsPerMb: (proxyNsPerRoundTrip * 1e6) / (bytes + 11),
      };
    } finally {
      await proxy.close();
    }
  } finally {
    sink.stdin?.end();
    sink.kill();
  }
}
