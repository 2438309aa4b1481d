import net from 'node:net';

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

export type WireProtocol = 'mysql' | 'postgres';

export const DEFAULT_DIAGNOSIS_TIMEOUT_MS = 3_000;
/** After the protocol's own opening met silence: a text protocol (Redis, HTTP, SMTP) answers a line at once. */
const POKE_WAIT_MS = 1_000;
const ANSWER_SHOWN_BYTES = 48;
/** PostgreSQL's SSLRequest: length 8, code 80877103. A server answers one byte, `S` or `N`, before anything else. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
/** Harmless to text protocols, meaningless to binary ones: a blank line, then a polite goodbye. */
const POKE = Buffer.from('\r\nQUIT\r\n');
const UNRESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME']);
/** MySQL protocol 10 greeting, or an ERR packet (a server refusing this host, or "too many connections"). */
const MYSQL_GREETING = 0x0a;
const MYSQL_ERR = 0xff;
const MYSQL_MAX_GREETING = 1 << 16;

/** A MySQL/MariaDB server speaks first: a packet with sequence id 0 holding a v10 handshake or an error. */
export function looksLikeMysqlGreeting(bytes: Buffer): boolean {
  if (bytes.length < 5) return false;
  const length = bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16);
  return length > 0 && length < MYSQL_MAX_GREETING && bytes[3] === 0 && (bytes[4] === MYSQL_GREETING || bytes[4] === MYSQL_ERR);
}

/** A PostgreSQL server answers an SSLRequest with `S` (TLS on offer) or `N`, or (older, or refusing) an ErrorResponse. */
export function looksLikePostgresAnswer(bytes: Buffer): boolean {
  const first = bytes[0];
  if (first === 0x53 /* S */ || first === 0x4e /* N */) return bytes.length === 1;
  if (first === 0x45 /* E */) return bytes.length < 5 || bytes.readUInt32BE(1) < MYSQL_MAX_GREETING;
  return false;
}

/** Enough bytes to decide, per protocol. */
function enough(protocol: WireProtocol, bytes: Buffer): boolean {
  return protocol === 'mysql' ? bytes.length >= 5 : bytes.length >= 1;
}

function printable(bytes: Buffer): string {
  const shown = bytes.subarray(0, ANSWER_SHOWN_BYTES).toString('latin1').replace(/[^\x20-\x7e]/g, '.');
  return bytes.length > ANSWER_SHOWN_BYTES ? `${shown}...` : shown;
}

/**
 * Connects to `host:port` and classifies what answers. For MySQL it waits for the server's greeting; for PostgreSQL
 * it sends an SSLRequest (8 bytes a server answers with one). Silence is met once with a blank line, which a text
 * service answers and a database ignores. Never logs in, never sends a query; closes its socket before returning.
 */
export function diagnoseListener(host: string, port: number, protocol: WireProtocol, timeoutMs = DEFAULT_DIAGNOSIS_TIMEOUT_MS): Promise<ListenerDiagnosis> {
  return new Promise((resolve) => {
    const started = Date.now();
    let received = Buffer.alloc(0);
    let phase: 'connect' | 'opening' | 'poked' = 'connect';
    let timer: NodeJS.Timeout | undefined;
    const socket = net.connect({ host, port });
    const finish = (d: Omit<ListenerDiagnosis, 'waitedMs'>): void => {
      if (timer) clearTimeout(timer);
      socket.removeAllListeners();
      // A late error after we decided must not become an unhandled 'error' event.
      socket.on('error', () => undefined);
      socket.destroy();
      resolve({ ...d, waitedMs: Date.now() - started });
    };
    const classify = (): void => {
      const speaks = protocol === 'mysql' ? looksLikeMysqlGreeting(received) : looksLikePostgresAnswer(received);
      finish(speaks ? { kind: 'speaks' } : { kind: 'foreign', answer: printable(received) });
    };
    const wait = (ms: number, onSilence: () => void): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(onSilence, ms);
    };
    socket.on('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? 'EUNKNOWN';
      if (phase !== 'connect') {
        // A reset after it accepted us is a way of closing without a word, unless it said something first.
        if (received.length > 0) classify();
        else finish({ kind: 'closed', code });
        return;
      }
      if (code === 'ECONNREFUSED') finish({ kind: 'refused', code });
      else if (UNRESOLVED.has(code)) finish({ kind: 'unresolved', code });
      else finish({ kind: 'unreachable', code });
    });
    wait(timeoutMs, () => finish({ kind: 'unreachable', code: 'ETIMEDOUT' }));
    socket.once('connect', () => {
      phase = 'opening';
      if (protocol === 'postgres') socket.write(SSL_REQUEST);
      wait(timeoutMs, () => {
        if (received.length > 0) return classify();
        phase = 'poked';
        socket.write(POKE);
        wait(POKE_WAIT_MS, () => (received.length > 0 ? classify() : finish({ kind: 'silent' })));
      });
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      // After the poke, any answer at all is the verdict: a database would have spoken before it.
      if (phase === 'poked' || enough(protocol, received)) classify();
    });
    socket.on('end', () => (received.length > 0 ? classify() : finish({ kind: 'closed' })));
  });
}
