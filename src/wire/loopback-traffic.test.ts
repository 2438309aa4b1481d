import { drive, pg } from './frames.fixture';
import { LoopbackTraffic } from './loopback-traffic';
import type { Owner } from './loopback-traffic';
import { decodePacket, packetFields, PcapStreamReader, TCP_ACK, TCP_FIN } from './pcap';
import type { PcapRecord } from './pcap';
import {
  Conversation,
  ipv4,
  linkFrame,
  LOOPBACK,
  pcapHeader,
  pcapRecord,
  RECORDED_MARIADB,
  RECORDED_MARIADB_BASE64,
  RECORDED_PSQL,
  RECORDED_PSQL_BASE64,
  tcp,
  udp,
} from './pcap.fixture';
import { PgSession } from './pg-protocol';
import { diffWireSnapshots, sumWireCounts } from './tally';
import { seqDiff, TcpDirection } from './tcp-stream';
import type { WireSnapshot } from './types';

const SERVER_PORT = 5432;

function traffic(protocol: 'postgres' | 'mysql', port: number, owner: (clientPort: number) => Owner = () => 'other'): LoopbackTraffic {
  return new LoopbackTraffic({ protocol, server: { address: LOOPBACK, port }, ownerOf: (_a, p) => owner(p) });
}

function stream(frames: readonly Buffer[], linkType = 1): Buffer {
  return Buffer.concat([pcapHeader(linkType), ...frames.map((f) => pcapRecord(f))]);
}

/** What the capture counted, over every connection it saw. */
function counted(t: LoopbackTraffic) {
  return sumWireCounts(t.connections().map((c) => t.record(c).counts))!;
}

/** A psql-like session: startup, one query answered, goodbye; the bytes as the two sides send them. */
const CLIENT_TURNS = [pg.startup(), pg.query('SELECT 1'), pg.terminate()];
const SERVER_TURNS = [
  Buffer.concat([pg.authOk(), pg.parameterStatus('server_version', '15'), pg.backendKeyData(4242, 7), pg.ready()]),
  Buffer.concat([pg.rowDescription(), pg.dataRow('1'), pg.commandComplete('SELECT 1'), pg.ready()]),
];

/** The same session driven straight into a PgSession, as the proxy would: what the capture must match. */
function proxied() {
  return drive(
    () => new PgSession({ tls: 'passthrough' }),
    [
      { from: 'client', bytes: CLIENT_TURNS[0]! },
      { from: 'server', bytes: SERVER_TURNS[0]! },
      { from: 'client', bytes: CLIENT_TURNS[1]! },
      { from: 'server', bytes: SERVER_TURNS[1]! },
      { from: 'client', bytes: CLIENT_TURNS[2]! },
    ],
  ).counts;
}

/** The frames of that session, in the order the kernel would capture them. */
function session(conv = new Conversation(40000, SERVER_PORT)): { frames: Buffer[]; conv: Conversation } {
  const frames = [...conv.open()];
  for (let i = 0; i < CLIENT_TURNS.length; i++) {
    const up = conv.client(CLIENT_TURNS[i]!);
    frames.push(up.data, up.ack);
    const answer = SERVER_TURNS[i];
    if (answer) {
      const down = conv.server(answer);
      frames.push(down.data, down.ack);
    }
  }
  frames.push(...conv.close());
  return { frames, conv };
}

/** `bytes` cut where pipe reads might cut it: chunks of 1 to `largest` bytes, the same for a given seed. */
function chunked(bytes: Buffer, seed: number, largest: number): Buffer[] {
  let state = seed >>> 0;
  const random = (): number => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const size = 1 + Math.floor(random() * largest);
    chunks.push(bytes.subarray(at, at + size));
    at += size;
  }
  return chunks;
}

/**
 * A pg session with long segments: a 150 kB query in three segments (the second captured before the first), a
 * 65000-byte datagram and a marker, and the client's goodbye riding on the FIN of a 60 kB segment.
 */
