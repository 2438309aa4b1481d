import { buildReport } from '../report/output';
import type { ReportInput } from '../report/output';
import type { Cell, Failure, Report } from '../report/schema';
import { VerdictKindSchema } from '../verdict/types';
import type { VerdictKind } from '../verdict/types';

/** Cells by verdict, plus how many of them hold the workload's own error. */
export type VerdictCounts = Record<VerdictKind, number> & { errored: number };

export function verdictCounts(cells: readonly Cell[]): VerdictCounts {
  const counts = { ...Object.fromEntries(VerdictKindSchema.options.map((k) => [k, 0])), errored: 0 } as VerdictCounts;
  for (const cell of cells) {
    counts[cell.verdict.kind] += 1;
    if (cell.error) counts.errored += 1;
  }
  return counts;
}

/**
 * The last line `sqltally run` prints: cells by verdict and what that means for the gate, so a run that exits 0
 * with incomplete cells says in so many words that it will not pass `sqltally gate`.
 */
export function summaryLine(report: Report): string {
  const c = verdictCounts(report.cells);
  const parts = [`${report.cells.length} cell(s): ${c.assert} assert, ${c.report} report, ${c.incomplete} incomplete`];
  if (c.errored > 0) parts.push(`${c.errored} with a workload error`);
  if (report.skipped.length > 0) {
    // A skip is a backend or one strategy on it: counted per backend, so three strategies are not three backends.
    const perBackend = new Map<string, number>();
    for (const s of report.skipped) perBackend.set(s.backend, (perBackend.get(s.backend) ?? 0) + 1);
    parts.push(`${report.skipped.length} skipped (${[...perBackend].map(([b, n]) => (n > 1 ? `${b}: ${n}` : b)).join(', ')})`);
  }
  if (report.status === 'failed') parts.push('run FAILED');
  else if (c.incomplete > 0) parts.push(`the ${c.incomplete} incomplete cell(s) fail sqltally gate`);
  else if (c.report > 0) parts.push('report cells show their server counts without gating them');
  return parts.join('; ');
}

/** The failure of a run that measured nothing: never an "ok" with zero cells. */
function nothingMeasured(input: ReportInput): Failure {
  const skipped = input.skipped.map((s) => `${s.backend}: ${s.reason.split('\n')[0]}`);
  const requested = input.matrix.backends;
  const why =
    skipped.length > 0 && input.backends.length === 0
      ? `every requested backend was skipped (${skipped.join('; ')})`
      : `no strategy ran on the backends that started (${input.backends.map((b) => b.id).join(', ') || 'none'})`;
  return {
    message: `nothing was measured: 0 cells, because ${why}`,
    ...(requested.length === 1 && requested[0] ? { backend: requested[0] } : {}),
    phase: 'provision',
  };
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n').slice(0, 4).join(' ');
}

/**
 * Stamps status and validates: a run with no cells fails, and a report that does not validate (two cells with one
 * key, say) still comes back as a valid failed report saying why, never as an exception after minutes of work.
 * The cells that made it invalid are dropped, the rest kept where the schema allows.
 */
export function finishReport(input: ReportInput): Report {
  const settled: ReportInput = input.status === 'ok' && input.cells.length === 0 ? { ...input, status: 'failed', failure: nothingMeasured(input) } : input;
  try {
    return buildReport(settled);
  } catch (err) {
    const keys = new Set<string>();
    const unique = settled.cells.filter((c) => !keys.has(c.key) && keys.add(c.key));
    const failure: Failure = {
      message: `the report did not validate, so the run is marked failed${unique.length < settled.cells.length ? ` and ${settled.cells.length - unique.length} cell(s) with a repeated key were left out` : ''}: ${firstLine(err)}${settled.failure ? `; before that: ${settled.failure.message}` : ''}`,
      phase: 'report',
    };
    try {
      return buildReport({ ...settled, status: 'failed', failure, cells: unique });
    } catch (again) {
      // Nothing of the measured part could be kept; what was asked and where it ran still can.
      return buildReport({
        ...settled,
        status: 'failed',
        failure: { ...failure, message: `${failure.message}; the cells were left out too: ${firstLine(again)}` },
        backends: [],
        cells: [],
      });
    }
  }
}
