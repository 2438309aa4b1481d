/**
 * The driver proxy's cost per call under Jest, beside the same measured in plain Node, in one run.
 *
 * Jest runs every module in a vm context whose global lookups (`Math`, `Array`, `Number`...) go through an
 * interceptor that V8 cannot cache, about 250 ns each on a 2-core machine; code that reads a global on every call
 * pays that in a user's test suite and not in a plain-Node bench (see src/shared/intrinsics.ts). So the same
 * measurement runs twice: here, in plain Node, and inside a Jest this bench starts on bench/driver-jest.bench.ts
 * (the build in dist/, better-sqlite3 and the measuring code all loaded through Jest's module registry, as a user's
 * tests load an installed sqltally). `--control` puts raw on both sides of every pair: the noise floor.
 *
 *   npx tsx bench/driver-jest.ts [--rows 5000] [--pairs 21] [--control] [--json]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { measureContext } from './driver-jest-measure';
import type { ContextFigures, PairFigures } from './driver-jest-measure';
import { runJestSide } from './jest-side';

function inJest(rows: number, pairs: number, control: boolean): ContextFigures {
  const env = { SQLTALLY_BENCH_ROWS: String(rows), SQLTALLY_BENCH_PAIRS: String(pairs), SQLTALLY_BENCH_CONTROL: control ? '1' : '0' };
  return runJestSide('bench/driver-jest.bench.ts', env) as ContextFigures;
}

function line(what: string, f: PairFigures, control: boolean): string {
  return `${what.padEnd(control ? 56 : 34)} counted/raw CPU ${f.cpuRatio.toFixed(3)}, added ${f.addedNsPerCall.toFixed(0).padStart(5)} ns a call (raw ${f.rawNsPerCall.toFixed(0)} ns), ${f.pairs} pairs`;
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      rows: { type: 'string', default: '5000' },
      pairs: { type: 'string', default: '21' },
      control: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const rows = Number(values.rows);
  const pairs = Number(values.pairs);
  if (!Number.isInteger(rows) || rows <= 0 || !Number.isInteger(pairs) || pairs <= 0) {
    console.error('driver-jest: --rows and --pairs must be positive integers');
    return 2;
  }
  const control = values.control;
  const node = await measureContext('node', { rows, pairs, control });
  const jest = inJest(rows, pairs, control);
  if (values.json) {
    console.log(JSON.stringify({ loadAverage: os.loadavg(), cpus: os.cpus().length, node, jest }, null, 2));
    return 0;
  }
  const tag = control ? 'control (raw vs raw): ' : '';
  for (const f of [node, jest]) {
    const where = f.context === 'node' ? 'plain Node' : 'under Jest';
    console.log(line(`${tag}${where}, per-row-tx ${rows} rows`, f.perRowTx, control));
    console.log(line(`${tag}${where}, prepared SELECT 1`, f.select, control));
    console.log(line(`${tag}${where}, an awaited pg call on a stand-in`, f.network.pg, control));
    console.log(line(`${tag}${where}, an awaited mysql2 call on a stand-in`, f.network.mysql2, control));
    console.log(
      `${where}: counting one mysql2 VALUES ? call of ${rows} rows x 6 values ${f.expandedValuesMs.cold.toFixed(2)} ms after 3 calls, ${f.expandedValuesMs.warm.toFixed(2)} ms after 200`,
    );
    console.log(
      `${where}: one global lookup (Math.imul through Math) ${f.globalLookupNs.toFixed(1)} ns, through a module binding ${f.bindingNs.toFixed(1)} ns`,
    );
  }
  console.log(`load average ${os.loadavg()[0]?.toFixed(1)} on ${os.cpus().length} CPUs while measuring`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
