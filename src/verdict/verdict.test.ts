import { backend, driverLayer, event, serverLayer } from './layers.fixture';
import { beyondWindow, decideVerdict, judgeWindow } from './verdict';

describe('decideVerdict', () => {
  it('asserts on an isolated private server with a zero control window', () => {
    const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: serverLayer() });
    expect(v.kind).toBe('assert');
    expect(v.reason).toMatch(/^isolated: private server, control window 0/);
  });

  it('names background daemons without counting them as intruders', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({ backgroundSessions: [{ id: 5, name: 'event_scheduler (Daemon)' }] }),
    });
    expect(v.kind).toBe('assert');
    expect(v.reason).toContain('background threads set aside: event_scheduler (Daemon) #5');
  });

  it('reports the counter and amount when the control window moved', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({ control: { Questions: 2, Com_insert: 1, Handler_write: 0 } }),
    });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('control window moved by Questions by +2, Com_insert by +1');
  });

  it('reports which foreign sessions were seen and what they ran', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({
        foreignSessions: [{ id: 12, user: 'app', host: '127.0.0.1:5000', command: 'Query', info: 'INSERT INTO other VALUES (1)' }],
      }),
    });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('client connections outside the window: #12 app@127.0.0.1:5000 (Query: INSERT INTO other VALUES (1))');
  });

  it('says how long a foreign session had been in its command, where the server told', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({ foreignSessions: [{ id: 153, user: 'root', host: '127.0.0.1:40112', command: 'Sleep', seconds: 0, info: null }] }),
    });
    expect(v.reason).toContain('client connections outside the window: #153 root@127.0.0.1:40112 (Sleep for 0 s)');
  });

  it('reports a client that connected during the window even when it left before the session listing', () => {
    const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: serverLayer({ connectionsOpened: 1 }) });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain("the server counted 1 Connections (connections opened) where the window's connections account for 0 (+1)");
  });

  it('reports when the account cannot see other sessions', () => {
    const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: serverLayer({ canSeeOtherSessions: false }) });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('the account cannot see other sessions, so isolation cannot be verified');
  });

  it('reports on a server that is not private', () => {
    const v = decideVerdict({ backend: backend({ privateServer: false }, 'external'), driver: null, wire: null, server: serverLayer() });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('not private to sqltally (provider external)');
    expect(v.reason).not.toContain('per-connection');
  });

  it('on a shared server without per-connection counts, says why a window there cannot assert and what can', () => {
    const off = decideVerdict({
      backend: backend({ privateServer: false, perThreadStatements: false }, 'external'),
      driver: null,
      wire: null,
      server: serverLayer(),
    });
    expect(off.kind).toBe('report');
    expect(off.reason).toContain('per-connection attribution, which can assert on a shared server, needs performance_schema on');
    const pgBackend = {
      ...backend({ privateServer: false, perThreadStatements: false, wireProtocol: 'postgres' }, 'external'),
      name: 'postgres' as const,
      flavour: 'postgres' as const,
    };
    const none = decideVerdict({ backend: pgBackend, driver: null, wire: null, server: serverLayer() });
    expect(none.reason).toContain('postgres keeps no per-connection statement counts');
  });

  describe('a second client writing beside the window, with exact per-connection attribution', () => {
    const intruded = serverLayer({
      global: { Questions: 5, Com_insert: 2, Handler_write: 7 },
      perConnection: { Questions: 1, Handler_write: 3 },
      summary: { statements: 1, inserts: 1, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 3 },
      globalSummary: { statements: 5, inserts: 2, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 7 },
      summarySource: 'perConnection',
      control: { Questions: 0, 'perConnection.Questions': 0 },
      foreignSessions: [{ id: 12, user: 'root', host: 'localhost', command: 'Sleep', info: null }],
      attribution: { method: 'performance_schema', requested: [7], found: [7], exact: true },
      comparable: [{ global: 'Handler_write', perConnection: 'Handler_write' }],
    });

    it("on a private server it is the user's own code going around the proxy: report, naming what the server did beyond", () => {
      const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: intruded });
      expect(v.kind).toBe('report');
      expect(v.reason).toMatch(/^the server did work the window's connections do not account for: /);
      expect(v.reason).toContain('client connections outside the window: #12 root@localhost (Sleep)');
      expect(v.reason).toContain("the server counted 5 Questions (statements) where the window's connections account for 1 (+4)");
      expect(v.reason).toContain("the server counted 2 Com_insert (inserts) where the window's connections account for 1 (+1)");
      expect(v.reason).toContain("the server counted 7 Handler_write (rows inserted) where the window's connections account for 3 (+4)");
      // No Node driver was counted: the advice names what any client is given, not session.count().
      expect(v.reason).toContain("point every client at the proxy's host and port");
      expect(beyondWindow(backend().flavour, intruded, null)).toEqual([
        { counter: 'Questions (statements)', server: 5, window: 1 },
        { counter: 'Com_insert (inserts)', server: 2, window: 1 },
        { counter: 'Handler_write (rows inserted)', server: 7, window: 3 },
      ]);
    });

    it("on a server declared shared the window's own connections may still assert, naming the foreign work", () => {
      const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: intruded, otherConnections: 'foreign' });
      expect(v.kind).toBe('assert');
      expect(v.reason).toMatch(
        /^per-connection attribution \(performance_schema\) covers the window's connection #7 exactly; the server as a whole also did other clients' work, set aside: /,
      );
      expect(v.reason).toContain('Questions (statements)');
    });
  });

  it("MySQL: the window connections' Handler_write above the server-wide Innodb_rows_inserted (DDL's data-dictionary writes) is not rows inserted: report", () => {
    const mysql = {
      ...backend({ rowCounter: 'Innodb_rows_inserted', bulkExecute: false }),
      name: 'mysql' as const,
      flavour: 'mysql' as const,
      id: 'mysql@9.7',
    };
    const ddl = serverLayer({
      global: { Questions: 4, Com_insert: 1, Innodb_rows_inserted: 1 },
      perConnection: { Questions: 4, Handler_write: 28 },
      summary: { statements: 4, inserts: 1, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 28 },
      globalSummary: { statements: 4, inserts: 1, prepares: 0, executes: 0, bulkExecutes: null, commits: 0, rowsInserted: 1 },
      summarySource: 'perConnection',
      control: { Questions: 0, 'perConnection.Questions': 0 },
      attribution: { method: 'performance_schema', requested: [7], found: [7], exact: true },
      comparable: [{ global: 'Innodb_rows_inserted', perConnection: 'Handler_write' }],
    });
    const v = decideVerdict({ backend: mysql, driver: null, wire: null, server: ddl });
    expect(v.kind).toBe('report');
    expect(v.discrepancies).toEqual([
      expect.stringMatching(/^server layer: Innodb_rows_inserted \(rows inserted\) moved by 1 server-wide, less than the window's own 28: .*data dictionary/),
    ]);
    // The same figures with one counter on both sides (MariaDB's Handler_write) cannot be below: nothing to say.
    const same = { ...ddl, comparable: [{ global: 'Handler_write', perConnection: 'Handler_write' }] };
    expect(decideVerdict({ backend: mysql, driver: null, wire: null, server: same }).discrepancies).toEqual([]);
  });

  it('reports when attribution misses a workload connection', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({
        perConnection: { Questions: 1 },
        foreignSessions: [{ id: 12, user: 'root', host: 'localhost', command: 'Sleep', info: null }],
        attribution: { method: 'performance_schema', requested: [7, 8], found: [7], exact: false },
      }),
    });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('per-connection attribution is not exact: #8 not found');
  });

  it('is incomplete when a layer is incomplete or statistics did not settle', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({ incomplete: true, incompleteReasons: ['statistics did not settle: counters still moving after 5000 ms'] }),
    });
    expect(v).toMatchObject({ kind: 'incomplete', reason: 'server layer incomplete: statistics did not settle: counters still moving after 5000 ms' });
    const wire = decideVerdict({
      backend: backend(),
      driver: null,
      wire: {
        protocol: 'mysql',
        commands: {},
        commandsTotal: 0,
        roundTrips: 0,
        bytesClientToServer: 0,
        bytesServerToClient: 0,
        clientWrites: 0,
        connections: 1,
        incomplete: true,
        incompleteReasons: ['TLS on connection 1'],
      },
      server: serverLayer(),
    });
    expect(wire).toMatchObject({ kind: 'incomplete', reason: 'wire layer incomplete: TLS on connection 1' });
  });

  it('is incomplete when the probe failed', () => {
    const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: null, probeError: 'ECONNREFUSED 127.0.0.1:1' });
    expect(v).toMatchObject({ kind: 'incomplete', reason: 'server probe failed: ECONNREFUSED 127.0.0.1:1' });
  });

  it('shows the workload error, not a count mismatch', () => {
    const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: serverLayer(), workloadError: { message: "Duplicate entry '1'" } });
    expect(v).toMatchObject({ kind: 'incomplete', reason: "the workload threw: Duplicate entry '1'" });
  });

  it('reports, with the words, when a source it should have was unreadable', () => {
    const v = decideVerdict({
      backend: backend({ statementStats: true }),
      driver: null,
      wire: null,
      server: serverLayer({ degraded: ['pg_stat_statements is not available (relation "pg_stat_statements" does not exist): no per-statement counts'] }),
    });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('pg_stat_statements is not available');
  });

  it('reports when no server layer was read', () => {
    expect(decideVerdict({ backend: backend(), driver: null, wire: null, server: null }).kind).toBe('report');
  });

  it('carries the reconciliation when the driver layer is given', () => {
    const v = decideVerdict({
      backend: backend(),
      driverName: 'mysql2',
      driver: driverLayer([event({ rowsAffected: 3, bindValues: 6 })]),
      wire: null,
      server: serverLayer(),
    });
    expect(v.reconciliation[0]).toBe('1 driver query [insert] -> 1 COM_QUERY -> 1 statement');
    expect(v.discrepancies).toEqual([]);
  });
});

