import { messageOf, SqltallyError, truncateStatement } from '../shared/errors';
import { startBackend } from '../backends/registry';
import type { StartedBackend } from '../backends/types';
import { DriverRecorder, type ShapeFilter } from '../driver/driver-layer';
import { isFingerprintId } from '../sql/fingerprint';
import { departedBefore } from '../shared/departures';
import type { DriverLayer } from '../sql/events';
import { openRawConnection, runSql, wrapConnection, type DriverHandle, type OpenedConnection } from '../driver/open';
import type { DriverName } from '../shared/driver-names';
import { driverModule, driverOf, driversFor, DRIVERS } from '../driver/registry';
import type { SomeDriverModule } from '../driver/module';
import { markOf } from '../driver/counted';
import { createProbe, type OpenWindow, type ServerLayer, type ServerProbe, type WindowContext } from '../server';
import { startPassiveCapture } from '../wire/passive';
import { startWireProxy, type WireCounter } from '../wire/proxy';
import type { WireCounts, WireSnapshot } from '../wire/types';
import { ignoredShare } from '../verdict/reconcile';
import { beyondWindow, judgeWindow, type OtherConnections, type WireOwners } from '../verdict/verdict';
import { connectionUrl, protocolOf } from '../backends/protocols';
import type { ClientOptions, SessionConnection } from './connection';
import { driverVersionOf } from './driver-version';
import { cancelRunning, countRows, type LateCommits } from './late-commits';
import { ownConnectionSettle } from './own-settle';
import { DEFAULT_DEFERRED_WAIT_MS, DeferredWorkTracker, MAX_DEFERRED_WAIT_MS, type DeferredWork } from './deferred-work';
import type { CountedDriver, IgnoredShare, Tally, WorkloadError } from './tally';
import type { Finding } from '../verdict/types';
import { WIRE_CAPTURES, type WireCapture } from './wire-choice';

export type { ClientOptions, SessionConnection } from './connection';

/** How to capture: which backend, which driver, which layers. */
export interface CaptureOptions<D extends DriverName = DriverName> {
  /** A backend id to start privately for this capture (`postgres`, `mariadb@10.11`), or one already started. */
  backend: string | StartedBackend;
  /**
   * The driver of the connection the session hands to a measured function that takes one (default: the backend's
   * first: mysql2 for MySQL/MariaDB, pg, better-sqlite3). Objects you count with `session.count()` may be of any
   * driver of the backend.
   */
  driver?: D;
  /** Passed to that driver as they are: mariadb `{ bulk: false }`, pg `{ pipeline: true }`. */
  driverOptions?: Record<string, unknown>;
  /** Load this package instead of the driver's own name: another release under an npm alias (`mariadb-3.3`). */
  driverPackage?: string;
  /** Route connections through the counting wire proxy; default true where the backend has a wire protocol. */
  wire?: boolean;
  /**
   * How the wire layer is read: `proxy` (default) relays every connection through sqltally's proxy; `passive` reads
   * a copy of the server's loopback traffic (tcpdump, CAP_NET_RAW) while clients connect to the server itself. Passive
   * counts other processes' connections only, cannot settle or hold a connection, and cannot refuse TLS
   * (docs/exec.md says what each costs in the verdict).
   */
  wireCapture?: WireCapture;
  /** The tcpdump a passive capture runs; default `tcpdump` on PATH. */
  tcpdump?: string;
  /**
   * The session's own connections (a measured function's handle) reach the wire proxy through an in-process stream
   * where the driver can take one (pg, mysql2, mariadb, postgres.js): default true. False: over a loopback socket,
   * as a client in another process would, which adds a hop to every round trip.
   */
  inProcessStream?: boolean;
  /** Read the server's counters around each window; default true. */
  server?: boolean;
  /**
   * A table the workload writes. PostgreSQL counts rows in every user table anyway; this one's own counters are
   * shown too, and after a timeout its rows are counted through a fresh connection (rows committed anyway).
   */
  table?: { schema?: string; name: string };
  /**
   * Who else may use the server. `mine` (the default for a server sqltally started): every other connection is your
   * own code, so server work the window's connections do not account for means code that went around the proxy, and
   * the verdict is not `assert`. `foreign` (the default for an external URL): other connections are somebody else's,
   * so per-connection attribution may still assert for the window's own connections, naming the foreign activity.
   */
  otherConnections?: OtherConnections;
  /**
   * Statements to leave out of every window's counts: RegExps matched against the statement's shape (its fingerprint,
   * e.g. `/^SELECT \?$/` for a pool's keep-alive) or shape ids from `tally.layers.driver.shapes`. The driver layer lists
   * them as ignored shapes; the wire and server layers cannot tell statements apart, so the driver model's share of
   * them is taken out of their counts after the verdict's comparison (`tally.ignored` says how much, and what stayed in).
   */
  ignore?: IgnoreEntry[];
  /**
   * Follow the asynchronous work each measured function starts (promises, timers, ticks, microtasks, connects, in its
   * own async context) and wait for what it left running when it returned; default true. See docs/deferred-work.md.
   */
  deferredWork?: boolean;
  /** How long a window waits for that work after the function returned, at most (default 1500 ms). */
  deferredWaitMs?: number;
}

/**
 * Takes what ignored calls accounted for out of the wire commands and the server summary (the counters a gate reads),
 * where the model's share is exact and the layer has at least that much; says what stayed in.
 */
function takeOutIgnored(
  share: NonNullable<ReturnType<typeof ignoredShare>>,
  wire: WireCounts | null,
  server: ServerLayer | null,
): { wire: WireCounts | null; server: ServerLayer | null; share: IgnoredShare; line: string } {
  const leftIn = [...share.inexact.map((r) => `${r} (the model gives a range, not a count)`)];
  const takenWire: Record<string, number> = {};
  let outWire = wire;
  if (wire) {
    const commands = { ...wire.commands };
    let total = wire.commandsTotal;
    for (const [cmd, n] of Object.entries(share.wire)) {
      const have = commands[cmd] ?? 0;
      if (n === 0) continue;
      if (have < n) {
        leftIn.push(`wire ${cmd}: the model gives the ignored calls ${n}, the wire saw ${have}`);
        continue;
      }
      // A command only ignored calls sent is absent, as it would be had they not run.
      if (have === n) delete commands[cmd];
      else commands[cmd] = have - n;
      total -= n;
      takenWire[cmd] = n;
    }
    outWire = { ...wire, commands, commandsTotal: total };
    leftIn.push('wire round trips, bytes, client writes and rows include the ignored calls');
  }
  const takenServer: Record<string, number> = {};
  let outServer = server;
  if (server) {
    const summary = { ...server.summary };
    for (const [field, n] of Object.entries(share.server) as [keyof typeof summary, number][]) {
      const have = summary[field];
      if (have === null || n === 0) continue;
      if (have < n) {
        leftIn.push(`server ${field}: the model gives the ignored calls ${n}, the server counted ${have}`);
        continue;
      }
      summary[field] = have - n;
      takenServer[field] = n;
    }
    outServer = { ...server, summary };
    leftIn.push("the server's global and per-connection counters include the ignored calls");
  }
  const words = (m: Record<string, number>) =>
    Object.entries(m)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'nothing';
  const line = `ignored: ${share.calls} call(s) left out of every total; taken out of the wire (${words(takenWire)}) and the server summary (${words(takenServer)}) by the driver model, after the layers were compared with them in`;
  return { wire: outWire, server: outServer, share: { calls: share.calls, wire: takenWire, server: takenServer, leftIn }, line };
}

/** A statement to ignore: a RegExp over its fingerprint, or a shape id. */
export type IgnoreEntry = RegExp | string;

/** The window's connections that carried commands, held against those the session's counted calls ran on. */
function wireOwners(before: WireSnapshot, after: WireSnapshot, counted: ReadonlySet<number>): WireOwners {
  const was = new Map(before.connections.map((c) => [c.id, c.counts.commandsTotal]));
  const busy = after.connections.filter((c) => c.counts.commandsTotal > (was.get(c.id) ?? 0));
  return { counted: busy.flatMap((c) => (c.serverConnectionId !== null && counted.has(c.serverConnectionId) ? [c.serverConnectionId] : [])) };
}

