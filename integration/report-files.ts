import { headline } from '../src/report/headline';
import type { Report } from '../src/report/schema';
import { chartFileName } from '../src/report/svg';

/** The files a report directory holds: the fixed ones, and one count chart per backend the headline shows. */
export function reportFiles(report: Report): string[] {
  const fixed = ['bench.json', 'events.json', 'reconciliation.md', 'report.html', 'report.json', 'report.md'];
  return [...fixed, ...headline(report).map(chartFileName)].sort();
}
