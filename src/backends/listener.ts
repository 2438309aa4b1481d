import net from 'node:net';
import { PROTOCOLS } from './protocols';
import type { WireProtocol } from './types';

/**
 * What is at a host and port, seen by a raw TCP client that knows how each protocol opens. Drivers cannot tell
 * "nothing listens" from "something listens that is not a database": mysql2 says ETIMEDOUT for a silent listener
 * and for Redis alike, pg says "timeout expired". This asks the question they do not.
 */
export type ListenerKind =
  /** Connection refused: nothing listens on that port. */
  | 'refused'
  /** The host name does not resolve. */
  | 'unresolved'
  /** No route, or the TCP connect itself got no answer. */
  | 'unreachable'
  /** Accepted the connection, then said nothing, even when spoken to. */
  | 'silent'
  /** Accepted the connection and closed it without a word. */
  | 'closed'
  /** Answered, but not in the protocol asked for (an HTTP server, Redis, garbage). */
  | 'foreign'
  /** Opened the conversation the way this protocol's servers do. */
  | 'speaks';

export interface ListenerDiagnosis {
  kind: ListenerKind;
  /** The socket error code for refused/unresolved/unreachable. */
  code?: string;
  /** The first bytes it sent, printable characters kept and the rest shown as `.`, for `foreign`. */
  answer?: string;
  /** How long the silence or the connect attempt was waited for. */
  waitedMs: number;
}

export type { WireProtocol } from './types';

export const DEFAULT_DIAGNOSIS_TIMEOUT_MS = 3_000;
/** After the protocol's own opening met silence: a text protocol (Redis, HTTP, SMTP) answers a line at once. */
const POKE_WAIT_MS = 1_000;
const ANSWER_SHOWN_BYTES = 48;
/** Harmless to text protocols, meaningless to binary ones: a blank line, then a polite goodbye. */
const POKE = Buffer.from('\r\nQUIT\r\n');
const UNRESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME']);
function printable(bytes: Buffer): string {
  const shown = bytes
    .subarray(0, ANSWER_SHOWN_BYTES)
    .toString('latin1')
    .replace(/[^\x20-\x7e]/g, '.');
  return bytes.length > ANSWER_SHOWN_BYTES ? `${shown}...` : shown;
}

/** What one connection saw: bytes (possibly none), and whether the peer closed or reset before the wait ran out. */
interface Exchange {
  error?: NodeJS.ErrnoException;
  connected: boolean;
  received: Buffer;
  closed: boolean;
}

/**
 * One connection: connect within `timeoutMs`, send `opening` (if any), then collect what comes back until `done`
 * says it is enough, the peer closes, or `waitMs` of silence passes. Always destroys its socket.
 */
function exchange(
  host: string,
  port: number,
  opening: Buffer | null,
  timeoutMs: number,
  waitMs: number,
  done: (received: Buffer) => boolean,
): Promise<Exchange> {
  return new Promise((resolve) => {
    const result: Exchange = { connected: false, received: Buffer.alloc(0), closed: false };
    const socket = net.connect({ host, port });
    let timer: NodeJS.Timeout;
    const finish = (): void => {
      clearTimeout(timer);
      socket.removeAllListeners();
      // A late error after we decided must not become an unhandled 'error' event.
      socket.on('error', () => undefined);
      socket.destroy();
      resolve(result);
    };
    timer = setTimeout(finish, timeoutMs);
    socket.once('connect', () => {
      result.connected = true;
      if (opening) socket.write(opening);
      clearTimeout(timer);
      timer = setTimeout(finish, waitMs);
    });
    socket.on('data', (chunk: Buffer) => {
      result.received = Buffer.concat([result.received, chunk]);
      if (done(result.received)) finish();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (result.connected) result.closed = true;
      else result.error = err;
      finish();
    });
    socket.on('end', () => {
      result.closed = true;
      finish();
    });
  });
}

/**
 * Connects to `host:port` and classifies what answers. For MySQL it waits for the server's greeting; for PostgreSQL
 * it sends an SSLRequest (8 bytes a server answers with one). Silence is met once more on a fresh connection with a
 * blank line, which a text service (Redis, HTTP, SMTP) answers and a database ignores: on the first connection the
 * SSLRequest's NUL bytes can leave a line-oriented server waiting for the end of a line forever. Never logs in,
 * never sends a query; closes its sockets before returning.
 */
export async function diagnoseListener(
  host: string,
  port: number,
  protocol: WireProtocol,
  timeoutMs = DEFAULT_DIAGNOSIS_TIMEOUT_MS,
): Promise<ListenerDiagnosis> {
  const started = Date.now();
  const waited = (): number => Date.now() - started;
  const greeting = PROTOCOLS[protocol].greeting;
  const first = await exchange(host, port, greeting.opening, timeoutMs, timeoutMs, (r) => greeting.enough(r));
  if (!first.connected) {
    const code = first.error?.code ?? 'ETIMEDOUT';
    const kind: ListenerKind = code === 'ECONNREFUSED' ? 'refused' : UNRESOLVED.has(code) ? 'unresolved' : 'unreachable';
    return { kind, code, waitedMs: waited() };
  }
  if (first.received.length > 0) {
    const speaks = greeting.speaks(first.received);
    return speaks ? { kind: 'speaks', waitedMs: waited() } : { kind: 'foreign', answer: printable(first.received), waitedMs: waited() };
  }
  if (first.closed) return { kind: 'closed', waitedMs: waited() };
  const poked = await exchange(host, port, POKE, timeoutMs, POKE_WAIT_MS, (r) => r.length > 0);
  if (poked.received.length > 0) return { kind: 'foreign', answer: printable(poked.received), waitedMs: waited() };
  return { kind: 'silent', waitedMs: waited() };
}

/**
 * Whether the server at `host:port` offers TLS to a client that asks (the MySQL greeting's CLIENT_SSL, PostgreSQL's
 * answer to an SSLRequest), or null when it did not say within `timeoutMs`. Never logs in; closes its socket.
 */
export async function serverOffersTls(host: string, port: number, protocol: WireProtocol, timeoutMs = DEFAULT_DIAGNOSIS_TIMEOUT_MS): Promise<boolean | null> {
  const greeting = PROTOCOLS[protocol].greeting;
  const answer = await exchange(host, port, greeting.opening, timeoutMs, timeoutMs, (r) => greeting.offersTls(r) !== null);
  return greeting.offersTls(answer.received);
}
