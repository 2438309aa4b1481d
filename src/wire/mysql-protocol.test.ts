import { MysqlPacketParser, MysqlSession, clearSslInGreeting, mysqlCommandName } from './mysql-protocol';
import type { MysqlFrame } from './mysql-protocol';
import {
  CAP,
  MARIADB_BULK,
  MARIADB_CACHE_METADATA,
  SERVER_CAPS,
  binaryRow,
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
  mysqlPacket,
  ok,
  prepareOk,
  splitInvariant,
  sslRequest,
  textRow,
} from './frames.fixture';
import type { Turn } from './frames.fixture';

const CLIENT_CAPS =
  CAP.PROTOCOL_41 | CAP.SECURE_CONNECTION | CAP.PLUGIN_AUTH | CAP.TRANSACTIONS | CAP.MULTI_RESULTS | CAP.PS_MULTI_RESULTS | CAP.CONNECT_WITH_DB;
const MORE_RESULTS = 0x0008 | 0x0002;
const passthrough = (): MysqlSession => new MysqlSession({ tls: 'passthrough' });
const refuse = (): MysqlSession => new MysqlSession({ tls: 'refuse' });

const client = (...parts: Buffer[]): Turn => ({ from: 'client', bytes: Buffer.concat(parts) });
const server = (...parts: Buffer[]): Turn => ({ from: 'server', bytes: Buffer.concat(parts) });

function handshake(clientCaps: number, serverExtended = 0, clientExtended = 0): Turn[] {
  return [server(greeting(77, SERVER_CAPS & ~CAP.MYSQL, serverExtended)), client(handshakeResponse(clientCaps, clientExtended)), server(ok(2))];
}

/** Asserts that every cut of the stream gives the whole-stream counts, and returns them. */
function splitProof(make: () => MysqlSession, turns: Turn[], offsets?: number[]) {
  const { whole, variants } = countsAtEverySplit(make, turns, offsets);
  const expected = splitInvariant(whole);
  for (const v of variants) {
    if (JSON.stringify(v.counts) !== JSON.stringify(expected)) {
      expect({ variant: v.label, counts: v.counts }).toEqual({ variant: v.label, counts: expected });
    }
  }
  return whole;
}

describe('MysqlPacketParser', () => {
  it('joins 0xFFFFFF continuation packets into one logical message, also when the payload is an exact multiple', () => {
    const exact = Buffer.alloc(0xffffff, 0x61);
    exact[0] = 0x03;
    const stream = Buffer.concat([mysqlPacket(0, exact), mysqlPacket(0, Buffer.from([0x0e]))]);
    const frames: MysqlFrame[] = [];
    const parser = new MysqlPacketParser();
    for (let i = 0; i < stream.length; i += 65536) parser.parse(stream.subarray(i, i + 65536), (f) => frames.push(f));
    expect(frames.map((f) => [f.seq, f.lastSeq, f.length, f.packets, f.head[0]])).toEqual([
      [0, 1, 0xffffff, 2, 0x03],
      [0, 0, 1, 1, 0x0e],
    ]);
    expect(parser.midFrame).toBe(false);
  });

  it('refuses a continuation packet whose sequence id does not follow', () => {
    const first = mysqlPacket(0, Buffer.alloc(0xffffff, 1)).subarray(0, 4 + 0xffffff);
    const wrong = Buffer.from([1, 0, 0, 5, 0x00]);
    const parser = new MysqlPacketParser();
    expect(() => parser.parse(Buffer.concat([first, wrong]), () => undefined)).toThrow(/bad sequence id 5/);
  });
});

