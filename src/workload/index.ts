/**
 * The insert-many workload: deterministic rows, the table, the strategies that insert them, and the read and verify
 * paths. The flow is `findStrategy` -> `plan` -> `prepare` (untimed) -> `runStrategy` (timed) -> `verifyRows`.
 */
export { assertRows, checksumOf, COLUMN_COUNT, COLUMN_NAMES, DEFAULT_SEED, makeRows, rowAt, TEXT_MAX_CHARS } from './rows';
export type { Row, RowOptions, RowsChecksum } from './rows';
export { DEFAULT_BIND_BUDGET, planChunks, TEXT_ROWS_PER_STATEMENT } from './chunking';
export type { ChunkPlan, ChunkRequest } from './chunking';
export { assertTableName, createTableSql, DEFAULT_TABLE_NAME, dropTableSql, TABLE_NAME_PATTERN, workloadTable } from './table';
export type { Dialect, WorkloadTable } from './table';
export { findStrategy, rawSqlTwin, runStrategy, STRATEGIES, STRATEGY_NAMES, strategiesFor } from './strategies';
export type * from './strategies/types';
export type { StrategyName } from './strategies';
export { dropTable, executeSql, openPlainConnection, readDriverFor, recreateTable, rowSource } from './connect';
export type { PlainConnection, RowSource } from './connect';
export { READ_LIMIT, readRows, readRowsFrom } from './read';
export type { ReadOptions } from './read';
export { verifyRows, verifyRowsWith } from './verify';
export type { VerifyOptions } from './verify';
