import { AsyncResource } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Duplex } from 'node:stream';
import { SqltallyError } from '../shared/errors';
import { noteDeparture } from '../shared/departures';
import { WIRE_SESSIONS } from './protocols';
import type { ReplyReader, SettleRequest } from './settle';
import { connectionRecord, diffWireSnapshots } from './tally';
import type { WireProtocol, WireSession } from './tally';
import type { WireConnection, WireCounts, WireSnapshot } from './types';

/** How `startWireProxy` is configured. */
export interface WireProxyOptions {
  protocol: WireProtocol;
  /** The real server the proxy forwards to. */
  target: { host: string; port: number };
  /**
   * `refuse` (default): keep sessions in plain text so they can be counted: MySQL greetings lose CLIENT_SSL,
   * PostgreSQL SSLRequest/GSSENCRequest are answered 'N' by the proxy. Use it only where plain text is allowed.
   * `passthrough`: let TLS through untouched; such a connection's counts are `incomplete`.
   */
  tls?: 'refuse' | 'passthrough';
}

/** What {@link WireProxy.settle} did on each connection it was asked about. */
export interface SettleResult {
  /** Proxy connection ids whose server answered the proxy's own request. */
  settled: number[];
  /** Connections that stayed busy (a request in flight, a half-sent message) until the time ran out. */
  busy: { id: number; serverConnectionId: number | null; why: string }[];
}

/**
 * The driver's end of {@link WireProxy.openStream}: a Duplex that also answers the socket methods drivers call on a
 * stream they were given (`connect()` emits 'connect' on the next tick; `setNoDelay`, `setKeepAlive`, `setTimeout`,
 * `ref`, `unref` do nothing; `readyState` and `address()` answer as a loopback socket's).
 */
export interface WireStream extends Duplex {
  /** As a socket's: `open`, `readOnly`, `writeOnly` or `closed` (postgres.js says goodbye only on an `open` one). */
  readonly readyState: 'open' | 'readOnly' | 'writeOnly' | 'closed';
  connect(...ignored: unknown[]): this;
  /** The local address a socket to the proxy would have (mariadb 3.3 sends it in its handshake). */
  address(): { address: string; family: string; port: number };
  setNoDelay(...ignored: unknown[]): this;
  setKeepAlive(...ignored: unknown[]): this;
  setTimeout(...ignored: unknown[]): this;
  ref(): this;
  unref(): this;
}

/** Called before the server side of a connection is closed (see {@link WireProxy.onClosing}). */
export type ClosingHook = (connection: WireConnection, settle: () => Promise<boolean>) => Promise<void>;

/**
 * What a window reads the wire from: the loopback proxy that relays and counts ({@link WireProxy}), or a passive
 * capture of the server's loopback traffic (`startPassiveCapture` in passive.ts), which clients reach at the server's
 * own address. Both count with the same protocol sessions (`WIRE_SESSIONS`).
 */
