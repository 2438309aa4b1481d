import { spawn } from 'node:child_process';
import type { StdioOptions } from 'node:child_process';
import { accessSync, constants, readFileSync, readdirSync, statSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import path from 'node:path';

/** Where a command was found on PATH, or why it cannot be run (exit 127 / 126, as a shell says). */
export type ResolvedCommand = { ok: true; file: string } | { ok: false; exitCode: 126 | 127; message: string };

function executable(file: string): 'yes' | 'missing' | 'not-executable' {
  try {
    if (statSync(file).isDirectory()) return 'not-executable';
    accessSync(file, constants.X_OK);
    return 'yes';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'not-executable';
  }
}

/** Finds a command as execvp would: a name with a slash as it is, any other on PATH. Nothing is started. */
export function resolveCommand(command: string, env: NodeJS.ProcessEnv, cwd: string = process.cwd()): ResolvedCommand {
  if (command === '') return { ok: false, exitCode: 127, message: 'the command is empty' };
  if (command.includes('/')) {
    const file = path.resolve(cwd, command);
    const state = executable(file);
    if (state === 'yes') return { ok: true, file };
    return state === 'missing'
      ? { ok: false, exitCode: 127, message: `${command}: no such file` }
      : { ok: false, exitCode: 126, message: `${command}: not an executable file (permission denied or a directory)` };
  }
  let denied: string | null = null;
  for (const dir of (env['PATH'] ?? '').split(path.delimiter)) {
    const file = path.resolve(cwd, dir || '.', command);
    const state = executable(file);
    if (state === 'yes') return { ok: true, file };
    if (state === 'not-executable' && denied === null) denied = file;
  }
  if (denied !== null) return { ok: false, exitCode: 126, message: `${command}: found at ${denied}, but it is not executable` };
  return { ok: false, exitCode: 127, message: `${command}: command not found on PATH` };
}

/** How a child ended: its exit code, or the signal that ended it. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A command running in a process group of its own. */
export interface RunningChild {
  readonly pid: number;
  /** Settles when the command itself exits (processes it started may still run: see `stop`). */
  readonly exited: Promise<ChildExit>;
  /**
   * Stops every process of the group: SIGTERM, then SIGKILL after `graceMs` to what is left, and waits until none
   * is left. Returns how many were still running when it was called.
   */
  stop(graceMs: number): Promise<number>;
  /** Processes of the group still running (zombies aside). */
  members(): number[];
}

/** Processes whose process group is `pgid`, read from /proc; zombies are not running. */
export function groupMembers(pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    // No /proc: ask the kernel whether the group has anyone at all.
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch {
      return [];
    }
  }
  const out: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: the fields after its last ')' are fixed.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') out.push(Number(entry));
    } catch {
      // Gone while reading.
    }
  }
  return out;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const POLL_MS = 20;

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // The group is gone already.
  }
}

/**
 * Starts `file` with `args` in a new session and process group (`detached`), so that stopping it reaches every
 * process it started, and a Ctrl-C at the terminal reaches sqltally, which then stops the group itself.
 */
export function startChild(
  file: string,
  argv0: string,
  args: readonly string[],
  options: { env: NodeJS.ProcessEnv; stdio: StdioOptions; cwd?: string },
): Promise<RunningChild> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { argv0, env: options.env, stdio: options.stdio, detached: true, ...(options.cwd ? { cwd: options.cwd } : {}) });
    const exited = new Promise<ChildExit>((r) => child.once('exit', (code, signal) => r({ code, signal })));
    child.once('error', reject);
    child.once('spawn', () => {
      const pid = child.pid!;
      resolve({
        pid,
        exited,
        members: () => groupMembers(pid),
        async stop(graceMs: number): Promise<number> {
          const running = groupMembers(pid).length;
          if (running === 0) return 0;
          signalGroup(pid, 'SIGTERM');
          const deadline = Date.now() + graceMs;
          while (groupMembers(pid).length > 0 && Date.now() < deadline) await sleep(POLL_MS);
          while (groupMembers(pid).length > 0) {
            signalGroup(pid, 'SIGKILL');
            await sleep(POLL_MS);
          }
          return running;
        },
      });
    });
  });
}

/** 128 + the signal's number, as a shell reports a process a signal ended. */
export function exitCodeOf(exit: ChildExit): number {
  if (exit.code !== null) return exit.code;
  return 128 + (exit.signal ? (osConstants.signals[exit.signal] ?? 0) : 0);
}
