export { startWireProxy } from './proxy';
export type { WireProxy, WireProxyOptions, WireStream } from './proxy';
export { diffWireSnapshots, emptyWireCounts, sumWireCounts, WireParseError } from './tally';
export type { WireProtocol, WireSession } from './tally';
export { MysqlPacketParser, MysqlSession, clearSslInGreeting, mysqlCommandName, MYSQL_MAX_PACKET_PAYLOAD } from './mysql-protocol';
export type { MysqlFrame, MysqlSessionOptions } from './mysql-protocol';
export { PgMessageParser, PgSession, PG_MAX_MESSAGE_LENGTH } from './pg-protocol';
export type { PgFrame, PgFrameShape, PgSessionOptions } from './pg-protocol';
export * from './types';