export interface WireCounter extends AsyncDisposable {
  readonly protocol: WireProtocol;
  /** Where clients connect: the proxy's 127.0.0.1, or the server's own host for a passive capture. */
  readonly host: string;
  /** The port clients connect to: the proxy's, or the server's own for a passive capture. */
  readonly port: number;
  /** How a window's reasons name the path the traffic was counted on. */
  readonly where: string;
  /** Whether {@link onClosing} can hold a goodbye while the server is read: the proxy can, a passive capture cannot. */
  readonly holdsGoodbyes: boolean;
  /** Every connection accepted so far (closed ones included), with cumulative counts. */
  connections(): WireConnection[];
  /**
   * Proxy ids of connections whose close has begun and not finished: a goodbye said (COM_QUIT, Terminate), or one
   * side's socket closed (a pool destroying a socket says no goodbye). Until it finishes, such a connection still
   * counts as open, though the server is about to forget it.
   */
  closing(): number[];
  /** Cumulative counts of every connection, at this instant. */
  snapshot(): WireSnapshot;
  /**
   * The traffic between two snapshots, summed over connections. Handshakes of connections opened in between go
   * to `setup`, not to the command counts. A fire-and-forget message the client wrote just before `after` (one
   * with no answer, like COM_STMT_CLOSE) may not have reached the proxy yet and then falls in the next window.
   */
  diff(before: WireSnapshot, after: WireSnapshot): WireCounts;
  /**
   * Sends the protocol's settle request on every open connection, or those with the given proxy ids, as soon as each
   * is between requests, and resolves when all answered or `timeoutMs` (default 5000) ran out. MySQL `COM_PING`: the
   * server answers it only after filing the previous statement; PostgreSQL `pg_stat_force_next_flush()`: only a session
   * can flush its own statistics. Its bytes and answer stay out of the connection's counts.
   */
  settle(options?: { ids?: readonly number[]; timeoutMs?: number }): Promise<SettleResult>;
  /**
   * Resolves once every byte sent to or from the server before the call is in the counts; what could not be made
   * so is a fault in the next snapshot (`captureFaults`). The proxy counts bytes as it relays them: at once.
   */
  caughtUp(): Promise<void>;
  /** In-process streams to the proxy (see {@link WireProxy.openStream}); absent where there is no relay. */
  openStream?(): WireStream;
  /** Installs (or with null removes) the hook run before a closing connection's server side is closed. */
  onClosing(hook: ClosingHook | null): void;
  /** Stops listening, destroys every socket and resolves once all are closed; idempotent. */
  close(): Promise<void>;
}

/**
 * A loopback TCP proxy between a driver and a MySQL/MariaDB/PostgreSQL server: bytes forwarded unchanged (but the TLS
 * refusal) with backpressure, both directions parsed on the side; a parse fault makes the counts `incomplete`, never
 * stops the bytes. Owning both sockets, it can settle quiet connections ({@link WireProxy.settle}: an answered ping is
 * filed, a PostgreSQL session flushes its own statistics) and hold a goodbye until its counters are read
 * ({@link WireProxy.onClosing}). `clientWrites` approximates the driver's writes by TCP chunk.
 */
export interface WireProxy extends WireCounter {
  /**
   * A connection through the proxy without the loopback hop to it: the driver's end of an in-process stream whose
   * other end the proxy relays and counts like an accepted socket. For drivers in this process that take a stream
   * (pg `stream: () => proxy.openStream()`, mysql2 `stream`): every round trip then crosses one TCP connection, not
   * two. Each driver module's `streamOptions` says how its driver takes one. Counted like a socket, with one
   * difference that only makes counts earlier: a server chunk is counted before the driver reads it, since the
   * driver reads it in the same call.
   */
  openStream(): WireStream;
}

/** How long a closing connection waits for the closing hook before its server side is closed anyway. */
const CLOSING_HOOK_TIMEOUT_MS = 10_000;
const SETTLE_POLL_MS = 1;
const DEFAULT_SETTLE_TIMEOUT_MS = 5_000;

/** What the proxy relays from: an accepted socket, or the proxy's end of an in-process stream pair. */
type ClientSide = net.Socket | Duplex;

interface ProxiedConnection {
  id: number;
  session: WireSession;
  client: ClientSide;
  upstream: net.Socket;
  openedAtNs: number;
  closedAtNs: number | null;
  closed: Promise<void>;
  /** Whether its close has begun (see {@link WireProxy.closing}). */
  isClosing(): boolean;
  /** Sends the protocol's settle request now if the session allows it; false when it cannot (busy or gone). */
  trySettle(): Promise<boolean> | null;
}

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

