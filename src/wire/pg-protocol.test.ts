import { PgMessageParser, PgSession } from './pg-protocol';
import type { PgFrame } from './pg-protocol';
import { countsAtEverySplit, drive, pg, pgMessage, splitInvariant } from './frames.fixture';
import type { Turn } from './frames.fixture';

const passthrough = (): PgSession => new PgSession({ tls: 'passthrough' });
const refuse = (): PgSession => new PgSession({ tls: 'refuse' });
const client = (...parts: Buffer[]): Turn => ({ from: 'client', bytes: Buffer.concat(parts) });
const server = (...parts: Buffer[]): Turn => ({ from: 'server', bytes: Buffer.concat(parts) });

const startup: Turn[] = [
  client(pg.startup()),
  server(pg.authSasl()),
  client(pg.password('n,,n=,r=abc')),
  server(pg.authOk(), pg.parameterStatus('server_version', '15.20'), pg.backendKeyData(31337, 42), pg.ready()),
];

function splitProof(make: () => PgSession, turns: Turn[]) {
  const { whole, variants } = countsAtEverySplit(make, turns);
  const expected = splitInvariant(whole);
  for (const v of variants) {
    if (JSON.stringify(v.counts) !== JSON.stringify(expected)) {
      expect({ variant: v.label, counts: v.counts }).toEqual({ variant: v.label, counts: expected });
    }
  }
  return whole;
}

describe('PgMessageParser', () => {
  it('refuses impossible lengths at the header (below 4, above 1 GiB)', () => {
    for (const length of [3, 0x40000001]) {
      const bad = Buffer.from([0x51, 0, 0, 0, 0]);
      bad.writeUInt32BE(length, 1);
      expect(() => new PgMessageParser('typed').parse(bad, () => undefined)).toThrow(/impossible length/);
    }
  });

  it('reads a startup message (no type byte), then typed messages', () => {
    const parser = new PgMessageParser('untyped');
    const frames: PgFrame[] = [];
    parser.parse(Buffer.concat([pg.startup(), pg.query('SELECT 1')]), (f) => {
      frames.push(f);
      parser.next = 'typed';
    });
    expect(frames.map((f) => [f.type, f.head.readInt32BE(0) === 196608 || f.type === 0x51])).toEqual([
      [0, true],
      [0x51, true],
    ]);
  });
});

describe('PgMessageParser heads', () => {
  const messages = [pg.query('SELECT 1'), pg.commandComplete('INSERT 0 5000'), pg.sync(), pgMessage('d', Buffer.alloc(300, 0x61))];
  const stream = Buffer.concat(messages);
  const bodies = messages.map((m) => m.subarray(5, 5 + Math.min(64, m.length - 5)));

  it('gives every message the same head at every split, whether it is a view of the chunk or a copy', () => {
    for (let cut = 0; cut <= stream.length; cut += 1) {
      const parser = new PgMessageParser('typed');
      const frames: PgFrame[] = [];
      const chunks = [Buffer.from(stream.subarray(0, cut)), Buffer.from(stream.subarray(cut))];
      for (const chunk of chunks) parser.parse(chunk, (f) => frames.push(f));
      const heads = (): string[] => frames.map((f) => f.head.toString('hex'));
      expect({ cut, heads: heads() }).toEqual({ cut, heads: bodies.map((b) => b.toString('hex')) });
      // A head cut across the two chunks was copied, so it must not change with them; the others are views.
      for (const chunk of chunks) chunk.fill(0xee);
      const copied = frames.map((f) => !chunks.some((c) => c === f.bytes));
      const kept = frames.map((f, k) => (copied[k] ? f.head.toString('hex') : (bodies[k] as Buffer).toString('hex')));
      expect({ cut, kept }).toEqual({ cut, kept: bodies.map((b) => b.toString('hex')) });
    }
  });

  it('makes no copy of a head that lies whole in the chunk', () => {
    const chunk = Buffer.from(stream);
    const frames: PgFrame[] = [];
    new PgMessageParser('typed').parse(chunk, (f) => frames.push(f));
    expect(frames.map((f) => f.bytes === chunk)).toEqual(messages.map(() => true));
    expect(frames.map((f) => f.head.toString('latin1'))).toEqual(bodies.map((b) => b.toString('latin1')));
    const starts = messages.map((_, k) => messages.slice(0, k).reduce((n, m) => n + m.length, 0) + 5);
    expect(frames.map((f) => f.headStart)).toEqual(starts);
  });
});

