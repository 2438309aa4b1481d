import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { SqltallyError } from '../../containers/errors';
import { MysqlSession } from './mysql-protocol';
import { PgSession } from './pg-protocol';
import { connectionRecord, diffWireSnapshots } from './tally';
import type { WireProtocol, WireSession } from './tally';
import type { WireConnection, WireCounts, WireSnapshot } from './types';

/** How `startWireProxy` is configured. */
export interface WireProxyOptions {
  protocol: 'mysql' | 'postgres';
  /** The real server the proxy forwards to. */
  target: { host: string; port: number };
  /**
   * `refuse` (default): keep sessions in plain text so they can be counted: MySQL greetings lose CLIENT_SSL,
   * PostgreSQL SSLRequest/GSSENCRequest are answered 'N' by the proxy. Use it only where plain text is allowed.
   * `passthrough`: let TLS through untouched; such a connection's counts are `incomplete`.
   */
  tls?: 'refuse' | 'passthrough';
}

/**
 * A loopback TCP proxy between a driver and a MySQL/MariaDB/PostgreSQL server. Bytes are forwarded unchanged (except
 * the TLS refusal above) with backpressure; both directions are parsed on the side. A parse fault never stops the
 * bytes: the connection's counts become `incomplete` instead.
 *
 * `clientWrites` counts socket reads from the client that carried at least one command start. It approximates the
 * driver's writes by TCP chunk: on loopback one driver write usually arrives as one chunk, but the kernel may split a
 * large write or merge two quick ones.
 */
export interface WireProxy extends AsyncDisposable {
  readonly protocol: 'mysql' | 'postgres';
  /** Always 127.0.0.1. */
  readonly host: string;
  /** The port drivers connect to instead of the server's. */
  readonly port: number;
  /** Every connection accepted so far (closed ones included), with cumulative counts. */
  connections(): WireConnection[];
  /** Cumulative counts of every connection, at this instant. */
  snapshot(): WireSnapshot;
  /**
   * The traffic between two snapshots, summed over connections. Handshakes of connections opened in between go
   * to `setup`, not to the command counts. A fire-and-forget message the client wrote just before `after` (one
   * with no answer, like COM_STMT_CLOSE) may not have reached the proxy yet and then falls in the next window.
   */
  diff(before: WireSnapshot, after: WireSnapshot): WireCounts;
  /** Stops listening, destroys every socket and resolves once all are closed; idempotent. */
  close(): Promise<void>;
}

interface ProxiedConnection {
  id: number;
  session: WireSession;
  client: net.Socket;
  upstream: net.Socket;
  openedAtNs: number;
  closedAtNs: number | null;
  closed: Promise<void>;
}

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/** The protocol parser of each wire protocol, keyed so that a new protocol cannot be left without one. */
const SESSIONS = {
  mysql: (tls) => new MysqlSession({ tls }),
  postgres: (tls) => new PgSession({ tls }),
} satisfies Record<WireProtocol, (tls: 'refuse' | 'passthrough') => WireSession>;

function sessionFor(options: WireProxyOptions): WireSession {
  return SESSIONS[options.protocol](options.tls ?? 'refuse');
}

function errorText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return e?.code ? `${e.code}` : String(e?.message ?? error);
}

/**
 * Wires one accepted client socket to a new upstream socket. Every socket gets an 'error' listener (an unhandled
 * one would crash the test process); whichever side closes first, the other is ended after its pending writes.
 */
function relay(id: number, client: net.Socket, options: WireProxyOptions): ProxiedConnection {
  const session = sessionFor(options);
  const upstream = net.connect({ host: options.target.host, port: options.target.port });
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  let firstClose: string | null = null;
  let clientClosed = false;
  let upstreamClosed = false;
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));
  const connection: ProxiedConnection = { id, session, client, upstream, openedAtNs: nowNs(), closedAtNs: null, closed };

  const reply = (bytes: Buffer): void => {
    if (!client.destroyed) client.write(bytes);
  };
  client.on('data', (chunk: Buffer) => {
    let out: Buffer | null;
    try {
      out = session.fromClient(chunk, reply);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
      out = chunk;
    }
    if (out && !upstream.destroyed && !upstream.write(out)) client.pause();
  });
  upstream.on('data', (chunk: Buffer) => {
    let out: Buffer | null;
    try {
      out = session.fromServer(chunk);
    } catch (error) {
      session.tally.fail(`internal counter error: ${errorText(error)}`);
      out = chunk;
    }
    if (out && !client.destroyed && !client.write(out)) upstream.pause();
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
    if (!upstream.destroyed) upstream.end(() => upstream.destroy());
    finish();
  });
  upstream.on('close', () => {
    upstreamClosed = true;
    firstClose ??= 'server closed';
    if (!client.destroyed) client.end(() => client.destroy());
    finish();
  });
  return connection;
}

/** Starts a proxy on 127.0.0.1 (random free port) in front of `options.target`. */
export async function startWireProxy(options: WireProxyOptions): Promise<WireProxy> {
  const proxyId = randomUUID();
  const all: ProxiedConnection[] = [];
  let nextId = 1;
  let closing: Promise<void> | null = null;
  const server = net.createServer({ noDelay: true }, (client) => {
    if (closing) {
      client.destroy();
      return;
    }
    all.push(relay(nextId++, client, options));
  });
  server.on('error', () => {
    // Only listen() can fail, and that rejects below; later errors have no socket to hurt.
  });
  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void =>
      reject(new SqltallyError('wire proxy could not listen on 127.0.0.1', { phase: 'wire', cause: error }));
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

  return {
    protocol: options.protocol,
    host: '127.0.0.1',
    port: address.port,
    connections,
    snapshot: () => ({ proxyId, protocol: options.protocol, takenAtNs: nowNs(), connections: connections() }),
    diff: diffWireSnapshots,
    close,
    [Symbol.asyncDispose]: close,
  };
}
