import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN } from './pcap';

// Captures for the passive wire's tests: a psql and a mariadb CLI session recorded with tcpdump (SCRAM and
// mysql_native_password, no password in clear), and hand-made frames for retransmits, reordering, holes and resets.

/** psql -c 'SELECT 1' -c 'SELECT 2' against PostgreSQL 15 on 127.0.0.1:37219, PGSSLMODE=disable. */
export const RECORDED_PSQL = { serverPort: 37219, linkType: 1 };
/** mariadb -e 'SELECT 1; SELECT 2' against MariaDB 10.11 on 127.0.0.1:35359. */
export const RECORDED_MARIADB = { serverPort: 35359, linkType: 1 };

export const RECORDED_PSQL_BASE64 = [
  '1MOyoQIABAAAAAAAAAAAAAAABAABAAAAayQVa7yJDgBKAAAASgAAAAAAAAAAAAAAAAAAAAgARQAAPPuLQABABkEufwAAAX8AAAHIJJFjxbCNCw',
  'AAAACgAv/X/jAAAAIE/9cEAggKdfs4TwAAAAABAwMKayQVa8qJDgBKAAAASgAAAAAAAAAAAAAAAAAAAAgARQAAPAAAQABABjy6fwAAAX8AAAGR',
  'Y8gkm4obvcWwjQygEv/L/jAAAAIE/9cEAggKNoAHA3X7OE8BAwMKayQVa9aJDgBCAAAAQgAAAAAAAAAAAAAAAAAAAAgARQAANPuMQABABkE1fw',
  'AAAX8AAAHIJJFjxbCNDJuKG76AEABA/igAAAEBCAp1+zhPNoAHA2skFWuNjw4AgQAAAIEAAAAAAAAAAAAAAAAAAAAIAEUAAHP7jUAAQAZA9X8A',
  'AAF/AAAByCSRY8WwjQybihu+gBgAQP5nAAABAQgKdfs4UDaABwMAAAA/AAMAAHVzZXIAcG9zdGdyZXMAZGF0YWJhc2UAc3FsdGFsbHkAYXBwbG',
  'ljYXRpb25fbmFtZQBwc3FsAABrJBVrlY8OAEIAAABCAAAAAAAAAAAAAAAAAAAACABFAAA0Hg9AAEAGHrN/AAABfwAAAZFjyCSbihu+xbCNS4AQ',
  'AED+KAAAAQEICjaABwR1+zhQayQVa0mSDgBaAAAAWgAAAAAAAAAAAAAAAAAAAAgARQAATB4QQABABh6afwAAAX8AAAGRY8gkm4obvsWwjUuAGA',
  'BA/kAAAAEBCAo2gAcFdfs4UFIAAAAXAAAAClNDUkFNLVNIQS0yNTYAAGskFWtQkg4AQgAAAEIAAAAAAAAAAAAAAAAAAAAIAEUAADT7jkAAQAZB',
  'M38AAAF/AAAByCSRY8WwjUubihvWgBAAQP4oAAABAQgKdfs4UTaABwVrJBVrB5cOAHkAAAB5AAAAAAAAAAAAAAAAAAAACABFAABr+49AAEAGQP',
  't/AAABfwAAAcgkkWPFsI1Lm4ob1oAYAED+XwAAAQEICnX7OFI2gAcFcAAAADZTQ1JBTS1TSEEtMjU2AAAAACBuLCxuPSxyPVFzZlFyVjdwYWRv',
  'YjNaK1NpV25mbC9UMGskFWsolw4AnwAAAJ8AAAAAAAAAAAAAAAAAAAAIAEUAAJEeEUAAQAYeVH8AAAF/AAABkWPIJJuKG9bFsI2CgBgAQP6FAA',
  'ABAQgKNoAHBnX7OFJSAAAAXAAAAAtyPVFzZlFyVjdwYWRvYjNaK1NpV25mbC9UMG1MM3RqKzNzSVBQVnVUQnRkY0JIb2Z0cCxzPS9FbFJ1Q2tN',
  'WGZLd3ExRXNUOGJJc2c9PSxpPTQwOTZrJBVr2KMOAK8AAACvAAAAAAAAAAAAAAAAAAAACABFAACh+5BAAEAGQMR/AAABfwAAAcgkkWPFsI2Cm4',
  'ocM4AYAED+lQAAAQEICnX7OFU2gAcGcAAAAGxjPWJpd3Mscj1Rc2ZRclY3cGFkb2IzWitTaVduZmwvVDBtTDN0aiszc0lQUFZ1VEJ0ZGNCSG9m',
  'dHAscD15Ung1VzExMDhkZGVxTTVFMGZIT2VocWRjSmtOd2pNQWUzbGtRZ2xTSGpnPWskFWvtpw4AEwIAABMCAAAAAAAAAAAAAAAAAAAIAEUAAg',
  'UeEkAAQAYc338AAAF/AAABkWPIJJuKHDPFsI3vgBgAQP/5AAABAQgKNoAHCnX7OFVSAAAANgAAAAx2PXZnM1graUxYMlZ1QkFIYS9EYVMvZkpL',
  'ek1yTjd3TmRwTWJlKzY4ait0NXc9UgAAAAgAAAAAUwAAABphcHBsaWNhdGlvbl9uYW1lAHBzcWwAUwAAABljbGllbnRfZW5jb2RpbmcAVVRGOA',
  'BTAAAAF0RhdGVTdHlsZQBJU08sIE1EWQBTAAAAJmRlZmF1bHRfdHJhbnNhY3Rpb25fcmVhZF9vbmx5AG9mZgBTAAAAF2luX2hvdF9zdGFuZGJ5',
  'AG9mZgBTAAAAGWludGVnZXJfZGF0ZXRpbWVzAG9uAFMAAAAbSW50ZXJ2YWxTdHlsZQBwb3N0Z3JlcwBTAAAAFGlzX3N1cGVydXNlcgBvbgBTAA',
  'AAGXNlcnZlcl9lbmNvZGluZwBVVEY4AFMAAAAyc2VydmVyX3ZlcnNpb24AMTUuMjAgKERlYmlhbiAxNS4yMC0wK2RlYjEydTEpAFMAAAAjc2Vz',
  'c2lvbl9hdXRob3JpemF0aW9uAHBvc3RncmVzAFMAAAAjc3RhbmRhcmRfY29uZm9ybWluZ19zdHJpbmdzAG9uAFMAAAARVGltZVpvbmUAVVRDAE',
  'sAAAAMAAAhkCjOaStaAAAABUlrJBVrO6gOAFAAAABQAAAAAAAAAAAAAAAAAAAACABFAABC+5FAAEAGQSJ/AAABfwAAAcgkkWPFsI3vm4oeBIAY',
  'AED+NgAAAQEICnX7OFY2gAcKUQAAAA1TRUxFQ1QgMQBrJBVrQakOAIQAAACEAAAAAAAAAAAAAAAAAAAACABFAAB2HhNAAEAGHm1/AAABfwAAAZ',
  'FjyCSbih4ExbCN/YAYAED+agAAAQEICjaABwt1+zhWVAAAACEAAT9jb2x1bW4/AAAAAAAAAAAAABcABP////8AAEQAAAALAAEAAAABMUMAAAAN',
  'U0VMRUNUIDEAWgAAAAVJayQVa5qpDgBQAAAAUAAAAAAAAAAAAAAAAAAAAAgARQAAQvuSQABABkEhfwAAAX8AAAHIJJFjxbCN/ZuKHkaAGABA/j',
  'YAAAEBCAp1+zhXNoAHC1EAAAANU0VMRUNUIDIAayQVa7WpDgCEAAAAhAAAAAAAAAAAAAAAAAAAAAgARQAAdh4UQABABh5sfwAAAX8AAAGRY8gk',
  'm4oeRsWwjguAGABA/moAAAEBCAo2gAcLdfs4V1QAAAAhAAE/Y29sdW1uPwAAAAAAAAAAAAAXAAT/////AABEAAAACwABAAAAATJDAAAADVNFTE',
  'VDVCAxAFoAAAAFSWskFWvDqQ4ARwAAAEcAAAAAAAAAAAAAAAAAAAAIAEUAADn7k0AAQAZBKX8AAAF/AAAByCSRY8Wwjgubih6IgBgAQP4tAAAB',
  'AQgKdfs4VzaABwtYAAAABGskFWvIqQ4AQgAAAEIAAAAAAAAAAAAAAAAAAAAIAEUAADT7lEAAQAZBLX8AAAF/AAAByCSRY8WwjhCbih6IgBEAQP',
  '4oAAABAQgKdfs4VzaABwtrJBVr8LMOAEIAAABCAAAAAAAAAAAAAAAAAAAACABFAAA0HhVAAEAGHq1/AAABfwAAAZFjyCSbih6IxbCOEYARAED+',
  'KAAAAQEICjaABw11+zhXayQVawO0DgBCAAAAQgAAAAAAAAAAAAAAAAAAAAgARQAANPuVQABABkEsfwAAAX8AAAHIJJFjxbCOEZuKHomAEABA/i',
  'gAAAEBCAp1+zhZNoAHDQ==',
].join('');

