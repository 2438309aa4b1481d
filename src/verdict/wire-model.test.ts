import { emptyWireCounts } from '../wire/tally';
import type { WireCounts, WireStatements } from '../wire/types';
import { backend, serverLayer } from './layers.fixture';
import { decideVerdict, judgeWindow } from './verdict';
import { reconcileWire } from './wire-model';

const postgres = () =>
  ({
    ...backend({ wireProtocol: 'postgres', perThreadStatements: false, statementStats: true, rowCounter: 'n_tup_ins', bulkExecute: false }),
    name: 'postgres',
    id: 'postgres@15',
    flavour: 'postgres',
    serverVersion: '15.10',
  }) as ReturnType<typeof backend>;

function wire(protocol: 'mysql' | 'postgres', commands: Record<string, number>, statements: Partial<WireStatements>): WireCounts {
  const w = emptyWireCounts(protocol);
  const total = Object.values(commands).reduce((a, b) => a + b, 0);
  const all = { ...(w.statements as WireStatements), ...statements };
  return { ...w, commands, commandsTotal: total, connections: 1, rowsAffected: all.rowsInserted + all.rowsUpdated + all.rowsDeleted, statements: all };
}

/** pgbench -M prepared, 4 clients x 250 TPC-B transactions plus its 2 start-up queries, as the wire saw them. */
const pgbenchPrepared = wire(
  'postgres',
  { Parse: 28, Bind: 7000, Describe: 28, Execute: 7000, Sync: 7028, Query: 2 },
  {
    completed: 7002,
    completedByClass: { begin: 1000, update: 3000, select: 1002, insert: 1000, commit: 1000 },
    namedRepeats: 1992,
    namedRepeatsByClass: { begin: 996, commit: 996 },
    rowsInserted: 1000,
    rowsUpdated: 3000,
  },
);
const pgbenchServer = (statements: number, begins: number, commits: number) =>
  serverLayer({
    global: {
      'statements.calls': statements,
      'statements.begin_calls': begins,
      'statements.commit_calls': commits,
      'statements.insert_calls': 1000,
      'tables.n_tup_ins': 1000,
      'tables.n_tup_upd': 3000,
      'tables.n_tup_del': 0,
    },
    summary: { statements, inserts: 1000, prepares: null, executes: null, bulkExecutes: null, commits, rowsInserted: 1000 },
    control: {},
  });