describe('MysqlPacketParser heads', () => {
  const payloads = [Buffer.from([0x03, 0x53, 0x45]), Buffer.alloc(0), Buffer.alloc(300, 0x61), Buffer.from([0x0e])];
  const stream = Buffer.concat(payloads.map((p, k) => mysqlPacket(k, p)));
  const heads = payloads.map((p) => p.subarray(0, 256).toString('hex'));

  it('gives every frame the same head and first byte at every split, whether the head is a view of the chunk or a copy', () => {
    for (let cut = 0; cut <= stream.length; cut += 1) {
      const parser = new MysqlPacketParser();
      const frames: MysqlFrame[] = [];
      const chunks = [Buffer.from(stream.subarray(0, cut)), Buffer.from(stream.subarray(cut))];
      for (const chunk of chunks) parser.parse(chunk, (f) => frames.push(f));
      expect({ cut, heads: frames.map((f) => f.head.toString('hex')), first: frames.map((f) => f.firstByte) }).toEqual({
        cut,
        heads,
        first: payloads.map((p) => p[0] ?? -1),
      });
      // A head cut across the two chunks was copied, so it must not change with them; the others are views.
      for (const chunk of chunks) chunk.fill(0xee);
      const kept = frames.map((f, k) => (chunks.some((c) => c === f.bytes) ? heads[k] : f.head.toString('hex')));
      expect({ cut, kept }).toEqual({ cut, kept: heads });
    }
  });

  it('makes no copy of a head that lies whole in the chunk', () => {
    const chunk = Buffer.from(stream);
    const frames: MysqlFrame[] = [];
    new MysqlPacketParser().parse(chunk, (f) => frames.push(f));
    expect(frames.map((f) => f.bytes === chunk)).toEqual(payloads.map(() => true));
    const starts = payloads.map((_, k) => payloads.slice(0, k).reduce((n, p) => n + 4 + p.length, 0) + 4);
    expect(frames.map((f) => [f.headStart, f.headLength])).toEqual(payloads.map((p, k) => [starts[k], Math.min(256, p.length)]));
  });
});

describe('MySQL handshake and text queries', () => {
  const queries = (deprecateEof: boolean): Turn[] => {
    const end = (seq: number) => (deprecateEof ? ok(seq, 0, 0x0002, 0xfe) : eof(seq));
    const select = deprecateEof
      ? [columnCount(1, 2), columnDefinition(2, 'a'), columnDefinition(3, 'b'), textRow(4, '1', 'x'), textRow(5, '2', 'y'), end(6)]
      : [columnCount(1, 2), columnDefinition(2, 'a'), columnDefinition(3, 'b'), eof(4), textRow(5, '1', 'x'), textRow(6, '2', 'y'), end(7)];
    return [
      ...handshake(CLIENT_CAPS | (deprecateEof ? CAP.DEPRECATE_EOF : 0)),
      client(command(0x03, "INSERT INTO t VALUES (1,'x'),(2,'y')")),
      server(ok(1, 2)),
      client(command(0x03, 'SELECT a, b FROM t')),
      server(...select),
      client(command(0x0e)),
      server(ok(1)),
      client(command(0x03, 'SELEC broken')),
      server(err(1)),
      client(command(0x01)),
    ];
  };

  it.each([false, true])('counts commands, round trips and result sets identically at every split (DEPRECATE_EOF %s)', (deprecateEof) => {
    const counts = splitProof(passthrough, queries(deprecateEof));
    expect(counts.commands).toEqual({ COM_QUERY: 3, COM_PING: 1, COM_QUIT: 1 });
    expect(counts.commandsTotal).toBe(5);
    expect(counts.roundTrips).toBe(4);
    expect(counts.clientWrites).toBe(5);
    expect(counts.rowsAffected).toBe(2);
    expect(counts.serverMessages).toEqual({
      OK: deprecateEof ? 3 : 2,
      ERR: 1,
      ResultSet: 1,
      ColumnDefinition: 2,
      Row: 2,
      ...(deprecateEof ? {} : { EOF: 2 }),
    });
    expect(counts.incomplete).toBe(false);
    expect(counts.unansweredRequests).toBe(0);
    expect(counts.setup).toMatchObject({ clientMessages: 1, serverMessages: 2 });
  });

  it('keeps handshake bytes out of the command bytes', () => {
    const turns = queries(true);
    const counts = drive(passthrough, turns).counts;
    const all = (from: 'client' | 'server') => turns.filter((t) => t.from === from).reduce((n, t) => n + t.bytes.length, 0);
    const setupUp = handshake(CLIENT_CAPS | CAP.DEPRECATE_EOF)[1]!.bytes.length;
    expect(counts.setup?.bytesClientToServer).toBe(setupUp);
    expect(counts.bytesClientToServer + (counts.setup?.bytesClientToServer ?? 0)).toBe(all('client'));
    expect(counts.bytesServerToClient + (counts.setup?.bytesServerToClient ?? 0)).toBe(all('server'));
  });

  it('reads the connection id from the greeting', () => {
    const session = passthrough();
    session.fromServer(greeting(4242));
    expect(session.serverConnectionId).toBe(4242);
  });

  it('follows an auth switch and more-data exchange until OK', () => {
    const turns: Turn[] = [
      server(greeting(5)),
      client(handshakeResponse(CLIENT_CAPS)),
      server(mysqlPacket(2, Buffer.concat([Buffer.from([0xfe]), Buffer.from('caching_sha2_password\0'), Buffer.alloc(20, 1)]))),
      client(mysqlPacket(3, Buffer.alloc(32, 2))),
      server(mysqlPacket(4, Buffer.from([0x01, 0x03]))),
      server(ok(5)),
      client(command(0x03, 'SELECT 1')),
      server(columnCount(1, 1), columnDefinition(2), eof(3), textRow(4, '1'), eof(5)),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_QUERY: 1 });
    expect(counts.roundTrips).toBe(1);
    expect(counts.setup).toMatchObject({ clientMessages: 2, serverMessages: 4 });
    expect(counts.incomplete).toBe(false);
  });
});

