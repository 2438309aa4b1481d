import fs from 'node:fs';
import path from 'node:path';
import { DATADIR_PREFIX, SHARED_SERVER_BASE, tempBase } from './local-process';
import { OWNER_SUFFIX, bootId, isRunning, ownedBySelf, pidNamespace, processGroupAndTty, processIdentity, readOwnerRecord } from './ownership';
import type { OwnerRecord, ProcessIdentity } from './ownership';
import { rootfsCacheDir } from './rootfs';

/**
 * Private data directories whose owner died without cleaning up (SIGKILL, an OOM kill, a killed CI job): found by
 * their owner records, their servers stopped, and removed. A directory whose owner is alive (another run, another
 * test file) is never touched; nor is one without a record (made by an older sqltally, which cannot be judged).
 */

/** A stale directory that was removed. */
export interface RemovedDir {
  dir: string;
  backend: string;
  /** The dead owner. */
  ownerPid: number;
  /** Bytes the directory held. */
  bytes: number;
  /** Server processes still running on it that were stopped first. */
  stoppedPids: number[];
}

/** A stale directory that could not be removed, and why. */
export interface StuckDir {
  dir: string;
  reason: string;
}

/** An owner record that was not acted on, and why: its directory and any process it names are left alone. */
export interface RefusedRecord {
  file: string;
  reason: string;
}

export interface StaleSweep {
  removed: RemovedDir[];
  stuck: StuckDir[];
  refused: RefusedRecord[];
}

const POLITE_WAIT_MS = 10_000;
const KILL_WAIT_MS = 5_000;
const POLL_MS = 50;

