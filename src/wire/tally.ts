import { SqltallyError } from '../shared/errors';
import type { StatementClass } from '../sql/events';
import type { WireConnection, WireCounts, WireSetup, WireSnapshot, WireStatements } from './types';

export type WireProtocol = WireCounts['protocol'];

/**
 * Thrown by the protocol parsers when the stream cannot be what the protocol says (impossible length, bad sequence
 * id, unknown message type). The session catches it, marks the connection `incomplete` and stops parsing: the bytes
 * keep flowing, but nothing after the fault is counted as a command.
 */
export class WireParseError extends Error {
  override readonly name = 'WireParseError';
}

/**
 * One protocol conversation on one proxied connection. The proxy hands it every chunk before forwarding it and
 * forwards what it returns; the session never does I/O itself.
 */
export interface WireSession {
  readonly tally: ConnectionTally;
  /** MySQL connection id or PostgreSQL backend pid, once the handshake showed it. */
  readonly serverConnectionId: number | null;
  /**
   * Parses bytes the client sent and returns the bytes to forward to the server now: normally `chunk` itself; null
   * while a TLS request is being held back to be refused. `reply` sends bytes straight back to the client.
   */
  fromClient(chunk: Buffer, reply: (bytes: Buffer) => void): Buffer | null;
  /** Parses bytes the server sent and returns the bytes to forward to the client now (null while held). */
  fromServer(chunk: Buffer): Buffer | null;
  /** Requests sent and not yet answered. */
  unanswered(): number;
  /** The client has sent the start of a message and not yet its end. */
  clientMidMessage(): boolean;
  /** The connection is over: a frame cut in half or a request never answered makes the counts incomplete. */
  end(detail: string): void;
  /** The client said goodbye (COM_QUIT, Terminate): what it sends next closes the session. */
  readonly closing: boolean;
  /**
   * Whether the proxy may send a request of its own now and read its answer back without the client noticing: the
   * session is between requests in both directions (see each protocol's rules).
   */
  injectable(): boolean;
  /**
   * Whether the proxy may forward this client chunk before parsing it: the session would forward it unchanged, it
   * starts at a message boundary, and it cannot end in a goodbye (which the closing hook must see before the server).
   */
  clientPassesThrough(chunk: Buffer): boolean;
  /** Whether the proxy may forward any server chunk before parsing it: nothing held back or rewritten (the greeting). */
  serverPassesThrough(): boolean;
}

/** Whether `chunk` ends with the bytes of `tail`. */
export function endsWith(chunk: Buffer, tail: Buffer): boolean {
  const at = chunk.length - tail.length;
  if (at < 0) return false;
  for (let k = 0; k < tail.length; k += 1) if (chunk[at + k] !== tail[k]) return false;
  return true;
}

/**
 * Counts by name in first-counted order (as `toCounts` lists them). Once per frame, and a connection uses a handful of
 * names, passed as the same literals: a short `===` scan (a pointer compare for those) is cheaper than a Map lookup.
 */
class NameCounts {
  readonly #names: string[] = [];
  readonly #counts: number[] = [];
  #last = -1;

  add(name: string): void {
    const names = this.#names;
    let i = this.#last;
    if (i < 0 || names[i] !== name) {
      i = 0;
      while (i < names.length && names[i] !== name) i++;
      if (i === names.length) {
        names.push(name);
        this.#counts.push(0);
      }
      this.#last = i;
    }
    this.#counts[i]! += 1;
  }

  toRecord(): Record<string, number> {
    const out: Record<string, number> = {};
    for (let i = 0; i < this.#names.length; i++) out[this.#names[i]!] = this.#counts[i]!;
    return out;
  }
}

/** Connect-time statement texts kept per connection, each cut to this many characters. */
const CONNECT_TEXTS_KEPT = 8;
const CONNECT_TEXT_CHARS = 80;
const LAST_TEXT_CHARS = 120;

/** `SET autocommit = <value>` (MySQL's transaction switch); the value is the capture. */
const AUTOCOMMIT = /^\s*set\s+(?:@@(?:session\.)?|session\s+)?autocommit\s*=\s*(\w+)\s*;?\s*$/i;
const OFF = /^(?:0|off|false)$/i;
const SESSION_SETUP = 1;
const AUTOCOMMIT_ON = 2;
const AUTOCOMMIT_OFF = 4;

/** Whether a statement is session set-up a client runs when it connects: SET, SHOW, a SELECT of no table (`SELECT VERSION()`). */
function isSessionSetup(statementClass: StatementClass, text: string | null): boolean {
  if (statementClass === 'set' || statementClass === 'show') return true;
  return statementClass === 'select' && text !== null && !/\bfrom\b/i.test(text);
}

function bump(record: Record<string, number>, key: string, n = 1): void {
  record[key] = (record[key] ?? 0) + n;
}

/** The statement-by-statement part of a connection's counts (see `WireStatements`). */
export class StatementTally {
  readonly #s: WireStatements = emptyStatements();
  /** Until the connection's first statement that is not session set-up, its statements are connect-time ones. */
  #connecting = true;
  /** Whether a connect-time statement turned autocommit back on: turning it off again opens a transaction. */
  #autocommitOn = false;
  /** The text of the last statement the client sent, for naming a request still in flight. */
  lastSent: string | null = null;

