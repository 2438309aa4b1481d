import fs from 'node:fs';

/**
 * Every server process and private directory this process created and has not yet cleaned up. If the process
 * ends (normally, by an uncaught error, or by Ctrl-C) with some still here, they are stopped synchronously so
 * nothing outlives us.
 */
export interface LiveResource {
  /** `mariadb (local, pid 1234)`, for messages. */
  label: string;
  /** Server process id; it leads its own process group (spawned detached), so the group can be killed too. */
  pid?: number;
  /** Signal that asks this server for a quick clean shutdown. */
  stopSignal?: NodeJS.Signals;
  /** Private data directory to remove. */
  dir?: string;
  /** The directory's owner record (src/backends/ownership.ts), removed after the directory. */
  ownerFile?: string;
}

const LIVE = new Set<LiveResource>();
const SYNC_STOP_WAIT_MS = 5_000;
const POLL_MS = 20;
const EXIT_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

let hooksInstalled = false;

/** Adds a resource to the live set; returns the function that removes it again (after an orderly stop). */
export function trackLive(resource: LiveResource): () => void {
  installHooks();
  LIVE.add(resource);
  return () => {
    LIVE.delete(resource);
    if (LIVE.size === 0) removeSignalHooks();
  };
}

export function liveResources(): readonly LiveResource[] {
  return [...LIVE];
}

/**
 * Forgets a resource without stopping it, for when something outside this process takes over its cleanup (a Jest
 * worker hands its pooled servers to the run's global teardown): the exit hook then no longer waits on it.
 */
export function forgetLive(resource: LiveResource): void {
  LIVE.delete(resource);
  if (LIVE.size === 0) removeSignalHooks();
}

/** The state letter of `/proc/<pid>/stat` (R, S, D, T, t, Z, X, ...), or null when there is no such process. */
function processState(pid: number): string | null {
  return stateAt(`/proc/${pid}/stat`);
}

/** The state letter of a `stat` file of /proc (a process's or one of its threads'), or null when it is gone. */
function stateAt(file: string): string | null {
  try {
    const stat = fs.readFileSync(file, 'utf8');
    // The state letter follows the parenthesised command name, which may itself contain spaces or parentheses.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

/** True while the process exists and is not a zombie waiting to be reaped. */
export function processAlive(pid: number): boolean {
  const state = processState(pid);
  return state !== null && state !== 'Z' && state !== 'X';
}

/**
 * True when the process is stopped (SIGSTOP, a debugger): it cannot act on a polite shutdown signal until it is
 * continued, so waiting for one would only wait out the timeout.
 */
export function processStopped(pid: number): boolean {
  const state = processState(pid);
  return state === 'T' || state === 't';
}

/**
 * True when every thread of the process is stopped, or gone (exited, a zombie): `processStopped` reads the leader
 * thread alone, while kill() returns once a SIGSTOP is queued and each thread stops only when it is next scheduled.
 * A process that is gone has nothing left to answer, so it counts as stopped.
 */
export function everyThreadStopped(pid: number): boolean {
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return true;
  }
  return tasks.every((t) => {
    const state = stateAt(`/proc/${pid}/task/${t}/stat`);
    return state === null || state === 'T' || state === 't' || state === 'Z' || state === 'X';
  });
}

/**
 * Every process under `pid` (children, their children), read from /proc. PostgreSQL's backends and auxiliary
 * processes call setsid(), so they are not in the postmaster's process group: killing the group does not reach them,
 * and a frozen (SIGSTOPped) one would outlive its postmaster. Empty once `pid` is gone (they are reparented).
 */
export function descendantsOf(pid: number): number[] {
  const parents = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = parents.get(ppid) ?? [];
      list.push(Number(entry));
      parents.set(ppid, list);
    } catch {
      // Gone meanwhile.
    }
  }
  const out: number[] = [];
  for (let queue = [pid]; queue.length > 0;) {
    const next = parents.get(queue.pop()!) ?? [];
    out.push(...next);
    queue.push(...next);
  }
  return out;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * Stops one resource without the event loop: used at 'exit' and on signals, where awaiting is impossible.
 * Polite signal first, then SIGKILL to the whole process group (PostgreSQL's children share it).
 */
export function stopSync(resource: LiveResource): void {
  if (resource.pid !== undefined) {
    signalQuietly(resource.pid, resource.stopSignal ?? 'SIGTERM');
    const deadline = Date.now() + SYNC_STOP_WAIT_MS;
    while (processAlive(resource.pid) && Date.now() < deadline) sleepSync(POLL_MS);
    for (const child of descendantsOf(resource.pid)) signalQuietly(child, 'SIGKILL');
    signalQuietly(-resource.pid, 'SIGKILL');
    signalQuietly(resource.pid, 'SIGKILL');
  }
  if (resource.dir) fs.rmSync(resource.dir, { recursive: true, force: true, maxRetries: 3 });
  if (resource.ownerFile) fs.rmSync(resource.ownerFile, { force: true });
  LIVE.delete(resource);
}

export function stopAllSync(): void {
  // Processes first: a directory removed under a running server (or install tool) would be recreated or leak.
  const ordered = [...LIVE].sort((a, b) => Number(b.pid !== undefined) - Number(a.pid !== undefined));
  for (const resource of ordered) {
    try {
      stopSync(resource);
    } catch (err) {
      process.stderr.write(`sqltally: could not clean up ${resource.label}: ${String(err)}\n`);
    }
  }
}

/** How many commands handle Ctrl-C themselves just now (see {@link deferSignalCleanup}). */
let deferred = 0;

/**
 * For a command that answers the first Ctrl-C (SIGTERM, SIGHUP) itself and still needs its servers to finish (count
 * rows through a fresh connection, write a report): until the returned release is called, a signal leaves every
 * resource running; stopping at exit is unchanged.
 */
export function deferSignalCleanup(): () => void {
  deferred += 1;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    deferred -= 1;
  };
}

function onSignal(signal: NodeJS.Signals): void {
  if (deferred > 0) return;
  stopAllSync();
  removeSignalHooks();
  // With our listener gone, re-raising gives the default behaviour (exit with 128+n) unless someone else listens.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

const signalListeners = new Map<NodeJS.Signals, () => void>();

function installHooks(): void {
  if (!hooksInstalled) {
    hooksInstalled = true;
    process.on('exit', stopAllSync);
  }
  if (signalListeners.size > 0) return;
  for (const signal of EXIT_SIGNALS) {
    const listener = (): void => onSignal(signal);
    signalListeners.set(signal, listener);
    process.on(signal, listener);
  }
}

function removeSignalHooks(): void {
  for (const [signal, listener] of signalListeners) process.off(signal, listener);
  signalListeners.clear();
}
