import { WireParseError } from './tally';

/** Link-layer types a capture on a loopback interface may carry (tcpdump -i lo gives EN10MB on Linux). */
export const enum LinkType {
  Null = 0, // BSD loopback: 4-byte address family in host order
  Ethernet = 1, // EN10MB
  Raw = 101, // the IP header first
  LinuxSll = 113, // 16-byte cooked header
  LinuxSll2 = 276, // 20-byte cooked header
}

/** The file's header, then each record's: sizes in bytes. */
const PCAP_GLOBAL_HEADER = 24;
const PCAP_RECORD_HEADER = 16;
/** tcpdump's largest snapshot length: a record longer than this and the file's own is not a record. */
const MAX_RECORD = 262_144;
/** A record's first bytes, handed over in one piece: more than any link, IPv4 and TCP headers together take. */
const RECORD_HEAD = 256;
/** The magic number, written in the capturing host's byte order: micro- or nanosecond time stamps. */
const MAGIC_MICROS = 0xa1b2c3d4;
const MAGIC_NANOS = 0xa1b23c4d;
/** IPv4 behind Ethernet (possibly behind 802.1Q tags), and in a BSD loopback header. */
const ETHERTYPE_IPV4 = 0x0800;
const ETHERTYPE_VLAN = 0x8100;
const AF_INET = 2;
const IPPROTO_TCP = 6;
const IPPROTO_UDP = 17;

/** TCP header flags. */
export const TCP_FIN = 0x01,
  TCP_SYN = 0x02,
  TCP_RST = 0x04,
  TCP_ACK = 0x10;

/**
 * One captured packet as the capture file holds it: its bytes are `bytes[start, end)`, a view of the reader's input
 * (no Buffer made per packet), valid only during the `onRecord` call that hands it over. A record longer than what is
 * left of the chunk it begins in comes in pieces, as the chunks come, so that no record is copied: the first piece
 * (`offset` 0) holds at least the link, IP and TCP headers, each later one the next bytes at `offset`.
 */
export interface PcapRecord {
  /** Capture time in microseconds since the epoch. */
  timeUs: number;
  /** The packet's length on the wire; more than `included` when the capture cut it short. */
  originalLength: number;
  /** The record's captured length: more than `end - start` when it comes in pieces. */
  included: number;
  /** Where `bytes[start]` is within the record's captured bytes. */
  offset: number;
  bytes: Buffer;
  start: number;
  end: number;
}

/** An IPv4 TCP segment; addresses are 32-bit numbers (127.0.0.1 is 0x7f000001). */
export interface TcpSegment {
  kind: 'tcp';
  src: number;
  dst: number;
  srcPort: number;
  dstPort: number;
  seq: number;
  ack: number;
  flags: number;
  /** The payload's first bytes: all of it unless the record comes in pieces. */
  payload: Buffer;
  /** The payload's whole captured length. */
  length: number;
}

export interface UdpDatagram {
  kind: 'udp';
  src: number;
  dst: number;
  srcPort: number;
  dstPort: number;
  payload: Buffer;
  length: number;
}

/** What a packet is, or why it cannot be read as IPv4 TCP/UDP (the capture's filter should keep those out). */
export type DecodedPacket = TcpSegment | UdpDatagram | { kind: 'other'; why: string };

/**
 * Every field any decoded packet has, written in place: a reader that keeps nothing of a packet passes one to
 * {@link decodePacket} for every packet instead of an object made per packet. Fields the kind lacks hold stale values.
 */
export type PacketFields = Omit<TcpSegment, 'kind'> & { kind: DecodedPacket['kind']; why: string };

/** Fields for {@link decodePacket} to fill again and again. */
export function packetFields(): PacketFields {
  return { kind: 'other', src: 0, dst: 0, srcPort: 0, dstPort: 0, seq: 0, ack: 0, flags: 0, payload: EMPTY, length: 0, why: '' };
}

const EMPTY = Buffer.alloc(0);

/** A 32-bit unsigned integer in either byte order, without Buffer's bounds checks (the caller checked). */
function u32(b: Buffer, at: number, le: boolean): number {
  return le
    ? (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16)) + b[at + 3]! * 0x1000000
    : b[at]! * 0x1000000 + ((b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!);
}

function u16be(b: Buffer, at: number): number {
  return (b[at]! << 8) | b[at + 1]!;
}

/**
 * A pcap byte stream (`tcpdump -w -`) read incrementally: the global header once, then one record at a time, in
 * either byte order and with micro- or nanosecond stamps. Throws a WireParseError on bytes no pcap file holds.
 */
export class PcapStreamReader {
  /** A global header, or a record's header and head, begun in an earlier chunk (at most RECORD_HEAD bytes more). */
  #pending: Buffer = EMPTY;
  /** Bytes of the record in pieces still to come. */
  #rest = 0;
  #headerRead = false;
  #littleEndian = true;
  #nanos = false;
  #linkType = -1;
  #snapLength = 0;

  /** The link-layer type from the global header; -1 until it has been read. */
  get linkType(): number {
    return this.#linkType;
  }

