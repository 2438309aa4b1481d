import { backend, driverLayer, event } from './layers.fixture';
import { ignoredShare, predict, reconcile } from './reconcile';
import { WindowTotals, windowOfEvents } from '../driver/driver-layer';
import type { CallShape } from '../sql/events';
import type { ServerSummary } from '../server/types';
import type { WireCounts } from '../wire/types';

const caps = (bulkExecute: boolean) => ({ ...backend().capabilities, bulkExecute });

function server(overrides: Partial<ServerSummary>): ServerSummary {
  return { statements: null, inserts: null, prepares: null, executes: null, bulkExecutes: null, commits: null, rowsInserted: null, ...overrides };
}

function wire(commands: Record<string, number>): WireCounts {
  const total = Object.values(commands).reduce((a, b) => a + b, 0);
  return {
    protocol: 'mysql',
    commands,
    commandsTotal: total,
    roundTrips: total,
    bytesClientToServer: 0,
    bytesServerToClient: 0,
    clientWrites: total,
    connections: 1,
    incomplete: false,
    incompleteReasons: [],
  };
}

const BATCH_SQL = 'INSERT INTO t (a, b) VALUES (?, ?)';
const batch = (n: number) => event({ driver: 'mariadb', method: 'batch', kind: 'batch', sql: BATCH_SQL, bindValues: 2 * n, parameterSets: n, rowsAffected: n });