describe('judgeWindow', () => {
  it('hands back the statements the counted calls explain, from the prediction the verdict compared with: a Query of three statements is three', () => {
    const multi = event({ sql: 'SELECT 1; INSERT INTO t VALUES (1); SELECT 2', statementClass: 'select', bindValues: 0, rowsAffected: null });
    const judged = judgeWindow({ backend: backend(), driverName: 'mysql2', driver: driverLayer([multi]), wire: null, server: serverLayer() });
    expect(judged.explainedStatements).toBe(3);
    expect(judged.verdict.reconciliation[0]).toBe('1 driver query [select] -> 1 COM_QUERY -> 3 statements');
    expect(judgeWindow({ backend: backend(), driver: null, wire: null, server: serverLayer() }).explainedStatements).toBeUndefined();
  });
});

describe('findings and deferred work', () => {
  const batch = event({ driver: 'mariadb', method: 'batch', kind: 'batch', parameterSets: 5000, bindValues: 10000, rowsAffected: 5000 });
  const fellBack = {
    backend: backend(),
    driverName: 'mariadb' as const,
    driver: driverLayer([batch]),
    wire: null,
    server: serverLayer({
      summary: { statements: 5000, inserts: 5000, prepares: 1, executes: 5000, bulkExecutes: null, commits: 0, rowsInserted: 5000 },
      global: {},
    }),
  };

  it('a mariadb batch that fell back to one execute per row, within the model range: assert, with the fallback as a finding', () => {
    const { verdict, findings } = judgeWindow(fellBack);
    expect({ kind: verdict.kind, discrepancies: verdict.discrepancies }).toEqual({ kind: 'assert', discrepancies: [] });
    expect(findings.map((f) => f.kind)).toEqual(['batch-fallback', 'batch-fallback']);
    expect(findings[0]?.message).toMatch(/1 driver batch\(es\) became 5000 server statements: the connector fell back from bulk/);
  });

  it('work still pending after the wait: incomplete, naming each piece and its line', () => {
    const v = decideVerdict({
      ...fellBack,
      deferredWork: { waitMs: 1500, items: [{ what: 'a setTimeout(…, 3600000) timer', site: 'app.test.ts:12:5', settled: false }] },
    });
    expect(v.kind).toBe('incomplete');
    expect(v.reason).toBe(
      "the measured function returned while work it started was still pending after a 1500 ms wait: a setTimeout(…, 3600000) timer created at app.test.ts:12:5 (still pending). Await it: its counts are not the window's",
    );
  });

  it("a begin() window's reasons say end() was called, not that a function returned", () => {
    const pending = { waitMs: 1500, items: [{ what: 'a setTimeout(…, 3600000) timer', site: 'app.test.ts:12:5', settled: false }] };
    const settled = { waitMs: 1500, items: [{ what: 'a promise', site: 'app.test.ts:9:3', settled: true }] };
    expect(decideVerdict({ ...fellBack, endedBy: 'end', deferredWork: pending }).reason).toMatch(
      /^end\(\) was called while work started in the window was still pending after a 1500 ms wait: a setTimeout/,
    );
    expect(decideVerdict({ ...fellBack, endedBy: 'end', deferredWork: settled }).reason).toMatch(
      /^end\(\) was called before work started in the window had finished: a promise created at app.test.ts:9:3\./,
    );
    expect(decideVerdict({ ...fellBack, endedBy: 'end', workloadError: { message: 'boom' }, deferredWork: settled }).reason).toBe(
      'the workload threw: boom; work started in the window was left running, not awaited: a promise created at app.test.ts:9:3',
    );
  });

  it('work that settled within the wait: counted, but report, never assert', () => {
    const v = decideVerdict({
      ...fellBack,
      deferredWork: {
        waitMs: 1500,
        items: [
          { what: 'a promise', site: 'app.test.ts:9:3', settled: true },
          { what: 'a promise', site: 'app.test.ts:9:3', settled: true },
        ],
      },
    });
    expect(v.kind).toBe('report');
    expect(v.reason).toMatch(
      /^the measured function returned before work it started had finished: 2 × a promise created at app.test.ts:9:3\. It settled within/,
    );
  });

  it('a workload that threw after starting work it did not await: incomplete, naming both', () => {
    const v = decideVerdict({
      ...fellBack,
      workloadError: { message: 'boom' },
      deferredWork: { waitMs: 1500, items: [{ what: 'a setTimeout(…, 50) timer', site: 'app.test.ts:4:7', settled: true }] },
    });
    expect(v.kind).toBe('incomplete');
    expect(v.reason).toBe('the workload threw: boom; it left work running that it did not await: a setTimeout(…, 50) timer created at app.test.ts:4:7');
  });
});

