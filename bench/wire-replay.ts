/**
 * Recorded proxy traffic and its replay through the wire parsers, in-process, with no socket: what the parsers
 * cost per MB and per command, apart from the relay's socket I/O. Used by `wire-cpu.ts` (CPU time and
 * instruction counts) and `wire-overhead.ts` (the parser's share, in the same run as the wall-time ratio).
 *
 * A stream keeps the socket reads exactly as a proxy saw them (one record per 'data' chunk, in arrival order), so
 * per-chunk costs replay as they happened. A stream file is a 4-byte big-endian header length, a JSON header,
 * then one record per chunk: 1 byte direction (0 client, 1 server), 4-byte big-endian length, the bytes.
 */
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { MysqlSession } from '../src/wire/mysql-protocol';
import { PgSession } from '../src/wire/pg-protocol';
import type { WireSession } from '../src/wire/tally';
import type { WireCounts } from '../src/wire/types';

export interface StreamChunk {
  from: 'client' | 'server';
  bytes: Buffer;
}

/** One proxied connection's traffic, handshake to close. */
export interface RecordedStream {
  protocol: 'mysql' | 'postgres';
  /** What the connection did (`insert-multirow`, `execute-per-row`, `select-large`, ...). */
  scenario: string;
  /** Backend id and server version it was recorded against. */
  backend: string;
  serverVersion: string;
  chunks: StreamChunk[];
}

interface StreamHeader {
  format: 'sqltally-wire-stream/1';
  protocol: RecordedStream['protocol'];
  scenario: string;
  backend: string;
  serverVersion: string;
  chunks: number;
}

export function writeStream(path: string, stream: RecordedStream): void {
  const header: StreamHeader = {
    format: 'sqltally-wire-stream/1',
    protocol: stream.protocol,
    scenario: stream.scenario,
    backend: stream.backend,
    serverVersion: stream.serverVersion,
    chunks: stream.chunks.length,
  };
  const json = Buffer.from(JSON.stringify(header));
  const parts: Buffer[] = [u32(json.length), json];
  for (const c of stream.chunks) {
    parts.push(Buffer.from([c.from === 'client' ? 0 : 1]), u32(c.bytes.length), c.bytes);
  }
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, Buffer.concat(parts));
  renameSync(tmp, path);
}

