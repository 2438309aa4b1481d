import { MYSQL_FAMILY_WORK, SQL_PROCESSLIST_INFORMATION_SCHEMA, type MysqlFamilyTraits } from './mysql-family';
import { MYSQL_FAMILY_TRACKED_STATUS } from './mysql';

/**
 * MariaDB: none of the `Innodb_rows_*` counters exist, so rows come from `Handler_write` (internal temporary tables
 * go to `Handler_tmp_write` there, so the probe's own reads do not move it). 10.11 has no `Com_stmt_bulk_execute`:
 * a `COM_STMT_BULK_EXECUTE` moves `Com_stmt_execute` once per bulk command, and only `performance_schema` tells
 * it apart (`statement/com/Bulk_execute`). `performance_schema` is OFF unless the server was started with it.
 */
export const MARIADB_TRAITS: MysqlFamilyTraits = {
  trackedStatus: MYSQL_FAMILY_TRACKED_STATUS,
  perThreadStatus: ['Questions', 'Handler_write'],
  bulkExecuteEvent: 'statement/com/Bulk_execute',
  // MariaDB's view fills a temporary table too, but that moves Handler_tmp_write, which is not watched.
  processlistSql: [SQL_PROCESSLIST_INFORMATION_SCHEMA],
  backgroundUsers: ['event_scheduler', 'system user'],
  work: MYSQL_FAMILY_WORK,
  backgroundCommands: ['Daemon', 'Slave_IO', 'Slave_SQL', 'Slave_worker', 'Binlog Dump'],
};
