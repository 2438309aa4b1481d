import { ConnectionTally, WireParseError, endsWith } from './tally';
import type { WireSession } from './tally';
import { BufferClass, mathMin } from '../shared/intrinsics';
import { PgStatementTracker } from './pg-statements';

/** The server refuses messages above 1 GiB; a larger length is a broken stream, not a big message. */
export const PG_MAX_MESSAGE_LENGTH = 0x40000000;
/** PostgreSQL's own limit for a startup packet (MAX_STARTUP_PACKET_LENGTH). */
const MAX_STARTUP_LENGTH = 10000;
/** Body bytes kept per message: startup codes, auth type, backend pid, command tags. */
const HEAD_BYTES = 64;
/**
 * Query and Parse bodies are kept whole up to this size, so their statements can be split and classified; a longer
 * text keeps its head only, and its statements are counted from the server's answers.
 */
export const PG_TEXT_KEPT = 1 << 20;

// Startup request codes (no type byte; a 4-byte length then this code).
const SSL_REQUEST_CODE = 80877103;
const GSSENC_REQUEST_CODE = 80877104;
const CANCEL_REQUEST_CODE = 80877102;
const PROTOCOL_MAJOR_3 = 3;

/**
 * How the next message starts: `typed` (type byte + length), `untyped` (startup family: length + code), `byte`
 * (the single-byte answer to SSLRequest/GSSENCRequest).
 */
export type PgFrameShape = 'typed' | 'untyped' | 'byte';

/** One PostgreSQL message. */
export interface PgFrame {
  /** Type byte; 0 for an untyped startup-family message; for a `byte` frame, the byte itself. */
  type: number;
  /** Value of the length field (includes itself); 0 for a `byte` frame. */
  length: number;
  /** The first bytes of the body after the length (at most 64). */
  readonly head: Buffer;
  /** `head` is `bytes[headStart, headStart + headLength)`: the hot path reads `bytes` directly, never making `head`. */
  readonly bytes: Buffer;
  readonly headStart: number;
  readonly headLength: number;
  /** All bytes of the message on the wire. */
  wireBytes: number;
  /** Number of the `parse` call the message's first byte arrived in (client write bursts). */
  chunk: number;
}

const EMPTY = Buffer.alloc(0);

/**
 * A message whose head is a view of the socket chunk it arrived in whenever the head lies whole in one chunk (the
 * usual case): no copy and no Buffer per message; `head` is made on first use. Chunks are never reused by the
 * socket, so the view stays valid. A head cut across chunks is copied into a buffer of its own, as it arrives.
 */
export class PgFrameRecord implements PgFrame {
  type = 0;
  length = 0;
  wireBytes = 0;
  chunk = 0;
  bytes: Buffer = EMPTY;
  headStart = 0;
  headLength = 0;
  #head: Buffer | null = null;

  constructor(type: number, length: number, wireBytes: number, chunk: number, bytes: Buffer, headStart: number, headLength: number) {
    this.reset(type, length, wireBytes, chunk, bytes, headStart, headLength);
  }

  /** Makes this record the next message's, for a parser that hands out one record over and over. */
  reset(type: number, length: number, wireBytes: number, chunk: number, bytes: Buffer, headStart: number, headLength: number): this {
    this.type = type;
    this.length = length;
    this.wireBytes = wireBytes;
    this.chunk = chunk;
    this.bytes = bytes;
    this.headStart = headStart;
    this.headLength = headLength;
    this.#head = null;
    return this;
  }

  get head(): Buffer {
    this.#head ??=
      this.headStart === 0 && this.bytes.length === this.headLength ? this.bytes : this.bytes.subarray(this.headStart, this.headStart + this.headLength);
    return this.#head;
  }
}

/**
 * Incremental PostgreSQL message framing over a byte stream. The session sets `next` between messages (startup
 * messages have no type byte); lengths below 4 or above 1 GiB are refused, since no split can make them right.
 */
export class PgMessageParser {
  /** Shape of the next message; the session changes it from inside `onFrame`. */
  next: PgFrameShape;
  readonly #header = Buffer.alloc(5);
  #headerFill = 0;
  #headerSize = 0;
  /** Body bytes still to come; -1 between messages. */
  #remaining = -1;
  #frame: PgFrameRecord | null = null;
  /** Head bytes of `#frame` already in place (equal to its `headLength` when the head is a view of a chunk). */
  #headFill = 0;
  #chunks = 0;

