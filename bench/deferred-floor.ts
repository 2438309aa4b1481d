/**
 * Where the deferred-work tracking's per-call cost goes, without a database: a loop of awaited async calls (each
 * settles synchronously) run with the tracker open and with it closed, alternating; and beside it, what one
 * `Error.captureStackTrace` costs inside a promise hook at a shallow and at the tracker's depth, against the hook
 * alone. CPU time of this process, medians of the pairs. `--control`: closed on both sides (the noise floor).
 *
 *   npm run build && npx tsx bench/deferred-floor.ts [--pairs 15] [--calls 20000] [--control]
 */
import { createHook } from 'node:async_hooks';
import { parseArgs } from 'node:util';
import { DeferredWorkTracker } from './shipped';

const { values } = parseArgs({
  options: { pairs: { type: 'string', default: '15' }, calls: { type: 'string', default: '20000' }, control: { type: 'boolean', default: false } },
});
const PAIRS = Number(values.pairs);
const CALLS = Number(values.calls);
const CONTROL = values.control === true;

const cpuNs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const call = async (i: number): Promise<number> => i + 1;
async function loop(): Promise<void> {
  for (let i = 0; i < CALLS; i++) await call(i);
}

async function trackerSide(tracked: boolean): Promise<number> {
  const t0 = cpuNs();
  if (tracked) {
    const tracker = new DeferredWorkTracker();
    tracker.open();
    await Promise.resolve().then(() => tracker.run(loop));
    tracker.close();
  } else {
    await Promise.resolve().then(loop);
  }
  return (cpuNs() - t0) / CALLS;
}

/** A promise hook that only counts, or that also captures `frames` frames of stack, as the tracker does. */
async function hookSide(frames: number): Promise<number> {
  let n = 0;
  const hook = createHook({
    init() {
      n++;
      if (frames === 0) return;
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = frames;
      Error.captureStackTrace({});
      Error.stackTraceLimit = limit;
    },
  });
  const t0 = cpuNs();
  hook.enable();
  await loop();
  hook.disable();
  return (cpuNs() - t0) / Math.max(n, 1);
}

async function main(): Promise<void> {
  const added: number[] = [];
  const ratios: number[] = [];
  const hook: Record<string, number[]> = { '0': [], '1': [], '3': [], '6': [], '40': [] };
  for (let pair = 0; pair < PAIRS + 1; pair++) {
    const first = pair % 2 === 0;
    const a = await trackerSide(!CONTROL && first);
    const b = await trackerSide(!CONTROL && !first);
    const [tracked, untracked] = first ? [a, b] : [b, a];
    const per = { '0': await hookSide(0), '1': await hookSide(1), '3': await hookSide(3), '6': await hookSide(6), '40': await hookSide(40) };
    if (pair === 0) continue;
    added.push(tracked - untracked);
    ratios.push(tracked / untracked);
    for (const k of Object.keys(per) as (keyof typeof per)[]) hook[k]!.push(per[k]);
  }
  const tag = CONTROL ? 'control (untracked on both sides): ' : '';
  console.log(`${tag}tracking cost per awaited call, no database: ${Math.round(median(added))} ns, tracked/untracked ${median(ratios).toFixed(1)}`);
  const at = (k: string): number => Math.round(median(hook[k]!));
  console.log(
    `per promise made under a hook: counting only ${at('0')} ns; with a capture of 1 frame ${at('1')} ns, 3 frames ${at('3')} ns, 6 frames ${at('6')} ns, 40 frames ${at('40')} ns`,
  );
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
