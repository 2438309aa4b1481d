import { join } from 'node:path';
import { SqltallyError } from '../shared/errors';
import { checkOutputDir } from '../report/atomic';
import { compareWithBaseline, renderGateResult } from '../report/gate';
import { writeReport } from '../report/output';
import { readBaselineFile, toJson } from '../report/schema';
import type { Baseline, CommandRun, Failure, Report } from '../report/schema';
import { renderWindows } from '../report/table';
import type { WindowRunOptions } from './exec-options';
import type { MeasuredWindows } from './windows';

/** Exit codes of `sqltally exec` and `proxy` of their own; a command's own code passes through beside them. */
export const EXIT = { ok: 0, failed: 1, usage: 2, timeout: 124, notExecutable: 126, notFound: 127, SIGINT: 130, SIGTERM: 143 } as const;

export function defaultOutDir(): string {
  return join('sqltally-report', new Date().toISOString().replace(/[:.]/g, '-'));
}

/** What must be right before anything starts: the output directory and the baseline. A message, or null. */
export async function checkBeforeStart(opts: WindowRunOptions, out: string): Promise<{ baseline: Baseline | null; problem: string | null }> {
  if (opts.write) {
    try {
      await checkOutputDir(out, { force: opts.force });
    } catch (err) {
      if (!(err instanceof SqltallyError)) throw err;
      return { baseline: null, problem: `--out: ${err.message}` };
    }
  }
  if (opts.baseline === undefined) return { baseline: null, problem: null };
  try {
    return { baseline: readBaselineFile(opts.baseline), problem: null };
  } catch (err) {
    if (!(err instanceof SqltallyError)) throw err;
    return {
      baseline: null,
      problem: `--baseline: ${err.message} (approve a first report with sqltally gate --report <dir> --baseline ${opts.baseline} --update)`,
    };
  }
}

/**
 * Builds the report with the exit code the run ends with, gates it against the baseline (a failed gate turns an
 * exit 0 into 1; any other code already says something failed, and stays), writes it, and prints the windows.
 */
export async function finishReport(
  measured: MeasuredWindows,
  run: (code: number, reason: string) => CommandRun,
  failure: Failure | null,
  verdict: { code: number; reason: string },
  opts: WindowRunOptions & { out: string },
  baseline: Baseline | null,
  progress: (line: string) => void,
): Promise<{ report: Report; exitCode: number }> {
  let { code, reason } = verdict;
  let report = measured.report(run(code, reason), failure);
  if (baseline) {
    const gate = compareWithBaseline(report, baseline);
    progress(renderGateResult(gate, { report: opts.out, baseline: opts.baseline ?? '' }).replace(/\n/g, '\nsqltally: '));
    if (!gate.pass && code === 0) {
      code = 1;
      reason = `the gate against ${opts.baseline} failed`;
      report = measured.report(run(code, reason), failure);
    }
  }
  if (opts.write) {
    try {
      await writeReport(opts.out, report, { force: opts.force });
      progress(`wrote ${join(opts.out, 'report.json')} and report.md, report.html (gate it with: sqltally gate --report ${opts.out} --baseline <file>)`);
    } catch (err) {
      if (!(err instanceof SqltallyError)) throw err;
      progress(`could not write the report, nothing was written to ${opts.out}: ${err.message}`);
      if (!opts.json) process.stdout.write(toJson(report));
      if (code === 0) code = 1;
    }
  }
  if (opts.json) process.stdout.write(toJson(report));
  else console.log(renderWindows(report.windows ?? []));
  if (report.status === 'failed') progress(`FAILED: ${report.failure?.message ?? 'unknown failure'}`);
  progress(`exit ${code}: ${reason}`);
  return { report, exitCode: code };
}
