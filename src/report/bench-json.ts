import { z } from 'zod';
import type { Cell, Report } from './schema';
import { shortVersion, sortedCells } from './table';
import { formatMs, percentileIsMax } from './timings';

/**
 * One point in github-action-benchmark's `customSmallerIsBetter` format. The action keys its history by `name`,
 * so names must stay stable across runs: they carry backend, server version, strategy and rows, never a date.
 */
export const BenchEntrySchema = z.object({
  name: z.string().min(1),
  unit: z.string().min(1),
  value: z.number(),
  /** Shown by the action in the tooltip: the sample count and whether a percentile is really the max. */
  extra: z.string().optional(),
});
export type BenchEntry = z.infer<typeof BenchEntrySchema>;
export const BenchJsonSchema = z.array(BenchEntrySchema);

/** `mariadb@10.11.14 mysql2.query-multirow 5000 rows` (+ ` hot`). */
export function benchSeriesName(cell: Cell): string {
  return `${cell.backendName}@${shortVersion(cell.serverVersion)} ${cell.strategy} ${cell.rows} rows${cell.hot ? ' hot' : ''}`;
}

/** Counts worth a trend line; each is a separate series so a timing regression never hides a count change. */
const COUNT_SERIES: { label: string; value: (c: Cell) => number | null | undefined }[] = [
  { label: 'driver calls', value: (c) => c.layers.driver?.calls },
  { label: 'wire commands', value: (c) => c.layers.wire?.commandsTotal },
  { label: 'wire round trips', value: (c) => c.layers.wire?.roundTrips },
  { label: 'server statements', value: (c) => c.layers.server?.summary.statements },
  { label: 'server rows', value: (c) => c.layers.server?.summary.rowsInserted },
];

function ms(ns: number): number {
  return Number(formatMs(ns));
}

/** bench.json: timings (ms) and counts (count) as separate series, cells with errors left out. */
export function toBenchJson(report: Report): BenchEntry[] {
  const out: BenchEntry[] = [];
  const cells = sortedCells(report.cells).filter((c) => !c.error);
  // Two releases of one driver in the same matrix (mariadb 3.3 and 3.5) would share a series; only then is the
  // driver version added, so names stay as short as the matrix allows and stable while the matrix is.
  const seen = new Map<string, number>();
  for (const c of cells) seen.set(benchSeriesName(c), (seen.get(benchSeriesName(c)) ?? 0) + 1);
  for (const cell of cells) {
    const base = benchSeriesName(cell);
    const name = (seen.get(base) ?? 0) > 1 ? `${base} (${cell.driver}@${cell.driverVersion})` : base;
    const t = cell.timings?.summary;
    if (t) {
      out.push({ name: `${name} p50`, unit: 'ms', value: ms(t.p50Ns), extra: `n=${t.n} samples; driver ${cell.driver}@${cell.driverVersion}` });
      out.push({
        name: `${name} p95`,
        unit: 'ms',
        value: ms(t.p95Ns),
        extra: percentileIsMax(95, t.n) ? `n=${t.n} samples: p95 is the maximum` : `n=${t.n} samples`,
      });
    }
    // Its own series: the p50/p95 series above stay the counted windows', comparable with earlier runs.
    const u = cell.uninstrumented?.timings?.summary;
    if (u)
      out.push({
        name: `${name} p50 uninstrumented`,
        unit: 'ms',
        value: ms(u.p50Ns),
        extra: `n=${u.n} samples, counting off; driver ${cell.driver}@${cell.driverVersion}`,
      });
    for (const s of COUNT_SERIES) {
      const v = s.value(cell);
      if (v !== null && v !== undefined) out.push({ name: `${name} ${s.label}`, unit: 'count', value: v, extra: `verdict ${cell.verdict.kind}` });
    }
  }
  return BenchJsonSchema.parse(out);
}
