import { createHook, executionAsyncId, type AsyncHook } from 'node:async_hooks';
import { syncBuiltinESMExports } from 'node:module';
import timers from 'node:timers';
import { promisify } from 'node:util';
import { promiseHooks } from 'node:v8';
import { AssertionError } from 'node:assert';
import { isAbsolute, relative, sep } from 'node:path';
import { isLibraryFile } from '../shared/caller';
import { arraySlice, mathMax, PromiseClass, reflectApply, toNumber } from '../shared/intrinsics';
import { z } from 'zod';

/** How long a window waits, after its function settled, for work the function started and did not await. */
export const DEFAULT_DEFERRED_WAIT_MS = 1_500;
/** Longer than this is a mistake (a timer's range is about 24.8 days, and a window should never hang). */
export const MAX_DEFERRED_WAIT_MS = 600_000;
const POLL_MS = 5;
/** Entries the window's map holds, settled ones included, before it is swept of those. */
const SWEEP_MIN = 1024;
/** Deep enough to reach the user's frame under an ORM's query builder (knex: about 15 frames). */
const STACK_FRAMES = 40;
/** The hook's frames and Node's (about 4), and the few calls nearest the resource's creation. */
const SHALLOW_FRAMES = 10;

/** One piece of asynchronous work the measured function started and had not finished when it returned. */
export const DeferredWorkItemSchema = z.object({
  /** What it is, in words: `a setTimeout(…) timer`, `a promise`, `a process.nextTick callback`. */
  what: z.string(),
  /** The async_hooks resource type (`Timeout`, `PROMISE`, `TickObject`, ...). */
  type: z.string(),
  /** The user's file:line:column where it was created; null when no frame of the user's code was on the stack. */
  site: z.string().nullable(),
  /** Whether it settled during the window's bounded wait (its counts are then in the window). */
  settled: z.boolean(),
});
export type DeferredWorkItem = z.infer<typeof DeferredWorkItemSchema>;

/** What the window's function left running when it returned, and what became of it in the bounded wait. */
export const DeferredWorkSchema = z.object({
  /** How long the window waited for it, at most. */
  waitMs: z.number().int().nonnegative(),
  /** Work pending when the function returned (or threw), and work that work started meanwhile. */
  items: z.array(DeferredWorkItemSchema),
});
export type DeferredWork = z.infer<typeof DeferredWorkSchema>;

interface Kind {
  what: string;
  /**
   * Timers, immediates, ticks and microtasks count when the user's code called the API itself (not a driver's
   * housekeeping); promises and requests when it is anywhere on the stack (an ORM makes an un-awaited call's promise).
   */
  direct: boolean;
  /** Settled by running its callback once (a repeating timer never is; a request's is its completion), or by its promise settling. */
  settles: 'callback' | 'resolve';
  /** The async_hooks resource type (its key in KINDS). */
  type: string;
}

/** The resource types that are work in progress; long-lived handles (sockets, servers) are not: a pool keeps them. */
const KINDS: Record<string, Omit<Kind, 'type'>> = {
  PROMISE: { what: 'a promise', direct: false, settles: 'resolve' },
  Timeout: { what: 'a timer', direct: true, settles: 'callback' },
  Immediate: { what: 'a setImmediate callback', direct: true, settles: 'callback' },
  TickObject: { what: 'a process.nextTick callback', direct: true, settles: 'callback' },
  Microtask: { what: 'a queueMicrotask callback', direct: true, settles: 'callback' },
  TCPCONNECTWRAP: { what: 'a TCP connect', direct: false, settles: 'callback' },
  PIPECONNECTWRAP: { what: 'a socket connect', direct: false, settles: 'callback' },
  GETADDRINFOREQWRAP: { what: 'a DNS lookup', direct: false, settles: 'callback' },
  QUERYWRAP: { what: 'a DNS query', direct: false, settles: 'callback' },
  FSREQCALLBACK: { what: 'a file operation', direct: false, settles: 'callback' },
  FSREQPROMISE: { what: 'a file operation', direct: false, settles: 'callback' },
  WRITEWRAP: { what: 'a socket write', direct: false, settles: 'callback' },
  SHUTDOWNWRAP: { what: 'a socket shutdown', direct: false, settles: 'callback' },
};

/** Looked up once per resource made in a window: a Map stays fast where an object's keyed load turns megamorphic. */
const KIND_OF = new Map<string, Kind>(Object.entries(KINDS).map(([type, kind]) => [type, { ...kind, type }]));
const PROMISE_KIND = KIND_OF.get('PROMISE')!;

/** A followed promise's entry, on the promise itself: V8's settle hook hands over the promise only. */
const FOLLOWED = Symbol('sqltally.followed');

/** Node's files that lie between a timer/tick API and its caller (`setTimeout` -> `new Timeout` -> the hook). */
const API_FILES = /^node:(?:internal\/async_hooks|internal\/timers|timers|timers\/promises|internal\/process\/task_queues|async_hooks)(?::|$)/;

/** V8's captured frames, formatted (the costly part) only if an entry holding it is still pending when asked. */
interface Trace {
  stack?: string;
  /** Whether `stack` holds a capture (reading `stack` would format it). */
  captured?: boolean;
  /** V8's call sites, when they were read at creation (a begin() window decides there whether it is the user's). */
  sites?: NodeJS.CallSite[];
  /** The callback run (see `#turn`) it was captured in. */
  turn: number;
  /** Its frames once formatted: one trace can be shared by several promises. */
  frames?: { line: string; async: boolean }[];
}

interface Entry {
  /**
   * Its key in the window's map (its async id in a begin() window, else its `seq`), and the window (`open` count)
   * that followed it: a promise keeps its entry past its window.
   */
  id: number;
  window: number;
  kind: Kind;
  /**
   * Where it was made. Null for a promise of the running callback run not yet given one: most settle in it (an
   * awaited call); one still pending takes the capture of the run's next hook event, or the run's own trace (see `#leave`).
   */
  trace: Trace | null;
  /** A timer's or an immediate's: its handle and how it was set. */
  timer: Timer | null;
  /** Read when first asked (see `attribute`). */
  attribution: Attribution | undefined;
  settled: boolean;
  /** Creation order, so a reason lists work in the order it was started. */
  seq: number;
  /**
   * A promise something waits on (a `then` or an `await` chained from it, in the window). One nobody waits on is a
   * handle, not work: a driver's promise that lives as long as its connection, a postgres.js query read as a cursor.
   */
  observed: boolean;
}

