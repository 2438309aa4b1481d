// The script of report.html: renders a report from the JSON embedded in the page (or a report.json the reader
// opens), with no network. Bundled by src/report/viewer/bundle.ts; runs in the browser only.
import { headline, type HeadlineBackend } from '../headline';
import type { Cell, Report } from '../schema';
import { countsChart } from '../svg';
import { readBackColumn } from '../table';
import { formatMs } from '../timings';

/** What the page needs of a report, checked field by field so a damaged file names what is wrong. */
function checkReport(value: unknown): string[] {
  const problems: string[] = [];
  const r = value as Partial<Report> | null;
  if (r === null || typeof r !== 'object' || Array.isArray(r)) return ['the file is not a JSON object'];
  if (r.kind !== 'report') problems.push(`kind is ${JSON.stringify(r.kind)}, not "report" (is this a baseline or a gate result?)`);
  if (typeof r.schemaVersion !== 'number') problems.push('schemaVersion is missing');
  if (!Array.isArray(r.cells)) problems.push('cells is not a list');
  else {
    r.cells.forEach((c: Partial<Cell>, i) => {
      if (problems.length >= 8) return;
      if (c === null || typeof c !== 'object') return void problems.push(`cells[${i}] is not an object`);
      for (const f of ['key', 'backend', 'strategy', 'driver', 'serverVersion'] as const) {
        if (typeof c[f] !== 'string') problems.push(`cells[${i}].${f} is missing`);
      }
      if (typeof c.rows !== 'number') problems.push(`cells[${i}].rows is missing`);
      if (!c.verdict || typeof c.verdict.kind !== 'string') problems.push(`cells[${i}].verdict is missing`);
    });
  }
  return problems;
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

const show = (n: number | null | undefined): string => (n === null || n === undefined ? '-' : String(n));
const ms = (ns: number | null | undefined): string => (ns === null || ns === undefined ? '-' : formatMs(ns));

function problemBox(title: string, lines: readonly string[]): HTMLElement {
  return el('div', { class: 'problem', role: 'alert', 'data-testid': 'problem' }, el('strong', {}, title), el('ul', {}, ...lines.map((l) => el('li', {}, l))));
}

function headlineSection(h: HeadlineBackend): HTMLElement {
  const header = ['strategy', 'driver', 'driver calls', 'wire round trips', 'server statements', 'rows', 'p50 ms', 'rows/s', 'verdict'];
  const table = el(
    'table',
    { class: 'headline', 'data-backend': h.backend },
    el('thead', {}, el('tr', {}, ...header.map((t) => el('th', {}, t)))),
    el(
      'tbody',
      {},
      ...h.strategies.map((r) =>
        el(
          'tr',
          { 'data-key': r.key },
          el('td', {}, r.strategy),
          el('td', {}, r.driver),
          el('td', { class: 'num', 'data-field': 'driverCalls' }, show(r.driverCalls)),
          el('td', { class: 'num', 'data-field': 'roundTrips' }, show(r.roundTrips)),
          el('td', { class: 'num', 'data-field': 'serverStatements' }, show(r.serverStatements)),
          el('td', { class: 'num' }, String(r.rows)),
          el('td', { class: 'num', 'data-field': 'p50' }, ms(r.p50Ns)),
          el('td', { class: 'num' }, show(r.rowsPerSecond)),
          el('td', { class: `verdict ${r.verdict}` }, r.verdict),
        ),
      ),
    ),
  );
  const chart = el('div', { class: 'chart' });
  // The chart is our own markup from numbers and escaped names, never text read from elsewhere.
  chart.innerHTML = countsChart(h);
  return el(
    'section',
    { class: 'backend' },
    el('h3', {}, `${h.backend} (${h.serverVersion}), ${h.rows} rows`),
    el('p', { class: 'finding' }, h.finding),
    table,
    chart,
  );
}

/** The read cap path's figures, each with why it is unknown where it is. */
function readBackFacts(cell: Cell): [string, string][] {
  const r = cell.readBack;
  if (!r) return [];
  const fig = (key: string, n: number | null): string => (n === null ? `unknown: ${r.unknown[key] ?? r.error ?? 'not read'}` : String(n));
  return [
    ['read back rows', fig('rows', r.rows)],
    ['read back server statements', fig('serverStatements', r.serverStatements)],
    ['read back rows examined', fig('rowsExamined', r.rowsExamined)],
    ['read back full scans', fig('fullScans', r.fullScans)],
    ['read back verdict', `${r.verdict}: ${r.reason}`],
  ];
}

function details(cell: Cell): HTMLElement {
  const v = cell.verdict;
  const layers = cell.layers ?? { driver: null, wire: null, server: null };
  const facts: [string, string][] = [
    ['driver calls', show(layers.driver?.calls)],
    ['wire commands', show(layers.wire?.commandsTotal)],
    ['wire round trips', show(layers.wire?.roundTrips)],
    ['server statements', show(layers.server?.summary?.statements)],
    ['server rows', show(layers.server?.summary?.rowsInserted)],
    ['p50 ms', ms(cell.timings?.summary?.p50Ns)],
    ...readBackFacts(cell),
  ];
  const list = (title: string, lines: readonly string[] | undefined) =>
    lines && lines.length > 0 ? [el('h4', {}, title), el('ul', {}, ...lines.map((l) => el('li', {}, l)))] : [];
  return el(
    'div',
    { class: 'details', 'data-testid': 'details' },
    el('h3', {}, cell.key),
    el('p', {}, el('span', { class: `verdict ${v.kind}` }, v.kind), ` ${v.reason}`),
    ...(cell.error ? [el('p', { class: 'problem' }, `The workload threw (${cell.error.phase}): ${cell.error.message}`)] : []),
    el('dl', {}, ...facts.flatMap(([k, val]) => [el('dt', {}, k), el('dd', {}, val)])),
    ...list('Reconciliation', v.reconciliation),
    ...list('Discrepancies', v.discrepancies),
    ...list('Server notes', layers.server?.notes),
  );
}

function cellTable(cells: readonly Cell[], detailsBox: HTMLElement): HTMLElement {
  const filter = el('input', {
    type: 'search',
    placeholder: 'filter: backend, strategy, driver, verdict…',
    'aria-label': 'filter cells',
    'data-testid': 'filter',
  });
  const verdicts = el(
    'select',
    { 'aria-label': 'verdict', 'data-testid': 'verdict-filter' },
    ...['all verdicts', 'assert', 'report', 'incomplete'].map((v) => el('option', { value: v }, v)),
  );
  const count = el('span', { class: 'count', 'data-testid': 'shown' });
  const header = [
    'backend',
    'driver',
    'strategy',
    'rows',
    'driver calls',
    'wire cmds',
    'round trips',
    'server stmts',
    'server rows',
    'verdict',
    'p50 ms',
    'read back stmts/examined/scans',
  ];
  const body = el('tbody');
  const rows = cells.map((c) => {
    const l = c.layers ?? { driver: null, wire: null, server: null };
    const tr = el(
      'tr',
      { 'data-key': c.key, tabindex: '0' },
      el('td', {}, c.backend),
      el('td', {}, `${c.driver}@${c.driverVersion}`),
      el('td', {}, c.strategy),
      el('td', { class: 'num' }, c.hot ? `${c.rows} hot` : String(c.rows)),
      el('td', { class: 'num' }, show(l.driver?.calls)),
      el('td', { class: 'num' }, show(l.wire?.commandsTotal)),
      el('td', { class: 'num' }, show(l.wire?.roundTrips)),
      el('td', { class: 'num' }, show(l.server?.summary?.statements)),
      el('td', { class: 'num' }, show(l.server?.summary?.rowsInserted)),
      el('td', { class: `verdict ${c.verdict.kind}` }, c.verdict.kind),
      el('td', { class: 'num' }, ms(c.timings?.summary?.p50Ns)),
      el('td', { class: 'num', 'data-field': 'readBack' }, readBackColumn(c)),
    );
    const open = () => {
      detailsBox.replaceChildren(details(c));
      for (const r of body.querySelectorAll('tr.selected')) r.classList.remove('selected');
      tr.classList.add('selected');
    };
    tr.addEventListener('click', open);
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') open();
    });
    body.append(tr);
    return { tr, text: `${c.key} ${c.verdict.kind}`.toLowerCase(), verdict: c.verdict.kind };
  });
  const apply = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const wanted = verdicts.value;
    let shown = 0;
    for (const r of rows) {
      const visible = words.every((w) => r.text.includes(w)) && (wanted === 'all verdicts' || r.verdict === wanted);
      r.tr.hidden = !visible;
      if (visible) shown++;
    }
    count.textContent = `${shown} of ${rows.length} cells`;
  };
  filter.addEventListener('input', apply);
  verdicts.addEventListener('change', apply);
  apply();
  return el(
    'section',
    {},
    el('h2', {}, 'Cells'),
    el('p', { class: 'controls' }, filter, ' ', verdicts, ' ', count),
    el('table', { class: 'cells', 'data-testid': 'cells' }, el('thead', {}, el('tr', {}, ...header.map((t) => el('th', {}, t)))), body),
  );
}