/** One predicate over a statement's shape from an ignore list, refusing entries that are neither a RegExp nor an id. */
function ignoreFilter(entries: readonly IgnoreEntry[], backend: string): ShapeFilter | null {
  if (entries.length === 0) return null;
  const patterns: RegExp[] = [];
  const ids = new Set<string>();
  for (const entry of entries) {
    if (entry instanceof RegExp) patterns.push(new RegExp(entry.source, entry.flags.replace('g', '')));
    else if (typeof entry === 'string' && isFingerprintId(entry)) ids.add(entry);
    else {
      throw new SqltallyError(`ignore entry ${JSON.stringify(entry)} is neither a RegExp nor a shape id (12 hex characters)`, {
        backend,
        phase: 'config',
        hint: 'pass RegExps matched against the statement shape (tally.layers.driver.shapes[].fingerprint) or shape ids',
      });
    }
  }
  return (shape) => ids.has(shape.id) || patterns.some((p) => p.test(shape.fingerprint));
}

const OTHER_CONNECTIONS: readonly OtherConnections[] = ['mine', 'foreign'];

export { WIRE_CAPTURES } from './wire-choice';
export type { WireCapture } from './wire-choice';

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'function') return `a function (${(value as { name?: string }).name || 'anonymous'})`;
  if (typeof value === 'object') return `an object (${(readSafely(value, 'constructor') as { name?: string } | undefined)?.name ?? 'no class'})`;
  if (typeof value === 'string') return JSON.stringify(value);
  return `${typeof value} ${String(value)}`;
}

function configError(message: string, hint: string): SqltallyError {
  return new SqltallyError(message, { phase: 'config', hint });
}

/** What `CaptureSession.open` is given, checked before anything starts: a wrong option is named, never a TypeError. */
function checkCaptureOptions(options: unknown): void {
  if (options === null || typeof options !== 'object') {
    throw configError(
      `CaptureSession.open() was given ${describeValue(options)}, not options`,
      "pass { backend: 'postgres' } (a backend id) or { backend: startedBackend }",
    );
  }
  const o = options as Record<string, unknown>;
  const backend = o['backend'];
  const started =
    backend !== null &&
    typeof backend === 'object' &&
    typeof readSafely(backend, 'description') === 'object' &&
    typeof readSafely(backend, 'connection') === 'object' &&
    typeof readSafely(backend, 'stop') === 'function';
  if (!(typeof backend === 'string' && backend.length > 0) && !started) {
    throw configError(
      `CaptureSession.open(): backend is ${backend === undefined ? 'missing' : describeValue(backend)}`,
      "name a backend id ('postgres', 'mariadb@10.11', 'sqlite') or pass a started backend (from startBackend())",
    );
  }
  const other = o['otherConnections'];
  if (other !== undefined && !OTHER_CONNECTIONS.includes(other as OtherConnections)) {
    throw configError(`CaptureSession.open(): otherConnections is ${describeValue(other)}`, `use one of ${OTHER_CONNECTIONS.map((v) => `'${v}'`).join(', ')}`);
  }
  const capture = o['wireCapture'];
  if (capture !== undefined && !WIRE_CAPTURES.includes(capture as WireCapture)) {
    throw configError(`CaptureSession.open(): wireCapture is ${describeValue(capture)}`, `use one of ${WIRE_CAPTURES.map((v) => `'${v}'`).join(', ')}`);
  }
  if (o['tcpdump'] !== undefined && (typeof o['tcpdump'] !== 'string' || o['tcpdump'] === '')) {
    throw configError(
      `CaptureSession.open(): tcpdump is ${describeValue(o['tcpdump'])}`,
      'name the tcpdump binary to run, or leave it out for tcpdump on PATH',
    );
  }
  for (const flag of ['wire', 'server', 'inProcessStream'] as const) {
    if (o[flag] !== undefined && typeof o[flag] !== 'boolean')
      throw configError(`CaptureSession.open(): ${flag} is ${describeValue(o[flag])}`, `${flag}: true or false`);
  }
  if (o['ignore'] !== undefined && !Array.isArray(o['ignore'])) {
    throw configError(`CaptureSession.open(): ignore is ${describeValue(o['ignore'])}`, 'pass an array of RegExps or shape ids');
  }
}

/** Node's timers hold at most this many ms; a longer one fires after 1 ms. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** What `measure()` is given, checked before its window opens. */
function checkMeasure(fn: unknown, opts: unknown, backend: string): void {
  const fail = (message: string, hint: string) => new SqltallyError(message, { backend, phase: 'config', hint });
  if (typeof fn !== 'function')
    throw fail(`measure() was given ${describeValue(fn)}, not a function`, 'pass the code to measure: session.measure(async (db) => { ... })');
  if (opts === null || typeof opts !== 'object') throw fail(`measure() options are ${describeValue(opts)}`, 'pass an options object, or nothing');
  const timeout = (opts as MeasureOptions).timeoutMs;
  if (timeout !== undefined && (typeof timeout !== 'number' || !Number.isFinite(timeout) || timeout <= 0 || timeout > MAX_TIMEOUT_MS)) {
    throw fail(
      `measure(): timeoutMs is ${describeValue(timeout)}`,
      `a number of milliseconds above 0 and at most ${MAX_TIMEOUT_MS} (Node's timers fire at once beyond that)`,
    );
  }
  const connection = (opts as MeasureOptions).connection;
  if (connection !== undefined && !['none', 'fresh', 'hot'].includes(connection)) {
    throw fail(`measure(): connection is ${describeValue(connection)}`, "use 'none', 'fresh' or 'hot'");
  }
  const onTimeout = (opts as MeasureOptions).onTimeout;
  if (onTimeout !== undefined && !['cancel', 'wait'].includes(onTimeout))
    throw fail(`measure(): onTimeout is ${describeValue(onTimeout)}`, "use 'cancel' or 'wait'");
}

/** How one window runs. */
export interface MeasureOptions {
  /**
   * What the measured function is handed. `none`: nothing (your code uses its own clients, connected to
   * `session.connection` or counted with `session.count()`). `fresh`: a new counted connection of the session's
   * driver, opened before the window. `hot`: the session's last connection, warm (prepared statements cached).
   * Default: `none` for a function that declares no parameter, else `fresh` (`hot` with `hot: true`).
   */
  connection?: 'none' | 'fresh' | 'hot';
  /** Shorthand for `connection: 'hot'`. */
  hot?: boolean;
  /**
   * Give up on the function after this long: the window is then `incomplete`, statements still running on the
   * window's connections are cancelled on the server (`KILL QUERY`, `pg_cancel_backend`) or waited for, and the rows
   * that committed anyway are counted through a fresh connection (a client-side timeout does not cancel SQL).
   */
  timeoutMs?: number;
  /** Gives up the same way when aborted. */
  signal?: AbortSignal;
  /** On timeout or abort: cancel the server-side work (default), or wait for it to finish. */
  onTimeout?: 'cancel' | 'wait';
  /** Wraps the user's function alone (an event-loop delay recorder), not the probe's readings. */
  around?: <R>(work: () => Promise<R>) => Promise<R>;
  /** More statements to leave out of this window's counts, beside the session's `ignore` (see CaptureOptions). */
  ignore?: IgnoreEntry[];
  /** This window's wait for work the function left running (default: the session's `deferredWaitMs`). */
  deferredWaitMs?: number;
}

/** How {@link CaptureSession.time} runs `fn` with counting off. */
export interface TimeOptions<D extends DriverName = DriverName> {
  /** Timed runs (default 5). */
  repeats?: number;
  /** Untimed runs before them, each on its own connection, not kept (default 0). */
  warmups?: number;
  /**
   * `fresh` (default): each run on a new direct connection. `hot`: each run on a direct connection that has just run
   * `fn` once untimed, so the driver's and the server's statement caches are warm, as a counted `hot` window's are.
   */
  connection?: 'fresh' | 'hot';
  /** Runs untimed on the run's connection just before `fn` (emptying a table); not counted, not timed. */
  before?: (handle: DriverHandle<D>) => Promise<void>;
  /** Each run's timer stops at this many ms: the run throws a SqltallyError (the SQL it started is left to end). */
  timeoutMs?: number;
}

/** Wall times of `fn` run with counting off: integer ns, raw samples in run order. */
export interface UninstrumentedTimes {
  warmupNs: number[];
  samplesNs: number[];
}

/** A window's result: the tally, and what the user's function returned when it did not throw. */
export type Captured<T> = Tally & { result: T | undefined };

