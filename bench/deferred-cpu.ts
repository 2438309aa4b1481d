/**
 * Instruction counts of the deferred-work tracking (src/capture/deferred-work.ts) per awaited call, which barely move
 * with the machine's load (bench/deferred-cost.ts's CPU times do).
 *
 *   npm run build && npx tsx bench/deferred-cpu.ts [--scenarios floor,sqlite] [--calls N] [--jobs 2]
 *     [--roots main=/path/to/main-checkout,branch=.]
 *
 * Each run is a child under `valgrind --tool=callgrind` (node `--predictable`), bundled with esbuild so that tsx's
 * loader stays out of the count, running the build in dist/ of each root (bench/shipped.ts, `SQLTALLY_BENCH_ROOT`):
 * give two roots to compare a baseline checkout with this one in the same run. Per root and side (tracked,
 * untracked) three runs of R, 2R and 3R measured units after the same warm-up. Both sides do the same database work
 * at the same R (SQLite's WAL checkpoints fall at the same calls), so the added cost is taken from tracked minus
 * untracked at equal R: D(2R) - D(R) and D(3R) - D(2R) are two estimates of R units, and their difference is the
 * control (what the same code differs by between spans: collections falling elsewhere). `--control` adds an A/A side,
 * untracked again in runs of its own, reported like tracked. Scenarios:
 * - `floor`: an awaited async function that settles at once, no database, the tracker of a measured function open
 *   around the loop or not (bench/deferred-floor.ts's loop);
 * - `floor-hooks`: the same loop under empty hooks of a begin() window's tracker (async_hooks init, before and after,
 *   V8's settle hook): Node's own share, which no change to the tracker's code can remove; `floor-hooks-init` with an
 *   async_hooks init alone; `floor-hooks-v8` under V8's four promise hooks alone, the shape of a measured function's
 *   tracker;
 * - `floor-begin`: the same loop under the tracker of a begin() window (the caller's context);
 * - `sqlite`: bench/deferred-cost.ts's loop, an awaited async function around a counted better-sqlite3 INSERT in one
 *   `measure()` window of a session opened with `deferredWork` true or false;
 * - `sqlite-begin`: the same calls in a `begin()` window left open while they run (ended after the last);
 * - `sqlite-empty`: an empty `measure()` window (units are windows).
 * Instructions are user space only: the SQLite file's writes in the kernel are not in them, so the `sqlite` ratios
 * are higher than the CPU-time ratios of the same loop (the added instructions are all user space).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bundleChild, callgrindRun } from './callgrind';

const SCENARIOS = ['floor', 'floor-hooks', 'floor-hooks-init', 'floor-hooks-v8', 'floor-begin', 'sqlite', 'sqlite-begin', 'sqlite-empty'] as const;
type Scenario = (typeof SCENARIOS)[number];
const SIDES = ['untracked', 'tracked'] as const;
const DEFAULT_CALLS: Record<Scenario, number> = {
  floor: 20_000,
  'floor-hooks': 20_000,
  'floor-hooks-init': 20_000,
  'floor-hooks-v8': 20_000,
  'floor-begin': 5_000,
  sqlite: 4_000,
  'sqlite-begin': 1_000,
  'sqlite-empty': 20,
};
const WARMUP: Record<Scenario, number> = {
  floor: 20_000,
  'floor-hooks': 20_000,
  'floor-hooks-init': 20_000,
  'floor-hooks-v8': 20_000,
  'floor-begin': 5_000,
  sqlite: 4_000,
  'sqlite-begin': 2_000,
  'sqlite-empty': 40,
};
const UNIT: Record<Scenario, string> = {
  floor: 'awaited call',
  'floor-hooks': 'awaited call',
  'floor-hooks-init': 'awaited call',
  'floor-hooks-v8': 'awaited call',
  'floor-begin': 'awaited call',
  sqlite: 'awaited call',
  'sqlite-begin': 'awaited call',
  'sqlite-empty': 'window',
};

async function instructions(bundle: string, root: string, scenario: Scenario, side: string, warmup: number, measured: number): Promise<number> {
  const env = { ...process.env, NODE_PATH: join(root, 'node_modules'), SQLTALLY_BENCH_ROOT: root };
  const run = await callgrindRun(bundle, [scenario, side, String(warmup), String(measured)], env);
  const verdicts = /verdicts: (.*)/.exec(run.stdout)?.[1];
  if (verdicts !== undefined && verdicts !== 'assert') throw new Error(`${scenario} ${side}: windows were ${verdicts}, not assert`);
  return run.instructions;
}

/** Runs `tasks` at most `jobs` at a time. */
async function pooled<T>(tasks: (() => Promise<T>)[], jobs: number): Promise<T[]> {
  const out: T[] = new Array<T>(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, jobs) }, worker));
  return out;
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      scenarios: { type: 'string', default: 'floor,sqlite' },
      calls: { type: 'string' },
      jobs: { type: 'string', default: '2' },
      roots: { type: 'string', default: `branch=${join(__dirname, '..')}` },
      control: { type: 'boolean', default: false },
    },
  });
  const scenarios = values.scenarios.split(',').map((s) => s.trim()) as Scenario[];
  for (const s of scenarios) {
    if (!SCENARIOS.includes(s)) {
      console.error(`deferred-cpu: unknown scenario "${s}"; known: ${SCENARIOS.join(', ')}`);
      return 2;
    }
  }
  const roots = values.roots.split(',').map((r) => {
    const [name, path] = r.split('=');
    return { name: name!, path: resolve(path!) };
  });
  const tmp = mkdtempSync(join(os.tmpdir(), 'deferred-cpu-'));
  const load = [os.loadavg()[0]!];
  try {
    const bundle = bundleChild(join(__dirname, 'deferred-cpu-child.ts'), tmp, 'deferred-cpu-child.js');
    console.log(
      'callgrind instructions (node --predictable) per unit; added = tracked minus untracked at equal R, two estimates (their difference is the control)',
    );
    const sides: readonly string[] = values.control ? [...SIDES, 'control'] : SIDES;
    for (const scenario of scenarios) {
      const r = values.calls ? Number(values.calls) : DEFAULT_CALLS[scenario];
      const runs = roots.flatMap((root) => sides.flatMap((side) => [1, 2, 3].map((k) => ({ root, side, k }))));
      const counts = await pooled(
        // The A/A side is the untracked code under another name.
        runs.map((x) => () => instructions(bundle, x.root.path, scenario, x.side === 'control' ? 'untracked' : x.side, WARMUP[scenario], x.k * r)),
        Number(values.jobs),
      );
      load.push(os.loadavg()[0]!);
      const at = (root: string, side: string, k: number): number => counts[runs.findIndex((x) => x.root.name === root && x.side === side && x.k === k)]!;
      for (const root of roots) {
        const untracked = (at(root.name, 'untracked', 3) - at(root.name, 'untracked', 1)) / (2 * r);
        for (const side of sides.filter((x) => x !== 'untracked')) {
          const d = (k: number): number => at(root.name, side, k) - at(root.name, 'untracked', k);
          const e1 = (d(2) - d(1)) / r;
          const e2 = (d(3) - d(2)) / r;
          const added = (e1 + e2) / 2;
          console.log(
            `${scenario.padEnd(12)} ${root.name.padEnd(8)} ${side.padEnd(8)} per ${UNIT[scenario]}: untracked ${untracked.toFixed(0)}, added ${added.toFixed(0)} ` +
              `(${e1.toFixed(0)}, ${e2.toFixed(0)}), ${side}/untracked ${((untracked + added) / untracked).toFixed(3)} (R = ${r}, warm-up ${WARMUP[scenario]}; ` +
              `runs ${[1, 2, 3].map((k) => at(root.name, side, k)).join(' ')} / ${[1, 2, 3].map((k) => at(root.name, 'untracked', k)).join(' ')})`,
          );
        }
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`load average (1 min) ${load.map((l) => l.toFixed(1)).join(', ')} on ${os.cpus().length} CPUs`);
  return 0;
}

void main(process.argv.slice(2))
  .then((code) => (process.exitCode = code))
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
