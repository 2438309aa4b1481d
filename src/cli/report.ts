import { SqltallyError } from '../shared/errors';
import type { Command } from './main';
import { UsageError, argsCheckedOnly, parseFlags, usageExit } from './usage';
import { writeOutputDir } from '../report/atomic';
import { renderViews } from '../report/output';
import { readReportFile } from '../report/schema';

const USAGE = `usage: sqltally report <dir>

Renders report.md, reconciliation.md, report.html and the count charts (counts-*.svg) again from the report.json
(and events.json) in <dir>, with this version of sqltally. report.json, events.json and bench.json are not touched.
A missing or damaged report.json is refused, naming what is wrong, and nothing is written.`;

async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(argv, { help: { type: 'boolean', short: 'h', default: false } }, true);
    if (!parsed.values.help && parsed.positionals.length !== 1) throw new UsageError('name one report directory (the one holding report.json)');
  } catch (err) {
    return usageExit('report', err);
  }
  if (parsed.values.help) {
    console.log(USAGE);
    return 0;
  }
  if (argsCheckedOnly('report')) return 0;
  const dir = parsed.positionals[0]!;
  try {
    const report = readReportFile(dir);
    const files = renderViews(report);
    await writeOutputDir(dir, files, { force: true });
    console.log(`wrote ${files.map((f) => f.name).join(', ')} in ${dir}`);
    return 0;
  } catch (err) {
    if (err instanceof SqltallyError) {
      console.error(`sqltally report: ${err.message}\n  nothing was written.`);
      return 1;
    }
    throw err;
  }
}

export const command: Command = {
  summary: 'render report.md, report.html and the count charts again from a report directory',
  run,
};