describe('MySQL prepared statements, pipelining, bulk', () => {
  it('counts a mysql2-style prepare then execute (parameter definitions + EOF), not pipelined', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS),
      client(command(0x16, 'INSERT INTO t VALUES (?, ?)')),
      server(prepareOk(1, 1, 0, 2), columnDefinition(2, '?'), columnDefinition(3, '?'), eof(4)),
      client(executeCommand(1)),
      server(ok(1, 1)),
      client(executeCommand(1)),
      server(ok(1, 1)),
      client(command(0x19, Buffer.from([1, 0, 0, 0]))),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 2, COM_STMT_CLOSE: 1 });
    expect(counts.roundTrips).toBe(3);
    expect(counts.clientWrites).toBe(4);
    expect(counts.rowsAffected).toBe(2);
    expect(counts.unansweredRequests).toBe(0);
  });

  it('matches pipelined executes to their answers in FIFO order (one client write, one server write)', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS | CAP.DEPRECATE_EOF, MARIADB_CACHE_METADATA | MARIADB_BULK, MARIADB_CACHE_METADATA | MARIADB_BULK),
      client(command(0x16, 'INSERT INTO t VALUES (?)'), executeCommand(0xffffffff), executeCommand(0xffffffff), executeCommand(0xffffffff)),
      server(prepareOk(1, 9, 0, 1), columnDefinition(2, '?'), ok(1, 1), ok(1, 1), ok(1, 1)),
      // A select through the cached metadata: the column count carries a "no metadata" flag and no definitions follow.
      client(command(0x16, 'SELECT a FROM t WHERE a > ?'), executeCommand(0xffffffff)),
      server(
        prepareOk(1, 10, 1, 1),
        columnDefinition(2, '?'),
        columnDefinition(3, 'a'),
        columnCount(1, 1, 0),
        binaryRow(2, 1),
        binaryRow(3, 2),
        ok(4, 0, 0x0002, 0xfe),
      ),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_STMT_PREPARE: 2, COM_STMT_EXECUTE: 4 });
    expect(counts.roundTrips).toBe(6);
    expect(counts.clientWrites).toBe(2);
    expect(counts.rowsAffected).toBe(3);
    expect(counts.serverMessages).toMatchObject({ PrepareOK: 2, ResultSet: 1, Row: 2, ParameterDefinition: 2, ColumnDefinition: 1 });
    expect(counts.incomplete).toBe(false);
  });

  it('counts one COM_STMT_BULK_EXECUTE with one OK for all rows', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS | CAP.DEPRECATE_EOF, MARIADB_BULK, MARIADB_BULK),
      client(command(0x16, 'INSERT INTO t VALUES (?)')),
      server(prepareOk(1, 3, 0, 1), columnDefinition(2, '?')),
      client(command(0xfa, Buffer.concat([Buffer.from([3, 0, 0, 0, 0x80, 0]), Buffer.alloc(40, 1)]))),
      server(ok(1, 5000)),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 });
    expect(counts.roundTrips).toBe(2);
    expect(counts.rowsAffected).toBe(5000);
  });

  it('leaves rowsAffected out when a bulk is answered with unit results (MariaDB 11.5+), instead of reporting 0', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS | CAP.DEPRECATE_EOF, MARIADB_BULK, MARIADB_BULK),
      client(command(0xfa, Buffer.concat([Buffer.from([3, 0, 0, 0, 0xc0, 0]), Buffer.alloc(40, 1)]))),
      server(columnCount(1, 2), columnDefinition(2, 'Id'), columnDefinition(3, 'Affected_rows'), binaryRow(4, 1), binaryRow(5, 1), ok(6, 0, 0x0002, 0xfe)),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_STMT_BULK_EXECUTE: 1 });
    expect(counts.roundTrips).toBe(1);
    expect(counts.rowsAffected).toBeUndefined();
    expect(counts.serverMessages).toMatchObject({ ResultSet: 1, Row: 2 });
  });

  it('follows SERVER_MORE_RESULTS_EXISTS across result sets of one command', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS),
      client(command(0x03, 'CALL p()')),
      server(columnCount(1, 1), columnDefinition(2), eof(3), textRow(4, '1'), eof(5, MORE_RESULTS), ok(6, 0)),
      client(command(0x03, 'INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)')),
      server(ok(1, 1, MORE_RESULTS), ok(2, 1)),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_QUERY: 2 });
    expect(counts.roundTrips).toBe(2);
    expect(counts.rowsAffected).toBe(2);
    expect(counts.unansweredRequests).toBe(0);
  });

  it('names unknown commands COM_0xNN and accepts their ERR', () => {
    const turns: Turn[] = [...handshake(CLIENT_CAPS), client(command(0x99)), server(err(1, 'Unknown command'))];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_0x99: 1 });
    expect(counts.roundTrips).toBe(1);
    expect(mysqlCommandName(0x17)).toBe('COM_STMT_EXECUTE');
  });
});