export const RECORDED_MARIADB_BASE64 = [
  '1MOyoQIABAAAAAAAAAAAAAAABAABAAAAbyQVa5tECQBKAAAASgAAAAAAAAAAAAAAAAAAAAgARQAAPPUZQABABkegfwAAAX8AAAHSfIofzK8aiw',
  'AAAACgAv/X/jAAAAIE/9cEAggKcUHSnwAAAAABAwMKbyQVa6pECQBKAAAASgAAAAAAAAAAAAAAAAAAAAgARQAAPAAAQABABjy6fwAAAX8AAAGK',
  'H9J8tTS1N8yvGoygEv/L/jAAAAIE/9cEAggKEF881nFB0p8BAwMKbyQVa7VECQBCAAAAQgAAAAAAAAAAAAAAAAAAAAgARQAANPUaQABABkenfw',
  'AAAX8AAAHSfIofzK8ajLU0tTiAEABA/igAAAEBCApxQdKfEF881m8kFWuqRQkAqgAAAKoAAAAAAAAAAAAAAAAAAAAIAEUIAJxBzEAAQAb6hX8A',
  'AAF/AAABih/SfLU0tTjMrxqMgBgAQP6QAAABAQgKEF8813FB0p9kAAAACjUuNS41LTEwLjExLjE5LU1hcmlhREItMCtkZWIxMnUxAAYAAABpOH',
  'l8JT1DeAD+9wgCAP+BFQAAAAAAAB0AAABTdHBWPnFBL2c6KmQAbXlzcWxfbmF0aXZlX3Bhc3N3b3JkAG8kFWuvRQkAQgAAAEIAAAAAAAAAAAAA',
  'AAAAAAAIAEUIADT1G0AAQAZHnn8AAAF/AAAB0nyKH8yvGoy1NLWggBAAQP4oAAABAQgKcUHSoBBfPNdvJBVr1EUJAB4BAAAeAQAAAAAAAAAAAA',
  'AAAAAACABFCAEQ9RxAAEAGRsF/AAABfwAAAdJ8ih/MrxqMtTS1oIAYAED/BAAAAQEICnFB0qAQXzzX2AAAAYyivwAAABAAIQAAAAAAAAAAAAAA',
  'AAAAAAAAAAAdAAAAcm9vdAAUL7qCaie5LAIOMXgC1vMUIT0V20NzcWx0YWxseQBteXNxbF9uYXRpdmVfcGFzc3dvcmQAfgNfb3MFTGludXgMX2',
  'NsaWVudF9uYW1lCmxpYm1hcmlhZGIEX3BpZAQ4NjczD19jbGllbnRfdmVyc2lvbgYzLjMuMjAJX3BsYXRmb3JtBng4Nl82NAxwcm9ncmFtX25h',
  'bWUFbXlzcWwMX3NlcnZlcl9ob3N0CTEyNy4wLjAuMW8kFWvWRQkAQgAAAEIAAAAAAAAAAAAAAAAAAAAIAEUIADRBzUAAQAb67H8AAAF/AAABih',
  '/SfLU0taDMrxtogBAAQP4oAAABAQgKEF8813FB0qBvJBVrAUYJAFoAAABaAAAAAAAAAAAAAAAAAAAACABFCABMQc5AAEAG+tN/AAABfwAAAYof',
  '0ny1NLWgzK8baIAYAED+QAAAAQEIChBfPNdxQdKgFAAAAgAAAAJAAAAACwEJCHNxbHRhbGx5byQVa59LCQBPAAAATwAAAAAAAAAAAAAAAAAAAA',
  'gARQgAQfUdQABABkePfwAAAX8AAAHSfIofzK8baLU0tbiAGABA/jUAAAEBCApxQdKhEF881wkAAAADU0VMRUNUIDFvJBVrHEwJAHwAAAB8AAAA',
  'AAAAAAAAAAAAAAAACABFCABuQc9AAEAG+rB/AAABfwAAAYof0ny1NLW4zK8bdYAYAED+YgAAAQEIChBfPNhxQdKhAgAAAQEBGAAAAgNkZWYAAA',
  'ABMQAADD8AAQAAAAOBAAAAAAUAAAP+AAACAAIAAAQBMQUAAAX+AAACAG8kFWtaTAkATwAAAE8AAAAAAAAAAAAAAAAAAAAIAEUIAEH1HkAAQAZH',
  'jn8AAAF/AAAB0nyKH8yvG3W1NLXygBgAQP41AAABAQgKcUHSoRBfPNgJAAAAA1NFTEVDVCAybyQVa2ZMCQB8AAAAfAAAAAAAAAAAAAAAAAAAAA',
  'gARQgAbkHQQABABvqvfwAAAX8AAAGKH9J8tTS18syvG4KAGABA/mIAAAEBCAoQXzzYcUHSoQIAAAEBARgAAAIDZGVmAAAAATIAAAw/AAEAAAAD',
  'gQAAAAAFAAAD/gAAAgACAAAEATIFAAAF/gAAAgBvJBVrb0wJAEcAAABHAAAAAAAAAAAAAAAAAAAACABFCAA59R9AAEAGR5V/AAABfwAAAdJ8ih',
  '/MrxuCtTS2LIAYAED+LQAAAQEICnFB0qEQXzzYAQAAAAFvJBVrdEwJAEIAAABCAAAAAAAAAAAAAAAAAAAACABFCAA09SBAAEAGR5l/AAABfwAA',
  'AdJ8ih/MrxuHtTS2LIARAED+KAAAAQEICnFB0qEQXzzYbyQVaw1PCQBCAAAAQgAAAAAAAAAAAAAAAAAAAAgARQgANEHRQABABvrofwAAAX8AAA',
  'GKH9J8tTS2LMyvG4iAEQBA/igAAAEBCAoQXzzZcUHSoW8kFWsbTwkAQgAAAEIAAAAAAAAAAAAAAAAAAAAIAEUIADT1IUAAQAZHmH8AAAF/AAAB',
  '0nyKH8yvG4i1NLYtgBAAQP4oAAABAQgKcUHSohBfPNk=',
].join('');

