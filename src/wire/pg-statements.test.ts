import { PgSession } from './pg-protocol';
import { countsAtEverySplit, drive, pg, pgMessage } from './frames.fixture';
import type { Turn } from './frames.fixture';

const session = (): PgSession => new PgSession({ tls: 'passthrough' });
const client = (...parts: Buffer[]): Turn => ({ from: 'client', bytes: Buffer.concat(parts) });
const server = (...parts: Buffer[]): Turn => ({ from: 'server', bytes: Buffer.concat(parts) });

const startup: Turn[] = [client(pg.startup()), server(pg.authOk(), pg.backendKeyData(7, 1), pg.ready())];

const be16 = (n: number): Buffer => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const be32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const cstr = (s: string): Buffer => Buffer.from(`${s}\0`);
/** Bind of a named statement to the unnamed portal, no parameters. */
const bindNamed = (statement: string): Buffer => pgMessage('B', Buffer.concat([cstr(''), cstr(statement), be16(0), be16(0), be16(0)]));
const executePortal = (): Buffer => pgMessage('E', Buffer.concat([cstr(''), be32(0)]));

/** One pgbench -M prepared transaction's worth of a named BEGIN, INSERT and END, as pgbench sends them. */
function preparedTransaction(): Turn[] {
  return [
    client(bindNamed('P0_1'), executePortal(), pg.sync()),
    server(pg.bindComplete(), pg.commandComplete('BEGIN'), pg.ready('T')),
    client(bindNamed('P0_2'), executePortal(), pg.sync()),
    server(pg.bindComplete(), pg.commandComplete('INSERT 0 1'), pg.ready('T')),
    client(bindNamed('P0_3'), executePortal(), pg.sync()),
    server(pg.bindComplete(), pg.commandComplete('COMMIT'), pg.ready('I')),
  ];
}