describe('reconcile', () => {
  it('a multi-row INSERT is one statement on every layer', () => {
    const r = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer([event({ method: 'query', kind: 'query', bindValues: 10000, rowsAffected: 5000 })]),
      wire: wire({ COM_QUERY: 1 }),
      server: server({ statements: 1, inserts: 1, prepares: 0, executes: 0, rowsInserted: 5000 }),
    });
    expect(r.reconciliation).toEqual([
      '1 driver query [insert] -> 1 COM_QUERY -> 1 statement',
      'wire: COM_QUERY 1',
      'server: statements 1, prepares 0, executes 0, inserts 1, rowsInserted 5000',
    ]);
    expect(r.discrepancies).toEqual([]);
  });

  it('names a group of several calls in the plural: queries, not querys', () => {
    const r = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer([1, 2].map(() => event({ method: 'query', kind: 'query', bindValues: 2, rowsAffected: 1 }))),
      wire: wire({ COM_QUERY: 2 }),
      server: server({ statements: 2, inserts: 2, prepares: 0, executes: 0, rowsInserted: 2 }),
    });
    expect(r.reconciliation[0]).toBe('2 driver queries [insert] -> each 1 COM_QUERY -> 1 statement');
  });

  it('a mysql2 execute per row prepares once per connection and SQL, then executes N times', () => {
    const events = Array.from({ length: 5 }, () => event({ method: 'execute', kind: 'execute' }));
    const r = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer(events),
      wire: wire({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 5 }),
      server: server({ statements: 5, prepares: 1, executes: 5, rowsInserted: 5 }),
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.prediction.server.prepares).toEqual({ min: 0, max: 1 });
    expect(r.prediction.server.executes).toEqual({ min: 5, max: 5 });
  });

  it('mysql2 from 3.25 prepares again on prepare() a text execute() has cached on the connection; earlier releases reuse it', () => {
    // The workload of integration/driver-paths.test.ts: execute(), then prepare() of the same text, then its execute.
    const events = [
      event({ method: 'execute', kind: 'execute' }),
      event({ method: 'prepare', kind: 'prepare', bindValues: 0, parameterSets: 0, rowsAffected: 0 }),
      event({ method: 'execute', kind: 'execute' }),
    ];
    const input = {
      driverName: 'mysql2' as const,
      capabilities: caps(false),
      driver: driverLayer(events),
      wire: wire({ COM_STMT_PREPARE: 2, COM_STMT_EXECUTE: 2 }),
      server: server({ statements: 2, prepares: 2, executes: 2, rowsInserted: 2 }),
    };
    const newer = reconcile({ ...input, driverVersion: '3.26.1' });
    expect(newer.prediction.wire.COM_STMT_PREPARE).toEqual({ min: 1, max: 2 });
    expect(newer.discrepancies).toEqual([]);
    const older = reconcile({ ...input, driverVersion: '3.24.6' });
    expect(older.prediction.wire.COM_STMT_PREPARE).toEqual({ min: 0, max: 1 });
    expect(older.discrepancies.join('\n')).toMatch(/2 COM_STMT_PREPARE, model predicts 0-1/);
    // A release not known may do either.
    expect(reconcile(input).prediction.wire.COM_STMT_PREPARE).toEqual({ min: 0, max: 2 });
  });

  it('a statement cached before the window needs no prepare in it', () => {
    const r = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer([event({ method: 'execute', kind: 'execute' })]),
      wire: wire({ COM_STMT_EXECUTE: 1 }),
      server: server({ statements: 1, prepares: 0, executes: 1, rowsInserted: 1 }),
    });
    expect(r.discrepancies).toEqual([]);
  });

  it('a mariadb batch on MariaDB with bulk is one COM_STMT_BULK_EXECUTE and one server execute for 5000 rows', () => {
    const r = reconcile({
      driverName: 'mariadb',
      capabilities: caps(true),
      driver: driverLayer([batch(5000)]),
      wire: wire({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 }),
      server: server({ statements: 1, prepares: 1, executes: 1, bulkExecutes: 1, rowsInserted: 5000 }),
    });
    expect(r.reconciliation[0]).toBe('1 driver batch [insert] (5000 parameter sets) -> 1-5000 COM_STMT_BULK_EXECUTE -> as many executes as bulk commands');
    expect(r.discrepancies).toEqual([]);
  });

  it('says the connector fell back from bulk when 1 batch became N server executes', () => {
    const r = reconcile({
      driverName: 'mariadb',
      capabilities: caps(true),
      driver: driverLayer([batch(5000)]),
      wire: wire({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 5000 }),
      server: server({ statements: 5000, prepares: 1, executes: 5000, bulkExecutes: 0, rowsInserted: 5000 }),
    });
    // Within the bulk range the executes are explained: the fallback is a finding; the counts the model cannot explain
    // (no bulk command where it predicts at least one) stay discrepancies.
    expect(r.findings).toContainEqual({
      kind: 'batch-fallback',
      message:
        "server executes 5000, within the model's 1-5000: 1 driver batch(es) became 5000 server executes: the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed)",
    });
    expect(r.discrepancies.some((d) => d.startsWith('server layer: executes'))).toBe(false);
    expect(r.discrepancies).toContain(
      'server layer: bulkExecutes 0, model predicts 1-5000: 1 driver batch(es) became 0 bulk commands: the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed)',
    );
    expect(r.discrepancies).toContain(
      'wire layer: 0 COM_STMT_BULK_EXECUTE, model predicts 1-5000 from 1 driver calls (5000 COM_STMT_EXECUTE instead: the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed))',
    );
  });

  it('names a fallback from global counters alone, where the bulk range would hide it, as a finding: the numbers are within the model', () => {
    const r = reconcile({
      driverName: 'mariadb',
      capabilities: caps(true),
      driver: driverLayer([batch(5000)]),
      wire: null,
      server: server({ statements: 5000, prepares: 1, executes: 5000, bulkExecutes: null, rowsInserted: 5000 }),
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.findings.map((f) => [f.kind, f.message])).toEqual([
      [
        'batch-fallback',
        "server statements 5000, within the model's 1-5000: 1 driver batch(es) became 5000 server statements: the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed)",
      ],
      [
        'batch-fallback',
        "server executes 5000, within the model's 1-5000: 1 driver batch(es) became 5000 server executes: the connector fell back from bulk (bulk option off, server without COM_STMT_BULK_EXECUTE, or parameter types changed)",
      ],
    ]);
  });

  it('a fallback outside the model range stays a discrepancy', () => {
    const r = reconcile({
      driverName: 'mariadb',
      capabilities: caps(true),
      driver: driverLayer([batch(5000)]),
      wire: null,
      server: server({ statements: 5001, prepares: 1, executes: 5001, bulkExecutes: null, rowsInserted: 5000 }),
    });
    expect(r.discrepancies).toHaveLength(2);
    expect(r.findings).toEqual([]);
  });

  it('a batch whose value types change every row is one bulk command per row: no fallback when the bulk commands are seen', () => {
    const r = reconcile({
      driverName: 'mariadb',
      capabilities: caps(true),
      driver: driverLayer([batch(24)]),
      wire: wire({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 24 }),
      server: server({ statements: 24, inserts: 24, prepares: 1, executes: 24, bulkExecutes: 24, rowsInserted: 24 }),
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.findings.map((f) => f.kind)).toEqual(['batch-split']);
    expect(r.findings[0]?.message).toMatch(/^1 driver batch\(es\) of 24 parameter sets went out as 24 bulk commands/);
    // Without the server's per-connection bulk count, the wire's bulk commands say the same.
    const wireOnly = reconcile({
      driverName: 'mariadb',
      capabilities: caps(true),
      driver: driverLayer([batch(24)]),
      wire: wire({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 24 }),
      server: server({ statements: 24, prepares: 1, executes: 24, bulkExecutes: null, rowsInserted: 24 }),
    });
    expect(wireOnly.discrepancies).toEqual([]);
  });

  it("a pool's executes, whose connection the wrapper does not know, prepare once on each of the window's connections", () => {
    const execute = (connectionId: number | null) =>
      event({ method: 'execute', kind: 'execute', sql: 'INSERT INTO t (a) VALUES (?)', bindValues: 1, rowsAffected: 1, connectionId });
    const pooled = { ...wire({ COM_STMT_PREPARE: 4, COM_STMT_EXECUTE: 24 }), connections: 4 };
    const summary = server({ statements: 24, inserts: 24, prepares: 4, executes: 24, rowsInserted: 24 });
    const r = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer(Array.from({ length: 24 }, () => execute(null))),
      wire: pooled,
      server: summary,
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.prediction.wire.COM_STMT_PREPARE).toEqual({ min: 0, max: 4 });
    // On one known connection a text is still prepared once at most.
    const one = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer(Array.from({ length: 24 }, () => execute(7))),
      wire: pooled,
      server: summary,
    });
    expect(one.discrepancies).toEqual([
      'wire layer: 4 COM_STMT_PREPARE, model predicts 0-1 from 24 driver calls (extra commands: another client on the proxied port, or driver-internal commands)',
      'server layer: prepares 4, model predicts 0-1: 3 more than the driver calls explain: another connection, driver-internal statements (SET, ping), or retries',
    ]);
  });

  it('with bulk off (or on MySQL) a batch is prepare + N executes, as the model predicts', () => {
    for (const [input, why] of [
      [{ capabilities: caps(true), driverOptions: { bulk: false } }, 'the bulk option is off'],
      [{ capabilities: caps(false), driverOptions: {} }, 'the server does not advertise COM_STMT_BULK_EXECUTE'],
    ] as const) {
      const r = reconcile({
        driverName: 'mariadb',
        ...input,
        driver: driverLayer([batch(100)]),
        wire: wire({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 100 }),
        server: server({ statements: 100, prepares: 1, executes: 100, rowsInserted: 100 }),
      });
      expect(r.discrepancies).toEqual([]);
      expect(r.reconciliation[0]).toBe(
        `1 driver batch [insert] (100 parameter sets) -> 100 COM_STMT_EXECUTE (no bulk: ${why}, so the connector pipelines one execute per row) -> 100 executes`,
      );
    }
  });

  it('names extra server statements with the amount and likely cause', () => {
    const r = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: driverLayer([event({ rowsAffected: 3 })]),
      wire: null,
      server: server({ statements: 3, rowsInserted: 4 }),
    });
    expect(r.discrepancies).toEqual([
      'server layer: statements 3, model predicts 1: 2 more than the driver calls explain: another connection, driver-internal statements (SET, ping), or retries',
      'server layer: rowsInserted 4, model predicts 3: more rows than the driver reported: another writer, or triggers',
    ]);
  });

  it('pg: a parameterised query is one extended-protocol round trip and one pg_stat_statements call', () => {
    const r = reconcile({
      driverName: 'pg',
      capabilities: { bulkExecute: false, wireProtocol: 'postgres' },
      driver: driverLayer([event({ driver: 'pg', sql: 'INSERT INTO t SELECT * FROM unnest($1::int[], $2::text[])', bindValues: 2, rowsAffected: 5000 })]),
      wire: { ...wire({ Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 }), protocol: 'postgres' },
      server: server({ statements: 1, inserts: 1, rowsInserted: 5000 }),
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.reconciliation[0]).toBe('1 driver query [insert] -> Parse/Bind/Describe?/Execute/Sync -> 1 pg_stat_statements call');
  });

  it('better-sqlite3: rows reconcile with total_changes; no statement counter to compare', () => {
    const events = [
      event({ driver: 'better-sqlite3', method: 'transaction', kind: 'query', sql: 'BEGIN', statementClass: 'begin', bindValues: 0, rowsAffected: null }),
      ...Array.from({ length: 3 }, () => event({ driver: 'better-sqlite3', method: 'run', kind: 'execute' })),
      event({ driver: 'better-sqlite3', method: 'transaction', kind: 'query', sql: 'COMMIT', statementClass: 'commit', bindValues: 0, rowsAffected: null }),
    ];
    const r = reconcile({
      driverName: 'better-sqlite3',
      capabilities: { bulkExecute: false, wireProtocol: null },
      driver: driverLayer(events),
      wire: null,
      server: server({ rowsInserted: 3 }),
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.reconciliation).toContain('server: rowsInserted 3');
  });

  it('says what it could not model', () => {
    const layer = { ...driverLayer([event({ rowsAffected: null })]), eventsOmitted: 10 };
    const p = predict({ driverName: 'mysql2', capabilities: caps(true), driver: layer, wire: null, server: null });
    expect(p.gaps).toEqual([
      'some INSERT calls did not report affected rows: rows not predicted',
      '10 driver events were omitted from the layer and the full list was not given: the model saw only 1, so no layer is compared',
    ]);
  });

  it('compares nothing from a capped event list, and everything from the full list', () => {
    const all = Array.from({ length: 300 }, () => event({ method: 'execute', kind: 'execute' }));
    const capped = { ...driverLayer(all.slice(0, 200)), calls: 300, eventsOmitted: 100 };
    const summary = server({ statements: 300, prepares: 1, executes: 300, rowsInserted: 300 });
    const partial = reconcile({ driverName: 'mysql2', capabilities: caps(true), driver: capped, wire: null, server: summary });
    expect(partial.discrepancies).toEqual([]);
    expect(partial.reconciliation.some((l) => l.startsWith('not modelled: 100 driver events were omitted'))).toBe(true);
    const full = reconcile({ driverName: 'mysql2', capabilities: caps(true), driver: capped, window: windowOfEvents(all), wire: null, server: summary });
    expect(full.discrepancies).toEqual([]);
    expect(full.reconciliation[0]).toMatch(/^300 driver executes \[insert\]/);
    const wrong = reconcile({
      driverName: 'mysql2',
      capabilities: caps(true),
      driver: capped,
      window: windowOfEvents(all),
      wire: null,
      server: { ...summary, executes: 301 },
    });
    expect(wrong.discrepancies).toHaveLength(1);
  });

  it('a failed call counts from nothing up to a whole call: a refused prepare executes nothing, a refused row may still be written', () => {
    const ok = event({ method: 'execute', kind: 'execute' });
    const failed = event({ method: 'execute', kind: 'execute', rowsAffected: null, error: "Duplicate entry '1' for key 'PRIMARY'" });
    const input = { driverName: 'mysql2' as const, capabilities: caps(true), driver: driverLayer([ok, failed]), wire: null, server: null };
    const p = predict(input);
    expect(p.wire.COM_STMT_EXECUTE).toEqual({ min: 1, max: 2 });
    expect(p.server.executes).toEqual({ min: 1, max: 2 });
    expect(p.server.rowsInserted).toEqual({ min: 1, max: Number.MAX_SAFE_INTEGER });
    expect(p.lines[0]).toMatch(/^2 driver executes \[insert\], 1 failed -> /);
    // The server wrote the refused row too (InnoDB counts it): not a discrepancy.
    const r = reconcile({
      ...input,
      wire: wire({ COM_STMT_EXECUTE: 2 }),
      server: server({ statements: 2, inserts: 2, prepares: 0, executes: 2, rowsInserted: 2 }),
    });
    expect(r.discrepancies).toEqual([]);
    expect(r.reconciliation).toContain(
      "not modelled: 1 INSERT call(s) failed: a statement's rows written before it failed (a duplicate key, say) count on the server and in no driver result, so rows are compared as at least 1",
    );
    // Fewer rows than the calls that succeeded reported still is one.
    expect(
      reconcile({ ...input, wire: null, server: server({ statements: 2, inserts: 2, prepares: 0, executes: 2, rowsInserted: 0 }) }).discrepancies,
    ).toHaveLength(1);
  });

  describe('pg calls tagged with their protocol', () => {
    const shape = (sql: string, protocol: CallShape['protocol'], bindValues = 0): CallShape => ({
      method: 'query',
      kind: 'query',
      sql,
      statementClass: sql.startsWith('INSERT') ? 'insert' : 'select',
      bindValues,
      parameterSets: 1,
      ...(protocol ? { protocol } : {}),
    });
    const windowOf = (calls: [CallShape, number | null][], ignore?: (s: { sql: string }) => boolean) => {
      const totals = new WindowTotals(ignore ? { ignore } : {});
      for (const [s, connection] of calls) totals.add('pg', s, 0, 0, s.statementClass === 'insert' ? 1 : null, null, connection);
      return totals.finish();
    };
    const input = (w: ReturnType<typeof windowOf>) => ({
      driverName: 'pg' as const,
      capabilities: { bulkExecute: false, wireProtocol: 'postgres' as const },
      driver: w.layer,
      window: w,
      wire: null,
      server: null,
    });

    it('get exact counts: Query per simple call, Parse per unnamed call; a named one at most once per connection', () => {
      const named = shape('INSERT INTO t VALUES ($1)', 'named', 1);
      const w = windowOf([
        [named, 7],
        [named, 7],
        [named, 7],
        [named, 8],
        [shape('SELECT $1', 'extended', 1), 7],
        [shape('SELECT $1', 'extended', 1), 7],
        [shape('SELECT 1', 'simple'), 7],
      ]);
      expect(predict(input(w)).wire).toEqual({
        Query: { min: 1, max: 1 },
        Parse: { min: 2, max: 4 },
        Bind: { min: 6, max: 6 },
        Describe: { min: 6, max: 6 },
        Execute: { min: 6, max: 6 },
        Sync: { min: 6, max: 6 },
      });
    });

    it('a named statement through a pool (no connection id) parses at most once per window connection; an untagged call keeps the range', () => {
      const named = shape('INSERT INTO t VALUES ($1)', 'named', 1);
      expect(
        predict(
          input(
            windowOf([
              [named, null],
              [named, null],
              [named, null],
            ]),
          ),
        ).wire.Parse,
      ).toEqual({ min: 0, max: 1 });
      const onTwo = { ...wire({}), connections: 2, protocol: 'postgres' as const };
      expect(
        predict({
          ...input(
            windowOf([
              [named, null],
              [named, null],
              [named, null],
            ]),
          ),
          wire: onTwo,
        }).wire.Parse,
      ).toEqual({ min: 0, max: 2 });
      expect(predict(input(windowOf([[shape('SELECT 1', undefined), 7]]))).wire.Query).toEqual({ min: 0, max: 1 });
    });

    it('ignored calls stay in the comparison, and their exact share is what a layer loses without them', () => {
      const w = windowOf(
        [
          [shape('SELECT 1', 'simple'), 7],
          [shape('INSERT INTO t VALUES ($1)', 'extended', 1), 7],
        ],
        (s) => s.sql === 'SELECT 1',
      );
      expect(w.layer).toMatchObject({ calls: 1, ignoredCalls: 1 });
      const wireSeen = { ...wire({ Query: 1, Parse: 1, Bind: 1, Describe: 1, Execute: 1, Sync: 1 }), protocol: 'postgres' as const };
      const r = reconcile({ ...input(w), wire: wireSeen, server: server({ statements: 2, inserts: 1, rowsInserted: 1 }) });
      expect(r.discrepancies).toEqual([]);
      expect(r.reconciliation[1]).toBe('1 driver query [select, ignored] -> Query -> 1 pg_stat_statements call');
      expect(ignoredShare(input(w))).toEqual({
        calls: 1,
        wire: { Query: 1, Parse: 0, Bind: 0, Describe: 0, Execute: 0, Sync: 0 },
        server: { statements: 1, rowsInserted: 0 },
        inexact: [],
      });
      // Without the ignored call in the model, the same layers would disagree.
      const blind = reconcile({
        ...input({ ...w, ignored: { groups: [], insertedRows: 0 } }),
        wire: wireSeen,
        server: server({ statements: 2, inserts: 1, rowsInserted: 1 }),
      });
      expect(blind.discrepancies).toHaveLength(2);
    });

    it('a COMMIT from a named statement is counted by the server at its first run on a connection only; as a Query, every time', () => {
      const commit = (protocol: CallShape['protocol']): CallShape => ({ ...shape('COMMIT', protocol), statementClass: 'commit' });
      const named = predict(
        input(
          windowOf([
            [commit('named'), 7],
            [commit('named'), 7],
            [commit('named'), 8],
          ]),
        ),
      );
      expect(named.server).toMatchObject({ statements: { min: 0, max: 2 }, commits: { min: 0, max: 2 } });
      const mixed = predict(
        input(
          windowOf([
            [commit('simple'), 7],
            [commit('named'), 7],
          ]),
        ),
      );
      expect(mixed.server).toMatchObject({ statements: { min: 1, max: 2 }, commits: { min: 1, max: 2 } });
      expect(
        predict(
          input(
            windowOf([
              [commit('extended'), 7],
              [commit('extended'), 7],
            ]),
          ),
        ).server.statements,
      ).toEqual({ min: 2, max: 2 });
    });
  });

  describe('postgres.js calls tagged with their protocol', () => {
    const shape = (sql: string, statementClass: CallShape['statementClass'], protocol: CallShape['protocol'], bindValues = 0): CallShape => ({
      method: 'unsafe',
      kind: 'query',
      sql,
      statementClass,
      bindValues,
      parameterSets: 1,
      ...(protocol ? { protocol } : {}),
    });
    const windowOf = (calls: CallShape[]) => {
      const totals = new WindowTotals({});
      for (const s of calls) totals.add('postgres-js', s, 0, 0, s.statementClass === 'insert' ? 1 : null, null, 7);
      return totals.finish();
    };
    const input = (w: ReturnType<typeof windowOf>) => ({
      driverName: 'postgres-js' as const,
      capabilities: { bulkExecute: false, wireProtocol: 'postgres' as const },
      driver: w.layer,
      window: w,
      wire: null,
      server: null,
    });
    const insert = shape('INSERT INTO t VALUES ($1)', 'insert', 'named', 1);

    it("a query builder's BEGIN and COMMIT through unsafe() are Queries, counted every time (the untagged range took every COMMIT for sql.begin()'s)", () => {
      const calls = [shape('BEGIN', 'begin', 'simple'), insert, shape('COMMIT', 'commit', 'simple')];
      const p = predict(input(windowOf(calls)));
      expect(p.wire).toMatchObject({ Query: { min: 2, max: 2 }, Bind: { min: 1, max: 1 }, Execute: { min: 1, max: 1 }, Sync: { min: 1, max: 1 } });
      expect(p.server).toMatchObject({ statements: { min: 3, max: 3 }, commits: { min: 1, max: 1 } });
      const untagged = predict(input(windowOf(calls.map(({ protocol: _, ...rest }) => rest))));
      expect(untagged.wire.Bind?.min).toBe(2);
    });

    it("sql.begin()'s COMMIT: named, counted at its first run on the connection; under prepare: false unnamed, Parse and count every time", () => {
      const named = predict(input(windowOf([shape('COMMIT', 'commit', 'named'), shape('COMMIT', 'commit', 'named')])));
      expect(named.server.statements).toEqual({ min: 0, max: 1 });
      expect(named.wire).toMatchObject({ Query: { min: 0, max: 0 }, Parse: { min: 0, max: 2 }, Bind: { min: 2, max: 2 } });
      const unnamed = predict(input(windowOf([shape('COMMIT', 'commit', 'extended'), shape('COMMIT', 'commit', 'extended')])));
      expect(unnamed.server.statements).toEqual({ min: 2, max: 2 });
      expect(unnamed.wire).toMatchObject({ Parse: { min: 2, max: 2 }, Describe: { min: 2, max: 2 }, Bind: { min: 2, max: 2 } });
    });
  });
});
