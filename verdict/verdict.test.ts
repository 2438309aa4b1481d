import { backend, driverLayer, event, serverLayer } from './layers.fixture';
import { decideVerdict } from './verdict';

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
    expect(v.reason).toContain('other client connections seen: #12 app@127.0.0.1:5000 (Query: INSERT INTO other VALUES (1))');
  });

  it('reports a client that connected during the window even when it left before the session listing', () => {
    const v = decideVerdict({ backend: backend(), driver: null, wire: null, server: serverLayer({ connectionsOpened: 1 }) });
    expect(v.kind).toBe('report');
    expect(v.reason).toContain('1 client connection(s) were opened during the window');
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
  });

  it('asserts through exact per-connection attribution even with an intruder, and says why globals would not do', () => {
    const v = decideVerdict({
      backend: backend(),
      driver: null,
      wire: null,
      server: serverLayer({
        global: { Questions: 5, Handler_write: 7 },
        perConnection: { Questions: 1, Handler_write: 3 },
        summarySource: 'perConnection',
        control: { Questions: 0, 'perConnection.Questions': 0 },
        foreignSessions: [{ id: 12, user: 'root', host: 'localhost', command: 'Sleep', info: null }],
        attribution: { method: 'performance_schema', requested: [7], found: [7], exact: true },
        comparable: [
          { global: 'Questions', perConnection: 'Questions' },
          { global: 'Handler_write', perConnection: 'Handler_write' },
        ],
      }),
    });
    expect(v.kind).toBe('assert');
    expect(v.reason).toMatch(/^per-connection attribution \(performance_schema\) covers the workload's connection #7 exactly; the global counters alone would not be/);
    expect(v.reason).toContain('global Questions differs from the workload connections\' Questions by 4');
    expect(v.reason).toContain('global Handler_write differs from the workload connections\' Handler_write by 4');
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
    expect(v.reason).toContain('did not find the workload connection(s) #8');
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
        protocol: 'mysql', commands: {}, commandsTotal: 0, roundTrips: 0, bytesClientToServer: 0, bytesServerToClient: 0,
        clientWrites: 0, connections: 1, incomplete: true, incompleteReasons: ['TLS on connection 1'],
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
