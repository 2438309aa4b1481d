import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import dgram from 'node:dgram';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { noteDeparture } from '../shared/departures';
import { SqltallyError } from '../shared/errors';
import { LoopbackTraffic } from './loopback-traffic';
import type { Owner, TappedConnection } from './loopback-traffic';
import { ipv4Number } from './pcap';
import type { ClosingHook, SettleResult, WireCounter } from './proxy';
import { diffWireSnapshots } from './tally';
import type { WireProtocol } from './tally';
import type { WireSnapshot } from './types';

/** How `startPassiveCapture` is configured. */
export interface PassiveCaptureOptions {
  protocol: WireProtocol;
  /** The server, on a loopback IPv4 address (`localhost` is read as 127.0.0.1). */
  target: { host: string; port: number };
  /** The tcpdump to run (default `tcpdump` on PATH). */
  tcpdump?: string;
  /** The kernel's capture buffer in KiB (`tcpdump -B`); default 131072. */
  bufferKiB?: number;
  /** How long a window edge waits for its marker to come out of the capture; default 2000 ms. */
  markerWaitMs?: number;
}

// TPACKET_V3 packs packets into blocks: 128 MiB holds several hundred thousand small ones.
/** A passive capture, and the tcpdump it runs (a test stops it to see the fault said). */
export interface PassiveCapture extends WireCounter {
  readonly tcpdumpPid: number | null;
  /** Bytes of tcpdump's output this process has read: it reads at window edges, not while clients run. */
  readonly bytesRead: number;
}

const DEFAULT_BUFFER_KIB = 128 * 1024;
/** The largest frame on lo: an IPv4 packet of 65535 bytes behind a 14-byte Ethernet header; longer is cut, and said. */
const SNAP_LENGTH = 65_535 + 14;
/**
 * How long tcpdump may take to start and to answer SIGUSR1 with its counters, a marker to come through, and closing
 * connections to finish closing in `settle` (as the proxy's settle).
 */
const WAIT_MS = { start: 10_000, stats: 2_000, marker: 2_000, settle: 5_000 } as const;
/** Characters of tcpdump's stderr kept for a message. */
const STDERR_KEPT = 4_000;
const MARKER_PREFIX = 'sqltally-marker ';
/**
 * The kernel hands tcpdump a block of packets when it is full or a second old, and tcpdump writes its output when its
 * buffer is full: datagrams of this size sent after a marker fill both, so an edge waits milliseconds, not a second.
 */
const PADDING = Buffer.alloc(65_000);
const PADDING_EVERY_MS = 2;
// tcpdump's output is read at the edges only: while clients run its writes block on the full pipe and the kernel's
// ring holds their packets, so neither process takes CPU from them. Past this much loopback traffic it is read anyway.
const READ_AFTER_LOOPBACK_BYTES = 16 * 1024 * 1024;
// The ring takes each lo packet twice (sent and received) with its header: an eighth of it in bytes on lo, as a bound.
const RING_SHARE = 8;
const LOOPBACK_CHECK_MS = 100;
// The ring is in blocks of 256 KiB (libpcap's TPACKET_V3), and the kernel hands over a block with any packet in it
// each second: slow traffic fills a block a second, so it is read at least this often too (a quarter of the blocks).
const RING_BLOCK_KIB = 256;
const READ_AFTER_MS = 60_000;

/** Why a passive capture cannot settle an open connection: it has no socket of its own to send a request on. */
const CANNOT_SETTLE =
  'open with traffic, and a passive capture cannot send it a request of its own (the ping or statistics flush that makes the server file its last statement): end the connection before the window ends, or use --wire proxy';

/**
 * The owner of the client end of a loopback connection to `serverPort`, from /proc: this process's socket or not.
 * Inside a window sqltally's only own connection is its probe's, open throughout; its short ones (row counts,
 * cancels) come after a give-up, whose window is `incomplete` anyway. So a socket gone before it was read is counted.
 */
