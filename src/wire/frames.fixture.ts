/**
 * Hand-built protocol frames for the parser tests: each builder writes the bytes the protocol documents, so a test
 * reads as a conversation. Not used by the proxy itself.
 */
import type { WireCounts } from './types';
import type { WireSession } from './tally';

// ---------------------------------------------------------------- MySQL

export const CAP = {
  MYSQL: 0x1,
  CONNECT_WITH_DB: 0x8,
  LOCAL_FILES: 0x80,
  COMPRESS: 0x20,
  PROTOCOL_41: 0x200,
  SSL: 0x800,
  TRANSACTIONS: 0x2000,
  SECURE_CONNECTION: 0x8000,
  MULTI_STATEMENTS: 0x10000,
  MULTI_RESULTS: 0x20000,
  PS_MULTI_RESULTS: 0x40000,
  PLUGIN_AUTH: 0x80000,
  DEPRECATE_EOF: 0x1000000,
} as const;
export const MARIADB_CACHE_METADATA = 0x10;
export const MARIADB_BULK = 0x4;

export const SERVER_CAPS =
  CAP.PROTOCOL_41 |
  CAP.SECURE_CONNECTION |
  CAP.PLUGIN_AUTH |
  CAP.TRANSACTIONS |
  CAP.MULTI_RESULTS |
  CAP.PS_MULTI_RESULTS |
  CAP.MULTI_STATEMENTS |
  CAP.CONNECT_WITH_DB |
  CAP.DEPRECATE_EOF |
  CAP.SSL;

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n);
  return b;
}
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}
function lenenc(n: number): Buffer {
  if (n < 0xfb) return Buffer.from([n]);
  if (n < 0x10000) return Buffer.concat([Buffer.from([0xfc]), u16(n)]);
  const b = Buffer.alloc(4);
  b[0] = 0xfd;
  b.writeUIntLE(n, 1, 3);
  return b;
}
function lenencString(s: string): Buffer {
  const body = Buffer.from(s);
  return Buffer.concat([lenenc(body.length), body]);
}

/** A logical message as packets: payloads of 0xFFFFFF continue, an exact multiple ends with an empty packet. */
export function mysqlPacket(seq: number, payload: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  let s = seq;
  for (;;) {
    const size = Math.min(0xffffff, payload.length - offset);
    const header = Buffer.alloc(4);
    header.writeUIntLE(size, 0, 3);
    header[3] = s & 0xff;
    parts.push(header, payload.subarray(offset, offset + size));
    offset += size;
    s += 1;
    if (size < 0xffffff) break;
  }
  return Buffer.concat(parts);
}

export function greeting(connectionId: number, caps: number = SERVER_CAPS, extended = 0): Buffer {
  const payload = Buffer.concat([
    Buffer.from([10]),
    Buffer.from('5.5.5-10.11.19-MariaDB\0'),
    u32(connectionId),
    Buffer.from('abcdefgh'),
    Buffer.from([0]),
    u16(caps & 0xffff),
    Buffer.from([45]),
    u16(0x0002),
    u16(caps >>> 16),
    Buffer.from([21]),
    Buffer.alloc(6),
    u32(extended),
    Buffer.from('ijklmnopqrst\0'),
    Buffer.from('mysql_native_password\0'),
  ]);
  return mysqlPacket(0, payload);
}

export function handshakeResponse(caps: number, extended = 0, seq = 1): Buffer {
  const payload = Buffer.concat([
    u32(caps),
    u32(0x1000000),
    Buffer.from([45]),
    Buffer.alloc(19),
    u32(extended),
    Buffer.from('root\0'),
    Buffer.from([20]),
    Buffer.alloc(20, 7),
    Buffer.from('test\0'),
    Buffer.from('mysql_native_password\0'),
  ]);
  return mysqlPacket(seq, payload);
}

export function sslRequest(caps: number, seq = 1): Buffer {
  return mysqlPacket(seq, Buffer.concat([u32(caps | CAP.SSL), u32(0x1000000), Buffer.from([45]), Buffer.alloc(23)]));
}