describe('a window with no counted call but traffic on the wire', () => {
  const wire = {
    protocol: 'postgres' as const,
    commands: { Bind: 1, Execute: 4, Flush: 4, Sync: 1 },
    commandsTotal: 10,
    roundTrips: 1,
    bytesClientToServer: 100,
    bytesServerToClient: 1000,
    clientWrites: 5,
    connections: 1,
    incomplete: false,
    incompleteReasons: [],
  };
  const input = { backend: backend(), driverName: 'postgres-js' as const, driver: driverLayer([]), wire, server: serverLayer() };

  it('is put down to a client never counted when its connections are not the counted calls', () => {
    for (const wireOwners of [undefined, { counted: [] }]) {
      const v = decideVerdict({ ...input, ...(wireOwners ? { wireOwners } : {}) });
      expect(v.kind).toBe('assert');
      expect(v.reconciliation[0]).toMatch(/^no counted driver call in this window: its 10 wire command\(s\) came from clients not passed/);
    }
  });

  it('is a missed call, never assert, when it ran on a connection counted calls ran on', () => {
    const onCounted = decideVerdict({ ...input, wireOwners: { counted: [4242] } });
    expect(onCounted.kind).toBe('report');
    expect(onCounted.discrepancies).toEqual([
      'driver layer: no counted call in this window, yet 10 wire command(s) ran on connection(s) #4242, which counted calls ran on in this session: a counted object made calls its wrapper did not see',
    ]);
  });
});