function longSession(): { bytes: Buffer; expected: ReturnType<typeof proxied> } {
  const conv = new Conversation(40000, SERVER_PORT);
  const frames = [...conv.open()];
  const startup = conv.client(CLIENT_TURNS[0]!);
  const greeting = conv.server(SERVER_TURNS[0]!);
  frames.push(startup.data, greeting.data, greeting.ack);
  const long = pg.query(`SELECT '${'x'.repeat(150_000)}'`);
  const parts = [long.subarray(0, 60_000), long.subarray(60_000, 120_000), long.subarray(120_000)].map((p) => conv.client(p));
  frames.push(parts[1]!.data, parts[0]!.data, parts[2]!.data, parts[2]!.ack);
  const answer = conv.server(SERVER_TURNS[1]!);
  frames.push(answer.data, answer.ack);
  frames.push(linkFrame(1, ipv4(17, LOOPBACK, LOOPBACK, udp(50000, SERVER_PORT, Buffer.alloc(65_000)))));
  frames.push(linkFrame(1, ipv4(17, LOOPBACK, LOOPBACK, udp(50000, SERVER_PORT, Buffer.from('sqltally-marker x 1')))));
  const padded = Buffer.concat([pg.query(`SELECT '${'y'.repeat(60_000)}'`), pg.terminate()]);
  frames.push(linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(40000, SERVER_PORT, conv.clientSeq, conv.serverSeq, TCP_FIN | TCP_ACK, padded))));
  conv.clientSeq = (conv.clientSeq + padded.length + 1) >>> 0;
  const second = Buffer.concat([pg.rowDescription(), pg.dataRow('y'), pg.commandComplete('SELECT 1'), pg.ready()]);
  frames.push(linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(SERVER_PORT, 40000, conv.serverSeq, conv.clientSeq, TCP_FIN | TCP_ACK, second))));
  frames.push(linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(40000, SERVER_PORT, conv.clientSeq, conv.serverSeq + second.length + 1, TCP_ACK))));
  const expected = drive(
    () => new PgSession({ tls: 'passthrough' }),
    [
      { from: 'client', bytes: CLIENT_TURNS[0]! },
      { from: 'server', bytes: SERVER_TURNS[0]! },
      { from: 'client', bytes: long },
      { from: 'server', bytes: SERVER_TURNS[1]! },
      { from: 'client', bytes: padded },
      { from: 'server', bytes: second },
    ],
  ).counts;
  return { bytes: stream(frames), expected };
}

