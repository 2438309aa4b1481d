import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SqltallyError } from '../shared/errors';
import { NoSqlDriver } from './sql-client';
import { findExecutable } from './binaries';
import { descendantsOf, processAlive, processStopped, trackLive } from './live';
import { createOwnedDir, isRunning, processIdentity, recordDirOwner, recordServer } from './ownership';
import type { ProcessIdentity } from './ownership';
import type { LiveResource } from './live';
import type { NetworkConnection } from './types';

/** Every private directory sqltally makes starts with this, so a leak check can find them. */
export const DATADIR_PREFIX = 'sqltally-';
const MAX_BIND_ATTEMPTS = 4;
const READY_POLL_MS = 100;
const DEFAULT_READY_TIMEOUT_MS = 120_000;
const DEFAULT_STOP_TIMEOUT_MS = 20_000;
const LOG_TAIL_CHARS = 16_000;
const SHOWN_LOG_LINES = 12;
/** How long the log of a server that exited before it was ready is watched for its last lines (logShows). */
const LOG_SETTLE_MS = 1_000;
const LOG_SETTLE_POLL_MS = 25;

/** A user a server must run as (PostgreSQL refuses root). */
export interface RunAs {
  user: string;
  uid: number;
  gid: number;
}

/** Run id stamped into directory names, so the leak check of one test run ignores another helper's run. */
export function runTag(env: NodeJS.ProcessEnv = process.env): string {
  const tag = env['SQLTALLY_RUN_ID'] ?? 'cli';
  return tag.replace(/[^A-Za-z0-9]/g, '').slice(0, 24) || 'cli';
}

/** The temp directory, absolute: tools run with another working directory (cp in the destination's folder). */
export function tempBase(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env['TMPDIR'] || os.tmpdir());
}

/**
 * Where root puts the directories of servers that run as another OS user when `$TMPDIR` is closed to that user (a
 * 0700 directory, as `mktemp -d` and several CI runners make it): root's, mode 0711, so each server's user reaches
 * its own 0700 directory inside and lists nothing.
 */
export const SHARED_SERVER_BASE = '/var/tmp/sqltally-servers';

/** Whether `user` may pass through every directory down to `dir` (the execute bit that applies to it). */
export function reachableBy(dir: string, user: RunAs): boolean {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    let st: fs.Stats;
    try {
      st = fs.statSync(at);
    } catch {
      return false;
    }
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return false;
    if (at === path.dirname(at)) return true;
  }
}

/**
 * The base for a directory a server running as `owner` must reach: `$TMPDIR` when it can, else
 * {@link SHARED_SERVER_BASE}, made (or checked: a directory of ours, writable by nobody else) on the way.
 */