function render(root: HTMLElement, report: Report, source: string): void {
  const cells = report.cells;
  const backends = headline(report);
  const detailsBox = el('aside', { class: 'details-box', 'data-testid': 'details-box' }, el('p', { class: 'hint' }, 'Click a cell to see its reconciliation.'));
  const status = report.status === 'failed' ? problemBox('This run failed.', [report.failure?.message ?? 'no failure message recorded']) : null;
  const parts: (Node | string)[] = [
    el(
      'p',
      { class: 'meta' },
      `${source} · status ${report.status ?? '?'} · ${cells.length} cell(s) · ${report.startedAt ?? '?'} → ${report.finishedAt ?? '?'}`,
    ),
  ];
  if (status) parts.push(status);
  for (const s of report.skipped ?? []) parts.push(el('p', { class: 'skipped' }, `Skipped ${s.backend}: ${s.reason}`));
  if (cells.length === 0) parts.push(problemBox('This report has no cells.', ['Nothing was measured: see the status and skipped backends above.']));
  else {
    parts.push(
      el('h2', {}, 'Headline'),
      el(
        'p',
        {},
        'Per backend, every strategy at one row count, cheapest first. Counts are exact per layer; "-" means the layer does not exist there or was not read.',
      ),
    );
    for (const h of backends) parts.push(headlineSection(h));
    parts.push(el('div', { class: 'split' }, cellTable(cells, detailsBox), detailsBox));
  }
  root.replaceChildren(...parts);
}