describe('pcap stream', () => {
  it('reads the same records whatever the chunks, in either byte order', () => {
    const frames = session().frames;
    for (const bigEndian of [false, true]) {
      const bytes = Buffer.concat([pcapHeader(1, bigEndian), ...frames.map((f) => pcapRecord(f, f.length, bigEndian))]);
      const whole: PcapRecord[] = [];
      new PcapStreamReader().push(bytes, (r) => whole.push({ ...r, bytes: Buffer.from(r.bytes.subarray(r.start, r.end)), start: 0, end: r.end - r.start }));
      expect(whole.map((r) => r.bytes)).toEqual(frames);
      const copy = (got: Buffer[]) => (r: PcapRecord) => got.push(Buffer.from(r.bytes.subarray(r.start, r.end)));
      for (let cut = 1; cut < bytes.length; cut += 7) {
        const reader = new PcapStreamReader();
        const got: Buffer[] = [];
        reader.push(bytes.subarray(0, cut), copy(got));
        reader.push(bytes.subarray(cut), copy(got));
        expect(got).toEqual(frames);
        expect(reader.pendingBytes).toBe(0);
      }
      // A byte at a time: a record is put together across many chunks, its header first.
      for (const size of [1, 3, 17]) {
        const reader = new PcapStreamReader();
        const got: Buffer[] = [];
        for (let at = 0; at < bytes.length; at += size) reader.push(bytes.subarray(at, at + size), copy(got));
        expect(got).toEqual(frames);
        expect(reader.pendingBytes).toBe(0);
      }
    }
  });

  it('hands a long record over in pieces, each a view of the chunk it came in, the headers in the first', () => {
    const big = linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(40000, SERVER_PORT, 5, 6, TCP_ACK, Buffer.alloc(60_000, 7))));
    const frames = [...session().frames.slice(0, 3), big, linkFrame(1, ipv4(17, LOOPBACK, LOOPBACK, udp(40001, SERVER_PORT, Buffer.alloc(300, 1)))), big];
    const bytes = stream(frames);
    for (const [seed, largest] of [
      [1, 70_000],
      [2, 5_000],
      [3, 300],
      [4, 17],
    ] as const) {
      const reader = new PcapStreamReader();
      const got: Buffer[][] = [];
      let pieces = 0;
      for (const chunk of chunked(bytes, seed, largest)) {
        reader.push(chunk, (r) => {
          if (r.offset === 0) {
            expect(r.end - r.start).toBeGreaterThanOrEqual(Math.min(r.included, 256));
            got.push([]);
          } else {
            pieces += 1;
            expect(r.bytes).toBe(chunk);
            expect(r.offset).toBe(got.at(-1)!.reduce((n, p) => n + p.length, 0));
          }
          got.at(-1)!.push(Buffer.from(r.bytes.subarray(r.start, r.end)));
        });
      }
      expect(got.map((p) => Buffer.concat(p))).toEqual(frames);
      expect(pieces).toBeGreaterThan(0);
      expect(reader.pendingBytes).toBe(0);
    }
  });

  it('refuses bytes that are not a pcap stream', () => {
    expect(() => new PcapStreamReader().push(Buffer.alloc(24, 7), () => undefined)).toThrow(/not a pcap stream/);
  });

  it('decodes TCP and UDP under every loopback link type', () => {
    const segment = ipv4(6, LOOPBACK, LOOPBACK, tcp(40000, SERVER_PORT, 5, 6, 0x18, Buffer.from('hi')));
    const datagram = ipv4(17, LOOPBACK, LOOPBACK, udp(40001, SERVER_PORT, Buffer.from('mark')));
    for (const linkType of [0, 1, 101, 113, 276]) {
      expect(decodePacket(linkType, linkFrame(linkType, segment))).toMatchObject({
        kind: 'tcp',
        srcPort: 40000,
        dstPort: SERVER_PORT,
        seq: 5,
        ack: 6,
        payload: Buffer.from('hi'),
      });
      expect(decodePacket(linkType, linkFrame(linkType, datagram))).toMatchObject({ kind: 'udp', payload: Buffer.from('mark') });
    }
    expect(decodePacket(1, Buffer.concat([Buffer.alloc(12), Buffer.from([0x86, 0xdd]), Buffer.alloc(40)]))).toEqual({ kind: 'other', why: 'ethertype 0x86dd' });
  });

  it('decodes into one set of fields over and over as into fresh ones, whatever kind came before', () => {
    const frames = [
      linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(40000, SERVER_PORT, 5, 6, 0x18, Buffer.from('hi')))),
      linkFrame(1, ipv4(17, LOOPBACK + 1, LOOPBACK, udp(40001, SERVER_PORT + 1, Buffer.from('mark')))),
      Buffer.concat([Buffer.alloc(12), Buffer.from([0x86, 0xdd]), Buffer.alloc(40)]),
      linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(SERVER_PORT, 40002, 7, 8, 0x10, Buffer.alloc(0)))),
      linkFrame(1, ipv4(17, LOOPBACK, LOOPBACK, udp(40003, SERVER_PORT, Buffer.alloc(0)))),
    ];
    const into = packetFields();
    for (const frame of frames) {
      const fresh = decodePacket(1, frame);
      const reused = decodePacket(1, frame, 0, frame.length, frame.length, into);
      expect(reused).toBe(into);
      expect(reused).toMatchObject(fresh as unknown as Record<string, unknown>);
      if (fresh.kind !== 'other') expect(reused.kind === 'other' ? null : reused.payload).toEqual(fresh.payload);
    }
  });
});

