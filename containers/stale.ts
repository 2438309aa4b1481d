import fs from 'node:fs';
import path from 'node:path';
import { DATADIR_PREFIX, tempBase } from './local-process';
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

export interface StaleSweep {
  removed: RemovedDir[];
  stuck: StuckDir[];
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
  return [tempBase(env), ...readdirQuietly(cache).map((entry) => path.join(cache, entry, 'var', 'tmp'))];
}

/** Whether a record's owner counts as alive, so its directory is left alone. */
function ownerAlive(record: OwnerRecord): boolean {
  // Another boot: every process of that boot is gone, whatever pid it had.
  if (record.bootId !== bootId()) return false;
  // Another pid namespace (a container sharing this TMPDIR): its pids mean nothing here, so assume alive.
  if (record.pidNamespace !== pidNamespace()) return true;
  return ownedBySelf(record) || isRunning(record.owner);
}

/**
 * Processes still running on `dir`: the servers its record names (same pid and start time), the members of their
 * process groups (PostgreSQL's helpers rename themselves but stay in the postmaster's group), and any process
 * without a terminal whose working directory is inside it or whose command line names it (a helper the record
 * never saw, such as initdb's). A chrooted server sees the directory under its own root, so the command line is
 * matched on the directory's name. A process with a terminal (a person's shell that `cd`-ed there) is never chosen.
 */
function processesOn(dir: string, record: OwnerRecord): (ProcessIdentity & { stopSignal: string })[] {
  const found = new Map<number, ProcessIdentity & { stopSignal: string }>();
  for (const server of record.servers) if (isRunning(server)) found.set(server.pid, server);
  const groups = new Set(record.servers.map((s) => s.pid));
  const name = `/${path.basename(dir)}`;
  const names = (text: string): boolean => {
    const at = text.indexOf(name);
    if (at < 0) return false;
    const next = text[at + name.length];
    return next === undefined || next === '/' || next === ' ';
  };
  for (const entry of readdirQuietly('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid || found.has(pid)) continue;
    const where = processGroupAndTty(pid);
    if (!where) continue;
    let match = groups.has(where.pgrp);
    if (!match && where.tty === 0) {
      let cwd = '';
      let cmdline = '';
      try {
        cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        // Gone, or not ours to read.
      }
      try {
        cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      } catch {
        // Gone.
      }
      match = cwd === dir || cwd.startsWith(`${dir}/`) || names(cmdline);
    }
    if (match) {
      const identity = processIdentity(pid);
      if (identity) found.set(pid, { ...identity, stopSignal: 'SIGTERM' });
    }
  }
  return [...found.values()];
}

function signal(pid: number, sig: NodeJS.Signals | string): void {
  try {
    process.kill(pid, sig as NodeJS.Signals);
  } catch {
    // Gone already, or not a group leader.
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

/** Stops what still runs on a stale directory: the clean-shutdown signal first, then SIGKILL to each process group. */
async function stopAll(processes: (ProcessIdentity & { stopSignal: string })[]): Promise<ProcessIdentity[]> {
  for (const p of processes) signal(p.pid, p.stopSignal);
  let left = await waitGone(processes, POLITE_WAIT_MS);
  for (const p of left) {
    signal(-p.pid, 'SIGKILL');
    signal(p.pid, 'SIGKILL');
  }
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
  const sweep: StaleSweep = { removed: [], stuck: [] };
  for (const base of privateDirBases(env)) {
    for (const entry of readdirQuietly(base)) {
      if (!entry.startsWith(DATADIR_PREFIX) || !entry.endsWith(OWNER_SUFFIX)) continue;
      const ownerFile = path.join(base, entry);
      const dir = ownerFile.slice(0, -OWNER_SUFFIX.length);
      const record = readOwnerRecord(ownerFile);
      // Not ours, or written by another schema: judged by nobody rather than by a guess.
      if (!record || path.resolve(record.dir) !== path.resolve(dir)) continue;
      if (ownerAlive(record)) continue;
      const running = processesOn(dir, record);
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
export function describeSweep(sweep: StaleSweep): string[] {
  const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;
  return [
    ...sweep.removed.map(
      (r) =>
        `cleaned ${r.dir} (${r.backend}, ${mb(r.bytes)}, owner pid ${r.ownerPid} is gone${r.stoppedPids.length > 0 ? `; stopped server pid ${r.stoppedPids.join(', ')}` : ''})`,
    ),
    ...sweep.stuck.map((s) => `could not clean ${s.dir}: ${s.reason}`),
  ];
}
