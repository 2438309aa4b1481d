// The driver layer's public surface: wrap a driver object, or open a counted connection, and collect events.
export { wrapMysql2 } from './mysql2';
export type { Mysql2Countable, Mysql2CallbackConnection, Mysql2CallbackPool, Mysql2PromiseConnection, Mysql2PromisePool } from './mysql2';
export { wrapMariadb } from './mariadb';
export type { MariadbConnection, MariadbPool } from './mariadb';
export { wrapPg } from './pg';
export type { PgClient, PgPool } from './pg';
export { wrapBetterSqlite3 } from './better-sqlite3';
export type { BetterSqlite3Database, BetterSqlite3Statement } from './better-sqlite3';
export { WRAPPED } from './counted';
export type { WrapOptions, WrapperMark } from './counted';
export { openCountedConnection, openRawConnection } from './open';
export type { DriverHandle, OpenOptions, OpenedConnection } from './open';
export { DRIVERS, driverOf, driversFor } from './registry';
export type { DriverModule } from './module';
export { DRIVER_NAMES, DriverNameSchema } from '../shared/driver-names';
export type { DriverName } from '../shared/driver-names';
