import { AsyncResource, createHook, executionAsyncId, executionAsyncResource, type AsyncHook } from 'node:async_hooks';
import { types } from 'node:util';
import { promiseHooks } from 'node:v8';
import { AssertionError } from 'node:assert';
import { isAbsolute, relative, sep } from 'node:path';
import { isLibraryFile } from '../shared/caller';
import { mathMax, PromiseClass } from '../shared/intrinsics';
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
}

/** The resource types that are work in progress; long-lived handles (sockets, servers) are not: a pool keeps them. */
const KINDS: Record<string, Kind> = {
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

const PROMISE_KIND = KINDS['PROMISE']!;
/** Looked up once per resource made in a window: a Map stays fast where an object's keyed load turns megamorphic. */
const KIND_OF = new Map(Object.entries(KINDS));

/** A followed promise's entry, on the promise itself: V8's settle hook hands over the promise only. */
const FOLLOWED = Symbol('sqltally.followed');

/** Node's files that lie between a timer/tick API and its caller (`setTimeout` -> `new Timeout` -> the hook). */
const API_FILES = /^node:(?:internal\/async_hooks|internal\/timers|timers|timers\/promises|internal\/process\/task_queues|async_hooks)(?::|$)/;

/** V8's captured frames, formatted (the costly part) only if an entry holding it is still pending when asked. */
interface Trace {
  stack?: string;
  /** Whether `stack` holds a capture (reading `stack` would format it). */
  captured?: boolean;
  /** The capture that stands for this one: taken later in the same run, before the frames that made it returned. */
  holder?: Trace;
  /** V8's call sites, when they were read at creation (a begin() window decides there whether it is the user's). */
  sites?: NodeJS.CallSite[];
  /** The callback run (see `#turn`) it was captured in. */
  turn: number;
  /** Its frames once formatted: one trace can be shared by several promises. */
  frames?: { line: string; async: boolean }[];
}

interface Entry {
  /** Its async id, and the window (`open` count) that followed it: a promise keeps its entry past its window. */
  id: number;
  window: number;
  kind: Kind;
  type: string;
  trace: Trace;
  resource: object | null;
  /** Undefined until formatted; null: not the user's work. */
  site: string | null | undefined;
  user: boolean | undefined;
  /** In words, read when first attributed (a timer's delay is gone once it fired). */
  what: string | undefined;
  settled: boolean;
  /** Creation order, so a reason lists work in the order it was started. */
  seq: number;
  /**
   * A promise something waits on (a `then` or an `await` chained from it, in the window). One nobody waits on is a
   * handle, not work: a driver's promise that lives as long as its connection, a postgres.js query read as a cursor.
   */
  observed: boolean;
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
  return e.type !== 'PROMISE' || e.observed === true;
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
  if (trace.holder) return (trace.frames ??= framesOf(trace.holder));
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
function madeByFunction(trace: Trace): string | null {
  for (const site of trace.sites ?? []) {
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
function attribute(entry: Entry): void {
  if (entry.user !== undefined) return;
  let site: string | null = null;
  let direct = true;
  for (const { line, async } of framesOf(entry.trace)) {
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
  entry.user = site !== null && (!entry.kind.direct || direct);
  entry.site = entry.user ? site : null;
  entry.what = words(entry);
}

function words(entry: Entry): string {
  if (entry.type === 'Timeout' && entry.resource) {
    const t = entry.resource as { _idleTimeout?: number; _repeat?: number | null };
    const ms = t._idleTimeout;
    return t._repeat ? `a setInterval(…, ${ms}) timer` : `a setTimeout(…, ${ms === 1 ? '0-1' : ms}) timer`;
  }
  return entry.kind.what;
}

/**
 * Tracks the asynchronous work a measured function starts, for the window only: the async_hooks hook is enabled when
 * the window opens and disabled when it closes, and only resources created in the function's own async context (a
 * fresh async resource the function runs in, and everything created from it, transitively) are followed. A stack is
 * captured for those alone, and formatted only for what is still pending when asked.
 */
export class DeferredWorkTracker {
  readonly #hook: AsyncHook;
  readonly #onSettled: (promise: Promise<unknown>) => void;
  /** Stops V8's settle hook (installed per window, like the async hook). */
  #stopSettled: (() => void) | null = null;
  /** The window's resources that are not promises (a followed promise is known by its entry). */
  readonly #inside = new Set<number>();
  /**
   * Followed resources by async id. Settled ones stay until the map is swept (`#sweepAt`): deleting each as it settles
   * made the map rehash every few calls. A settled promise's id never runs again, so a swept one need not be known.
   */
  readonly #entries = new Map<number, Entry>();
  #sweepAt = SWEEP_MIN;
  /** How many windows this tracker has opened: an entry of an earlier one is not this window's. */
  #window = 0;
  /** Entries that settled after the function returned: work it had left running, attributed when asked. */
  readonly #late: Entry[] = [];
  /** Promises created while the function's first synchronous part ran: one of them is the promise it returns. */
  readonly #calling: { resource: object; id: number }[] = [];
  #isCalling = false;
  #returnedId = -1;
  #returned = false;
  #root: AsyncResource | null = null;
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
   * Promises of the running callback run not yet given a stack: most settle in it (an awaited call); one still
   * pending at the run's next hook event takes that event's stack, while the frames that made it are on it.
   */
  readonly #uncaptured: Entry[] = [];
  /** How many of `#uncaptured` are this run's (the array is reused, not emptied). */
  #uncapturedCount = 0;
  /**
   * Per callback run, innermost last: the trace of the promise whose reaction runs (null: not a promise's run). A
   * promise whose run made no hook event after it takes that trace: the `.then` that registered the callback.
   */
  readonly #runs: (Trace | null | undefined)[] = [];
  /** How many of `#runs` are open (the array is reused, not popped). */
  #depth = 0;

  /** Called, synchronously and once, at the moment the function returned: read counters there, create nothing. */
  onReturn: (() => void) | null = null;

  #markReturned(): void {
    if (this.#returned) return;
    this.#returned = true;
    this.#returnTurn = this.#turn;
    this.onReturn?.();
  }

  constructor() {
    // The hook callbacks are plain functions that async_hooks calls with its own `this`.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    const inside = this.#inside;
    const entries = this.#entries;
    // Settled in the very job the function returned in (the throwaway promise of its last `await`) is not late.
    const settled = (e: Entry): void => {
      e.settled = true;
      if (self.#returned && self.#turn !== self.#returnTurn) self.#late.push(e);
    };
    const uncaptured = this.#uncaptured;
    const runs = this.#runs;
    this.#hook = createHook({
      init(asyncId, type, trigger, resource) {
        if (self.#uncapturedCount > 0) self.#captureUncaptured();
        if (self.#ending || (self.#excluded.size > 0 && self.#excluded.has(trigger))) {
          self.#excluded.add(asyncId);
          return;
        }
        const promise = type === 'PROMISE';
        const kind = promise ? PROMISE_KIND : KIND_OF.get(type);
        let trace: Trace | undefined;
        const running = executionAsyncId();
        if (!entries.has(running) && !inside.has(running)) {
          if (!self.#ambient || self.#closing || kind === undefined) return;
          trace = captureSites(self.#turn);
          if (trace.sites === undefined || !isUserSites(trace.sites, kind)) return;
        }
        if (!promise) inside.add(asyncId);
        if (kind === undefined) return;
        let deferred = false;
        if (promise) {
          // A promise chained from another (then, await) says something waits for that one.
          let parent = entries.get(trigger);
          if (parent !== undefined && parent.settled) parent = undefined;
          if (parent !== undefined) parent.observed = true;
          if (self.#isCalling) self.#calling.push({ resource, id: asyncId });
          // Chained in the same synchronous run as the promise it waits on: made by the same lines, so it shares that
          // stack, sparing a capture (a begin() window's call sites, see `madeByFunction`, likewise).
          const source = parent?.trace ?? (trigger === self.#lastPromiseId ? self.#lastPromiseTrace : null);
          if (source && source.turn === self.#turn && (source.sites !== undefined || !self.#ambient)) trace ??= source;
          // A library's own promise type (a postgres.js query) may start nothing until a later run: its stack now.
          const run = self.#depth > 0 ? runs[self.#depth - 1] : null;
          deferred =
            run !== null && run !== undefined && !self.#ambient && !self.#returned && (resource as { constructor?: unknown }).constructor === PromiseClass;
        }
        trace ??= self.#ambient ? captureSites(self.#turn) : deferred ? { turn: self.#turn } : capture(self.#turn);
        if (promise) {
          self.#lastPromiseId = asyncId;
          self.#lastPromiseTrace = trace;
        }
        const entry: Entry = {
          id: asyncId,
          window: self.#window,
          kind,
          type,
          trace,
          resource: type === 'Timeout' || type === 'Immediate' ? resource : null,
          site: undefined,
          user: undefined,
          what: undefined,
          settled: false,
          seq: self.#seq++,
          observed: false,
        };
        if (promise) (resource as Record<symbol, Entry>)[FOLLOWED] = entry;
        // Most of these settle before the run's next hook event, and are then never put in the map (see #captureUncaptured and after).
        if (deferred && trace.captured !== true && trace.holder === undefined) uncaptured[self.#uncapturedCount++] = entry;
        else self.#keep(entry);
      },
      before(asyncId) {
        if (self.#uncapturedCount > 0) self.#captureUncaptured();
        self.#turn++;
        // A followed entry says what ran; asking Node for the resource (a native call) is left for the others.
        const e = entries.get(asyncId);
        runs[self.#depth++] =
          e !== undefined && !e.settled ? (e.type === 'PROMISE' ? e.trace : null) : types.isPromise(executionAsyncResource()) ? { turn: -1 } : null;
      },
      after(asyncId) {
        const run = self.#depth > 0 ? runs[--self.#depth] : undefined;
        const n = self.#uncapturedCount;
        if (n > 0) {
          // The run's own trace stands for them; one that has a holder hands that on, so holders never chain.
          const holder = run ? (run.holder ?? run) : undefined;
          for (let i = 0; i < n; i++) {
            const e = uncaptured[i]!;
            if (e.settled) continue;
            if (e.trace.holder === undefined && holder) e.trace.holder = holder;
            self.#keep(e);
          }
          self.#uncapturedCount = 0;
        }
        const e = entries.get(asyncId);
        if (e === undefined || e.settled || e.kind.settles === 'resolve') return;
        if (e.type === 'Timeout' && (e.resource as { _repeat?: unknown } | null)?._repeat) return;
        settled(e);
      },
    });
    // V8's own settle hook: async_hooks' promiseResolve goes through Node's dispatch for every promise, several times dearer.
    const onSettled = (promise: Promise<unknown>): void => {
      const e = (promise as unknown as Record<symbol, Entry | undefined>)[FOLLOWED];
      const ours = e !== undefined && e.window === self.#window;
      if (ours && !e.settled) settled(e);
      // A reaction's own promise resolves as its job ends, when the frames that ran it are gone (and it is followed).
      if (self.#uncapturedCount > 0 && (e === undefined || e.id !== executionAsyncId())) self.#captureUncaptured();
      if (ours && e.id === self.#returnedId) self.#markReturned();
    };
    this.#onSettled = onSettled;
  }

  /** Puts an entry in the map, swept first if it is due. */
  #keep(e: Entry): void {
    if (this.#entries.size >= this.#sweepAt) this.#sweep();
    this.#entries.set(e.id, e);
  }

  /** Forgets settled entries (see `#entries`), and sweeps again when the map has doubled from what is left. */
  #sweep(): void {
    for (const [id, e] of this.#entries) if (e.settled) this.#entries.delete(id);
    this.#sweepAt = mathMax(SWEEP_MIN, 2 * this.#entries.size);
  }

  /** One capture, here, for the uncaptured promises of this run still pending, which the map then holds. */
  #captureUncaptured(): void {
    let here: Trace | undefined;
    for (let i = 0; i < this.#uncapturedCount; i++) {
      const e = this.#uncaptured[i]!;
      if (e.settled) continue;
      this.#keep(e);
      if (e.trace.holder !== undefined) continue;
      here ??= capture(this.#turn);
      e.trace.holder = here;
    }
    this.#uncapturedCount = 0;
  }

  /**
   * Starts tracking; `run` then runs the measured function in the window's own async context. `ambient`: a begin()
   * window, whose code runs in the caller's context (a test body): the user's work is told by the frames that made it,
   * and `ending()` marks where it ends.
   */
  open(ambient = false): void {
    this.#ambient = ambient;
    this.#closing = false;
    this.#ending = false;
    this.#excluded.clear();
    this.#chain.clear();
    this.#inside.clear();
    this.#entries.clear();
    this.#late.length = 0;
    this.#calling.length = 0;
    this.#returned = false;
    this.#returnedId = -1;
    this.#returnTurn = -1;
    this.#lastPromiseId = -1;
    this.#lastPromiseTrace = null;
    this.#uncaptured.length = 0;
    this.#uncapturedCount = 0;
    this.#runs.length = 0;
    this.#depth = 0;
    this.#sweepAt = SWEEP_MIN;
    this.#window++;
    this.#hook.enable();
    this.#stopSettled = promiseHooks.onSettled(this.#onSettled) as () => void;
    this.#enabled = true;
    if (ambient) return;
    this.#root = new AsyncResource('sqltally.window', { requireManualDestroy: true });
    this.#inside.add(this.#root.asyncId());
  }

  /**
   * Calls `fn` inside the window's async context: what it starts, and what that starts, is followed. The function
   * has returned when its promise settles (or at once, for a value): work it queued that runs after that is late
   * even if it finishes before anyone awaiting the function resumes (a queueMicrotask callback does).
   */
  run<T>(fn: () => T): T {
    const root = this.#root;
    if (!root) return fn();
    this.#isCalling = true;
    let result: T;
    try {
      result = root.runInAsyncScope(fn);
    } finally {
      this.#isCalling = false;
    }
    const returned = this.#calling.find((c) => c.resource === (result as unknown));
    this.#calling.length = 0;
    if (returned) {
      this.#returnedId = returned.id;
      // Settled already (an async function that returned without awaiting): its settle hook has run.
      if (this.#entries.get(returned.id)?.settled !== false) this.#markReturned();
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
    if (this.#chain.size === 0 || e.type !== 'PROMISE') return false;
    const fn = madeByFunction(e.trace);
    return fn !== null && this.#chain.has(fn);
  }

  /** The user's work pending now. */
  #pending(): Entry[] {
    const out: Entry[] = [];
    for (const [id, e] of this.#entries) {
      if (e.settled) continue;
      // No destroy hook (it makes Node track every promise's collection): a cleared timer says so itself.
      if ((e.resource as { _destroyed?: boolean } | null)?._destroyed === true) {
        this.#entries.delete(id);
        continue;
      }
      if (!isWork(e) || this.#awaitsEnd(e)) continue;
      attribute(e);
      if (e.user) out.push(e);
    }
    return out;
  }

  /**
   * The user's promises still pending, and those that settled after the function returned, whether or not anything
   * waits on them: the likely culprits when a counted call was running as the function returned and no other work
   * explains it (a postgres.js query started with execute(), which may have finished by the time this is asked).
   */
  unawaitedPromises(): DeferredWorkItem[] {
    const out: Entry[] = [];
    // Settled entries still in the map are either late (listed once, from #late) or settled before the return.
    for (const e of [...this.#late, ...[...this.#entries.values()].filter((x) => !x.settled)]) {
      if (e.type !== 'PROMISE' || this.#awaitsEnd(e)) continue;
      attribute(e);
      if (e.user) out.push(e);
    }
    return out.sort((a, b) => a.seq - b.seq).map((e) => ({ what: e.what ?? e.kind.what, type: e.type, site: e.site ?? null, settled: e.settled }));
  }

  /**
   * Waits up to `waitMs` for the user's pending work, and for what it starts, to settle; lists it with what settled
   * after the function returned. Null when the function left nothing behind.
   */
  async settle(waitMs: number): Promise<DeferredWork | null> {
    if (!this.#enabled) return null;
    // The function's promise was not a native one (a thenable): it has returned by the time it is awaited.
    this.#markReturned();
    const started = Date.now();
    const late = (): Entry[] => this.#late.filter((e) => isWork(e) && !this.#awaitsEnd(e) && (attribute(e), e.user));
    if (this.#pending().length === 0 && late().length === 0) return null;
    while (this.#pending().length > 0 && Date.now() - started < waitMs) await new Promise((r) => setTimeout(r, POLL_MS));
    const items = [...late(), ...this.#pending()].sort((a, b) => a.seq - b.seq);
    return { waitMs, items: items.map((e) => ({ what: e.what ?? e.kind.what, type: e.type, site: e.site ?? null, settled: e.settled })) };
  }

  /** Whether the hook is on (between `open` and `close`). */
  get following(): boolean {
    return this.#enabled;
  }

  /** Stops tracking: disables the hook and forgets the window's resources. */
  close(): void {
    if (!this.#enabled) return;
    this.#hook.disable();
    this.#stopSettled?.();
    this.#stopSettled = null;
    this.#enabled = false;
    this.onReturn = null;
    this.#root?.emitDestroy();
    this.#root = null;
    this.#inside.clear();
    this.#entries.clear();
    this.#late.length = 0;
    this.#lastPromiseTrace = null;
    this.#uncaptured.length = 0;
    this.#uncapturedCount = 0;
    this.#runs.length = 0;
    this.#depth = 0;
    this.#sweepAt = SWEEP_MIN;
    this.#excluded.clear();
    this.#chain.clear();
    this.#ambient = false;
    this.#closing = false;
  }
}
