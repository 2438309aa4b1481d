import type { Cell, InstrumentCost, Report } from './schema';
import { shortVersion } from './table';

/** One strategy's line in a backend's headline table. */
export interface HeadlineRow {
  key: string;
  strategy: string;
  driver: string;
  driverCalls: number | null;
  roundTrips: number | null;
  serverStatements: number | null;
  rows: number;
  /** The strategy's own p50: uninstrumented when the run took such timings, else the counted windows' (see `timing`). */
  p50Ns: number | null;
  /** Which runs `p50Ns` comes from: `uninstrumented` (counting off) or `counted` (the instrument in it). */
  timing: 'uninstrumented' | 'counted' | null;
  /** The counted windows' p50 minus the uninstrumented one, per wire round trip; null when either is missing. */
  addedPerRoundTripNs: number | null;
  /** The whole cost with its noise floor, for showing a difference within noise as such. */
  instrumentCost: InstrumentCost | null;
  /** Rows per second at the p50 time. */
  rowsPerSecond: number | null;
  verdict: Cell['verdict']['kind'];
  /** Server statements per driver call; null when either is unknown or there were no calls. */
  amplification: number | null;
}

/** One backend's headline: the strategies at one row count, cheapest first. */
export interface HeadlineBackend {
  backend: string;
  serverVersion: string;
  rows: number;
  strategies: HeadlineRow[];
  /** One sentence: the strategy whose calls became the most server statements, or why none is named. */
  finding: string;
}

/**
 * The row count a backend's headline is read at: the largest cold row count every one of its strategies ran, so
 * the strategies are compared on the same work; the largest at all when no count is shared.
 */
export function headlineRows(cells: readonly Cell[]): number | null {
  const cold = cells.filter((c) => !c.hot);
  if (cold.length === 0) return null;
  const byStrategy = new Map<string, Set<number>>();
  for (const c of cold) byStrategy.set(c.strategy, (byStrategy.get(c.strategy) ?? new Set()).add(c.rows));
  const sets = [...byStrategy.values()];
  const shared = [...sets[0]!].filter((r) => sets.every((s) => s.has(r)));
  return Math.max(...(shared.length > 0 ? shared : cold.map((c) => c.rows)));
}

function rowOf(c: Cell): HeadlineRow {
  const calls = c.layers.driver?.calls ?? null;
  const statements = c.layers.server?.summary.statements ?? null;
  const own = c.uninstrumented?.timings?.summary.p50Ns ?? null;
  const p50 = own ?? c.timings?.summary.p50Ns ?? null;
  return {
    key: c.key,
    strategy: c.strategy,
    driver: `${c.driver}@${c.driverVersion}`,
    driverCalls: calls,
    roundTrips: c.layers.wire?.roundTrips ?? null,
    serverStatements: statements,
    rows: c.rows,
    p50Ns: p50,
    timing: own !== null ? 'uninstrumented' : p50 !== null ? 'counted' : null,
    addedPerRoundTripNs: c.uninstrumented?.instrumentCost?.perRoundTripNs ?? null,
    instrumentCost: c.uninstrumented?.instrumentCost ?? null,
    rowsPerSecond: p50 !== null && p50 > 0 ? Math.round((c.rows * 1e9) / p50) : null,
    verdict: c.verdict.kind,
    amplification: calls !== null && calls > 0 && statements !== null ? statements / calls : null,
  };
}

/** Cheapest first: by p50 time; cells without a time last, by statements. */
function cheaperFirst(a: HeadlineRow, b: HeadlineRow): number {
  if (a.p50Ns !== null && b.p50Ns !== null) return a.p50Ns - b.p50Ns || a.strategy.localeCompare(b.strategy);
  if (a.p50Ns !== null) return -1;
  if (b.p50Ns !== null) return 1;
  return (a.serverStatements ?? Infinity) - (b.serverStatements ?? Infinity) || a.strategy.localeCompare(b.strategy);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/**
 * The sentence a person runs the matrix for: the largest amplification of driver calls into server statements (else
 * the most statements against the fewest), then the fastest.
 */
function findingOf(rows: readonly HeadlineRow[]): string {
  const fastest = rows[0]?.p50Ns !== null ? rows[0] : undefined;
  const fastestPart = fastest ? `the fastest was ${fastest.strategy}` : '';
  const known = rows.filter((r) => r.amplification !== null && r.verdict !== 'incomplete');
  if (known.length === 0) {
    // No statement counter (SQLite) or no server layer: the driver calls are what the paths differ in.
    const called = rows.filter((r) => r.driverCalls !== null && r.verdict !== 'incomplete');
    if (called.length === 0) return 'No strategy has complete counts here.';
    const most = called.reduce((m, r) => (r.driverCalls! > m.driverCalls! ? r : m));
    const least = called.reduce((l, r) => (r.driverCalls! < l.driverCalls! ? r : l));
    const head =
      most.driverCalls! > least.driverCalls!
        ? `${most.strategy} made ${plural(most.driverCalls!, 'driver call')} for ${most.rows} rows where ${least.strategy} made ${least.driverCalls} (the server counts no statements here)`
        : `every strategy made ${plural(least.driverCalls!, 'driver call')} for ${least.rows} rows (the server counts no statements here)`;
    return `${[head, fastestPart].filter(Boolean).join('; ')}.`;
  }
  const worst = known.reduce((w, r) => (r.amplification! > w.amplification! ? r : w));
  const most = known.reduce((m, r) => (r.serverStatements! > m.serverStatements! ? r : m));
  const least = known.reduce((l, r) => (r.serverStatements! < l.serverStatements! ? r : l));
  const parts: string[] = [];
  if (worst.amplification! > 1) {
    parts.push(
      `${worst.strategy}: ${plural(worst.driverCalls!, 'driver call')} became ${plural(worst.serverStatements!, 'server statement')} for ${worst.rows} rows`,
    );
    if (least.key !== worst.key) parts.push(`${least.strategy} needed ${plural(least.serverStatements!, 'statement')}`);
  } else if (most.serverStatements! > least.serverStatements!) {
    parts.push(
      `${most.strategy} ran ${plural(most.serverStatements!, 'server statement')} (${plural(most.driverCalls!, 'driver call')}) for ${most.rows} rows where ${least.strategy} ran ${least.serverStatements}`,
    );
  } else {
    parts.push(`every strategy ran ${plural(least.serverStatements!, 'server statement')} for ${least.rows} rows`);
  }
  if (fastestPart) parts.push(fastestPart);
  return `${parts.join('; ')}.`;
}

/**
 * Per backend (server id and version), the strategies at the headline row count, cheapest first, with the finding.
 * Hot cells are left out: the headline compares cold paths, as a first call in an app would run them.
 */
export function headline(report: Pick<Report, 'cells'>): HeadlineBackend[] {
  const groups = new Map<string, Cell[]>();
  for (const c of report.cells) {
    const g = `${c.backend}\u0000${c.serverVersion}`;
    groups.set(g, [...(groups.get(g) ?? []), c]);
  }
  const out: HeadlineBackend[] = [];
  for (const cells of groups.values()) {
    const rows = headlineRows(cells);
    if (rows === null) continue;
    const strategies = cells
      .filter((c) => !c.hot && c.rows === rows)
      .map(rowOf)
      .sort(cheaperFirst);
    const first = cells[0]!;
    out.push({ backend: first.backend, serverVersion: shortVersion(first.serverVersion), rows, strategies, finding: findingOf(strategies) });
  }
  return out.sort((a, b) => a.backend.localeCompare(b.backend) || a.serverVersion.localeCompare(b.serverVersion));
}