function readdirQuietly(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * Where private directories are made: the temp dir, and the temp dir inside each provisioned root filesystem
 * (chrooted servers keep their data where they can see it).
 */
export function privateDirBases(env: NodeJS.ProcessEnv = process.env): string[] {
  const cache = rootfsCacheDir(env);
  const shared = fs.existsSync(SHARED_SERVER_BASE) && SHARED_SERVER_BASE !== tempBase(env) ? [SHARED_SERVER_BASE] : [];
  return [tempBase(env), ...shared, ...readdirQuietly(cache).map((entry) => path.join(cache, entry, 'var', 'tmp'))];
}

/** Whether a record's owner counts as alive, so its directory is left alone. */
function ownerAlive(record: OwnerRecord): boolean {
  // Another boot: every process of that boot is gone, whatever pid it had.
  if (record.bootId !== bootId()) return false;
  // Another pid namespace (a container sharing this TMPDIR): its pids mean nothing here, so assume alive.
  if (record.pidNamespace !== pidNamespace()) return true;
  return ownedBySelf(record) || isRunning(record.owner);
}

function myUid(): number {
  return typeof process.getuid === 'function' ? process.getuid() : -1;
}

/**
 * Why a record may not be acted on, or undefined when it may: it and its directory must be ours (a record anyone
 * could have written would let them choose what we stop and remove), not links, and the directory the one it names.
 */
export function untrustedBecause(ownerFile: string, dir: string, record: OwnerRecord): string | undefined {
  const uid = myUid();
  let file: fs.Stats;
  try {
    file = fs.lstatSync(ownerFile);
  } catch {
    return 'the record is gone';
  }
  if (!file.isFile()) return 'the record is not a regular file';
  if (file.uid !== uid) return `the record belongs to uid ${file.uid}, not to this user (uid ${uid})`;
  // A second name could be anyone's hard link to one of our records.
  if (file.nlink !== 1) return `the record has ${file.nlink} links`;
  if ((file.mode & 0o022) !== 0) return `the record is writable by others (mode ${(file.mode & 0o777).toString(8)})`;
  if (path.resolve(record.dir) !== path.resolve(dir)) return `the record names another directory (${record.dir})`;
  let stat: fs.Stats | undefined;
  try {
    stat = fs.lstatSync(dir);
  } catch {
    // Never made, or already removed: only the record is left.
  }
  if (stat) {
    if (!stat.isDirectory()) return 'its directory is not a directory (a link?)';
    const expected = record.dirUid ?? uid;
    // Only root hands a directory to another user (PostgreSQL's), and says so in its record.
    if (expected !== uid && uid !== 0) return `the record hands its directory to uid ${expected}, which only root can do`;
    if (stat.uid !== expected) return `its directory belongs to uid ${stat.uid}, not ${expected}`;
  }
  return undefined;
}

/** What /proc says about a process: what a server of ours on a directory must show. */
interface ProcessView {
  pid: number;
  ppid: number;
  pgrp: number;
  tty: number;
  uid: number;
  cwd: string;
  cmdline: string;
}

function viewOf(pid: number): ProcessView | undefined {
  const where = processGroupAndTty(pid);
  if (!where) return undefined;
  let cwd = '';
  let cmdline = '';
  let uid = -1;
  let ppid = 0;
  try {
    cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
    ppid = Number(/^PPid:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  } catch {
    // Gone, or not ours to read: then it cannot be shown to be ours.
    return undefined;
  }
  return { pid, ppid, ...where, uid, cwd, cmdline };
}

/**
 * Processes running a server of ours on `dir`: working in it, run by us or its owner, no terminal, naming it or descending
 * from one that does (PostgreSQL's helpers rename themselves). A recorded server alive but failing this refuses the record.
 */
function processesOn(dir: string, record: OwnerRecord): { found: (ProcessIdentity & { stopSignal: string })[]; refused?: string } {
  const name = `/${path.basename(dir)}`;
  const names = (text: string): boolean => {
    for (let at = text.indexOf(name); at >= 0; at = text.indexOf(name, at + 1)) {
      const next = text[at + name.length];
      if (next === undefined || next === '/' || next === ' ') return true;
    }
    return false;
  };
  let dirUid = myUid();
  try {
    dirUid = fs.lstatSync(dir).uid;
  } catch {
    // Gone: then nothing can be working in it.
  }
  const uids = new Set([myUid(), dirUid]);
  const inside = (v: ProcessView): boolean =>
    v.pid > 1 && v.pid !== process.pid && v.tty === 0 && uids.has(v.uid) && (v.cwd === dir || v.cwd.startsWith(`${dir}/`));
  const views: ProcessView[] = [];
  for (const entry of readdirQuietly('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const v = viewOf(Number(entry));
    if (v && inside(v)) views.push(v);
  }
  const chosen = new Set(views.filter((v) => names(v.cmdline)).map((v) => v.pid));
  // Helpers of a chosen server, to any depth.
  for (let grew = true; grew;) {
    grew = false;
    for (const v of views) {
      if (!chosen.has(v.pid) && (chosen.has(v.ppid) || chosen.has(v.pgrp))) {
        chosen.add(v.pid);
        grew = true;
      }
    }
  }
  const found = new Map<number, ProcessIdentity & { stopSignal: string }>();
  for (const server of record.servers) {
    if (!isRunning(server)) continue;
    if (!chosen.has(server.pid)) {
      return { found: [], refused: `it names pid ${server.pid} as its server, which is not a server of ours on this directory` };
    }
    found.set(server.pid, server);
  }
  for (const pid of chosen) {
    if (found.has(pid)) continue;
    const identity = processIdentity(pid);
    if (identity) found.set(pid, { ...identity, stopSignal: 'SIGTERM' });
  }
  return { found: [...found.values()] };
}

/** Signals one process, never a group and never init or this process, whatever the caller passes. */
function signal(pid: number, sig: NodeJS.Signals | string): void {
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return;
  try {
    process.kill(pid, sig as NodeJS.Signals);
  } catch {
    // Gone already.
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function waitGone(processes: ProcessIdentity[], ms: number): Promise<ProcessIdentity[]> {
  const deadline = Date.now() + ms;
  let left = processes.filter(isRunning);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    left = left.filter(isRunning);
  }
  return left;
}

/** Stops what still runs on a stale directory: the clean-shutdown signal first, then SIGKILL to each process still there. */
async function stopAll(processes: (ProcessIdentity & { stopSignal: string })[]): Promise<ProcessIdentity[]> {
  for (const p of processes) if (isRunning(p)) signal(p.pid, p.stopSignal);
  let left = await waitGone(processes, POLITE_WAIT_MS);
  // Checked again just before: the pid must still be the same process (same start time).
  for (const p of left) if (isRunning(p)) signal(p.pid, 'SIGKILL');
  left = await waitGone(left, KILL_WAIT_MS);
  return left;
}

function sizeOf(target: string): number {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(target);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.size;
  return readdirQuietly(target).reduce((sum, entry) => sum + sizeOf(path.join(target, entry)), 0);
}

/**
 * Finds every private directory (under `privateDirBases`) whose owner record names a dead owner, stops any server
 * still running on it, and removes it with its record. Returns what was removed and what could not be.
 */
export async function sweepStalePrivateDirs(env: NodeJS.ProcessEnv = process.env): Promise<StaleSweep> {
  const sweep: StaleSweep = { removed: [], stuck: [], refused: [] };
  for (const base of privateDirBases(env)) {
    for (const entry of readdirQuietly(base)) {
      if (!entry.startsWith(DATADIR_PREFIX) || !entry.endsWith(OWNER_SUFFIX)) continue;
      const ownerFile = path.join(base, entry);
      const dir = ownerFile.slice(0, -OWNER_SUFFIX.length);
      const record = readOwnerRecord(ownerFile);
      // Not a record this version can read: judged by nobody rather than by a guess.
      if (!record) {
        sweep.refused.push({ file: ownerFile, reason: 'not an owner record this sqltally can read' });
        continue;
      }
      const untrusted = untrustedBecause(ownerFile, dir, record);
      if (untrusted) {
        sweep.refused.push({ file: ownerFile, reason: untrusted });
        continue;
      }
      if (ownerAlive(record)) continue;
      const { found: running, refused } = processesOn(dir, record);
      if (refused) {
        sweep.refused.push({ file: ownerFile, reason: refused });
        continue;
      }
      const left = running.length > 0 ? await stopAll(running) : [];
      if (left.length > 0) {
        sweep.stuck.push({ dir, reason: `server pid ${left.map((p) => p.pid).join(', ')} still runs on it after SIGKILL` });
        continue;
      }
      const bytes = sizeOf(dir);
      try {
        fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
        fs.rmSync(ownerFile, { force: true });
      } catch (err) {
        sweep.stuck.push({ dir, reason: `cannot remove it: ${(err as Error).message}` });
        continue;
      }
      sweep.removed.push({ dir, backend: record.backend, ownerPid: record.owner.pid, bytes, stoppedPids: running.map((p) => p.pid) });
    }
  }
  return sweep;
}

/** One line per removed or stuck directory, for `sqltally backends` and the start of `sqltally run`. */
export function describeSweep(sweep: Omit<StaleSweep, 'refused'> & { refused?: RefusedRecord[] }): string[] {
  const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;
  return [
    ...sweep.removed.map(
      (r) =>
        `cleaned ${r.dir} (${r.backend}, ${mb(r.bytes)}, owner pid ${r.ownerPid} is gone${r.stoppedPids.length > 0 ? `; stopped server pid ${r.stoppedPids.join(', ')}` : ''})`,
    ),
    ...sweep.stuck.map((s) => `could not clean ${s.dir}: ${s.reason}`),
    ...(sweep.refused ?? []).map((r) => `left ${r.file} alone: ${r.reason}`),
  ];
}