describe('the wire as a model of its own', () => {
  it('pgbench -M prepared: pg_stat_statements counting a named BEGIN/END once per connection is explained, and the verdict asserts', () => {
    const v = decideVerdict({ backend: postgres(), driver: null, wire: pgbenchPrepared, server: pgbenchServer(5010, 4, 4) });
    expect(v.discrepancies).toEqual([]);
    expect(v.kind).toBe('assert');
    expect(v.reconciliation.join('\n')).toContain('1992 utility statement(s) re-run from a named prepared statement (begin 996, commit 996)');
    expect(v.reconciliation.join('\n')).toContain('pg_stat_statements calls (statements) 5010 (wire: 5010)');
  });

  it('a server that counted fewer statements than the wire carried, with nothing to explain it, is a discrepancy: report, never assert', () => {
    const noRepeats = wire('postgres', pgbenchPrepared.commands, { ...pgbenchPrepared.statements, namedRepeats: 0, namedRepeatsByClass: {} });
    const v = decideVerdict({ backend: postgres(), driver: null, wire: noRepeats, server: pgbenchServer(5010, 4, 4) });
    expect(v.kind).toBe('report');
    expect(v.discrepancies.join('\n')).toContain("pg_stat_statements calls (statements) 5010, the wire's answers account for 7002: 1992 fewer");
  });

  it("psql sending two INSERTs in one Query: two statements on the server are the window's own, not work around the proxy", () => {
    const w = wire('postgres', { Query: 1 }, { completed: 2, completedByClass: { insert: 2 }, rowsInserted: 2 });
    const server = serverLayer({
      global: {
        'statements.calls': 2,
        'statements.insert_calls': 2,
        'statements.begin_calls': 0,
        'statements.commit_calls': 0,
        'tables.n_tup_ins': 2,
        'tables.n_tup_upd': 0,
        'tables.n_tup_del': 0,
      },
      summary: { statements: 2, inserts: 2, prepares: null, executes: null, bulkExecutes: null, commits: 0, rowsInserted: 2 },
      control: {},
    });
    const { verdict, explainedStatements } = judgeWindow({ backend: postgres(), driver: null, wire: w, server });
    expect(explainedStatements).toBe(2);
    expect(verdict.kind).toBe('assert');
  });

  it('MariaDB INSERT ... RETURNING: the rows of its result set are the rows inserted, and Handler_write agrees', () => {
    const w = wire(
      'mysql',
      { COM_QUERY: 2, COM_QUIT: 1 },
      {
        completed: 2,
        completedByClass: { select: 1, insert: 1 },
        rowsInserted: 5000,
        connectStatements: 1,
        connectTexts: ['#9 select @@version_comment limit 1'],
      },
    );
    const server = serverLayer({
      global: { Questions: 2, Com_insert: 1, Handler_write: 5000 },
      summary: { statements: 2, inserts: 1, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 5000 },
    });
    const v = decideVerdict({ backend: backend(), driver: null, wire: w, server });
    expect(v.kind).toBe('assert');
    expect(v.reconciliation.join('\n')).toContain(
      'connection set-up: 1 statement(s) the clients ran as they connected, counted with the rest: #9 select @@version_comment limit 1',
    );
    const short = decideVerdict({
      backend: backend(),
      driver: null,
      wire: w,
      server: serverLayer({ summary: { statements: 2, inserts: 1, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 4000 } }),
    });
    expect(short.kind).toBe('report');
    expect(short.discrepancies.join('\n')).toContain('rows inserted 4000');
  });

  it('a statement that failed makes the rows at least what the answers reported, and Questions counts it', () => {
    const w = wire('mysql', { COM_QUERY: 2 }, { completed: 1, completedByClass: { insert: 1 }, failed: 1, failedByClass: { insert: 1 }, rowsInserted: 3 });
    const r = reconcileWire(
      w,
      serverLayer({ summary: { statements: 2, inserts: 2, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 4 } }),
    );
    expect(r.discrepancies).toEqual([]);
    expect(r.reconciliation.join('\n')).toContain('Questions (statements) 2 (wire: 2)');
  });

  it('wire counts without statement-by-statement counts (an older report) compare nothing and say so', () => {
    const { statements: _dropped, ...old } = wire('mysql', { COM_QUERY: 1 }, {});
    const r = reconcileWire(old, serverLayer());
    expect(r.discrepancies).toEqual([]);
    expect(r.reconciliation[0]).toMatch(/no statement-by-statement counts/);
  });
});

describe('reasons when no Node driver was counted', () => {
  it('work in flight names the connection and its statement, not await', () => {
    const v = decideVerdict({
      backend: postgres(),
      driver: null,
      wire: wire('postgres', { Query: 1 }, {}),
      server: serverLayer(),
      unfinished: { driverCalls: 0, wireRequests: 1, lateCommands: 0 },
      inFlight: ['connection #4242: SELECT pg_sleep(5)'],
    });
    expect(v.kind).toBe('incomplete');
    expect(v.reason).toContain("wait for the client process to exit, or for its last statement's result");
    expect(v.reason).toContain('connection #4242: SELECT pg_sleep(5)');
    expect(v.reason).not.toMatch(/await|session\.count/);
  });

  it('work around the proxy points at the host and port any client is given, not session.count()', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: wire('mysql', {}, {}),
      server: serverLayer({
        connectionsOpened: 1,
        summary: { statements: 0, inserts: 0, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 0 },
      }),
    });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain("point every client at the proxy's host and port");
    expect(v.reason).not.toMatch(/session\.count\(\)|await/);
  });
});
