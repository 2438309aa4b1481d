import fs from 'node:fs';
import path from 'node:path';
import { DATADIR_PREFIX, runTag } from '../src/backends/local-process';
import { privateDirBases } from '../src/backends/stale';
import { existingProcessPool, poolMarker } from './pool';

/** A process or directory sqltally made that is still here. */
export interface Leak {
  kind: 'process' | 'directory';
  what: string;
  pid?: number;
  path?: string;
}

/**
 * `sqltally-<run>-`: every private directory of one run starts with this, wherever it lives. With `derived`,
 * `sqltally-<run>`: also those of the run ids made from it (the pools' `<run>pool`, the leak tests' children).
 */
export function runMarker(env: NodeJS.ProcessEnv = process.env, derived = false): string {
  return `${DATADIR_PREFIX}${runTag(env)}${derived ? '' : '-'}`;
}

function readQuietly(read: () => string): string {
  try {
    return read();
  } catch {
    return '';
  }
}

/**
 * Processes whose command line or working directory names a private directory of this run. PostgreSQL's helper
 * processes rename themselves ("postgres: checkpointer") but keep the data directory as working directory.
 */
export function leakedProcesses(marker: string): Leak[] {
  const leaks: Leak[] = [];
  for (const entry of readQuietly(() => fs.readdirSync('/proc').join('\n')).split('\n')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const cmdline = readQuietly(() => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'))
      .replace(/\0/g, ' ')
      .trim();
    const cwd = readQuietly(() => fs.readlinkSync(`/proc/${pid}/cwd`));
    if (cmdline.includes(`/${marker}`) || cwd.includes(`/${marker}`)) {
      leaks.push({ kind: 'process', pid, what: `pid ${pid}: ${cmdline.slice(0, 160) || '(no cmdline)'} (cwd ${cwd})` });
    }
  }
  return leaks;
}

export function leakedDirectories(marker: string, bases: string[]): Leak[] {
  return bases.flatMap((base) =>
    readQuietly(() => fs.readdirSync(base).join('\n'))
      .split('\n')
      .filter((name) => name.startsWith(marker))
      .map((name) => ({ kind: 'directory' as const, path: path.join(base, name), what: path.join(base, name) })),
  );
}

export function findLeaks(env: NodeJS.ProcessEnv = process.env, derived = false): Leak[] {
  // The pool's tag is cut to fit (see poolRunId), so a long run id is not always a prefix of it: named outright.
  const markers = derived ? [runMarker(env, true), poolMarker(env)] : [runMarker(env)];
  const bases = privateDirBases(env);
  const found = markers.flatMap((m) => [...leakedProcesses(m), ...leakedDirectories(m, bases)]);
  return found.filter((leak, i) => found.findIndex((l) => l.what === leak.what) === i);
}

/** Kills leaked process groups and removes leaked directories, so one failed run does not poison the next. */
export function sweepLeaks(leaks: Leak[]): void {
  for (const leak of leaks) {
    if (leak.pid === undefined || leak.pid <= 1) continue;
    for (const target of [-leak.pid, leak.pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Gone, or not a group leader.
      }
    }
  }
  for (const leak of leaks) if (leak.path) fs.rmSync(leak.path, { recursive: true, force: true, maxRetries: 3 });
}

const SETTLE_MS = 2_000;
const POLL_MS = 100;
/** A pooled server was told to shut down as its worker exited; a MySQL takes a couple of seconds, loaded more. */
const POOLED_STOP_MS = 30_000;

/**
 * Finishes what Jest workers handed over (integration/pool.ts): waits for their pooled servers to exit, then
 * removes their directories. Returns the servers that did not stop in time (now killed): each is a bug to report.
 */
export async function sweepPooledServers(env: NodeJS.ProcessEnv = process.env, stopMs = POOLED_STOP_MS): Promise<string[]> {
  const marker = poolMarker(env);
  const deadline = Date.now() + stopMs;
  let running = leakedProcesses(marker);
  while (running.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    running = leakedProcesses(marker);
  }
  sweepLeaks([...running, ...leakedDirectories(marker, privateDirBases(env))]);
  return running.map((p) => `pooled server still running ${stopMs / 1000} s after its worker ended (now killed): ${p.what}`);
}

/**
 * Stops the pooled servers (this process's, then those the workers handed over), then fails the run if any server
 * process or private directory from this run outlived the tests. A process that is just finishing its shutdown
 * gets a short grace period; whatever is left is reported, then killed and removed.
 */
export default async function globalTeardown(): Promise<void> {
  if (!process.env['SQLTALLY_RUN_ID']) return;
  // Tests that ran inside this process (one worker: Jest runs in band) left their pooled servers here.
  await existingProcessPool()?.close();
  const unstopped = await sweepPooledServers(process.env);
  // The whole run, derived run ids included: a pooled server the sweep could not remove is a leak like any other.
  const deadline = Date.now() + SETTLE_MS;
  let leaks = findLeaks(process.env, true);
  while (leaks.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    leaks = findLeaks(process.env, true);
  }
  sweepLeaks(leaks);
  const problems = [...unstopped, ...leaks.map((l) => l.what)];
  if (problems.length === 0) return;
  throw new Error(`sqltally leaked ${problems.length} thing(s) from this test run (now killed/removed):\n  ${problems.join('\n  ')}`);
}
