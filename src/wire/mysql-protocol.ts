import { ConnectionTally, WireParseError, endsWith } from './tally';
import type { WireSession } from './tally';
import { BufferClass, mathMin } from '../shared/intrinsics';
import { MysqlStatementTracker, type CommandStatements } from './mysql-statements';

/** A packet payload of exactly this many bytes continues in the next packet (same logical message). */
export const MYSQL_MAX_PACKET_PAYLOAD = 0xffffff;
const HEADER_LENGTH = 4;
/**
 * Bytes of each logical message's payload kept for the counter: enough for a greeting (version string included),
 * a handshake response's capability block, an OK/EOF/prepare-OK packet. Rows are never copied whole.
 */
const HEAD_BYTES = 256;
/** COM_QUERY and COM_STMT_PREPARE payloads are kept whole up to this size, so their statements can be classified. */
export const MYSQL_TEXT_KEPT = 1 << 20;
/** A server greeting is about 100 bytes; refuse mode holds server bytes only while they can still be one. */
const MAX_GREETING_LENGTH = 1024;
const EMPTY = Buffer.alloc(0);

// Capability flags (low 32 bits; MariaDB's extended ones are a separate 32-bit word).
const CLIENT_MYSQL = 0x1; // MariaDB clears it in the greeting to say "extended capabilities follow"
const CLIENT_COMPRESS = 0x20;
const CLIENT_PROTOCOL_41 = 0x200;
const CLIENT_SSL = 0x800;
const CLIENT_DEPRECATE_EOF = 0x1000000;
const CLIENT_OPTIONAL_RESULTSET_METADATA = 0x2000000;
const CLIENT_ZSTD_COMPRESSION = 0x4000000;
const CLIENT_QUERY_ATTRIBUTES = 0x8000000;
const MARIADB_CLIENT_CACHE_METADATA = 0x10; // bit 36 overall = bit 4 of the extended word

const BULK_SEND_UNIT_RESULTS = 64;

// Server status flags carried by OK and EOF packets.
const SERVER_MORE_RESULTS_EXISTS = 0x8;
const SERVER_STATUS_CURSOR_EXISTS = 0x40;

/** One logical MySQL message: one packet, or several when payloads of exactly 0xFFFFFF bytes continue. */
export interface MysqlFrame {
  /** Sequence id of the first packet. */
  seq: number;
  /** Sequence id of the last packet (differs from `seq` when the payload spans continuation packets). */
  lastSeq: number;
  /** Payload bytes over all packets. */
  length: number;
  /** Payload length of the first packet: the EOF/OK-terminator-versus-row test needs it. */
  firstLength: number;
  packets: number;
  /** The first bytes of the payload (at most 256): what the counter reads, without copying a 16 MB row. */
  readonly head: Buffer;
  /** `head[0]`, or -1 for an empty payload: the command or response marker, read without making `head`. */
  readonly firstByte: number;
  /** `head` is `bytes[headStart, headStart + headLength)`: the hot path reads `bytes` directly, never making `head`. */
  readonly bytes: Buffer;
  readonly headStart: number;
  readonly headLength: number;
  /** Header and payload bytes over all packets. */
  wireBytes: number;
  /** Number of the `parse` call the frame's first byte arrived in (client write bursts). */
  chunk: number;
}

/**
 * A frame whose head is a view of the socket chunk it arrived in whenever the head lies whole in one chunk (the
 * usual case): no copy and no Buffer per frame; `head` is made on first use. Chunks are never reused by the
 * socket, so the view stays valid. A head cut across chunks is copied into a buffer of its own, as it arrives.
 */
export class MysqlFrameRecord implements MysqlFrame {
  seq: number;
  lastSeq: number;
  length: number;
  firstLength: number;
  packets = 1;
  wireBytes: number;
  chunk: number;
  firstByte = -1;
  bytes: Buffer;
  headStart: number;
  headLength: number;
  #head: Buffer | null = null;

  constructor(seq: number, length: number, chunk: number, bytes: Buffer, headStart: number, headLength: number) {
    this.seq = seq;
    this.lastSeq = seq;
    this.length = length;
    this.firstLength = length;
    this.wireBytes = HEADER_LENGTH + length;
    this.chunk = chunk;
    this.bytes = bytes;
    this.headStart = headStart;
    this.headLength = headLength;
  }

