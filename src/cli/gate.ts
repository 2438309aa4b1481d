import { SqltallyError } from '../shared/errors';
import type { Command } from './main';
import { UsageError, argsCheckedOnly, parseFlags, usageExit } from './usage';
import { writeFileAtomic } from '../report/atomic';
import { approvalBlockers, baselineFromReport, compareWithBaseline, renderApproval, renderGateResult } from '../report/gate';
import { UnreadableFileError, readBaselineFile, readReportFile, toJson } from '../report/schema';
import type { Baseline, Report } from '../report/schema';

const USAGE = `usage: sqltally gate --report <dir|report.json> --baseline <file> [--update] [--json]

Compares the report's counts with the baseline, cell by cell, exactly (timings are never gated).
  exit 0  every count equal or lower (lower ones are listed: approve them with --update)
  exit 1  a count went up, a baseline cell is missing, a cell is incomplete or failed, the run failed,
          or the report comes from a different matrix
  exit 2  bad input: unreadable, corrupt or older-schema report or baseline, bad options

  --update  approve the report: write its counts as the new baseline (atomically) and print what changed.
            Refused when the run failed or a cell is incomplete. Replaces a baseline of an older schema, never a newer one.
  --json    print the comparison as JSON (the GateResult schema) instead of text.`;

/** Exit codes, so scripts can tell "counts changed" from "could not compare". */
const EXIT = { pass: 0, fail: 1, badInput: 2 } as const;

function parse(argv: string[]) {
  return parseFlags(argv, {
    report: { type: 'string' },
    baseline: { type: 'string' },
    update: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  }).values;
}

async function run(argv: string[]): Promise<number> {
  let opts: ReturnType<typeof parse>;
  try {
    opts = parse(argv);
    if (!opts.help) {
      const missing = (['report', 'baseline'] as const).filter((f) => !opts[f]?.trim());
      if (missing.length > 0)
        throw new UsageError(
          `${missing.map((f) => `--${f}`).join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required (a report directory or report.json, and the baseline file)`,
        );
    }
  } catch (err) {
    return usageExit('gate', err);
  }
  if (opts.help) {
    console.log(USAGE);
    return EXIT.pass;
  }
  if (!opts.report || !opts.baseline) return EXIT.badInput;
  if (argsCheckedOnly('gate')) return EXIT.pass;

  let report: Report;
  try {
    // Counts only: the gate never needs the per-call events, so a report.json copied without its events.json still gates.
    report = readReportFile(opts.report, { events: 'skip' });
  } catch (err) {
    if (err instanceof SqltallyError) {
      console.error(`sqltally gate: ${err.message}`);
      return EXIT.badInput;
    }
    throw err;
  }

  let baseline: Baseline | null = null;
  try {
    baseline = readBaselineFile(opts.baseline);
  } catch (err) {
    if (!(err instanceof UnreadableFileError)) throw err;
    // --update replaces only an absent or older-schema baseline: a corrupt one is left for a person to look at, and a
    // newer schema's is someone's newer sqltally's, which replacing would downgrade.
    const replaceable = opts.update && (err.problem === 'missing' || (err.problem === 'version' && err.older));
    if (!replaceable) {
      const hint = err.problem === 'missing' ? `\n  create it with: sqltally gate --report ${opts.report} --baseline ${opts.baseline} --update` : '';
      console.error(`sqltally gate: ${err.message}${hint}\n  nothing was written.`);
      return EXIT.badInput;
    }
    console.error(
      `sqltally gate: ${err.problem === 'missing' ? `no baseline at ${opts.baseline} yet: writing the first one` : `${err.message}\n  replacing it`}`,
    );
  }

  const result = baseline ? compareWithBaseline(report, baseline) : null;
  if (!opts.update) {
    const r = result!;
    console.log(opts.json ? toJson(r).trimEnd() : renderGateResult(r, { report: opts.report, baseline: opts.baseline }));
    return r.pass ? EXIT.pass : EXIT.fail;
  }

  const blockers = approvalBlockers(report);
  if (blockers.length > 0) {
    console.error(`sqltally gate: refusing to approve ${opts.report}; the baseline is unchanged:\n${blockers.map((b) => `  - ${b}`).join('\n')}`);
    return EXIT.fail;
  }
  const next = baselineFromReport(report);
  await writeFileAtomic(opts.baseline, toJson(next));
  console.log(`${renderApproval(result, next)}\nwrote ${opts.baseline}`);
  return EXIT.pass;
}

export const command: Command = {
  summary: 'compare a report with a committed baseline (counts only); --update approves',
  run,
};