export const LOOPBACK = 0x7f000001;

/** The pcap global header: little-endian, microsecond stamps, the given link type. */
export function pcapHeader(linkType = 1, bigEndian = false): Buffer {
  const b = Buffer.alloc(24);
  const u32 = (v: number, at: number): number => (bigEndian ? b.writeUInt32BE(v, at) : b.writeUInt32LE(v, at));
  const u16 = (v: number, at: number): number => (bigEndian ? b.writeUInt16BE(v, at) : b.writeUInt16LE(v, at));
  u32(0xa1b2c3d4, 0);
  u16(2, 4);
  u16(4, 6);
  u32(262144, 16);
  u32(linkType, 20);
  return b;
}

/** One pcap record around `frame`; `originalLength` larger than the frame says the capture cut it. */
export function pcapRecord(frame: Buffer, originalLength = frame.length, bigEndian = false): Buffer {
  const h = Buffer.alloc(16);
  const u32 = (v: number, at: number): number => (bigEndian ? h.writeUInt32BE(v, at) : h.writeUInt32LE(v, at));
  u32(1_700_000_000, 0);
  u32(0, 4);
  u32(frame.length, 8);
  u32(originalLength, 12);
  return Buffer.concat([h, frame]);
}

/** An IPv4 packet carrying `l4` (protocol 6 TCP, 17 UDP) from `src` to `dst`. */
export function ipv4(protocol: number, src: number, dst: number, l4: Buffer): Buffer {
  const ip = Buffer.alloc(20);
  ip[0] = 0x45;
  ip.writeUInt16BE(20 + l4.length, 2);
  ip.writeUInt16BE(0x4000, 6);
  ip[8] = 64;
  ip[9] = protocol;
  ip.writeUInt32BE(src, 12);
  ip.writeUInt32BE(dst, 16);
  return Buffer.concat([ip, l4]);
}

