/**
 * The Jest side of `bench/deferred-cost.ts --jest`: run by a Jest the bench starts (never by `npm test`, whose
 * projects do not match this file), so everything below loads through Jest's module registry into its vm context.
 * Writes its figures to the file the bench names.
 */
import fs from 'node:fs';
import { measureDeferredCost } from './deferred-cost-measure';

const out = process.env['SQLTALLY_BENCH_OUT'];
const opts = {
  pairs: Number(process.env['SQLTALLY_BENCH_PAIRS'] ?? 7),
  calls: Number(process.env['SQLTALLY_BENCH_CALLS'] ?? 3000),
  windows: Number(process.env['SQLTALLY_BENCH_WINDOWS'] ?? 100),
  control: process.env['SQLTALLY_BENCH_CONTROL'] === '1',
};

test('the deferred-work tracking under Jest', async () => {
  if (!out) throw new Error('SQLTALLY_BENCH_OUT is not set: run bench/deferred-cost.ts --jest');
  fs.writeFileSync(out, JSON.stringify(await measureDeferredCost('jest', opts)));
}, 1_200_000);
