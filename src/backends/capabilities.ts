import type { Capabilities, Flavour } from './types';

/**
 * What each kind of server can tell the probes and the verdict, before the started server refines it (an
 * external MariaDB may run with performance_schema off). Keyed by flavour, not by the name it was addressed by.
 */
export const CAPABILITIES = {
  sqlite: {
    wireProtocol: null,
    perThreadStatements: false,
    statementStats: false,
    rowCounter: 'total_changes',
    bulkExecute: false,
    // SQLITE_MAX_VARIABLE_NUMBER defaults to 32766 since 3.32.
    maxBindValues: 32_766,
    privateServer: true,
  },
  mariadb: {
    wireProtocol: 'mysql',
    perThreadStatements: true,
    statementStats: false,
    // MariaDB has no Innodb_rows_* counters.
    rowCounter: 'Handler_write',
    bulkExecute: true,
    maxBindValues: 65_535,
    privateServer: true,
  },
  mysql: {
    wireProtocol: 'mysql',
    perThreadStatements: true,
    statementStats: false,
    rowCounter: 'Innodb_rows_inserted',
    bulkExecute: false,
    maxBindValues: 65_535,
    privateServer: true,
  },
  postgres: {
    wireProtocol: 'postgres',
    perThreadStatements: false,
    statementStats: true,
    rowCounter: 'n_tup_ins',
    bulkExecute: false,
    // The Bind message carries the parameter count in 16 bits.
    maxBindValues: 65_535,
    privateServer: true,
  },
} as const satisfies Record<Flavour, Capabilities>;
