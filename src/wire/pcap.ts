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

/** One captured packet as the capture file holds it. */
export interface PcapRecord {
  /** Capture time in microseconds since the epoch. */
  timeUs: number;
  /** The packet's length on the wire; more than `data.length` when the capture cut it short. */
  originalLength: number;
  data: Buffer;
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
  payload: Buffer;
}

export interface UdpDatagram {
  kind: 'udp';
  src: number;
  dst: number;
  srcPort: number;
  dstPort: number;
  payload: Buffer;
}

/** What a packet is, or why it cannot be read as IPv4 TCP/UDP (the capture's filter should keep those out). */
export type DecodedPacket = TcpSegment | UdpDatagram | { kind: 'other'; why: string };

/**
 * A pcap byte stream (`tcpdump -w -`) read incrementally: the global header once, then one record at a time, in
 * either byte order and with micro- or nanosecond stamps. Throws a WireParseError on bytes no pcap file holds.
 */
export class PcapStreamReader {
  #pending: Buffer = Buffer.alloc(0);
  #headerRead = false;
  #littleEndian = true;
  #nanos = false;
  #linkType = -1;
  #snapLength = 0;

  /** The link-layer type from the global header; -1 until it has been read. */
  get linkType(): number {
    return this.#linkType;
  }

  /** Bytes received that do not yet make a whole record. */
  get pendingBytes(): number {
    return this.#pending.length;
  }

  push(chunk: Buffer, onRecord: (record: PcapRecord) => void): void {
    const buf = this.#pending.length > 0 ? Buffer.concat([this.#pending, chunk]) : chunk;
    let at = 0;
    if (!this.#headerRead) {
      if (buf.length < PCAP_GLOBAL_HEADER) {
        this.#pending = Buffer.from(buf);
        return;
      }
      this.#readGlobalHeader(buf);
      at = PCAP_GLOBAL_HEADER;
    }
    const le = this.#littleEndian;
    while (buf.length - at >= PCAP_RECORD_HEADER) {
      const seconds = le ? buf.readUInt32LE(at) : buf.readUInt32BE(at);
      const fraction = le ? buf.readUInt32LE(at + 4) : buf.readUInt32BE(at + 4);
      const included = le ? buf.readUInt32LE(at + 8) : buf.readUInt32BE(at + 8);
      const original = le ? buf.readUInt32LE(at + 12) : buf.readUInt32BE(at + 12);
      if (included > Math.max(this.#snapLength, 262_144)) throw new WireParseError(`pcap record of ${included} bytes exceeds the snapshot length`);
      if (buf.length - at - PCAP_RECORD_HEADER < included) break;
      const start = at + PCAP_RECORD_HEADER;
      onRecord({
        timeUs: seconds * 1e6 + (this.#nanos ? Math.floor(fraction / 1000) : fraction),
        originalLength: original,
        data: buf.subarray(start, start + included),
      });
      at = start + included;
    }
    // What is left is copied: the records handed out may hold views of `buf`, which must stay as they were.
    this.#pending = at < buf.length ? Buffer.from(buf.subarray(at)) : Buffer.alloc(0);
  }

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

/** Where the IPv4 header starts in a frame of `linkType`, or a reason it holds none. */
function ipOffset(linkType: number, frame: Buffer): number | string {
  switch (linkType) {
    case LinkType.Ethernet: {
      let at = 12;
      let type = frame.length >= 14 ? frame.readUInt16BE(at) : -1;
      while (type === ETHERTYPE_VLAN && frame.length >= at + 6) {
        at += 4;
        type = frame.readUInt16BE(at);
      }
      return type === ETHERTYPE_IPV4 ? at + 2 : `ethertype 0x${type.toString(16)}`;
    }
    case LinkType.LinuxSll:
      return frame.length >= 16 && frame.readUInt16BE(14) === ETHERTYPE_IPV4 ? 16 : 'cooked frame not IPv4';
    case LinkType.LinuxSll2:
      return frame.length >= 20 && frame.readUInt16BE(0) === ETHERTYPE_IPV4 ? 20 : 'cooked v2 frame not IPv4';
    case LinkType.Null:
      // The family is in the capturing host's byte order: either reading says AF_INET.
      return frame.length >= 4 && (frame.readUInt32LE(0) === AF_INET || frame.readUInt32BE(0) === AF_INET) ? 4 : 'loopback frame not IPv4';
    case LinkType.Raw:
      return 0;
    default:
      return `link type ${linkType}`;
  }
}

/** Decodes one captured frame down to its TCP segment or UDP datagram. */
export function decodePacket(linkType: number, frame: Buffer): DecodedPacket {
  const ip = ipOffset(linkType, frame);
  if (typeof ip === 'string') return { kind: 'other', why: ip };
  if (frame.length < ip + 20 || frame[ip]! >> 4 !== 4) return { kind: 'other', why: 'not IPv4' };
  const headerLength = (frame[ip]! & 0x0f) * 4;
  const totalLength = frame.readUInt16BE(ip + 2);
  const fragment = frame.readUInt16BE(ip + 6);
  // More-fragments set, or an offset: a piece of a datagram that loopback never splits.
  if ((fragment & 0x3fff) !== 0) return { kind: 'other', why: 'IPv4 fragment' };
  const protocol = frame[ip + 9]!;
  const src = frame.readUInt32BE(ip + 12);
  const dst = frame.readUInt32BE(ip + 16);
  const end = Math.min(frame.length, ip + totalLength);
  const l4 = ip + headerLength;
  if (protocol === IPPROTO_TCP) {
    if (end < l4 + 20) return { kind: 'other', why: 'TCP header cut short' };
    const dataOffset = (frame[l4 + 12]! >> 4) * 4;
    return {
      kind: 'tcp',
      src,
      dst,
      srcPort: frame.readUInt16BE(l4),
      dstPort: frame.readUInt16BE(l4 + 2),
      seq: frame.readUInt32BE(l4 + 4),
      ack: frame.readUInt32BE(l4 + 8),
      flags: frame[l4 + 13]!,
      payload: frame.subarray(Math.min(end, l4 + dataOffset), end),
    };
  }
  if (protocol === IPPROTO_UDP) {
    if (end < l4 + 8) return { kind: 'other', why: 'UDP header cut short' };
    return { kind: 'udp', src, dst, srcPort: frame.readUInt16BE(l4), dstPort: frame.readUInt16BE(l4 + 2), payload: frame.subarray(l4 + 8, end) };
  }
  return { kind: 'other', why: `IP protocol ${protocol}` };
}

/** `127.0.0.1` as the 32-bit number IPv4 headers carry, or null for anything but a dotted IPv4 address. */
export function ipv4Number(address: string): number | null {
  const parts = address.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}
