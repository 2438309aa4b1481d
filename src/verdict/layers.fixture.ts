import type { BackendDescription } from '../backends/types';
import type { DriverLayer, StatementEvent } from '../sql/events';
import type { ServerLayer } from '../server/types';

/** Hand-made layers for verdict and reconciliation unit tests: the smallest honest shapes. */
export function backend(overrides: Partial<BackendDescription['capabilities']> = {}, provider: BackendDescription['provider'] = 'local'): BackendDescription {
  return {
    name: 'mariadb',
    id: 'mariadb@10.11',
    flavour: 'mariadb',
    serverVersion: '10.11.19-MariaDB',
    provider,
    origin: '/usr/sbin/mariadbd',
    capabilities: {
      wireProtocol: 'mysql',
      perThreadStatements: true,
      statementStats: false,
      rowCounter: 'Handler_write',
      bulkExecute: true,
      maxBindValues: 65535,
      privateServer: true,
      ...overrides,
    },
    readyMs: 1,
  };
}

export function serverLayer(overrides: Partial<ServerLayer> = {}): ServerLayer {
  return {
    global: { Questions: 1, Com_insert: 1, Handler_write: 3 },
    perConnection: null,
    summary: { statements: 1, inserts: 1, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 3 },
    summarySource: 'global',
    statements: null,
    probeCost: { Questions: 4 },
    control: { Questions: 0, Com_insert: 0, Handler_write: 0 },
    settleNs: null,
    foreignSessions: [],
    backgroundSessions: [],
    canSeeOtherSessions: true,
    notes: [],
    incomplete: false,
    incompleteReasons: [],
    attribution: null,
    comparable: [],
    degraded: [],
    calibrationPairs: 3,
    ...overrides,
  };
}

export function event(overrides: Partial<StatementEvent> = {}): StatementEvent {
  return {
    driver: 'mysql2',
    method: 'query',
    kind: 'query',
    sql: 'INSERT INTO t (a, b) VALUES (?, ?)',
    statementClass: 'insert',
    bindValues: 2,
    parameterSets: 1,
    rowsAffected: 1,
    startNs: 0,
    durationNs: 1,
    error: null,
    connectionId: 7,
    ...overrides,
  };
}

export function driverLayer(events: StatementEvent[]): DriverLayer {
  const byKind: Record<string, number> = {};
  const byClass: Record<string, number> = {};
  for (const e of events) {
    byKind[e.kind] = (byKind[e.kind] ?? 0) + 1;
    byClass[e.statementClass] = (byClass[e.statementClass] ?? 0) + 1;
  }
  return {
    calls: events.length,
    byKind,
    byClass,
    parameterSets: events.reduce((n, e) => n + e.parameterSets, 0),
    bindValues: events.reduce((n, e) => n + e.bindValues, 0),
    maxBindValuesPerCall: Math.max(0, ...events.map((e) => e.bindValues)),
    rowsAffected: events.reduce((n, e) => n + (e.rowsAffected ?? 0), 0),
    errors: events.filter((e) => e.error).length,
    events,
    eventsOmitted: 0,
    shapes: [],
    shapesOmitted: 0,
    ignoredCalls: 0,
  };
}