describe('MySQL commands larger than 16 MB', () => {
  const bigQuery = (payloadBytes: number): Buffer => {
    const payload = Buffer.alloc(payloadBytes, 0x61);
    payload[0] = 0x03;
    return mysqlPacket(0, payload);
  };

  it.each([
    ['22 MB (one full packet and a final short one)', 22 * 1024 * 1024],
    ['exactly 0xFFFFFF bytes (a full packet then an empty one)', 0xffffff],
  ])('counts one COM_QUERY for %s at every split near the packet boundaries', (_label, size) => {
    const query = bigQuery(size);
    const turns: Turn[] = [...handshake(CLIENT_CAPS), client(query), server(ok(2, 1))];
    const handshakeBytes = turns.slice(0, 3).reduce((n, t) => n + t.bytes.length, 0);
    const boundaries = [0, 4 + 0xffffff, query.length];
    const offsets = new Set<number>();
    for (const b of boundaries) for (let d = -6; d <= 6; d += 1) offsets.add(handshakeBytes + b + d);
    for (let k = 0; k <= handshakeBytes; k += 1) offsets.add(k);
    const counts = splitProof(
      passthrough,
      turns,
      [...offsets].filter((k) => k >= 0),
    );
    expect(counts.commands).toEqual({ COM_QUERY: 1 });
    expect(counts.roundTrips).toBe(1);
    expect(counts.bytesClientToServer).toBe(query.length);
    // A realistic cut (64 KiB socket reads) gives the same, and the command starts in one client write.
    const chunked = drive(passthrough, turns, (t) =>
      Array.from({ length: Math.ceil(t.bytes.length / 65536) }, (_, j) => t.bytes.subarray(j * 65536, (j + 1) * 65536)),
    ).counts;
    expect(splitInvariant(chunked)).toEqual(splitInvariant(counts));
    expect(chunked.clientWrites).toBe(1);
  });
});

