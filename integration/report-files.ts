import { headline } from '../reports/headline';
import type { Report } from '../reports/schema';
import { chartFileName } from '../reports/svg';

/** The files a report directory holds: the fixed ones, and one count chart per backend the headline shows. */
export function reportFiles(report: Report): string[] {
  const fixed = ['bench.json', 'events.json', 'reconciliation.md', 'report.html', 'report.json', 'report.md'];
  return [...fixed, ...headline(report).map(chartFileName)].sort();
}