/** A window opened with `session.begin()`; `end()` closes it (once: later calls return the same tally). */
export interface OpenCapture {
  /** Closes the window; pass the error the code under it threw, if any, so the tally shows it. */
  end(error?: unknown): Promise<Tally>;
  /**
   * Closes the window as given up (the code under it was stopped, not finished): statements still running on the
   * window's connections are cancelled (or waited for with `onTimeout: 'wait'`) and, with a table named, the rows that
   * committed anyway are counted, as for a timed-out `measure()`. The verdict is `incomplete`.
   */
  giveUp(why: string, opts?: Pick<MeasureOptions, 'onTimeout'>): Promise<Tally>;
}

/** Marks "the function did not throw" apart from a function that threw `undefined`. */
const NOTHING = Symbol('sqltally.nothingThrown');

/** What a window holds between its opening and its close. */
interface OpenState<D extends DriverName> {
  conn: WorkloadConnection<D> | null;
  window: OpenWindow | null;
  probeError: string | null;
  wireBefore: WireSnapshot | undefined;
  durationNs: number;
  /** Work the function left running when it returned (null: none, or not tracked). */
  deferred: DeferredWork | null;
  /** Counted calls started before the window that were still running when it opened. */
  callsFromBefore: number;
  /** Late work of the previous window, seen as this one opened. */
  late: Finding[];
  /** A begin() window is ended by end(), not by a function's return. */
  endedBy?: 'end';
}

/** The session's own connection: counted handle for the workload, raw handle for sqltally's own SQL. */
interface WorkloadConnection<D extends DriverName> {
  counted: DriverHandle<D>;
  opened: OpenedConnection<D>;
}

const MESSAGE_CHARS = 2000;
/** How much of a long message's end is kept beside its start: where an ORM puts the reason. */
const MESSAGE_TAIL_CHARS = 300;
const CAUSES_SHOWN = 5;
/** How long, after a timeout, running statements get to finish (`wait`) or to notice their cancel. */
const AFTER_TIMEOUT_SETTLE_MS = 30_000;
/**
 * After a give-up, how long each of sqltally's own reads (counting rows, cancelling, the probe's closing reading) may
 * take: the server may be why the function gave up (frozen, overloaded), and the window must still close.
 */
const AFTER_TIMEOUT_READ_MS = 5_000;
/** The probe's closing reading is several statements; after a give-up it gets this long in all. */
const AFTER_TIMEOUT_PROBE_MS = 15_000;
/** How long `close()` waits for each of its own connections' goodbye once the server stopped answering. */
const SILENT_CLOSE_MS = 1_000;
/** How long `close()` waits for the user's own connections to finish closing. */
const CLOSE_GRACE_MS = 2_000;
/** How long a window's edge waits for connections that said goodbye (COM_QUIT, Terminate) to finish closing. */
const GOODBYE_GRACE_MS = 2_000;
/** How long a window waits for the answers to requests whose calls are over (`#settleAnswers`). */
const ANSWER_GRACE_MS = 2_000;

/** A property of a thrown value, or undefined when reading it throws (a getter that throws, a revoked Proxy). */
function readSafely(value: unknown, key: string): unknown {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return undefined;
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/**
 * A long message cut in the middle, not at the end: knex puts the whole statement first and the server's reason
 * last (`insert into ... 60 KB ... - SQLITE_ERROR: too many terms in compound SELECT`).
 */
function truncateMessage(message: string): string {
  if (message.length <= MESSAGE_CHARS) return truncateStatement(message, MESSAGE_CHARS);
  const tail = message.slice(-MESSAGE_TAIL_CHARS).replace(/\s+/g, ' ').trim();
  return `${truncateStatement(message, MESSAGE_CHARS - MESSAGE_TAIL_CHARS)} … ${tail}`;
}

/**
 * The user's error as a tally keeps it: message and statement truncated (a driver may quote a 60 KB INSERT in its
 * message), and the cause chain kept (an ORM wraps the driver's error, which has the real reason).
 */
export function workloadErrorOf(err: unknown): WorkloadError {
  const causes: string[] = [];
  let cause: unknown = readSafely(err, 'cause');
  const seen = new Set<unknown>([err]);
  while (cause !== undefined && cause !== null && !seen.has(cause) && causes.length < CAUSES_SHOWN) {
    seen.add(cause);
    causes.push(truncateMessage(messageOf(cause)));
    cause = readSafely(cause, 'cause');
  }
  if (err instanceof SqltallyError) {
    return { message: truncateMessage(err.message), phase: err.phase, statement: err.statement ? truncateStatement(err.statement) : null, causes };
  }
  const [sqlText, queryText] = [readSafely(err, 'sql'), readSafely(err, 'query')];
  const sql = typeof sqlText === 'string' ? sqlText : typeof queryText === 'string' ? queryText : null;
  return { message: truncateMessage(messageOf(err)), phase: 'workload', statement: sql ? truncateStatement(sql) : null, causes };
}

/** Resolves or rejects with the work; rejects with a marker when the time runs out or the signal aborts. */
const GAVE_UP = Symbol('sqltally.gaveUp');
function raceGivingUp<T>(work: Promise<T>, timeoutMs: number | undefined, signal: AbortSignal | undefined): Promise<T> {
  if (timeoutMs === undefined && !signal) return work;
  // Work given up on goes on without anyone awaiting it; its failure (a connection closed under it) is accounted as
  // late commits, and must not end the process as an unhandled rejection.
  work.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const stop = (why: string) => {
      cleanup();
      reject({ [GAVE_UP]: why });
    };
    const onAbort = () => stop(`aborted${signal?.reason ? ` (${messageOf(signal.reason)})` : ''}`);
    const cleanup = () => {
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    if (timeoutMs !== undefined) timer = setTimeout(() => stop(`timed out after ${timeoutMs} ms`), timeoutMs);
    if (signal) {
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
    }
    work.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (e: unknown) => {
        cleanup();
        reject(e);
      },
    );
  });
}

/** What {@link within} rejects with when the time ran out (as opposed to the work failing). */
class NoAnswer extends Error {}

/** The work's value, or a rejection saying what did not answer within `ms`; the work is left to settle on its own. */
function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new NoAnswer(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Work the code asked Node for itself (a timer, a tick, a microtask): work whether or not the database moved. */
const DIRECT_WORK = new Set(['Timeout', 'Immediate', 'TickObject', 'Microtask']);

/** The counters read at the moment the window's code returned (or asked for the window's end). */
interface AtReturn {
  calls: number;
  wire: number;
  running: boolean;
}

/** A wait in ms as given, or a config error naming the value: a window must neither skip its wait by NaN nor hang. */
function deferredWaitOf(ms: unknown, backend: string): number {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_DEFERRED_WAIT_MS) {
    throw new SqltallyError(`deferredWaitMs ${JSON.stringify(ms)} is not a whole number of ms from 0 to ${MAX_DEFERRED_WAIT_MS}`, {
      backend,
      phase: 'config',
      hint: 'leave it out for the default (1500 ms), or give the longest the work your function starts without awaiting may take',
    });
  }
  return ms;
}

function gaveUp(err: unknown): string | null {
  return err !== null && typeof err === 'object' && GAVE_UP in err ? String((err as Record<symbol, unknown>)[GAVE_UP]) : null;
}

/**
 * A backend, the three counters and the objects being counted, kept open so several windows can run. A window
 * covers whatever ran in it: every driver object counted into the session (`count()`), every connection through the
 * session's wire proxy (`connection`), and what the server did, attributed per connection where it can be.
 * Connection set-up happens before a window or is set apart in it (handshakes in the wire layer's setup bucket).
 */
export class CaptureSession<D extends DriverName = DriverName> implements AsyncDisposable {
  readonly backend: StartedBackend;
  readonly driver: D;
  readonly #ownsBackend: boolean;
  readonly #options: CaptureOptions<D>;
  readonly #recorder = new DriverRecorder();
  /** Driver packages counted into this session (the user's own objects and the session's connections). */
  readonly #counted = new Map<DriverName, CountedDriver>();
  /**
   * Handles of an embedded engine (a driver module with `embedded`) counted into the session, by the session's number
   * for them: each is the server itself, so the probe reads each one.
   */
  readonly #embeddedHandles = new Map<number, { module: SomeDriverModule<DriverName>; handle: object }>();
  #proxy: WireCounter | null = null;
  /** The last number given to a counted embedded handle: never reused, though closed handles are dropped. */
  #embeddedNumbers = 0;
  #probe: ServerProbe | null = null;
  #probeError: string | null = null;
  #last: WorkloadConnection<D> | null = null;
  #window: OpenWindow | null = null;
  /** The window being opened: a connection closing meanwhile is read once it is open (see `#retire`). */
  #opening: Promise<OpenWindow | null> | null = null;
  /** Without a wire proxy, how the probe settles the session's own connection before a reading. */
  #ownSettle: (() => Promise<string[]>) | null = null;
  /** Closing connections being read by the probe (`#retire`), so a window ends only once they are read. */
  readonly #retiring = new Set<Promise<void>>();
  #closed = false;
  /** Set once the server let a reading after a give-up go unanswered: closing then waits for no polite goodbye. */
  #serverSilent = false;
  #measuring = false;
  /** While a measured function runs: closing the session under it would take the server window's end reading away. */
  #running = false;
  /** How the last window ended: what the wire had seen, and whether it left work running (late work may follow). */
  #lastEnd: { number: number; wire: WireSnapshot | undefined; leftWork: boolean } | null = null;
  #windows = 0;
  /** Late work of the session's windows found so far (at each window's opening and at close()). */
  readonly #lateWork: Finding[] = [];
  /** Follows the work a measured function starts; null when the session was told not to (`deferredWork: false`). */
  readonly #deferred: DeferredWorkTracker | null;

