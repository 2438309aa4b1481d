/**
 * What a statement fingerprint costs on the statement it is hardest on: a 200 KB multi-row INSERT.
 *
 *   npx tsx bench/fingerprint.ts [--rounds 51] [--json]
 *   npx tsx bench/fingerprint.ts --builds /tmp/a/sql/fingerprint.js,/tmp/a2/sql/fingerprint.js,dist/sql/fingerprint.js
 *   valgrind --tool=callgrind node --predictable -r tsx/cjs bench/fingerprint.ts --passes 20 --builds dist/sql/fingerprint.js
 *
 * Texts of about 200 KB: rows of placeholders (`(?, ?, ?, ?, ?)`, the same text each row), rows of literals
 * (numbers, strings, NULL: what an ORM that inlines values sends), the literal rows again with repeated-row
 * skipping off (every token lexed: what a statement pays per character when it has no list to step over), and
 * two IN lists (66 000 placeholders; 33 000 numbers), and a column list of 12 000 names (half quoted) in three dialects.
 * The figure is the median over rounds, in ms; nothing is asserted.
 *
 * Noise floor: a bare `charCodeAt` pass over the same text, timed in the same rounds, says what one look at every
 * character costs on this machine at this moment; a fingerprint near it cannot get much cheaper in JavaScript.
 * The spread (p25..p75, nearest rank) is printed beside each median.
 *
 * `--builds` compares compiled builds (`npm run build` output, each copied to its own folder) in one process: every
 * round runs each build once, in rotating order, timed in CPU time; each build's figure is its per-round ratio to the
 * first build's. Give the first build twice (two copies) for the control. `--passes N` runs every case N times on each
 * build untimed, for an instruction count (less that of `--passes 0`).
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fingerprint } from '../src/sql/fingerprint';

type Fingerprint = typeof fingerprint;

const TARGET_CHARS = 200_000;

function nearestRank(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function timed(fn: () => unknown): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start);
}

/** CPU time (user + system, all threads) of one call, in ns. */
function cpuTimed(fn: () => unknown): number {
  const start = process.cpuUsage();
  fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) * 1000;
}

function spread(sorted: number[], digits: number): string {
  return `${nearestRank(sorted, 50).toFixed(digits)} [${nearestRank(sorted, 25).toFixed(digits)}..${nearestRank(sorted, 75).toFixed(digits)}]`;
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

function cases(fp: Fingerprint): { name: string; sql: string; run: () => string }[] {
  const placeholders = build(() => '(?, ?, ?, ?, ?)');
  const literals = build((i) => `(${i}, 'name-${i}', ${i * 1.5}, '2026-12-01 10:00:00', NULL)`);
  const inPlaceholders = `SELECT * FROM t WHERE id IN (${Array.from({ length: 66_000 }, () => '?').join(', ')})`;
  const inLiterals = `SELECT * FROM t WHERE id IN (${Array.from({ length: 33_000 }, (_, i) => String(100_000 + i)).join(', ')})`;
  // Identifiers in every dialect's case rule: one name token per column, quoted and not.
  const names = `SELECT ${Array.from({ length: 12_000 }, (_, i) => (i % 2 ? `Col_${i}` : `"col ${i}"`)).join(', ')} FROM t`;
  return [
    { name: 'placeholder rows', sql: placeholders, run: () => fp(placeholders, 'mysql') },
    { name: 'literal rows', sql: literals, run: () => fp(literals, 'mysql') },
    { name: 'literal rows, every token lexed', sql: literals, run: () => fp(literals, 'mysql', { skipRepeatedRows: false }) },
    { name: 'IN list of placeholders', sql: inPlaceholders, run: () => fp(inPlaceholders, 'mysql') },
    { name: 'IN list of numbers', sql: inLiterals, run: () => fp(inLiterals, 'mysql') },
    { name: 'column names, mysql', sql: names, run: () => fp(names, 'mysql') },
    { name: 'column names, postgres', sql: names, run: () => fp(names, 'postgres') },
    { name: 'column names, sqlite', sql: names, run: () => fp(names, 'sqlite') },
  ];
}

/** Each build's CPU time per round as a ratio to the first build's, per case. */
function compareBuilds(files: string[], rounds: number): void {
  const builds = files.map((file) => {
    const loaded = require(path.resolve(file)) as { fingerprint: Fingerprint };
    return { file, cases: cases(loaded.fingerprint) };
  });
  const load = os.loadavg();
  console.log(`load average ${load.map((l) => l.toFixed(2)).join(' ')} on ${os.cpus().length} CPUs; ${rounds} rounds; CPU ms median [p25..p75]`);
  for (let c = 0; c < builds[0]!.cases.length; c++) {
    const shapes = builds.map((b) => b.cases[c]!.run());
    if (shapes.some((s) => s !== shapes[0])) throw new Error(`${builds[0]!.cases[c]!.name}: the builds disagree on the fingerprint`);
    for (let i = 0; i < 5; i++) for (const b of builds) b.cases[c]!.run();
    const ms: number[][] = builds.map(() => []);
    const ratios: number[][] = builds.map(() => []);
    for (let r = 0; r < rounds; r++) {
      const round: number[] = [];
      for (let k = 0; k < builds.length; k++) {
        const b = (r + k) % builds.length;
        round[b] = cpuTimed(builds[b]!.cases[c]!.run);
      }
      round.forEach((ns, b) => {
        ms[b]!.push(ns / 1e6);
        ratios[b]!.push(ns / round[0]!);
      });
    }
    console.log(`  ${builds[0]!.cases[c]!.name}`);
    builds.forEach((b, k) => {
      const sortedMs = [...ms[k]!].sort((x, y) => x - y);
      const sortedRatio = [...ratios[k]!].sort((x, y) => x - y);
      console.log(`    ${b.file}: ${spread(sortedMs, 3)} ms, ratio to the first ${spread(sortedRatio, 3)}`);
    });
  }
  console.log(
    `load average after ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}

function main(): void {
  const { values } = parseArgs({
    options: { rounds: { type: 'string', default: '51' }, json: { type: 'boolean', default: false }, builds: { type: 'string' }, passes: { type: 'string' } },
  });
  const rounds = Number(values.rounds);
  if (values.passes !== undefined) {
    const runs = (values.builds?.split(',') ?? []).map((file) => cases((require(path.resolve(file)) as { fingerprint: Fingerprint }).fingerprint));
    let chars = 0;
    for (let i = 0; i < Number(values.passes); i++) for (const run of runs.flat()) chars += run.run().length;
    console.log(`${values.passes} passes, ${chars} characters of fingerprints`);
    return;
  }
  if (values.builds) {
    compareBuilds(values.builds.split(','), rounds);
    return;
  }
  const results = cases(fingerprint).map((c) => {
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
