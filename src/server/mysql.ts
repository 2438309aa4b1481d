import { MYSQL_FAMILY_WORK, SQL_PROCESSLIST_INFORMATION_SCHEMA, SQL_PROCESSLIST_PERFORMANCE_SCHEMA, type MysqlFamilyTraits } from './mysql-family';

/** Status counters every MySQL-protocol window watches (used only where `SHOW GLOBAL STATUS` has them). */
export const MYSQL_FAMILY_TRACKED_STATUS = [
  'Questions',
  // Not 'Queries': on MySQL 9 it counts COM_PING, and the wire proxy pings every window connection before a
  // reading, so its cost would depend on how many connections are open.
  'Com_insert',
  'Com_insert_select',
  'Com_replace',
  'Com_update',
  'Com_delete',
  'Com_select',
  'Com_set_option',
  'Com_stmt_prepare',
  // A statement the server prepares again by itself (a bound parameter's type differs from the one it derived at
  // prepare, a table changed) adds to Com_stmt_prepare too, though no client sent a prepare.
  'Com_stmt_reprepare',
  'Com_stmt_execute',
  'Com_stmt_close',
  'Com_stmt_reset',
  'Com_stmt_send_long_data',
  'Com_stmt_fetch',
  'Com_stmt_bulk_execute',
  'Com_begin',
  'Com_commit',
  'Com_rollback',
  // LOAD DATA (the load-data strategies): one per statement, whatever its rows.
  'Com_load',
  // A short-lived client that connects and leaves between two process-list readings still moves this.
  'Connections',
] as const;

/**
 * MySQL 8+: `Innodb_rows_inserted` exists and is preferred over `Handler_write`, which on MySQL also counts the
 * internal temporary-table writes of the probe's own `SHOW GLOBAL STATUS`. `event_scheduler` is a daemon thread
 * in the process list (command `Daemon`), not a client.
 */
export const MYSQL_TRAITS: MysqlFamilyTraits = {
  trackedStatus: MYSQL_FAMILY_TRACKED_STATUS,
  perThreadStatus: ['Questions', 'Handler_write'],
  bulkExecuteEvent: null,
  // MySQL's information_schema view inserts one InnoDB temp row per connection per read.
  processlistSql: [SQL_PROCESSLIST_PERFORMANCE_SCHEMA, SQL_PROCESSLIST_INFORMATION_SCHEMA],
  backgroundUsers: ['event_scheduler', 'system user'],
  work: MYSQL_FAMILY_WORK,
  backgroundCommands: ['Daemon', 'Binlog Dump', 'Binlog Dump GTID'],
};
