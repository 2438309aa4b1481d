import { SqltallyError } from '../shared/errors';
import { buildReport } from './output';
import type { Environment, Failure, Report } from './schema';

/** A report and where it came from (a path, or a CI job name), used in messages and to tell environments apart. */
export interface MergeSource {
  label: string;
  report: Report;
}

function mergeError(message: string, hint?: string): SqltallyError {
  return new SqltallyError(message, { phase: 'report', hint });
}

function union<T extends string | number>(lists: readonly (readonly T[])[]): T[] {
  const all = [...new Set(lists.flat())];
  return typeof all[0] === 'number' ? ((all as number[]).sort((a, b) => a - b) as T[]) : all.sort();
}

function same<T>(label: string, values: { label: string; value: T }[]): T {
  const first = values[0]!;
  const other = values.find((v) => v.value !== first.value);
  if (other) {
    throw mergeError(
      `cannot merge reports measured with different ${label}: ${first.label} has ${String(first.value)}, ${other.label} has ${String(other.value)}`,
      `run every job with the same --${label}`,
    );
  }
  return first.value;
}

/**
 * Combines the reports of CI matrix jobs (usually one backend each) into one. Each source keeps its own
 * environment (ids made unique, cells re-pointed); cells are never merged or averaged, so two sources with the
 * same cell key are an error, and so are sources measured with different repeat counts.
 */
export function mergeReports(sources: readonly MergeSource[]): Report {
  if (sources.length === 0) throw mergeError('nothing to merge: give at least one report.json or output directory');

  const environments: Environment[] = [];
  const cells: Report['cells'] = [];
  const skipped: Report['skipped'] = [];
  const backends: Report['backends'] = [];
  const cellSource = new Map<string, string>();
  const failures: { label: string; failure: Failure }[] = [];

  for (const { label, report } of sources) {
    if (report.windows !== undefined || report.command !== undefined) {
      throw mergeError(
        `${label} is a report of sqltally exec or proxy (windows, not cells): merge combines reports of sqltally run`,
        'gate each exec report on its own',
      );
    }
    const renamed = new Map<string, string>();
    for (const env of report.environments) {
      let id = env.id;
      for (let n = 2; environments.some((e) => e.id === id); n++) id = `${env.id}#${n}`;
      renamed.set(env.id, id);
      environments.push({ ...env, id });
    }
    for (const cell of report.cells) {
      const earlier = cellSource.get(cell.key);
      if (earlier !== undefined) {
        throw mergeError(
          `duplicate cell ${cell.key}: in ${earlier} and in ${label}`,
          'each CI job must run a different part of the matrix (e.g. one backend per job)',
        );
      }
      cellSource.set(cell.key, label);
      cells.push({ ...cell, environment: renamed.get(cell.environment) ?? cell.environment });
    }
    for (const s of report.skipped) skipped.push({ ...s, environment: renamed.get(s.environment) ?? s.environment });
    for (const b of report.backends) if (!backends.some((x) => x.id === b.id)) backends.push(b);
    if (report.status === 'failed' && report.failure) failures.push({ label, failure: report.failure });
  }

  // A backend one job skipped but another ran is not missing from the merged report.
  const ran = new Set(cells.flatMap((c) => [c.backend, c.backendName]));
  const stillSkipped = skipped.filter((s) => !ran.has(s.backend));

  const reports = sources.map((s) => s.report);
  const times = (f: (r: Report) => string) => reports.map((r) => Date.parse(f(r)));
  const first = failures[0]?.failure;
  const failure: Failure | undefined = first && {
    ...first,
    message:
      failures.length === 1
        ? `${failures[0]!.label}: ${first.message}`
        : `${failures.length} of ${sources.length} reports failed: ${failures.map((f) => `${f.label}: ${f.failure.message}`).join('; ')}`,
  };

  return buildReport({
    status: failure ? 'failed' : 'ok',
    ...(failure ? { failure } : {}),
    matrix: {
      backends: union(reports.map((r) => r.matrix.backends)),
      strategies: union(reports.map((r) => r.matrix.strategies)),
      rows: union(reports.map((r) => r.matrix.rows)),
      hotRows: union(reports.map((r) => r.matrix.hotRows)),
      warmups: same(
        'warmups',
        sources.map((s) => ({ label: s.label, value: s.report.matrix.warmups })),
      ),
      repeats: same(
        'repeats',
        sources.map((s) => ({ label: s.label, value: s.report.matrix.repeats })),
      ),
    },
    environments,
    backends,
    skipped: stillSkipped,
    cells,
    startedAt: new Date(Math.min(...times((r) => r.startedAt))).toISOString(),
    finishedAt: new Date(Math.max(...times((r) => r.finishedAt))).toISOString(),
  });
}
