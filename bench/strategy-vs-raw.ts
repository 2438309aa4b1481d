/**
 * Each insert strategy against the hand-written raw-SQL twin on the same backend, side by side in one process.
 *
 *   npx tsx bench/strategy-vs-raw.ts [--backends sqlite,mariadb,postgres] [--rows 5000] [--pairs 7] [--json]
 *
 * Both sides run unwrapped on a fresh connection and a fresh table, in pairs whose order alternates; the raw
 * twin's SQL string is built before the clock starts, as the strategy's is. The figure is the median of the
 * per-pair ratios strategy/raw: above 1 the strategy is slower than one literal multi-row INSERT.
 */
import { parseArgs } from 'node:util';
import { startBackend } from '../src/backends/registry';
import type { StartedBackend } from '../src/backends/types';
import { openRawConnection, runSql } from '../src/driver/open';
import { formatMs } from '../src/report/timings';
import { makeRows } from '../src/workload/rows';
import { rawSqlTwin, runStrategy, strategiesFor, type AnyInsertStrategy } from '../src/workload/strategies';
import { createTableSql, dropTableSql, workloadTable } from '../src/workload/table';

const DEFAULT_BACKENDS = ['sqlite', 'mariadb', 'postgres'];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One timed insert of `rows` rows on a fresh unwrapped connection and table; set-up is outside the clock. */
async function timeOnce(backend: StartedBackend, strategy: AnyInsertStrategy, rows: number): Promise<number> {
  const { name, capabilities, id } = backend.description;
  const table = workloadTable(name);
  const input = strategy.prepare(makeRows(rows), table, strategy.plan(rows, capabilities, { backend: name }));
  const opened = await openRawConnection(strategy.driver, backend.connection, {
    driverOptions: strategy.connectionOptions as Record<string, unknown> | undefined,
    backend: id,
  });
  try {
    await runSql(strategy.driver, opened.handle as never, dropTableSql(table));
    await runSql(strategy.driver, opened.handle as never, createTableSql(table));
    const start = process.hrtime.bigint();
    await runStrategy(strategy, opened.handle as never, input);
    return Number(process.hrtime.bigint() - start);
  } finally {
    await opened.close();
  }
}

interface Row {
  backend: string;
  strategy: string;
  rawTwin: string;
  rows: number;
  pairs: number;
  medianStrategyNs: number;
  medianRawNs: number;
  ratio: number;
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      backends: { type: 'string' },
      rows: { type: 'string', default: '5000' },
      pairs: { type: 'string', default: '7' },
      json: { type: 'boolean', default: false },
    },
  });
  const backends = values.backends ? values.backends.split(',') : DEFAULT_BACKENDS;
  const rows = Number(values.rows);
  const pairs = Number(values.pairs);
  const results: Row[] = [];
  for (const id of backends) {
    let backend: StartedBackend;
    try {
      backend = await startBackend(id);
    } catch (err) {
      console.error(`skip ${id}: ${(err as Error).message.split('\n')[0]}`);
      continue;
    }
    try {
      const name = backend.description.name;
      const raw = rawSqlTwin(name);
      for (const strategy of strategiesFor(name).filter((s) => s.name !== raw.name)) {
        const ratios: number[] = [];
        const s: number[] = [];
        const r: number[] = [];
        await timeOnce(backend, strategy, rows); // warm both paths once: first connection, JIT, server caches
        await timeOnce(backend, raw, rows);
        for (let i = 0; i < pairs; i++) {
          const first = i % 2 === 0;
          const a = first ? await timeOnce(backend, strategy, rows) : 0;
          const b = await timeOnce(backend, raw, rows);
          const c = first ? a : await timeOnce(backend, strategy, rows);
          s.push(c);
          r.push(b);
          ratios.push(c / b);
        }
        const row: Row = {
          backend: `${backend.description.id} ${backend.description.serverVersion}`,
          strategy: strategy.name,
          rawTwin: raw.name,
          rows,
          pairs,
          medianStrategyNs: median(s),
          medianRawNs: median(r),
          ratio: median(ratios),
        };
        results.push(row);
        if (!values.json) {
          console.log(
            `${row.backend.padEnd(44)} ${row.strategy.padEnd(28)} ${formatMs(row.medianStrategyNs).padStart(14)} ms vs raw ${formatMs(row.medianRawNs).padStart(14)} ms  ratio ${row.ratio.toFixed(3)} (median of ${pairs} pairs)`,
          );
        }
      }
    } finally {
      await backend.stop();
    }
  }
  if (values.json) console.log(JSON.stringify(results, null, 2));
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