function errorText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return e?.code ? `${e.code}` : String(e?.message ?? error);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Wires one accepted client socket to a new upstream socket, each with an 'error' listener (unhandled, one crashes the
 * process); whichever side closes first, the other ends after its writes (the server's after the closing hook).
 */
function relay(id: number, client: ClientSide, options: WireProxyOptions, closingHook: () => ClosingHook | null): ProxiedConnection {
  const session = WIRE_SESSIONS[options.protocol].session(options.tls ?? 'refuse');
  const settleRequest: SettleRequest = WIRE_SESSIONS[options.protocol].settle;
  const upstream = net.connect({ host: options.target.host, port: options.target.port });
  if (client instanceof net.Socket) client.setNoDelay(true);
  // An in-process driver handles a chunk inside our write (a callback API may run user code there): count it first,
  // so no code ever sees an answer the counts do not hold yet.
  const countServerFirst = !(client instanceof net.Socket);
  upstream.setNoDelay(true);
  let firstClose: string | null = null;
  let clientClosed = false;
  let upstreamClosed = false;
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));

  // While the proxy's own request is out, the client's bytes wait here, so its next request follows the answer.
  let settling: { reader: ReplyReader; done: (ok: boolean) => void } | null = null;
  // While the closing hook runs, the client's goodbye waits here.
  let holdingGoodbye = false;
  const heldFromClient: Buffer[] = [];
  let hookRun: Promise<void> | null = null;

  const connection: ProxiedConnection = {
    id,
    session,
    client,
    upstream,
    openedAtNs: nowNs(),
    closedAtNs: null,
    closed,
    isClosing: () => session.closing || clientClosed || upstreamClosed,
    trySettle: () => {
      if (settling || upstream.destroyed || !upstream.writable || !session.injectable()) return null;
      return new Promise<boolean>((resolve) => {
        settling = { reader: settleRequest.reader(), done: resolve };
        upstream.write(settleRequest.bytes);
      });
    },
  };

  const record = (): WireConnection => connectionRecord(id, session, connection.openedAtNs, connection.closedAtNs);

  const reply = (bytes: Buffer): void => {
    if (!client.destroyed) client.write(bytes);
  };
  const toServer = (out: Buffer | null): void => {
    if (out && !upstream.destroyed && !upstream.write(out)) client.pause();
  };
  // A client that hung up (its side ended ours: no half-open sockets) gets nothing more, and must not pause the
  // server side: no 'drain' ever comes, and a settle request on it would wait for its answer until the hook's timeout.
  const sendToClient = (out: Buffer): void => {
    if (!client.destroyed && !client.writableEnded && !client.write(out)) upstream.pause();
  };
  const toClient = (chunk: Buffer): void => {
    if (session.serverPassesThrough() && !countServerFirst) {
      // The usual case: the bytes go on first and are counted after, so counting never delays them.
      sendToClient(chunk);
      try {
        session.fromServer(chunk);
      } catch (error) {
        session.tally.fail(`internal counter error: ${errorText(error)}`);
      }
      return;
    }
    let out: Buffer | null;
    try {
      out = session.fromServer(chunk);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
      out = chunk;
    }
    if (out) sendToClient(out);
  };

  /**
   * Runs the closing hook once (a goodbye and then the socket's close both wait for the same run), bounded in time;
   * its failure never keeps a connection open.
   */
  const runClosingHook = (): Promise<void> => (hookRun ??= callClosingHook());
  const callClosingHook = async (): Promise<void> => {
    const hook = closingHook();
    if (!hook) return;
    const settle = async (): Promise<boolean> => {
      for (let i = 0; i < 100; i++) {
        const attempt = connection.trySettle();
        if (attempt) return attempt;
        if (upstream.destroyed) return false;
        await sleep(SETTLE_POLL_MS);
      }
      return false;
    };
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([hook(record(), settle).catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSING_HOOK_TIMEOUT_MS)))]);
    clearTimeout(timer);
  };

  const fromClient = (chunk: Buffer): void => {
    if (settling || holdingGoodbye) {
      heldFromClient.push(chunk);
      return;
    }
    if (session.clientPassesThrough(chunk)) {
      // Forwarded before it is counted; a chunk that may end in a goodbye takes the path below, where it is held.
      toServer(chunk);
      try {
        session.fromClient(chunk, reply);
      } catch (error) {
        session.tally.fail(`internal counter error: ${errorText(error)}`);
      }
      return;
    }
    let out: Buffer | null;
    try {
      out = session.fromClient(chunk, reply);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
      out = chunk;
    }
    if (session.closing && hookRun === null && closingHook()) {
      // The goodbye is held until the hook has read what it needs from the server side.
      holdingGoodbye = true;
      void runClosingHook().then(() => {
        holdingGoodbye = false;
        toServer(out);
        releaseHeld();
      });
      return;
    }
    toServer(out);
  };
  const releaseHeld = (): void => {
    while (heldFromClient.length > 0 && !settling && !holdingGoodbye) fromClient(heldFromClient.shift() as Buffer);
  };

  client.on('data', fromClient);
  upstream.on('data', (chunk: Buffer) => {
    const current = settling;
    if (!current) {
      toClient(chunk);
      return;
    }
    const { used, done, passthrough } = current.reader.read(chunk);
    if (passthrough) toClient(passthrough);
    if (!done) return;
    settling = null;
    current.done(true);
    if (used < chunk.length) toClient(chunk.subarray(used));
    releaseHeld();
  });
  upstream.on('drain', () => client.resume());
  client.on('drain', () => upstream.resume());

  client.on('error', (error) => {
    firstClose ??= `client error ${errorText(error)}`;
  });
  let upstreamConnected = false;
  upstream.on('connect', () => (upstreamConnected = true));
  upstream.on('error', (error) => {
    firstClose ??= `server connection error ${errorText(error)}`;
    if (!upstreamConnected) session.tally.fail(`could not connect to the server: ${errorText(error)}`);
  });
  const finish = (): void => {
    if (!clientClosed || !upstreamClosed) return;
    connection.closedAtNs = nowNs();
    // Any window on this server, in this session or another, waits for it to leave (departures.ts).
    const serverId = session.serverConnectionId;
    if (serverId !== null) noteDeparture(options.target, serverId, connection.closedAtNs);
    try {
      session.end(`connection closed (${firstClose ?? 'unknown'})`);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
    }
    resolveClosed();
  };
  client.on('close', () => {
    clientClosed = true;
    firstClose ??= 'client closed';
    // Backpressure from a client that is gone: nothing will drain it.
    upstream.resume();
    void runClosingHook().then(() => {
      if (!upstream.destroyed) upstream.end(() => upstream.destroy());
      finish();
    });
  });
  upstream.on('close', () => {
    upstreamClosed = true;
    firstClose ??= 'server closed';
    const pending = settling;
    settling = null;
    pending?.done(false);
    if (!client.destroyed) client.end(() => client.destroy());
    finish();
  });
  return connection;
}