export function ok(seq: number, affectedRows = 0, status = 0x0002, header = 0x00): Buffer {
  return mysqlPacket(seq, Buffer.concat([Buffer.from([header]), lenenc(affectedRows), lenenc(0), u16(status), u16(0)]));
}
export function eof(seq: number, status = 0x0002): Buffer {
  return mysqlPacket(seq, Buffer.concat([Buffer.from([0xfe]), u16(0), u16(status)]));
}
export function err(seq: number, message = 'boom'): Buffer {
  return mysqlPacket(seq, Buffer.concat([Buffer.from([0xff]), u16(1064), Buffer.from('#42000'), Buffer.from(message)]));
}
export function command(code: number, body: Buffer | string = Buffer.alloc(0), seq = 0): Buffer {
  return mysqlPacket(seq, Buffer.concat([Buffer.from([code]), Buffer.from(body)]));
}
export function columnDefinition(seq: number, name = 'a'): Buffer {
  return mysqlPacket(
    seq,
    Buffer.concat([
      lenencString('def'),
      lenencString('test'),
      lenencString('t'),
      lenencString('t'),
      lenencString(name),
      lenencString(name),
      Buffer.from([0x0c]),
      u16(63),
      u32(11),
      Buffer.from([3]),
      u16(0),
      Buffer.from([0]),
      u16(0),
    ]),
  );
}
export function textRow(seq: number, ...values: string[]): Buffer {
  return mysqlPacket(seq, Buffer.concat(values.map(lenencString)));
}
export function binaryRow(seq: number, value: number): Buffer {
  return mysqlPacket(seq, Buffer.concat([Buffer.from([0x00, 0x00]), u32(value)]));
}
export function prepareOk(seq: number, statementId: number, columns: number, params: number): Buffer {
  return mysqlPacket(seq, Buffer.concat([Buffer.from([0x00]), u32(statementId), u16(columns), u16(params), Buffer.from([0]), u16(0)]));
}
export function executeCommand(statementId: number, flags = 0): Buffer {
  return command(0x17, Buffer.concat([u32(statementId), Buffer.from([flags]), u32(1), Buffer.from([0, 1, 3, 0]), u32(42)]));
}
/** A column-count packet; with `metadataFlag` the MariaDB cached-metadata byte follows. */
export function columnCount(seq: number, n: number, metadataFlag?: 0 | 1): Buffer {
  return mysqlPacket(seq, Buffer.concat([lenenc(n), metadataFlag === undefined ? Buffer.alloc(0) : Buffer.from([metadataFlag])]));
}

// ---------------------------------------------------------------- PostgreSQL

export function pgMessage(type: string, body: Buffer | string = Buffer.alloc(0)): Buffer {
  const b = Buffer.from(body);
  const header = Buffer.alloc(5);
  header[0] = type.charCodeAt(0);
  header.writeUInt32BE(b.length + 4, 1);
  return Buffer.concat([header, b]);
}
function be32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}
function be16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeInt16BE(n);
  return b;
}
function untyped(body: Buffer): Buffer {
  return Buffer.concat([be32(body.length + 4), body]);
}
const cstr = (s: string): Buffer => Buffer.from(`${s}\0`);

export const pg = {
  startup: (user = 'postgres', database = 'test'): Buffer =>
    untyped(Buffer.concat([be32(196608), cstr('user'), cstr(user), cstr('database'), cstr(database), Buffer.from([0])])),
  sslRequest: (): Buffer => untyped(be32(80877103)),
  gssencRequest: (): Buffer => untyped(be32(80877104)),
  cancelRequest: (pid: number, key: number): Buffer => untyped(Buffer.concat([be32(80877102), be32(pid), be32(key)])),
  authOk: (): Buffer => pgMessage('R', be32(0)),
  authSasl: (): Buffer => pgMessage('R', Buffer.concat([be32(10), cstr('SCRAM-SHA-256'), Buffer.from([0])])),
  password: (data = 'secret'): Buffer => pgMessage('p', cstr(data)),
  parameterStatus: (name: string, value: string): Buffer => pgMessage('S', Buffer.concat([cstr(name), cstr(value)])),
  backendKeyData: (pid: number, key: number): Buffer => pgMessage('K', Buffer.concat([be32(pid), be32(key)])),
  ready: (status = 'I'): Buffer => pgMessage('Z', status),
  query: (sql: string): Buffer => pgMessage('Q', cstr(sql)),
  parse: (name: string, sql: string): Buffer => pgMessage('P', Buffer.concat([cstr(name), cstr(sql), be16(0)])),
  bind: (statement: string, value: string): Buffer => {
    const v = Buffer.from(value);
    return pgMessage('B', Buffer.concat([cstr(''), cstr(statement), be16(0), be16(1), be32(v.length), v, be16(0)]));
  },
  describePortal: (): Buffer => pgMessage('D', Buffer.concat([Buffer.from('P'), cstr('')])),
  execute: (): Buffer => pgMessage('E', Buffer.concat([cstr(''), be32(0)])),
  sync: (): Buffer => pgMessage('S'),
  flush: (): Buffer => pgMessage('H'),
  close: (): Buffer => pgMessage('C', Buffer.concat([Buffer.from('S'), cstr('s1')])),
  terminate: (): Buffer => pgMessage('X'),
  parseComplete: (): Buffer => pgMessage('1'),
  bindComplete: (): Buffer => pgMessage('2'),
  closeComplete: (): Buffer => pgMessage('3'),
  noData: (): Buffer => pgMessage('n'),
  rowDescription: (): Buffer => pgMessage('T', Buffer.concat([be16(1), cstr('a'), be32(0), be16(0), be32(23), be16(4), be32(-1), be16(0)])),
  dataRow: (value: string): Buffer => {
    const v = Buffer.from(value);
    return pgMessage('D', Buffer.concat([be16(1), be32(v.length), v]));
  },
  commandComplete: (tag: string): Buffer => pgMessage('C', cstr(tag)),
  error: (message = 'boom'): Buffer =>
    pgMessage('E', Buffer.concat([Buffer.from('S'), cstr('ERROR'), Buffer.from('C'), cstr('42601'), Buffer.from('M'), cstr(message), Buffer.from([0])])),
  notice: (): Buffer => pgMessage('N', Buffer.concat([Buffer.from('S'), cstr('NOTICE'), Buffer.from([0])])),
  copyInResponse: (): Buffer => pgMessage('G', Buffer.concat([Buffer.from([0]), be16(1), be16(0)])),
  copyData: (data: string): Buffer => pgMessage('d', data),
  copyDone: (): Buffer => pgMessage('c'),
};

