import type { StdioOptions } from 'node:child_process';
import { SqltallyError, redactSecrets } from '../shared/errors';
import { interruptible } from './interrupt';
import type { StartedBackend } from '../backends/types';
import type { CommandRun, Failure, Report } from '../report/schema';
import { exitCodeOf, resolveCommand, startChild } from './child';
import type { ChildExit, RunningChild } from './child';
import { childEnvironment, connectionEnv } from './child-env';
import { parseExecArgs } from './exec-options';
import type { ExecOptions } from './exec-options';
import { EXIT, checkBeforeStart, defaultOutDir, finishReport } from './finish';
import type { Command } from './main';
import { argsCheckedOnly, usageExit } from './usage';
import { MeasuredWindows } from './windows';
import { describeWireChoice } from '../capture/wire-choice';

const HELP = `usage: sqltally exec [options] -- COMMAND [ARGS...]

Starts (or reaches) the backend, reads its wire (a capture of its loopback traffic, or the counting proxy), and runs
COMMAND with the connection in its environment (DATABASE_URL, PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE, MYSQL_HOST/
MYSQL_TCP_PORT/MYSQL_PWD/MYSQL_USER/MYSQL_DATABASE, SQLTALLY_JDBC_URL, SQLTALLY_SQLITE_PATH, SQLTALLY_*; see
docs/exec.md). One window is measured around the command; its tally and verdict are printed and written as a report
that sqltally gate reads.

options:
  --backend ID          sqlite, mariadb, mysql, postgres, optionally with a version (postgres@15); default postgres.
                        Started privately like sqltally run does, or reached through SQLTALLY_<BACKEND>_URL
  --name NAME           the window's name in the report and the baseline; default the command's file name
  --named-windows       measure no window around the command: it opens its own through the control endpoint
                        (SQLTALLY_CONTROL_URL, SQLTALLY_CONTROL_TOKEN), one report entry per name
  --wire auto|proxy|passive
                        how the wire layer is read: passive reads a copy of the server's loopback traffic with
                        tcpdump (needs CAP_NET_RAW) while the command connects to the server itself, with no extra
                        hop; proxy relays the command's connections through sqltally's proxy. auto (default):
                        passive on a server sqltally started on this machine (loopback, no TLS, not a container),
                        with tcpdump able to capture and one window; otherwise the proxy. The choice and its reason
                        are printed and kept in the report
  --table [SCHEMA.]T    a table the command writes: its own counters are shown, and after a timeout or Ctrl-C its
                        rows are counted through a fresh connection (rows committed anyway)
  --timeout-ms N        stop the command after N ms: SIGTERM to its process group, SIGKILL after --kill-grace-ms
  --kill-grace-ms N     how long a stopped command gets between SIGTERM and SIGKILL; default 2000
  --baseline FILE       gate the report against this baseline (as sqltally gate does)
  --out DIR             output directory; default sqltally-report/<timestamp>
  --force               write into an existing non-empty output directory
  --json                print the report as JSON on stdout (the command's own output comes first)
  --no-write            do not write files

exit: the command's own exit code when it is not 0 (128+N when signal N ended it); otherwise 1 when a window is
      incomplete, the gate failed or the report could not be written, else 0. Before that: 2 bad options (nothing
      started), 127 no such command, 126 not executable, 124 stopped by --timeout-ms, 130 (143) sqltally stopped by
      Ctrl-C (SIGTERM). A stopped command's report is marked failed and says what committed anyway.
`;

/** How the command is run: where its output goes, what stops it, what is said meanwhile. */
export interface ExecIo {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  stdio: StdioOptions;
  /** Aborted with 'SIGINT' or 'SIGTERM' when sqltally is interrupted. */
  signal?: AbortSignal;
  progress(line: string): void;
  /** Told the command's process group as soon as it runs, so a second Ctrl-C can kill it at once. */
  onChild?(pgid: number | null): void;
}

export interface ExecResult {
  /** Null when nothing was run (no such command, bad output directory or baseline). */
  report: Report | null;
  exitCode: number;
}

type StoppedBy = CommandRun['stoppedBy'];

/** The command failed on its own: its window's workload error, in the words a shell would use. */
class CommandFailed extends Error {}