describe('CommandComplete tags', () => {
  /** The reading the counter must keep: the tag up to its NUL, matched whole. */
  const reference = (tag: string): number => {
    const m = /^(?:INSERT \d+|UPDATE|DELETE|MERGE|COPY) (\d+)$/.exec(tag.split('\0')[0] as string);
    return m ? Number(m[1]) : 0;
  };
  const tags = [
    'INSERT 0 5000',
    'INSERT 0 1',
    'INSERT 16385 1',
    'INSERT 5000',
    'INSERT  5',
    'INSERT 0 ',
    'INSERT 0 5 ',
    'INSERT x 5',
    'INSERT 0 5x',
    'UPDATE 3',
    'UPDATE 0',
    'UPDATE',
    'UPDATE ',
    'UPDATEX 3',
    'UPDATE 3 4',
    'DELETE 1',
    'DELETE 12x',
    'MERGE 2',
    'COPY 10',
    'COPY 1234567890123456789',
    'SELECT 5',
    'FETCH 5',
    'MOVE 5',
    'CREATE TABLE',
    'copy 10',
    'INSERT 0 01',
    `UPDATE ${'9'.repeat(60)}`,
    `INSERT 0 ${'1'.repeat(60)}`,
  ];

  it.each(tags)('reads "%s" as the reference does', (tag) => {
    const turns: Turn[] = [
      ...startup,
      client(pg.query('x')),
      // Built by hand so a tag without its NUL (cut at 64 bytes by the head) is also tried.
      server(pgMessage('C', Buffer.from(`${tag}\0`, 'latin1')), pg.ready()),
    ];
    expect(drive(passthrough, turns).counts.rowsAffected).toBe(reference(tag.slice(0, 64)));
  });
});