/**
 * One end of an in-process byte stream pair: what one end writes, the other reads, in the same turn. Destroying or
 * ending one end ends the other, as a socket's close does.
 */
class StreamEnd extends Duplex {
  other: StreamEnd | null = null;
  #pendingWrite: (() => void) | null = null;
  // Deliveries (and the proxy's counting and forwarding in them) run in the context the pair was opened in, as a
  // socket's I/O does: the transport's work, not the writer's, which a window's deferred-work tracking must not follow.
  readonly #scope = new AsyncResource('SqltallyWireStream');

  constructor() {
    super({ allowHalfOpen: false });
  }

  override _read(): void {
    const other = this.other;
    if (!other) return;
    const resume = other.#pendingWrite;
    if (resume) {
      other.#pendingWrite = null;
      resume();
    }
  }

  // Delivered on the next tick: writes made meanwhile wait in the Writable's buffer and leave together through
  // _writev, so a driver that pipelines many small writes in one turn costs one chunk and one forward, as over TCP.
  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#scope.runInAsyncScope(process.nextTick, process, () => {
      const other = this.other;
      if (!other || other.destroyed) return callback(new Error('the other end of the stream is closed'));
      if (other.push(chunk)) callback();
      else this.#pendingWrite = callback;
    });
  }

  // A corked socket's writes (pg's Parse/Bind/Describe/Execute/Sync) arrive as one read over TCP; here they become one
  // chunk too, so the proxy forwards them in one write and `clientWrites` reads the same on both paths.
  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    this._write(chunks.length === 1 ? (chunks[0] as { chunk: Buffer }).chunk : Buffer.concat(chunks.map((c) => c.chunk)), 'binary', callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.other?.push(null);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const other = this.other;
    const pending = this.#pendingWrite;
    this.#pendingWrite = null;
    pending?.();
    if (other && !other.destroyed) {
      other.push(null);
      other.destroy();
    }
    callback(error);
  }
}