describe('TCP direction', () => {
  it('delivers each byte once, in order, across the 32-bit wrap', () => {
    const d = new TcpDirection();
    const out: string[] = [];
    const deliver = (b: Buffer): number => out.push(b.toString());
    d.start(0xfffffffd);
    d.segment(0xffffffff, Buffer.from('cd'), false, deliver); // after a hole: held
    expect(out).toEqual([]);
    d.segment(0xfffffffe, Buffer.from('ab'), false, deliver); // fills it, overlaps 'c'
    d.segment(0xfffffffe, Buffer.from('ab'), false, deliver); // a retransmit
    d.segment(1, Buffer.from('ef'), true, deliver);
    expect(out.join('')).toBe('abdef');
    expect(d.finished).toBe(true);
    expect(d.missingBefore(4)).toBe(0);
    expect(seqDiff(1, 0xffffffff)).toBe(2);
  });

  it('says how many acknowledged bytes it never saw', () => {
    const d = new TcpDirection();
    d.start(99);
    d.segment(110, Buffer.from('late'), false, () => undefined);
    expect(d.missingBefore(100)).toBe(0);
    expect(d.missingBefore(114)).toBe(14);
    expect(d.heldBytes).toBe(4);
  });
});

describe('LoopbackTraffic', () => {
  it('counts a recorded psql session as the proxy counts it', () => {
    const t = traffic('postgres', RECORDED_PSQL.serverPort);
    t.push(Buffer.from(RECORDED_PSQL_BASE64, 'base64'));
    const [c, ...more] = t.connections();
    expect(more).toEqual([]);
    const counts = t.record(c!).counts;
    expect(counts).toMatchObject({ commands: { Query: 2, Terminate: 1 }, roundTrips: 2, incomplete: false, unansweredRequests: 0 });
    expect(counts.statements).toMatchObject({ completed: 2, completedByClass: { select: 2 } });
    expect(c!.closedAtNs).not.toBeNull();
    expect(t.record(c!).serverConnectionId).toEqual(expect.any(Number));
  });

  it('counts a recorded mariadb CLI session', () => {
    const t = traffic('mysql', RECORDED_MARIADB.serverPort);
    t.push(Buffer.from(RECORDED_MARIADB_BASE64, 'base64'));
    const counts = counted(t);
    expect(counts).toMatchObject({ connections: 1, incomplete: false, unansweredRequests: 0 });
    expect(counts.commands).toMatchObject({ COM_QUERY: expect.any(Number), COM_QUIT: 1 });
    expect(counts.statements?.completedByClass.select).toBeGreaterThanOrEqual(2);
  });

  it('gives the proxy counts for the same bytes, cut into records at any point', () => {
    const bytes = stream(session().frames);
    const expected = proxied();
    for (const cut of [1, 23, 24, 25, 40, 100, bytes.length - 1]) {
      const t = traffic('postgres', SERVER_PORT);
      t.push(bytes.subarray(0, cut));
      t.push(bytes.subarray(cut));
      const [c, ...more] = t.connections();
      expect(more).toEqual([]);
      expect({ ...t.record(c!).counts, clientWrites: 0 }).toEqual({ ...expected, clientWrites: 0 });
    }
  });

  it('counts long segments as the proxy does, however the capture is cut into chunks', () => {
    const { bytes, expected } = longSession();
    for (const [seed, largest] of [
      [0, bytes.length],
      [1, 70_000],
      [2, 8_000],
      [3, 700],
      [5, 40],
    ] as const) {
      const markers: string[] = [];
      const t = new LoopbackTraffic({
        protocol: 'postgres',
        server: { address: LOOPBACK, port: SERVER_PORT },
        ownerOf: () => 'other',
        // As passive.ts reads them: a marker is short, the padding after it is not.
        onDatagram: (p) => void (p.length < 200 && markers.push(p.toString())),
      });
      for (const chunk of chunked(bytes, seed, largest)) t.push(chunk);
      const [c, ...more] = t.connections();
      expect(more).toEqual([]);
      expect({ ...t.record(c!).counts, clientWrites: 0 }).toEqual({ ...expected, clientWrites: 0 });
      expect(t.record(c!).counts).toMatchObject({ incomplete: false, commands: { Query: 2, Terminate: 1 } });
      expect(c!.closedAtNs).not.toBeNull();
      expect(markers).toEqual(['sqltally-marker x 1']);
    }
  });

  it('counts a retransmitted segment once', () => {
    const { frames } = session();
    // The query's segment (after the three handshake frames and the startup's two and its answer's two) sent twice.
    const query = frames[7]!;
    const t = traffic('postgres', SERVER_PORT);
    t.push(stream([...frames.slice(0, 8), query, ...frames.slice(8)]));
    expect(counted(t)).toMatchObject({ commands: { Query: 1, Terminate: 1 }, roundTrips: 1, incomplete: false });
  });

  it('puts out-of-order segments back in order', () => {
    const conv = new Conversation(40000, SERVER_PORT);
    const frames = [...conv.open()];
    const startup = conv.client(CLIENT_TURNS[0]!);
    const greeting = conv.server(SERVER_TURNS[0]!);
    // The query in two segments, the second captured first.
    const query = CLIENT_TURNS[1]!;
    const first = conv.client(query.subarray(0, 4));
    const second = conv.client(query.subarray(4));
    const answer = conv.server(SERVER_TURNS[1]!);
    frames.push(startup.data, greeting.data, second.data, first.data, second.ack, answer.data, answer.ack, ...conv.close());
    const t = traffic('postgres', SERVER_PORT);
    t.push(stream(frames));
    expect(counted(t)).toMatchObject({ commands: { Query: 1 }, roundTrips: 1, incomplete: false });
  });

  it('a segment the capture lost makes the connection incomplete, naming why', () => {
    const { frames } = session();
    const t = traffic('postgres', SERVER_PORT);
    // Without the query's segment: the server's ACK of it shows bytes the capture never had.
    t.push(stream([...frames.slice(0, 7), ...frames.slice(8)]));
    const counts = counted(t);
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons.join('; ')).toMatch(/missing 14 byte\(s\) the client sent \(acknowledged, never captured/);
    expect(counts.commands.Query ?? 0).toBe(0);
  });

  it('a connection whose SYN was not captured is incomplete; its own packets before any bytes are ignored', () => {
    const { frames } = session();
    const t = traffic('postgres', SERVER_PORT);
    t.push(stream(frames.slice(5)));
    const counts = counted(t);
    expect(counts.connections).toBe(1);
    expect(counts.incompleteReasons.join('; ')).toMatch(/began before the capture started \(its SYN was not seen\)/);
    expect(counts.commandsTotal).toBe(0);
  });

  it('a reset closes the connection; a request it left unanswered is said', () => {
    const conv = new Conversation(40000, SERVER_PORT);
    const frames = [...conv.open()];
    const startup = conv.client(CLIENT_TURNS[0]!);
    const greeting = conv.server(SERVER_TURNS[0]!);
    const query = conv.client(CLIENT_TURNS[1]!);
    frames.push(startup.data, greeting.data, query.data, conv.reset(false));
    const t = traffic('postgres', SERVER_PORT);
    t.push(stream(frames));
    const [c] = t.connections();
    expect(c!.closedAtNs).not.toBeNull();
    expect(t.record(c!).counts.incompleteReasons.join('; ')).toMatch(/server reset/);
  });

  it('the last ACK after both FINs opens no phantom connection', () => {
    const { frames } = session();
    const t = traffic('postgres', SERVER_PORT);
    t.push(stream([...frames, frames[frames.length - 1]!]));
    expect(t.connections()).toHaveLength(1);
    expect(counted(t).incomplete).toBe(false);
  });

  it("leaves this process's own connections out, and hands over marker datagrams", () => {
    const mine = session(new Conversation(40001, SERVER_PORT)).frames;
    const theirs = session(new Conversation(40002, SERVER_PORT)).frames;
    const markers: string[] = [];
    const t = new LoopbackTraffic({
      protocol: 'postgres',
      server: { address: LOOPBACK, port: SERVER_PORT },
      ownerOf: (_a, port) => (port === 40001 ? 'own' : 'other'),
      onDatagram: (p) => markers.push(p.toString()),
    });
    const marker = linkFrame(1, ipv4(17, LOOPBACK, LOOPBACK, udp(50000, SERVER_PORT, Buffer.from('sqltally-marker x 1'))));
    t.push(stream([...mine, ...theirs, marker]));
    expect(t.connections().map((c) => c.clientPort)).toEqual([40002]);
    expect(markers).toEqual(['sqltally-marker x 1']);
  });

  it('a segment cut short by the snapshot length is incomplete', () => {
    const { frames } = session();
    const query = frames[7]!;
    const bytes = Buffer.concat([
      pcapHeader(),
      ...frames.slice(0, 7).map((f) => pcapRecord(f)),
      pcapRecord(query.subarray(0, query.length - 4), query.length),
      ...frames.slice(8).map((f) => pcapRecord(f)),
    ]);
    const t = traffic('postgres', SERVER_PORT);
    t.push(bytes);
    expect(counted(t).incompleteReasons.join('; ')).toMatch(/captured cut short/);
  });

  it('a TLS session cannot be read: it is incomplete, never refused as the proxy would', () => {
    const conv = new Conversation(40000, SERVER_PORT);
    const frames = [...conv.open()];
    const request = conv.client(pg.sslRequest());
    const accepted = conv.server(Buffer.from('S'));
    const hello = conv.client(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]));
    frames.push(request.data, accepted.data, hello.data, ...conv.close());
    const t = traffic('postgres', SERVER_PORT);
    t.push(stream(frames));
    const counts = counted(t);
    expect(counts.incomplete).toBe(true);
    expect(counts.incompleteReasons.join('; ')).toMatch(/the server accepted TLS: the encrypted session cannot be counted/);
    expect(counts.setup?.tlsRefused).toBe(0);
  });

  it('a broken pcap stream is said once and stops the reading', () => {
    const t = traffic('postgres', SERVER_PORT);
    t.push(Buffer.alloc(24, 1));
    expect(t.broken).toMatch(/could not be read: not a pcap stream/);
  });
});

describe('capture faults in a window', () => {
  const snap = (faults: string[] | undefined, at: number): WireSnapshot => ({
    proxyId: 'tap',
    protocol: 'postgres',
    takenAtNs: at,
    connections: [],
    ...(faults ? { captureFaults: faults } : {}),
  });

  it('a fault after the window opened makes it incomplete; one from before does not', () => {
    const before = snap(['the kernel dropped 3 captured packet(s)'], 1);
    expect(diffWireSnapshots(before, snap(['the kernel dropped 3 captured packet(s)'], 2)).incomplete).toBe(false);
    const after = diffWireSnapshots(before, snap(['the kernel dropped 3 captured packet(s)', 'tcpdump exited (SIGKILL)'], 2));
    expect(after.incomplete).toBe(true);
    expect(after.incompleteReasons).toEqual(['capture: tcpdump exited (SIGKILL)']);
    expect(diffWireSnapshots(snap(undefined, 1), snap(undefined, 2)).incomplete).toBe(false);
  });
});