describe('PostgreSQL sessions', () => {
  it('keeps startup and authentication in setup and reads the backend pid', () => {
    const run = drive(passthrough, startup);
    expect(run.counts.commandsTotal).toBe(0);
    expect(run.counts.roundTrips).toBe(0);
    expect(run.counts.setup).toMatchObject({ clientMessages: 2, serverMessages: 5 });
    expect(run.counts.bytesClientToServer).toBe(0);
    expect(run.counts.bytesServerToClient).toBe(0);
    const session = passthrough();
    for (const t of startup) {
      if (t.from === 'client') session.fromClient(t.bytes, () => undefined);
      else session.fromServer(t.bytes);
    }
    expect(session.serverConnectionId).toBe(31337);
  });

  it('counts each message of an extended-query pipeline written in one chunk, at every split', () => {
    const turns: Turn[] = [
      ...startup,
      client(
        pg.parse('s1', 'INSERT INTO t VALUES ($1)'),
        pg.bind('s1', '1'),
        pg.describePortal(),
        pg.execute(),
        pg.sync(),
        pg.bind('s1', '2'),
        pg.describePortal(),
        pg.execute(),
        pg.sync(),
        pg.bind('s1', '3'),
        pg.describePortal(),
        pg.execute(),
        pg.sync(),
      ),
      server(
        pg.parseComplete(),
        pg.bindComplete(),
        pg.noData(),
        pg.commandComplete('INSERT 0 1'),
        pg.ready(),
        pg.bindComplete(),
        pg.noData(),
        pg.commandComplete('INSERT 0 1'),
        pg.ready(),
        pg.bindComplete(),
        pg.noData(),
        pg.commandComplete('INSERT 0 1'),
        pg.ready(),
      ),
      client(pg.query('SELECT 1'), pg.flush()),
      server(pg.rowDescription(), pg.dataRow('1'), pg.commandComplete('SELECT 1'), pg.ready()),
      client(pg.terminate()),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ Parse: 1, Bind: 3, Describe: 3, Execute: 3, Sync: 3, Query: 1, Flush: 1, Terminate: 1 });
    expect(counts.commandsTotal).toBe(16);
    expect(counts.roundTrips).toBe(4);
    expect(counts.clientWrites).toBe(3);
    expect(counts.rowsAffected).toBe(3);
    expect(counts.serverMessages).toEqual({
      ParseComplete: 1,
      BindComplete: 3,
      NoData: 3,
      CommandComplete: 4,
      ReadyForQuery: 4,
      RowDescription: 1,
      DataRow: 1,
    });
    expect(counts.incomplete).toBe(false);
    expect(counts.unansweredRequests).toBe(0);
  });

  it('closes a failed extended query at its Sync and counts the ErrorResponse', () => {
    const turns: Turn[] = [
      ...startup,
      client(pg.parse('', 'INSRT'), pg.bind('', 'x'), pg.execute(), pg.sync()),
      server(pg.error('syntax error'), pg.ready()),
      client(pg.query('SELECT 1; SELEC 2')),
      server(pg.rowDescription(), pg.dataRow('1'), pg.commandComplete('SELECT 1'), pg.error(), pg.ready('E')),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ Parse: 1, Bind: 1, Execute: 1, Sync: 1, Query: 1 });
    expect(counts.roundTrips).toBe(2);
    expect(counts.serverMessages?.ErrorResponse).toBe(2);
    expect(counts.incomplete).toBe(false);
  });

  it('counts a COPY FROM STDIN as one Query round trip with its CopyData', () => {
    const turns: Turn[] = [
      ...startup,
      client(pg.query('COPY t FROM STDIN')),
      server(pg.copyInResponse()),
      client(pg.copyData('1\n2\n'), pg.copyData('3\n'), pg.copyDone()),
      server(pg.commandComplete('COPY 3'), pg.ready()),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ Query: 1, CopyData: 2, CopyDone: 1 });
    expect(counts.roundTrips).toBe(1);
    expect(counts.rowsAffected).toBe(3);
  });

  it('counts a COPY whose stream failed: CopyData, CopyFail, the ErrorResponse, nothing incomplete', () => {
    const turns: Turn[] = [
      ...startup,
      client(pg.query('COPY t FROM STDIN')),
      server(pg.copyInResponse()),
      client(pg.copyData('1\n'), pgMessage('f', 'source stream failed\0')),
      server(pg.error('COPY from stdin failed: source stream failed'), pg.ready()),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ Query: 1, CopyData: 1, CopyFail: 1 });
    expect(counts.serverMessages?.ErrorResponse).toBe(1);
    expect(counts.roundTrips).toBe(1);
    expect(counts.rowsAffected).toBe(0);
    expect(counts.incomplete).toBe(false);
  });

  it("counts postgres.js's CopyFail after CopyDone (sent once its Writable is destroyed; the server ignores it)", () => {
    const turns: Turn[] = [
      ...startup,
      client(pg.query('COPY t FROM STDIN')),
      server(pg.copyInResponse()),
      client(pg.copyData('1\n2\n'), pg.copyDone()),
      server(pg.commandComplete('COPY 2'), pg.ready()),
      client(pgMessage('f', 'null\0')),
      client(pg.query('SELECT 1')),
      server(pg.commandComplete('SELECT 1'), pg.ready()),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ Query: 2, CopyData: 1, CopyDone: 1, CopyFail: 1 });
    expect(counts.roundTrips).toBe(2);
    expect(counts.rowsAffected).toBe(2);
    expect(counts.incomplete).toBe(false);
    expect(counts.unansweredRequests).toBe(0);
  });

  it('counts the bytes of every CopyData frame as client bytes', () => {
    const data = ['a\tb\n', 'c\\d\n', '\\N\t\n'];
    const copy = data.map((d) => pg.copyData(d));
    const turns: Turn[] = [
      ...startup,
      client(pg.query('COPY t FROM STDIN')),
      server(pg.copyInResponse()),
      client(...copy, pg.copyDone()),
      server(pg.commandComplete('COPY 3'), pg.ready()),
    ];
    const counts = splitProof(passthrough, turns);
    const sent = pg.query('COPY t FROM STDIN').length + copy.reduce((n, b) => n + b.length, 0) + pg.copyDone().length;
    expect(counts.bytesClientToServer).toBe(sent);
  });
});

