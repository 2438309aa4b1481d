/**
 * What a counted window makes per row, counted rather than timed (the same on a loaded machine): the async resources
 * created while a per-row strategy runs in a window, by type, and how many of them the deferred-work tracking took a
 * stack for (`Error.captureStackTrace`, most of what following one costs), with the wire proxy through openStream and
 * with no wire proxy.
 *
 *   npm run build && npx tsx bench/window-census.ts [--backend postgres|mariadb] [--rows 1000]
 */
import { createHook } from 'node:async_hooks';
import { parseArgs } from 'node:util';
import { CaptureSession, createTableSql, dropTableSql, findStrategy, makeRows, runSql, runStrategy, startBackend, workloadTable } from './shipped';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { backend: { type: 'string', default: 'postgres' }, rows: { type: 'string', default: '1000' } } });
  const backend = await startBackend(values.backend!);
  const name = backend.description.name === 'postgres' ? 'pg.per-row-tx' : 'mysql2.execute-per-row-tx';
  const strategy = findStrategy(name, backend.description.name);
  const table = workloadTable(backend.description.name);
  const rows = Number(values.rows);
  const input = strategy.prepare(makeRows(rows), table, strategy.plan(rows, backend.description.capabilities, { backend: backend.description.name }));
  const run = (h: unknown) => runStrategy(strategy, h as never, input);
  const perRow = (m: Map<string, number>) => Object.fromEntries([...m].map(([k, v]) => [k, Number((v / rows).toFixed(3))]));
  try {
    for (const wire of [true, false]) {
      const session = await CaptureSession.open({ backend, driver: strategy.driver, wire });
      try {
        await session.prepare(
          async (h: unknown) => {
            await runSql(strategy.driver, h as never, dropTableSql(table));
            await runSql(strategy.driver, h as never, createTableSql(table));
          },
          { hot: true },
        );
        // A first window prepares the hot connection's statements.
        await session.measure(run, { hot: true });
        await session.prepare(async (h: unknown) => void (await runSql(strategy.driver, h as never, `DELETE FROM ${table.quoted}`)), { hot: true });
        let on = false;
        let lastType = '';
        const made = new Map<string, number>();
        const traced = new Map<string, number>();
        // Registered before the tracker's hook is enabled, so its init runs first and names the resource the
        // tracker then takes a stack for.
        const hook = createHook({
          init(_id, type) {
            lastType = type;
            if (on) made.set(type, (made.get(type) ?? 0) + 1);
          },
        }).enable();
        const original = Error.captureStackTrace;
        Error.captureStackTrace = function (this: unknown, target: object, fn?: Parameters<typeof Error.captureStackTrace>[1]) {
          if (on) traced.set(lastType, (traced.get(lastType) ?? 0) + 1);
          return original.call(Error, target, fn);
        } as typeof Error.captureStackTrace;
        try {
          await session.measure(
            async (h: unknown) => {
              on = true;
              try {
                await run(h);
              } finally {
                on = false;
              }
            },
            { hot: true },
          );
        } finally {
          Error.captureStackTrace = original;
          hook.disable();
        }
        console.log(`${name}, ${wire ? 'wire proxy through openStream' : 'no wire proxy'}: per row`);
        console.log(`  async resources created (any context): ${JSON.stringify(perRow(made))}`);
        console.log(`  stacks captured (by the resource's type): ${JSON.stringify(perRow(traced))}`);
      } finally {
        await session.close();
      }
    }
  } finally {
    await backend.stop();
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
