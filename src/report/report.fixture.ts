// Hand-made reports for unit tests, built through the schema (never from a real server).
import type { BackendDescription } from '../backends/types';
import type { CallKind, DriverLayer } from '../sql/events';
import type { WireCounts } from '../wire/types';
import type { ServerLayer, ServerSummary } from '../server/types';
import type { Verdict } from '../verdict/types';
import { buildReport } from './output';
import type { ReportInput } from './output';
import { makeCell } from './schema';
import type { Cell, CellInput, Environment, Report } from './schema';
import { timingsFromSamples } from './timings';

export const FIXTURE_TIME = '2026-01-02T03:04:05.000Z';

export function fixtureEnvironment(over: Partial<Environment> = {}): Environment {
  return {
    id: 'local',
    collectedAt: FIXTURE_TIME,
    os: { platform: 'linux', release: '6.1.0-test', prettyName: 'Debian GNU/Linux 12 (bookworm)' },
    arch: 'x64',
    cpu: { model: 'Test CPU @ 2.00GHz', cores: 2 },
    memoryBytes: 8 * 1024 ** 3,
    node: 'v20.20.2',
    sqltallyVersion: '0.1.0',
    drivers: { mysql2: '3.24.6', mariadb: '3.5.4', pg: '8.23.1', 'better-sqlite3': '12.6.2', 'postgres-js': '3.4.9' },
    git: { commit: 'a'.repeat(40), dirty: false },
    ci: null,
    ...over,
  };
}

const CAPS = {
  sqlite: {
    wireProtocol: null,
    perThreadStatements: false,
    statementStats: false,
    rowCounter: 'total_changes',
    bulkExecute: false,
    maxBindValues: 32766,
    privateServer: true,
  },
  mariadb: {
    wireProtocol: 'mysql',
    perThreadStatements: true,
    statementStats: false,
    rowCounter: 'Handler_write',
    bulkExecute: true,
    maxBindValues: 65535,
    privateServer: true,
  },
} as const;

export const SQLITE: BackendDescription = {
  name: 'sqlite',
  id: 'sqlite@3.50',
  flavour: 'sqlite',
  serverVersion: '3.50.4',
  provider: 'embedded',
  origin: 'better-sqlite3',
  capabilities: CAPS.sqlite,
  readyMs: 1,
};

export const MARIADB: BackendDescription = {
  name: 'mariadb',
  id: 'mariadb@10.11',
  flavour: 'mariadb',
  serverVersion: '10.11.14-MariaDB',
  provider: 'local',
  origin: '/usr/sbin/mariadbd',
  capabilities: CAPS.mariadb,
  readyMs: 900,
};

export function driverLayer(o: {
  calls: number;
  kind: CallKind;
  parameterSets: number;
  bindValues: number;
  maxBindValuesPerCall: number;
  rowsAffected: number;
}): DriverLayer {
  return {
    calls: o.calls,
    byKind: { query: 0, execute: 0, batch: 0, prepare: 0, [o.kind]: o.calls },
    byClass: { insert: o.calls, select: 0, update: 0, delete: 0, begin: 0, commit: 0, rollback: 0, savepoint: 0, set: 0, show: 0, ddl: 0, other: 0 },
    parameterSets: o.parameterSets,
    bindValues: o.bindValues,
    maxBindValuesPerCall: o.maxBindValuesPerCall,
    rowsAffected: o.rowsAffected,
    errors: 0,
    events: [],
    eventsOmitted: o.calls,
    shapes: [],
    shapesOmitted: 0,
    ignoredCalls: 0,
  };
}

export function wireCounts(commands: Record<string, number>, roundTrips: number): WireCounts {
  const total = Object.values(commands).reduce((a, b) => a + b, 0);
  return {
    protocol: 'mysql',
    commands,
    commandsTotal: total,
    roundTrips,
    bytesClientToServer: 1000 * total,
    bytesServerToClient: 50 * total,
    clientWrites: total,
    connections: 1,
    incomplete: false,
    incompleteReasons: [],
  };
}

