import type { Tally } from '../capture/tally';
import { fingerprint, fingerprintId } from '../sql/fingerprint';
import type { ServerWork } from '../server/server-work';
import type { SqlDialect } from '../sql/tokenizer';
import { shownFingerprint } from '../sql/shapes';
import type { DriverLayerWithShapes, ShapeStat } from '../sql/shapes';

/**
 * Hand-built tallies for the matcher tests (and the Jest and Vitest projects they spawn): these judge the
 * matchers, not a server. Plain data only, so a spawned project can import this file as it is.
 */

/** A tally whose driver layer carries `shapes`, as the shape-aggregating driver layer will. */
export type ShapedTally = Omit<Tally, 'layers'> & { layers: Omit<Tally['layers'], 'driver'> & { driver: DriverLayerWithShapes | null } };

/** One shape of `sql`, as the driver layer would aggregate it. */
export function shapeOf(sql: string, overrides: Partial<ShapeStat> = {}, dialect: SqlDialect = 'mysql'): ShapeStat {
  const fp = fingerprint(sql, dialect);
  return {
    id: fingerprintId(fp),
    fingerprint: shownFingerprint(fp),
    statementClass: 'insert',
    kind: 'query',
    calls: 1,
    parameterSets: 1,
    distinctParameterSets: 1,
    rows: 1,
    caller: 'test/app.test.ts:10:5',
    ignored: false,
    ...overrides,
  };
}

export function tallyFixture(overrides: Partial<ShapedTally> = {}): ShapedTally {
  return {
    backend: {
      name: 'mariadb',
      id: 'mariadb@10.11',
      flavour: 'mariadb',
      serverVersion: '10.11.14-MariaDB',
      provider: 'local',
      origin: '/usr/sbin/mariadbd',
      capabilities: {
        wireProtocol: 'mysql',
        perThreadStatements: true,
        statementStats: false,
        rowCounter: 'Handler_write',
        bulkExecute: true,
        maxBindValues: 65535,
        privateServer: true,
      },
      readyMs: 1000,
    },
    driver: 'mysql2',
    layers: {
      driver: {
        calls: 2,
        byKind: { query: 2, execute: 0, batch: 0, prepare: 0 },
        byClass: { insert: 2, select: 0, update: 0, delete: 0, begin: 0, commit: 0, rollback: 0, savepoint: 0, set: 0, show: 0, ddl: 0, other: 0 },
        parameterSets: 2,
        bindValues: 12,
        maxBindValuesPerCall: 6,
        rowsAffected: 2,
        errors: 0,
        events: [1, 2].map((i) => ({
          driver: 'mysql2' as const,
          method: 'query',
          kind: 'query' as const,
          sql: `INSERT INTO t VALUES (${i})`,
          statementClass: 'insert' as const,
          bindValues: 6,
          parameterSets: 1,
          rowsAffected: 1,
          startNs: i,
          durationNs: 10,
          error: null,
          connectionId: 7,
        })),
        eventsOmitted: 0,
        shapes: [shapeOf('INSERT INTO t VALUES (1)', { calls: 2, parameterSets: 2, distinctParameterSets: 2, rows: 2 })],
        shapesOmitted: 0,
        ignoredCalls: 0,
      },
      wire: {
        protocol: 'mysql',
        commands: { COM_QUERY: 2 },
        commandsTotal: 2,
        roundTrips: 2,
        bytesClientToServer: 100,
        bytesServerToClient: 22,
        clientWrites: 2,
        connections: 1,
        incomplete: false,
        incompleteReasons: [],
        rowsAffected: 2,
      },
      server: {
        global: { Questions: 2, Com_insert: 2 },
        perConnection: { 'statement/sql/insert': 2 },
        summary: {
          statements: 2,
          inserts: 2,
          prepares: 0,
          executes: 0,
          bulkExecutes: 0,
          commits: 0,
          rowsInserted: 2,
        },
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
      },
    },
    verdict: { kind: 'assert', reason: 'private server, control window 0', reconciliation: [], discrepancies: [] },
    findings: [],
    deferredWork: null,
    workloadError: null,
    drivers: [{ name: 'mysql2', version: '3.24.6' }],
    driverAbsent: null,
    beyondWindow: [],
    lateCommits: null,
    ignored: null,
    durationNs: 1000,
    ...overrides,
  };
}

/** The same tally with other shapes (and driver calls counted to match them). */
export function withShapes(tally: ShapedTally, shapes: ShapeStat[]): ShapedTally {
  const driver = tally.layers.driver!;
  const calls = shapes.reduce((n, s) => n + s.calls, 0);
  return { ...tally, layers: { ...tally.layers, driver: { ...driver, calls, shapes } } };
}

/** The classic N+1: one SELECT for the list, then one per row, each with its own id, from one line. */
export function nPlusOneTally(loop = 20): ShapedTally {
  return withShapes(tallyFixture(), [
    shapeOf('SELECT id FROM orders WHERE customer_id = ?', { statementClass: 'select', kind: 'execute', rows: loop, caller: 'test/orders.test.ts:12:5' }),
    shapeOf('SELECT * FROM order_lines WHERE order_id = ?', {
      statementClass: 'select',
      kind: 'execute',
      calls: loop,
      parameterSets: loop,
      distinctParameterSets: loop,
      rows: loop * 3,
      caller: 'test/orders.test.ts:14:7',
    }),
  ]);
}

/** The tally as a plain `Tally`, for functions that take one (the extra `shapes` field is what the rewrite adds). */
export function asTally(tally: ShapedTally): Tally {
  return tally as Tally;
}

/** A MariaDB window's server work: two SELECTs, one by an indexed column, one scanning 20 000 rows. */
export function serverWorkFixture(overrides: Partial<ServerWork> = {}): ServerWork {
  return {
    figures: {
      rowsExamined: 20001,
      rowsSent: 2,
      fullScans: 1,
      noGoodIndex: 0,
      fullJoins: 0,
      sortRows: 0,
      sortMergePasses: 0,
      tempTables: 0,
      tempDiskTables: 0,
      lockTimeNs: 1000,
    },
    unknown: { seqRowsRead: 'MySQL and MariaDB keep no per-table scan counters' },
    tables: null,
    statements: [
      { key: 'a', text: 'SELECT `a` FROM `t` WHERE `b` = ? ', calls: 1, figures: { rowsExamined: 20000, fullScans: 1, tempDiskTables: 0 } },
      { key: 'b', text: 'SELECT `b` FROM `t` WHERE `a` = ? ', calls: 1, figures: { rowsExamined: 1, fullScans: 0, tempDiskTables: 0 } },
    ],
    statementsUnknown: null,
    statementFigures: ['rowsExamined', 'fullScans', 'tempDiskTables'],
    unindexedScans: [
      { table: null, statement: 'SELECT `a` FROM `t` WHERE `b` = ? ', scans: 1, rowsRead: 20000, basis: 'rows examined by the statement, through any table' },
    ],
    scansUnknown: null,
    notes: [],
    ...overrides,
  };
}

/** The same tally with a server-work section in its server layer (none: the section removed). */
export function withWork(tally: ShapedTally, work: ServerWork | undefined): ShapedTally {
  const { work: _old, ...server } = tally.layers.server!;
  return { ...tally, layers: { ...tally.layers, server: work ? { ...server, work } : server } };
}