  /** Makes this record the next frame's, for a parser that hands out one record over and over. */
  reset(seq: number, length: number, chunk: number, bytes: Buffer, headStart: number, headLength: number): this {
    this.seq = seq;
    this.lastSeq = seq;
    this.length = length;
    this.firstLength = length;
    this.packets = 1;
    this.wireBytes = HEADER_LENGTH + length;
    this.chunk = chunk;
    this.firstByte = -1;
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
 * Incremental MySQL packet framing over a byte stream: splits into packets, joins 0xFFFFFF continuations into one
 * logical message, checks continuation sequence ids. Any split of the stream gives the same frames.
 */
export class MysqlPacketParser {
  readonly #checkHeader: ((length: number, seq: number) => void) | undefined;
  readonly #header = Buffer.alloc(HEADER_LENGTH);
  #headerFill = 0;
  /** Payload bytes still to come in the current packet; -1 between packets. */
  #remaining = -1;
  #packetLength = 0;
  #frame: MysqlFrameRecord | null = null;
  /** Head bytes of `#frame` already in place (equal to its `headLength` when the head is a view of a chunk). */
  #headFill = 0;
  #chunks = 0;

  /**
   * `checkHeader` sees the header of each message's first packet before its payload arrives, so garbage that reads
   * as a 16 MB packet is refused at once instead of being waited for.
   */
  readonly #headBytes: ((firstByte: number) => number) | undefined;
  /** The one record handed out again and again (`frames: 'reused'`), else null. */
  readonly #spare: MysqlFrameRecord | null;

  /**
   * `headBytes`, given a message's first payload byte when it arrived with the header, says how many payload bytes
   * to keep as its head (default 256). With `frames: 'reused'` every frame is the same record, valid only during
   * `onFrame`: for a reader that keeps nothing of a frame, it saves an object per packet.
   */
  constructor(checkHeader?: (length: number, seq: number) => void, headBytes?: (firstByte: number) => number, frames: 'fresh' | 'reused' = 'fresh') {
    this.#checkHeader = checkHeader;
    this.#headBytes = headBytes;
    this.#spare = frames === 'reused' ? new MysqlFrameRecord(0, 0, 0, EMPTY, 0, 0) : null;
  }

  /** True when a frame has started and not finished: the stream was cut if it ends here. */
  get midFrame(): boolean {
    return this.#headerFill > 0 || this.#remaining >= 0 || this.#frame !== null;
  }

  parse(chunk: Buffer, onFrame: (frame: MysqlFrameRecord) => void): void {
    const chunkNo = this.#chunks++;
    const end = chunk.length;
    let i = 0;
    while (i < end) {
      if (this.#remaining < 0) {
        let length: number;
        let seq: number;
        if (this.#headerFill === 0 && end - i >= HEADER_LENGTH) {
          length = (chunk[i] as number) | ((chunk[i + 1] as number) << 8) | ((chunk[i + 2] as number) << 16);
          seq = chunk[i + 3] as number;
          i += HEADER_LENGTH;
        } else {
          const take = mathMin(HEADER_LENGTH - this.#headerFill, end - i);
          chunk.copy(this.#header, this.#headerFill, i, i + take);
          this.#headerFill += take;
          i += take;
          if (this.#headerFill < HEADER_LENGTH) break;
          this.#headerFill = 0;
          length = this.#header.readUIntLE(0, 3);
          seq = this.#header[3] as number;
        }
        this.#startPacket(length, seq, chunkNo, chunk, i);
        // The whole payload is here (a zero-length packet ends at its header): the packet ends without another turn.
        if (length <= end - i) {
          i += length;
          this.#endPacket(onFrame);
        }
        continue;
      }
      const take = mathMin(this.#remaining, end - i);
      const frame = this.#frame as MysqlFrameRecord;
      if (this.#headFill < frame.headLength) {
        const copy = mathMin(take, frame.headLength - this.#headFill);
        chunk.copy(frame.bytes, this.#headFill, i, i + copy);
        if (this.#headFill === 0) frame.firstByte = chunk[i] as number;
        this.#headFill += copy;
      }
      this.#remaining -= take;
      i += take;
      if (this.#remaining === 0) this.#endPacket(onFrame);
    }
  }

  /** `at` is where the packet's payload starts in `chunk`. */
  #startPacket(length: number, seq: number, chunkNo: number, chunk: Buffer, at: number): void {
    const open = this.#frame;
    if (open) {
      const expected = (open.lastSeq + 1) & 0xff;
      if (seq !== expected) {
        throw new WireParseError(`bad sequence id ${seq} in a continuation packet (expected ${expected})`);
      }
      open.lastSeq = seq;
      open.length += length;
      open.packets += 1;
      open.wireBytes += HEADER_LENGTH + length;
    } else {
      this.#checkHeader?.(length, seq);
      const limit = this.#headBytes !== undefined && length > 0 && at < chunk.length ? this.#headBytes(chunk[at] as number) : HEAD_BYTES;
      const headLength = length < limit ? length : limit;
      let frame: MysqlFrameRecord;
      const spare = this.#spare;
      if (headLength <= chunk.length - at) {
        frame = spare ? spare.reset(seq, length, chunkNo, chunk, at, headLength) : new MysqlFrameRecord(seq, length, chunkNo, chunk, at, headLength);
        if (length > 0) frame.firstByte = chunk[at] as number;
        this.#headFill = headLength;
      } else {
        const head = BufferClass.allocUnsafe(headLength);
        frame = spare ? spare.reset(seq, length, chunkNo, head, 0, headLength) : new MysqlFrameRecord(seq, length, chunkNo, head, 0, headLength);
        this.#headFill = 0;
      }
      this.#frame = frame;
    }
    this.#packetLength = length;
    this.#remaining = length;
  }

  #endPacket(onFrame: (frame: MysqlFrameRecord) => void): void {
    this.#remaining = -1;
    if (this.#packetLength === MYSQL_MAX_PACKET_PAYLOAD) return;
    const frame = this.#frame as MysqlFrameRecord;
    this.#frame = null;
    onFrame(frame);
  }
}

/** Client command bytes (the first payload byte of a message with sequence id 0). */
const enum Command {
  Sleep = 0x00, // COM_SLEEP
  Quit = 0x01, // COM_QUIT
  InitDb = 0x02, // COM_INIT_DB
  Query = 0x03, // COM_QUERY
  FieldList = 0x04, // COM_FIELD_LIST
  CreateDb = 0x05, // COM_CREATE_DB
  DropDb = 0x06, // COM_DROP_DB
  Refresh = 0x07, // COM_REFRESH
  Shutdown = 0x08, // COM_SHUTDOWN
  Statistics = 0x09, // COM_STATISTICS
  ProcessInfo = 0x0a, // COM_PROCESS_INFO
  Connect = 0x0b, // COM_CONNECT
  ProcessKill = 0x0c, // COM_PROCESS_KILL
  Debug = 0x0d, // COM_DEBUG
  Ping = 0x0e, // COM_PING
  ChangeUser = 0x11, // COM_CHANGE_USER
  BinlogDump = 0x12, // COM_BINLOG_DUMP
  TableDump = 0x13, // COM_TABLE_DUMP
  RegisterSlave = 0x15, // COM_REGISTER_SLAVE
  StmtPrepare = 0x16, // COM_STMT_PREPARE
  StmtExecute = 0x17, // COM_STMT_EXECUTE
  StmtSendLongData = 0x18, // COM_STMT_SEND_LONG_DATA
  StmtClose = 0x19, // COM_STMT_CLOSE
  StmtReset = 0x1a, // COM_STMT_RESET
  SetOption = 0x1b, // COM_SET_OPTION
  StmtFetch = 0x1c, // COM_STMT_FETCH
  Daemon = 0x1d, // COM_DAEMON
  BinlogDumpGtid = 0x1e, // COM_BINLOG_DUMP_GTID
  ResetConnection = 0x1f, // COM_RESET_CONNECTION
  StmtBulkExecute = 0xfa, // COM_STMT_BULK_EXECUTE (MariaDB)
}

/** Server packet first bytes in the command phase. */
const enum Response {
  Ok = 0x00, // OK_Packet
  AuthMoreData = 0x01, // AuthMoreData (handshake only)
  LocalInfile = 0xfb, // LOCAL INFILE request
  Eof = 0xfe, // EOF_Packet, or OK with 0xFE header under DEPRECATE_EOF; AuthSwitchRequest in the handshake
  Err = 0xff, // ERR_Packet
}

/**
 * What a command's answer looks like, from `none` to `rows` (until EOF/OK); `results` continue while
 * SERVER_MORE_RESULTS_EXISTS, and `unparsed` (a stream or re-authentication not followed) makes the connection incomplete.
 */
type ResponseShape = 'none' | 'status' | 'results' | 'prepare' | 'statistics' | 'columns' | 'rows' | 'unparsed';

const COMMANDS: ReadonlyMap<number, { name: string; response: ResponseShape }> = new Map([
  [Command.Sleep, { name: 'COM_SLEEP', response: 'status' }],
  [Command.Quit, { name: 'COM_QUIT', response: 'none' }],
  [Command.InitDb, { name: 'COM_INIT_DB', response: 'status' }],
  [Command.Query, { name: 'COM_QUERY', response: 'results' }],
  [Command.FieldList, { name: 'COM_FIELD_LIST', response: 'columns' }],
  [Command.CreateDb, { name: 'COM_CREATE_DB', response: 'status' }],
  [Command.DropDb, { name: 'COM_DROP_DB', response: 'status' }],
  [Command.Refresh, { name: 'COM_REFRESH', response: 'status' }],
  [Command.Shutdown, { name: 'COM_SHUTDOWN', response: 'status' }],
  [Command.Statistics, { name: 'COM_STATISTICS', response: 'statistics' }],
  [Command.ProcessInfo, { name: 'COM_PROCESS_INFO', response: 'results' }],
  [Command.Connect, { name: 'COM_CONNECT', response: 'status' }],
  [Command.ProcessKill, { name: 'COM_PROCESS_KILL', response: 'status' }],
  [Command.Debug, { name: 'COM_DEBUG', response: 'status' }],
  [Command.Ping, { name: 'COM_PING', response: 'status' }],
  [Command.ChangeUser, { name: 'COM_CHANGE_USER', response: 'unparsed' }],
  [Command.BinlogDump, { name: 'COM_BINLOG_DUMP', response: 'unparsed' }],
  [Command.TableDump, { name: 'COM_TABLE_DUMP', response: 'unparsed' }],
  [Command.RegisterSlave, { name: 'COM_REGISTER_SLAVE', response: 'status' }],
  [Command.StmtPrepare, { name: 'COM_STMT_PREPARE', response: 'prepare' }],
  [Command.StmtExecute, { name: 'COM_STMT_EXECUTE', response: 'results' }],
  [Command.StmtSendLongData, { name: 'COM_STMT_SEND_LONG_DATA', response: 'none' }],
  [Command.StmtClose, { name: 'COM_STMT_CLOSE', response: 'none' }],
  [Command.StmtReset, { name: 'COM_STMT_RESET', response: 'status' }],
  [Command.SetOption, { name: 'COM_SET_OPTION', response: 'status' }],
  [Command.StmtFetch, { name: 'COM_STMT_FETCH', response: 'rows' }],
  [Command.Daemon, { name: 'COM_DAEMON', response: 'status' }],
  [Command.BinlogDumpGtid, { name: 'COM_BINLOG_DUMP_GTID', response: 'unparsed' }],
  [Command.ResetConnection, { name: 'COM_RESET_CONNECTION', response: 'status' }],
  [Command.StmtBulkExecute, { name: 'COM_STMT_BULK_EXECUTE', response: 'results' }],
]);

/** `COMMANDS` by command byte: an array read per command instead of a map lookup. */
const COMMAND_BY_CODE: readonly ({ name: string; response: ResponseShape } | undefined)[] = Array.from({ length: 256 }, (_, code) => COMMANDS.get(code));

/** Name of a command byte; unknown bytes are `COM_0xNN`. */
export function mysqlCommandName(code: number): string {
  return COMMANDS.get(code)?.name ?? `COM_0x${code.toString(16).padStart(2, '0')}`;
}

/** The part of an answer still to come. Steps hold no state (a command's place and count are its own), so commands share them. */
const enum Step {
  First,
  ParameterDefinitions,
  ColumnDefinitions,
  IntermediateEof,
  Rows,
  ColumnsUntilEof,
}

const ANSWER_START: readonly Step[] = [Step.First];
const ROWS_ONLY: readonly Step[] = [Step.Rows];
const COLUMNS_UNTIL_EOF: readonly Step[] = [Step.ColumnsUntilEof];
/** A result set's steps after its column count: `[metadata follows][DEPRECATE_EOF]`. */
const RESULT_SET_STEPS: readonly (readonly (readonly Step[])[])[] = [
  [[Step.IntermediateEof, Step.Rows], [Step.Rows]],
  [
    [Step.ColumnDefinitions, Step.IntermediateEof, Step.Rows],
    [Step.ColumnDefinitions, Step.Rows],
  ],
];

interface PendingCommand {
  name: string;
  code: number;
  response: ResponseShape;
  /** Sequence id the next server packet of this answer must carry. */
  nextSeq: number;
  steps: readonly Step[];
  /** Index of the step being read in `steps`. */
  at: number;
  /** Definitions still to come in the current definitions step. */
  left: number;
  /** Column and parameter definitions announced (column count, PrepareOK). */
  columns: number;
  params: number;
  /** COM_STMT_EXECUTE opened a cursor: rows come with COM_STMT_FETCH. */
  cursor: boolean;
  /** The statements the command runs (COM_QUERY, executes) or prepares, for the statement-by-statement counts. */
  statements: CommandStatements | null;
}

/**
 * Width in bytes of the length-encoded integer at `at` in `buf`, which must end before `end`; -1 when it is cut
 * short or its first byte (0xFB, 0xFF) starts none.
 */
function lenEncWidth(buf: Buffer, at: number, end: number): number {
  if (at >= end) return -1;
  const first = buf[at] as number;
  if (first < 0xfb) return 1;
  const width = first === 0xfc ? 3 : first === 0xfd ? 4 : first === 0xfe ? 9 : -1;
  return width < 0 || at + width > end ? -1 : width;
}

function lenEncValue(buf: Buffer, at: number, width: number): number {
  if (width === 1) return buf[at] as number;
  return width === 9 ? Number(buf.readBigUInt64LE(at + 1)) : buf.readUIntLE(at + 1, width - 1);
}

/** Server greeting (protocol 10): connection id and capabilities. */
function readGreeting(head: Buffer): { connectionId: number; capabilities: number; extended: number } {
  if (head[0] !== 10) throw new WireParseError(`unsupported handshake protocol version ${String(head[0])}`);
  const nul = head.indexOf(0, 1);
  // Version string, then 4 id + 8 scramble + 1 filler + 2 caps + 1 charset + 2 status + 2 caps + 1 len + 6 reserved + 4 MariaDB caps.
  const at = nul + 1;
  if (nul < 0 || at + 31 > head.length) throw new WireParseError('server greeting too short or version string too long');
  const connectionId = head.readUInt32LE(at);
  const low = head.readUInt16LE(at + 13);
  const high = head.readUInt16LE(at + 18);
  const capabilities = (low | (high << 16)) >>> 0;
  const extended = capabilities & CLIENT_MYSQL ? 0 : head.readUInt32LE(at + 27);
  return { connectionId, capabilities, extended };
}

/** HandshakeResponse41 or SSLRequest: capabilities (and MariaDB's extended ones in the filler). */
function readHandshakeResponse(head: Buffer, serverCapabilities: number): { capabilities: number; extended: number } {
  if (head.length < 4) throw new WireParseError('handshake response too short');
  const capabilities = head.readUInt32LE(0);
  if (!(capabilities & CLIENT_PROTOCOL_41)) throw new WireParseError('pre-4.1 client protocol is not parsed');
  const extended = !(serverCapabilities & CLIENT_MYSQL) && head.length >= 32 ? head.readUInt32LE(28) : 0;
  return { capabilities, extended };
}

// The readers below index the frame's bytes within its head (see `MysqlFrame.bytes`), so no head Buffer is made.

/** OK_Packet (0x00, or 0xFE as a DEPRECATE_EOF terminator): affected rows and status flags. */
function readOk(frame: MysqlFrame): { affectedRows: number; status: number } {
  const { bytes, headStart: start } = frame;
  const end = start + frame.headLength;
  const rowsWidth = lenEncWidth(bytes, start + 1, end);
  const idWidth = rowsWidth < 0 ? -1 : lenEncWidth(bytes, start + 1 + rowsWidth, end);
  const at = start + 1 + rowsWidth + idWidth;
  if (rowsWidth < 0 || idWidth < 0 || at + 2 > end) throw new WireParseError('OK packet too short');
  return { affectedRows: lenEncValue(bytes, start + 1, rowsWidth), status: bytes.readUInt16LE(at) };
}

/** EOF_Packet: 0xFE, warnings, status flags. */
function readEof(frame: MysqlFrame): number {
  if (frame.headLength < 5) throw new WireParseError('EOF packet too short');
  return frame.bytes.readUInt16LE(frame.headStart + 3);
}

/** COM_STMT_PREPARE_OK: how many column and parameter definitions follow. */
function readPrepareOk(head: Buffer): { columns: number; params: number; metadataFollows: boolean } {
  if (head.length < 12) throw new WireParseError('prepare OK packet too short');
  return { columns: head.readUInt16LE(5), params: head.readUInt16LE(7), metadataFollows: head.length < 13 || head[12] !== 0 };
}

/** Result-set column count, and whether column definitions follow (optional/cached metadata). */
function readColumnCount(frame: MysqlFrame, flagByte: boolean): { columns: number; metadataFollows: boolean } {
  const { bytes, headStart: start } = frame;
  const end = start + frame.headLength;
  const width = lenEncWidth(bytes, start, end);
  const columns = width < 0 ? 0 : lenEncValue(bytes, start, width);
  if (columns === 0) throw new WireParseError('bad result-set column count');
  const flag = !flagByte ? 1 : start + width < end ? bytes[start + width] : undefined;
  if (flag === undefined) throw new WireParseError('column count packet lacks its metadata flag');
  return { columns, metadataFollows: flag !== 0 };
}

type Phase = 'greeting' | 'handshakeResponse' | 'auth' | 'command' | 'stopped' | 'closed';

export interface MysqlSessionOptions {
  /** `refuse`: clear CLIENT_SSL in the greeting so the client stays in plain text; `passthrough`: let TLS through, uncounted. */
  tls: 'refuse' | 'passthrough';
}

/**
 * The MySQL/MariaDB conversation of one connection: handshake (capabilities decide DEPRECATE_EOF and cached
 * metadata), then each client command and the server packets that answer it, matched in FIFO order so pipelined
 * commands (the MariaDB connector writes N COM_STMT_EXECUTE at once) each close their own round trip.
 */
export class MysqlSession implements WireSession {
  readonly tally = new ConnectionTally('mysql');
  #serverConnectionId: number | null = null;
  readonly #client = new MysqlPacketParser(
    (_length, seq) => this.#checkClientSeq(seq),
    (first) => (this.#phase === 'command' && (first === Command.Query || first === Command.StmtPrepare) ? MYSQL_TEXT_KEPT : HEAD_BYTES),
    'reused',
  );
  readonly #statements = new MysqlStatementTracker(this.tally.statements, (rows) => this.tally.rowsAffected(rows));
  readonly #server = new MysqlPacketParser((_length, seq) => this.#checkServerSeq(seq), undefined, 'reused');
  #phase: Phase = 'greeting';
  /** Last sequence id of the handshake, which counts up across both directions. */
  #handshakeSeq = 0;
  #serverCapabilities = 0;
  #serverExtended = 0;
  #deprecateEof = false;
  #optionalMetadata = false;
  #cacheMetadata = false;
  #compressed = false;
  /** Commands waiting for their answer, oldest first; `#pendingHead` avoids O(n) shifts under deep pipelines. */
  #pending: PendingCommand[] = [];
  #pendingHead = 0;
  /** Server bytes held until the greeting is whole, so CLIENT_SSL can be cleared before the client sees it. */
  #greetingHold: Buffer | null = null;
  #quitSent = false;
  /** A COM_QUERY the server answered with a LOCAL INFILE request: the client's file packets continue its sequence. */
  #infile: PendingCommand | null = null;

  readonly #onClientFrame = (frame: MysqlFrame): void => this.#clientFrame(frame);
  readonly #onServerFrame = (frame: MysqlFrame): void => this.#serverFrame(frame);

  constructor(options: MysqlSessionOptions) {
    if (options.tls === 'refuse') this.#greetingHold = Buffer.alloc(0);
  }

  get serverConnectionId(): number | null {
    return this.#serverConnectionId;
  }

  unanswered(): number {
    return this.#pending.length - this.#pendingHead;
  }

  fromClient(chunk: Buffer, _reply?: (bytes: Buffer) => void): Buffer | null {
    this.tally.receivedFromClient(chunk.length);
    if (this.#phase === 'stopped' || this.#phase === 'closed') return chunk;
    try {
      this.#client.parse(chunk, this.#onClientFrame);
    } catch (error) {
      this.#stop(error);
    }
    return chunk;
  }

  fromServer(chunk: Buffer): Buffer | null {
    this.tally.receivedFromServer(chunk.length);
    let out: Buffer = chunk;
    if (this.#greetingHold) {
      const held = BufferClass.concat([this.#greetingHold, chunk]);
      // Something that cannot be a greeting is not held: it goes through as it is and the parser judges it.
      const plausible = held.length < HEADER_LENGTH || (held[3] === 0 && held.readUIntLE(0, 3) <= MAX_GREETING_LENGTH);
      if (plausible && (held.length < HEADER_LENGTH || held.length < HEADER_LENGTH + held.readUIntLE(0, 3))) {
        this.#greetingHold = held;
        return null;
      }
      this.#greetingHold = null;
      out = clearSslInGreeting(held);
    }
    if (this.#phase === 'stopped' || this.#phase === 'closed') return out;
    try {
      this.#server.parse(out, this.#onServerFrame);
    } catch (error) {
      this.#stop(error);
    }
    return out;
  }

  clientMidMessage(): boolean {
    return this.#phase !== 'stopped' && this.#phase !== 'closed' && this.#client.midFrame;
  }

  end(detail: string): void {
    if (this.#phase === 'stopped') return;
    if (this.#greetingHold && this.#greetingHold.length > 0) this.tally.fail(`${detail} before the greeting was whole`);
    if (this.#client.midFrame) this.tally.fail(`${detail} in the middle of a client packet`);
    if (this.#server.midFrame) this.tally.fail(`${detail} in the middle of a server packet`);
    const open = this.unanswered();
    if (open > 0) this.tally.fail(`${detail} with ${open} command(s) unanswered`);
    this.#phase = 'closed';
  }

  #stop(error: unknown): void {
    const reason = error instanceof WireParseError ? error.message : `internal counter error: ${String(error)}`;
    this.tally.fail(`parse stopped: ${reason}`);
    this.#phase = 'stopped';
  }

  #checkClientSeq(seq: number): void {
    const handshakeNext = (this.#handshakeSeq + 1) & 0xff;
    const ok =
      this.#phase === 'command'
        ? seq === (this.#infile ? this.#infile.nextSeq : 0)
        : this.#phase === 'auth'
          ? seq === 0 || seq === handshakeNext
          : this.#phase === 'handshakeResponse'
            ? seq === handshakeNext
            : true;
    if (!ok) throw new WireParseError(`bad sequence id ${seq} in a client packet during ${this.#phase}`);
  }

  #checkServerSeq(seq: number): void {
    let expected: number | null = null;
    if (this.#phase === 'command') expected = this.#pending[this.#pendingHead]?.nextSeq ?? null;
    else if (this.#phase === 'greeting') expected = 0;
    else if (this.#phase === 'auth') expected = (this.#handshakeSeq + 1) & 0xff;
    if (expected !== null && seq !== expected) {
      throw new WireParseError(`bad sequence id ${seq} in a server packet during ${this.#phase} (expected ${expected})`);
    }
  }

  #checkHandshakeSeq(frame: MysqlFrame): void {
    const expected = (this.#handshakeSeq + 1) & 0xff;
    if (frame.seq !== expected) throw new WireParseError(`bad handshake sequence id ${frame.seq} (expected ${expected})`);
    this.#handshakeSeq = frame.lastSeq;
  }

  #clientFrame(frame: MysqlFrame): void {
    switch (this.#phase) {
      case 'greeting':
        throw new WireParseError('client sent data before the server greeting');
      case 'handshakeResponse':
        this.#checkHandshakeSeq(frame);
        this.#handshakeResponse(frame);
        return;
      case 'auth':
        // Auth data continues the handshake's sequence; a packet with id 0 is a command pipelined behind it.
        if (frame.seq === 0) {
          this.#command(frame);
          return;
        }
        this.#checkHandshakeSeq(frame);
        this.tally.setupFromClient(frame.wireBytes);
        return;
      case 'command':
        if (this.#infile) this.#infileData(this.#infile, frame);
        else this.#command(frame);
        return;
      default:
        return;
    }
  }

  /**
   * A packet of the file the client sends for LOAD DATA LOCAL INFILE: data, or the empty packet that ends the file,
   * after which the server answers the statement (OK or ERR) further in the same sequence.
   */
  #infileData(command: PendingCommand, frame: MysqlFrame): void {
    command.nextSeq = (frame.lastSeq + 1) & 0xff;
    if (frame.length === 0) {
      this.tally.command('LocalInfileEnd', frame.chunk);
      this.#infile = null;
      this.#enter(command, ANSWER_START);
      return;
    }
    this.tally.command('LocalInfileData', frame.chunk);
  }

  #handshakeResponse(frame: MysqlFrame): void {
    this.tally.setupFromClient(frame.wireBytes);
    const { capabilities, extended } = readHandshakeResponse(frame.head, this.#serverCapabilities);
    if (capabilities & CLIENT_SSL) {
      this.tally.fail('the client started TLS: the encrypted session cannot be counted');
      this.#phase = 'stopped';
      return;
    }
    const both = capabilities & this.#serverCapabilities;
    this.#deprecateEof = (both & CLIENT_DEPRECATE_EOF) !== 0;
    this.#optionalMetadata = (both & CLIENT_OPTIONAL_RESULTSET_METADATA) !== 0;
    this.#cacheMetadata = (extended & this.#serverExtended & MARIADB_CLIENT_CACHE_METADATA) !== 0;
    this.#compressed = (both & (CLIENT_COMPRESS | CLIENT_ZSTD_COMPRESSION)) !== 0;
    this.#statements.queryAttributes = (both & CLIENT_QUERY_ATTRIBUTES) !== 0;
    this.#phase = 'auth';
  }

  #command(frame: MysqlFrame): void {
    if (frame.seq !== 0) throw new WireParseError(`bad sequence id ${frame.seq} at the start of a client command`);
    const code = frame.firstByte;
    if (code < 0) throw new WireParseError('empty client command packet');
    const known = COMMAND_BY_CODE[code];
    const name = known?.name ?? mysqlCommandName(code);
    this.tally.command(name, frame.chunk);
    if (code === Command.Quit) this.#quitSent = true;
    // An unknown command gets ERR from a real server; anything else in reply is flagged, never guessed.
    const response = known?.response ?? 'status';
    if (code === Command.StmtClose) this.#statements.close(frame);
    if (response === 'none') return;
    if (response === 'unparsed') throw new WireParseError(`${name} starts an exchange this counter does not follow`);
    // Cursor flags sit right after the statement id.
    const cursor = code === Command.StmtExecute && frame.headLength > 5 && ((frame.bytes[frame.headStart + 5] as number) & 0x07) !== 0;
    // MariaDB 11.5+ bulk with STMT_BULK_FLAG_SEND_UNIT_RESULTS answers with a result set of per-row counts, not an OK.
    const unitResults = code === Command.StmtBulkExecute && frame.head.length >= 7 && (frame.head.readUInt16LE(5) & BULK_SEND_UNIT_RESULTS) !== 0;
    if (unitResults) this.tally.rowsAffectedUnknown();
    const statements =
      code === Command.Query
        ? this.#statements.query(frame)
        : code === Command.StmtPrepare
          ? this.#statements.prepare(frame)
          : code === Command.StmtExecute || code === Command.StmtBulkExecute
            ? this.#statements.execute(frame, unitResults)
            : null;
    if (cursor && this.#deprecateEof) {
      throw new WireParseError('COM_STMT_EXECUTE with a cursor under DEPRECATE_EOF is not parsed');
    }
    this.#pending.push({
      name,
      code,
      response,
      nextSeq: (frame.lastSeq + 1) & 0xff,
      steps: ANSWER_START,
      at: 0,
      left: 0,
      columns: 0,
      params: 0,
      cursor,
      statements,
    });
  }

  #serverFrame(frame: MysqlFrame): void {
    switch (this.#phase) {
      case 'greeting':
        this.#greeting(frame);
        return;
      case 'handshakeResponse':
        throw new WireParseError('server sent a packet before the client answered the greeting');
      case 'auth':
        this.#checkHandshakeSeq(frame);
        this.#authReply(frame);
        return;
      case 'command':
        this.#reply(frame);
        return;
      default:
        return;
    }
  }

  #greeting(frame: MysqlFrame): void {
    if (frame.seq !== 0) throw new WireParseError(`bad sequence id ${frame.seq} in the server greeting`);
    this.tally.setupFromServer(frame.wireBytes);
    this.#handshakeSeq = frame.lastSeq;
    if (frame.firstByte === Response.Err) {
      // Refused before the handshake (too many connections, host blocked): the server closes next.
      this.#phase = 'closed';
      return;
    }
    const greeting = readGreeting(frame.head);
    this.#serverConnectionId = greeting.connectionId;
    this.#serverCapabilities = greeting.capabilities;
    this.#serverExtended = greeting.extended;
    this.#phase = 'handshakeResponse';
  }

  #authReply(frame: MysqlFrame): void {
    this.tally.setupFromServer(frame.wireBytes);
    switch (frame.firstByte) {
      case Response.Ok:
        if (this.#compressed) {
          this.tally.fail('compressed protocol negotiated: packets cannot be counted');
          this.#phase = 'stopped';
          return;
        }
        this.#phase = 'command';
        return;
      case Response.Err:
        this.#phase = 'closed';
        return;
      case Response.Eof: // AuthSwitchRequest
      case Response.AuthMoreData:
        return;
      default:
        throw new WireParseError(`unexpected packet 0x${String(frame.head[0]?.toString(16))} during authentication`);
    }
  }

  #reply(frame: MysqlFrame): void {
    const command = this.#pending[this.#pendingHead];
    if (!command) {
      // A server may send ERR before closing (killed, shutdown, timeout) with nothing asked.
      if (frame.firstByte === Response.Err) {
        this.tally.serverMessage('ERR');
        return;
      }
      throw new WireParseError(`server packet 0x${String(frame.head[0]?.toString(16))} with no command pending`);
    }
    if (frame.seq !== command.nextSeq) {
      throw new WireParseError(`bad sequence id ${frame.seq} answering ${command.name} (expected ${command.nextSeq})`);
    }
    command.nextSeq = (frame.lastSeq + 1) & 0xff;
    const step = command.steps[command.at] as Step;
    switch (step) {
      case Step.First:
        this.#firstPacket(command, frame);
        return;
      case Step.ParameterDefinitions:
      case Step.ColumnDefinitions:
        if (frame.firstByte === Response.Err) return this.#finish(command, 'ERR');
        this.tally.serverMessage(step === Step.ColumnDefinitions ? 'ColumnDefinition' : 'ParameterDefinition');
        command.left -= 1;
        if (command.left === 0) this.#nextStep(command);
        return;
      case Step.IntermediateEof:
        this.#intermediateEof(command, frame);
        return;
      case Step.Rows:
        this.#row(command, frame);
        return;
      case Step.ColumnsUntilEof:
        this.#columnUntilEof(command, frame);
        return;
    }
  }

  /** COM_FIELD_LIST: column definitions until EOF (or an OK-style terminator under DEPRECATE_EOF). */
  #columnUntilEof(command: PendingCommand, frame: MysqlFrame): void {
    if (frame.firstByte === Response.Err) return this.#finish(command, 'ERR');
    if (frame.firstByte === Response.Eof && frame.firstLength < MYSQL_MAX_PACKET_PAYLOAD) return this.#finish(command, 'EOF');
    this.tally.serverMessage('ColumnDefinition');
  }

  #firstPacket(command: PendingCommand, frame: MysqlFrame): void {
    const first = frame.firstByte;
    if (command.response === 'statistics') return this.#finish(command, 'Statistics');
    if (first === Response.Err) return this.#finish(command, 'ERR');
    if (command.response === 'rows') {
      this.#enter(command, ROWS_ONLY);
      return this.#row(command, frame);
    }
    if (command.response === 'columns') {
      this.#enter(command, COLUMNS_UNTIL_EOF);
      return this.#columnUntilEof(command, frame);
    }
    if (first === Response.Ok) {
      if (command.response === 'prepare') return this.#prepareOk(command, frame);
      const ok = readOk(frame);
      this.tally.rowsAffected(ok.affectedRows);
      if (command.statements) command.statements.rows = ok.affectedRows;
      return this.#endOfResult(command, 'OK', ok.status);
    }
    if (first === Response.Eof && frame.firstLength < MYSQL_MAX_PACKET_PAYLOAD) {
      const status = this.#deprecateEof && frame.firstLength >= 7 ? readOk(frame).status : readEof(frame);
      return this.#endOfResult(command, 'EOF', status);
    }
    if (first === Response.LocalInfile && command.code === Command.Query) return this.#localInfileRequest(command, frame);
    if (command.response !== 'results') {
      throw new WireParseError(`unexpected packet 0x${String(frame.head[0]?.toString(16))} answering ${command.name}`);
    }
    const flagByte = this.#optionalMetadata || (this.#cacheMetadata && command.code === Command.StmtExecute);
    const { columns, metadataFollows } = readColumnCount(frame, flagByte);
    this.tally.serverMessage('ResultSet');
    if (command.statements) command.statements.resultSet = true;
    command.columns = columns;
    this.#enter(command, RESULT_SET_STEPS[metadataFollows ? 1 : 0]![this.#deprecateEof ? 1 : 0]!);
  }

  /**
   * The server asks for the file of a LOAD DATA LOCAL INFILE: one round trip ends, and the client's next packets are
   * the file. Nothing else can be on the connection meanwhile: a command pipelined behind it would be read as file data.
   */
  #localInfileRequest(command: PendingCommand, _frame: MysqlFrame): void {
    if (this.unanswered() !== 1) throw new WireParseError('LOCAL INFILE request with other commands pipelined behind its query');
    this.tally.serverMessage('LocalInfileRequest');
    this.tally.roundTrip();
    this.#infile = command;
  }

  #prepareOk(command: PendingCommand, frame: MysqlFrame): void {
    const { columns, params, metadataFollows } = readPrepareOk(frame.head);
    this.tally.serverMessage('PrepareOK');
    if (command.statements) this.#statements.prepared(command.statements, frame.head.readUInt32LE(1));
    const steps: Step[] = [];
    // MySQL's optional metadata may leave out both definition blocks (and their EOFs).
    const definitions = !this.#optionalMetadata || metadataFollows;
    if (params > 0 && definitions) {
      steps.push(Step.ParameterDefinitions);
      if (!this.#deprecateEof) steps.push(Step.IntermediateEof);
    }
    if (columns > 0 && definitions) {
      steps.push(Step.ColumnDefinitions);
      if (!this.#deprecateEof) steps.push(Step.IntermediateEof);
    }
    if (steps.length === 0) return this.#finish(command, null);
    command.columns = columns;
    command.params = params;
    this.#enter(command, steps);
  }

  #intermediateEof(command: PendingCommand, frame: MysqlFrame): void {
    if (frame.firstByte === Response.Err) return this.#finish(command, 'ERR');
    if (frame.firstByte !== Response.Eof || frame.firstLength >= 9) {
      throw new WireParseError(`expected EOF after definitions answering ${command.name}`);
    }
    const status = readEof(frame);
    this.tally.serverMessage('EOF');
    // A cursor was opened: no rows now, they come with COM_STMT_FETCH.
    if (command.cursor && command.steps[command.at + 1] === Step.Rows && status & SERVER_STATUS_CURSOR_EXISTS) {
      return this.#finish(command, null);
    }
    this.#nextStep(command);
  }

  #row(command: PendingCommand, frame: MysqlFrame): void {
    const first = frame.firstByte;
    if (first === Response.Err) return this.#finish(command, 'ERR');
    // A row can start with 0xFE only as an 8-byte length prefix, so its first packet is a full 0xFFFFFF one.
    const terminator = this.#deprecateEof ? frame.firstLength < MYSQL_MAX_PACKET_PAYLOAD : frame.firstLength < 9;
    if (first === Response.Eof && terminator) {
      const status = this.#deprecateEof ? readOk(frame).status : readEof(frame);
      return this.#endOfResult(command, this.#deprecateEof ? 'OK' : 'EOF', status);
    }
    this.tally.serverMessage('Row');
    if (command.statements) command.statements.rows += 1;
  }

  #endOfResult(command: PendingCommand, message: string, status: number): void {
    this.tally.serverMessage(message);
    if (command.statements && command.response === 'results') this.#statements.resultEnded(command.statements);
    if (status & SERVER_MORE_RESULTS_EXISTS && command.response === 'results') {
      this.#enter(command, ANSWER_START);
      return;
    }
    this.#finish(command, null);
  }

  #enter(command: PendingCommand, steps: readonly Step[]): void {
    command.steps = steps;
    command.at = 0;
    this.#stepBegins(command);
  }

  #nextStep(command: PendingCommand): void {
    command.at += 1;
    if (command.at === command.steps.length) this.#finish(command, null);
    else this.#stepBegins(command);
  }

  #stepBegins(command: PendingCommand): void {
    const step = command.steps[command.at] as Step;
    if (step === Step.ColumnDefinitions) command.left = command.columns;
    else if (step === Step.ParameterDefinitions) command.left = command.params;
  }

  #finish(command: PendingCommand, message: string | null): void {
    if (message) this.tally.serverMessage(message);
    if (message === 'ERR' && command.statements && command.response === 'results') this.#statements.failed(command.statements);
    this.tally.roundTrip();
    if (this.#pending[this.#pendingHead] !== command) throw new WireParseError('answer matched to the wrong command');
    this.#pendingHead += 1;
    if (this.#pendingHead === this.#pending.length) {
      // Nearly always the one command: pop keeps the array, where a new one would be garbage per round trip.
      if (this.#pending.length === 1) this.#pending.pop();
      else this.#pending = [];
      this.#pendingHead = 0;
    } else if (this.#pendingHead > 1024) {
      this.#pending = this.#pending.slice(this.#pendingHead);
      this.#pendingHead = 0;
    }
  }

  /** Whether the client said COM_QUIT (a server close after it is the normal end). */
  get quitSent(): boolean {
    return this.#quitSent;
  }

  get closing(): boolean {
    return this.#quitSent;
  }

  /**
   * The proxy may send a command of its own now: the session is in the command phase, uncompressed, nothing is
   * waiting for an answer and neither direction is in the middle of a packet, so the next bytes each way start a
   * packet.
   */
  injectable(): boolean {
    return (
      this.#phase === 'command' &&
      !this.#compressed &&
      this.#greetingHold === null &&
      this.unanswered() === 0 &&
      !this.#client.midFrame &&
      !this.#server.midFrame
    );
  }

  clientPassesThrough(chunk: Buffer): boolean {
    return this.#phase === 'command' && !this.#client.midFrame && !endsWith(chunk, MYSQL_QUIT);
  }

  serverPassesThrough(): boolean {
    return this.#greetingHold === null;
  }
}

/** COM_QUIT as a whole packet (length 1, sequence 0): a chunk ending in these bytes may be the goodbye. */
const MYSQL_QUIT = Buffer.from([1, 0, 0, 0, 0x01]);

/**
 * Clears CLIENT_SSL in a held server greeting (the first packet of `bytes`) so the client does not start TLS and
 * the session stays countable. Anything that is not a protocol-10 greeting is returned unchanged for the parser to
 * judge.
 */
export function clearSslInGreeting(bytes: Buffer): Buffer {
  if (bytes.length < HEADER_LENGTH + 1 || bytes[HEADER_LENGTH] !== 10) return bytes;
  const nul = bytes.indexOf(0, HEADER_LENGTH + 1);
  const capsLow = nul + 1 + 4 + 8 + 1;
  const end = HEADER_LENGTH + bytes.readUIntLE(0, 3);
  if (nul < 0 || capsLow + 2 > end) return bytes;
  const patched = Buffer.from(bytes);
  patched.writeUInt16LE(patched.readUInt16LE(capsLow) & ~CLIENT_SSL, capsLow);
  return patched;
}