  /** A statement the server finished; `text` is its text when the wire carried it whole. */
  completed(statementClass: StatementClass, text: string | null): void {
    const s = this.#s;
    s.completed += 1;
    bump(s.completedByClass, statementClass);
    if (!this.#connecting) return;
    const facts = this.#connectFacts(statementClass, text);
    if (facts & AUTOCOMMIT_OFF && this.#autocommitOn) this.#connecting = false;
    else if (facts & SESSION_SETUP) {
      if (facts & (AUTOCOMMIT_ON | AUTOCOMMIT_OFF)) this.#autocommitOn = (facts & AUTOCOMMIT_ON) !== 0;
      s.connectStatements += 1;
      if (s.connectTexts.length < CONNECT_TEXTS_KEPT) s.connectTexts.push((text ?? '').replace(/\s+/g, ' ').trim().slice(0, CONNECT_TEXT_CHARS));
    } else this.#connecting = false;
  }

  #factsClass: StatementClass | null = null;
  #factsText: string | null = null;
  #facts = 0;

  /**
   * What a connect-time statement says (`SESSION_SETUP`, `AUTOCOMMIT_*` bits), a function of class and text alone:
   * the last answer is kept, since a client that has sent no table query yet repeats one text (`SELECT 1` in a loop).
   */
  #connectFacts(statementClass: StatementClass, text: string | null): number {
    if (statementClass === this.#factsClass && text === this.#factsText) return this.#facts;
    const autocommit = text === null ? null : AUTOCOMMIT.exec(text);
    const facts = (autocommit ? (OFF.test(autocommit[1]!) ? AUTOCOMMIT_OFF : AUTOCOMMIT_ON) : 0) | (isSessionSetup(statementClass, text) ? SESSION_SETUP : 0);
    this.#factsClass = statementClass;
    this.#factsText = text;
    this.#facts = facts;
    return facts;
  }

  failed(statementClass: StatementClass): void {
    this.#s.failed += 1;
    bump(this.#s.failedByClass, statementClass);
    this.#connecting = false;
  }

  namedRepeat(statementClass: StatementClass): void {
    this.#s.namedRepeats += 1;
    bump(this.#s.namedRepeatsByClass, statementClass);
  }

  textUnread(): void {
    this.#s.textsUnread += 1;
  }

  suspended(): void {
    this.#s.suspended += 1;
  }

  rows(kind: 'inserted' | 'updated' | 'deleted' | 'unsplit', n: number): void {
    if (kind === 'inserted') this.#s.rowsInserted += n;
    else if (kind === 'updated') this.#s.rowsUpdated += n;
    else if (kind === 'deleted') this.#s.rowsDeleted += n;
    else this.#s.rowsUnsplit += 1;
  }

  toRecord(): WireStatements {
    const s = this.#s;
    return {
      ...s,
      completedByClass: { ...s.completedByClass },
      failedByClass: { ...s.failedByClass },
      namedRepeatsByClass: { ...s.namedRepeatsByClass },
      connectTexts: [...s.connectTexts],
    };
  }
}

export function emptyStatements(): WireStatements {
  return {
    completed: 0,
    completedByClass: {},
    failed: 0,
    failedByClass: {},
    namedRepeats: 0,
    namedRepeatsByClass: {},
    textsUnread: 0,
    suspended: 0,
    rowsInserted: 0,
    rowsUpdated: 0,
    rowsDeleted: 0,
    rowsUnsplit: 0,
    connectStatements: 0,
    connectTexts: [],
  };
}

const STATEMENT_NUMBERS = [
  'completed',
  'failed',
  'namedRepeats',
  'textsUnread',
  'suspended',
  'rowsInserted',
  'rowsUpdated',
  'rowsDeleted',
  'rowsUnsplit',
  'connectStatements',
] as const;
const STATEMENT_RECORDS = ['completedByClass', 'failedByClass', 'namedRepeatsByClass'] as const;

/** `into += after - before`; connect texts of `after` beyond those of `before`, each marked with `label`. */
function addStatements(into: WireStatements, after: WireStatements, before: WireStatements | undefined, label: string): void {
  for (const k of STATEMENT_NUMBERS) into[k] += after[k] - (before?.[k] ?? 0);
  for (const k of STATEMENT_RECORDS) addRecord(into[k], after[k], before?.[k]);
  const fresh = after.connectTexts.slice(before?.connectTexts.length ?? 0);
  into.connectTexts.push(...fresh.map((t) => (label ? `${label} ${t}` : t)));
}

/**
 * Mutable per-connection counters a session writes into. Bytes are counted on receipt; a handshake frame's bytes
 * move to the setup bucket when the frame completes, so the command bytes are `total - setup`.
 */
export class ConnectionTally {
  readonly protocol: WireProtocol;
  readonly #commands = new NameCounts();
  readonly #serverMessages = new NameCounts();
  #commandsTotal = 0;
  #roundTrips = 0;
  #clientWrites = 0;
  #lastWriteChunk = -1;
  #rowsAffected = 0;
  #rowsAffectedKnown = true;
  #bytesFromClient = 0;
  #bytesFromServer = 0;
  readonly #setup: Omit<WireSetup, 'connectionsOpened'> = {
    bytesClientToServer: 0,
    bytesServerToClient: 0,
    clientMessages: 0,
    serverMessages: 0,
    tlsRefused: 0,
  };
  readonly #incompleteReasons: string[] = [];
  readonly statements = new StatementTally();

  constructor(protocol: WireProtocol) {
    this.protocol = protocol;
  }

  get incomplete(): boolean {
    return this.#incompleteReasons.length > 0;
  }

  receivedFromClient(bytes: number): void {
    this.#bytesFromClient += bytes;
  }

  receivedFromServer(bytes: number): void {
    this.#bytesFromServer += bytes;
  }

  /**
   * A client command/message after the handshake. `chunk` is the parser's number for the socket read the command
   * started in: the first command of each read counts one client write.
   */
  command(name: string, chunk: number): void {
    this.#commands.add(name);
    this.#commandsTotal += 1;
    if (chunk !== this.#lastWriteChunk) {
      this.#lastWriteChunk = chunk;
      this.#clientWrites += 1;
    }
  }

  serverMessage(name: string): void {
    this.#serverMessages.add(name);
  }

  roundTrip(): void {
    this.#roundTrips += 1;
  }

  rowsAffected(rows: number): void {
    this.#rowsAffected += rows;
  }

  /** Some answer carried its row counts where this counter does not read them: `rowsAffected` is left out from now on. */
  rowsAffectedUnknown(): void {
    this.#rowsAffectedKnown = false;
  }

  setupFromClient(wireBytes: number): void {
    this.#setup.clientMessages += 1;
    this.#setup.bytesClientToServer += wireBytes;
  }

  setupFromServer(wireBytes: number): void {
    this.#setup.serverMessages += 1;
    this.#setup.bytesServerToClient += wireBytes;
  }

  tlsRefused(): void {
    this.#setup.tlsRefused += 1;
  }

  /** Marks the connection incomplete; the same reason is kept once. */
  fail(reason: string): void {
    if (!this.#incompleteReasons.includes(reason)) this.#incompleteReasons.push(reason);
  }

  toCounts(unanswered: number): WireCounts {
    return {
      protocol: this.protocol,
      commands: this.#commands.toRecord(),
      commandsTotal: this.#commandsTotal,
      roundTrips: this.#roundTrips,
      bytesClientToServer: this.#bytesFromClient - this.#setup.bytesClientToServer,
      bytesServerToClient: this.#bytesFromServer - this.#setup.bytesServerToClient,
      clientWrites: this.#clientWrites,
      connections: 1,
      incomplete: this.incomplete,
      incompleteReasons: [...this.#incompleteReasons],
      serverMessages: this.#serverMessages.toRecord(),
      ...(this.#rowsAffectedKnown ? { rowsAffected: this.#rowsAffected } : {}),
      unansweredRequests: unanswered,
      ...(this.statements.lastSent !== null
        ? {
            lastRequestText: this.statements.lastSent
              .slice(0, LAST_TEXT_CHARS * 4)
              .replace(/\s+/g, ' ')
              .trim()
              .slice(0, LAST_TEXT_CHARS),
          }
        : {}),
      setup: { connectionsOpened: 1, ...this.#setup },
      statements: this.statements.toRecord(),
    };
  }
}

/** Counts with nothing in them, for a window that saw no connection. */
export function emptyWireCounts(protocol: WireProtocol): WireCounts {
  return {
    protocol,
    commands: {},
    commandsTotal: 0,
    roundTrips: 0,
    bytesClientToServer: 0,
    bytesServerToClient: 0,
    clientWrites: 0,
    connections: 0,
    incomplete: false,
    incompleteReasons: [],
    serverMessages: {},
    rowsAffected: 0,
    unansweredRequests: 0,
    setup: emptySetup(),
    statements: emptyStatements(),
  };
}

function emptySetup(): WireSetup {
  return {
    connectionsOpened: 0,
    bytesClientToServer: 0,
    bytesServerToClient: 0,
    clientMessages: 0,
    serverMessages: 0,
    tlsRefused: 0,
  };
}

function addRecord(into: Record<string, number>, after: Record<string, number>, before: Record<string, number> = {}): void {
  for (const [name, value] of Object.entries(after)) {
    const delta = value - (before[name] ?? 0);
    if (delta !== 0) into[name] = (into[name] ?? 0) + delta;
  }
}

/**
 * The traffic of a window: `after - before`, summed over connections; `connections` counts those that carried
 * traffic in the window (or were opened in it), not idle ones that merely stayed open. A connection
 * opened inside the window brings its handshake in `setup`, never in the command counts. The result is incomplete
 * when a connection that carried traffic in the window could not be parsed, or when a request was in flight at
 * either edge (its answer or its command would fall on the wrong side).
 */
export function diffWireSnapshots(before: WireSnapshot, after: WireSnapshot): WireCounts {
  if (before.proxyId !== after.proxyId) {
    throw new SqltallyError(`wire snapshots come from two proxies (${before.proxyId} and ${after.proxyId})`, {
      phase: 'wire',
      hint: 'diff snapshots taken from the same WireProxy',
    });
  }
  if (before.takenAtNs > after.takenAtNs) {
    throw new SqltallyError('wire snapshot "before" was taken after "after"', { phase: 'wire', hint: 'swap the arguments' });
  }
  const out = emptyWireCounts(after.protocol);
  const setup = emptySetup();
  const serverMessages: Record<string, number> = {};
  const previous = new Map(before.connections.map((c) => [c.id, c] as const));
  const statements = emptyStatements();
  let statementsKnown = true;
  let rowsKnown = true;
  for (const connection of after.connections) {
    const prev = previous.get(connection.id);
    if (prev && prev.closedAtNs !== null) continue;
    const a = connection.counts;
    const b = prev?.counts;
    addRecord(out.commands, a.commands, b?.commands);
    addRecord(serverMessages, a.serverMessages ?? {}, b?.serverMessages);
    out.commandsTotal += a.commandsTotal - (b?.commandsTotal ?? 0);
    out.roundTrips += a.roundTrips - (b?.roundTrips ?? 0);
    const bytesUp = a.bytesClientToServer - (b?.bytesClientToServer ?? 0);
    const bytesDown = a.bytesServerToClient - (b?.bytesServerToClient ?? 0);
    out.bytesClientToServer += bytesUp;
    out.bytesServerToClient += bytesDown;
    out.clientWrites += a.clientWrites - (b?.clientWrites ?? 0);
    if (a.rowsAffected === undefined) rowsKnown = false;
    else out.rowsAffected = (out.rowsAffected ?? 0) + a.rowsAffected - (b?.rowsAffected ?? 0);
    if (!a.statements || (b && !b.statements)) statementsKnown = false;
    else addStatements(statements, a.statements, b?.statements, `#${connection.serverConnectionId ?? `proxy ${connection.id}`}`);
    const setupAfter = a.setup ?? emptySetup();
    const setupBefore = b?.setup ?? { ...emptySetup(), connectionsOpened: 0 };
    if (!prev) setup.connectionsOpened += 1;
    setup.bytesClientToServer += setupAfter.bytesClientToServer - setupBefore.bytesClientToServer;
    setup.bytesServerToClient += setupAfter.bytesServerToClient - setupBefore.bytesServerToClient;
    setup.clientMessages += setupAfter.clientMessages - setupBefore.clientMessages;
    setup.serverMessages += setupAfter.serverMessages - setupBefore.serverMessages;
    setup.tlsRefused += setupAfter.tlsRefused - setupBefore.tlsRefused;

    const movedSetup = setupAfter.bytesClientToServer + setupAfter.bytesServerToClient !== setupBefore.bytesClientToServer + setupBefore.bytesServerToClient;
    const carriedTraffic = !prev || bytesUp > 0 || bytesDown > 0 || movedSetup;
    if (carriedTraffic) out.connections += 1;
    const newReasons = a.incompleteReasons.filter((r) => !(b?.incompleteReasons ?? []).includes(r));
    const reasons = carriedTraffic ? a.incompleteReasons : newReasons;
    for (const reason of reasons) out.incompleteReasons.push(`connection ${connection.id}: ${reason}`);
    const inFlightBefore = b?.unansweredRequests ?? 0;
    const inFlightAfter = connection.closedAtNs === null ? (a.unansweredRequests ?? 0) : 0;
    if (inFlightBefore > 0) {
      out.incompleteReasons.push(`connection ${connection.id}: ${inFlightBefore} request(s) in flight when the window opened`);
    }
    if (connection.closedAtNs === null && a.clientMidMessage) {
      out.incompleteReasons.push(
        `connection ${connection.id}: a client message was half received when the window closed (the rest never came, or has not yet)`,
      );
    }
    if (inFlightAfter > 0) {
      out.incompleteReasons.push(`connection ${connection.id}: ${inFlightAfter} request(s) still unanswered when the window closed`);
    }
    out.unansweredRequests = (out.unansweredRequests ?? 0) + inFlightAfter;
  }
  for (const fault of (after.captureFaults ?? []).slice(before.captureFaults?.length ?? 0)) out.incompleteReasons.push(`capture: ${fault}`);
  out.serverMessages = serverMessages;
  out.setup = setup;
  out.incomplete = out.incompleteReasons.length > 0;
  if (!rowsKnown) delete out.rowsAffected;
  if (statementsKnown) out.statements = statements;
  else delete out.statements;
  return out;
}

/** Sums counts of several windows or proxies (same protocol); for a report over connections of one cell. */
export function sumWireCounts(parts: readonly WireCounts[]): WireCounts | null {
  const first = parts[0];
  if (!first) return null;
  const out = emptyWireCounts(first.protocol);
  const setup = emptySetup();
  const serverMessages: Record<string, number> = {};
  const statements = emptyStatements();
  let statementsKnown = true;
  let rowsKnown = true;
  for (const p of parts) {
    if (p.protocol !== first.protocol) {
      throw new SqltallyError(`cannot sum ${p.protocol} and ${first.protocol} wire counts`, { phase: 'wire' });
    }
    addRecord(out.commands, p.commands);
    addRecord(serverMessages, p.serverMessages ?? {});
    out.commandsTotal += p.commandsTotal;
    out.roundTrips += p.roundTrips;
    out.bytesClientToServer += p.bytesClientToServer;
    out.bytesServerToClient += p.bytesServerToClient;
    out.clientWrites += p.clientWrites;
    out.connections += p.connections;
    if (p.rowsAffected === undefined) rowsKnown = false;
    else out.rowsAffected = (out.rowsAffected ?? 0) + p.rowsAffected;
    if (p.statements) addStatements(statements, p.statements, undefined, '');
    else statementsKnown = false;
    out.unansweredRequests = (out.unansweredRequests ?? 0) + (p.unansweredRequests ?? 0);
    out.incompleteReasons.push(...p.incompleteReasons);
    const s = p.setup ?? emptySetup();
    setup.connectionsOpened += s.connectionsOpened;
    setup.bytesClientToServer += s.bytesClientToServer;
    setup.bytesServerToClient += s.bytesServerToClient;
    setup.clientMessages += s.clientMessages;
    setup.serverMessages += s.serverMessages;
    setup.tlsRefused += s.tlsRefused;
  }
  out.serverMessages = serverMessages;
  out.setup = setup;
  out.incomplete = out.incompleteReasons.length > 0;
  if (!rowsKnown) delete out.rowsAffected;
  if (statementsKnown) out.statements = statements;
  else delete out.statements;
  return out;
}

/** Helper for snapshot building: one connection's record. */
export function connectionRecord(id: number, session: WireSession, openedAtNs: number, closedAtNs: number | null): WireConnection {
  return {
    id,
    serverConnectionId: session.serverConnectionId,
    openedAtNs,
    closedAtNs,
    counts: {
      ...session.tally.toCounts(closedAtNs === null ? session.unanswered() : 0),
      ...(closedAtNs === null && session.clientMidMessage() ? { clientMidMessage: true } : {}),
    },
  };
}