/** The driver's end: also answers the socket methods drivers call on a stream they were given. */
class DriverStreamEnd extends StreamEnd implements WireStream {
  get readyState(): 'open' | 'readOnly' | 'writeOnly' | 'closed' {
    if (this.readable && this.writable) return 'open';
    return this.readable ? 'readOnly' : this.writable ? 'writeOnly' : 'closed';
  }
  /** Already connected: the proxy opens the server connection itself. pg waits for 'connect'. */
  connect(): this {
    process.nextTick(() => this.emit('connect'));
    return this;
  }
  address(): { address: string; family: string; port: number } {
    return { address: '127.0.0.1', family: 'IPv4', port: 0 };
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

/** Starts a proxy on 127.0.0.1 (random free port) in front of `options.target`. */
export async function startWireProxy(options: WireProxyOptions): Promise<WireProxy> {
  const proxyId = randomUUID();
  const all: ProxiedConnection[] = [];
  let nextId = 1;
  let closing: Promise<void> | null = null;
  let hook: ClosingHook | null = null;
  const server = net.createServer({ noDelay: true }, (client) => {
    if (closing) {
      client.destroy();
      return;
    }
    all.push(relay(nextId++, client, options, () => (closing ? null : hook)));
  });
  server.on('error', () => {
    // Only listen() can fail, and that rejects below; later errors have no socket to hurt.
  });
  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void => reject(new SqltallyError('wire proxy could not listen on 127.0.0.1', { phase: 'wire', cause: error }));
    server.once('error', onError);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address() as net.AddressInfo;

  const connections = (): WireConnection[] => all.map((c) => connectionRecord(c.id, c.session, c.openedAtNs, c.closedAtNs));
  const close = (): Promise<void> => {
    closing ??= (async () => {
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const c of all) {
        c.client.destroy();
        c.upstream.destroy();
      }
      await Promise.all([serverClosed, ...all.map((c) => c.closed)]);
    })();
    return closing;
  };

  const settle = async (opts: { ids?: readonly number[]; timeoutMs?: number } = {}): Promise<SettleResult> => {
    const wanted = opts.ids ? new Set(opts.ids) : null;
    const targets = all.filter((c) => c.closedAtNs === null && !c.upstream.destroyed && (!wanted || wanted.has(c.id)));
    const deadline = Date.now() + (opts.timeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS);
    const result: SettleResult = { settled: [], busy: [] };
    await Promise.all(
      targets.map(async (c) => {
        for (;;) {
          const attempt = c.trySettle();
          if (attempt) {
            if (await attempt) result.settled.push(c.id);
            else result.busy.push({ id: c.id, serverConnectionId: c.session.serverConnectionId, why: 'the server closed it before answering' });
            return;
          }
          if (c.closedAtNs !== null || c.upstream.destroyed) return;
          if (Date.now() >= deadline) {
            result.busy.push({
              id: c.id,
              serverConnectionId: c.session.serverConnectionId,
              why: c.session.unanswered() > 0 ? `${c.session.unanswered()} request(s) still in flight` : 'in the middle of a request',
            });
            return;
          }
          await sleep(SETTLE_POLL_MS);
        }
      }),
    );
    result.settled.sort((a, b) => a - b);
    return result;
  };

  const openStream = (): WireStream => {
    const driverEnd = new DriverStreamEnd();
    const proxyEnd = new StreamEnd();
    driverEnd.other = proxyEnd;
    proxyEnd.other = driverEnd;
    if (closing) {
      driverEnd.destroy();
      return driverEnd;
    }
    all.push(relay(nextId++, proxyEnd, options, () => (closing ? null : hook)));
    return driverEnd;
  };

  return {
    protocol: options.protocol,
    host: '127.0.0.1',
    port: address.port,
    where: `the proxy at 127.0.0.1:${address.port}`,
    holdsGoodbyes: true,
    caughtUp: () => Promise.resolve(),
    openStream,
    connections,
    closing: () => all.filter((c) => c.closedAtNs === null && c.isClosing()).map((c) => c.id),
    snapshot: () => ({ proxyId, protocol: options.protocol, takenAtNs: nowNs(), connections: connections() }),
    diff: diffWireSnapshots,
    settle,
    onClosing: (h) => {
      hook = h;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