function pickerFor(root: HTMLElement): HTMLElement {
  const input = el('input', { type: 'file', accept: '.json,application/json', 'data-testid': 'open-file' });
  input.addEventListener('change', () => {
    const file = input.files?.[0];
    if (!file) return;
    void file.text().then((text) => load(root, text, file.name));
  });
  return el('label', { class: 'picker' }, 'Open another report.json: ', input);
}

function load(root: HTMLElement, text: string | null, source: string): void {
  if (text === null || text.trim() === '') {
    root.replaceChildren(
      problemBox(`No report data in ${source}.`, [
        'The page was written without its report, or the data was removed. Regenerate it with `sqltally report <dir>`, or open a report.json below.',
      ]),
    );
    return;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    root.replaceChildren(
      problemBox(`${source} is not valid JSON.`, [String((err as Error).message), 'The file is damaged or truncated: regenerate it with `sqltally run`.']),
    );
    return;
  }
  const problems = checkReport(value);
  if (problems.length > 0) {
    root.replaceChildren(problemBox(`${source} is not a sqltally report this page can show.`, problems));
    return;
  }
  render(root, value as Report, source);
}

function main(): void {
  const root = document.getElementById('report');
  const tools = document.getElementById('tools');
  if (!root || !tools) return;
  tools.replaceChildren(pickerFor(root));
  const data = document.getElementById('report-data');
  try {
    load(root, data?.textContent ?? null, 'the report embedded in this page');
  } catch (err) {
    root.replaceChildren(problemBox('The report could not be shown.', [String((err as Error)?.stack ?? err)]));
  }
}

main();
