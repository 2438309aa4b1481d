/**
 * What a counted window adds to a strategy's time, part by part: the same strategy timed uninstrumented (as the main
 * job does: `session.time`, a direct raw connection) and in counted windows with one part of the instrument switched
 * off at a time, in rounds whose order rotates.
 *
 *   npm run build && npx tsx bench/window-parts.ts [--backend postgres|mariadb] [--strategy pg.per-row-tx] [--rows 1000]
 *                                                [--rounds 9] [--parts uninstrumented,full,...] [--json]
 *   npx tsx bench/window-parts.ts --callgrind [--jobs 2] [--rows 100] [--parts ...]     # instructions, takes long
 *
 * Parts (each a CaptureSession of its own, hot connection, the table emptied before each window as the main job does):
 * - `uninstrumented`: session.time() on a fresh direct connection warmed by one run (the main job's uninstrumented side);
 * - `main-job`: every part on, with the main job's event-loop delay recorder around the timed run;
 * - `full`: every part on (wire proxy through openStream, server readings, deferred-work tracking, driver wrapper);
 * - `no-deferred`, `no-server`, `no-wire`: that part off; `no-stream`: the proxy over a loopback socket;
 * - `wrapper-only`: wire, server and deferred-work tracking off: only the counting wrapper and the window's recorder.
 * Per round and part: the window's duration (`durationNs`, what the main job's p50 is made of), this process's CPU
 * during it, and the whole measure() call (opening and closing readings, settle waits: paid per window, not in p50).
 * Printed: medians, the ratio to `uninstrumented` (median of per-round ratios) and the added time per row.
 * `--windows-only N`: run N windows of the first part named (after one warm-up window), nothing printed: what
 * `--callgrind` runs under valgrind, per part, for instructions per row and per window (takes minutes).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { callgrindRun } from './callgrind';
import { CaptureSession, createTableSql, dropTableSql, findStrategy, makeRows, runSql, runStrategy, startBackend, workloadTable } from './shipped';

const PARTS = ['uninstrumented', 'main-job', 'full', 'no-deferred', 'no-server', 'no-wire', 'no-stream', 'wrapper-only'] as const;
type Part = (typeof PARTS)[number];

const OPTIONS: Record<Exclude<Part, 'uninstrumented'>, { wire?: boolean; server?: boolean; deferredWork?: boolean; inProcessStream?: boolean }> = {
  'main-job': {},
  full: {},
  'no-deferred': { deferredWork: false },
  'no-server': { server: false },
  'no-wire': { wire: false },
  'no-stream': { inProcessStream: false },
  'wrapper-only': { wire: false, server: false, deferredWork: false },
};

const ROOT = process.env['SQLTALLY_BENCH_ROOT'] ?? path.join(__dirname, '..');

const { EventLoopDelayRecorder } = require(path.join(ROOT, 'dist', 'capture', 'event-loop.js')) as typeof import('../src/capture/event-loop');

/** Instructions of a child that runs `windows` windows of `rows` rows of one part, after the same start-up. */
async function instructions(bundle: string, env: NodeJS.ProcessEnv, args: string[], part: Part, rows: number, windows: number): Promise<number> {
  return (await callgrindRun(bundle, [...args, '--parts', part, '--rows', String(rows), '--windows-only', String(windows)], env)).instructions;
}

/**
 * Per part: instructions per row, from two runs that differ only in rows (one window each), and per window (opening,
 * closing, readings, the table emptied) from a third with two windows. Only this process is counted, not the server.
 */