describe('MySQL TLS and faults', () => {
  it('marks the connection incomplete when the client asks for TLS, and counts nothing after', () => {
    const turns: Turn[] = [
      server(greeting(1)),
      client(sslRequest(CLIENT_CAPS)),
      client(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])),
      server(Buffer.from([0x16, 0x03, 0x03, 0x00, 0x02, 9, 9])),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons.join()).toMatch(/TLS/);
    expect(counts.commandsTotal).toBe(0);
  });

  it('refuse mode clears CLIENT_SSL in the greeting the client sees, and forwards everything else unchanged', () => {
    const g = greeting(3);
    const turns: Turn[] = [server(g), client(handshakeResponse(CLIENT_CAPS)), server(ok(2)), client(command(0x0e)), server(ok(1))];
    const byteByByte = drive(refuse, turns, (t) => Array.from(t.bytes, (_, j) => t.bytes.subarray(j, j + 1)));
    const whole = drive(refuse, turns);
    const patched = clearSslInGreeting(g);
    expect(patched.length).toBe(g.length);
    expect(Buffer.compare(patched, g)).not.toBe(0);
    const capsAt = 4 + 1 + '5.5.5-10.11.19-MariaDB\0'.length + 4 + 8 + 1;
    expect(g.readUInt16LE(capsAt) & CAP.SSL).toBe(CAP.SSL);
    expect(patched.readUInt16LE(capsAt) & CAP.SSL).toBe(0);
    for (const run of [whole, byteByByte]) {
      expect(run.toClient.equals(Buffer.concat([patched, ok(2), ok(1)]))).toBe(true);
      expect(run.counts.commands).toEqual({ COM_PING: 1 });
      expect(run.counts.incomplete).toBe(false);
    }
  });

  it('stops counting after a bad sequence id and says why', () => {
    const turns: Turn[] = [...handshake(CLIENT_CAPS), client(command(0x03, 'SELECT 1', 3)), client(command(0x0e)), server(ok(1))];
    const counts = splitProof(passthrough, turns);
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons).toEqual(['parse stopped: bad sequence id 3 in a client packet during command']);
    expect(counts.commandsTotal).toBe(0);
  });

  it('stops counting on garbage where a greeting should be', () => {
    const counts = drive(passthrough, [server(Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n'))]).counts;
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons[0]).toMatch(/parse stopped/);
  });

  it('flags a server packet that answers nothing, and a connection cut mid-packet or mid-answer', () => {
    const unsolicited = drive(passthrough, [...handshake(CLIENT_CAPS), server(ok(1))]).counts;
    expect(unsolicited.incompleteReasons).toEqual(['parse stopped: server packet 0x0 with no command pending']);

    const session = passthrough();
    for (const t of handshake(CLIENT_CAPS)) {
      if (t.from === 'client') session.fromClient(t.bytes, () => undefined);
      else session.fromServer(t.bytes);
    }
    session.fromClient(command(0x03, 'SELECT 1'), () => undefined);
    session.fromServer(columnCount(1, 1).subarray(0, 3));
    session.end('server closed');
    const counts = session.tally.toCounts(session.unanswered());
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons).toEqual(['server closed in the middle of a server packet', 'server closed with 1 command(s) unanswered']);
  });

  it('accepts an unsolicited ERR (connection killed) without a pending command', () => {
    const counts = drive(passthrough, [...handshake(CLIENT_CAPS), server(err(0, 'killed'))]).counts;
    expect(counts.incomplete).toBe(false);
    expect(counts.serverMessages).toEqual({ ERR: 1 });
  });
});

