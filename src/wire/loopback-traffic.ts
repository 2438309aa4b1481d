import { WIRE_SESSIONS } from './protocols';
import { decodePacket, packetFields, PcapStreamReader, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN } from './pcap';
import type { TcpSegment } from './pcap';
import { connectionRecord } from './tally';
import type { WireProtocol, WireSession } from './tally';
import { MAX_HELD_BYTES, TcpDirection } from './tcp-stream';
import type { WireConnection } from './types';

/**
 * Whose a captured connection is: this process's own (a probe), another process's, or `unknown` when its socket was
 * gone by the time the capture was read; such a connection is counted as another process's (see passive.ts).
 */
export type Owner = 'own' | 'other' | 'unknown';

/** How {@link LoopbackTraffic} reads a capture. */
export interface LoopbackTrafficOptions {
  protocol: WireProtocol;
  /** The server's IPv4 address as a number (127.0.0.1 is 0x7f000001) and port. */
  server: { address: number; port: number };
  /** Asked once per connection, when its first packet is read: whose socket its client end is. */
  ownerOf(clientAddress: number, clientPort: number): Owner;
  /** A UDP datagram to the server's port: the capture's own window markers. */
  onDatagram?(payload: Buffer): void;
  /** A counted connection was seen closed (both sides, or a reset). */
  onClosed?(connection: TappedConnection, closedAtNs: number): void;
  now?(): number;
}

/** One connection as the capture sees it. */
export interface TappedConnection {
  id: number;
  clientAddress: number;
  clientPort: number;
  owner: Owner;
  /** Null for this process's own connections, which are followed to their close but not parsed. */
  session: WireSession | null;
  up: TcpDirection;
  down: TcpDirection;
  openedAtNs: number;
  closedAtNs: number | null;
  /** False once bytes are missing: nothing after a hole can be framed. */
  parsing: boolean;
  clientFin: boolean;
  serverFin: boolean;
  /** Bytes seen in either direction (handshake included). */
  bytes: number;
  /** The client's initial sequence number, once its SYN was seen. */
  clientIsn: number | null;
  /** Each direction's in-order bytes to the session: made once per connection, not per packet. */
  deliverUp: (data: Buffer) => void;
  deliverDown: (data: Buffer) => void;
}

const MAX_ENDED_KEPT = 4096;
const NO_REPLY = (): void => undefined;

