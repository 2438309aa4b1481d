/**
 * What the wire parsers cost per MB and per command, measured in a way that survives a noisy machine: recorded
 * proxy traffic (see `wire-capture.ts`) replayed in-process through a fresh MySQL/PostgreSQL session, no sockets.
 *
 *   npx tsx bench/wire-cpu.ts [--backends mariadb,postgres] [--scenarios a,b] [--save DIR] [--rounds 30] [--json]
 *   npx tsx bench/wire-cpu.ts --streams DIR [--callgrind] [--skip-relay]
 *
 * Without `--streams` it starts the backends, records every scenario (one connection each: 5000-row multi-row
 * INSERT, 5000 one-row prepared executes, 5000 pipelined executes (MySQL family), a 100000-row SELECT) and, with
 * `--save`, writes the streams to DIR. With `--streams DIR` it replays the streams saved there instead: the same
 * bytes and the same chunk boundaries every time, so two versions of the parsers can be compared on equal input.
 *
 * CPU time: the median over `--rounds` replays of this process's CPU time (`process.cpuUsage`), after warm-up
 * rounds. `--callgrind` also counts instructions with valgrind (installed): the replay file is bundled with esbuild
 * and run under `valgrind --tool=callgrind` (node with V8's `--predictable`) three times per stream, with the same warm-up and 0, R and 2R measured
 * replays (R sized to about 50 ms of native replay); the differences divided by R are two estimates of the
 * instructions of one warm replay (node's start-up, the bundle's loading and the JIT's warm-up cancel), and their
 * spread is the method's noise. Instruction counts barely move with the machine's load; this takes minutes.
 * Then, unless `--skip-relay`, the relay without parsing (`wire-relay.ts`): the proxy's CPU per round trip and
 * per MB with a protocol-less sink instead of a database, for 100 KB and 50-byte requests.
 * Each replay's counts are checked against the in-process replay, so a parser that counts differently cannot pass
 * for a faster one.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startBackend } from '../src/backends/registry';
import { recordStreams } from './wire-capture';
import { measureRelay } from './wire-relay';
import type { RelayFigures } from './wire-relay';
import { measureReplayCpu, readStream, streamName, streamSize, writeStream } from './wire-replay';
import type { RecordedStream } from './wire-replay';

interface StreamFigures {
  stream: string;
  backend: string;
  serverVersion: string;
  chunks: number;
  bytes: number;
  commands: number;
  messages: number;
  cpu: { rounds: number; medianNs: number; nsPerMb: number; nsPerCommand: number; samplesNs: number[] };
  instructions?: { rounds: number; estimates: [number, number]; perReplay: number; perMb: number; perCommand: number; perMessage: number };
}

/**
 * V8's predictable mode runs the compiler and the garbage collector on the main thread, at deterministic points:
 * measured here, two identical runs differ by 0.002% with it and by 2-3% without (background threads' timing).
 */
const NODE_FLAGS = ['--predictable'];
/** Native time of warm replays each valgrind run measures: long enough that the JIT's noise is small beside it. */
const CALLGRIND_BUDGET_NS = 50e6;
/** Native time of warm-up replays, the same in every run of a stream so that it cancels. */
const CALLGRIND_WARMUP_NS = 20e6;

/**
 * Instructions of one warm replay of the stream in `file`: three valgrind runs with the same warm-up and 0, R and
 * 2R measured replays; (I(R) - I(0)) / R and (I(2R) - I(R)) / R are two independent estimates, whose spread shows
 * the noise of the method.
 */
function callgrindPerReplay(bundle: string, file: string, replayNs: number, expectedCounts: string): { rounds: number; estimates: [number, number] } {
  const rounds = Math.min(5000, Math.max(3, Math.ceil(CALLGRIND_BUDGET_NS / replayNs)));
  const warmup = Math.min(5000, Math.max(2, Math.ceil(CALLGRIND_WARMUP_NS / replayNs)));
  const run = (measured: number): number => {
    const result = spawnSync(
      'valgrind',
      ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, ...NODE_FLAGS, bundle, '--child', file, String(warmup), String(measured)],
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
    );
    if (result.status !== 0) throw new Error(`valgrind exited ${result.status ?? result.signal}: ${result.stderr.slice(-2000)}`);
    if (result.stdout.trim() !== expectedCounts) throw new Error(`${file}: counts under valgrind differ from the in-process replay`);
    const match = /Collected : (\d+)/.exec(result.stderr);
    if (!match) throw new Error(`no instruction count in valgrind's output: ${result.stderr.slice(-2000)}`);
    return Number(match[1]);
  };
  const none = run(0);
  const once = run(rounds);
  const twice = run(2 * rounds);
  return { rounds, estimates: [(once - none) / rounds, (twice - once) / rounds] };
}