  readonly #checkType: ((type: number) => void) | undefined;
  readonly #keepWhole: Uint8Array | undefined;
  /** The one record handed out again and again (`frames: 'reused'`), else null. */
  readonly #spare: PgFrameRecord | null;

  /**
   * `checkType` sees each typed message's type before its body arrives, so garbage is refused at once. Messages of a
   * type set in `keepWhole` have their whole body as head, up to {@link PG_TEXT_KEPT} bytes. With `frames: 'reused'`
   * every frame is the same record, valid only during `onFrame`: for a reader that keeps nothing of a frame, it saves
   * an object per message.
   */
  constructor(first: PgFrameShape, checkType?: (type: number) => void, keepWhole?: readonly number[], frames: 'fresh' | 'reused' = 'fresh') {
    this.next = first;
    this.#checkType = checkType;
    this.#spare = frames === 'reused' ? new PgFrameRecord(0, 0, 0, 0, EMPTY, 0, 0) : null;
    if (keepWhole) this.#keepWhole = typeTable(keepWhole);
  }

  get midFrame(): boolean {
    return this.#headerFill > 0 || this.#remaining >= 0;
  }

  parse(chunk: Buffer, onFrame: (frame: PgFrameRecord) => void): void {
    const chunkNo = this.#chunks++;
    const end = chunk.length;
    let i = 0;
    while (i < end) {
      if (this.#remaining < 0) {
        if (this.#headerFill === 0) this.#headerSize = this.next === 'typed' ? 5 : this.next === 'untyped' ? 4 : 1;
        const size = this.#headerSize;
        let header: Buffer;
        let at: number;
        if (this.#headerFill === 0 && end - i >= size) {
          header = chunk;
          at = i;
          i += size;
        } else {
          const take = mathMin(size - this.#headerFill, end - i);
          chunk.copy(this.#header, this.#headerFill, i, i + take);
          this.#headerFill += take;
          i += take;
          if (this.#headerFill < size) break;
          this.#headerFill = 0;
          header = this.#header;
          at = 0;
        }
        if (size === 1) {
          onFrame(this.#record(header[at] as number, 0, 1, chunkNo, EMPTY, 0, 0));
          continue;
        }
        const type = size === 5 ? (header[at] as number) : 0;
        const l = at + size - 4;
        const length = (((header[l] as number) << 24) | ((header[l + 1] as number) << 16) | ((header[l + 2] as number) << 8) | (header[l + 3] as number)) >>> 0;
        if (size === 5) this.#checkType?.(type);
        this.#checkLength(type, length, size);
        const body = length - 4;
        const limit = size === 5 && this.#keepWhole?.[type] === 1 ? PG_TEXT_KEPT : HEAD_BYTES;
        const headLength = body < limit ? body : limit;
        if (body <= end - i) {
          // The whole message is here: no copy, no state to keep, on to the next one.
          const frame = this.#record(type, length, size + body, chunkNo, chunk, i, headLength);
          i += body;
          onFrame(frame);
          continue;
        }
        if (headLength <= end - i) {
          this.#frame = this.#record(type, length, size + body, chunkNo, chunk, i, headLength);
          this.#headFill = headLength;
        } else {
          this.#frame = this.#record(type, length, size + body, chunkNo, BufferClass.allocUnsafe(headLength), 0, headLength);
          this.#headFill = 0;
        }
        this.#remaining = body;
        continue;
      }
      const take = mathMin(this.#remaining, end - i);
      const frame = this.#frame as PgFrameRecord;
      if (this.#headFill < frame.headLength) {
        const copy = mathMin(take, frame.headLength - this.#headFill);
        chunk.copy(frame.bytes, this.#headFill, i, i + copy);
        this.#headFill += copy;
      }
      this.#remaining -= take;
      i += take;
      if (this.#remaining === 0) this.#endMessage(onFrame);
    }
  }

  #record(type: number, length: number, wireBytes: number, chunk: number, bytes: Buffer, headStart: number, headLength: number): PgFrameRecord {
    const spare = this.#spare;
    return spare
      ? spare.reset(type, length, wireBytes, chunk, bytes, headStart, headLength)
      : new PgFrameRecord(type, length, wireBytes, chunk, bytes, headStart, headLength);
  }

  #checkLength(type: number, length: number, size: number): void {
    if (size === 4) {
      if (length < 8 || length > MAX_STARTUP_LENGTH) {
        throw new WireParseError(`impossible startup message length ${length}`);
      }
      return;
    }
    if (length < 4 || length > PG_MAX_MESSAGE_LENGTH) {
      throw new WireParseError(`impossible length ${length} for message ${describeType(type)}`);
    }
  }

  #endMessage(onFrame: (frame: PgFrameRecord) => void): void {
    const frame = this.#frame as PgFrameRecord;
    this.#frame = null;
    this.#remaining = -1;
    onFrame(frame);
  }
}

function describeType(type: number): string {
  return type >= 0x20 && type < 0x7f ? `'${String.fromCharCode(type)}'` : `0x${type.toString(16).padStart(2, '0')}`;
}

/** Frontend (client) message types. */
const enum Frontend {
  Bind = 0x42, // B
  Close = 0x43, // C
  Describe = 0x44, // D
  Execute = 0x45, // E
  FunctionCall = 0x46, // F
  Flush = 0x48, // H
  Parse = 0x50, // P
  Query = 0x51, // Q
  Sync = 0x53, // S
  Terminate = 0x58, // X
  CopyDone = 0x63, // c
  CopyData = 0x64, // d
  CopyFail = 0x66, // f
  Password = 0x70, // p (PasswordMessage, SASLInitialResponse, SASLResponse, GSSResponse)
}

/** Backend (server) message types: the same letter can mean another thing than in the frontend table. */
const enum Backend {
  ParseComplete = 0x31, // 1
  BindComplete = 0x32, // 2
  CloseComplete = 0x33, // 3
  NotificationResponse = 0x41, // A
  CommandComplete = 0x43, // C
  DataRow = 0x44, // D
  ErrorResponse = 0x45, // E
  CopyInResponse = 0x47, // G
  CopyOutResponse = 0x48, // H
  EmptyQueryResponse = 0x49, // I
  BackendKeyData = 0x4b, // K
  NoticeResponse = 0x4e, // N
  Authentication = 0x52, // R
  ParameterStatus = 0x53, // S
  RowDescription = 0x54, // T
  FunctionCallResponse = 0x56, // V
  CopyBothResponse = 0x57, // W
  ReadyForQuery = 0x5a, // Z
  CopyDone = 0x63, // c
  CopyData = 0x64, // d
  NoData = 0x6e, // n
  PortalSuspended = 0x73, // s
  ParameterDescription = 0x74, // t
  NegotiateProtocolVersion = 0x76, // v
}

const FRONTEND_NAMES: ReadonlyMap<number, string> = new Map([
  [Frontend.Bind, 'Bind'],
  [Frontend.Close, 'Close'],
  [Frontend.Describe, 'Describe'],
  [Frontend.Execute, 'Execute'],
  [Frontend.FunctionCall, 'FunctionCall'],
  [Frontend.Flush, 'Flush'],
  [Frontend.Parse, 'Parse'],
  [Frontend.Query, 'Query'],
  [Frontend.Sync, 'Sync'],
  [Frontend.Terminate, 'Terminate'],
  [Frontend.CopyDone, 'CopyDone'],
  [Frontend.CopyData, 'CopyData'],
  [Frontend.CopyFail, 'CopyFail'],
]);

const BACKEND_NAMES: ReadonlyMap<number, string> = new Map([
  [Backend.ParseComplete, 'ParseComplete'],
  [Backend.BindComplete, 'BindComplete'],
  [Backend.CloseComplete, 'CloseComplete'],
  [Backend.NotificationResponse, 'NotificationResponse'],
  [Backend.CommandComplete, 'CommandComplete'],
  [Backend.DataRow, 'DataRow'],
  [Backend.ErrorResponse, 'ErrorResponse'],
  [Backend.CopyInResponse, 'CopyInResponse'],
  [Backend.CopyOutResponse, 'CopyOutResponse'],
  [Backend.EmptyQueryResponse, 'EmptyQueryResponse'],
  [Backend.BackendKeyData, 'BackendKeyData'],
  [Backend.NoticeResponse, 'NoticeResponse'],
  [Backend.Authentication, 'Authentication'],
  [Backend.ParameterStatus, 'ParameterStatus'],
  [Backend.RowDescription, 'RowDescription'],
  [Backend.FunctionCallResponse, 'FunctionCallResponse'],
  [Backend.CopyBothResponse, 'CopyBothResponse'],
  [Backend.ReadyForQuery, 'ReadyForQuery'],
  [Backend.CopyDone, 'CopyDone'],
  [Backend.CopyData, 'CopyData'],
  [Backend.NoData, 'NoData'],
  [Backend.PortalSuspended, 'PortalSuspended'],
  [Backend.ParameterDescription, 'ParameterDescription'],
  [Backend.NegotiateProtocolVersion, 'NegotiateProtocolVersion'],
]);

/** The name tables by type byte: an array read per message instead of a map lookup. */
const FRONTEND_NAME_BY_TYPE: readonly (string | undefined)[] = Array.from({ length: 256 }, (_, type) => FRONTEND_NAMES.get(type));
const BACKEND_NAME_BY_TYPE: readonly (string | undefined)[] = Array.from({ length: 256 }, (_, type) => BACKEND_NAMES.get(type));

/** Messages a server may send during startup, before the first ReadyForQuery. */
const STARTUP_BACKEND: ReadonlySet<number> = new Set([
  Backend.Authentication,
  Backend.ParameterStatus,
  Backend.BackendKeyData,
  Backend.ErrorResponse,
  Backend.NoticeResponse,
  Backend.NegotiateProtocolVersion,
]);

/** A table of 1s by type byte, read per message instead of a set lookup. */
function typeTable(types: readonly number[]): Uint8Array {
  const table = new Uint8Array(256);
  for (const type of types) table[type] = 1;
  return table;
}

/** Client messages that the server answers with exactly one ReadyForQuery. */
const ANSWERED_BY_READY = typeTable([Frontend.Query, Frontend.Sync, Frontend.FunctionCall]);
/** Extended-query messages: until a Sync follows them, the server is inside an exchange the client still owns. */
const EXTENDED = typeTable([Frontend.Parse, Frontend.Bind, Frontend.Describe, Frontend.Execute, Frontend.Close, Frontend.Flush]);

type Phase = 'startup' | 'auth' | 'command' | 'stopped' | 'closed';

export interface PgSessionOptions {
  /** `refuse`: answer SSLRequest/GSSENCRequest with 'N' from the proxy; `passthrough`: forward, and stop counting on 'S'. */
  tls: 'refuse' | 'passthrough';
}

/**
 * The PostgreSQL conversation of one connection: startup (SSL/GSS negotiation, authentication, up to the first
 * ReadyForQuery), then every frontend message counted by type and every Sync/Query/FunctionCall closed by its
 * ReadyForQuery. Extended-query messages pipelined in one write each count.
 */
export class PgSession implements WireSession {
  readonly tally = new ConnectionTally('postgres');
  #serverConnectionId: number | null = null;
  // The session and its tracker keep nothing of a frame past its onFrame (the tracker decodes or copies what it keeps).
  readonly #client = new PgMessageParser('untyped', (type) => this.#checkFrontendType(type), [Frontend.Query, Frontend.Parse], 'reused');
  readonly #statements = new PgStatementTracker(this.tally.statements);
  readonly #server = new PgMessageParser('typed', (type) => this.#checkBackendType(type), undefined, 'reused');
  readonly #refuseTls: boolean;
  #phase: Phase = 'startup';
  #awaitingReady = 0;
  #terminated = false;
  /** An extended-query message went out since the last Sync: the exchange is still open. */
  #extendedOpen = false;
  /** Refuse mode: client bytes held until the startup message arrives, so SSL/GSS requests never reach the server. */
  #hold: Buffer[] | null;
  /** Bytes at the start of `#hold` that were TLS requests answered by the proxy. */
  #dropBytes = 0;
  #forwardNow = false;
  #reply: ((bytes: Buffer) => void) | null = null;

  readonly #onClientFrame = (frame: PgFrame): void => this.#clientFrame(frame);
  readonly #onServerFrame = (frame: PgFrame): void => this.#serverFrame(frame);

  constructor(options: PgSessionOptions) {
    this.#refuseTls = options.tls === 'refuse';
    this.#hold = this.#refuseTls ? [] : null;
  }

  get serverConnectionId(): number | null {
    return this.#serverConnectionId;
  }

  unanswered(): number {
    return this.#awaitingReady;
  }

  fromClient(chunk: Buffer, reply: (bytes: Buffer) => void): Buffer | null {
    this.tally.receivedFromClient(chunk.length);
    if (this.#phase === 'stopped' || this.#phase === 'closed') return this.#release(chunk);
    this.#reply = reply;
    try {
      this.#client.parse(chunk, this.#onClientFrame);
    } catch (error) {
      this.#stop(error);
    }
    this.#reply = null;
    return this.#release(chunk);
  }

  /** Forwards `chunk`, or holds it while a refused TLS request may still be in it. */
  #release(chunk: Buffer): Buffer | null {
    const hold = this.#hold;
    if (!hold) return chunk;
    hold.push(chunk);
    if (!this.#forwardNow && this.#phase === 'startup') return null;
    this.#hold = null;
    const all = hold.length === 1 ? chunk : BufferClass.concat(hold);
    const out = all.subarray(this.#dropBytes);
    return out.length > 0 ? out : null;
  }

  fromServer(chunk: Buffer): Buffer | null {
    this.tally.receivedFromServer(chunk.length);
    if (this.#phase === 'stopped' || this.#phase === 'closed') return chunk;
    try {
      this.#server.parse(chunk, this.#onServerFrame);
    } catch (error) {
      this.#stop(error);
    }
    return chunk;
  }

  clientMidMessage(): boolean {
    return this.#phase !== 'stopped' && this.#phase !== 'closed' && this.#client.midFrame;
  }

  end(detail: string): void {
    if (this.#phase === 'stopped') return;
    if (this.#client.midFrame) this.tally.fail(`${detail} in the middle of a client message`);
    if (this.#server.midFrame) this.tally.fail(`${detail} in the middle of a server message`);
    if (this.#awaitingReady > 0) this.tally.fail(`${detail} with ${this.#awaitingReady} request(s) unanswered`);
    this.#phase = 'closed';
  }

  #stop(error: unknown): void {
    const reason = error instanceof WireParseError ? error.message : `internal counter error: ${String(error)}`;
    this.tally.fail(`parse stopped: ${reason}`);
    this.#phase = 'stopped';
    this.#forwardNow = true;
  }

  #checkFrontendType(type: number): void {
    const known = FRONTEND_NAME_BY_TYPE[type] !== undefined || (type === Frontend.Password && this.#phase === 'auth');
    if (!known) throw new WireParseError(`unknown frontend message type ${describeType(type)} during ${this.#phase}`);
  }

  #checkBackendType(type: number): void {
    const known = this.#phase === 'auth' ? STARTUP_BACKEND.has(type) || type === Backend.ReadyForQuery : BACKEND_NAME_BY_TYPE[type] !== undefined;
    if (!known) throw new WireParseError(`unknown backend message type ${describeType(type)} during ${this.#phase}`);
  }

  #clientFrame(frame: PgFrame): void {
    if (this.#phase === 'startup') return this.#startupRequest(frame);
    if (this.#phase === 'auth' && frame.type === Frontend.Password) {
      this.tally.setupFromClient(frame.wireBytes);
      return;
    }
    this.#frontendMessage(frame);
  }

  #startupRequest(frame: PgFrame): void {
    if (frame.head.length < 4) throw new WireParseError('startup message too short');
    const code = frame.head.readInt32BE(0);
    this.tally.setupFromClient(frame.wireBytes);
    if (code === SSL_REQUEST_CODE || code === GSSENC_REQUEST_CODE) return this.#encryptionRequest(frame);
    if (code === CANCEL_REQUEST_CODE) {
      // A cancel connection carries one request and no session; the server closes it without an answer.
      this.tally.command('CancelRequest', frame.chunk);
      this.#forwardNow = true;
      this.#phase = 'closed';
      return;
    }
    if (code >>> 16 !== PROTOCOL_MAJOR_3) throw new WireParseError(`unknown startup request code ${code}`);
    this.#client.next = 'typed';
    this.#forwardNow = true;
    this.#phase = 'auth';
  }

  #encryptionRequest(frame: PgFrame): void {
    if (this.#refuseTls) {
      // Answer 'N' for the server: the client falls back to plain text (unless it requires encryption, and then it hangs up).
      this.#dropBytes += frame.wireBytes;
      this.tally.tlsRefused();
      this.#reply?.(Buffer.from('N'));
      return;
    }
    this.#server.next = 'byte';
  }

  #frontendMessage(frame: PgFrame): void {
    const name = FRONTEND_NAME_BY_TYPE[frame.type];
    if (!name || frame.type === Frontend.Password) {
      throw new WireParseError(`unknown frontend message type ${describeType(frame.type)}`);
    }
    this.tally.command(name, frame.chunk);
    this.#trackFrontend(frame);
    if (ANSWERED_BY_READY[frame.type] === 1) this.#awaitingReady += 1;
    if (frame.type === Frontend.Terminate) this.#terminated = true;
    this.#extendedOpen = EXTENDED[frame.type] === 1 ? true : frame.type === Frontend.Sync ? false : this.#extendedOpen;
  }

  /** Which statement each request runs, for the statement-by-statement counts. */
  #trackFrontend(frame: PgFrame): void {
    const statements = this.#statements;
    switch (frame.type) {
      case Frontend.Query:
        return statements.query(frame);
      case Frontend.Parse:
        return statements.parse(frame);
      case Frontend.Bind:
        return statements.bind(frame);
      case Frontend.Execute:
        return statements.execute(frame);
      case Frontend.Close:
        return statements.close(frame);
      case Frontend.Sync:
        return statements.sync();
      case Frontend.FunctionCall:
        return statements.functionCall();
      default:
        return;
    }
  }

  #trackBackend(frame: PgFrame): void {
    const statements = this.#statements;
    switch (frame.type) {
      case Backend.EmptyQueryResponse:
        return statements.emptyQuery();
      case Backend.PortalSuspended:
        return statements.portalSuspended();
      case Backend.ErrorResponse:
        return statements.error();
      case Backend.CopyInResponse:
        return statements.copyIn();
      case Backend.ReadyForQuery:
        return statements.ready();
      default:
        return;
    }
  }

  #serverFrame(frame: PgFrame): void {
    if (frame.length === 0 && frame.wireBytes === 1) return this.#encryptionAnswer(frame);
    if (this.#phase === 'startup') throw new WireParseError(`server sent ${describeType(frame.type)} before the startup message`);
    if (this.#phase === 'auth') return this.#startupReply(frame);
    this.#backendMessage(frame);
  }

  #encryptionAnswer(frame: PgFrame): void {
    this.tally.setupFromServer(1);
    this.#server.next = 'typed';
    if (frame.type === 0x4e /* N */) return;
    if (frame.type === 0x53 /* S */ || frame.type === 0x47 /* G */) {
      this.tally.fail(`the server accepted ${frame.type === 0x53 ? 'TLS' : 'GSS encryption'}: the encrypted session cannot be counted`);
      this.#phase = 'stopped';
      return;
    }
    throw new WireParseError(`unexpected answer ${describeType(frame.type)} to an encryption request`);
  }

  #startupReply(frame: PgFrame): void {
    if (frame.type === Backend.ReadyForQuery) {
      this.tally.setupFromServer(frame.wireBytes);
      this.#phase = 'command';
      return;
    }
    if (!STARTUP_BACKEND.has(frame.type)) {
      throw new WireParseError(`unexpected message ${describeType(frame.type)} during startup`);
    }
    this.tally.setupFromServer(frame.wireBytes);
    if (frame.type === Backend.BackendKeyData && frame.head.length >= 4) {
      this.#serverConnectionId = frame.head.readInt32BE(0);
    }
    if (frame.type === Backend.ErrorResponse) this.#phase = 'closed';
  }

  #backendMessage(frame: PgFrame): void {
    const name = BACKEND_NAME_BY_TYPE[frame.type];
    if (!name) throw new WireParseError(`unknown backend message type ${describeType(frame.type)}`);
    this.tally.serverMessage(name);
    if (frame.type === Backend.CommandComplete) this.tally.rowsAffected(this.#statements.commandComplete(frame));
    else if (frame.type !== Backend.DataRow) this.#trackBackend(frame);
    if (frame.type !== Backend.ReadyForQuery) return;
    if (this.#awaitingReady === 0) throw new WireParseError('ReadyForQuery with no Sync or Query pending');
    this.#awaitingReady -= 1;
    this.tally.roundTrip();
  }

  /** Whether the client said Terminate (a close after it is the normal end). */
  get terminated(): boolean {
    return this.#terminated;
  }

  get closing(): boolean {
    return this.#terminated;
  }

  /**
   * The proxy may send a Query of its own now: in the command phase, no Sync/Query waiting for ReadyForQuery, no
   * extended-query message sent since the last Sync (postgres.js sends Parse/Describe/Flush and waits before it
   * Binds), and neither direction in the middle of a message.
   */
  injectable(): boolean {
    return this.#phase === 'command' && this.#awaitingReady === 0 && !this.#extendedOpen && !this.#client.midFrame && !this.#server.midFrame;
  }

  clientPassesThrough(chunk: Buffer): boolean {
    return this.#phase === 'command' && this.#hold === null && !this.#client.midFrame && !endsWith(chunk, PG_TERMINATE);
  }

  serverPassesThrough(): boolean {
    return true;
  }
}

/** Terminate ('X', length 4): a chunk ending in these bytes may be the goodbye. */
const PG_TERMINATE = Buffer.from([0x58, 0, 0, 0, 4]);