export function procOwnerOf(serverPort: number): (clientAddress: number, clientPort: number) => Owner {
  const hex = (n: number, width: number): string => n.toString(16).toUpperCase().padStart(width, '0');
  // /proc/net/tcp writes an IPv4 address as its four bytes in host (little-endian) order.
  const bytes = Buffer.alloc(4);
  return (clientAddress, clientPort) => {
    bytes.writeUInt32LE(clientAddress >>> 0);
    const address = bytes.toString('hex').toUpperCase();
    const local = [`${address}:${hex(clientPort, 4)}`, `0000000000000000FFFF0000${address}:${hex(clientPort, 4)}`];
    const remoteSuffix = `:${hex(serverPort, 4)}`;
    let inode: string | null = null;
    for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
      let text = '';
      try {
        text = readFileSync(file, 'latin1');
      } catch {
        continue;
      }
      for (const line of text.split('\n')) {
        const f = line.trim().split(/\s+/);
        if (f.length > 9 && local.includes(f[1]!) && f[2]!.endsWith(remoteSuffix)) {
          inode = f[9]!;
          break;
        }
      }
      if (inode) break;
    }
    // A socket in TIME_WAIT has no inode: closed already, by whoever had it.
    if (!inode || inode === '0') return 'unknown';
    const want = `socket:[${inode}]`;
    try {
      for (const fd of readdirSync('/proc/self/fd')) {
        try {
          if (readlinkSync(`/proc/self/fd/${fd}`) === want) return 'own';
        } catch {
          // Closed between the listing and the read.
        }
      }
    } catch {
      return 'unknown';
    }
    return 'other';
  };
}

/** Bytes received on lo so far (/proc/net/dev), or null where that cannot be read. */
function loopbackBytes(): number | null {
  try {
    const line = /^\s*lo:\s*(\d+)/m.exec(readFileSync('/proc/net/dev', 'latin1'));
    return line ? Number(line[1]) : null;
  } catch {
    return null;
  }
}

/** The loopback IPv4 address a passive capture of a server at `host` listens on, or null when it cannot. */
export function loopbackAddress(host: string): string | null {
  if (host === 'localhost') return '127.0.0.1';
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) ? host : null;
}

/** A passive capture that could not start here (server off loopback, tcpdump missing or unable to capture); `why` says which. */
export class PassiveCaptureUnavailable extends SqltallyError {
  readonly why: string;

  constructor(why: string, hint: string) {
    super(`passive capture: ${why}`, { phase: 'wire', hint });
    this.name = 'PassiveCaptureUnavailable';
    this.why = why;
  }
}

/**
 * A passive capture of the server's loopback traffic: tcpdump on `lo` streams a copy of every packet to and from the
 * server's port, and each connection is counted as the proxy would count it, with no hop between client and server.
 * It sees other processes' connections only (this process's own, a probe or a row count, are set aside by their
 * socket), cannot settle a connection or hold its goodbye (`settle` names the open ones as busy), and cannot refuse
 * TLS: an encrypted session is `incomplete`. Window edges send a marker datagram through the capture
 * (`caughtUp`); kernel drops, a dead tcpdump or a marker not seen are faults in the next snapshot.
 */
