// @waits 24: every strategy at 5000 and 10000 rows on every backend.
import type { StartedBackend } from '../src/backends/types';
import { DriverTally } from '../src/driver/driver-layer';
import { wrapConnection } from '../src/driver/open';
import { SqltallyError } from '../src/shared/errors';
import { dropTable, executeSql, openPlainConnection, recreateTable } from '../src/workload/connect';
import { READ_LIMIT, readRows } from '../src/workload/read';
import { makeRows } from '../src/workload/rows';
import type { Row } from '../src/workload/rows';
import { findStrategy, runStrategy, strategiesFor } from '../src/workload/strategies';
import type { AnyInsertStrategy } from '../src/workload/strategies';
import { workloadTable } from '../src/workload/table';
import { verifyRows } from '../src/workload/verify';
import { describeEachBackend, withBackend } from './harness';

const ROW_COUNTS = [100, 5_000, 10_000] as const;
// jest's testTimeout is a global option, not a project one: per-row strategies at 10000 rows take seconds.
const CASE_TIMEOUT_MS = 180_000;

function tableFor(backend: StartedBackend, strategy: AnyInsertStrategy, rows: number) {
  return workloadTable(backend.description.name, `w_${strategy.name.replace(/[.-]/g, '_')}_${rows}`);
}

/** Runs one strategy through a counted connection of its own driver; returns the driver events. */
async function insertCounted(backend: StartedBackend, strategy: AnyInsertStrategy, rows: readonly Row[], table: ReturnType<typeof workloadTable>) {
  const { name, capabilities } = backend.description;
  const plan = strategy.plan(rows.length, capabilities, { backend: name });
  const input = strategy.prepare(rows, table, plan);
  const opened = await openPlainConnection(strategy.driver, backend.connection, strategy.connectionOptions, backend.description.id);
  const tally = new DriverTally();
  try {
    // Strategies must behave the same through the driver's counting proxy as through the raw handle.
    await runStrategy(strategy, wrapConnection(strategy.driver, opened.handle, tally), input);
  } finally {
    await opened.close();
  }
  return { events: tally.events, expected: strategy.expectedDriverCounts(rows.length, capabilities, { backend: name }) };
}

describeEachBackend((b) => {
  const backend = withBackend(b.id);

  for (const strategy of strategiesFor(b.backend)) {
    describe(strategy.name, () => {
      it.each(ROW_COUNTS)(
        '%i rows land, as the driver was asked, and verify through a fresh connection',
        async (count) => {
          const started = backend();
          const table = tableFor(started, strategy, count);
          await recreateTable(started, table);
          try {
            const { events, expected } = await insertCounted(started, strategy, makeRows(count), table);

            expect(await verifyRows(started, table, count)).toBe(count);

            // Driver layer, from the counting proxy around the real driver talking to the real server.
            expect(events.filter((e) => e.error !== null).map((e) => e.error)).toEqual([]);
            expect(events.length).toBe(expected.calls);
            expect(events.reduce((sum, e) => sum + e.parameterSets, 0)).toBe(expected.parameterSets);
            expect(events.map((e) => e.bindValues)).toEqual(expected.bindValuesPerCall);
            expect(events.map((e) => `${e.kind}/${e.statementClass}`)).toEqual(expected.sequence.map((c) => `${c.kind}/${c.statementClass}`));
          } finally {
            await dropTable(started, table);
          }
        },
        CASE_TIMEOUT_MS,
      );
    });
  }

  describe("a check between two writes of one open connection sees the second (the main job's hot point)", () => {
    // A fresh connection checks what an open one wrote, then it writes again; SQLite through the cell's own driver, as
    // another SQLite copy closing the file would delete the WAL the open connection goes on writing to.
    const first = new Map<string, AnyInsertStrategy>();
    for (const s of strategiesFor(b.backend)) if (!first.has(s.driver)) first.set(s.driver, s);
    it.each([...first.values()].map((s) => [s.driver, s] as const))(
      '%s',
      async (driver, strategy) => {
        const started = backend();
        const { name, capabilities } = started.description;
        const table = workloadTable(name, `w_recheck_${driver.replace(/-/g, '_')}`);
        await recreateTable(started, table, driver);
        const opened = await openPlainConnection(driver, started.connection, strategy.connectionOptions, started.description.id);
        try {
          for (const count of [100, 40]) {
            await executeSql(driver, opened.handle, `DELETE FROM ${table.quoted}`);
            await runStrategy(strategy, opened.handle, strategy.prepare(makeRows(count), table, strategy.plan(count, capabilities, { backend: name })));
            expect(await verifyRows(started, table, count, { cellDriver: driver })).toBe(count);
          }
        } finally {
          await opened.close();
          await dropTable(started, table, driver);
        }
      },
      CASE_TIMEOUT_MS,
    );
  });

  describe('read path', () => {
    it(
      `returns ${READ_LIMIT} rows and refuses ${READ_LIMIT + 1}, returning none`,
      async () => {
        const started = backend();
        const strategy = strategiesFor(b.backend).find((s) => s.name.endsWith('raw-sql'));
        if (!strategy) throw new Error(`no raw-sql strategy for ${b.backend}`);
        const table = workloadTable(started.description.name, 'w_read_path');
        await recreateTable(started, table);
        try {
          await insertCounted(started, strategy, makeRows(READ_LIMIT), table);
          expect(await readRows(started, table)).toEqual(makeRows(READ_LIMIT));

          await recreateTable(started, table);
          await insertCounted(started, strategy, makeRows(READ_LIMIT + 1), table);
          expect(await verifyRows(started, table, READ_LIMIT + 1)).toBe(READ_LIMIT + 1);
          let returned: Row[] | undefined;
          const error = await readRows(started, table).then(
            (rows) => {
              returned = rows;
              return undefined;
            },
            (err: unknown) => err,
          );
          expect(returned).toBeUndefined();
          expect(error).toBeInstanceOf(SqltallyError);
          expect((error as SqltallyError).phase).toBe('workload');
          expect((error as Error).message).toMatch(/holds more than 5000 rows/);
        } finally {
          await dropTable(started, table);
        }
      },
      CASE_TIMEOUT_MS,
    );
  });

  describe('bad input is refused before anything is sent', () => {
    it(
      'a bad row, an over-limit budget and a foreign strategy leave the table empty',
      async () => {
        const started = backend();
        const { name, capabilities } = started.description;
        const table = workloadTable(name, 'w_bad_input');
        await recreateTable(started, table);
        try {
          const strategy = strategiesFor(name)[0] as AnyInsertStrategy;
          const rows: unknown[] = makeRows(10);
          rows[9] = [9, 1, 'x'.repeat(40), 1.5, 1n, 'y'];
          expect(() => strategy.prepare(rows as Row[], table, strategy.plan(10, capabilities, { backend: name }))).toThrow(
            /row 9 column c3 is longer than VARCHAR\(32\)/,
          );
          expect(() => strategy.plan(10, capabilities, { backend: name, bindBudget: capabilities.maxBindValues + 1 })).toThrow(/above this backend's limit/);
          const foreign = name === 'postgres' ? 'mysql2.execute-multirow' : 'pg.unnest';
          expect(() => findStrategy(foreign, name)).toThrow(/does not run on/);
          expect(await verifyRows(started, table, 0)).toBe(0);
        } finally {
          await dropTable(started, table);
        }
      },
      CASE_TIMEOUT_MS,
    );
  });
});