function exitWords(exit: ChildExit): string {
  return exit.signal ? `was ended by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** Runs one command under a window (or under its own named windows) on `backend`, and reports. */
export async function runExec(opts: ExecOptions, backend: string | StartedBackend, io: ExecIo): Promise<ExecResult> {
  const out = opts.out ?? defaultOutDir();
  const resolved = resolveCommand(opts.argv[0]!, io.env, io.cwd);
  if (!resolved.ok) {
    io.progress(`cannot run the command: ${resolved.message}; nothing was started`);
    return { report: null, exitCode: resolved.exitCode };
  }
  const { baseline, problem } = await checkBeforeStart(opts, out);
  if (problem) {
    io.progress(problem);
    return { report: null, exitCode: EXIT.usage };
  }

  const measured = await MeasuredWindows.open(backend, opts.table, opts.wire, opts.named ? '--named-windows' : null);
  const description = measured.session.backend.description;
  io.progress(`ready ${description.id} (${description.serverVersion}, ${description.provider})`);
  io.progress(describeWireChoice(measured.wire));

  let child: RunningChild | null = null;
  let stoppedBy: StoppedBy = null;
  let stopping: Promise<number> | null = null;
  let timer: NodeJS.Timeout | undefined;
  const giveUp = new AbortController();
  const stop = (why: NonNullable<StoppedBy>): void => {
    if (stoppedBy) return;
    stoppedBy = why;
    io.progress(
      why === 'timeout' ? `--timeout-ms ${opts.timeoutMs} reached: stopping the command's process group` : `${why}: stopping the command's process group`,
    );
    giveUp.abort(why === 'timeout' ? `timed out after ${opts.timeoutMs} ms (--timeout-ms)` : `interrupted (${why})`);
    if (child) stopping = child.stop(opts.killGraceMs);
  };
  const onInterrupt = (): void => stop(io.signal?.reason === 'SIGTERM' ? 'SIGTERM' : 'SIGINT');
  io.signal?.addEventListener('abort', onInterrupt, { once: true });

  let exit: ChildExit | null = null;
  let strays = 0;
  let failure: Failure | null = null;
  try {
    const endpoint = await measured.startEndpoint(
      opts.named ? null : `sqltally exec measures the whole command as window "${opts.name}": run it with --named-windows to open windows from the command`,
    );
    const env = childEnvironment(io.env, connectionEnv(description, measured.session.connection, endpoint));
    const runCommand = async (): Promise<void> => {
      child = await startChild(resolved.file, opts.argv[0]!, opts.argv.slice(1), { env, stdio: io.stdio, ...(io.cwd ? { cwd: io.cwd } : {}) });
      io.onChild?.(child.pid);
      io.progress(`running ${opts.argv[0]} as process group ${child.pid}`);
      if (stoppedBy) stopping = child.stop(opts.killGraceMs);
      else if (io.signal?.aborted) onInterrupt();
      if (opts.timeoutMs !== undefined) timer = setTimeout(() => stop('timeout'), opts.timeoutMs);
      exit = await child.exited;
      // Whatever the command left running in its group would go on writing after its window: stopped inside it.
      if (!stoppedBy && child.members().length > 0) strays = await child.stop(opts.killGraceMs);
      if (!stoppedBy && exitCodeOf(exit) !== 0) throw new CommandFailed(`the command ${exitWords(exit)}`);
    };
    if (opts.named) {
      io.progress(`control endpoint at ${endpoint.url}: the command opens its windows there (SQLTALLY_CONTROL_URL, SQLTALLY_CONTROL_TOKEN)`);
      try {
        await runCommand();
      } catch (err) {
        if (!(err instanceof CommandFailed)) throw err;
      }
    } else {
      const tally = await measured.session.measure(runCommand, { connection: 'none', signal: giveUp.signal, onTimeout: 'cancel' });
      if (stopping) await stopping;
      measured.record(opts.name, 'command', tally, tally.durationNs);
    }
    if (stopping) await stopping;
    if (child) exit = await (child as RunningChild).exited;
    const open = await measured.endOpenWindows(
      stoppedBy ? `sqltally stopped the command (${stoppedBy}) while it was open` : `the command ${exit ? exitWords(exit) : 'ended'} with it still open`,
    );
    if (open.length > 0) io.progress(`window(s) left open by the command, ended now and marked failed: ${open.join(', ')}`);
  } catch (err) {
    failure = {
      message: redactSecrets(err instanceof Error ? err.message : String(err)),
      phase: err instanceof SqltallyError ? err.phase : 'workload',
      backend: description.id,
    };
  } finally {
    clearTimeout(timer);
    io.signal?.removeEventListener('abort', onInterrupt);
    // Never leave the command behind, whatever failed above.
    if (child) await (child as RunningChild).stop(opts.killGraceMs);
    io.onChild?.(null);
  }
  const closeFailure = await measured.close();

  const childCode = exit ? exitCodeOf(exit) : null;
  let verdict: { code: number; reason: string };
  const stopped = stoppedBy as StoppedBy;
  if (stopped === 'SIGINT' || stopped === 'SIGTERM') {
    verdict = { code: EXIT[stopped], reason: `sqltally was interrupted (${stopped}) and stopped the command` };
    failure ??= {
      message: `interrupted (${stopped}): the command was stopped; what committed anyway is in the window's late commits`,
      backend: description.id,
      phase: 'workload',
    };
  } else if (stopped === 'timeout') {
    verdict = { code: EXIT.timeout, reason: `the command ran past --timeout-ms ${opts.timeoutMs} and was stopped` };
    failure ??= {
      message: `timed out after ${opts.timeoutMs} ms (--timeout-ms): the command was stopped; what committed anyway is in the window's late commits`,
      backend: description.id,
      phase: 'workload',
    };
  } else if (failure) {
    verdict = { code: EXIT.failed, reason: `sqltally failed: ${failure.message}` };
  } else if (childCode !== null && childCode !== 0) {
    verdict = { code: childCode, reason: `the command's own exit code (it ${exitWords(exit!)})` };
    failure = { message: `the command ${exitWords(exit!)}`, backend: description.id, phase: 'workload' };
  } else if (measured.windows.some((w) => w.error || w.verdict.kind === 'incomplete')) {
    verdict = { code: EXIT.failed, reason: 'the command exited 0, but a window is incomplete or failed' };
  } else {
    verdict = {
      code: EXIT.ok,
      reason: measured.windows.length === 0 ? 'the command exited 0 (it opened no window)' : 'the command exited 0 and every window is assert or report',
    };
  }
  if (closeFailure && !failure) {
    failure = closeFailure;
    if (verdict.code === 0) verdict = { code: EXIT.failed, reason: `closing the session failed: ${closeFailure.message}` };
  }
  const run = (code: number, reason: string): CommandRun => ({
    mode: opts.named ? 'named' : 'exec',
    argv: opts.argv.map(redactSecrets),
    exitCode: exit ? (exit as ChildExit).code : null,
    signal: exit ? (exit as ChildExit).signal : null,
    stoppedBy: stopped,
    ...(strays > 0 ? { strayProcessesStopped: strays } : {}),
    sqltallyExitCode: code,
    exitReason: reason,
    wire: measured.wire,
  });
  return finishReport(measured, run, failure, verdict, { ...opts, out }, baseline, io.progress);
}

