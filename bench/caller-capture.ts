/**
 * What `captureCaller` costs per call.
 *
 *   npx tsx bench/caller-capture.ts [--rounds 21] [--calls 2000] [--json]
 *
 * For three stack depths (the caller directly above; 10 and 30 frames of a package under `node_modules` in
 * between, as an ORM puts there), rounds of N calls alternate with control rounds of N calls through the same
 * frames to a no-op, so the cost of the frames themselves is not billed to the capture. The figure is the
 * median over rounds of (capture - control) / N, in ns per call.
 *
 * Noise floor: the spread of the per-round differences (the 25th to 75th percentile, nearest rank); a figure
 * smaller than its spread is not measured, only bounded. Load average is printed with it: on a shared machine
 * wall time measures the neighbours too. Under tsx, Node's source maps are on, so every stack is mapped to the
 * TypeScript lines, which is the cost a ts-jest or tsx user pays.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { captureCaller } from '../src/shared/caller';

const DEPTHS = [0, 10, 30];

function nearestRank(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function timeRound(calls: number, fn: () => unknown): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) fn();
  return Number(process.hrtime.bigint() - start);
}

function main(): void {
  const { values } = parseArgs({
    options: { rounds: { type: 'string', default: '21' }, calls: { type: 'string', default: '2000' }, json: { type: 'boolean', default: false } },
  });
  const rounds = Number(values.rounds);
  const calls = Number(values.calls);
  const dir = mkdtempSync(join(os.tmpdir(), 'caller-bench-'));
  try {
    const pkg = join(dir, 'node_modules', 'deep-orm');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(pkg, 'index.js'), 'exports.nest = function nest(depth, fn) { return depth === 0 ? fn() : nest(depth - 1, fn); };\n');

    const { nest } = require(join(pkg, 'index.js')) as { nest(depth: number, fn: () => unknown): unknown };
    const noop = (): null => null;
    const results = DEPTHS.map((depth) => {
      const seen = nest(depth, captureCaller);
      // Warm-up: both paths compiled before anything is timed.
      timeRound(calls, () => nest(depth, captureCaller));
      timeRound(calls, () => nest(depth, noop));
      const perCall: number[] = [];
      const control: number[] = [];
      for (let r = 0; r < rounds; r++) {
        // Alternate which side goes first, so drift falls on both.
        const first = r % 2 === 0;
        const c1 = first ? timeRound(calls, () => nest(depth, captureCaller)) : 0;
        const k = timeRound(calls, () => nest(depth, noop));
        const c2 = first ? 0 : timeRound(calls, () => nest(depth, captureCaller));
        control.push(k / calls);
        perCall.push((c1 + c2 - k) / calls);
      }
      const sorted = [...perCall].sort((a, b) => a - b);
      const sortedControl = [...control].sort((a, b) => a - b);
      return {
        frames: depth,
        caller: seen,
        rounds,
        callsPerRound: calls,
        medianNsPerCall: nearestRank(sorted, 50),
        p25NsPerCall: nearestRank(sorted, 25),
        p75NsPerCall: nearestRank(sorted, 75),
        controlMedianNsPerCall: nearestRank(sortedControl, 50),
      };
    });
    const load = os.loadavg()[0]!;
    if (values.json) {
      console.log(JSON.stringify({ loadAverage: load, cpus: os.cpus().length, results }, null, 2));
      return;
    }
    console.log(`load average ${load.toFixed(1)} on ${os.cpus().length} CPUs; ${rounds} rounds of ${calls} calls per depth`);
    for (const r of results) {
      console.log(
        `  ${String(r.frames).padStart(2)} package frames: ${Math.round(r.medianNsPerCall)} ns/call median ` +
          `(noise floor: p25..p75 ${Math.round(r.p25NsPerCall)}..${Math.round(r.p75NsPerCall)} ns; control ${Math.round(r.controlMedianNsPerCall)} ns/call) -> ${r.caller}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