export function readStream(path: string): RecordedStream {
  const file = readFileSync(path);
  const headerLength = file.readUInt32BE(0);
  const header = JSON.parse(file.toString('utf8', 4, 4 + headerLength)) as StreamHeader;
  if (header.format !== 'sqltally-wire-stream/1') throw new Error(`${path}: not a wire stream (format ${String(header.format)})`);
  const chunks: StreamChunk[] = [];
  let at = 4 + headerLength;
  while (at < file.length) {
    const from = file[at] === 0 ? 'client' : 'server';
    const length = file.readUInt32BE(at + 1);
    // A copy, not a view: a socket hands the proxy one separate Buffer per read, so replay does too.
    chunks.push({ from, bytes: Buffer.from(file.subarray(at + 5, at + 5 + length)) });
    at += 5 + length;
  }
  if (chunks.length !== header.chunks) throw new Error(`${path}: ${chunks.length} chunks, header says ${header.chunks}`);
  return { protocol: header.protocol, scenario: header.scenario, backend: header.backend, serverVersion: header.serverVersion, chunks };
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

export function streamName(s: Pick<RecordedStream, 'protocol' | 'scenario'>): string {
  return `${s.protocol}-${s.scenario}`;
}

export function sessionFor(protocol: RecordedStream['protocol']): WireSession {
  return protocol === 'mysql' ? new MysqlSession({ tls: 'refuse' }) : new PgSession({ tls: 'refuse' });
}

const ignoreReply = (): void => undefined;

/**
 * Feeds every chunk to a fresh session, as the proxy's relay does, and returns the connection's counts. The
 * session is ended like a closed connection, so a stream cut mid-frame shows as incomplete.
 */
export function replay(stream: RecordedStream): WireCounts {
  const session = sessionFor(stream.protocol);
  const chunks = stream.chunks;
  for (let i = 0; i < chunks.length; i += 1) {
    const c = chunks[i] as StreamChunk;
    if (c.from === 'client') session.fromClient(c.bytes, ignoreReply);
    else session.fromServer(c.bytes);
  }
  session.end('replay ended');
  return session.tally.toCounts(0);
}

/** Bytes and commands of a stream, from one replay: the denominators of "per MB" and "per command". */
export interface StreamSize {
  chunks: number;
  bytes: number;
  /** Client commands/messages after the handshake, plus the handshake's own messages on both sides. */
  messages: number;
  commands: number;
  counts: WireCounts;
}

export function streamSize(stream: RecordedStream): StreamSize {
  const counts = replay(stream);
  const bytes = stream.chunks.reduce((sum, c) => sum + c.bytes.length, 0);
  const setup = counts.setup;
  const serverMessages = Object.values(counts.serverMessages ?? {}).reduce((a, b) => a + b, 0);
  return {
    chunks: stream.chunks.length,
    bytes,
    messages: counts.commandsTotal + serverMessages + (setup ? setup.clientMessages + setup.serverMessages : 0),
    commands: counts.commandsTotal,
    counts,
  };
}

/** Process CPU (user + system) in ns. */
export function cpuNs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

export interface ReplayCpu {
  rounds: number;
  /** CPU ns of each round (one replay of the whole stream into a fresh session), raw samples. */
  samplesNs: number[];
  medianNs: number;
  /** Median CPU per MB (10^6 bytes of both directions together), in ns. */
  nsPerMb: number;
  /** Median CPU per client command, in ns. */
  nsPerCommand: number;
}

/**
 * CPU time of replaying `stream` `rounds` times after `warmup` untimed rounds (so the JIT has settled). Every
 * round's counts must equal the first's: a replay that counts differently is a bug, not a measurement.
 *
 * `process.cpuUsage` ticks in microseconds and covers all of the process's threads, so a round should take well
 * over a millisecond; a busy neighbour costs wall time, not this process's CPU time, which is why it is used.
 */
export function measureReplayCpu(stream: RecordedStream, rounds: number, warmup = Math.min(20, rounds)): ReplayCpu {
  const size = streamSize(stream);
  const expected = JSON.stringify(size.counts);
  for (let i = 0; i < warmup; i += 1) replay(stream);
  const samplesNs: number[] = [];
  for (let i = 0; i < rounds; i += 1) {
    const start = cpuNs();
    const counts = replay(stream);
    samplesNs.push(cpuNs() - start);
    if (i === 0 && JSON.stringify(counts) !== expected) throw new Error(`${streamName(stream)}: replay counts changed between rounds`);
  }
  const medianNs = median(samplesNs);
  return {
    rounds,
    samplesNs,
    medianNs,
    nsPerMb: (medianNs * 1e6) / size.bytes,
    nsPerCommand: size.commands > 0 ? medianNs / size.commands : 0,
  };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * Child mode for instruction counting (`wire-cpu.ts --callgrind` runs this file under valgrind):
 *   node <bundle> --child <stream file> <warmup> <rounds>
 * replays `warmup + rounds` times and prints the counts once, so the parent can check them. The parent runs it
 * with `rounds` and with 0 and subtracts, which cancels node's start-up and the JIT warm-up.
 */
function child(argv: string[]): void {
  const [file, warmupText, roundsText] = argv;
  const stream = readStream(file as string);
  const total = Number(warmupText) + Number(roundsText);
  let counts: WireCounts | null = null;
  for (let i = 0; i < total; i += 1) counts = replay(stream);
  process.stdout.write(`${JSON.stringify(counts ?? replay(stream))}\n`);
}

if (require.main === module && process.argv[2] === '--child') child(process.argv.slice(3));
