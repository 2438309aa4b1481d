// @waits 12: the COPY and LOAD DATA strategies, exact on every layer, a COPY that fails halfway and a LOAD DATA refused.
import { Readable } from 'node:stream';
import { CaptureSession, type Captured } from '../src/capture/capture';
import { withSqlClient } from '../src/backends/sql-client';
import type { BackendName, NetworkConnection, StartedBackend } from '../src/backends/types';
import { makeRows } from '../src/workload/rows';
import { STRATEGIES, runStrategy, type AnyInsertStrategy } from '../src/workload/strategies';
import { loadCopyFrom } from '../src/workload/strategies/bulk';
import { bulkTextStream } from '../src/workload/bulk-text';
import { createTableSql, dropTableSql, workloadTable } from '../src/workload/table';
import { verifyRows } from '../src/workload/verify';
import { forcedPlain } from '../src/driver/compat/path';
import { describeEachBackend, withBackend } from './harness';
import { pipeline } from 'node:stream/promises';

/** 2500 rows: three chunks of the stream (1000, 1000, 500), every special text case of the workload included. */
const ROWS = 2500;
const TABLE = workloadTable('postgres').name;

/** The bulk strategies of each backend, and the wire commands each must show at ROWS rows. */
const EXPECTED: Record<
  BackendName,
  { strategy: keyof typeof STRATEGIES; wire: Record<string, number>; plainRowsUnknown?: string }[] | { notSupported: string }
> = {
  postgres: [
    { strategy: 'pg.copy', wire: { Query: 1, CopyData: 3, CopyDone: 1 } },
    // postgres.js destroys its finished Writable, and its destroy sends a CopyFail the server ignores.
    {
      strategy: 'postgres-js.copy',
      wire: { Query: 1, CopyData: 3, CopyDone: 1, CopyFail: 1 },
      plainRowsUnknown: 'its `COPY n` resolves a query already resolved with its stream: no public API hands the rows over',
    },
  ],
  mariadb: [
    { strategy: 'mysql2.load-data', wire: { COM_QUERY: 1, LocalInfileData: 3, LocalInfileEnd: 1 } },
    // The connector gathers the stream into packets of its own size: 173 KB of text is one.
    { strategy: 'mariadb.load-data', wire: { COM_QUERY: 1, LocalInfileData: 1, LocalInfileEnd: 1 } },
  ],
  mysql: [
    { strategy: 'mysql2.load-data', wire: { COM_QUERY: 1, LocalInfileData: 3, LocalInfileEnd: 1 } },
    { strategy: 'mariadb.load-data', wire: { COM_QUERY: 1, LocalInfileData: 1, LocalInfileEnd: 1 } },
  ],
  sqlite: { notSupported: 'SQLite has no COPY or LOAD DATA' },
};

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

async function adminSql<T = unknown>(b: StartedBackend, sql: string): Promise<T[]> {
  return withSqlClient(b.description.name === 'postgres' ? 'postgres' : 'mysql', network(b), { backend: b.description.id }, (c) => c.query<T>(sql));
}

async function freshTable(b: StartedBackend): Promise<void> {
  const table = workloadTable(b.description.name);
  await adminSql(b, dropTableSql(table));
  await adminSql(b, createTableSql(table));
}

async function sessionFor(b: StartedBackend, strategy: AnyInsertStrategy): Promise<CaptureSession> {
  return CaptureSession.open({
    backend: b,
    driver: strategy.driver,
    driverOptions: strategy.connectionOptions as Record<string, unknown> | undefined,
    table: { name: TABLE, ...(b.description.name === 'postgres' ? { schema: 'public' } : {}) },
  });
}

function layersOf(t: Captured<unknown>) {
  return {
    verdict: t.verdict.kind,
    driver: { calls: t.layers.driver?.calls, rows: t.layers.driver?.rowsAffected, errors: t.layers.driver?.errors },
    statements: t.layers.server?.summary.statements,
    rowsInserted: t.layers.server?.summary.rowsInserted,
  };
}