export function serverTempBase(env: NodeJS.ProcessEnv, owner: RunAs | undefined, backend: string): string {
  const base = tempBase(env);
  let isDir = false;
  try {
    isDir = fs.statSync(base).isDirectory();
  } catch {
    // Missing: creating the private directory under it fails with the message that says so.
  }
  // Only a directory closed to the owner moves elsewhere; a TMPDIR that is no directory at all is the user's to fix.
  if (!owner || !isDir || reachableBy(base, owner)) return base;
  const hint = `the server runs as the OS user '${owner.user}', which cannot pass through ${base}: set TMPDIR to a directory it can reach (chmod o+x on each folder), or let sqltally use ${SHARED_SERVER_BASE}`;
  try {
    fs.mkdirSync(SHARED_SERVER_BASE, { mode: 0o711 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new SqltallyError(`cannot create ${SHARED_SERVER_BASE}`, { backend, phase: 'provision', provider: 'local', cause: err, hint });
    }
  }
  const st = fs.lstatSync(SHARED_SERVER_BASE);
  const me = typeof process.getuid === 'function' ? process.getuid() : -1;
  if (!st.isDirectory() || st.uid !== me || (st.mode & 0o022) !== 0) {
    throw new SqltallyError(`${SHARED_SERVER_BASE} is not a directory of this user's that only it can write to`, {
      backend,
      phase: 'provision',
      provider: 'local',
      hint,
    });
  }
  // umask may have taken the execute bits mkdir was given.
  if ((st.mode & 0o011) !== 0o011) fs.chmodSync(SHARED_SERVER_BASE, (st.mode & 0o777) | 0o011);
  if (!reachableBy(SHARED_SERVER_BASE, owner)) {
    throw new SqltallyError(`the OS user '${owner.user}' cannot reach ${SHARED_SERVER_BASE} either`, { backend, phase: 'provision', provider: 'local', hint });
  }
  return SHARED_SERVER_BASE;
}

/** A private directory, tracked as live from the moment it exists so a failure anywhere still removes it. */
export interface PrivateDir {
  path: string;
  resource: LiveResource;
  /** Removes the directory and forgets it; safe to call twice. */
  remove(): Promise<void>;
}

/**
 * Creates a fresh mode-0700 directory under `$TMPDIR` (or the OS temp dir), owned by `owner` when given (under
 * {@link SHARED_SERVER_BASE} when `owner` cannot reach `$TMPDIR`).
 */
export function makePrivateDir(backend: string, env: NodeJS.ProcessEnv, owner?: RunAs): PrivateDir {
  const base = serverTempBase(env, owner, backend);
  let created: { dir: string; ownerFile: string } | undefined;
  try {
    // With its owner record (this process), so a run killed by SIGKILL leaves something the next run can judge.
    created = createOwnedDir(base, `${DATADIR_PREFIX}${runTag(env)}-${backend.replace(/[^a-z0-9]/gi, '')}-`, backend);
    fs.chmodSync(created.dir, 0o700);
    if (owner) {
      fs.chownSync(created.dir, owner.uid, owner.gid);
      recordDirOwner(created.dir, owner.uid);
    }
    // Root writes through permission bits, so prove writability with a real file rather than trusting mode.
    const probe = path.join(created.dir, '.sqltally-write-check');
    fs.writeFileSync(probe, '');
    fs.rmSync(probe);
  } catch (cause) {
    if (created) {
      fs.rmSync(created.dir, { recursive: true, force: true });
      fs.rmSync(created.ownerFile, { force: true });
    }
    throw new SqltallyError(`cannot create a private data directory under ${base}`, {
      backend,
      phase: 'provision',
      provider: 'local',
      cause,
      hint: 'set TMPDIR to a writable directory with free space',
    });
  }
  const { dir, ownerFile } = created;
  const resource: LiveResource = { label: `${backend} data directory ${dir}`, dir, ownerFile };
  const untrack = trackLive(resource);
  let removed: Promise<void> | undefined;
  return {
    path: dir,
    resource,
    remove: () =>
      (removed ??= fs.promises
        .rm(dir, { recursive: true, force: true, maxRetries: 3 })
        // The record goes last: a directory never exists without one.
        .then(() => fs.promises.rm(ownerFile, { force: true }))
        .then(() => {
          // Only forget the resource when no server is still registered on it (stop clears pid first).
          if (resource.pid === undefined) untrack();
        })),
  };
}

/** A port the kernel just called free on 127.0.0.1; another process may still take it before the server binds. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}

/** How to run and watch one server process. */
export interface ServerLaunch {
  /** Backend id for messages. */
  id: string;
  binary: string;
  /** Arguments for the server bound to `port`. */
  args(port: number): string[];
  dir: PrivateDir;
  runAs?: RunAs;
  /** The signal the server treats as "shut down now, cleanly". */
  stopSignal: NodeJS.Signals;
  /** Log text meaning the port was taken between probe and bind. */
  bindFailure: RegExp;
  /** A real query against the server; rejects while it is not ready. */
  ping(port: number): Promise<void>;
  /** A ping failure that waiting cannot cure (login refused): stop polling at once. */
  isFatal?(err: unknown): boolean;
  pickPort?: () => Promise<number>;
  readyTimeoutMs?: number;
  env: NodeJS.ProcessEnv;
  /**
   * A log file the server writes itself (PostgreSQL's logging collector): once it runs, messages go there instead of
   * stderr, so its tail is read too when a start fails.
   */
  logFile?: string;
}

/** A server process that has answered a real query. */
export interface RunningServer {
  pid: number;
  port: number;
  dataDir: string;
  /** process.hrtime.bigint() at spawn of the attempt that succeeded, and at first successful query. */
  spawnedAt: bigint;
  readyAt: bigint;
  /** Stops the process (polite signal, SIGKILL after a timeout), then removes the data directory. */
  stop(): Promise<void>;
  logTail(): string;
}

class BindRace extends Error {}

/** The last part of a server's own log file, or nothing while it does not exist. */
function fileTail(file: string | undefined): string {
  if (!file) return '';
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, LOG_TAIL_CHARS);
    const buffer = Buffer.alloc(length);
    fs.readSync(fd, buffer, 0, length, size - length);
    return buffer.toString('utf8');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** The error lines (servers print the cause long before the tail) followed by the last lines of a log. */
function lastLines(text: string): string {
  const lines = text.trim().split('\n');
  const tail = lines.slice(-SHOWN_LOG_LINES);
  const errors = lines.filter((l) => /\[ERROR\]|^ERROR|FATAL|PANIC/.test(l) && !tail.includes(l)).slice(0, SHOWN_LOG_LINES);
  return [...errors, ...(errors.length > 0 ? ['...'] : []), ...tail].join('\n    ');
}

function childEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // The servers get a small, predictable environment: no inherited locale or option-file surprises.
  return { PATH: env['PATH'] ?? process.env['PATH'] ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C', TZ: 'UTC' };
}

/**
 * Wraps the command in `setpriv --pdeathsig` when available: if this Node process dies without running any
 * handler (SIGKILL, a killed Jest worker), the kernel still tells the server to shut down.
 */
function withParentDeathSignal(binary: string, args: string[], signal: NodeJS.Signals): [string, string[]] {
  const setpriv = findExecutable('setpriv', ['/usr/bin', '/bin']);
  return setpriv ? [setpriv, ['--pdeathsig', signal.replace(/^SIG/, ''), '--', binary, ...args]] : [binary, args];
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Whether the log of a server that exited shows `pattern`, looked for until LOG_SETTLE_MS after the exit: PostgreSQL's
 * logging collector may write a bind failure after the postmaster has gone, and a taken port must be retried, not fail.
 */
async function logShows(logText: () => string, pattern: RegExp): Promise<boolean> {
  const deadline = Date.now() + LOG_SETTLE_MS;
  for (;;) {
    if (pattern.test(logText())) return true;
    if (Date.now() >= deadline) return false;
    await sleep(LOG_SETTLE_POLL_MS);
  }
}

/** How long a stopped server's children may take to follow their leader before they are killed. */
const CHILDREN_EXIT_MS = 5_000;
const CHILDREN_POLL_MS = 10;

/** Waits for each of a stopped server's children (by pid and start time) to be gone; SIGKILLs what stays. */
async function childrenGone(children: readonly ProcessIdentity[]): Promise<void> {
  const deadline = Date.now() + CHILDREN_EXIT_MS;
  let left = children.filter(isRunning);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(CHILDREN_POLL_MS);
    left = left.filter(isRunning);
  }
  for (const c of left) signalQuietly(c.pid, 'SIGKILL');
}

async function attempt(launch: ServerLaunch, port: number): Promise<RunningServer> {
  const [command, args] = withParentDeathSignal(launch.binary, launch.args(port), launch.stopSignal);
  let log = '';
  const spawnedAt = process.hrtime.bigint();
  const child = spawn(command, args, {
    cwd: launch.dir.path,
    env: childEnv(launch.env),
    // Own process group: terminal Ctrl-C reaches us, not the server, so we stop it in order; and the whole
    // group (PostgreSQL's helpers included) can be killed by one signal.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(launch.runAs ? { uid: launch.runAs.uid, gid: launch.runAs.gid } : {}),
  });
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  const append = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-LOG_TAIL_CHARS);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const logText = (): string => log + fileTail(launch.logFile);
  // A forgotten stop must not keep Node alive; the 'exit' hook in live.ts still kills the server.
  child.unref();
  (child.stdout as net.Socket | null)?.unref?.();
  (child.stderr as net.Socket | null)?.unref?.();

  const pid = child.pid;
  if (pid === undefined) {
    const err = await Promise.race([spawnError, sleep(1000).then(() => new Error('no pid'))]);
    throw new SqltallyError(`could not spawn ${launch.binary}`, {
      backend: launch.id,
      phase: 'start',
      provider: 'local',
      cause: err,
      hint: 'check that the server binary is installed and executable',
    });
  }
  const resource = launch.dir.resource;
  resource.pid = pid;
  resource.stopSignal = launch.stopSignal;
  try {
    recordServer(launch.dir.path, pid, launch.stopSignal);
  } catch {
    // Best effort: without it a later run still finds the server by its working directory and command line.
  }
  resource.label = `${launch.id} (local, pid ${pid}, ${launch.dir.path})`;

  let stopping: Promise<void> | undefined;
  const stopProcess = async (): Promise<void> => {
    // The server's children, listed while still its own (reparented once the leader dies): PostgreSQL's start sessions
    // of their own, out of a group signal's reach, and its logger outlives the postmaster inside the directory removed next.
    const children = descendantsOf(pid).flatMap((p) => processIdentity(p) ?? []);
    if (!exited(child)) {
      // A stopped server (frozen by SIGSTOP or a debugger) would only act on the polite signal once continued, and
      // its data directory is private and removed next: it goes straight to SIGKILL, which a stopped process obeys.
      const frozen = processStopped(pid);
      if (!frozen) signalQuietly(pid, launch.stopSignal);
      if (frozen || !(await waitExit(child, DEFAULT_STOP_TIMEOUT_MS))) {
        for (const c of children) signalQuietly(c.pid, 'SIGKILL');
        signalQuietly(-pid, 'SIGKILL');
        await waitExit(child, DEFAULT_STOP_TIMEOUT_MS);
      }
    }
    // Stragglers in the group (a PostgreSQL backend that missed the shutdown) go with the leader.
    signalQuietly(-pid, 'SIGKILL');
    await childrenGone(children);
  };
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await stopProcess();
      if (processAlive(pid)) {
        throw new SqltallyError(`server pid ${pid} did not exit after SIGKILL`, {
          backend: launch.id,
          phase: 'stop',
          provider: 'local',
        });
      }
      resource.pid = undefined;
    })());

  const deadline = Date.now() + (launch.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
  let lastError: unknown;
  for (;;) {
    if (exited(child)) {
      resource.pid = undefined;
      if (await logShows(logText, launch.bindFailure)) throw new BindRace(`port ${port} taken`);
      throw new SqltallyError(`${path.basename(launch.binary)} exited before it was ready (code ${child.exitCode ?? child.signalCode})`, {
        backend: launch.id,
        phase: 'start',
        provider: 'local',
        statement: undefined,
        cause: lastError,
        hint: `server log:\n    ${lastLines(logText()) || '(empty)'}`,
      });
    }
    try {
      await launch.ping(port);
      const readyAt = process.hrtime.bigint();
      return { pid, port, dataDir: launch.dir.path, spawnedAt, readyAt, stop, logTail: logText };
    } catch (err) {
      lastError = err;
    }
    if (lastError instanceof NoSqlDriver) {
      await stop();
      throw new NoSqlDriver(lastError.what, { backend: launch.id, phase: 'start', provider: 'local', hint: lastError.hint });
    }
    const fatal = launch.isFatal?.(lastError) ?? false;
    if (fatal || Date.now() > deadline) {
      await stop();
      const what = fatal
        ? 'server refused the login sqltally set up'
        : `server did not answer a query within ${launch.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS} ms`;
      throw new SqltallyError(what, {
        backend: launch.id,
        phase: 'start',
        provider: 'local',
        cause: lastError,
        hint: `server log:\n    ${lastLines(logText()) || '(empty)'}`,
      });
    }
    await sleep(READY_POLL_MS);
  }
}