export async function startPassiveCapture(options: PassiveCaptureOptions): Promise<PassiveCapture> {
  const host = loopbackAddress(options.target.host);
  const address = host === null ? null : ipv4Number(host);
  if (host === null || address === null) {
    throw new PassiveCaptureUnavailable(
      `the server is at ${options.target.host}: a passive capture reads loopback IPv4 traffic only`,
      'use --wire proxy for a server on another address',
    );
  }
  const port = options.target.port;
  const filter = `host ${host} and (tcp port ${port} or udp dst port ${port})`;
  const tcpdump = options.tcpdump ?? 'tcpdump';
  const args = ['-i', 'lo', '-n', '-s', String(SNAP_LENGTH), '-B', String(options.bufferKiB ?? DEFAULT_BUFFER_KIB), '-w', '-', filter];
  const markerWaitMs = options.markerWaitMs ?? WAIT_MS.marker;
  const captureId = randomUUID();
  const faults: string[] = [];
  let hook: ClosingHook | null = null;
  const gone = (): Promise<boolean> => Promise.resolve(false);

  const markersAwaited = new Map<string, (seen: boolean) => void>();
  const traffic = new LoopbackTraffic({
    protocol: options.protocol,
    server: { address, port },
    ownerOf: procOwnerOf(port),
    onDatagram: (payload) => {
      if (payload.length < 200) markersAwaited.get(payload.toString('latin1'))?.(true);
    },
    onClosed: (connection, closedAtNs) => {
      const serverConnectionId = connection.session?.serverConnectionId ?? null;
      if (serverConnectionId !== null) noteDeparture({ host: options.target.host, port }, serverConnectionId, closedAtNs);
      if (hook && connection.session) void hook(traffic.record(connection), gone).catch(() => undefined);
    },
  });

  const child: ChildProcessByStdio<null, Readable, Readable> = spawn(tcpdump, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let statsSeen: ((dropped: number) => void) | null = null;
  let exited: string | null = null;
  let closing = false;
  const exit = new Promise<void>((resolve) => {
    child.on('error', (error) => {
      exited = `tcpdump could not be run: ${error.message}`;
      resolve();
    });
    // 'close', not 'exit': only then has all of its stderr been read, and the message is what it said last.
    child.on('close', (code, signal) => {
      exited ??= `tcpdump exited (${signal ?? `code ${code}`}): ${stderr.trim().split('\n').slice(-2).join(' / ') || 'no message'}`;
      resolve();
    });
  });
  let bytesRead = 0;
  child.stdout.on('data', (chunk: Buffer) => {
    bytesRead += chunk.length;
    traffic.push(chunk);
  });
  // Paused, the stream reads no more than its buffer: tcpdump then blocks, and the kernel's ring holds the rest.
  child.stdout.pause();
  // Traffic the ring could not hold is dropped (and said): past the bounds it is read without waiting for an edge.
  const bufferKiB = options.bufferKiB ?? DEFAULT_BUFFER_KIB;
  const readAfter = {
    bytes: Math.min(READ_AFTER_LOOPBACK_BYTES, (bufferKiB * 1024) / RING_SHARE),
    ms: Math.min(READ_AFTER_MS, (bufferKiB / RING_BLOCK_KIB) * 250),
  };
  let lastRead = { loopback: loopbackBytes(), at: Date.now() };
  let readers = 0;
  const reading = <T>(work: () => Promise<T>): Promise<T> => {
    if (readers++ === 0) child.stdout.resume();
    return work().finally(() => {
      if (--readers > 0) return;
      lastRead = { loopback: loopbackBytes(), at: Date.now() };
      if (!closing && !ending) child.stdout.pause();
    });
  };
  /** What the stream buffered already: read before anything the capture saw is looked at. */
  const readBuffered = (): void => {
    while (child.stdout.read() !== null);
  };
  // Ending, tcpdump writes its last packets: they are read to the end (and 'close' waits for that end).
  let ending = false;
  child.on('exit', () => {
    ending = true;
    child.stdout.resume();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEPT);
    const dropped = /(\d+) packets? dropped by kernel/.exec(stderr);
    if (dropped && statsSeen) {
      stderr = stderr.slice((dropped.index ?? 0) + dropped[0].length);
      statsSeen(Number(dropped[1]));
    }
  });

  const started = await new Promise<string | null>((resolve) => {
    const timer = setTimeout(() => resolve(`tcpdump did not start listening within ${WAIT_MS.start} ms`), WAIT_MS.start);
    const check = (): void => {
      if (/listening on/.test(stderr)) {
        clearTimeout(timer);
        resolve(null);
      }
    };
    child.stderr.on('data', check);
    void exit.then(() => {
      clearTimeout(timer);
      resolve(exited);
    });
  });
  if (started !== null) {
    child.kill('SIGKILL');
    throw new PassiveCaptureUnavailable(started, 'install tcpdump (apt-get install tcpdump) and run with CAP_NET_RAW (as root), or use --wire proxy');
  }

  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, host, () => resolve());
  });
  socket.on('error', () => undefined);

  let markers = 0;
  let lastDropped = 0;
  let catching: Promise<void> = Promise.resolve();
  let reportedExit = false;
  const fault = (why: string): void => void faults.push(why);

  const waitForMarker = async (): Promise<boolean> => {
    if (closing) return false;
    const text = `${MARKER_PREFIX}${captureId} ${++markers}`;
    return new Promise<boolean>((resolve) => {
      let padding: NodeJS.Timeout | undefined;
      const done = (seen: boolean): void => {
        clearTimeout(timer);
        clearInterval(padding);
        markersAwaited.delete(text);
        resolve(seen);
      };
      const timer = setTimeout(() => done(false), markerWaitMs);
      markersAwaited.set(text, done);
      socket.send(text, port, host, () => {
        if (markersAwaited.has(text)) padding = setInterval(() => socket.send(PADDING, port, host), PADDING_EVERY_MS);
      });
    });
  };
  const readDrops = async (): Promise<number | null> =>
    new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        statsSeen = null;
        resolve(null);
      }, WAIT_MS.stats);
      statsSeen = (dropped) => {
        clearTimeout(timer);
        statsSeen = null;
        resolve(dropped);
      };
      child.kill('SIGUSR1');
    });
  // tcpdump answers SIGUSR1 only between its writes: it is read from until its counter came.
  const catchUp = (): Promise<void> => reading(caughtUpWhileReading);
  const caughtUpWhileReading = async (): Promise<void> => {
    readBuffered();
    if (exited !== null || traffic.broken) {
      // Said at every edge after it happened: each window from then on has nothing it can trust.
      fault(traffic.broken ?? (reportedExit ? `the capture is not running (${exited})` : (exited as string)));
      reportedExit = true;
      return;
    }
    if (!(await waitForMarker())) {
      // tcpdump dying is the likeliest cause, and its exit may be told only now.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exit, new Promise((r) => (timer = setTimeout(r, WAIT_MS.stats)))]);
      clearTimeout(timer);
      const why = exited ?? 'packets before it may be uncounted';
      fault(`the window edge's marker did not come out of the capture within ${markerWaitMs} ms: ${why}`);
      reportedExit = exited !== null;
      return;
    }
    const dropped = await readDrops();
    if (dropped === null) fault(`tcpdump did not report its drop counter within ${WAIT_MS.stats} ms`);
    else if (dropped > lastDropped) {
      fault(`the kernel dropped ${dropped - lastDropped} captured packet(s) (tcpdump's counter went from ${lastDropped} to ${dropped})`);
      lastDropped = dropped;
    }
    if (traffic.broken) fault(traffic.broken);
  };

  const counted = (): TappedConnection[] => {
    readBuffered();
    return traffic.connections();
  };
  const snapshot = (): WireSnapshot => ({
    proxyId: captureId,
    protocol: options.protocol,
    takenAtNs: Number(process.hrtime.bigint()),
    connections: counted().map((c) => traffic.record(c)),
    captureFaults: [...faults],
  });
  const isClosing = (c: TappedConnection): boolean => c.closedAtNs === null && (c.clientFin || c.serverFin || (c.session?.closing ?? false));

  const settle = async (opts: { ids?: readonly number[]; timeoutMs?: number } = {}): Promise<SettleResult> => {
    const wanted = opts.ids ? new Set(opts.ids) : null;
    const open = (): TappedConnection[] => counted().filter((c) => c.closedAtNs === null && (!wanted || wanted.has(c.id)));
    const deadline = Date.now() + (opts.timeoutMs ?? WAIT_MS.settle);
    if (open().length > 0) await reading(waitForMarker);
    const targets = open();
    // A closing connection's server files its statements and statistics as the session ends: its close is the settle.
    while (targets.some((c) => c.closedAtNs === null && isClosing(c)) && Date.now() < deadline) {
      await Promise.all([new Promise((r) => setTimeout(r, 5)), reading(waitForMarker)]);
    }
    const result: SettleResult = { settled: [], busy: [] };
    for (const c of targets) {
      if (c.closedAtNs !== null || c.bytes === 0) result.settled.push(c.id);
      else result.busy.push({ id: c.id, serverConnectionId: c.session?.serverConnectionId ?? null, why: isClosing(c) ? 'still closing' : CANNOT_SETTLE });
    }
    return result;
  };

  const close = async (): Promise<void> => {
    if (closing) return exit;
    closing = true;
    clearInterval(loopbackCheck);
    // A marker still awaited (a bound's read) is not seen: its socket goes now.
    for (const notSeen of [...markersAwaited.values()]) notSeen(false);
    child.stdout.resume();
    socket.close();
    if (exited === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
    await exit;
    clearTimeout(timer);
  };

  let readQueued = false;
  const loopbackCheck = setInterval(() => {
    if (readers > 0 || readQueued || closing) return;
    const loopback = loopbackBytes();
    const fewBytes = loopback !== null && lastRead.loopback !== null && loopback - lastRead.loopback < readAfter.bytes;
    if (fewBytes && Date.now() - lastRead.at < readAfter.ms) return;
    readQueued = true;
    catching = catching.then(() => reading(waitForMarker)).then(() => void (readQueued = false));
  }, LOOPBACK_CHECK_MS);
  loopbackCheck.unref();

  // The capture is known to work only once its own marker came through.
  await (catching = catchUp());
  if (faults.length > 0) {
    await close();
    throw new PassiveCaptureUnavailable(faults.join('; '), 'use --wire proxy');
  }

  return {
    protocol: options.protocol,
    host: options.target.host,
    port,
    holdsGoodbyes: false,
    tcpdumpPid: child.pid ?? null,
    get bytesRead() {
      return bytesRead;
    },
    where: `a passive capture of ${options.target.host}:${port} on lo (tcpdump)`,
    connections: () => counted().map((c) => traffic.record(c)),
    closing: () =>
      counted()
        .filter(isClosing)
        .map((c) => c.id),
    snapshot,
    diff: diffWireSnapshots,
    settle,
    caughtUp: () => (catching = catching.then(catchUp, catchUp)),
    // Run once the capture saw the connection closed: it cannot hold a goodbye, so there is nothing to settle.
    onClosing: (h) => {
      hook = h;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