describe('PostgreSQL statements on the wire', () => {
  it('a simple Query of two INSERTs is two statements with their rows, at every split', () => {
    const turns: Turn[] = [
      ...startup,
      client(pg.query('INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (3)')),
      server(pg.commandComplete('INSERT 0 1'), pg.commandComplete('INSERT 0 2'), pg.ready()),
    ];
    const { whole } = countsAtEverySplit(session, turns);
    expect(whole.commands).toEqual({ Query: 1 });
    expect(whole.statements).toMatchObject({ completed: 2, completedByClass: { insert: 2 }, failed: 0, rowsInserted: 3, namedRepeats: 0 });
  });

  it('a repeated Query text, one with other digits and one of the same length that differs otherwise are each read right', () => {
    // Same lengths: SELECT 11; / SELECT 42; / SHOW ab12; / SET a = 1; and the quoted SET a='1'; / SET a='2';
    const sent: [string, string][] = [
      ['SELECT 11;', 'SELECT 1'],
      ['SELECT 11;', 'SELECT 1'],
      ['SELECT 42;', 'SELECT 1'],
      ['SHOW ab12;', 'SHOW'],
      ['SET a = 1;', 'SET'],
      ["SET a='1';", 'SET'],
      ["SET a='2';", 'SET'],
      ['DELETE FROM t WHERE a = 12;', 'DELETE 2'],
      ['DELETE FROM t WHERE a = 34;', 'DELETE 3'],
      ['UPDATE t SET b = 1 WHERE a=3;', 'UPDATE 3'],
      ['INSERT INTO t VALUES (1);', 'INSERT 0 1'],
      ['INSERT INTO t VALUES (1);', 'INSERT 0 1'],
      ['INSERT INTO t VALUES (2);', 'INSERT 0 2'],
      ['INSERT INTO t VALUES (3) ON CONFLICT DO NOTHING;', 'INSERT 0 1'],
      ['SELECT 1; SELECT 2;', 'SELECT 1'],
      ['SELECT 3; SELECT 4;', 'SELECT 1'],
    ];
    const turns: Turn[] = [
      ...startup,
      ...sent.flatMap(([sql, tag]): Turn[] => {
        const tags = sql.startsWith('SELECT 1; ') || sql.startsWith('SELECT 3; ') ? [tag, tag] : [tag];
        return [client(pg.query(sql)), server(...tags.map((t) => pg.commandComplete(t)), pg.ready())];
      }),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 30, 200, 400]);
    expect(whole.rowsAffected).toBe(13);
    expect(whole.statements).toEqual(
      expect.objectContaining({
        completed: 18,
        completedByClass: { select: 7, show: 1, set: 3, delete: 2, update: 1, insert: 4 },
        rowsInserted: 4,
        rowsUnsplit: 1,
        rowsDeleted: 5,
        rowsUpdated: 3,
        connectStatements: 7,
        connectTexts: ['SELECT 11', 'SELECT 11', 'SELECT 42', 'SHOW ab12', 'SET a = 1', "SET a='1'", "SET a='2'"],
      }),
    );
    expect(whole.lastRequestText).toBe('SELECT 3; SELECT 4;');
  });

  it('a Query with no text at all after a text too long to keep is not taken for that text', () => {
    const { counts } = drive(session, [
      ...startup,
      client(pg.query('SELECT 1')),
      server(pg.commandComplete('SELECT 1'), pg.ready()),
      client(pg.query('SELECT 1'.padEnd(5000, ' '))),
      server(pg.commandComplete('SELECT 1'), pg.ready()),
      client(pgMessage('Q')),
      server(pg.error(), pg.ready()),
    ]);
    expect(counts.statements).toMatchObject({ completed: 2, completedByClass: { select: 2 }, failed: 1, failedByClass: { other: 1 } });
  });

  it('a repeated Parse text is read once, and one of the same length that differs is read afresh, short or long', () => {
    const long = (sql: string): string => sql.padEnd(100, ' ');
    const texts = [
      'INSERT INTO t VALUES ($1)',
      'INSERT INTO t VALUES ($1)',
      'DELETE FROM t WHERE a= $1',
      long('UPDATE t SET a = $1'),
      long('DELETE FROM t WHERE a = $1'),
    ];
    const turns: Turn[] = [
      ...startup,
      ...texts.flatMap((sql): Turn[] => [
        client(pg.parse('', sql), pg.bind('', '1'), pg.execute(), pg.sync()),
        server(pg.parseComplete(), pg.bindComplete(), pg.commandComplete(`${sql.split(' ')[0]!} ${sql.startsWith('INSERT') ? '0 ' : ''}1`), pg.ready()),
      ]),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 30, 200]);
    expect(whole.statements).toEqual(
      expect.objectContaining({ completed: 5, completedByClass: { insert: 2, delete: 2, update: 1 }, rowsInserted: 2, rowsDeleted: 2, rowsUpdated: 1 }),
    );
    expect(whole.lastRequestText).toBe('DELETE FROM t WHERE a = $1');
  });

  it('a statement of a multi-statement Query that fails ends it: the ones before it completed, the failed one named, the rest not run', () => {
    const { counts } = drive(session, [
      ...startup,
      client(pg.query('INSERT INTO t VALUES (1); UPDATE t SET a = 1; DELETE FROM t')),
      server(pg.commandComplete('INSERT 0 1'), pg.error('no'), pg.ready()),
    ]);
    expect(counts.statements).toMatchObject({ completed: 1, completedByClass: { insert: 1 }, failed: 1, failedByClass: { update: 1 } });
  });

  it('a utility statement run again from a named statement is a named repeat (pg_stat_statements counts its first run only); DML is not', () => {
    const turns: Turn[] = [
      ...startup,
      client(pg.parse('P0_1', 'BEGIN;'), pg.parse('P0_2', 'INSERT INTO h VALUES ($1)'), pg.parse('P0_3', 'END;'), pg.sync()),
      server(pg.parseComplete(), pg.parseComplete(), pg.parseComplete(), pg.ready()),
      ...preparedTransaction(),
      ...preparedTransaction(),
      ...preparedTransaction(),
    ];
    const { whole } = countsAtEverySplit(session, turns, [0, 40, 100, 200, 300]);
    expect(whole.statements).toMatchObject({
      completed: 9,
      // END's text class is commit, as pg_stat_statements' text says; its tag says COMMIT too.
      completedByClass: { begin: 3, insert: 3, commit: 3 },
      namedRepeats: 4,
      namedRepeatsByClass: { begin: 2, commit: 2 },
      rowsInserted: 3,
    });
  });

  it('a named statement parsed again runs its first time again; the unnamed statement is never a repeat', () => {
    const { counts } = drive(session, [
      ...startup,
      client(pg.parse('s', 'COMMIT'), bindNamed('s'), executePortal(), bindNamed('s'), executePortal(), pg.sync()),
      server(pg.parseComplete(), pg.bindComplete(), pg.commandComplete('COMMIT'), pg.bindComplete(), pg.commandComplete('COMMIT'), pg.ready()),
      client(pg.close(), pgMessage('C', Buffer.concat([Buffer.from('S'), cstr('s')])), pg.parse('s', 'COMMIT'), bindNamed('s'), executePortal(), pg.sync()),
      server(pg.closeComplete(), pg.closeComplete(), pg.parseComplete(), pg.bindComplete(), pg.commandComplete('COMMIT'), pg.ready()),
      client(pg.parse('', 'BEGIN'), bindNamed(''), executePortal(), pg.parse('', 'BEGIN'), bindNamed(''), executePortal(), pg.sync()),
      server(
        pg.parseComplete(),
        pg.bindComplete(),
        pg.commandComplete('BEGIN'),
        pg.parseComplete(),
        pg.bindComplete(),
        pg.commandComplete('BEGIN'),
        pg.ready(),
      ),
    ]);
    expect(counts.statements).toMatchObject({ completed: 5, namedRepeats: 1, namedRepeatsByClass: { commit: 1 } });
  });

  it('an error in a pipeline skips the Executes up to the Sync: the next batch is matched to its own answers', () => {
    const { counts } = drive(session, [
      ...startup,
      client(
        pg.parse('', 'INSERT INTO t VALUES (1)'),
        bindNamed(''),
        executePortal(),
        pg.parse('', 'UPDATE t SET a = 2'),
        bindNamed(''),
        executePortal(),
        pg.sync(),
        pg.parse('', 'DELETE FROM t'),
        bindNamed(''),
        executePortal(),
        pg.sync(),
      ),
      server(pg.error('dup'), pg.ready(), pg.parseComplete(), pg.bindComplete(), pg.commandComplete('DELETE 4'), pg.ready()),
    ]);
    expect(counts.statements).toMatchObject({ completed: 1, completedByClass: { delete: 1 }, failed: 1, failedByClass: { insert: 1 }, rowsDeleted: 4 });
  });

  it('COPY ... FROM rows count as inserted; COPY ... TO rows do not; UPDATE and DELETE rows apart', () => {
    const { counts } = drive(session, [
      ...startup,
      client(pg.query('COPY t FROM STDIN')),
      server(pg.copyInResponse()),
      client(pg.copyData('1\n2\n'), pg.copyDone()),
      server(pg.commandComplete('COPY 2'), pg.ready()),
      client(pg.query('COPY t TO STDOUT')),
      server(pgMessage('H', Buffer.concat([Buffer.from([0]), be16(0)])), pg.copyData('1\n'), pgMessage('c'), pg.commandComplete('COPY 2'), pg.ready()),
      client(pg.query('UPDATE t SET a = 1; DELETE FROM t')),
      server(pg.commandComplete('UPDATE 2'), pg.commandComplete('DELETE 2'), pg.ready()),
    ]);
    expect(counts.statements).toMatchObject({ completed: 4, rowsInserted: 2, rowsUpdated: 2, rowsDeleted: 2 });
  });

  it("a connection's set-up statements (SET, SELECT VERSION()) are listed apart, up to its first other statement", () => {
    const { counts } = drive(session, [
      ...startup,
      client(pg.query("SET TIME ZONE 'UTC'")),
      server(pg.commandComplete('SET'), pg.ready()),
      client(pg.query('SELECT version()')),
      server(pg.rowDescription(), pg.dataRow('15'), pg.commandComplete('SELECT 1'), pg.ready()),
      client(pg.query('SELECT a FROM t')),
      server(pg.rowDescription(), pg.commandComplete('SELECT 0'), pg.ready()),
      client(pg.query('SET search_path TO x')),
      server(pg.commandComplete('SET'), pg.ready()),
    ]);
    expect(counts.statements).toMatchObject({ completed: 4, connectStatements: 2, connectTexts: ["SET TIME ZONE 'UTC'", 'SELECT version()'] });
  });

  it('a Query text longer than the proxy keeps is counted from its answers, its classes from the tags', () => {
    const long = `INSERT INTO t VALUES ${Array.from({ length: 200_000 }, (_, i) => `(${i})`).join(', ')}`;
    const { counts } = drive(session, [...startup, client(pg.query(long)), server(pg.commandComplete('INSERT 0 200000'), pg.ready())], (t) => {
      const half = Math.floor(t.bytes.length / 2);
      return [t.bytes.subarray(0, half), t.bytes.subarray(half)];
    });
    expect(counts.statements).toMatchObject({ completed: 1, completedByClass: { insert: 1 }, rowsInserted: 200_000, textsUnread: 1 });
  });
});
