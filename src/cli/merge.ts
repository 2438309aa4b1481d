import { SqltallyError } from '../shared/errors';
import type { Command } from './main';
import { UsageError, argsCheckedOnly, parseFlags, usageExit } from './usage';
import { mergeReports } from '../report/merge';
import { writeReport } from '../report/output';
import { readReportFile } from '../report/schema';
import { renderTable } from '../report/table';

const USAGE = `usage: sqltally merge --out <dir> [--force] <report.json|dir>...

Combines the reports of CI matrix jobs (one backend per job) into one report.json, events.json, report.md and
bench.json; each job's events.json is read from beside its report.json. Each job's environment is kept; a cell key present in two reports, or reports of another schema, are refused.
  --out    directory to write (must not exist or be empty, unless --force)
  --force  replace report files in an existing non-empty directory`;

async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(
      argv,
      {
        out: { type: 'string' },
        force: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      true,
    );
    if (!parsed.values.help) {
      if (!parsed.values.out?.trim()) throw new UsageError('--out is required: the directory to write the merged report into');
      if (parsed.positionals.length === 0) throw new UsageError('no reports to merge: name report.json files or run directories after the options');
    }
  } catch (err) {
    return usageExit('merge', err);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!values.out) return 2;
  if (argsCheckedOnly('merge')) return 0;
  try {
    const sources = positionals.map((p) => ({ label: p, report: readReportFile(p) }));
    const merged = mergeReports(sources);
    await writeReport(values.out, merged, { force: values.force });
    console.log(renderTable(merged));
    console.log(
      `\nmerged ${sources.length} report(s), ${merged.cells.length} cell(s), status ${merged.status}: wrote ${values.out}/report.json, events.json, report.md, report.html, bench.json`,
    );
    return 0;
  } catch (err) {
    if (err instanceof SqltallyError) {
      console.error(`sqltally merge: ${err.message}\n  nothing was written.`);
      return 2;
    }
    throw err;
  }
}

export const command: Command = {
  summary: 'combine the reports of CI matrix jobs into one report, report.md and bench.json',
  run,
};
