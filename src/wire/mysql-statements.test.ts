import { MysqlSession } from './mysql-protocol';
import {
  CAP,
  SERVER_CAPS,
  columnCount,
  columnDefinition,
  command,
  countsAtEverySplit,
  drive,
  eof,
  err,
  executeCommand,
  greeting,
  handshakeResponse,
  ok,
  prepareOk,
  textRow,
} from './frames.fixture';
import type { Turn } from './frames.fixture';

const CLIENT_CAPS = CAP.PROTOCOL_41 | CAP.SECURE_CONNECTION | CAP.PLUGIN_AUTH | CAP.TRANSACTIONS | CAP.MULTI_RESULTS | CAP.MULTI_STATEMENTS;
const MORE_RESULTS = 0x0008 | 0x0002;
const session = (): MysqlSession => new MysqlSession({ tls: 'passthrough' });
const client = (...parts: Buffer[]): Turn => ({ from: 'client', bytes: Buffer.concat(parts) });
const server = (...parts: Buffer[]): Turn => ({ from: 'server', bytes: Buffer.concat(parts) });
const handshake: Turn[] = [server(greeting(5, SERVER_CAPS & ~CAP.MYSQL)), client(handshakeResponse(CLIENT_CAPS)), server(ok(2))];

describe('MySQL statements on the wire', () => {
  it("the mariadb CLI's connect query is set apart; INSERTs count with their OK packets' rows, at every split", () => {
    const turns: Turn[] = [
      ...handshake,
      client(command(0x03, 'select @@version_comment limit 1')),
      server(columnCount(1, 1), columnDefinition(2, '@@version_comment'), eof(3), textRow(4, 'Debian'), eof(5)),
      client(command(0x03, 'INSERT INTO t VALUES (1),(2)')),
      server(ok(1, 2)),
      client(command(0x03, 'UPDATE t SET a = 3')),
      server(ok(1, 2)),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 50, 120, 180]);
    expect(whole.statements).toMatchObject({
      completed: 3,
      completedByClass: { select: 1, insert: 1, update: 1 },
      rowsInserted: 2,
      rowsUpdated: 2,
      connectStatements: 1,
      connectTexts: ['select @@version_comment limit 1'],
    });
  });

  it("Django's connect-time autocommit switches are set-up; switching autocommit off again opens a transaction: work", () => {
    const turns: Turn[] = [
      ...handshake,
      ...['SET NAMES utf8mb3', 'SET autocommit=0', 'SET autocommit=1', 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED', 'SET autocommit=0'].flatMap(
        (sql) => [client(command(0x03, sql)), server(ok(1, 0))],
      ),
      client(command(0x03, 'INSERT INTO t VALUES (1),(2)')),
      server(ok(1, 2)),
      client(command(0x03, 'COMMIT')),
      server(ok(1, 0)),
      client(command(0x03, 'SET autocommit=1')),
      server(ok(1, 0)),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 50, 120]);
    expect(whole.statements).toMatchObject({
      completed: 8,
      connectStatements: 4,
      connectTexts: ['SET NAMES utf8mb3', 'SET autocommit=0', 'SET autocommit=1', 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED'],
    });
  });

  it("MySQLdb's one connect-time SET autocommit=0 stays set-up", () => {
    const turns: Turn[] = [
      ...handshake,
      client(command(0x03, 'SET autocommit=0')),
      server(ok(1, 0)),
      client(command(0x03, 'INSERT INTO t VALUES (1)')),
      server(ok(1, 1)),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 40]);
    expect(whole.statements).toMatchObject({ completed: 2, connectStatements: 1, connectTexts: ['SET autocommit=0'] });
  });

  it('with query attributes agreed (MySQL 8.0.23+ and mysql2), the text after the two counts is classified; with attribute values it is not guessed', () => {
    const QUERY_ATTRIBUTES = 0x8000000;
    const turns: Turn[] = [
      server(greeting(5, SERVER_CAPS | QUERY_ATTRIBUTES)),
      client(handshakeResponse(CLIENT_CAPS | QUERY_ATTRIBUTES)),
      server(ok(2)),
      client(command(0x03, Buffer.concat([Buffer.from([0, 1]), Buffer.from('INSERT INTO t VALUES (1),(2),(3)')]))),
      server(ok(1, 3)),
      client(command(0x03, Buffer.concat([Buffer.from([1, 1, 0, 1, 0xfe, 0x00, 1, 0x61, 1, 0x62]), Buffer.from('INSERT INTO t VALUES (4)')]))),
      server(ok(1, 1)),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 40, 90]);
    expect(whole.statements).toMatchObject({ completed: 2, completedByClass: { insert: 1, other: 1 }, rowsInserted: 3 });
  });

  it("a COM_QUERY of several statements: one per result; an ERR stops the rest; a CALL's extra results are its own", () => {
    const { counts } = drive(session, [
      ...handshake,
      client(command(0x03, 'INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (3); DELETE FROM t WHERE a = 1')),
      server(ok(1, 1, MORE_RESULTS), ok(2, 2, MORE_RESULTS), ok(3, 1)),
      client(command(0x03, 'INSERT INTO t VALUES (4); INSERT INTO nope VALUES (5); INSERT INTO t VALUES (6)')),
      server(ok(1, 1, MORE_RESULTS), err(2)),
      client(command(0x03, 'CALL p()')),
      server(columnCount(1, 1), columnDefinition(2), eof(3), textRow(4, '1'), eof(5, MORE_RESULTS), ok(6, 0)),
    ]);
    expect(counts.statements).toMatchObject({
      completed: 5,
      completedByClass: { insert: 3, delete: 1, other: 1 },
      failed: 1,
      failedByClass: { insert: 1 },
      rowsInserted: 4,
      rowsDeleted: 1,
    });
  });

  it("MariaDB's INSERT ... RETURNING answers with a result set and no OK: its rows are the rows inserted", () => {
    const { counts } = drive(session, [
      ...handshake,
      client(command(0x03, 'INSERT INTO t (a) VALUES (1), (2), (3) RETURNING id')),
      server(columnCount(1, 1), columnDefinition(2, 'id'), eof(3), textRow(4, '1'), textRow(5, '2'), textRow(6, '3'), eof(7)),
    ]);
    expect(counts.rowsAffected).toBe(3);
    expect(counts.statements).toMatchObject({ completed: 1, completedByClass: { insert: 1 }, rowsInserted: 3 });
  });

  it('prepared executes take their class from the prepared text, by statement id and by the pipelined id 0xFFFFFFFF', () => {
    const { counts } = drive(session, [
      ...handshake,
      client(command(0x16, 'INSERT INTO t VALUES (?)'), executeCommand(0xffffffff)),
      server(prepareOk(1, 9, 0, 1), columnDefinition(2, '?'), eof(3), ok(1, 1)),
      client(executeCommand(9)),
      server(ok(1, 1)),
      client(command(0x19, Buffer.from([9, 0, 0, 0])), command(0x16, 'DELETE FROM t')),
      server(prepareOk(1, 10, 0, 0)),
      client(executeCommand(10)),
      server(ok(1, 2)),
    ]);
    expect(counts.statements).toMatchObject({ completed: 3, completedByClass: { insert: 2, delete: 1 }, rowsInserted: 2, rowsDeleted: 2 });
  });

  it('a repeated text counts each time, and a text of the same length that differs in one byte is classified afresh', () => {
    // Same lengths: SET autocommit=1 / =0, a DELETE / a SELECT, and two 100-byte texts (past the byte-by-byte compare).
    const long = (sql: string): string => sql.padEnd(100, ' ');
    const sent = ['SELECT 1', 'SELECT 1', 'SET autocommit=1', 'SET autocommit=1', 'SET autocommit=0', 'DELETE FROM t WHERE a=1', 'SELECT a FROM t WHERE 1'];
    const turns: Turn[] = [
      ...handshake,
      ...sent.flatMap((sql) => [client(command(0x03, sql)), server(ok(1, sql.startsWith('DELETE') ? 1 : 0))]),
      client(command(0x03, long('UPDATE t SET a = 2'))),
      server(ok(1, 2)),
      client(command(0x03, long('DELETE FROM t WHERE'))),
      server(ok(1, 3)),
      client(command(0x03, long('DELETE FROM t WHERE'))),
      server(ok(1, 4)),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 60, 200]);
    expect(whole.statements).toEqual(
      expect.objectContaining({
        completed: 10,
        completedByClass: { select: 3, set: 3, delete: 3, update: 1 },
        rowsDeleted: 8,
        rowsUpdated: 2,
        connectStatements: 4,
        connectTexts: ['SELECT 1', 'SELECT 1', 'SET autocommit=1', 'SET autocommit=1'],
      }),
    );
    expect(whole.lastRequestText).toBe('DELETE FROM t WHERE');
  });

  it("an upsert's affected rows are not rows inserted", () => {
    const { counts } = drive(session, [...handshake, client(command(0x03, 'INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = 2')), server(ok(1, 2))]);
    expect(counts.statements).toMatchObject({ completed: 1, rowsInserted: 0, rowsUnsplit: 1 });
  });
});
