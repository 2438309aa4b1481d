/**
 * What a statement fingerprint costs on the statement it is hardest on: a 200 KB multi-row INSERT.
 *
 *   npx tsx bench/fingerprint.ts [--rounds 51] [--json]
 *
 * Texts of about 200 KB: rows of placeholders (`(?, ?, ?, ?, ?)`, the same text each row), rows of literals
 * (numbers, strings, NULL: what an ORM that inlines values sends), the literal rows again with repeated-row
 * skipping off (every token lexed: what a statement pays per character when it has no list to step over), and
 * two IN lists (66 000 placeholders; 33 000 numbers).
 * The figure is the median over rounds, in ms; nothing is asserted.
 *
 * Noise floor: a bare `charCodeAt` pass over the same text, timed in the same rounds, says what one look at every
 * character costs on this machine at this moment; a fingerprint near it cannot get much cheaper in JavaScript.
 * The spread (p25..p75, nearest rank) is printed beside each median.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { fingerprint } from '../src/sql/fingerprint';

const TARGET_CHARS = 200_000;

function nearestRank(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function timed(fn: () => unknown): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start);
}

function build(row: (i: number) => string): string {
  const head = 'INSERT INTO bench_rows (id, name, amount, created_at, note) VALUES ';
  const rows: string[] = [];
  let length = head.length;
  for (let i = 0; length < TARGET_CHARS; i++) {
    const r = row(i);
    rows.push(r);
    length += r.length + 2;
  }
  return head + rows.join(', ');
}

function scan(text: string): number {
  let commas = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 44) commas++;
  return commas;
}

function main(): void {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '51' }, json: { type: 'boolean', default: false } } });
  const rounds = Number(values.rounds);
  const placeholders = build(() => '(?, ?, ?, ?, ?)');
  const literals = build((i) => `(${i}, 'name-${i}', ${i * 1.5}, '2026-12-01 10:00:00', NULL)`);
  const inPlaceholders = `SELECT * FROM t WHERE id IN (${Array.from({ length: 66_000 }, () => '?').join(', ')})`;
  const inLiterals = `SELECT * FROM t WHERE id IN (${Array.from({ length: 33_000 }, (_, i) => String(100_000 + i)).join(', ')})`;
  const cases = [
    { name: 'placeholder rows', sql: placeholders, run: () => fingerprint(placeholders, 'mysql') },
    { name: 'literal rows', sql: literals, run: () => fingerprint(literals, 'mysql') },
    { name: 'literal rows, every token lexed', sql: literals, run: () => fingerprint(literals, 'mysql', { skipRepeatedRows: false }) },
    { name: 'IN list of placeholders', sql: inPlaceholders, run: () => fingerprint(inPlaceholders, 'mysql') },
    { name: 'IN list of numbers', sql: inLiterals, run: () => fingerprint(inLiterals, 'mysql') },
  ];
  const results = cases.map((c) => {
    const shape = c.run();
    for (let i = 0; i < 5; i++) c.run(); // warm-up
    const ns: number[] = [];
    const floor: number[] = [];
    for (let r = 0; r < rounds; r++) {
      ns.push(timed(c.run));
      floor.push(timed(() => scan(c.sql)));
    }
    ns.sort((a, b) => a - b);
    floor.sort((a, b) => a - b);
    return {
      name: c.name,
      chars: c.sql.length,
      shape,
      rounds,
      medianMs: nearestRank(ns, 50) / 1e6,
      p25Ms: nearestRank(ns, 25) / 1e6,
      p75Ms: nearestRank(ns, 75) / 1e6,
      bareScanMedianMs: nearestRank(floor, 50) / 1e6,
    };
  });
  const load = os.loadavg()[0]!;
  if (values.json) {
    console.log(JSON.stringify({ loadAverage: load, cpus: os.cpus().length, results }, null, 2));
    return;
  }
  console.log(`load average ${load.toFixed(1)} on ${os.cpus().length} CPUs; ${rounds} rounds each`);
  for (const r of results) {
    console.log(
      `  ${r.name} (${r.chars} chars): ${r.medianMs.toFixed(3)} ms median (p25..p75 ${r.p25Ms.toFixed(3)}..${r.p75Ms.toFixed(3)}; ` +
        `bare scan of the text ${r.bareScanMedianMs.toFixed(3)} ms) -> ${r.shape}`,
    );
  }
}

main();