interface Timer {
  handle: object | null;
  /** Its delay as Node takes it, and whether it repeats, where the timer was made (a fake timer's handle has neither). */
  delay: number | null;
  repeats: boolean;
}

interface Attribution {
  /** Whether it is the user's work, and the user's line that made it (null: not the user's work). */
  user: boolean;
  site: string | null;
  /** In words, read when first attributed (a timer's delay is gone once it fired). */
  what: string;
}

/** An entry as a reason lists it. */
function itemOf(e: Entry): DeferredWorkItem {
  return { what: e.attribution?.what ?? e.kind.what, type: e.kind.type, site: e.attribution?.site ?? null, settled: e.settled };
}

const FRAME = /^\s*at (?:async )?(?:.*?\()?(.*?):(\d+):(\d+)\)?$/;

function frameFile(line: string): { file: string; at: string } | null {
  const m = FRAME.exec(line);
  if (!m || m[1] === undefined) return null;
  const file = m[1].startsWith('file://') ? m[1].slice('file://'.length) : m[1];
  const rel = isAbsolute(file) ? relative(process.cwd(), file) : file;
  const shown = rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
  return { file, at: `${shown}:${m[2]}:${m[3]}` };
}

/** sqltally's own library code (not its tests): skipped when looking for the user's line. */
function isOwn(file: string): boolean {
  return isAbsolute(file) && !file.includes(`${sep}node_modules${sep}`) && isLibraryFile(file);
}

/** A frame of the user's code: not Node's, not a package's, not sqltally's. */
function isUserFile(file: string): boolean {
  return isAbsolute(file) && !isLibraryFile(file);
}

/**
 * Where an entry was created, if it is the user's work: the first frame of the user's code. For `direct` kinds that
 * frame must be the one that called Node's API, with nothing but Node's timer and tick files in between.
 */
function isWork(e: Entry): boolean {
  return e.kind !== PROMISE_KIND || e.observed === true;
}

/**
 * The Error of the context Node's core modules run in. Under Jest this module's own Error has no printer, and the
 * one that maps positions to the sources (Jest's source-map support) is installed on that one; elsewhere it is the same.
 */
const OUTER_ERROR = Object.getPrototypeOf(AssertionError) as ErrorConstructor;

/**
 * The captured frames as the environment prints them (source-mapped under Jest, ts-jest, tsx) beside V8's call sites,
 * which say which frames are asynchronous: those are the functions awaiting the one that ran, not what called it.
 */
function framesOf(trace: Trace): { line: string; async: boolean }[] {
  if (trace.frames) return trace.frames;
  if (trace.sites === undefined && trace.captured !== true) return (trace.frames = []);
  const environment = Error.prepareStackTrace;
  const printer = environment ?? OUTER_ERROR.prepareStackTrace;
  let sites: NodeJS.CallSite[] = trace.sites ?? [];
  const print = (error: Error, s: NodeJS.CallSite[]): string =>
    printer ? String(printer(error, s)) : `${String(error)}\n${s.map((site) => `    at ${String(site)}`).join('\n')}`;
  let text: string;
  if (trace.sites) {
    text = print(trace as unknown as Error, trace.sites);
  } else {
    Error.prepareStackTrace = (error, s) => {
      sites = s;
      return print(error, s);
    };
    try {
      text = String(trace.stack ?? '');
    } finally {
      Error.prepareStackTrace = environment;
    }
  }
  const lines = text.split('\n').filter((l) => /^\s*at /.test(l));
  // One printed line per call site; if a printer merged or dropped some, the text's own "async" marks are all there is.
  const aligned = lines.length === sites.length;
  return (trace.frames = lines.map((line, i) => ({ line, async: aligned ? sites[i]?.isAsync?.() === true : / at async /.test(line) })));
}

/** The stack here, deep enough for the user's frame under an ORM, and cheap until it is formatted. */
function capture(turn: number): Trace {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = STACK_FRAMES;
  const trace: Trace = { turn, captured: true };
  Error.captureStackTrace(trace);
  Error.stackTraceLimit = limit;
  return trace;
}

/** Hands V8's call sites back as they are: the stack as objects, not formatted. */
const AS_SITES = (_error: Error, sites: NodeJS.CallSite[]): unknown => sites;

/**
 * The stack here as call sites, for a begin() window, which tells the user's work when it is made: a few frames first,
 * which nearly always reach the user's or an asynchronous frame, the deep capture only when not (frames are the cost).
 */
function captureSites(turn: number): Trace {
  const environment = Error.prepareStackTrace;
  const limit = Error.stackTraceLimit;
  Error.prepareStackTrace = AS_SITES;
  try {
    let sites = sitesHere(SHALLOW_FRAMES);
    if (sites !== null && sites.length >= SHALLOW_FRAMES && !reachesUser(sites)) sites = sitesHere(STACK_FRAMES);
    return sites === null ? { turn } : { turn, sites };
  } finally {
    Error.prepareStackTrace = environment;
    Error.stackTraceLimit = limit;
  }
}

function sitesHere(frames: number): NodeJS.CallSite[] | null {
  Error.stackTraceLimit = frames;
  const holder: { stack?: unknown } = {};
  Error.captureStackTrace(holder, captureSites);
  return Array.isArray(holder.stack) ? (holder.stack as NodeJS.CallSite[]) : null;
}

/** Whether the frames reach as far as attribution reads: a frame of the user's code, or the first asynchronous one. */
function reachesUser(sites: NodeJS.CallSite[]): boolean {
  for (const site of sites) {
    if (site.isAsync()) return true;
    const file = siteFile(site);
    if (file !== null && isUserFile(file)) return true;
  }
  return false;
}