  /** Bytes received that do not yet make a whole record or its first piece. */
  get pendingBytes(): number {
    return this.#pending.length;
  }

  push(chunk: Buffer, onRecord: (record: PcapRecord) => void): void {
    let at = this.#rest > 0 ? this.#piece(chunk, 0, onRecord) : 0;
    if (this.#rest > 0) return;
    // A head begun in an earlier chunk is completed from this one's first bytes: only it is copied, never a record.
    while (this.#pending.length > 0) {
      const need = this.#needed(this.#pending);
      if (this.#pending.length < need) {
        const take = Math.min(chunk.length - at, need - this.#pending.length);
        this.#pending = Buffer.concat([this.#pending, chunk.subarray(at, at + take)]);
        at += take;
        if (this.#pending.length < need) return;
        // A record header just completed says how long its head is.
        if (this.#needed(this.#pending) > this.#pending.length) continue;
      }
      const head = this.#pending;
      this.#pending = EMPTY;
      this.#records(head, 0, onRecord);
      if (this.#rest > 0) at = this.#piece(chunk, at, onRecord);
      if (this.#rest > 0) return;
    }
    const end = this.#records(chunk, at, onRecord);
    // What is left is short (a header and less than a head) and copied: the caller may reuse its chunk.
    if (end < chunk.length) this.#pending = Buffer.from(chunk.subarray(end));
  }

  /** How many bytes `head` must hold to end on a global header, a whole record or a record's first piece. */
  #needed(head: Buffer): number {
    if (!this.#headerRead) return PCAP_GLOBAL_HEADER;
    if (head.length < PCAP_RECORD_HEADER) return PCAP_RECORD_HEADER;
    return PCAP_RECORD_HEADER + Math.min(this.#included(head, 0), RECORD_HEAD);
  }

  /** The captured length of the record whose header is at `at`, refused beyond what any capture writes. */
  #included(buf: Buffer, at: number): number {
    const included = u32(buf, at + 8, this.#littleEndian);
    if (included > Math.max(this.#snapLength, MAX_RECORD)) throw new WireParseError(`pcap record of ${included} bytes exceeds the snapshot length`);
    return included;
  }

  /** Hands over the next piece of the record in pieces from `buf[at...]`; returns where its bytes end in `buf`. */
  #piece(buf: Buffer, at: number, onRecord: (record: PcapRecord) => void): number {
    const end = Math.min(buf.length, at + this.#rest);
    if (end === at) return at;
    const record = this.#record;
    record.offset = record.included - this.#rest;
    record.bytes = buf;
    record.start = at;
    record.end = end;
    this.#rest -= end - at;
    onRecord(record);
    record.bytes = EMPTY;
    return end;
  }

  /**
   * Reads the records of `buf` from `at`, the last one's first piece when it holds a head and does not end here;
   * returns where the first record not begun begins.
   */
  #records(buf: Buffer, at: number, onRecord: (record: PcapRecord) => void): number {
    if (!this.#headerRead) {
      if (buf.length - at < PCAP_GLOBAL_HEADER) return at;
      this.#readGlobalHeader(buf.subarray(at, at + PCAP_GLOBAL_HEADER));
      at += PCAP_GLOBAL_HEADER;
    }
    const le = this.#littleEndian;
    const record = this.#record;
    record.bytes = buf;
    record.offset = 0;
    while (buf.length - at >= PCAP_RECORD_HEADER) {
      const included = this.#included(buf, at);
      const start = at + PCAP_RECORD_HEADER;
      const here = buf.length - start;
      if (here < included && here < RECORD_HEAD) break;
      const fraction = u32(buf, at + 4, le);
      record.timeUs = u32(buf, at, le) * 1e6 + (this.#nanos ? Math.floor(fraction / 1000) : fraction);
      record.originalLength = u32(buf, at + 12, le);
      record.included = included;
      record.start = start;
      record.end = start + Math.min(included, here);
      this.#rest = included - (record.end - start);
      onRecord(record);
      at = record.end;
    }
    record.bytes = EMPTY;
    return at;
  }

  /** Handed to every `onRecord` call in turn: nothing is allocated per packet. */
  readonly #record: PcapRecord = { timeUs: 0, originalLength: 0, included: 0, offset: 0, bytes: Buffer.alloc(0), start: 0, end: 0 };

  #readGlobalHeader(buf: Buffer): void {
    const magicLe = buf.readUInt32LE(0);
    const magicBe = buf.readUInt32BE(0);
    if (magicLe === MAGIC_MICROS || magicLe === MAGIC_NANOS) this.#littleEndian = true;
    else if (magicBe === MAGIC_MICROS || magicBe === MAGIC_NANOS) this.#littleEndian = false;
    else throw new WireParseError(`not a pcap stream (magic 0x${magicLe.toString(16)})`);
    const magic = this.#littleEndian ? magicLe : magicBe;
    this.#nanos = magic === MAGIC_NANOS;
    this.#snapLength = this.#littleEndian ? buf.readUInt32LE(16) : buf.readUInt32BE(16);
    this.#linkType = (this.#littleEndian ? buf.readUInt32LE(20) : buf.readUInt32BE(20)) & 0x0fffffff;
    this.#headerRead = true;
  }
}

/** Where the IPv4 header starts in the frame `f[at, end)` of `linkType` (an index into `f`), or a reason it holds none. */
function ipOffset(linkType: number, f: Buffer, at: number, end: number): number | string {
  const length = end - at;
  switch (linkType) {
    case LinkType.Ethernet: {
      let i = at + 12;
      let type = length >= 14 ? u16be(f, i) : -1;
      while (type === ETHERTYPE_VLAN && end >= i + 6) {
        i += 4;
        type = u16be(f, i);
      }
      return type === ETHERTYPE_IPV4 ? i + 2 : `ethertype 0x${type.toString(16)}`;
    }
    case LinkType.LinuxSll:
      return length >= 16 && u16be(f, at + 14) === ETHERTYPE_IPV4 ? at + 16 : 'cooked frame not IPv4';
    case LinkType.LinuxSll2:
      return length >= 20 && u16be(f, at) === ETHERTYPE_IPV4 ? at + 20 : 'cooked v2 frame not IPv4';
    case LinkType.Null:
      // The family is in the capturing host's byte order: either reading says AF_INET.
      return length >= 4 && (u32(f, at, true) === AF_INET || u32(f, at, false) === AF_INET) ? at + 4 : 'loopback frame not IPv4';
    case LinkType.Raw:
      return at;
    default:
      return `link type ${linkType}`;
  }
}

/** Why a frame is not an IPv4 TCP segment or UDP datagram, in `into` when given. */
function notDecoded(into: PacketFields | undefined, why: string): DecodedPacket {
  if (!into) return { kind: 'other', why };
  into.kind = 'other';
  into.why = why;
  into.payload = EMPTY;
  return into as DecodedPacket;
}

/**
 * Decodes one captured frame down to its TCP segment or UDP datagram: `frame[start, end)` holds the frame's first
 * bytes, all of them unless the frame is `captured` bytes long and comes in pieces. The payload is a view of `frame`
 * (a shared empty Buffer when there is none); `length` says how long it is in the whole frame. With `into`, the
 * answer is written there and returned.
 */
export function decodePacket(linkType: number, frame: Buffer, start = 0, end = frame.length, captured = end - start, into?: PacketFields): DecodedPacket {
  const p = into ?? packetFields();
  const ip = ipOffset(linkType, frame, start, end);
  if (typeof ip === 'string') return notDecoded(into, ip);
  if (end < ip + 20 || frame[ip]! >> 4 !== 4) return notDecoded(into, 'not IPv4');
  const headerLength = (frame[ip]! & 0x0f) * 4;
  const totalLength = u16be(frame, ip + 2);
  const fragment = u16be(frame, ip + 6);
  // More-fragments set, or an offset: a piece of a datagram that loopback never splits.
  if ((fragment & 0x3fff) !== 0) return notDecoded(into, 'IPv4 fragment');
  const protocol = frame[ip + 9]!;
  const packetEnd = Math.min(start + captured, ip + totalLength);
  const here = Math.min(end, packetEnd);
  const l4 = ip + headerLength;
  if (protocol === IPPROTO_TCP) {
    if (here < l4 + 20) return notDecoded(into, 'TCP header cut short');
    const dataAt = Math.min(packetEnd, l4 + (frame[l4 + 12]! >> 4) * 4);
    if (dataAt > here) return notDecoded(into, 'TCP header cut short');
    p.kind = 'tcp';
    p.seq = u32(frame, l4 + 4, false);
    p.ack = u32(frame, l4 + 8, false);
    p.flags = frame[l4 + 13]!;
    p.payload = dataAt < here ? frame.subarray(dataAt, here) : EMPTY;
    p.length = packetEnd - dataAt;
  } else if (protocol === IPPROTO_UDP) {
    if (here < l4 + 8) return notDecoded(into, 'UDP header cut short');
    p.kind = 'udp';
    p.payload = frame.subarray(l4 + 8, here);
    p.length = packetEnd - l4 - 8;
  } else return notDecoded(into, `IP protocol ${protocol}`);
  p.src = u32(frame, ip + 12, false);
  p.dst = u32(frame, ip + 16, false);
  p.srcPort = u16be(frame, l4);
  p.dstPort = u16be(frame, l4 + 2);
  if (into) return p as DecodedPacket;
  const { kind, src, dst, srcPort, dstPort, payload, length } = p;
  return kind === 'tcp'
    ? { kind, src, dst, srcPort, dstPort, seq: p.seq, ack: p.ack, flags: p.flags, payload, length }
    : { kind: 'udp', src, dst, srcPort, dstPort, payload, length };
}

/** `127.0.0.1` as the 32-bit number IPv4 headers carry, or null for anything but a dotted IPv4 address. */
export function ipv4Number(address: string): number | null {
  const parts = address.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}
