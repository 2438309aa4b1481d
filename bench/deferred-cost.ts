/**
 * What following a measured function's asynchronous work costs (src/capture/deferred-work.ts): the same windows with the
 * tracking on and off (`deferredWork: false`), alternating, on SQLite (in process, so the figure is the tracking's
 * and not a server's). Per call: a window of N awaited calls, each an async function around a counted prepared
 * INSERT (each call makes a few promises, every one followed). Per window: an empty window. CPU time of this process.
 * `--control` runs untracked on both sides: the noise floor. `--jest` measures the same again inside a Jest this
 * bench starts (bench/deferred-jest.bench.ts), whose runner keeps async hooks of its own. For instruction counts,
 * which do not move with the machine's load, see bench/deferred-cpu.ts.
 *
 *   npm run build && npx tsx bench/deferred-cost.ts [--pairs 21] [--calls 5000] [--windows 200] [--control] [--jest]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { measureDeferredCost, type DeferredCostFigures } from './deferred-cost-measure';
import { runJestSide } from './jest-side';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '21' },
    calls: { type: 'string', default: '5000' },
    windows: { type: 'string', default: '200' },
    control: { type: 'boolean', default: false },
    jest: { type: 'boolean', default: false },
  },
});
const OPTS = { pairs: Number(values.pairs), calls: Number(values.calls), windows: Number(values.windows), control: values.control === true };

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function inJest(): DeferredCostFigures {
  const env = {
    SQLTALLY_BENCH_PAIRS: String(OPTS.pairs),
    SQLTALLY_BENCH_CALLS: String(OPTS.calls),
    SQLTALLY_BENCH_WINDOWS: String(OPTS.windows),
    SQLTALLY_BENCH_CONTROL: OPTS.control ? '1' : '0',
  };
  return runJestSide('bench/deferred-jest.bench.ts', env) as DeferredCostFigures;
}

function print(f: DeferredCostFigures): void {
  const tag = `${f.context === 'jest' ? 'under Jest' : 'plain Node'}${f.control ? ', control (untracked on both sides)' : ''}: `;
  const range = (xs: number[], digits: number, scale = 1) =>
    `${(median(xs) / scale).toFixed(digits)} (${(Math.min(...xs) / scale).toFixed(digits)}-${(Math.max(...xs) / scale).toFixed(digits)})`;
  console.log(
    `${tag}tracking cost per awaited call (async function around a counted INSERT, ${OPTS.calls} calls a window, CPU, median (range) of ${f.pairs} pairs): ${range(f.addedNsPerCall, 0)} ns`,
  );
  console.log(
    `${tag}tracking cost per window (an empty window, CPU, ${OPTS.windows} windows a side, median (range) of ${f.pairs} pairs): ${range(f.addedNsPerWindow, 0, 1000)} us`,
  );
  console.log(`${tag}tracked/untracked CPU per awaited call: ${range(f.ratios, 2)} (untracked: ${Math.round(median(f.untrackedNsPerCall))} ns a call)`);
  console.log(`${tag}verdicts: ${f.verdicts.join(', ')}`);
}

async function main(): Promise<void> {
  const load = [os.loadavg()[0]!];
  print(await measureDeferredCost('node', OPTS));
  load.push(os.loadavg()[0]!);
  if (values.jest) {
    print(inJest());
    load.push(os.loadavg()[0]!);
  }
  console.log(`load average (1 min) ${load.map((l) => l.toFixed(1)).join(', ')} on ${os.cpus().length} CPUs`);
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
