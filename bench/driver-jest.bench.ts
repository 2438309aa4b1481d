/**
 * The Jest side of bench/driver-jest.ts: run by a Jest the bench starts (never by `npm test`, whose projects do not
 * match this file), so everything below loads through Jest's module registry into its vm context. Writes its
 * figures to the file the bench names.
 */
import fs from 'node:fs';
import { measureContext } from './driver-jest-measure';

const out = process.env['SQLTALLY_BENCH_OUT'];
const rows = Number(process.env['SQLTALLY_BENCH_ROWS'] ?? 5000);
const pairs = Number(process.env['SQLTALLY_BENCH_PAIRS'] ?? 21);
const control = process.env['SQLTALLY_BENCH_CONTROL'] === '1';

test('the driver proxy under Jest', async () => {
  if (!out) throw new Error('SQLTALLY_BENCH_OUT is not set: run bench/driver-jest.ts');
  const figures = await measureContext('jest', { rows, pairs, control });
  fs.writeFileSync(out, JSON.stringify(figures));
}, 600_000);
