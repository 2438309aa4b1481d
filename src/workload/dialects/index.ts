import type { ServerDialect } from '../../sql/tokenizer';
import { MYSQL_DIALECT } from './mysql';
import { POSTGRES_DIALECT } from './postgres';
import { SQLITE_DIALECT } from './sqlite';
import type { Dialect } from './types';

export type { Dialect } from './types';

/** The workload's SQL for each server dialect; keyed by every dialect a probe source can declare. */
const DIALECTS = {
  mysql: MYSQL_DIALECT,
  postgres: POSTGRES_DIALECT,
  sqlite: SQLITE_DIALECT,
} as const satisfies Record<ServerDialect, Dialect>;

/** The workload's SQL for a server of `dialect` (which server speaks which: `dialectOf` in src/server/). */
export function workloadDialect(dialect: ServerDialect): Dialect {
  return DIALECTS[dialect];
}
