import type { Cell, Environment, Report } from './schema';
import { headline, type HeadlineBackend } from './headline';
import { chartFileName } from './svg';
import { CELL_COLUMNS, WINDOW_COLUMNS, cellColumns, shortVersion, sortedCells, windowColumns } from './table';
import { describePercentile, formatCostUs, formatMs, percentileIsMax } from './timings';

// Mermaid's xychart draws no legend, so lines get fixed colours and the legend is written beside the chart.
const PALETTE = [
  ['#1f77b4', 'blue'],
  ['#ff7f0e', 'orange'],
  ['#2ca02c', 'green'],
  ['#d62728', 'red'],
  ['#9467bd', 'purple'],
  ['#8c564b', 'brown'],
  ['#e377c2', 'pink'],
  ['#7f7f7f', 'grey'],
] as const;
const REASON_CHARS = 400;

/** Escapes text for a Markdown table cell. */
function md(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

/** Escapes text for inline HTML (the <details> summaries), where Markdown escapes would show literally. */
function html(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function table(header: readonly string[], rows: readonly (readonly string[])[], numeric: readonly boolean[] = []): string {
  const align = header.map((_, i) => (numeric[i] ? '---:' : '---'));
  return [header, align, ...rows].map((r) => `| ${r.map(md).join(' | ')} |`).join('\n');
}

function gib(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}

function environmentTable(envs: readonly Environment[]): string {
  const header = ['', ...envs.map((e) => e.id)];
  const row = (label: string, f: (e: Environment) => string) => [label, ...envs.map(f)];
  return table(header, [
    row('OS', (e) => e.os.prettyName ?? e.os.platform),
    row('kernel', (e) => e.os.release),
    row('arch', (e) => e.arch),
    row('CPU', (e) => `${e.cpu.model} (${e.cpu.cores} cores)`),
    row('memory', (e) => gib(e.memoryBytes)),
    row('Node', (e) => e.node),
    row('drivers', (e) =>
      Object.entries(e.drivers)
        .map(([d, v]) => `${d} ${v ?? 'not installed'}`)
        .join(', '),
    ),
    row('git', (e) => (e.git.commit ? `${e.git.commit.slice(0, 12)}${e.git.dirty ? ' (dirty)' : ''}` : 'unknown')),
    row('sqltally', (e) => e.sqltallyVersion),
    row('CI', (e) => (e.ci ? [e.ci.provider, e.ci.job, e.ci.runId].filter(Boolean).join(' ') : 'no')),
    row('collected', (e) => e.collectedAt),
  ]);
}

function failures(report: Report): string[] {
  const out: string[] = [];
  if (report.status === 'failed') {
    const f = report.failure;
    out.push('> [!CAUTION]', `> **This run failed.** ${md(f?.message ?? 'no failure message recorded')}`);
    const where = [f?.backend && `backend ${f.backend}`, f?.phase && `phase ${f.phase}`].filter(Boolean).join(', ');
    if (where) out.push(`> (${where})`);
    if (f?.statement) out.push('>', `> Statement: \`${md(f.statement)}\``);
    out.push('');
  }
  const troubled = sortedCells(report.cells).filter((c) => c.error || c.verdict.kind === 'incomplete');
  if (troubled.length > 0) {
    out.push('> [!WARNING]', `> **${troubled.length} cell(s) failed or are incomplete** (an incomplete cell fails the gate):`);
    for (const c of troubled) {
      const why = c.error ? `${c.error.phase}: ${c.error.message}` : c.verdict.reason;
      out.push(`> - \`${c.key}\`: ${md(why.slice(0, REASON_CHARS))}`);
    }
    out.push('');
  }
  for (const s of report.skipped) out.push(`- Skipped **${md(s.backend)}** (${md(s.environment)}): ${md(s.reason)}`);
  if (report.skipped.length > 0) out.push('');
  return out;
}

/** The command and the windows of a report of `sqltally exec` or `proxy`; nothing for a report of `sqltally run`. */
function windowsSection(report: Report): string[] {
  const windows = report.windows ?? [];
  const run = report.command;
  if (windows.length === 0 && !run) return [];
  const out: string[] = ['## Windows', ''];
  if (run) {
    const how = run.mode === 'proxy' ? 'no command (sqltally proxy)' : `\`${md(run.argv.join(' '))}\``;
    const ended = run.signal ? `ended by ${run.signal}` : run.exitCode === null ? 'did not run' : `exited ${run.exitCode}`;
    out.push(
      `Command: ${how} · ${run.mode === 'proxy' ? '' : `${ended} · `}${run.stoppedBy ? `stopped by sqltally (${run.stoppedBy}) · ` : ''}sqltally exit ${run.sqltallyExitCode}: ${md(run.exitReason)}`,
      '',
    );
    if (run.wire) out.push(`Wire: ${run.wire.capture} (--wire ${run.wire.requested}${run.wire.requested === 'auto' ? `: ${md(run.wire.reason)}` : ''})`, '');
  }
  if (windows.length === 0) return [...out, '_No window was measured._', ''];
  out.push(
    table(
      WINDOW_COLUMNS.map((c) => c.title),
      windows.map((w) => {
        const cols = windowColumns(w);
        return WINDOW_COLUMNS.map((c) => cols[c.key]);
      }),
      WINDOW_COLUMNS.map((c) => c.numeric),
    ),
    '',
  );
  for (const w of windows) {
    out.push(`- **${md(w.name)}** ${w.verdict.kind}: ${md(w.verdict.reason.slice(0, REASON_CHARS))}`);
    if (w.error) out.push(`  - failed (${md(w.error.phase)}): ${md(w.error.message)}`);
    if (w.lateCommits) out.push(`  - after the give-up: ${md(w.lateCommits.summary)}`);
    for (const d of w.verdict.discrepancies) out.push(`  - ${md(d)}`);
  }
  out.push('');
  return out;
}

function timingsTable(cells: readonly Cell[]): string {
  const rows = cells
    .filter((c) => c.timings)
    .map((c) => {
      const t = c.timings!.summary;
      const tail = (p: 95 | 99, v: number) => `${formatMs(v)}${percentileIsMax(p, t.n) ? ' (= max)' : ''}`;
      const loop = c.timings!.eventLoop;
      const u = c.uninstrumented;
      return [
        c.backend,
        c.strategy,
        c.hot ? `${c.rows} hot` : String(c.rows),
        String(t.n),
        formatMs(t.minNs),
        formatMs(t.p50Ns),
        tail(95, t.p95Ns),
        tail(99, t.p99Ns),
        formatMs(t.maxNs),
        loop?.maxNs === null || loop === null ? '-' : formatMs(loop.maxNs),
        u?.timings ? formatMs(u.timings.summary.p50Ns) : u?.error ? md(u.error) : '-',
        formatCostUs(u?.instrumentCost, 'perCallNs', c.layers.driver?.calls ?? null),
        formatCostUs(u?.instrumentCost, 'perRoundTripNs', c.layers.wire?.roundTrips ?? null),
      ];
    });
  if (rows.length === 0) return '_No timings were measured._';
  return table(
    [
      'backend',
      'strategy',
      'rows',
      'n',
      'min ms',
      'p50 ms',
      'p95 ms',
      'p99 ms',
      'max ms',
      'event-loop max ms',
      'uninstrumented p50 ms',
      'instrument us/call',
      'instrument us/round trip',
    ],
    rows,
    [false, false, true, true, true, true, true, true, true, true, true, true, true],
  );
}

/** One chart per backend and driver release: p50 ms against rows, one line per strategy (cold cells only). */
function charts(cells: readonly Cell[]): string[] {
  const groups = new Map<string, Cell[]>();
  for (const c of cells) {
    if (c.hot || !c.timings) continue;
    const g = `${c.backend} (${shortVersion(c.serverVersion)}) via ${c.driver}@${c.driverVersion}`;
    groups.set(g, [...(groups.get(g) ?? []), c]);
  }
  const out: string[] = [];
  for (const [title, group] of groups) {
    const rows = [...new Set(group.map((c) => c.rows))].sort((a, b) => a - b);
    if (rows.length < 2) continue;
    const strategies = [...new Set(group.map((c) => c.strategy))].sort();
    // A line needs a value at every x; a strategy with a gap is listed, not drawn with a made-up point.
    const complete = strategies.filter((s) => rows.every((r) => group.some((c) => c.strategy === s && c.rows === r)));
    const drawn = complete.slice(0, PALETTE.length);
    if (drawn.length === 0) continue;
    const lines = drawn.map((s) => rows.map((r) => (group.find((c) => c.strategy === s && c.rows === r)!.timings!.summary.p50Ns / 1e6).toFixed(3)));
    const max = Math.max(...lines.flat().map(Number));
    const palette = drawn.map((_, i) => PALETTE[i]![0]).join(', ');
    out.push(`#### ${md(title)}`, '');
    out.push('```mermaid');
    out.push(`%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "${palette}"}}}}%%`);
    out.push('xychart-beta');
    out.push(`  title "p50 ms by rows: ${title.replace(/"/g, "'")}"`);
    out.push(`  x-axis "rows" [${rows.join(', ')}]`);
    out.push(`  y-axis "p50 ms" 0 --> ${Math.max(0.001, Number((max * 1.1).toFixed(3)))}`);
    for (const l of lines) out.push(`  line [${l.join(', ')}]`);
    out.push('```', '');
    out.push(drawn.map((s, i) => `${PALETTE[i]![1]}: \`${s}\``).join(' · '));
    const left = strategies.filter((s) => !drawn.includes(s));
    if (left.length > 0) out.push('', `Not drawn (no value at every row count, or too many lines): ${left.map((s) => `\`${s}\``).join(', ')}`);
    out.push('');
  }
  return out;
}

/** The file the per-cell reconciliation goes to, linked from report.md. */
export const RECONCILIATION_FILE = 'reconciliation.md';

const show = (n: number | null): string => (n === null ? '-' : String(n));

/** Per backend: the strategies at one row count, cheapest first, the finding, and the picture of counts. */
function headlineSection(backends: readonly HeadlineBackend[]): string[] {
  const out: string[] = ['## Headline', ''];
  if (backends.length === 0) return [...out, '_No cells were measured._', ''];
  out.push(
    'Per backend, every strategy at one row count (the largest all of them ran), cheapest first. Counts are exact per layer; `-` = the layer does not exist there or was not read.',
    '',
    "p50 is the strategy's own time: runs with counting off (the raw driver on a direct connection), alternated with the counted ones. A p50 marked `*` comes from the counted windows (no uninstrumented timing), which include what the instrument adds; the last column is that cost per wire round trip, `~0 (±noise)` where the difference is within the runs' noise (the larger interquartile range of the two).",
    '',
  );
  for (const h of backends) {
    out.push(`### ${md(h.backend)} (${md(h.serverVersion)}), ${h.rows} rows`, '', `**${md(h.finding)}**`, '');
    out.push(
      table(
        ['strategy', 'driver', 'driver calls', 'wire round trips', 'server statements', 'rows', 'p50 ms', 'rows/s', 'verdict', 'instrument us/round trip'],
        h.strategies.map((r) => [
          r.strategy,
          r.driver,
          show(r.driverCalls),
          show(r.roundTrips),
          show(r.serverStatements),
          String(r.rows),
          r.p50Ns === null ? '-' : `${formatMs(r.p50Ns)}${r.timing === 'counted' ? ' *' : ''}`,
          show(r.rowsPerSecond),
          r.verdict,
          formatCostUs(r.instrumentCost, 'perRoundTripNs', r.roundTrips),
        ]),
        [false, false, true, true, true, true, true, true, false, true],
      ),
      '',
      `![driver calls and server statements (log scale) beside p50 time, ${md(h.backend)}](${chartFileName(h)})`,
      '',
    );
  }
  return out;
}

function readBackNotes(c: Cell): string[] {
  const r = c.readBack;
  if (!r) return [];
  return [
    `- read back (${r.verdict}): ${r.error ? `failed: ${md(r.error)}` : `${show(r.rows)} rows, ${show(r.serverStatements)} server statement(s), ${show(r.rowsExamined)} rows examined, ${show(r.fullScans)} full scan(s)`}`,
    ...Object.entries(r.unknown).map(([k, why]) => `  - ${k} unknown: ${md(why)}`),
  ];
}

function notes(cells: readonly Cell[]): string[] {
  const out: string[] = [];
  for (const c of cells) {
    const v = c.verdict;
    const body = [
      `**${v.kind}**: ${md(v.reason)}`,
      ...v.reconciliation.map((r) => `- ${md(r)}`),
      ...v.discrepancies.map((d) => `- discrepancy: ${md(d)}`),
      ...(c.findings ?? []).map((f) => `- finding (${f.kind}): ${md(f.message)}`),
      ...(c.layers.server?.notes ?? []).map((n) => `- server: ${md(n)}`),
      ...(c.layers.wire?.incompleteReasons ?? []).map((n) => `- wire incomplete: ${md(n)}`),
      ...(c.layers.server?.incompleteReasons ?? []).map((n) => `- server incomplete: ${md(n)}`),
      ...(c.timings ? [`- timings: ${describePercentile(c.timings.summary, 50)}, ${describePercentile(c.timings.summary, 95)}`] : []),
      ...readBackNotes(c),
    ];
    out.push('<details>', `<summary><code>${html(c.key)}</code>: ${v.kind}</summary>`, '', ...body, '', '</details>', '');
  }
  return out;
}

/** reconciliation.md: how each cell's layers line up, and why a verdict is what it is. */
export function renderReconciliation(report: Report): string {
  const cells = sortedCells(report.cells);
  return [
    '# sqltally reconciliation',
    '',
    `${cells.length} cell(s) · ${report.startedAt}`,
    '',
    ...(cells.length > 0 ? notes(cells) : ['_No cells were measured._', '']),
  ].join('\n');
}

/**
 * report.md: fit for `$GITHUB_STEP_SUMMARY`. Failures first, then the headline per backend (with its count chart),
 * the cells, time charts, timings, environment; each cell's reconciliation is in reconciliation.md.
 */
export function renderMarkdown(report: Report): string {
  const cells = sortedCells(report.cells);
  const status = report.status === 'ok' ? 'ok' : '**FAILED**';
  const out: string[] = [
    '# sqltally report',
    '',
    `Status: ${status} · ${cells.length} cell(s) · ${report.backends.length} backend(s) · ${report.startedAt} -> ${report.finishedAt}`,
    '',
    ...failures(report),
    ...windowsSection(report),
    ...headlineSection(headline(report)),
    '## Cells',
    '',
  ];
  if (cells.length === 0 && (report.windows?.length ?? 0) > 0) out.push('_None: this report holds windows of `sqltally exec` or `proxy`._', '');
  else if (cells.length === 0) out.push('_No cells were measured._', '');
  else {
    out.push(
      table(
        CELL_COLUMNS.map((c) => c.title),
        cells.map((cell) => {
          const cols = cellColumns(cell);
          return CELL_COLUMNS.map((c) => cols[c.key]);
        }),
        CELL_COLUMNS.map((c) => c.numeric),
      ),
      '',
      'Counts are exact and gated by `sqltally gate`; timings are reported, never gated. `-` = the layer does not exist here or was not measured.',
      '',
      'Read back: in each cell whose rows are the read cap, the table is read back in one capped SELECT in a window of its own; the column gives its server statements, the rows the server examined to answer and its scans without an index (MySQL/MariaDB: statements that used no index; PostgreSQL: sequential scans). `?` = the server cannot give that figure exactly, and ' +
        `${RECONCILIATION_FILE} says why. See docs/server-work.md.`,
      '',
    );
  }
  const chart = charts(cells);
  if (chart.length > 0) out.push('## p50 time by rows (counted windows)', '', ...chart);
  out.push('## Timings', '', timingsTable(cells), '');
  out.push(
    'Counted windows: min to max are the windows sqltally counted, so the instrument (wire proxy, counting wrapper) is in them. Uninstrumented p50: the same insert with counting off (the raw driver on a direct connection, no proxy), alternated with the counted repeats; the instrument columns are the counted p50 minus it, per driver call and per wire round trip (medians of separate runs: noise can make them negative). Nearest-rank percentiles over raw samples (kept in report.json). With fewer than 20 samples p95 is the maximum, with fewer than 100 p99 is: marked `(= max)`. Event-loop max is the longest the loop was held beyond its 1 ms timer while the measured runs executed.',
    '',
  );
  const found = cells.filter((c) => (c.findings?.length ?? 0) > 0);
  if (found.length > 0) {
    out.push('## Findings', '', 'What the numbers show about the code, beside the verdict: true numbers with findings still assert.', '');
    for (const c of found) for (const f of c.findings ?? []) out.push(`- \`${md(c.key)}\` (${c.verdict.kind}) ${f.kind}: ${md(f.message)}`);
    out.push('');
  }
  if (cells.length > 0)
    out.push(
      '## Reconciliation',
      '',
      `Each cell's reconciliation (how its layers line up, and why its verdict is what it is) is in [${RECONCILIATION_FILE}](${RECONCILIATION_FILE}); report.html shows it on click.`,
      '',
    );
  out.push('## Backends', '');
  out.push(
    report.backends.length === 0
      ? '_None started._'
      : table(
          ['id', 'flavour', 'server version', 'provider', 'origin', 'ready ms'],
          report.backends.map((b) => [b.id, b.flavour, b.serverVersion, b.provider, b.origin, b.readyMs.toFixed(0)]),
        ),
    '',
  );
  out.push('## Environment', '', environmentTable(report.environments), '');
  const m = report.matrix;
  out.push(
    '## Matrix',
    '',
    `backends ${m.backends.join(', ') || '-'} · rows ${m.rows.join(', ') || '-'} · hot ${m.hotRows.join(', ') || '-'} · ${m.warmups} warm-up(s), ${m.repeats} measured repeats`,
    '',
    `strategies: ${m.strategies.map((s) => `\`${s}\``).join(', ') || '-'}`,
    '',
  );
  return out.join('\n');
}
