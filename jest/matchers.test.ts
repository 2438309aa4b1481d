import type { Tally } from '../capture/tally';
import { checkCounts } from './expectations';
import { sqltallyMatchers } from './matchers';

expect.extend(sqltallyMatchers);

// Hand-built tallies: these tests judge the matcher logic, not a server.
function tally(overrides: Partial<Tally> = {}): Tally {
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
    workloadError: null,
    durationNs: 1000,
    ...overrides,
  };
}

describe('toHaveCounts', () => {
  it('passes on exact counts across the three layers', () => {
    expect(tally()).toHaveCounts({
      driver: { calls: 2, byClass: { insert: 2, select: 0 } },
      wire: { commands: { COM_QUERY: 2, COM_STMT_EXECUTE: 0 }, roundTrips: 2 },
      server: { statements: 2, rowsInserted: 2, global: { Com_insert: 2 } },
    });
  });

  it('fails with expected vs actual and the numbered statements', () => {
    let message = '';
    try {
      expect(tally()).toHaveCounts({ driver: { calls: 1 } });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('driver.calls: expected 1, actual 2');
    expect(message).toContain('1. mysql2.query [insert, 6 values] INSERT INTO t VALUES (1)');
    expect(message).toContain('2. mysql2.query');
  });

  it('shows the workload error instead of a count mismatch', () => {
    const failed = tally({ workloadError: { message: "Table 't' doesn't exist", phase: 'workload', statement: 'INSERT INTO t' } });
    expect(() => expect(failed).toHaveCounts({ driver: { calls: 2 } })).toThrow(/the captured code threw[\s\S]*Table 't' doesn't exist/);
  });

  it('refuses server counts when the verdict is report-only, naming the reason', () => {
    const reported = tally({
      verdict: { kind: 'report', reason: '1 other client connection (id 12, root@localhost, INSERT)', reconciliation: [], discrepancies: [] },
    });
    const checks = checkCounts(reported, { server: { statements: 2 }, driver: { calls: 2 } }, 'exact');
    expect(checks[0]).toMatchObject({ ok: false, blocked: expect.stringContaining('report-only') });
    expect(checks[1]).toMatchObject({ ok: true });
    // Per-connection attribution stays checkable under a report verdict: that is what it is for.
    expect(reported).toHaveCounts({ server: { perConnection: { 'statement/sql/insert': 2 } } });
  });

  it('never passes an incomplete layer', () => {
    const base = tally();
    const cut = tally({
      layers: { ...base.layers, wire: { ...base.layers.wire!, incomplete: true, incompleteReasons: ['TLS'] } },
    });
    expect(() => expect(cut).toHaveCounts({ wire: { roundTrips: 2 } })).toThrow(/wire layer incomplete: TLS/);
  });

  it('rejects an empty spec rather than passing vacuously', () => {
    expect(() => expect(tally()).toHaveCounts({})).toThrow(/names no count/);
  });
});

describe('toHaveCountsAtMost', () => {
  it('checks upper bounds', () => {
    expect(tally()).toHaveCountsAtMost({ driver: { calls: 3 }, server: { statements: 2 } });
    expect(() => expect(tally()).toHaveCountsAtMost({ driver: { calls: 1 } })).toThrow(/at most 1, actual 2/);
  });
});

describe('toHaveVerdict', () => {
  it('shows the reason when the kind differs', () => {
    expect(tally()).toHaveVerdict('assert');
    expect(() => expect(tally()).toHaveVerdict('report')).toThrow(/got assert: private server/);
  });
});