function defaultNow(): number {
  return Number(process.hrtime.bigint());
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The server's loopback traffic read from a pcap stream: each connection's two byte streams put back in order and
 * fed to the protocol's session (`WIRE_SESSIONS`, as the proxy does), so counts are the proxy's for the same bytes.
 * A connection whose start was not captured, or with bytes the capture lost, is `incomplete` with the reason.
 */
export class LoopbackTraffic {
  readonly #options: LoopbackTrafficOptions;
  readonly #reader = new PcapStreamReader();
  readonly #open = new Map<number, TappedConnection>();
  readonly #all: TappedConnection[] = [];
  /** Client ends of connections closed, so that their last packets do not look like a connection begun unseen. */
  readonly #ended = new Set<number>();
  readonly #now: () => number;
  #nextId = 1;
  /** Each packet decoded into the same fields: nothing of a packet is kept past its reading. */
  readonly #packet = packetFields();
  /** The TCP segment whose record comes in pieces, while its bytes are still coming. */
  #tail: { c: TappedConnection; fromClient: boolean; seq: number; remaining: number; flags: number; ack: number } | null = null;
  /** Set when the pcap stream itself broke: nothing after it can be read. */
  broken: string | null = null;
  /** Packets read, and those that were not IPv4 TCP/UDP (the filter should leave none). */
  packets = 0;
  otherPackets = 0;

  constructor(options: LoopbackTrafficOptions) {
    this.#options = options;
    this.#now = options.now ?? defaultNow;
  }

  /** Feeds bytes of the pcap stream as they come. */
  push(chunk: Buffer): void {
    if (this.broken) return;
    try {
      this.#reader.push(chunk, (record) => {
        if (record.offset > 0) {
          this.#piece(record.bytes.subarray(record.start, record.end));
          return;
        }
        this.packets += 1;
        this.#tail = null;
        const packet = decodePacket(this.#reader.linkType, record.bytes, record.start, record.end, record.included, this.#packet);
        if (packet.kind === 'tcp') this.#segment(packet, record.originalLength > record.included);
        else if (packet.kind === 'udp') {
          // A datagram in pieces is the markers' padding: only a whole one can be a marker.
          const toServer = packet.dstPort === this.#options.server.port && packet.dst === this.#options.server.address;
          if (toServer && packet.length === packet.payload.length) this.#options.onDatagram?.(packet.payload);
        } else this.otherPackets += 1;
      });
    } catch (error) {
      this.broken = `the capture stream could not be read: ${errorText(error)}`;
      for (const c of this.#open.values()) this.#lose(c, this.broken);
    }
  }

  /** Every connection seen but this process's own, closed ones included. */
  connections(): TappedConnection[] {
    return this.#all.filter((c) => c.owner !== 'own');
  }

  /** The counted record of one connection, as the proxy's `connections()` gives it. */
  record(c: TappedConnection): WireConnection {
    return connectionRecord(c.id, c.session as WireSession, c.openedAtNs, c.closedAtNs);
  }

  /**
   * The client end as one number, so that a packet's lookup builds no string: its port alone when it shares the
   * server's address (loopback clients nearly always do), a small integer V8 keeps unboxed; else 48 bits.
   */
  #key(address: number, port: number): number {
    return address === this.#options.server.address ? port : address * 65536 + port;
  }

  #segment(s: TcpSegment, cut: boolean): void {
    const server = this.#options.server;
    const fromClient = s.dstPort === server.port && s.dst === server.address;
    const fromServer = s.srcPort === server.port && s.src === server.address;
    if (!fromClient && !fromServer) {
      this.otherPackets += 1;
      return;
    }
    const clientAddress = fromClient ? s.src : s.dst;
    const clientPort = fromClient ? s.srcPort : s.dstPort;
    const key = this.#key(clientAddress, clientPort);
    let c = this.#open.get(key);
    const syn = (s.flags & TCP_SYN) !== 0;
    if (syn && fromClient && (s.flags & TCP_ACK) === 0) {
      // A SYN sent again (its answer was slow) is the same connection; a new one on a port whose old one was not
      // seen closing means the old one's end was lost.
      if (c && c.clientIsn === s.seq && c.bytes === 0) return;
      if (c) this.#close(c, 'its client port was reused before its close was captured', true);
      this.#ended.delete(key);
      c = this.#start(clientAddress, clientPort, true);
      c.clientIsn = s.seq;
      c.up.start(s.seq);
      return;
    }
    if (!c) {
      // The last ACK of a connection already closed, or control packets of one begun before the capture: nothing to
      // count until one carries bytes.
      if (s.payload.length === 0 || this.#ended.has(key)) return;
      c = this.#start(clientAddress, clientPort, false);
    }
    if (syn && fromServer) {
      if (c.up.started && !c.down.started) c.down.start(s.seq);
      return;
    }
    if (cut) this.#lose(c, `a ${s.length}-byte segment was captured cut short (snapshot length)`);
    const whole = s.length === s.payload.length;
    this.#data(c, fromClient, s.seq, s.payload, whole && (s.flags & TCP_FIN) !== 0);
    if (whole) this.#segmentEnd(c, fromClient, s.flags, s.ack);
    else this.#tail = { c, fromClient, seq: (s.seq + s.payload.length) >>> 0, remaining: s.length - s.payload.length, flags: s.flags, ack: s.ack };
  }

  /** The next bytes of the segment in pieces; the flags are acted on once its last byte is in. */
  #piece(bytes: Buffer): void {
    const t = this.#tail;
    // A piece of anything but a TCP segment to or from the server, or past the segment's end: nothing to read.
    if (!t) return;
    const payload = bytes.length > t.remaining ? bytes.subarray(0, t.remaining) : bytes;
    t.remaining -= payload.length;
    this.#data(t.c, t.fromClient, t.seq, payload, t.remaining === 0 && (t.flags & TCP_FIN) !== 0);
    t.seq = (t.seq + payload.length) >>> 0;
    if (t.remaining > 0) return;
    this.#tail = null;
    this.#segmentEnd(t.c, t.fromClient, t.flags, t.ack);
  }

  /** A segment's bytes (or some of them, in order), to be put in order and read. */
  #data(c: TappedConnection, fromClient: boolean, seq: number, payload: Buffer, fin: boolean): void {
    c.bytes += payload.length;
    const direction = fromClient ? c.up : c.down;
    if (c.parsing && direction.started) {
      direction.segment(seq, payload, fin, fromClient ? c.deliverUp : c.deliverDown);
      if (direction.heldBytes > MAX_HELD_BYTES) this.#lose(c, `more than ${MAX_HELD_BYTES} bytes arrived after a hole the capture never filled`);
    } else if (c.parsing && payload.length > 0) this.#lose(c, "the server's SYN-ACK was not captured, so its bytes cannot be put in order");
  }

  /** What a segment's flags and acknowledgement say, once its bytes are in. */
  #segmentEnd(c: TappedConnection, fromClient: boolean, flags: number, ack: number): void {
    const other = fromClient ? c.down : c.up;
    if ((flags & TCP_ACK) !== 0 && c.parsing && other.started) {
      const missing = other.missingBefore(ack);
      if (missing > 0) {
        this.#lose(
          c,
          `the capture is missing ${missing} byte(s) the ${fromClient ? 'server' : 'client'} sent (acknowledged, never captured: the kernel dropped packets)`,
        );
      }
    }
    if ((flags & TCP_FIN) !== 0) {
      if (fromClient) c.clientFin = true;
      else c.serverFin = true;
    }
    if ((flags & TCP_RST) !== 0) this.#close(c, `${fromClient ? 'client' : 'server'} reset`, false);
    else if (c.clientFin && c.serverFin) this.#close(c, fromClient ? 'server closed, then client' : 'client closed, then server', false);
  }

  #start(clientAddress: number, clientPort: number, withSyn: boolean): TappedConnection {
    const owner = this.#options.ownerOf(clientAddress, clientPort);
    const session = owner === 'own' ? null : WIRE_SESSIONS[this.#options.protocol].session('passthrough');
    const c: TappedConnection = {
      id: this.#nextId++,
      clientAddress,
      clientPort,
      owner,
      session,
      up: new TcpDirection(),
      down: new TcpDirection(),
      openedAtNs: this.#now(),
      closedAtNs: null,
      parsing: owner !== 'own' && withSyn,
      clientFin: false,
      serverFin: false,
      bytes: 0,
      clientIsn: null,
      deliverUp: NO_REPLY,
      deliverDown: NO_REPLY,
    };
    c.deliverUp = (data) => this.#deliver(c, true, data);
    c.deliverDown = (data) => this.#deliver(c, false, data);
    this.#open.set(this.#key(clientAddress, clientPort), c);
    this.#all.push(c);
    if (session && !withSyn) {
      session.tally.fail('it began before the capture started (its SYN was not seen): its messages cannot be told apart');
    }
    return c;
  }

  #deliver(c: TappedConnection, fromClient: boolean, data: Buffer): void {
    const session = c.session;
    if (!session || !c.parsing) return;
    try {
      if (fromClient) session.fromClient(data, NO_REPLY);
      else session.fromServer(data);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
    }
  }

  /** Bytes are missing: the connection's counts stop here and say why. */
  #lose(c: TappedConnection, why: string): void {
    if (!c.parsing && c.session?.tally.incomplete) return;
    c.parsing = false;
    c.session?.tally.fail(why);
  }

  #close(c: TappedConnection, how: string, lost: boolean): void {
    const key = this.#key(c.clientAddress, c.clientPort);
    this.#open.delete(key);
    this.#ended.add(key);
    // Oldest first: a key is only needed until the closed connection's last packets have gone by.
    if (this.#ended.size > MAX_ENDED_KEPT) this.#ended.delete(this.#ended.values().next().value as number);
    c.closedAtNs = this.#now();
    if (lost) this.#lose(c, how);
    for (const [d, side] of [
      [c.up, 'client'],
      [c.down, 'server'],
    ] as const) {
      if (d.heldBytes > 0) this.#lose(c, `${d.heldBytes} byte(s) from the ${side} came after a hole the capture never filled`);
    }
    const session = c.session;
    if (!session) return;
    try {
      session.end(`connection closed (${how})`);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
    }
    this.#options.onClosed?.(c, c.closedAtNs);
  }
}