/**
 * Spawns a server on a free loopback port and waits for a real query to succeed. If the port was taken between
 * the probe and the server's bind, tries again with another port. On any failure the process is stopped and
 * the data directory removed before the error is thrown.
 */
export async function launchServer(launch: ServerLaunch): Promise<RunningServer> {
  const pick = launch.pickPort ?? freePort;
  const taken: number[] = [];
  try {
    for (let i = 0; i < MAX_BIND_ATTEMPTS; i++) {
      const port = await pick();
      try {
        const running = await attempt(launch, port);
        return {
          ...running,
          stop: async () => {
            await running.stop();
            await launch.dir.remove();
          },
        };
      } catch (err) {
        if (!(err instanceof BindRace)) throw err;
        taken.push(port);
      }
    }
    throw new SqltallyError(`every port tried was taken before the server could bind: ${taken.join(', ')}`, {
      backend: launch.id,
      phase: 'start',
      provider: 'local',
      hint: 'another process is grabbing loopback ports; retry, or free some ports',
    });
  } catch (err) {
    await launch.dir.remove();
    throw err;
  }
}

/** Runs a one-shot helper (initdb, mariadb-install-db) to completion; throws with its output on failure. */
export function runTool(
  id: string,
  binary: string,
  args: string[],
  options: { cwd: string; runAs?: RunAs; env: NodeJS.ProcessEnv; timeoutMs?: number; input?: string },
): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    // Like servers: own process group (initdb and mariadb-install-db run server processes of their own), tracked
    // as live so Ctrl-C mid-install kills the whole group, and killed by the kernel if Node dies.
    const [command, commandArgs] = withParentDeathSignal(binary, args, 'SIGKILL');
    const child = spawn(command, commandArgs, {
      cwd: options.cwd,
      env: childEnv(options.env),
      detached: true,
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      ...(options.runAs ? { uid: options.runAs.uid, gid: options.runAs.gid } : {}),
    });
    // A tool that exits before reading all of it fails on its own; the pipe's EPIPE must not throw on top.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(options.input);
    const untrack =
      child.pid !== undefined
        ? trackLive({ label: `${id} ${path.basename(binary)} (pid ${child.pid})`, pid: child.pid, stopSignal: 'SIGKILL' })
        : () => undefined;
    const timer = setTimeout(() => {
      if (child.pid !== undefined) signalQuietly(-child.pid, 'SIGKILL');
    }, options.timeoutMs ?? 120_000);
    const append = (chunk: Buffer): void => {
      out = (out + chunk.toString('utf8')).slice(-LOG_TAIL_CHARS);
    };
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    child.once('error', (cause) => {
      clearTimeout(timer);
      untrack();
      reject(new SqltallyError(`could not run ${binary}`, { backend: id, phase: 'provision', provider: 'local', cause }));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Helpers the tool left in its group (a bootstrap server) go with it.
      if (child.pid !== undefined) signalQuietly(-child.pid, 'SIGKILL');
      untrack();
      if (code === 0) resolve(out);
      else
        reject(
          new SqltallyError(`${path.basename(binary)} failed (${code ?? signal})`, {
            backend: id,
            phase: 'provision',
            provider: 'local',
            hint: `its output:\n    ${lastLines(out) || '(empty)'}`,
          }),
        );
    });
  });
}

/** The uid/gid of an OS user, read from /etc/passwd (no native getpwnam in Node). */
export function lookupUser(user: string): RunAs | undefined {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [name, , uid, gid] = line.split(':');
      if (name === user && uid !== undefined && gid !== undefined) return { user, uid: Number(uid), gid: Number(gid) };
    }
  } catch {
    // No passwd file: no such user.
  }
  return undefined;
}

/** Where a private server listens: 127.0.0.1 only, on the port `launchServer` found free. */
export function loopbackConnection(user: string, password: string, database: string): (port: number) => NetworkConnection {
  return (port) => ({ kind: 'network', host: '127.0.0.1', port, user, password, database });
}