// ---------------------------------------------------------------- driving a session

/** One direction's bytes in a conversation, in the order they cross. */
export interface Turn {
  from: 'client' | 'server';
  bytes: Buffer;
}

/** Counts that must not depend on how the stream was cut (client write bursts do, on purpose). */
export type SplitInvariantCounts = Omit<WireCounts, 'clientWrites'>;

function invariant(counts: WireCounts): SplitInvariantCounts {
  const { clientWrites: _ignored, ...rest } = counts;
  return rest;
}

/** Feeds each turn to a fresh session, each turn cut into the given pieces; returns counts and what was forwarded. */
export function drive(
  makeSession: () => WireSession,
  turns: readonly Turn[],
  cut: (turn: Turn, turnIndex: number) => Buffer[] = (t) => [t.bytes],
): { counts: WireCounts; readonly toServer: Buffer; readonly toClient: Buffer; readonly replies: Buffer } {
  const session = makeSession();
  const toServer: Buffer[] = [];
  const toClient: Buffer[] = [];
  const replies: Buffer[] = [];
  turns.forEach((turn, index) => {
    for (const piece of cut(turn, index)) {
      const out = turn.from === 'client' ? session.fromClient(piece, (b) => replies.push(b)) : session.fromServer(piece);
      if (out) (turn.from === 'client' ? toServer : toClient).push(out);
    }
  });
  // Joined only when asked: the split tests drive 22 MB streams hundreds of times and never look.
  return {
    counts: session.tally.toCounts(session.unanswered()),
    get toServer() {
      return Buffer.concat(toServer);
    },
    get toClient() {
      return Buffer.concat(toClient);
    },
    get replies() {
      return Buffer.concat(replies);
    },
  };
}

/**
 * Runs the conversation whole, then cut at every global byte offset (the turn holding that offset is split in two),
 * then byte by byte; every run must give the same split-invariant counts. Returns the whole-stream counts.
 */
export function countsAtEverySplit(
  makeSession: () => WireSession,
  turns: readonly Turn[],
  offsets?: readonly number[],
): { whole: WireCounts; variants: { label: string; counts: SplitInvariantCounts }[] } {
  const whole = drive(makeSession, turns).counts;
  const starts: number[] = [];
  let total = 0;
  for (const t of turns) {
    starts.push(total);
    total += t.bytes.length;
  }
  const variants: { label: string; counts: SplitInvariantCounts }[] = [];
  const cutAt = offsets ?? Array.from({ length: total + 1 }, (_, k) => k);
  for (const k of cutAt) {
    const counts = drive(makeSession, turns, (t, i) => {
      const local = k - (starts[i] as number);
      if (local <= 0 || local >= t.bytes.length) return [t.bytes];
      return [t.bytes.subarray(0, local), t.bytes.subarray(local)];
    }).counts;
    variants.push({ label: `cut at ${k}`, counts: invariant(counts) });
  }
  if (!offsets) {
    const counts = drive(makeSession, turns, (t) => Array.from(t.bytes, (_, j) => t.bytes.subarray(j, j + 1))).counts;
    variants.push({ label: 'byte by byte', counts: invariant(counts) });
  }
  return { whole, variants };
}

export { invariant as splitInvariant };
