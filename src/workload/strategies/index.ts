import { SqltallyError } from '../../shared/errors';
import { BACKEND_NAMES } from '../../backends/types';
import type { BackendName } from '../../backends/types';
import type { DriverName } from '../../shared/driver-names';
import { parseBackendId } from '../../backends/registry';
import { readDriverFor } from '../connect';
import { SQLITE_MULTIROW, SQLITE_PER_ROW_TX, SQLITE_RAW_SQL } from './better-sqlite3';
import { MARIADB_BATCH, MARIADB_BATCH_NO_BULK, MARIADB_LOAD_DATA, MARIADB_QUERY_MULTIROW, MARIADB_RAW_SQL } from './mariadb';
import { MYSQL2_EXECUTE_MULTIROW, MYSQL2_EXECUTE_PER_ROW_TX, MYSQL2_LOAD_DATA, MYSQL2_QUERY_MULTIROW, MYSQL2_RAW_SQL } from './mysql2';
import { PG_COPY, PG_PER_ROW_TX, PG_QUERY_MULTIROW, PG_RAW_SQL, PG_UNNEST } from './pg';
import { POSTGRES_JS_COPY, POSTGRES_JS_MULTIROW, POSTGRES_JS_PIPELINED_TX, POSTGRES_JS_UNNEST } from './postgres-js';
import { SQLITE3_MULTIROW, SQLITE3_PER_ROW_TX, SQLITE3_RAW_SQL } from './sqlite3';
import type { AnyInsertStrategy, DriverHandle, InsertStrategy, PreparedInput } from './types';

export type * from './types';
export { defineStrategy, summarizeExpected } from './shared';

/** Every insert strategy by its stable name; a unit test checks each key equals the strategy's own `name`. */
export const STRATEGIES = {
  'mysql2.query-multirow': MYSQL2_QUERY_MULTIROW,
  'mysql2.execute-multirow': MYSQL2_EXECUTE_MULTIROW,
  'mysql2.execute-per-row-tx': MYSQL2_EXECUTE_PER_ROW_TX,
  'mysql2.raw-sql': MYSQL2_RAW_SQL,
  'mysql2.load-data': MYSQL2_LOAD_DATA,
  'mariadb.batch': MARIADB_BATCH,
  'mariadb.batch-nobulk': MARIADB_BATCH_NO_BULK,
  'mariadb.query-multirow': MARIADB_QUERY_MULTIROW,
  'mariadb.raw-sql': MARIADB_RAW_SQL,
  'mariadb.load-data': MARIADB_LOAD_DATA,
  'pg.query-multirow': PG_QUERY_MULTIROW,
  'pg.unnest': PG_UNNEST,
  'pg.per-row-tx': PG_PER_ROW_TX,
  'pg.raw-sql': PG_RAW_SQL,
  'pg.copy': PG_COPY,
  'postgres-js.multirow': POSTGRES_JS_MULTIROW,
  'postgres-js.unnest': POSTGRES_JS_UNNEST,
  'postgres-js.pipelined-tx': POSTGRES_JS_PIPELINED_TX,
  'postgres-js.copy': POSTGRES_JS_COPY,
  'better-sqlite3.per-row-tx': SQLITE_PER_ROW_TX,
  'better-sqlite3.multirow': SQLITE_MULTIROW,
  'better-sqlite3.raw-sql': SQLITE_RAW_SQL,
  'sqlite3.per-row-tx': SQLITE3_PER_ROW_TX,
  'sqlite3.multirow': SQLITE3_MULTIROW,
  'sqlite3.raw-sql': SQLITE3_RAW_SQL,
} as const satisfies Record<string, AnyInsertStrategy>;

export type StrategyName = keyof typeof STRATEGIES;
export const STRATEGY_NAMES = Object.keys(STRATEGIES) as StrategyName[];

/** The raw-SQL twin on a backend: the raw-SQL strategy of its read driver (the unit tests check every backend has one). */
export function rawSqlTwin(backend: BackendName): AnyInsertStrategy {
  return findStrategy(`${readDriverFor(backend)}.raw-sql`, backend);
}

function isStrategyName(name: string): name is StrategyName {
  return Object.hasOwn(STRATEGIES, name);
}

/** Strategies that run on `backend` (`mariadb`, `postgres@15`, ...), in registry order. */
export function strategiesFor(backend: BackendName | string): AnyInsertStrategy[] {
  const name = parseBackendId(backend).name;
  return Object.values(STRATEGIES).filter((s: AnyInsertStrategy) => s.backends.includes(name));
}

/**
 * The strategy called `name`, checked against `backend`. An unknown name or one that does not run there is a
 * config SqltallyError listing what would work, raised before any connection is opened.
 */
export function findStrategy(name: string, backend: BackendName | string): AnyInsertStrategy {
  const backendName = parseBackendId(backend).name;
  if (!isStrategyName(name)) {
    throw new SqltallyError(`unknown strategy "${name}"; known: ${STRATEGY_NAMES.join(', ')}`, {
      backend: String(backend),
      phase: 'config',
    });
  }
  const strategy: AnyInsertStrategy = STRATEGIES[name];
  if (!strategy.backends.includes(backendName)) {
    throw new SqltallyError(
      `strategy "${name}" does not run on ${backendName} (it is for ${strategy.backends.join(', ')}); ` +
        `strategies for ${backendName}: ${strategiesFor(backendName)
          .map((s) => s.name)
          .join(', ')}`,
      { backend: String(backend), phase: 'config' },
    );
  }
  return strategy;
}

/** Runs any strategy with a handle of its driver; the pairing is the caller's promise (the driver names match). */
export function runStrategy<D extends DriverName>(
  strategy: InsertStrategy<D> | AnyInsertStrategy,
  handle: DriverHandle<D>,
  input: PreparedInput,
): Promise<void> {
  if (input.strategy !== strategy.name) {
    throw new SqltallyError(`input was prepared by ${input.strategy}, not ${strategy.name}`, {
      backend: input.table.backend,
      phase: 'workload',
    });
  }
  return (strategy as InsertStrategy<D>).run(handle, input);
}

/** Backends with no strategy would make a matrix hole; the registry covers every one of {@link BACKEND_NAMES}. */
export const BACKENDS_WITH_STRATEGIES: readonly BackendName[] = BACKEND_NAMES.filter((b) => strategiesFor(b).length > 0);
