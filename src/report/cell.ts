import type { DriverPath } from '../driver/compat/path';
import type { Tally } from '../capture/tally';
import { makeCell } from './schema';
import type { Cell, Environment, ReadBack, Timings, Uninstrumented } from './schema';

/** What a cell adds to a capture window's tally: where it sits in the matrix and how long it took. */
export interface CellPlacement {
  strategy: string;
  rows: number;
  hot: boolean;
  /** The environment the window ran in; its `drivers` supply the driver version unless given. */
  environment: Environment;
  driverVersion?: string;
  /** Rows a fresh connection found afterwards; null when not verified. */
  verifiedRows: number | null;
  timings: Timings | null;
  /** The same insert timed with counting off, when the run took such timings. */
  uninstrumented?: Uninstrumented;
  /** The read cap path measured after the inserts, when the cell's row count is the read cap. */
  readBack?: ReadBack;
  /** Why the run gave up on the window (cell timeout, interrupt), naming the statement in flight; null otherwise. */
  gaveUp?: { message: string; statement: string | null } | null;
}

/**
 * The server layer as a report cell keeps it: without `comparable`, a fact of the backend's probe, the same in every
 * cell and already used by the verdict, that would be copied into every cell.
 */
function withoutProbeConstants(server: NonNullable<Tally['layers']['server']>): NonNullable<Tally['layers']['server']> {
  const { comparable: _comparable, ...rest } = server;
  return rest;
}

/** The path the cell's own driver was counted on, when it has a fast path to take. */
function driverPathOf(tally: Tally): { driverPath?: DriverPath } {
  const path = tally.drivers.find((d) => d.name === tally.driver)?.path;
  return path ? { driverPath: path } : {};
}

/** Turns a capture window's tally into a report cell (key derived, validated). */
export function cellFromTally(tally: Tally, placement: CellPlacement): Cell {
  const e = tally.workloadError;
  return makeCell({
    backend: tally.backend.id,
    backendName: tally.backend.name,
    serverVersion: tally.backend.serverVersion,
    flavour: tally.backend.flavour,
    driver: tally.driver,
    driverVersion: placement.driverVersion ?? placement.environment.drivers[tally.driver] ?? 'unknown',
    strategy: placement.strategy,
    rows: placement.rows,
    hot: placement.hot,
    environment: placement.environment.id,
    layers: tally.layers.server ? { ...tally.layers, server: withoutProbeConstants(tally.layers.server) } : tally.layers,
    verifiedRows: placement.verifiedRows,
    verdict: tally.verdict,
    ...(tally.findings.length > 0 ? { findings: tally.findings } : {}),
    ...driverPathOf(tally),
    timings: placement.timings,
    ...(placement.uninstrumented ? { uninstrumented: placement.uninstrumented } : {}),
    ...(placement.readBack ? { readBack: placement.readBack } : {}),
    ...(e ? { error: { message: e.message, phase: e.phase, ...(e.statement ? { statement: e.statement } : {}) } } : {}),
    ...(!e && placement.gaveUp
      ? { error: { message: placement.gaveUp.message, phase: 'workload', ...(placement.gaveUp.statement ? { statement: placement.gaveUp.statement } : {}) } }
      : {}),
    ...(tally.lateCommits ? { lateCommits: tally.lateCommits } : {}),
  });
}

/** What a read-back window's tally says: counts, and the server's rows examined and full scans, or why not. */
export function readBackFromTally(tally: Tally, rowsRead: number | null): ReadBack {
  const unknown: Record<string, string> = {};
  const { driver, server } = tally.layers;
  const e = tally.workloadError;
  const known = (key: string, value: number | null | undefined, why: string): number | null => {
    if (typeof value === 'number') return value;
    unknown[key] = why;
    return null;
  };
  const serverWhy = !server
    ? 'the server layer was not captured'
    : server.incomplete
      ? `the server layer is incomplete: ${server.incompleteReasons.join('; ')}`
      : null;
  const work = serverWhy ? null : (server!.work ?? null);
  const workWhy = (figure: 'rowsExamined' | 'fullScans'): string =>
    serverWhy ?? (work ? (work.unknown[figure] ?? 'not read in this window') : 'this server layer has no server-work section');
  return {
    rows: e ? null : known('rows', rowsRead, 'the read handed back nothing'),
    driverCalls: known('driverCalls', driver?.calls, 'the driver layer was not captured'),
    serverStatements: known('serverStatements', serverWhy ? null : server!.summary.statements, serverWhy ?? 'this server counts no statements'),
    rowsExamined: known('rowsExamined', work?.figures.rowsExamined, workWhy('rowsExamined')),
    fullScans: known('fullScans', work?.figures.fullScans, workWhy('fullScans')),
    unknown,
    verdict: tally.verdict.kind,
    reason: tally.verdict.reason,
    ...(e ? { error: `${e.phase}: ${e.message}` } : {}),
  };
}