describe('PostgreSQL TLS', () => {
  it("passthrough: SSLRequest answered 'N' continues in plain text", () => {
    const turns: Turn[] = [
      client(pg.sslRequest()),
      server(Buffer.from('N')),
      ...startup,
      client(pg.query('SELECT 1')),
      server(pg.commandComplete('SELECT 1'), pg.ready()),
    ];
    const counts = splitProof(passthrough, turns);
    expect(counts.commands).toEqual({ Query: 1 });
    expect(counts.roundTrips).toBe(1);
    expect(counts.setup).toMatchObject({ clientMessages: 3, serverMessages: 6, tlsRefused: 0 });
  });

  it("passthrough: SSLRequest answered 'S' makes the connection incomplete and counts no ciphertext", () => {
    const hello = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x30, ...Buffer.alloc(48, 0x51)]);
    const turns: Turn[] = [client(pg.sslRequest()), server(Buffer.from('S')), client(hello), server(Buffer.alloc(60, 0x5a))];
    const counts = splitProof(passthrough, turns);
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons).toEqual(['the server accepted TLS: the encrypted session cannot be counted']);
    expect(counts.commandsTotal).toBe(0);
    expect(counts.roundTrips).toBe(0);
  });

  it("refuse: the proxy answers 'N' to SSLRequest and GSSENCRequest itself and the server never sees them", () => {
    const turns: Turn[] = [
      client(pg.gssencRequest()),
      client(pg.sslRequest()),
      ...startup,
      client(pg.query('SELECT 1')),
      server(pg.commandComplete('SELECT 1'), pg.ready()),
    ];
    for (const cut of [undefined, (t: Turn) => Array.from(t.bytes, (_, j) => t.bytes.subarray(j, j + 1))]) {
      const run = drive(refuse, turns, cut);
      expect(run.replies.toString()).toBe('NN');
      expect(run.toServer.equals(Buffer.concat([pg.startup(), pg.password('n,,n=,r=abc'), pg.query('SELECT 1')]))).toBe(true);
      expect(run.counts.commands).toEqual({ Query: 1 });
      expect(run.counts.setup?.tlsRefused).toBe(2);
      expect(run.counts.incomplete).toBe(false);
    }
  });
});

describe('PostgreSQL faults', () => {
  it('stops at an impossible length and keeps forwarding the bytes', () => {
    const bad = Buffer.from([0x51, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3]);
    const run = drive(passthrough, [...startup, client(bad), client(pg.query('SELECT 1'))]);
    expect(run.counts.incomplete).toBe(true);
    expect(run.counts.incompleteReasons).toEqual(["parse stopped: impossible length 2147483647 for message 'Q'"]);
    expect(run.counts.commandsTotal).toBe(0);
    expect(run.toServer.subarray(-bad.length - pg.query('SELECT 1').length).equals(Buffer.concat([bad, pg.query('SELECT 1')]))).toBe(true);
  });

  it('refuses an unknown message type and a ReadyForQuery nobody asked for', () => {
    const garbage = drive(passthrough, [...startup, client(Buffer.from('GET / HTTP/1.1\r\n'))]).counts;
    expect(garbage.incompleteReasons).toEqual(["parse stopped: unknown frontend message type 'G' during command"]);
    const stray = drive(passthrough, [...startup, server(pg.ready())]).counts;
    expect(stray.incompleteReasons).toEqual(['parse stopped: ReadyForQuery with no Sync or Query pending']);
  });

  it('refuses a startup code it does not know (direct TLS, garbage)', () => {
    const counts = drive(passthrough, [client(Buffer.from([0, 0, 0, 8, 0x12, 0x34, 0x56, 0x78]))]).counts;
    expect(counts.incompleteReasons).toEqual(['parse stopped: unknown startup request code 305419896']);
  });

  it('marks a connection cut mid-message or with a Sync unanswered', () => {
    const session = passthrough();
    for (const t of startup) {
      if (t.from === 'client') session.fromClient(t.bytes, () => undefined);
      else session.fromServer(t.bytes);
    }
    session.fromClient(Buffer.concat([pg.query('SELECT pg_sleep(10)'), pgMessage('Q').subarray(0, 3)]), () => undefined);
    session.end('client closed');
    expect(session.tally.toCounts(0).incompleteReasons).toEqual([
      'client closed in the middle of a client message',
      'client closed with 1 request(s) unanswered',
    ]);
  });

  it('counts a CancelRequest connection as one command with no round trip', () => {
    const counts = drive(passthrough, [client(pg.cancelRequest(31337, 42))]).counts;
    expect(counts.commands).toEqual({ CancelRequest: 1 });
    expect(counts.roundTrips).toBe(0);
    expect(counts.incomplete).toBe(false);
  });
});