describeEachBackend((b) => {
  const expected = EXPECTED[b.backend];
  if ('notSupported' in expected) {
    it.skip(`NOT_SUPPORTED: ${expected.notSupported}`, () => undefined);
    return;
  }
  const backend = withBackend(b.id);

  for (const { strategy: name, wire, plainRowsUnknown } of expected) {
    it(`${name}: one call carrying ${ROWS} rows, exact on every layer, every row read back equal (tabs, backslashes, quotes, emoji): assert`, async () => {
      const started = backend();
      const strategy = STRATEGIES[name] as AnyInsertStrategy;
      const plan = strategy.plan(ROWS, started.description.capabilities, { backend: started.description.name });
      const input = strategy.prepare(makeRows(ROWS), workloadTable(started.description.name), plan);
      await freshTable(started);
      await using session = await sessionFor(started, strategy);
      const tally = await session.measure((h) => runStrategy(strategy, h as never, input), { hot: true });
      expect(tally.workloadError).toBeNull();
      // On the plain path, where the driver's public API does not give the rows (plainRowsUnknown says why), the call
      // records none, and the server's and the wire's rows still are compared.
      const rowsUnknown = plainRowsUnknown !== undefined && forcedPlain();
      expect(layersOf(tally)).toEqual({ verdict: 'assert', driver: { calls: 1, rows: rowsUnknown ? 0 : ROWS, errors: 0 }, statements: 1, rowsInserted: ROWS });
      if (rowsUnknown) expect(tally.layers.driver?.events.map((e) => e.rowsAffected)).toEqual([null]);
      expect(tally.layers.wire?.commands).toEqual(wire);
      // The plan fixes the data messages the strategy sends, where it writes them itself.
      const planned = strategy.expectedDriverCounts(ROWS, started.description.capabilities, { backend: started.description.name }).wire ?? {};
      for (const [command, n] of Object.entries(planned)) expect([command, tally.layers.wire?.commands[command] ?? 0]).toEqual([command, n]);
      if (b.backend === 'postgres') {
        expect(tally.layers.server?.statements?.map((s) => [s.calls, s.rows])).toEqual([[1, ROWS]]);
      } else {
        expect(tally.layers.server?.global).toMatchObject({ Com_load: 1, Com_insert: 0 });
      }
      expect(await verifyRows(started, workloadTable(started.description.name), ROWS)).toBe(ROWS);
    });
  }

  if (b.backend === 'postgres') {
    it('a COPY that meets a bad row halfway: the call fails with the server error, nothing is committed, and every layer says so', async () => {
      const started = backend();
      await freshTable(started);
      const strategy = STRATEGIES['pg.copy'] as AnyInsertStrategy;
      await using session = await sessionFor(started, strategy);
      const from = loadCopyFrom(started.description.id);
      const rows = makeRows(ROWS);
      const table = workloadTable('postgres');
      const tally = await session.measure(
        async (client: any) => {
          const good = bulkTextStream(rows, 0, 1500);
          const bad = Readable.from([Buffer.from('not-a-number\t1\tx\t1.5\t1\tx\n')]);
          const source = Readable.from(
            (async function* () {
              for await (const chunk of good) yield chunk;
              for await (const chunk of bad) yield chunk;
              for await (const chunk of bulkTextStream(rows, 1500, 1000)) yield chunk;
            })(),
          );
          await pipeline(source, client.query(from(`COPY ${table.quoted} (c1, c2, c3, c4, c5, c6) FROM STDIN`)));
        },
        { hot: true },
      );
      expect(tally.workloadError?.message).toMatch(/invalid input syntax for type integer: "not-a-number"/);
      expect(tally.layers.driver).toMatchObject({ calls: 1, errors: 1 });
      expect(tally.layers.wire?.commands.Query).toBe(1);
      expect(tally.layers.wire?.serverMessages?.ErrorResponse).toBe(1);
      // pg_stat_statements counts a statement when it finishes: a failed COPY is not there.
      expect(tally.layers.server?.summary.statements).toBe(0);
      expect(tally.verdict.kind).not.toBe('assert');
      expect(await adminSql(started, `SELECT count(*)::int AS n FROM ${table.quoted}`)).toEqual([{ n: 0 }]);
      process.stdout.write(
        `${JSON.stringify({ case: 'COPY bad row', ...layersOf(tally), wire: tally.layers.wire?.commands, reason: tally.verdict.reason.slice(0, 300) })}\n`,
      );
    });

    it('a COPY whose own stream fails: CopyFail on the wire, the cause as the workload error, nothing committed', async () => {
      const started = backend();
      await freshTable(started);
      const strategy = STRATEGIES['pg.copy'] as AnyInsertStrategy;
      await using session = await sessionFor(started, strategy);
      const from = loadCopyFrom(started.description.id);
      const rows = makeRows(ROWS);
      const table = workloadTable('postgres');
      const tally = await session.measure(
        async (client: any) => {
          const source = Readable.from(
            (async function* () {
              for await (const chunk of bulkTextStream(rows, 0, 1000)) yield chunk;
              // Midway: the COPY has started and its first chunk is on the wire.
              await new Promise((resolve) => setTimeout(resolve, 300));
              throw new Error('the source of the rows broke');
            })(),
          );
          await pipeline(source, client.query(from(`COPY ${table.quoted} (c1, c2, c3, c4, c5, c6) FROM STDIN`)));
        },
        { hot: true },
      );
      expect(tally.workloadError?.message).toMatch(/the source of the rows broke/);
      expect(tally.layers.wire?.commands).toMatchObject({ Query: 1, CopyData: 1, CopyFail: 1 });
      expect(tally.layers.wire?.commands.CopyDone ?? 0).toBe(0);
      process.stdout.write(
        `${JSON.stringify({ case: 'COPY stream error (before checks)', ...layersOf(tally), wire: tally.layers.wire?.commands, reason: tally.verdict.reason.slice(0, 600) })}\n`,
      );
      expect(tally.verdict.kind).toBe('incomplete');
      expect(tally.verdict.reason).toMatch(/the source of the rows broke/);
      expect(await adminSql(started, `SELECT count(*)::int AS n FROM ${table.quoted}`)).toEqual([{ n: 0 }]);
      process.stdout.write(
        `${JSON.stringify({ case: 'COPY stream error', ...layersOf(tally), wire: tally.layers.wire?.commands, reason: tally.verdict.reason.slice(0, 300) })}\n`,
      );
    });
  } else {
    for (const name of ['mysql2.load-data', 'mariadb.load-data'] as const) {
      it(`${name} on a server with local_infile OFF: a SqltallyError that names the setting`, async () => {
        const started = backend();
        await freshTable(started);
        const strategy = STRATEGIES[name] as AnyInsertStrategy;
        const input = strategy.prepare(
          makeRows(10),
          workloadTable(started.description.name),
          strategy.plan(10, started.description.capabilities, { backend: started.description.name }),
        );
        await adminSql(started, 'SET GLOBAL local_infile = 0');
        try {
          await using session = await sessionFor(started, strategy);
          const tally = await session.measure((h) => runStrategy(strategy, h as never, input), { hot: true });
          expect(tally.workloadError?.message).toMatch(/the server refused LOAD DATA LOCAL INFILE: its local_infile setting is OFF/);
          expect(tally.workloadError?.statement).toMatch(/^LOAD DATA LOCAL INFILE/);
          expect(tally.layers.driver).toMatchObject({ calls: 1, errors: 1 });
        } finally {
          await adminSql(started, 'SET GLOBAL local_infile = 1');
        }
      });
    }
  }
});