function siteFile(site: NodeJS.CallSite): string | null {
  const name = site.getFileName();
  if (!name) return null;
  return name.startsWith('file://') ? name.slice('file://'.length) : name;
}

/** The async_hooks machinery between a resource's creation and the hook (and the hook itself). */
function isHookFrame(file: string): boolean {
  return file.startsWith('node:internal/async_hooks') || isOwn(file);
}

/**
 * Whether call sites read at creation show the user's work, by `attribute`'s rule for printed frames (a user frame
 * among the synchronous callers; for `direct` kinds, only Node's timer and tick files between).
 */
function isUserSites(sites: NodeJS.CallSite[], kind: Kind): boolean {
  let direct = true;
  for (const site of sites) {
    if (site.isAsync()) return false;
    const file = siteFile(site);
    if (file === null) continue;
    if (isOwn(file)) continue;
    if (file.startsWith('node:')) {
      if (!API_FILES.test(file)) direct = false;
      continue;
    }
    if (isUserFile(file)) return !kind.direct || direct;
    direct = false;
  }
  return false;
}

/** A function of the user's code, by its file and where it begins (`file:line:column` of its first character). */
function functionOf(site: NodeJS.CallSite): string | null {
  const file = siteFile(site);
  if (file === null || !isUserFile(file)) return null;
  const s = site as NodeJS.CallSite & { getEnclosingLineNumber?: () => number | null; getEnclosingColumnNumber?: () => number | null };
  const line = s.getEnclosingLineNumber?.();
  const column = s.getEnclosingColumnNumber?.();
  return line == null || column == null ? null : `${file}:${line}:${column}`;
}

/**
 * For a promise made by a user's function itself (its own promise, an await's), with no call in between: that
 * function. Such a promise is in the chain that awaits the window's end when the function is on that chain.
 */
function madeByFunction(trace: Trace | null): string | null {
  for (const site of trace?.sites ?? []) {
    const file = siteFile(site);
    if (file !== null && isHookFrame(file)) continue;
    return functionOf(site);
  }
  return null;
}

/**
 * Where an entry was created, if it is the user's work: the first user frame among its synchronous callers (a pool's
 * promise made after an `await` is the pool's); for `direct` kinds, the frame that called Node's API itself.
 */
function attribute(entry: Entry): Attribution {
  if (entry.attribution !== undefined) return entry.attribution;
  let site: string | null = null;
  let direct = true;
  for (const { line, async } of entry.trace === null ? [] : framesOf(entry.trace)) {
    if (async) break;
    const f = frameFile(line);
    if (!f) continue;
    if (isOwn(f.file)) continue;
    if (f.file.startsWith('node:')) {
      if (!API_FILES.test(f.file)) direct = false;
      continue;
    }
    if (isUserFile(f.file)) {
      site = f.at;
      break;
    }
    // A package's frame before the user's: an ORM's promise (counts), a driver's timer (does not).
    direct = false;
  }
  const user = site !== null && (!entry.kind.direct || direct);
  return (entry.attribution = { user, site: user ? site : null, what: words(entry) });
}

function words(entry: Entry): string {
  if (entry.kind.type === 'Timeout' && entry.timer !== null) {
    const t = entry.timer.handle as { _idleTimeout?: number; _repeat?: number | null } | null;
    const ms = entry.timer.delay ?? t?._idleTimeout;
    return entry.timer.repeats || t?._repeat ? `a setInterval(…, ${ms}) timer` : `a setTimeout(…, ${ms === 1 ? '0-1' : ms}) timer`;
  }
  return entry.kind.what;
}

/** The callback-scheduling APIs a measured function's window wraps, by name: what they make, and whether it repeats. */
const SCHEDULING: Record<string, { type: string; repeats: boolean } | 'clear'> = {
  setTimeout: { type: 'Timeout', repeats: false },
  setInterval: { type: 'Timeout', repeats: true },
  setImmediate: { type: 'Immediate', repeats: false },
  queueMicrotask: { type: 'Microtask', repeats: false },
  nextTick: { type: 'TickObject', repeats: false },
  clearTimeout: 'clear',
  clearInterval: 'clear',
  clearImmediate: 'clear',
};