/** A TCP segment (20-byte header) with its payload. */
export function tcp(srcPort: number, dstPort: number, seq: number, ack: number, flags: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(20);
  h.writeUInt16BE(srcPort, 0);
  h.writeUInt16BE(dstPort, 2);
  h.writeUInt32BE(seq >>> 0, 4);
  h.writeUInt32BE(ack >>> 0, 8);
  h[12] = 5 << 4;
  h[13] = flags;
  h.writeUInt16BE(65535, 14);
  return Buffer.concat([h, payload]);
}

export function udp(srcPort: number, dstPort: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt16BE(srcPort, 0);
  h.writeUInt16BE(dstPort, 2);
  h.writeUInt16BE(8 + payload.length, 4);
  return Buffer.concat([h, payload]);
}

/** The frame of an IPv4 packet under each link type a loopback capture may use. */
export function linkFrame(linkType: number, packet: Buffer): Buffer {
  switch (linkType) {
    case 0:
      return Buffer.concat([Buffer.from([2, 0, 0, 0]), packet]);
    case 1:
      return Buffer.concat([Buffer.alloc(12), Buffer.from([0x08, 0x00]), packet]);
    case 113:
      return Buffer.concat([Buffer.alloc(14), Buffer.from([0x08, 0x00]), packet]);
    case 276:
      return Buffer.concat([Buffer.from([0x08, 0x00]), Buffer.alloc(18), packet]);
    default:
      return packet;
  }
}