  private constructor(backend: StartedBackend, owns: boolean, driver: D, options: CaptureOptions<D>) {
    this.backend = backend;
    this.#ownsBackend = owns;
    this.driver = driver;
    this.#options = options;
    this.#deferred = options.deferredWork === false ? null : new DeferredWorkTracker();
  }

  static async open<D extends DriverName = DriverName>(options: CaptureOptions<D>): Promise<CaptureSession<D>> {
    checkCaptureOptions(options);
    const owns = typeof options.backend === 'string';
    const backend = typeof options.backend === 'string' ? await startBackend(options.backend) : options.backend;
    const allowed: DriverName[] = driversFor(backend.description.name);
    const driver = (options.driver ?? allowed[0]) as D;
    const session = new CaptureSession(backend, owns, driver, options);
    try {
      ignoreFilter(options.ignore ?? [], backend.description.id);
      if (options.deferredWaitMs !== undefined) deferredWaitOf(options.deferredWaitMs, backend.description.id);
      if (!allowed.includes(driver)) {
        throw new SqltallyError(`driver ${driver} does not talk to ${backend.description.name}; use one of ${allowed.join(', ')}`, {
          backend: backend.description.id,
          phase: 'config',
        });
      }
      const protocol = backend.description.capabilities.wireProtocol;
      if (protocol && options.wire !== false && backend.connection.kind === 'network') {
        const target = { host: backend.connection.host, port: backend.connection.port };
        session.#proxy =
          options.wireCapture === 'passive'
            ? await startPassiveCapture({ protocol, target, ...(options.tcpdump ? { tcpdump: options.tcpdump } : {}) })
            : await startWireProxy({ protocol, target });
        session.#proxy.onClosing((connection, settle) => {
          const quit = (connection.counts.commands.COM_QUIT ?? 0) > 0 || (connection.counts.commands.Terminate ?? 0) > 0;
          return session.#trackRetire(session.#retire(connection.serverConnectionId, settle, quit));
        });
      }
      if (!session.#proxy) {
        session.#ownSettle = ownConnectionSettle(protocol, driver, () =>
          session.#last ? { handle: session.#last.opened.handle, connectionId: session.#last.opened.connectionId } : null,
        );
      }
      if (options.server !== false) {
        try {
          session.#probe = await createProbe(backend);
        } catch (err) {
          // A probe that cannot connect leaves the server layer out and says why: the verdict turns it into incomplete.
          session.#probeError = messageOf(err);
        }
      }
      return session;
    } catch (err) {
      await session.close();
      throw err;
    }
  }

  /**
   * Where your own clients connect so that the window sees them: through the counting wire proxy on a network
   * backend (host, port, user, password, database and a URL for pools, ORMs, other drivers, child processes), the
   * database file on SQLite. Never print `url` or `password`: they carry the server's password.
   */
  get connection(): SessionConnection {
    this.#assertOpen('connect');
    const c = this.backend.connection;
    if (c.kind === 'file') return { kind: 'file', filename: c.filename };
    const host = this.#proxy?.host ?? c.host;
    const port = this.#proxy?.port ?? c.port;
    const protocol = protocolOf(this.backend.description).name;
    return { kind: 'network', host, port, user: c.user, password: c.password, database: c.database, url: connectionUrl(protocol, { ...c, host, port }) };
  }

  /**
   * Options for a `driver` client of your own in this process, to spread into its constructor: `connection`'s
   * address and credentials and, with a wire proxy, the driver's option for an in-process stream to it (pg, mysql2
   * and mariadb `stream`, postgres.js `socket`), so each round trip skips the loopback hop to the proxy and is
   * counted the same. `new pg.Pool({ ...session.clientOptions('pg'), max: 4 })`. Never print it: it holds the
   * password. On SQLite there is no network client: open `connection.filename`.
   */
  clientOptions(driver: DriverName): ClientOptions {
    this.#assertOpen('connect');
    const c = this.connection;
    const backend = this.backend.description;
    const module = (DRIVERS as Record<string, SomeDriverModule<DriverName> | undefined>)[driver];
    if (!module || !(module.backends as readonly string[]).includes(backend.name) || c.kind !== 'network') {
      throw new SqltallyError(`session.clientOptions(): ${describeValue(driver)} is not a network driver for ${backend.name}`, {
        backend: backend.id,
        phase: 'config',
        hint:
          c.kind === 'network'
            ? `drivers for ${backend.name}: ${driversFor(backend.name).join(', ')}`
            : 'open the database file at session.connection.filename',
      });
    }
    const openStream = this.#proxy?.openStream?.bind(this.#proxy);
    const stream = openStream && module.streamOptions ? module.streamOptions(() => openStream()) : {};
    return { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database, ...stream };
  }

  /**
   * Counts a driver object you created into this session's driver layer: a pg `Client`/`Pool`, a mysql2 connection
   * or pool (promise or callback), a mariadb connection or pool, a better-sqlite3 `Database`, a postgres.js `sql`.
   * Returns the same type, behaving the same; counting it twice returns the same wrapper. Connect it to
   * `session.connection` so its traffic is seen on the wire and attributed on the server too.
   */
  count<T extends object>(target: T): T {
    this.#assertOpen('wrap');
    const mark = markOf(target);
    if (mark && mark.sink === this.#recorder) return target;
    const module = driverOf(target);
    if (!module) {
      const got = describeValue(target);
      throw new SqltallyError(`session.count() was given ${got}, which is not a driver object sqltally counts`, {
        backend: this.backend.description.id,
        phase: 'wrap',
        hint: `count one of: ${Object.values(DRIVERS)
          .map((d) => d.accepts)
          .join(
            '; ',
          )}. An ORM is counted through the driver object it was built on, or on the wire and server layers alone when connected to session.connection`,
      });
    }
    if (!(module.backends as readonly string[]).includes(this.backend.description.name)) {
      throw new SqltallyError(`a ${module.name} object does not talk to ${this.backend.description.name}`, {
        backend: this.backend.description.id,
        phase: 'wrap',
        hint: `drivers for ${this.backend.description.name}: ${driversFor(this.backend.description.name).join(', ')}`,
      });
    }
    const wrapped = module.wrap(target, this.#recorder);
    this.#noteCounted(module.name);
    // Once per Database: counting it again hands back the same wrapper, since a second number for the same handle
    // would add its total_changes() to every window again.
    if (module.embedded && ![...this.#embeddedHandles.values()].some((e) => e.handle === target)) {
      this.#embeddedHandles.set(++this.#embeddedNumbers, { module, handle: target });
    }
    return wrapped;
  }

  #noteCounted(name: DriverName, pkg?: string): void {
    if (this.#counted.has(name)) return;
    this.#counted.set(name, { name, version: driverVersionOf(pkg ?? DRIVERS[name].packageName) });
  }

  #assertOpen(phase: 'connect' | 'wrap' | 'workload'): void {
    if (this.#closed)
      throw new SqltallyError('this capture session is closed', { backend: this.backend.description.id, phase, hint: 'open a new CaptureSession' });
  }

  /** Opens the session's own connection (through the proxy when on); never counted itself, its calls are. */
  async #connect(): Promise<WorkloadConnection<D>> {
    const proxy = this.#proxy;
    const openStream = proxy?.openStream?.bind(proxy);
    const opened = await openRawConnection(this.driver, this.backend.connection, {
      host: proxy?.host,
      port: proxy?.port,
      ...(openStream && this.#options.inProcessStream !== false ? { stream: () => openStream() } : {}),
      driverOptions: this.#options.driverOptions,
      backend: this.backend.description.id,
      ...(this.#options.driverPackage ? { driverPackage: this.#options.driverPackage } : {}),
    });
    this.#noteCounted(this.driver, this.#options.driverPackage);
    // The session's own embedded handle is number 0 (replaced when the session reconnects); counted ones from 1.
    const module = driverModule(this.driver);
    if (module.embedded) this.#embeddedHandles.set(0, { module, handle: opened.handle });
    return { opened, counted: wrapConnection(this.driver, opened.handle, this.#recorder) };
  }

  /** Runs code on a fresh (or, with `hot`, the previous) session connection before a window: DDL, warm-up. Uncounted. */
  async prepare(fn: (handle: DriverHandle<D>) => Promise<void>, opts: { hot?: boolean } = {}): Promise<void> {
    this.#assertOpen('workload');
    const conn = await this.#connection(opts.hot ?? false);
    await fn(conn.opened.handle);
  }

  async #connection(hot: boolean): Promise<WorkloadConnection<D>> {
    if (hot && this.#last) return this.#last;
    if (this.#last) await this.#last.opened.close();
    this.#last = await this.#connect();
    return this.#last;
  }

  /** Server ids of every connection the window can see: all proxied ones (open, or closed since `since`), the session's. */
  #windowConnectionIds(sinceNs: number): number[] {
    const ids = new Set<number>();
    if (this.#proxy) {
      for (const c of this.#proxy.connections()) {
        if (c.serverConnectionId !== null && (c.closedAtNs === null || c.closedAtNs >= sinceNs)) ids.add(c.serverConnectionId);
      }
    } else if (this.#last?.opened.connectionId !== null && this.#last?.opened.connectionId !== undefined) {
      ids.add(this.#last.opened.connectionId);
    }
    for (const id of this.#embeddedHandles.keys()) ids.add(id);
    return [...ids];
  }

  #trackRetire(run: Promise<void>): Promise<void> {
    this.#retiring.add(run);
    void run.finally(() => this.#retiring.delete(run));
    return run;
  }

  /**
   * Lets closing connections finish, and their reads: a driver's `end()` resolves once its goodbye is written, before
   * the proxy has read it, so it would count in a window it left, or its read's cost stay unsubtracted.
   */
  async #settleGoodbyes(): Promise<void> {
    const proxy = this.#proxy;
    if (!proxy) return;
    // Two check phases have a poll phase between them: by then the proxy has read what clients had written.
    for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
    await proxy.caughtUp();
    // A goodbye said, or a socket a pool destroyed without one: either way the server is about to forget it.
    const closing = () => proxy.closing().length > 0;
    for (let waited = 0; closing() && waited < GOODBYE_GRACE_MS; waited += 5) await Promise.all([new Promise((r) => setTimeout(r, 5)), proxy.caughtUp()]);
    await Promise.allSettled([...this.#retiring]);
  }

  /**
   * Lets answers to finished calls arrive before the last wire reading: drivers settle some calls before the exchange
   * ends (pg on an ErrorResponse), counted as in flight by a race otherwise. With a call still running, only goodbyes.
   */
  async #settleAnswers(driverIdle: boolean): Promise<void> {
    const proxy = this.#proxy;
    if (!proxy) return;
    const waiting = (): boolean => {
      const closing = new Set(proxy.closing());
      if (closing.size === 0 && !driverIdle) return false;
      return proxy.connections().some((c) => c.closedAtNs === null && (c.counts.unansweredRequests ?? 0) > 0 && (driverIdle || closing.has(c.id)));
    };
    // What the clients wrote before the function returned (a goodbye included) is read in the next poll phase.
    for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
    await proxy.caughtUp();
    for (let waited = 0; waiting() && waited < ANSWER_GRACE_MS; waited += 5) await Promise.all([new Promise((r) => setTimeout(r, 5)), proxy.caughtUp()]);
  }

  /**
   * Waits for calls the code let go of and the driver finishes by itself (StatementSink.letGo), so they count in their
   * own window; a call the code could have awaited is not waited for: the window is `incomplete`.
   */
  async #settleLetGo(): Promise<void> {
    const recorder = this.#recorder;
    const onlyLetGo = (): boolean => recorder.callsInFlightInWindow > 0 && recorder.callsInFlightInWindow === recorder.callsLetGoInWindow;
    for (let waited = 0; onlyLetGo() && waited < ANSWER_GRACE_MS; waited += 5) await new Promise((r) => setTimeout(r, 5));
  }

  /** A connection closing inside a window: settle it, then have the probe read its counters while the server has them. */
  async #retire(serverConnectionId: number | null, settle: () => Promise<boolean>, quit: boolean): Promise<void> {
    // A connection closing while the window opens (a pool's idle reaper) was in the start reading: its goodbye is
    // held until the window is open, then it is read like any other closing inside it.
    const window = this.#window ?? (this.#opening ? await this.#opening : null);
    if (!window || serverConnectionId === null) return;
    await settle();
    // A passive capture tells of a close after the server has seen it: nothing of the connection is left to read.
    await window.retire(serverConnectionId, { quit, gone: this.#proxy?.holdsGoodbyes === false });
  }

  #context(sinceNs: number): WindowContext {
    const proxy = this.#proxy;
    const backendId = this.backend.description.id;
    const backendConnection = this.backend.connection;
    return {
      workloadConnectionIds: () => this.#windowConnectionIds(sinceNs),
      // Whatever sqltally closed on this server shortly before: this session's proxied connections, another
      // session's, a probe's, the main job's row checks.
      ...(backendConnection.kind === 'network' ? { departedConnectionIds: () => departedBefore(backendConnection, sinceNs) } : {}),
      ...(this.#options.table ? { table: this.#options.table } : {}),
      ...(proxy && !proxy.holdsGoodbyes ? { closingUnread: true } : {}),
      onWorkloadConnection: async (sql, connectionId) => {
        const embedded = connectionId !== undefined ? this.#embeddedHandles.get(connectionId) : undefined;
        if (embedded) return embedded.module.runSql(embedded.handle, sql);
        const last = this.#last;
        if (!last) throw new SqltallyError('no session connection to run the probe on', { backend: backendId, phase: 'probe', statement: sql });
        return runSql(this.driver, last.opened.handle, sql);
      },
      ...(proxy
        ? {
            settle: async () => {
              const result = await proxy.settle();
              return result.busy.map((b) => `connection #${b.serverConnectionId ?? '?'} (${b.why})`);
            },
          }
        : this.#ownSettle
          ? { settle: this.#ownSettle }
          : {}),
    };
  }

  /** Reads the counters at the function's return (see tracker.onReturn), before work it left has run. */
  #readAtReturn(tracker: DeferredWorkTracker | null): { value: AtReturn | null } {
    const at: { value: AtReturn | null } = { value: null };
    if (tracker) {
      const recorder = this.#recorder;
      tracker.onReturn = () => {
        let wire = 0;
        for (const c of this.#proxy?.connections() ?? []) wire += c.counts.commandsTotal;
        at.value = { calls: recorder.recordedInWindow, wire, running: recorder.callsInFlightInWindow > recorder.callsLetGoInWindow };
      };
    }
    return at;
  }

  /** Waits for the work the window's code left running and says what of it is work (null: nothing). */
  async #settleDeferred(tracker: DeferredWorkTracker, wait: number, atReturn: AtReturn | null): Promise<DeferredWork | null> {
    const recorder = this.#recorder;
    const running = () => recorder.callsInFlightInWindow > recorder.callsLetGoInWindow;
    const wireCommands = () => (this.#proxy?.connections() ?? []).reduce((n, c) => n + c.counts.commandsTotal, 0);
    // Read at the function's return (see tracker.onReturn), before work it left has run: microtasks run first.
    const before = atReturn ?? { calls: recorder.recordedInWindow, wire: wireCommands(), running: running() };
    let deferred = await tracker.settle(wait);
    // A promise or socket request settled in the wait is work only if the database saw something after the return (a
    // driver's own promises settle then too, sending nothing); one still pending is work anyway, and so are timers and ticks.
    const databaseMoved = before.running || running() || recorder.recordedInWindow > before.calls || wireCommands() > before.wire;
    if (deferred && !databaseMoved) {
      const items = deferred.items.filter((i) => DIRECT_WORK.has(i.type) || !i.settled);
      deferred = items.length > 0 ? { ...deferred, items } : null;
    }
    // A counted call running at the return that no other work explains (a postgres.js execute()): the user's promises
    // pending then name the line, even if the call has ended since, and are waited for like other work.
    const candidates = deferred === null && (before.running || running()) ? tracker.unawaitedPromises() : [];
    if (candidates.length > 0) {
      for (let waited = 0; running() && waited < wait; waited += 5) await new Promise((r) => setTimeout(r, 5));
      const still = new Set(
        tracker
          .unawaitedPromises()
          .filter((c) => !c.settled)
          .map((c) => c.site),
      );
      deferred = { waitMs: wait, items: candidates.map((c) => ({ ...c, settled: c.settled || (!running() && !still.has(c.site)) })) };
    }
    return deferred;
  }

  /**
   * One counted window around `fn`. The server probe's control window runs first; the user's error, if any, is kept
   * in the tally (and makes the verdict incomplete) rather than thrown, so a matcher can show it.
   */
  async measure<T>(fn: (handle: DriverHandle<D>) => Promise<T> | T, opts: MeasureOptions = {}): Promise<Captured<T>> {
    checkMeasure(fn, opts, this.backend.description.id);
    const mode = opts.connection ?? (opts.hot ? 'hot' : fn.length === 0 ? 'none' : 'fresh');
    const waitMs = deferredWaitOf(opts.deferredWaitMs ?? this.#options.deferredWaitMs ?? DEFAULT_DEFERRED_WAIT_MS, this.backend.description.id);
    const open = await this.#open(mode, opts);
    let result: T | undefined;
    let thrown: unknown = NOTHING;
    const tracker = this.#deferred;
    const timed = async () => {
      const started = process.hrtime.bigint();
      try {
        // Aborted while the window opened: the function is not started at all (it would run on a connection the
        // window is about to close).
        const work = opts.signal?.aborted
          ? Promise.reject<T>(opts.signal.reason)
          : Promise.resolve().then(() => (tracker ? tracker.run(() => fn(open.conn?.counted as DriverHandle<D>)) : fn(open.conn?.counted as DriverHandle<D>)));
        this.#running = true;
        result = await raceGivingUp(work, opts.timeoutMs, opts.signal);
      } catch (err) {
        thrown = err;
      } finally {
        this.#running = false;
      }
      open.durationNs = Number(process.hrtime.bigint() - started);
    };
    const atReturn = this.#readAtReturn(tracker);
    tracker?.open();
    try {
      await (opts.around ? opts.around(timed) : timed());
      // A function given up on is still running: what it left is listed, not waited for.
      if (tracker) open.deferred = await this.#settleDeferred(tracker, thrown !== NOTHING && gaveUp(thrown) ? 0 : waitMs, atReturn.value);
    } catch (err) {
      // `around` itself failed: the window still closes, and the error is the tally's.
      thrown = err;
    } finally {
      tracker?.close();
    }
    const tally = await this.#close(open, thrown, opts);
    return { ...tally, result };
  }

  /**
   * Times `fn` with the instrument off: each run gets a connection of the session's driver straight to the server
   * (no wire proxy, no counting wrapper, no server readings), opened before the timer starts and closed after it, so
   * the samples are the code's own time. A counted window's duration also holds what counting adds per call and per
   * round trip; compare the two for that cost. Runs nothing while a window is open: a connection around the proxy
   * would be counted against it.
   */
  async time<T>(fn: (handle: DriverHandle<D>) => Promise<T> | T, opts: TimeOptions<D> = {}): Promise<UninstrumentedTimes> {
    this.#assertOpen('workload');
    const id = this.backend.description.id;
    if (this.#measuring) {
      throw new SqltallyError('time() cannot run while a window is open on this session', {
        backend: id,
        phase: 'workload',
        hint: 'await the measure() (or end() the begin()) first: its server readings would see the uninstrumented connection',
      });
    }
    const repeats = opts.repeats ?? 5;
    const warmups = opts.warmups ?? 0;
    for (const [name, n] of [
      ['repeats', repeats],
      ['warmups', warmups],
    ] as const) {
      if (!Number.isInteger(n) || n < 0) throw new SqltallyError(`time(): ${name} must be a whole number, got ${String(n)}`, { backend: id, phase: 'config' });
    }
    const out: UninstrumentedTimes = { warmupNs: [], samplesNs: [] };
    this.#measuring = true;
    try {
      for (let i = 0; i < warmups + repeats; i++) {
        const ns = await this.#timeOnce(fn, opts);
        (i < warmups ? out.warmupNs : out.samplesNs).push(ns);
      }
    } finally {
      this.#measuring = false;
    }
    return out;
  }

  async #timeOnce<T>(fn: (handle: DriverHandle<D>) => Promise<T> | T, opts: TimeOptions<D>): Promise<number> {
    const opened = await openRawConnection(this.driver, this.backend.connection, {
      driverOptions: this.#options.driverOptions,
      backend: this.backend.description.id,
      ...(this.#options.driverPackage ? { driverPackage: this.#options.driverPackage } : {}),
    });
    let gaveUp = false;
    try {
      if (opts.connection === 'hot') {
        await opts.before?.(opened.handle);
        await fn(opened.handle);
      }
      await opts.before?.(opened.handle);
      const started = process.hrtime.bigint();
      try {
        await raceGivingUp(
          Promise.resolve().then(() => fn(opened.handle)),
          opts.timeoutMs,
          undefined,
        );
      } catch (err) {
        if (err === null || typeof err !== 'object' || !(GAVE_UP in err)) throw err;
        gaveUp = true;
        throw new SqltallyError(`an uninstrumented run did not finish within ${opts.timeoutMs} ms`, {
          backend: this.backend.description.id,
          phase: 'workload',
        });
      }
      return Number(process.hrtime.bigint() - started);
    } finally {
      // A run given up on may still hold the connection busy: its close is not waited for.
      if (gaveUp) void opened.close().catch(() => undefined);
      else await opened.close();
    }
  }

  /**
   * Opens a window that stays open until `end()`: for code that is not one function (a test's body between
   * `beforeEach` and `afterEach`, see `windowPerTest` in jest/). Nothing is handed over; the window covers whatever
   * ran, as `measure` with `connection: 'none'` does. Only one window is open on a session at a time.
   */
  async begin(opts: Pick<MeasureOptions, 'ignore' | 'deferredWaitMs'> = {}): Promise<OpenCapture> {
    const waitMs = deferredWaitOf(opts.deferredWaitMs ?? this.#options.deferredWaitMs ?? DEFAULT_DEFERRED_WAIT_MS, this.backend.description.id);
    const open = await this.#open('none', opts);
    open.endedBy = 'end';
    const started = process.hrtime.bigint();
    let ended: Promise<Tally> | null = null;
    const tracker = this.#deferred;
    const atReturn = this.#readAtReturn(tracker);
    // The code under the window runs in its caller's context (a test body): work is told by the frames that made it.
    tracker?.open(true);
    const close = async (error: unknown, closeOpts: MeasureOptions): Promise<Tally> => {
      open.durationNs = Number(process.hrtime.bigint() - started);
      try {
        // Work given up on is not waited for: what it still does is counted as late commits.
        if (tracker) open.deferred = await this.#settleDeferred(tracker, gaveUp(error) ? 0 : waitMs, atReturn.value);
      } finally {
        tracker?.close();
      }
      return this.#close(open, error === undefined ? NOTHING : error, closeOpts);
    };
    const once = (error: unknown, closeOpts: MeasureOptions): Promise<Tally> => {
      if (ended) return ended;
      const run = () => (ended = close(error, closeOpts));
      return tracker ? tracker.ending(run) : run();
    };
    return {
      end: (error?: unknown) => once(error, opts),
      giveUp: (why: string, giveUpOpts: Pick<MeasureOptions, 'onTimeout'> = {}) => once({ [GAVE_UP]: why }, { ...opts, ...giveUpOpts }),
    };
  }

  async #open(mode: 'none' | 'fresh' | 'hot', opts: Pick<MeasureOptions, 'ignore' | 'deferredWaitMs'>): Promise<OpenState<D>> {
    this.#assertOpen('workload');
    if (this.#measuring) {
      throw new SqltallyError('a window is already open on this session', {
        backend: this.backend.description.id,
        phase: 'workload',
        hint: 'await one measure() (or end() a begin()) before starting the next: two windows at once would count each other',
      });
    }
    const ignore = ignoreFilter([...(this.#options.ignore ?? []), ...(opts.ignore ?? [])], this.backend.description.id);
    // A Database closed since (one counted per test, closed after it) has nothing more to read: reading it would make
    // every later window incomplete.
    for (const [id, e] of this.#embeddedHandles) if (e.module.isClosed(e.handle)) this.#embeddedHandles.delete(id);
    this.#measuring = true;
    try {
      const conn = mode === 'none' ? null : await this.#connection(mode === 'hot');
      await this.#settleGoodbyes();
      // Counted calls still running from before (an earlier window's late work) would settle, and count, in this one.
      const waitMs = opts.deferredWaitMs ?? this.#options.deferredWaitMs ?? DEFAULT_DEFERRED_WAIT_MS;
      for (let waited = 0; this.#recorder.callsInFlight > 0 && waited < waitMs; waited += 5) await new Promise((r) => setTimeout(r, 5));
      const callsFromBefore = this.#recorder.callsInFlight;
      const late = this.#lateSince();
      const sinceNs = Number(process.hrtime.bigint());
      const context = this.#context(sinceNs);
      let probeError = this.#probeError;
      let window: OpenWindow | null = null;
      if (this.#probe) {
        const opening = this.#probe.begin(context);
        this.#opening = opening.catch(() => null);
        try {
          window = await opening;
        } catch (err) {
          probeError = `could not open the server window: ${messageOf(err)}`;
        }
      }
      await this.#proxy?.caughtUp();
      const wireBefore = this.#proxy?.snapshot();
      this.#window = window;
      this.#opening = null;
      this.#recorder.begin(ignore ? { ignore } : {});
      return { conn, window, probeError, wireBefore, durationNs: 0, deferred: null, callsFromBefore, late };
    } catch (err) {
      this.#measuring = false;
      this.#opening = null;
      throw err;
    }
  }

  async #close(open: OpenState<D>, thrown: unknown, opts: MeasureOptions): Promise<Tally> {
    try {
      return await this.#closeWindow(open, thrown, opts);
    } finally {
      this.#window = null;
      this.#measuring = false;
    }
  }

  async #closeWindow(open: OpenState<D>, thrown: unknown, opts: MeasureOptions): Promise<Tally> {
    const gaveUpWhy = thrown === NOTHING ? null : gaveUp(thrown);
    const { window, wireBefore } = open;
    let probeError = open.probeError;
    if (!gaveUpWhy) await this.#settleLetGo();
    const driverCallsInFlight = this.#recorder.callsInFlightInWindow;
    // With no driver counted (a client in another language) nothing else says the work is over: the wire's answers do.
    if (!gaveUpWhy) await this.#settleAnswers(driverCallsInFlight === 0);
    // Taken before the probe reads: the proxy's own settle requests never show in the counts, and the client's last
    // answer has arrived, so the proxy saw all of the window's traffic.
    await this.#proxy?.caughtUp();
    const wireAtReturn = this.#proxy?.snapshot();
    const driverWindow = this.#recorder.end();
    let workloadError = thrown === NOTHING || gaveUpWhy ? null : workloadErrorOf(thrown);
    if (workloadError && workloadError.statement === null) {
      // A connection lost mid-command (the server killed, the network cut, a packet too big) comes without the SQL:
      // the driver layer saw which call failed.
      const failed = driverWindow.layer.events.findLast((e) => e.error !== null);
      if (failed) workloadError = { ...workloadError, statement: truncateStatement(failed.sql) };
    }

    let lateCommits: LateCommits | null = null;
    if (gaveUpWhy) lateCommits = await this.#afterGivingUp(wireAtReturn, opts, open.endedBy === 'end' ? 'the window' : 'the function');

    let server: ServerLayer | null = null;
    if (window) {
      try {
        await this.#settleGoodbyes();
        if ((lateCommits?.unread?.length ?? 0) > 0) throw new Error('the server did not answer sqltally after the give-up, so its counters were not read');
        server = gaveUpWhy
          ? await within(window.end(), AFTER_TIMEOUT_PROBE_MS, 'the server did not answer the closing reading after the give-up')
          : await window.end();
      } catch (err) {
        probeError = `could not close the server window: ${messageOf(err)}`;
      }
    }
    this.#window = null;
    const wireAfterProbe = this.#proxy?.snapshot();
    const wire: WireCounts | null = this.#proxy && wireBefore && wireAtReturn ? this.#proxy.diff(wireBefore, wireAtReturn) : null;
    const late = this.#proxy && wireAtReturn && wireAfterProbe && !gaveUpWhy ? this.#proxy.diff(wireAtReturn, wireAfterProbe) : null;

    const drivers = [...this.#counted.values()].map((d): CountedDriver => {
      const path = this.#recorder.paths.pathOf(d.name);
      return path === undefined ? d : { ...d, path };
    });
    const driver: DriverLayer | null = drivers.length > 0 ? driverWindow.layer : null;
    const modelDriver = driverWindow.drivers.length === 1 ? driverWindow.drivers[0] : drivers.length === 1 ? drivers[0]?.name : undefined;
    const unfinished = {
      callsFromBefore: open.callsFromBefore,
      driverCalls: driverCallsInFlight,
      wireRequests: wire?.unansweredRequests ?? 0,
      // A pool closing an idle connection on its own schedule says goodbye after the function returned: not work.
      lateCommands: late ? late.commandsTotal - (late.commands.COM_QUIT ?? 0) - (late.commands.Terminate ?? 0) : 0,
    };
    const { verdict, explainedStatements, findings } = judgeWindow({
      backend: this.backend.description,
      ...(modelDriver ? { driverName: modelDriver, driverVersion: this.#counted.get(modelDriver)?.version ?? null } : {}),
      driverOptions: this.#options.driverOptions ?? {},
      driver,
      driverWindow,
      wire,
      server,
      workloadError,
      probeError,
      ...(this.#options.otherConnections ? { otherConnections: this.#options.otherConnections } : {}),
      unfinished,
      timedOut: gaveUpWhy ? `${gaveUpWhy}; ${lateCommits?.summary ?? 'rows committed anyway were not counted'}` : null,
      via: this.#proxy ? `${wire?.connections ?? 0} connection(s) through ${this.#proxy.where}` : 'the session connection only (no wire proxy)',
      inFlight: (wireAtReturn?.connections ?? [])
        .filter((c) => c.closedAtNs === null && (c.counts.unansweredRequests ?? 0) > 0)
        .map((c) => `connection #${c.serverConnectionId ?? '?'}: ${c.counts.lastRequestText ?? 'no statement text'}`),
      deferredWork: open.deferred,
      ...(open.endedBy ? { endedBy: open.endedBy } : {}),
      ...(driver && wireBefore && wireAtReturn ? { wireOwners: wireOwners(wireBefore, wireAtReturn, this.#recorder.countedConnections) } : {}),
    });
    const share =
      driver && modelDriver
        ? ignoredShare({
            driverName: modelDriver,
            driverOptions: this.#options.driverOptions ?? {},
            driverVersion: this.#counted.get(modelDriver)?.version ?? null,
            capabilities: this.backend.description.capabilities,
            driver,
            window: driverWindow,
            wire: null,
            server: null,
          })
        : null;
    const ignored = share ? takeOutIgnored(share, wire, server) : null;
    this.#lastEnd = {
      number: ++this.#windows,
      wire: wireAfterProbe,
      leftWork: gaveUpWhy !== null || driverCallsInFlight > 0 || unfinished.wireRequests > 0 || (open.deferred?.items.some((i) => !i.settled) ?? false),
    };
    if (this.#lastEnd.leftWork) this.#recorder.expectLate();
    return {
      backend: this.backend.description,
      driver: this.driver,
      drivers,
      driverAbsent: driver
        ? null
        : 'no driver object was counted in this session: the driver layer is empty because nothing told sqltally about the calls (count your client with session.count(); wire and server layers still count it when it connects to session.connection)',
      layers: { driver, wire: ignored?.wire ?? wire, server: ignored?.server ?? server },
      beyondWindow: server ? beyondWindow(this.backend.description.flavour, server, wire, explainedStatements) : [],
      verdict: ignored ? { ...verdict, reconciliation: [...verdict.reconciliation, ignored.line] } : verdict,
      findings: [...open.late, ...findings],
      deferredWork: open.deferred,
      ignored: ignored?.share ?? null,
      workloadError,
      lateCommits,
      durationNs: open.durationNs,
    };
  }

  /**
   * The function gave up (timeout, abort): the statements its connections still run go on on the server. Cancel
   * them (or wait), then count what committed anyway through a fresh connection.
   */
  async #afterGivingUp(atReturn: WireSnapshot | undefined, opts: MeasureOptions, who: 'the function' | 'the window'): Promise<LateCommits> {
    const running = (atReturn?.connections ?? [])
      .filter((c) => c.closedAtNs === null && (c.counts.unansweredRequests ?? 0) > 0 && c.serverConnectionId !== null)
      .map((c) => c.serverConnectionId as number);
    const table = this.#options.table ?? null;
    const unread: string[] = [];
    let silent = false;
    const read = <T>(work: () => Promise<T>, what: string): Promise<T | null> =>
      within(work(), AFTER_TIMEOUT_READ_MS, what).catch((err: unknown) => {
        unread.push(messageOf(err));
        if (err instanceof NoAnswer) silent = true;
        return null;
      });
    const atGiveUp = table ? await read(() => countRows(this.backend, table, this.driver), `counting ${table.name} at the give-up`) : null;
    // Asked to cancel even when the count went unanswered: a server slow under load may still take the cancel, and a
    // statement left running would go on committing rows nobody counts.
    const cancelled = opts.onTimeout === 'wait' ? [] : ((await read(() => cancelRunning(this.backend, running), 'cancelling the running statements')) ?? []);
    // A server that did not answer those two (frozen, gone) will not finish its statements either: waiting for them
    // or reading again would only hold the window longer.
    const unresponsive = unread.length > 0;
    if (silent) this.#serverSilent = true;
    const settled = this.#proxy && !unresponsive ? await this.#proxy.settle({ timeoutMs: AFTER_TIMEOUT_SETTLE_MS }) : null;
    const afterwards = table && !unresponsive ? await read(() => countRows(this.backend, table, this.driver), `counting ${table.name} afterwards`) : null;
    const committedAfter = atGiveUp !== null && afterwards !== null ? afterwards - atGiveUp : null;
    const parts = [
      running.length > 0
        ? opts.onTimeout === 'wait'
          ? `waited for ${running.length} statement(s) still running on the server`
          : `cancelled ${cancelled.length} of ${running.length} statement(s) still running on the server`
        : 'no statement was running on the server',
      settled && settled.busy.length > 0 ? `${settled.busy.length} connection(s) still busy after ${AFTER_TIMEOUT_SETTLE_MS} ms` : '',
      table
        ? committedAfter !== null
          ? `${committedAfter} row(s) committed to ${table.name} after ${who} gave up (${afterwards} in the table, read through a fresh connection)`
          : `the rows in ${table.name} could not be counted`
        : 'name the table (CaptureOptions.table) to count the rows that committed anyway',
      unread.length > 0 ? `could not read: ${unread.join('; ')}${unresponsive ? '; the server did not answer, so nothing more was read' : ''}` : '',
    ].filter(Boolean);
    return {
      running: running.length,
      cancelled: cancelled.length,
      table: table?.name ?? null,
      rowsAtGiveUp: atGiveUp,
      rowsAfterwards: afterwards,
      rowsCommittedAfterGivingUp: committedAfter,
      ...(unread.length > 0 ? { unread } : {}),
      summary: parts.join('; '),
    };
  }

  /**
   * Late work of the last window, seen now: its calls that settled after it closed and, if it closed with work running,
   * the wire commands since on the user's connections. Each one found is also kept in `lateWork`.
   */
  #lateSince(): Finding[] {
    const last = this.#lastEnd;
    if (!last) return [];
    const calls = this.#recorder.takeLate();
    let commands: string | null = null;
    const proxy = this.#proxy;
    if (last.leftWork && proxy && last.wire) {
      const ours = this.#last?.opened.connectionId ?? null;
      const mine = (snapshot: WireSnapshot): WireSnapshot => ({
        ...snapshot,
        connections: snapshot.connections.filter((c) => c.serverConnectionId === null || c.serverConnectionId !== ours),
      });
      const since = proxy.diff(mine(last.wire), mine(proxy.snapshot()));
      const counted = Object.entries(since.commands).filter(([name]) => name !== 'COM_QUIT' && name !== 'Terminate');
      const n = counted.reduce((sum, [, v]) => sum + v, 0);
      if (n > 0) commands = `the wire saw ${n} command(s) on your connections after it ended (${counted.map(([k, v]) => `${k} ${v}`).join(', ')})`;
    }
    if (calls.calls === 0 && commands === null) return [];
    const parts = [
      calls.calls > 0
        ? `${calls.calls} counted driver call(s) it had started settled after it ended, or ran after it left work running (${calls.sql.map((q) => truncateStatement(q, 80)).join('; ')})`
        : '',
      commands ?? '',
    ].filter(Boolean);
    const finding: Finding = { kind: 'late-work', message: `late work of window ${last.number}: ${parts.join('; ')}; counted in no window` };
    this.#lastEnd = { ...last, leftWork: false };
    this.#lateWork.push(finding);
    return [finding];
  }

  /**
   * Late work of this session's windows: what a window had started and went on after it ended (counted calls that
   * settled later, commands on your connections after a window that left work running). Each is also a finding of the
   * next window; what came after the last window is added by `close()`.
   */
  get lateWork(): readonly Finding[] {
    return this.#lateWork;
  }

  /**
   * Closes the session connection, the probe, the proxy, and the backend when this session started it. Connections
   * of your own still open through the proxy are cut, and the close then fails naming them: end your pools first.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#running) {
      // The window still has to read the server; closing under it read a stopped probe (negative counts).
      throw new SqltallyError('close() was called inside a measured function: the session stays open until the window ends', {
        backend: this.backend.description.id,
        phase: 'workload',
        hint: 'close the session after measure() returns (await using, or close() in afterAll)',
      });
    }
    this.#closed = true;
    // A begin() window never ended would leave the work-following hook on for the rest of the process.
    this.#deferred?.close();
    this.#lateSince();
    const ours = this.#last?.opened.connectionId ?? null;
    // A frozen server never answers a goodbye: after one went silent, each polite close gets a moment, not forever
    // (the connection is dropped when the server is stopped or answers again).
    const politely = (close: Promise<void> | undefined): Promise<void> | undefined =>
      close && this.#serverSilent ? within(close, SILENT_CLOSE_MS, 'closing a connection to the silent server').catch(() => undefined) : close;
    await politely(this.#last?.opened.close())?.catch(() => undefined);
    // A pool's end() may resolve before its sockets are gone (the proxy holds a goodbye while it reads the server):
    // give the user's connections a moment to finish closing before calling any of them left open.
    const open = () => (this.#proxy?.connections() ?? []).filter((c) => c.closedAtNs === null && c.serverConnectionId !== ours);
    for (let waited = 0; open().length > 0 && waited < CLOSE_GRACE_MS; waited += 10) await new Promise((r) => setTimeout(r, 10));
    const stillOpen = open();
    const steps: (() => Promise<void>)[] = [
      async () => politely(this.#last?.opened.close()),
      async () => politely(this.#probe?.close()),
      async () => this.#proxy?.close(),
      async () => (this.#ownsBackend ? this.backend.stop() : undefined),
    ];
    for (const step of steps) {
      try {
        await step();
      } catch {
        // Best effort: one failed close must not leave the server running.
      }
    }
    const yours = stillOpen;
    if (yours.length > 0) {
      throw new SqltallyError(`${yours.length} connection(s) through the session's proxy were still open when it closed, and were cut`, {
        backend: this.backend.description.id,
        phase: 'stop',
        hint: `${
          this.#counted.size > 0
            ? 'end your own pools and clients (pool.end(), sql.end(), knex.destroy(), dataSource.destroy(), sequelize.close())'
            : 'end your clients (let the client process exit, or close its connection)'
        } before closing the session; connections: ${yours
          .map((c) => `#${c.serverConnectionId ?? '?'}${c.counts.lastRequestText ? ` (last statement: ${c.counts.lastRequestText})` : ''}`)
          .join(', ')}`,
      });
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * Captures one window around the user's own code: starts (or reuses) a backend, hands `fn` a counted connection of
 * the chosen driver, and returns the three layers with a verdict. `setup` runs first on the same connection, uncounted.
 */
export async function capture<D extends DriverName, T>(
  options: CaptureOptions<D>,
  fn: (handle: DriverHandle<D>) => Promise<T>,
  hooks: { setup?: (handle: DriverHandle<D>) => Promise<void> } = {},
): Promise<Captured<T>> {
  const session = await CaptureSession.open(options);
  try {
    if (hooks.setup) await session.prepare(hooks.setup);
    return await session.measure(fn, { connection: hooks.setup ? 'hot' : 'fresh' });
  } finally {
    await session.close();
  }
}
