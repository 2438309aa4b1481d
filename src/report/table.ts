import type { Cell, Report, Window } from './schema';
import { formatMs } from './timings';

/** The columns a person reads at a glance, shared by the terminal table and report.md. */
export const CELL_COLUMNS = [
  { key: 'backend', title: 'backend', numeric: false },
  { key: 'server', title: 'server', numeric: false },
  { key: 'driver', title: 'driver', numeric: false },
  { key: 'strategy', title: 'strategy', numeric: false },
  { key: 'rows', title: 'rows', numeric: true },
  { key: 'driverCalls', title: 'driver calls', numeric: true },
  { key: 'wireCommands', title: 'wire cmds', numeric: true },
  { key: 'roundTrips', title: 'round trips', numeric: true },
  { key: 'serverStatements', title: 'server stmts', numeric: true },
  { key: 'serverRows', title: 'server rows', numeric: true },
  { key: 'verdict', title: 'verdict', numeric: false },
  { key: 'p50', title: 'p50 ms (n)', numeric: true },
  { key: 'readBack', title: 'read back stmts/examined/scans', numeric: false },
] as const;
export type CellColumn = (typeof CELL_COLUMNS)[number]['key'];

const NOT_MEASURED = '-';

/** `10.11.14-MariaDB-ubu2204` -> `10.11.14`; `16.4 (Debian 16.4-1)` -> `16.4`. */
export function shortVersion(serverVersion: string): string {
  return /^\d+(\.\d+)*/.exec(serverVersion)?.[0] ?? serverVersion.split(/\s+/)[0] ?? serverVersion;
}

function show(n: number | null | undefined): string {
  return n === null || n === undefined ? NOT_MEASURED : String(n);
}

/** One cell as display strings. */
export function cellColumns(cell: Cell): Record<CellColumn, string> {
  const { driver, wire, server } = cell.layers;
  const t = cell.timings?.summary;
  return {
    backend: cell.backend,
    server: shortVersion(cell.serverVersion),
    driver: `${cell.driver}@${cell.driverVersion}`,
    strategy: cell.strategy,
    rows: cell.hot ? `${cell.rows} hot` : String(cell.rows),
    driverCalls: show(driver?.calls),
    wireCommands: show(wire?.commandsTotal),
    roundTrips: show(wire?.roundTrips),
    serverStatements: show(server?.summary.statements),
    serverRows: show(server?.summary.rowsInserted),
    verdict: cell.error ? `${cell.verdict.kind} (error)` : cell.verdict.kind,
    p50: t ? `${formatMs(t.p50Ns)} (${t.n})` : NOT_MEASURED,
    readBack: readBackColumn(cell),
  };
}

/** `1 / 5000 / 0`, `?` for a figure the server cannot give (report.md's notes and report.html say why). */
export function readBackColumn(cell: Pick<Cell, 'readBack'>): string {
  const r = cell.readBack;
  if (!r) return NOT_MEASURED;
  if (r.error) return `failed (${r.verdict})`;
  const fig = (n: number | null): string => (n === null ? '?' : String(n));
  return `${fig(r.serverStatements)} / ${fig(r.rowsExamined)} / ${fig(r.fullScans)}${r.verdict === 'assert' ? '' : ` (${r.verdict})`}`;
}

/** The cells in a stable reading order: backend, driver, strategy, then rows ascending, cold before hot. */
export function sortedCells(cells: readonly Cell[]): Cell[] {
  return [...cells].sort(
    (a, b) =>
      a.backend.localeCompare(b.backend) ||
      a.driver.localeCompare(b.driver) ||
      a.strategy.localeCompare(b.strategy) ||
      a.rows - b.rows ||
      Number(a.hot) - Number(b.hot),
  );
}

/** The columns of a window (`sqltally exec`, `proxy`): no driver, strategy or timing series. */
export const WINDOW_COLUMNS = [
  { key: 'backend', title: 'backend', numeric: false },
  { key: 'server', title: 'server', numeric: false },
  { key: 'name', title: 'window', numeric: false },
  { key: 'wireCommands', title: 'wire cmds', numeric: true },
  { key: 'roundTrips', title: 'round trips', numeric: true },
  { key: 'wireRows', title: 'wire rows', numeric: true },
  { key: 'serverStatements', title: 'server stmts', numeric: true },
  { key: 'serverRows', title: 'server rows', numeric: true },
  { key: 'verdict', title: 'verdict', numeric: false },
  { key: 'ms', title: 'ms', numeric: true },
] as const;
export type WindowColumn = (typeof WINDOW_COLUMNS)[number]['key'];

/** One window as display strings. */
export function windowColumns(w: Window): Record<WindowColumn, string> {
  const { wire, server } = w.layers;
  return {
    backend: w.backend,
    server: shortVersion(w.serverVersion),
    name: w.name,
    wireCommands: show(wire?.commandsTotal),
    roundTrips: show(wire?.roundTrips),
    wireRows: show(wire?.rowsAffected),
    serverStatements: show(server?.summary.statements),
    serverRows: show(server?.summary.rowsInserted),
    verdict: w.error ? `${w.verdict.kind} (error)` : w.verdict.kind,
    ms: formatMs(w.durationNs),
  };
}

/** The windows of a report as an aligned table, then each one's verdict reason. */
export function renderWindows(windows: readonly Window[]): string {
  if (windows.length === 0) return '(no windows)';
  const lines = [
    alignColumns(
      WINDOW_COLUMNS.map((c) => c.title),
      windows.map((w) => {
        const cols = windowColumns(w);
        return WINDOW_COLUMNS.map((c) => cols[c.key]);
      }),
      WINDOW_COLUMNS.map((c) => c.numeric),
    ),
  ];
  for (const w of windows) {
    lines.push(`${w.verdict.kind.toUpperCase()} ${w.name}: ${w.error ? w.error.message : w.verdict.reason}`);
    if (w.lateCommits) lines.push(`  after the give-up: ${w.lateCommits.summary}`);
  }
  return lines.join('\n');
}

/** Aligns rows of strings into columns; numbers right-aligned. */
export function alignColumns(header: readonly string[], rows: readonly (readonly string[])[], numeric: readonly boolean[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** The terminal table printed at the end of a run. */
export function renderTable(report: Report): string {
  const cells = sortedCells(report.cells);
  const lines: string[] = [];
  if (cells.length === 0) lines.push('(no cells)');
  else {
    lines.push(
      alignColumns(
        CELL_COLUMNS.map((c) => c.title),
        cells.map((cell) => {
          const cols = cellColumns(cell);
          return CELL_COLUMNS.map((c) => cols[c.key]);
        }),
        CELL_COLUMNS.map((c) => c.numeric),
      ),
    );
  }
  for (const s of report.skipped) lines.push(`skipped ${s.backend}: ${s.reason}`);
  const troubled = cells.filter((c) => c.error || c.verdict.kind === 'incomplete');
  for (const c of troubled) lines.push(`${c.verdict.kind.toUpperCase()} ${c.key}: ${c.error ? c.error.message : c.verdict.reason}`);
  if (report.status === 'failed') lines.push(`RUN FAILED: ${report.failure?.message ?? 'unknown failure'}`);
  return lines.join('\n');
}