function bundleReplay(dir: string): string {
  // esbuild comes with tsx; bundling keeps tsx's loader (and its start-up under valgrind) out of the count.
  const esbuild = require('esbuild') as typeof import('esbuild');
  const outfile = join(dir, 'wire-replay.js');
  esbuild.buildSync({ entryPoints: [join(__dirname, 'wire-replay.ts')], bundle: true, platform: 'node', target: 'node20', outfile, logLevel: 'error' });
  return outfile;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      backends: { type: 'string', default: 'mariadb,postgres' },
      scenarios: { type: 'string' },
      streams: { type: 'string' },
      save: { type: 'string' },
      rounds: { type: 'string', default: '30' },
      callgrind: { type: 'boolean', default: false },
      'skip-relay': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) {
    console.error('--rounds must be a positive integer');
    return 2;
  }
  const only = values.scenarios?.split(',').filter(Boolean);
  const streams: RecordedStream[] = [];
  const files = new Map<RecordedStream, string>();
  if (values.streams) {
    for (const f of readdirSync(values.streams)
      .filter((n) => n.endsWith('.stream'))
      .sort()) {
      const s = readStream(join(values.streams, f));
      if (only && !only.includes(s.scenario)) continue;
      streams.push(s);
      files.set(s, join(values.streams, f));
    }
    if (streams.length === 0) {
      console.error(`no .stream files in ${values.streams}`);
      return 2;
    }
  } else {
    for (const name of (values.backends ?? '').split(',').filter(Boolean)) {
      // One server at a time: the machine's cores are shared.
      const backend = await startBackend(name);
      try {
        streams.push(...(await recordStreams(backend, only)));
      } finally {
        await backend.stop();
      }
    }
    if (values.save) {
      for (const s of streams) {
        const file = join(values.save, `${streamName(s)}.stream`);
        writeStream(file, s);
        files.set(s, file);
      }
    }
  }

  const tmp = values.callgrind ? mkdtempSync(join(os.tmpdir(), 'wire-cpu-')) : null;
  const figures: StreamFigures[] = [];
  try {
    const bundle = tmp ? bundleReplay(tmp) : null;
    for (const s of streams) {
      const size = streamSize(s);
      if (size.counts.incomplete) throw new Error(`${streamName(s)}: replay is incomplete: ${size.counts.incompleteReasons.join('; ')}`);
      const cpu = measureReplayCpu(s, rounds);
      const f: StreamFigures = {
        stream: streamName(s),
        backend: s.backend,
        serverVersion: s.serverVersion,
        chunks: size.chunks,
        bytes: size.bytes,
        commands: size.commands,
        messages: size.messages,
        cpu,
      };
      if (bundle && tmp) {
        let file = files.get(s);
        if (!file) {
          file = join(tmp, `${streamName(s)}.stream`);
          writeStream(file, s);
        }
        const { rounds: measured, estimates } = callgrindPerReplay(bundle, file, cpu.medianNs, JSON.stringify(size.counts));
        const perReplay = (estimates[0] + estimates[1]) / 2;
        f.instructions = {
          rounds: measured,
          estimates,
          perReplay,
          perMb: (perReplay * 1e6) / size.bytes,
          perCommand: size.commands > 0 ? perReplay / size.commands : 0,
          perMessage: perReplay / size.messages,
        };
      }
      figures.push(f);
      if (!values.json) print(f);
    }
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
  const relay: RelayFigures[] = [];
  if (!values['skip-relay']) {
    // The two request sizes of the streams above: a 5000-row INSERT, and one prepared execute.
    for (const [bytes, roundTrips] of [
      [100_000, 1000],
      [50, 5000],
    ] as const) {
      const r = await measureRelay(bytes, roundTrips);
      relay.push(r);
      if (!values.json) {
        console.log(
          `relay only, ${String(bytes).padStart(6)}-byte requests, 11-byte answers, median of ${r.rounds} rounds of ${r.roundTrips}: ` +
            `CPU per round trip direct ${(r.directNs / 1e3).toFixed(3)} us, proxied ${(r.proxiedNs / 1e3).toFixed(3)} us: ` +
            `proxy ${(r.proxyNsPerRoundTrip / 1e3).toFixed(3)} us per round trip = ${(r.proxyNsPerMb / 1e6).toFixed(3)} ms/MB`,
        );
      }
    }
  }
  if (values.json) console.log(JSON.stringify({ figures, relay }, null, 2));
  return 0;
}

function print(f: StreamFigures): void {
  const mb = f.bytes / 1e6;
  let line =
    `${f.stream.padEnd(26)} ${f.backend}: ${mb.toFixed(3)} MB in ${f.chunks} chunks, ${f.commands} commands, ${f.messages} messages; ` +
    `CPU median of ${f.cpu.rounds}: ${(f.cpu.medianNs / 1e6).toFixed(6)} ms per replay = ${(f.cpu.nsPerMb / 1e6).toFixed(3)} ms/MB, ` +
    `${(f.cpu.nsPerCommand / 1e3).toFixed(3)} us/command`;
  if (f.instructions) {
    const i = f.instructions;
    line +=
      `; instructions per replay ${Math.round(i.perReplay)} (estimates ${Math.round(i.estimates[0])}, ${Math.round(i.estimates[1])}; ` +
      `${i.rounds} replays each) = ${Math.round(i.perMb)}/MB, ${Math.round(i.perCommand)}/command, ${Math.round(i.perMessage)}/message`;
  }
  console.log(line);
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exitCode = 1;
  },
);