async function callgrind(backendId: string, args: string[], parts: Part[], rows: number, jobs: number): Promise<void> {
  // esbuild comes with tsx; bundling keeps tsx's loader (and its start-up under valgrind) out of the count.

  const esbuild = require('esbuild') as typeof import('esbuild');
  const bundle = path.join(mkdtempSync(path.join(os.tmpdir(), 'window-parts-')), 'window-parts.js');
  esbuild.buildSync({ entryPoints: [__filename], bundle: true, platform: 'node', target: 'node20', outfile: bundle, logLevel: 'error', external: ['esbuild'] });
  // One server for every run, started here: a private server's start under valgrind outlasts its connect timeout.
  const backend = await startBackend(backendId);
  const c = backend.connection;
  if (c.kind !== 'network') throw new Error(`${backendId} is not a network backend`);
  const env = {
    ...process.env,
    SQLTALLY_BENCH_ROOT: ROOT,
    [`SQLTALLY_${backendId.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_URL`]: `${backend.description.name}://${encodeURIComponent(c.user)}:${encodeURIComponent(c.password)}@${c.host}:${c.port}/${c.database}`,
  };
  const runs = parts.flatMap((part) => [
    { part, rows, windows: 1 },
    { part, rows: 5 * rows, windows: 1 },
    { part, rows, windows: 2 },
  ]);
  const counts = new Map<string, number>();
  const key = (r: { part: Part; rows: number; windows: number }) => `${r.part} ${r.rows} ${r.windows}`;
  const queue = [...runs];
  try {
    await Promise.all(
      Array.from({ length: jobs }, async () => {
        for (let r = queue.shift(); r; r = queue.shift()) counts.set(key(r), await instructions(bundle, env, args, r.part, r.rows, r.windows));
      }),
    );
  } finally {
    await backend.stop();
  }
  console.log(`callgrind, ${args.join(' ')}: instructions of this process (valgrind, node --predictable), windows of ${rows} and ${5 * rows} rows`);
  console.log('part            per row (instr.)  added per row  per window (instr.)  added per window');
  let base: { perRow: number; perWindow: number } | null = null;
  for (const part of parts) {
    const small = counts.get(key({ part, rows, windows: 1 }))!;
    const perRow = (counts.get(key({ part, rows: 5 * rows, windows: 1 }))! - small) / (4 * rows);
    const perWindow = counts.get(key({ part, rows, windows: 2 }))! - small - perRow * rows;
    if (part === 'uninstrumented') base = { perRow, perWindow };
    const added = (v: number, b: number | undefined) => (b === undefined ? '' : Math.round(v - b).toString());
    console.log(
      `${part.padEnd(15)} ${Math.round(perRow).toString().padStart(16)} ${added(perRow, base?.perRow).padStart(14)} ${Math.round(perWindow).toString().padStart(20)} ${added(perWindow, base?.perWindow).padStart(17)}`,
    );
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function cpuNs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

interface Sample {
  windowNs: number;
  cpuNs: number;
  wholeNs: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      backend: { type: 'string', default: 'postgres' },
      strategy: { type: 'string' },
      rows: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '9' },
      parts: { type: 'string' },
      'windows-only': { type: 'string' },
      callgrind: { type: 'boolean', default: false },
      jobs: { type: 'string', default: '2' },
      json: { type: 'boolean', default: false },
    },
  });
  const backendId = values.backend!;
  const strategyName = values.strategy ?? (backendId.startsWith('postgres') ? 'pg.per-row-tx' : 'mysql2.execute-per-row-tx');
  const rows = Number(values.rows);
  const rounds = Number(values.rounds);
  const parts = (values.parts?.split(',') ?? [...PARTS]) as Part[];
  for (const p of parts) if (!PARTS.includes(p)) throw new Error(`unknown part ${p}; one of ${PARTS.join(', ')}`);
  const windowsOnly = values['windows-only'] === undefined ? null : Number(values['windows-only']);
  if (values.callgrind) {
    await callgrind(backendId, ['--backend', backendId, '--strategy', strategyName], parts, rows, Number(values.jobs));
    return;
  }

  const backend = await startBackend(backendId);
  const strategy = findStrategy(strategyName, backend.description.name);
  const table = workloadTable(backend.description.name);
  const input = strategy.prepare(makeRows(rows), table, strategy.plan(rows, backend.description.capabilities, { backend: backend.description.name }));
  const run = (h: unknown) => runStrategy(strategy, h as never, input);
  const empty = async (h: unknown): Promise<void> => void (await runSql(strategy.driver, h as never, `DELETE FROM ${table.quoted}`));
  const tableOpt = { name: table.name };
  const sessions = new Map<Part, Awaited<ReturnType<typeof CaptureSession.open>>>();
  const loop = new EventLoopDelayRecorder();
  const samples = new Map<Part, Sample[]>(parts.map((p) => [p, []]));
  const verdicts = new Map<Part, Set<string>>(parts.map((p) => [p, new Set()]));
  try {
    for (const part of new Set<Part>(['uninstrumented', ...parts])) {
      const options = part === 'uninstrumented' ? {} : OPTIONS[part];
      sessions.set(
        part,
        await CaptureSession.open({
          backend,
          driver: strategy.driver,
          driverOptions: strategy.connectionOptions as Record<string, unknown> | undefined,
          table: tableOpt,
          ...options,
        }),
      );
    }
    const first = sessions.get('uninstrumented')!;
    await first.prepare(async (h: unknown) => {
      await runSql(strategy.driver, h as never, dropTableSql(table));
      await runSql(strategy.driver, h as never, createTableSql(table));
    });
    const once = async (part: Part): Promise<Sample> => {
      const session = sessions.get(part)!;
      const t0 = process.hrtime.bigint();
      if (part === 'uninstrumented') {
        let cpu = 0;
        const times = await session.time(
          async (h: unknown) => {
            const c0 = cpuNs();
            await run(h);
            cpu = cpuNs() - c0;
          },
          // Counting instructions, the function runs once a window (a hot time() runs it twice).
          { repeats: 1, connection: windowsOnly === null ? 'hot' : 'fresh', before: empty },
        );
        return { windowNs: times.samplesNs[0]!, cpuNs: cpu, wholeNs: Number(process.hrtime.bigint() - t0) };
      }
      await session.prepare(empty, { hot: true });
      let cpu = 0;
      const around = async <R>(work: () => Promise<R>): Promise<R> => {
        const c0 = cpuNs();
        try {
          return await work();
        } finally {
          cpu = cpuNs() - c0;
        }
      };
      const w0 = process.hrtime.bigint();
      const tally = await session.measure(run, {
        hot: true,
        around: part === 'main-job' ? <R>(work: () => Promise<R>) => loop.around(() => around(work)) : around,
      });
      verdicts.get(part)!.add(tally.verdict.kind === 'assert' ? 'assert' : `${tally.verdict.kind}: ${tally.verdict.reason.slice(0, 300)}`);
      return { windowNs: tally.durationNs, cpuNs: cpu, wholeNs: Number(process.hrtime.bigint() - w0) };
    };
    if (windowsOnly !== null) {
      for (let i = 0; i < windowsOnly + 1; i++) await once(parts[0]!);
      return;
    }
    // Two warm-up rounds: the hot connections prepare their statements, the JIT settles.
    for (let r = 0; r < rounds + 2; r++) {
      const order = parts.map((_, i) => parts[(i + r) % parts.length]!);
      if (r % 2 === 1) order.reverse();
      for (const part of order) {
        const s = await once(part);
        if (r >= 2) samples.get(part)!.push(s);
      }
    }
  } finally {
    for (const s of sessions.values()) await s.close();
    await backend.stop();
  }
  const base = samples.get('uninstrumented');
  const out = parts.map((part) => {
    const ss = samples.get(part)!;
    const ratio = base ? median(ss.map((s, i) => s.windowNs / base[i]!.windowNs)) : null;
    const addedNs = base ? median(ss.map((s, i) => s.windowNs - base[i]!.windowNs)) : null;
    const addedCpuNs = base ? median(ss.map((s, i) => s.cpuNs - base[i]!.cpuNs)) : null;
    return {
      part,
      windowMs: median(ss.map((s) => s.windowNs)) / 1e6,
      cpuMs: median(ss.map((s) => s.cpuNs)) / 1e6,
      wholeMs: median(ss.map((s) => s.wholeNs)) / 1e6,
      ratio,
      addedUsPerRow: addedNs === null ? null : addedNs / rows / 1000,
      addedCpuUsPerRow: addedCpuNs === null ? null : addedCpuNs / rows / 1000,
      verdicts: [...verdicts.get(part)!],
    };
  });
  console.log(`${backend.description.id} ${strategyName}, ${rows} rows, ${rounds} rounds (medians; ratio and added: per round against uninstrumented)`);
  console.log('part            window ms  cpu ms  whole measure() ms  ratio  added us/row  added cpu us/row  verdicts');
  for (const o of out) {
    console.log(
      `${o.part.padEnd(15)} ${o.windowMs.toFixed(2).padStart(9)} ${o.cpuMs.toFixed(2).padStart(7)} ${o.wholeMs.toFixed(2).padStart(19)} ${(o.ratio ?? NaN).toFixed(3).padStart(6)} ${(o.addedUsPerRow ?? NaN).toFixed(2).padStart(13)} ${(o.addedCpuUsPerRow ?? NaN).toFixed(2).padStart(17)}  ${o.verdicts.join(',')}`,
    );
  }
  if (values.json) console.log(JSON.stringify(out));
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
