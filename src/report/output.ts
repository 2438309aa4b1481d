import { redactSecrets } from '../shared/errors';
import type { SqltallyError } from '../shared/errors';
import { writeOutputDir } from './atomic';
import type { RenderedFile, WriteOutputOptions } from './atomic';
import { toBenchJson } from './bench-json';
import { headline } from './headline';
import { HTML_FILE, renderHtml } from './html';
import { RECONCILIATION_FILE, renderMarkdown, renderReconciliation } from './markdown';
import { chartFileName, countsChart } from './svg';
import { EVENTS_FILE, EventsFileSchema, ReportSchema, SCHEMA_VERSION, parseValue, splitEvents, toJson, toLinesJson } from './schema';
import type { Failure, Report } from './schema';

/** Everything of a report except the fixed header. */
export type ReportInput = Omit<Report, 'schemaVersion' | 'kind'>;

/** Stamps the header and validates, so an invalid report fails where it is built, not when read back. */
export function buildReport(input: ReportInput): Report {
  return parseValue(ReportSchema, { schemaVersion: SCHEMA_VERSION, kind: 'report', ...input }, 'report');
}

/** The failure field of a report from any thrown value; the message is already password-free. */
export function failureOf(err: unknown): Failure {
  const e = err as Partial<SqltallyError> & { message?: unknown };
  const failure: Failure = { message: redactSecrets(typeof e?.message === 'string' ? e.message : String(err)) };
  if (typeof e?.backend === 'string') failure.backend = e.backend;
  if (typeof e?.phase === 'string') failure.phase = e.phase;
  if (typeof e?.statement === 'string') failure.statement = redactSecrets(e.statement);
  return failure;
}

/** Marks a report as failed, keeping every cell it has: a failed run never looks like a success. */
export function markFailed(report: ReportInput, err: unknown): ReportInput {
  return { ...report, status: 'failed', failure: failureOf(err) };
}

/**
 * The files a person reads, rendered from a valid report: one count chart per backend (SVG), reconciliation.md,
 * report.html (the report embedded, its driver events left to events.json) and report.md.
 */
export function renderViews(report: Report): RenderedFile[] {
  const shown = parseValue(ReportSchema, splitEvents(report).report, 'report');
  return [
    ...headline(report).map((h) => ({ name: chartFileName(h), content: redactSecrets(countsChart(h)) })),
    { name: RECONCILIATION_FILE, content: redactSecrets(renderReconciliation(report)) },
    { name: HTML_FILE, content: redactSecrets(renderHtml(shown)) },
    { name: 'report.md', content: redactSecrets(renderMarkdown(report)) },
  ];
}

/**
 * Renders every file of a report directory in memory: the views (see renderViews), bench.json, events.json and
 * report.json. The driver events of passing cells go to events.json (see `splitEvents`), which is always written,
 * empty when nothing moved, so that `--force` never leaves an older run's events beside a new report. Any URL
 * password is stripped from every file as a last line of defence; report.json comes last so a reader that waits
 * for it sees the others already in place.
 */
export function renderOutput(report: Report): RenderedFile[] {
  const valid = parseValue(ReportSchema, report, 'report');
  const split = splitEvents(valid);
  const events = parseValue(
    EventsFileSchema,
    split.events ?? { schemaVersion: SCHEMA_VERSION, kind: 'events', reportStartedAt: valid.startedAt, cells: [] },
    'events',
  );
  return [
    ...renderViews(valid),
    { name: 'bench.json', content: redactSecrets(toJson(toBenchJson(valid))) },
    { name: EVENTS_FILE, content: redactSecrets(toLinesJson(events, ['cells'])) },
    { name: 'report.json', content: redactSecrets(toLinesJson(parseValue(ReportSchema, split.report, 'report'), ['cells', 'windows'])) },
  ];
}

/** Renders everything first, then writes the directory (see writeOutputDir): no partial report on disk. */
export async function writeReport(dir: string, report: Report, options: WriteOutputOptions = {}): Promise<void> {
  await writeOutputDir(dir, renderOutput(report), options);
}