/** Ctrl-C and SIGTERM for exec: the first stops the command and reports; a second kills its group and leaves. */
function interruptibleExec(progress: (line: string) => void): { signal: AbortSignal; onChild: (pgid: number | null) => void; release: () => void } {
  let group: number | null = null;
  // The servers must outlive the first signal: the rows committed anyway are counted on them.
  const interrupt = interruptible(progress, {
    first: (signal) => `stopping the command; the report keeps what was measured (${signal} again to kill it and stop at once)`,
    second: () => {
      if (group === null) return;
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        // Gone already.
      }
    },
    keepBackends: true,
  });
  return { signal: interrupt.signal, onChild: (pgid) => (group = pgid), release: interrupt.release };
}

export const command: Command = {
  summary: 'run a command against a counted backend and report its window (any language, any client)',
  async run(argv) {
    let opts: ExecOptions | null;
    try {
      opts = parseExecArgs(argv);
    } catch (err) {
      return usageExit('exec', err);
    }
    if (!opts) {
      console.log(HELP);
      return EXIT.ok;
    }
    if (argsCheckedOnly('exec')) return EXIT.ok;
    const progress = (line: string): void => void process.stderr.write(`sqltally: ${line}\n`);
    const interrupt = interruptibleExec(progress);
    try {
      const result = await runExec(opts, opts.backend, { env: process.env, stdio: 'inherit', signal: interrupt.signal, onChild: interrupt.onChild, progress });
      return result.exitCode;
    } finally {
      interrupt.release();
    }
  },
};