export function serverLayer(summary: Partial<ServerSummary>): ServerLayer {
  const full: ServerSummary = {
    statements: null,
    inserts: null,
    prepares: null,
    executes: null,
    bulkExecutes: null,
    commits: null,
    rowsInserted: null,
    ...summary,
  };
  return {
    global: {},
    perConnection: {},
    summary: full,
    summarySource: 'perConnection',
    statements: null,
    probeCost: { Questions: 1 },
    control: { Questions: 0 },
    settleNs: null,
    foreignSessions: [],
    backgroundSessions: [],
    canSeeOtherSessions: true,
    notes: [],
    incomplete: false,
    incompleteReasons: [],
  };
}

export const ASSERT: Verdict = {
  kind: 'assert',
  reason: 'per-connection counters attribute every statement',
  reconciliation: ['layers agree'],
  discrepancies: [],
};

/** `samplesMs` become integer ns samples; five by default. */
export function timings(samplesMs: number[] = [10, 11, 12, 13, 14]) {
  return timingsFromSamples(
    [20_000_000],
    samplesMs.map((ms) => Math.round(ms * 1e6)),
  );
}

/** MariaDB via the mariadb connector: one batch() of `rows` rows, one bulk command. */
export function batchCell(rows = 5000, over: Partial<CellInput> = {}): Cell {
  return makeCell({
    backend: MARIADB.id,
    backendName: 'mariadb',
    serverVersion: MARIADB.serverVersion,
    flavour: 'mariadb',
    driver: 'mariadb',
    driverVersion: '3.5.4',
    strategy: 'mariadb.batch',
    rows,
    hot: false,
    environment: 'local',
    layers: {
      driver: driverLayer({ calls: 1, kind: 'batch', parameterSets: rows, bindValues: rows * 6, maxBindValuesPerCall: rows * 6, rowsAffected: rows }),
      wire: wireCounts({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 }, 2),
      server: serverLayer({ statements: 1, inserts: 1, prepares: 1, executes: 1, bulkExecutes: 1, commits: 0, rowsInserted: rows }),
    },
    verifiedRows: rows,
    verdict: ASSERT,
    timings: timings(),
    ...over,
  });
}

/** The same cell key with the insert path turned into one prepared execute per row. */
export function perRowLayers(rows = 5000): CellInput['layers'] {
  return {
    driver: driverLayer({ calls: rows, kind: 'execute', parameterSets: rows, bindValues: rows * 6, maxBindValuesPerCall: 6, rowsAffected: rows }),
    wire: wireCounts({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: rows }, rows + 1),
    server: serverLayer({ statements: rows, inserts: rows, prepares: 1, executes: rows, bulkExecutes: 0, commits: 0, rowsInserted: rows }),
  };
}

/** SQLite via better-sqlite3: one prepared statement run per row inside a transaction. */
export function sqliteCell(rows = 100, over: Partial<CellInput> = {}): Cell {
  return makeCell({
    backend: SQLITE.id,
    backendName: 'sqlite',
    serverVersion: SQLITE.serverVersion,
    flavour: 'sqlite',
    driver: 'better-sqlite3',
    driverVersion: '12.6.2',
    strategy: 'better-sqlite3.run-per-row',
    rows,
    hot: false,
    environment: 'local',
    layers: {
      driver: driverLayer({ calls: rows, kind: 'execute', parameterSets: rows, bindValues: rows * 6, maxBindValuesPerCall: 6, rowsAffected: rows }),
      wire: null,
      server: serverLayer({ rowsInserted: rows }),
    },
    verifiedRows: rows,
    verdict: ASSERT,
    timings: timings([rows / 100, rows / 90, rows / 80, rows / 70, rows / 60]),
    ...over,
  });
}

export function fixtureReport(cells: Cell[], over: Partial<ReportInput> = {}): Report {
  const backends = [SQLITE, MARIADB].filter((b) => cells.some((c) => c.backend === b.id));
  return buildReport({
    status: 'ok',
    matrix: {
      backends: [...new Set(cells.map((c) => c.backendName))].sort(),
      strategies: [...new Set(cells.map((c) => c.strategy))].sort(),
      rows: [...new Set(cells.map((c) => c.rows))].sort((a, b) => a - b),
      hotRows: [...new Set(cells.filter((c) => c.hot).map((c) => c.rows))],
      warmups: 1,
      repeats: 5,
    },
    environments: [fixtureEnvironment()],
    backends,
    skipped: [],
    cells,
    startedAt: FIXTURE_TIME,
    finishedAt: '2026-01-02T03:05:00.000Z',
    ...over,
  });
}