/** Push: the segment ends a write. */
const PSH = 0x08;

/**
 * One TCP conversation on loopback between a client port and a server port, as Ethernet frames: each call returns
 * the frame and moves that side's sequence number on, as the kernel would.
 */
export class Conversation {
  clientSeq: number;
  serverSeq: number;
  constructor(
    readonly clientPort: number,
    readonly serverPort: number,
    clientIsn = 1000,
    serverIsn = 0xfffffff0,
  ) {
    this.clientSeq = clientIsn;
    this.serverSeq = serverIsn;
  }
  #frame(fromClient: boolean, seq: number, ack: number, flags: number, payload?: Buffer): Buffer {
    const [sp, dp] = fromClient ? [this.clientPort, this.serverPort] : [this.serverPort, this.clientPort];
    return linkFrame(1, ipv4(6, LOOPBACK, LOOPBACK, tcp(sp, dp, seq, ack, flags, payload)));
  }
  /** SYN, SYN-ACK, ACK. */
  open(): Buffer[] {
    const frames = [
      this.#frame(true, this.clientSeq, 0, TCP_SYN),
      this.#frame(false, this.serverSeq, this.clientSeq + 1, TCP_SYN | TCP_ACK),
      this.#frame(true, this.clientSeq + 1, this.serverSeq + 1, TCP_ACK),
    ];
    this.clientSeq = (this.clientSeq + 1) >>> 0;
    this.serverSeq = (this.serverSeq + 1) >>> 0;
    return frames;
  }
  /** The client's bytes, and the server's ACK of them. */
  client(payload: Buffer): { data: Buffer; ack: Buffer } {
    const data = this.#frame(true, this.clientSeq, this.serverSeq, PSH | TCP_ACK, payload);
    this.clientSeq = (this.clientSeq + payload.length) >>> 0;
    return { data, ack: this.#frame(false, this.serverSeq, this.clientSeq, TCP_ACK) };
  }
  server(payload: Buffer): { data: Buffer; ack: Buffer } {
    const data = this.#frame(false, this.serverSeq, this.clientSeq, PSH | TCP_ACK, payload);
    this.serverSeq = (this.serverSeq + payload.length) >>> 0;
    return { data, ack: this.#frame(true, this.clientSeq, this.serverSeq, TCP_ACK) };
  }
  /** Client FIN, server FIN, client ACK. */
  close(): Buffer[] {
    const frames = [
      this.#frame(true, this.clientSeq, this.serverSeq, TCP_FIN | TCP_ACK),
      this.#frame(false, this.serverSeq, this.clientSeq + 1, TCP_FIN | TCP_ACK),
      this.#frame(true, this.clientSeq + 1, this.serverSeq + 1, TCP_ACK),
    ];
    this.clientSeq = (this.clientSeq + 1) >>> 0;
    this.serverSeq = (this.serverSeq + 1) >>> 0;
    return frames;
  }
  reset(fromClient: boolean): Buffer {
    return this.#frame(fromClient, fromClient ? this.clientSeq : this.serverSeq, 0, TCP_RST);
  }
}