/** Where the code under a window reaches those APIs: the globals of the context this module runs in, `process`, `node:timers`. */
function schedulingHolders(): [Record<string, unknown>, string[]][] {
  const both = ['setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'clearImmediate'];
  return [
    [globalThis as unknown as Record<string, unknown>, [...both, 'queueMicrotask']],
    [process as unknown as Record<string, unknown>, ['nextTick']],
    [timers as unknown as Record<string, unknown>, both],
  ];
}

/** A wrapper's original, under a key every copy of this module shares (Jest loads one per test file). */
const ORIGINAL = Symbol.for('sqltally.deferred-work.original');
/** The window's own wait: Node's timer as loaded, not what the code under the window may have put in its place (fake timers). */
const sleep = (((timers.setTimeout as unknown as Record<symbol, unknown>)[ORIGINAL] ?? timers.setTimeout) as typeof setTimeout).bind(timers);
/** The largest delay Node keeps as given (`TIMEOUT_MAX`); any other is 1 ms. */
const TIMEOUT_MAX = 2 ** 31 - 1;

/** The delay Node gives a timer for what was passed (lib/internal/timers.js). */
function timerDelay(ms: unknown): number {
  const after = toNumber(ms);
  return after >= 1 && after <= TIMEOUT_MAX ? after : 1;
}

/** Trackers of measured functions with a window open: the wrapped APIs ask each whether the calling code is followed. */
const FOLLOWING: DeferredWorkTracker[] = [];
/** The wrappers in place, to put the originals back when the last window closes. */
let wrapped: { holder: Record<string, unknown>; key: string; original: unknown; wrapper: unknown }[] = [];

/** Native requests by the name `process.getActiveResourcesInfo()` gives them, as KINDS knows them. */
const REQUESTS: Record<string, string> = {
  FSReqCallback: 'FSREQCALLBACK',
  GetAddrInfoReqWrap: 'GETADDRINFOREQWRAP',
  QueryReqWrap: 'QUERYWRAP',
  TCPConnectWrap: 'TCPCONNECTWRAP',
  PipeConnectWrap: 'PIPECONNECTWRAP',
  WriteWrap: 'WRITEWRAP',
  ShutdownWrap: 'SHUTDOWNWRAP',
};

/** The native requests in flight now, by name. */
function requestsInFlight(): Map<string, number> {
  const out = new Map<string, number>();
  for (const name of process.getActiveResourcesInfo()) if (REQUESTS[name] !== undefined) out.set(name, (out.get(name) ?? 0) + 1);
  return out;
}

/** Timers and immediates pending now, by anyone: `process.getActiveResourcesInfo()` names each one. */
function scheduledNow(): number {
  let n = 0;
  for (const name of process.getActiveResourcesInfo()) if (name === 'Timeout' || name === 'Immediate') n++;
  return n;
}

/** How many more of each are in flight now than at `atOpen`: started since, by whatever code. */
function requestsStarted(atOpen: Map<string, number>): { name: string; count: number }[] {
  const out: { name: string; count: number }[] = [];
  for (const [name, n] of requestsInFlight()) if (n > (atOpen.get(name) ?? 0)) out.push({ name, count: n - (atOpen.get(name) ?? 0) });
  return out;
}

/** Of the `started` requests of one name, how many may still be in flight: the excess over `atOpen` now, at most those. */
function stillOf(s: { name: string; count: number }, now: Map<string, number>, atOpen: Map<string, number>): number {
  return Math.min(s.count, Math.max(0, (now.get(s.name) ?? 0) - (atOpen.get(s.name) ?? 0)));
}

/** Of the requests started (see `requestsStarted`), how many may still be in flight. */
function stillInFlight(started: { name: string; count: number }[], atOpen: Map<string, number>): number {
  const now = requestsInFlight();
  let n = 0;
  for (const s of started) n += stillOf(s, now, atOpen);
  return n;
}

/** The requests in flight at the function's return as items: no line (nothing followed their making), settled or not. */
function requestItems(started: { name: string; count: number }[], atOpen: Map<string, number>): DeferredWorkItem[] {
  const now = requestsInFlight();
  const out: DeferredWorkItem[] = [];
  for (const s of started) {
    const type = REQUESTS[s.name]!;
    const what = KIND_OF.get(type)!.what;
    const still = stillOf(s, now, atOpen);
    for (let i = 0; i < s.count; i++) out.push({ what, type, site: null, settled: i >= still });
  }
  return out;
}

/** A callback run that is not a promise's reaction, which V8's hooks do not report: one shared stand-in. */
const NOT_FOLLOWED_RUN: Trace = { turn: -1 };

/**
 * Tracks the asynchronous work a measured function starts, for the window only, following only what is created in
 * the function's own context (its synchronous part and the callbacks of what it started, transitively). A stack is
 * captured for those alone, and formatted only for what is still pending when asked.
 *
 * A measured function's window installs V8's promise hooks and wraps the timer, immediate, tick and microtask APIs;
 * it enables no async_hooks hook, which would make Node run its own promise hooks for every promise. A begin()
 * window, whose code runs in its caller's context, follows what the user's frames make with an async_hooks hook.
 */
export class DeferredWorkTracker {
  /** A begin() window's hook (see the class's comment). */
  readonly #hook: AsyncHook;
  readonly #onSettled: (promise: Promise<unknown>) => void;
  /** A measured function's hooks, installed per window. */
  readonly #promiseHooks: Parameters<typeof promiseHooks.createHook>[0];
  /** Stops the window's V8 hooks (the settle hook alone in a begin() window). */
  #stopHooks: (() => void) | null = null;
  /** A begin() window's resources that are not promises (a followed promise is known by its entry). */
  readonly #inside = new Set<number>();
  /**
   * Followed work that outlived the run that made it (most promises settle in it), in the order kept. Settled ones
   * stay until it is swept (`#sweepAt`): a settled promise never runs again, so a swept one need not be known.
   */
  readonly #kept: Entry[] = [];
  #sweepAt = SWEEP_MIN;
  /** A begin() window's kept entries by async id, which its hooks are given. */
  readonly #entries = new Map<number, Entry>();
  /** The window's timers and immediates by handle, so clearing one (a fake timer too) forgets it. */
  readonly #timers = new Map<object, Entry>();
  /** How many windows this tracker has opened: an entry of an earlier one is not this window's. */
  #window = 0;
  /** Entries that settled after the function returned: work it had left running, attributed when asked. */
  readonly #late: Entry[] = [];
  /** The promise the function returned, whose settling is its return. */
  #returnedEntry: Entry | null = null;
  #returned = false;
  #enabled = false;
  #seq = 0;
  /** Callbacks run since the window opened; the one the function returned in is `#returnTurn`. */
  #turn = 0;
  /** The promise created last, and its trace: one chained from it in the same callback run shares that trace. */
  #lastPromiseId = -1;
  #lastPromiseTrace: Trace | null = null;
  #returnTurn = -1;
  /**
   * A begin() window: no function to run in a context of its own, so a resource created anywhere is followed when a
   * frame of the user's code made it (see `isUserSites`), and what that starts, transitively.
   */
  #ambient = false;
  /** The window's end was asked for: nothing new is followed but what the work already followed starts. */
  #closing = false;
  /** The end's own synchronous code runs: what it creates, and what is chained from that, awaits the end. */
  #ending = false;
  readonly #excluded = new Set<number>();
  /** The user's functions on the stack that asked for the end: their own promises wait for it, they are not work. */
  readonly #chain = new Set<string>();

  /**
   * Native requests (file, DNS, connect, socket write) in flight, by kind, when a measured function's window opened,
   * and those more in flight when the function returned: V8's hooks do not see them, so they are counted, not followed.
   */
  #requestsAtOpen: Map<string, number> | null = null;
  #requestsAtReturn: { name: string; count: number }[] = [];
  /** Timers and immediates pending at the return but the followed ones, when requests were in flight then (see `settle`). */
  #scheduledAtReturn = 0;

  /** Whether the code running now is the measured function's: its synchronous part, or a callback of its work. */
  #following = false;
  /** The promise whose reaction runs now (null: none, or not a promise's run). */
  #current: object | null = null;
  /**
   * Promises of the running callback run not yet given a stack: most settle in it (an awaited call); one still
   * pending at the run's next hook event takes that event's stack, while the frames that made it are on it.
   */
  readonly #uncaptured: Entry[] = [];
  /** How many of `#uncaptured` are this run's (the array is reused, not emptied). */
  #uncapturedCount = 0;
  /** Promises the last run left pending, kept only if still pending when the next run ends: an await's settles in it. */
  readonly #carried: Entry[] = [];
  #carriedCount = 0;
  /**
   * Per callback run, innermost last: the trace of the promise whose reaction runs (null: not a promise's run). A
   * promise whose run made no hook event after it takes that trace: the `.then` that registered the callback.
   */
  readonly #runs: (Trace | null)[] = [];
  /** What `#following` and `#current` were outside each open run (these arrays are reused, not popped). */
  readonly #outerFollowing: boolean[] = [];
  readonly #outerCurrent: (object | null)[] = [];
  /** How many of `#runs` are open. */
  #depth = 0;

  /** Called, synchronously and once, at the moment the function returned: read counters there, create nothing. */
  onReturn: (() => void) | null = null;

  #markReturned(): void {
    if (this.#returned) return;
    this.#returned = true;
    this.#returnTurn = this.#turn;
    if (this.#requestsAtOpen !== null) this.#requestsAtReturn = requestsStarted(this.#requestsAtOpen);
    if (this.#requestsAtReturn.length > 0) this.#scheduledAtReturn = scheduledNow() - this.#followedScheduled();
    this.onReturn?.();
  }

  constructor() {
    // The hook callbacks are plain functions that async_hooks and V8 call with their own `this`.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    const inside = this.#inside;
    const entries = this.#entries;
    this.#hook = createHook({
      init(asyncId, type, trigger, resource) {
        if (self.#ending || (self.#excluded.size > 0 && self.#excluded.has(trigger))) {
          self.#excluded.add(asyncId);
          return;
        }
        const promise = type === 'PROMISE';
        const kind = promise ? PROMISE_KIND : KIND_OF.get(type);
        let trace: Trace | undefined;
        const running = executionAsyncId();
        if (!entries.has(running) && !inside.has(running)) {
          if (self.#closing || kind === undefined) return;
          trace = captureSites(self.#turn);
          if (trace.sites === undefined || !isUserSites(trace.sites, kind)) return;
        }
        if (!promise) inside.add(asyncId);
        if (kind === undefined) return;
        if (promise) {
          // A promise chained from another (then, await) says something waits for that one.
          let parent = entries.get(trigger);
          if (parent !== undefined && parent.settled) parent = undefined;
          if (parent !== undefined) parent.observed = true;
          // Chained in the same synchronous run as the promise it waits on: made by the same lines, so it shares
          // that stack's call sites, sparing a capture (see `madeByFunction`).
          const source = parent?.trace ?? (trigger === self.#lastPromiseId ? self.#lastPromiseTrace : null);
          if (source && source.turn === self.#turn && source.sites !== undefined) trace ??= source;
        }
        trace ??= captureSites(self.#turn);
        if (promise) {
          self.#lastPromiseId = asyncId;
          self.#lastPromiseTrace = trace;
        }
        const timer = type === 'Timeout' || type === 'Immediate';
        const entry = self.#entry(asyncId, kind, trace, timer ? { handle: resource, delay: null, repeats: false } : null);
        if (promise) (resource as Record<symbol, Entry>)[FOLLOWED] = entry;
        self.#keep(entry);
      },
      before() {
        self.#turn++;
      },
      after(asyncId) {
        const e = entries.get(asyncId);
        if (e === undefined || e.settled || e.kind.settles === 'resolve') return;
        if (e.kind.type === 'Timeout' && (e.timer?.handle as { _repeat?: unknown } | null | undefined)?._repeat) return;
        self.#settled(e);
      },
    });
    // V8's own settle hook: async_hooks' promiseResolve goes through Node's dispatch for every promise, several times dearer.
    const onSettled = (promise: Promise<unknown>): void => {
      const e = (promise as unknown as Record<symbol, Entry | undefined>)[FOLLOWED];
      const ours = e !== undefined && e.window === self.#window;
      if (ours && !e.settled) self.#settled(e);
      // A reaction's own promise resolves as its job ends, when the frames that ran it are gone (and it is followed).
      if (self.#uncapturedCount > 0 && promise !== self.#current) self.#captureUncaptured();
      if (ours && e === self.#returnedEntry) self.#markReturned();
    };
    this.#onSettled = onSettled;
    this.#promiseHooks = {
      init(promise: Promise<unknown>, parent: Promise<unknown> | undefined) {
        if (self.#uncapturedCount > 0) self.#captureUncaptured();
        // Not made by the function's code: a promise the window's own machinery or other code makes meanwhile.
        if (self.#following) self.#followPromise(promise, parent);
      },
      before(promise: Promise<unknown>) {
        const e = (promise as unknown as Record<symbol, Entry | undefined>)[FOLLOWED];
        const ours = e !== undefined && e.window === self.#window;
        self.#enter(ours ? (e.settled ? null : e.trace) : NOT_FOLLOWED_RUN, ours, promise);
      },
      after() {
        self.#leave();
      },
      settled: onSettled,
    };
  }

  /** A new entry of this window. */
  #entry(id: number, kind: Kind, trace: Trace | null, timer: Timer | null): Entry {
    return {
      id,
      window: this.#window,
      kind,
      trace,
      timer,
      attribution: undefined,
      settled: false,
      seq: this.#seq++,
      observed: false,
    };
  }

  /** Settled in the very run the function returned in (the throwaway promise of its last `await`) is not late. */
  #settled(e: Entry): void {
    e.settled = true;
    if (this.#returned && this.#turn !== this.#returnTurn) this.#late.push(e);
  }

  /** A promise the function's code made (V8's init hook, while `#following`). */
  #followPromise(promise: Promise<unknown>, parent: Promise<unknown> | undefined): void {
    // A promise chained from another (then, await) says something waits for that one; with no parent, Node's hooks
    // take the promise whose reaction runs for it, and so does this.
    let pe = ((parent ?? this.#current) as Record<symbol, Entry | undefined> | null)?.[FOLLOWED];
    if (pe !== undefined && (pe.settled || pe.window !== this.#window)) pe = undefined;
    if (pe !== undefined) pe.observed = true;
    // Chained in the same synchronous run as the promise it waits on: made by the same lines, so it shares that stack.
    const shared = pe !== undefined && pe.trace !== null && pe.trace.turn === this.#turn ? pe.trace : null;
    // A library's own promise type (a postgres.js query) may start nothing until a later run: its stack now.
    const run = this.#depth > 0 ? this.#runs[this.#depth - 1] : null;
    const deferred = run !== null && run !== undefined && !this.#returned && promise.constructor === PromiseClass;
    const entry = this.#entry(this.#seq, PROMISE_KIND, shared ?? (deferred ? null : capture(this.#turn)), null);
    (promise as unknown as Record<symbol, Entry>)[FOLLOWED] = entry;
    // Most of these settle before the run's next hook event, and are then never kept (see #captureUncaptured and #leave).
    if (deferred) this.#uncaptured[this.#uncapturedCount++] = entry;
    else this.#keep(entry);
  }

  /** A callback run begins: of a promise's reaction (`promise`), of the function's synchronous part or of a timer's (`null`). */
  #enter(run: Trace | null, following: boolean, promise: object | null): void {
    if (this.#uncapturedCount > 0) this.#captureUncaptured();
    this.#turn++;
    const d = this.#depth++;
    this.#runs[d] = run;
    this.#outerFollowing[d] = this.#following;
    this.#outerCurrent[d] = this.#current;
    this.#following = following;
    this.#current = promise;
  }

  /** The innermost callback run ends. */
  #leave(): void {
    if (this.#depth === 0) return;
    const d = --this.#depth;
    const run = this.#runs[d];
    if (this.#carriedCount > 0) this.#keepCarried();
    const n = this.#uncapturedCount;
    if (n > 0) {
      // The run's own trace stands for them: the `.then` that registered its callback.
      const uncaptured = this.#uncaptured;
      const carried = this.#carried;
      for (let i = 0; i < n; i++) {
        const e = uncaptured[i]!;
        if (e.settled) continue;
        e.trace ??= run ?? null;
        carried[this.#carriedCount++] = e;
      }
      this.#uncapturedCount = 0;
    }
    this.#following = this.#outerFollowing[d]!;
    this.#current = this.#outerCurrent[d]!;
  }

  /** A timer, immediate, tick or microtask the function's code scheduled (see `#schedulingWrapper`). */
  #scheduled(type: string): Entry {
    if (this.#uncapturedCount > 0) this.#captureUncaptured();
    const entry = this.#entry(this.#seq, KIND_OF.get(type)!, capture(this.#turn), null);
    this.#keep(entry);
    return entry;
  }

  /** Its callback runs, in the function's context, if its window is still open. */
  #enterScheduled(e: Entry): boolean {
    if (!this.#enabled || e.window !== this.#window) return false;
    this.#enter(null, true, null);
    return true;
  }

  #cleared(handle: object): void {
    const e = this.#timers.get(handle);
    // Never run: forgotten, as a cleared real timer is (see `#pending`).
    if (e !== undefined && e.window === this.#window) e.settled = true;
  }

  /**
   * The wrapper of a scheduling API (`key`, see SCHEDULING) around `original`: while a measured function's code runs,
   * what it schedules is followed, and its callback runs in the function's context; otherwise it is the original.
   */
  static #schedulingWrapper(key: string, original: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
    const how = SCHEDULING[key]!;
    let wrapper: (...args: unknown[]) => unknown;
    if (how === 'clear') {
      wrapper = function (this: unknown, handle: unknown) {
        if (FOLLOWING.length > 0 && typeof handle === 'object' && handle !== null) for (const t of FOLLOWING) t.#cleared(handle);
        // eslint-disable-next-line prefer-rest-params
        return reflectApply(original, this, arguments);
      };
    } else {
      const { type, repeats } = how;
      wrapper = function (this: unknown, callback: unknown) {
        // eslint-disable-next-line prefer-rest-params
        const args = arguments;
        if (FOLLOWING.length === 0 || typeof callback !== 'function') return reflectApply(original, this, args);
        let followers: DeferredWorkTracker[] | null = null;
        for (const t of FOLLOWING) if (t.#following) (followers ??= []).push(t);
        if (followers === null) return reflectApply(original, this, args);
        const entries = followers.map((t) => t.#scheduled(type));
        const calls = arraySlice.call(args) as unknown[];
        calls[0] = function (this: unknown) {
          const ran = followers.map((t, i) => t.#enterScheduled(entries[i]!));
          try {
            // eslint-disable-next-line prefer-rest-params
            return reflectApply(callback as (...a: unknown[]) => unknown, this, arguments);
          } finally {
            for (let i = followers.length - 1; i >= 0; i--) {
              if (!ran[i]) continue;
              followers[i]!.#leave();
              if (!repeats && !entries[i]!.settled) followers[i]!.#settled(entries[i]!);
            }
          }
        };
        const handle = reflectApply(original, this, calls);
        for (let i = 0; i < followers.length; i++) {
          const e = entries[i]!;
          if (type !== 'Timeout' && type !== 'Immediate') continue;
          const object = typeof handle === 'object' && handle !== null ? handle : null;
          e.timer = { handle: object, delay: type === 'Timeout' ? timerDelay(calls[1]) : null, repeats };
          if (object !== null) followers[i]!.#timers.set(object, e);
        }
        return handle;
      };
    }
    const custom = (original as unknown as Record<symbol, unknown>)[promisify.custom];
    if (custom !== undefined) Object.defineProperty(wrapper, promisify.custom, { value: custom });
    Object.defineProperty(wrapper, 'name', { value: original.name });
    Object.defineProperty(wrapper, ORIGINAL, { value: original });
    return wrapper;
  }

  /** Wraps the scheduling APIs for the first measured function's window that opens. */
  static #wrapScheduling(): void {
    for (const [holder, keys] of schedulingHolders()) {
      for (const key of keys) {
        const current = holder[key];
        if (typeof current !== 'function') continue;
        // A wrapper left in place (a fake-timer library put it back after the window) is replaced, not wrapped.
        const original = ((current as unknown as Record<symbol, unknown>)[ORIGINAL] ?? current) as (...args: unknown[]) => unknown;
        const wrapper = DeferredWorkTracker.#schedulingWrapper(key, original);
        try {
          holder[key] = wrapper;
        } catch {
          continue;
        }
        if (holder[key] === wrapper) wrapped.push({ holder, key, original, wrapper });
      }
    }
    // An ES module's `import { setTimeout } from 'node:timers'` is a binding Node updates only when asked.
    syncBuiltinESMExports();
  }

  /** Puts the originals back when the last window closes, where nobody replaced the wrapper since (fake timers). */
  static #unwrapScheduling(): void {
    for (const w of wrapped) if (w.holder[w.key] === w.wrapper) w.holder[w.key] = w.original;
    wrapped = [];
    syncBuiltinESMExports();
  }

  /** Keeps what the last run left pending and is pending still (see `#carried`). */
  #keepCarried(): void {
    const carried = this.#carried;
    for (let i = 0; i < this.#carriedCount; i++) {
      const e = carried[i]!;
      if (!e.settled) this.#keep(e);
    }
    this.#carriedCount = 0;
  }

  /** Keeps an entry, after a sweep if one is due. */
  #keep(e: Entry): void {
    if (this.#kept.length >= this.#sweepAt) this.#sweep();
    this.#kept.push(e);
    if (this.#ambient) this.#entries.set(e.id, e);
  }

  /** Forgets settled entries (see `#kept`), and sweeps again when what is kept has doubled from what is left. */
  #sweep(): void {
    const kept = this.#kept;
    let n = 0;
    for (let i = 0; i < kept.length; i++) {
      const e = kept[i]!;
      if (!e.settled) kept[n++] = e;
      else if (this.#ambient) this.#entries.delete(e.id);
    }
    // Shortened, not reused: the settled entries are then garbage while young.
    kept.length = n;
    this.#sweepAt = mathMax(SWEEP_MIN, 2 * n);
  }

  /** One capture, here, for the uncaptured promises of this run still pending, which are then kept. */
  #captureUncaptured(): void {
    let here: Trace | undefined;
    for (let i = 0; i < this.#uncapturedCount; i++) {
      const e = this.#uncaptured[i]!;
      if (e.settled) continue;
      this.#keep(e);
      if (e.trace !== null) continue;
      e.trace = here ??= capture(this.#turn);
    }
    this.#uncapturedCount = 0;
  }

  /**
   * Starts tracking; `run` then runs the measured function, whose code is followed. `ambient`: a begin() window,
   * whose code runs in the caller's context (a test body): the user's work is told by the frames that made it, and
   * `ending()` marks where it ends.
   */
  open(ambient = false): void {
    this.#ambient = ambient;
    this.#closing = false;
    this.#ending = false;
    this.#excluded.clear();
    this.#chain.clear();
    this.#inside.clear();
    this.#entries.clear();
    this.#kept.length = 0;
    this.#timers.clear();
    this.#late.length = 0;
    this.#returned = false;
    this.#returnedEntry = null;
    this.#returnTurn = -1;
    this.#requestsAtOpen = null;
    this.#requestsAtReturn = [];
    this.#lastPromiseId = -1;
    this.#lastPromiseTrace = null;
    this.#following = false;
    this.#current = null;
    this.#uncaptured.length = 0;
    this.#uncapturedCount = 0;
    this.#carried.length = 0;
    this.#carriedCount = 0;
    this.#runs.length = 0;
    this.#outerFollowing.length = 0;
    this.#outerCurrent.length = 0;
    this.#depth = 0;
    this.#sweepAt = SWEEP_MIN;
    this.#window++;
    this.#enabled = true;
    if (ambient) {
      this.#hook.enable();
      this.#stopHooks = promiseHooks.onSettled(this.#onSettled) as () => void;
      return;
    }
    this.#requestsAtOpen = requestsInFlight();
    this.#stopHooks = promiseHooks.createHook(this.#promiseHooks) as () => void;
    if (FOLLOWING.push(this) === 1) DeferredWorkTracker.#wrapScheduling();
  }

  /**
   * Calls `fn` as the window's function: what its code starts, and what that starts, is followed. The function has
   * returned when its promise settles (or at once, for a value): work it queued that runs after that is late even if
   * it finishes before anyone awaiting the function resumes (a queueMicrotask callback does).
   */
  run<T>(fn: () => T): T {
    if (!this.#enabled || this.#ambient) return fn();
    this.#enter(null, true, null);
    let result: T;
    try {
      result = fn();
    } finally {
      this.#leave();
    }
    const returned = typeof result === 'object' && result !== null ? (result as Record<symbol, Entry | undefined>)[FOLLOWED] : undefined;
    if (returned !== undefined && returned.window === this.#window) {
      this.#returnedEntry = returned;
      // Settled already (an async function that returned without awaiting): its settle hook has run.
      if (returned.settled) this.#markReturned();
    } else if (!(result instanceof Promise)) {
      this.#markReturned();
    }
    return result;
  }

  /**
   * A begin() window's end is asked for, synchronously, by the code that called it: that is the function's return.
   * `during` runs the end's own synchronous part (it creates the promise the caller will await); what it creates,
   * and whatever is chained from that, waits for the end and is not work. So are the own promises of the user's
   * functions on the stack now (sync or awaiting): a test body that reads its tally waits for it.
   */
  ending<T>(during: () => T): T {
    if (!this.#enabled || !this.#ambient) return during();
    this.#closing = true;
    const trace = captureSites(this.#turn);
    for (const site of trace.sites ?? []) {
      const fn = functionOf(site);
      if (fn !== null) this.#chain.add(fn);
    }
    this.#markReturned();
    this.#ending = true;
    try {
      return during();
    } finally {
      this.#ending = false;
    }
  }

  /** Waits for the end (see `ending`): not the user's work. */
  #awaitsEnd(e: Entry): boolean {
    if (this.#chain.size === 0 || e.kind !== PROMISE_KIND) return false;
    const fn = madeByFunction(e.trace);
    return fn !== null && this.#chain.has(fn);
  }

  /** Followed timers and immediates still pending (`getActiveResourcesInfo()` lists them among everyone's). */
  #followedScheduled(): number {
    let n = 0;
    for (const e of this.#pending()) if (e.kind.type === 'Timeout' || e.kind.type === 'Immediate') n++;
    return n;
  }

  /** The user's work pending now. */
  #pending(): Entry[] {
    this.#keepCarried();
    const out: Entry[] = [];
    for (const e of this.#kept) {
      if (e.settled) continue;
      // No destroy hook (it makes Node track every promise's collection): a cleared timer says so itself, and is forgotten.
      if ((e.timer?.handle as { _destroyed?: boolean } | null | undefined)?._destroyed === true) {
        e.settled = true;
        continue;
      }
      if (!isWork(e) || this.#awaitsEnd(e)) continue;
      if (attribute(e).user) out.push(e);
    }
    return out;
  }

  /**
   * The user's promises still pending, and those that settled after the function returned, whether or not anything
   * waits on them: the likely culprits when a counted call was running as the function returned and no other work
   * explains it (a postgres.js query started with execute(), which may have finished by the time this is asked).
   */
  unawaitedPromises(): DeferredWorkItem[] {
    this.#keepCarried();
    const out: Entry[] = [];
    // Settled entries still in the map are either late (listed once, from #late) or settled before the return.
    for (const e of [...this.#late, ...this.#kept.filter((x) => !x.settled)]) {
      if (e.kind !== PROMISE_KIND || this.#awaitsEnd(e)) continue;
      if (attribute(e).user) out.push(e);
    }
    return out.sort((a, b) => a.seq - b.seq).map(itemOf);
  }

  /**
   * Waits up to `waitMs` for the user's pending work, and for what it starts, to settle; lists it with what settled
   * after the function returned. Null when the function left nothing behind.
   */
  async settle(waitMs: number): Promise<DeferredWork | null> {
    if (!this.#enabled) return null;
    // The function's promise was not a native one (a thenable): it has returned by the time it is awaited.
    this.#markReturned();
    const late = (): Entry[] => this.#late.filter((e) => isWork(e) && !this.#awaitsEnd(e) && attribute(e).user);
    const started = this.#requestsAtReturn;
    const atOpen = this.#requestsAtOpen;
    const requestsLeft = (): number => (started.length === 0 || atOpen === null ? 0 : stillInFlight(started, atOpen));
    if (this.#pending().length === 0 && late().length === 0 && started.length === 0) return null;
    // Counted in sleeps of Node's own timer, not by the clock: fake timers may stop the clock too.
    for (let waited = 0; (this.#pending().length > 0 || requestsLeft() > 0) && waited < waitMs; waited += POLL_MS) await new Promise((r) => sleep(r, POLL_MS));
    const items = [...late(), ...this.#pending()].sort((a, b) => a.seq - b.seq).map(itemOf);
    if (started.length > 0 && atOpen !== null) {
      items.push(...requestItems(started, atOpen));
      // A request's callback runs unfollowed: a timer it starts would start work after the window. More timers
      // pending now than at the return, by anyone, may be that; it cannot be told, so it is not taken as done.
      const more = scheduledNow() - this.#followedScheduled() - this.#scheduledAtReturn;
      if (more > 0) {
        items.push({
          what: `${more} timer(s) or immediate(s) made after the function returned, while requests it left in flight ran callbacks the window cannot follow`,
          type: 'Timeout',
          site: null,
          settled: false,
        });
      }
    }
    return items.length > 0 ? { waitMs, items } : null;
  }

  /** Whether the hook is on (between `open` and `close`). */
  get following(): boolean {
    return this.#enabled;
  }

  /** Stops tracking: removes the hooks, puts back the scheduling APIs after the last window, forgets the window's work. */
  close(): void {
    if (!this.#enabled) return;
    if (this.#ambient) this.#hook.disable();
    this.#stopHooks?.();
    this.#stopHooks = null;
    const at = FOLLOWING.indexOf(this);
    if (at >= 0) {
      FOLLOWING.splice(at, 1);
      if (FOLLOWING.length === 0) DeferredWorkTracker.#unwrapScheduling();
    }
    this.#enabled = false;
    this.onReturn = null;
    this.#inside.clear();
    this.#entries.clear();
    this.#kept.length = 0;
    this.#timers.clear();
    this.#late.length = 0;
    this.#returnedEntry = null;
    this.#requestsAtOpen = null;
    this.#requestsAtReturn = [];
    this.#scheduledAtReturn = 0;
    this.#lastPromiseTrace = null;
    this.#following = false;
    this.#current = null;
    this.#uncaptured.length = 0;
    this.#uncapturedCount = 0;
    this.#carried.length = 0;
    this.#carriedCount = 0;
    this.#runs.length = 0;
    this.#outerFollowing.length = 0;
    this.#outerCurrent.length = 0;
    this.#depth = 0;
    this.#sweepAt = SWEEP_MIN;
    this.#excluded.clear();
    this.#chain.clear();
    this.#ambient = false;
    this.#closing = false;
  }
}