describe('MysqlSession.clientMidMessage', () => {
  it('is true between the two halves of a client packet and false once it is whole', () => {
    const session = passthrough();
    for (const t of handshake(CLIENT_CAPS)) {
      if (t.from === 'client') session.fromClient(t.bytes, () => undefined);
      else session.fromServer(t.bytes);
    }
    const packet = command(0x03, 'INSERT INTO t VALUES (1)');
    expect(session.clientMidMessage()).toBe(false);
    session.fromClient(packet.subarray(0, 10), () => undefined);
    expect(session.clientMidMessage()).toBe(true);
    session.fromClient(packet.subarray(10), () => undefined);
    expect(session.clientMidMessage()).toBe(false);
    // Cut in half for good: the session's end says so, and after the end nothing is "mid-message" any more.
    session.fromClient(packet.subarray(0, 10), () => undefined);
    session.end('closed');
    expect(session.tally.toCounts(0).incompleteReasons).toContain('closed in the middle of a client packet');
    expect(session.clientMidMessage()).toBe(false);
  });
});

describe('MySQL LOAD DATA LOCAL INFILE', () => {
  const infileRequest = (seq: number, name = 'rows.tsv'): Buffer => mysqlPacket(seq, Buffer.concat([Buffer.from([0xfb]), Buffer.from(name)]));
  const load = "LOAD DATA LOCAL INFILE 'rows.tsv' INTO TABLE t";

  it('counts the request, each data packet and the empty terminator, then the OK further in the sequence, at every split', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS | CAP.LOCAL_FILES),
      client(command(0x03, load)),
      server(infileRequest(1)),
      client(mysqlPacket(2, Buffer.from('1\ta\n2\tb\n')), mysqlPacket(3, Buffer.from('3\tc\n')), mysqlPacket(4, Buffer.alloc(0))),
      server(ok(5, 3)),
      client(command(0x03, 'SELECT 1')),
      server(columnCount(1, 1), columnDefinition(2), eof(3), textRow(4, '1'), eof(5)),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_QUERY: 2, LocalInfileData: 2, LocalInfileEnd: 1 });
    expect(counts.serverMessages).toMatchObject({ LocalInfileRequest: 1, OK: 1 });
    // The query's answer is the request; the file's is the OK: two waits for the server.
    expect(counts.roundTrips).toBe(3);
    expect(counts.rowsAffected).toBe(3);
    expect(counts.incomplete).toBe(false);
    expect(counts.unansweredRequests).toBe(0);
    const client_ = turns
      .slice(3)
      .filter((t) => t.from === 'client')
      .reduce((n, t) => n + t.bytes.length, 0);
    expect(counts.bytesClientToServer).toBe(client_);
  });

  it('counts a file the client refuses (only the empty packet) and the ERR that answers it', () => {
    const turns: Turn[] = [
      ...handshake(CLIENT_CAPS),
      client(command(0x03, load)),
      server(infileRequest(1)),
      client(mysqlPacket(2, Buffer.alloc(0))),
      server(err(3, 'Loading local data is disabled')),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ COM_QUERY: 1, LocalInfileEnd: 1 });
    expect(counts.serverMessages).toMatchObject({ LocalInfileRequest: 1, ERR: 1 });
    expect(counts.incomplete).toBe(false);
  });

  it('a data packet out of sequence stops the count as incomplete', () => {
    const turns: Turn[] = [...handshake(CLIENT_CAPS), client(command(0x03, load)), server(infileRequest(1)), client(mysqlPacket(7, Buffer.from('1\n')))];
    const counts = drive(passthrough, turns).counts;
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons.join(' ')).toMatch(/bad sequence id 7/);
  });

  it('a request with a command pipelined behind its query is not guessed at', () => {
    const turns: Turn[] = [...handshake(CLIENT_CAPS), client(command(0x03, load), command(0x0e)), server(infileRequest(1))];
    const counts = drive(passthrough, turns).counts;
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons.join(' ')).toMatch(/LOCAL INFILE request with other commands pipelined/);
  });
});
