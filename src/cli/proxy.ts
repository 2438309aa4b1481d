import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { interruptible } from './interrupt';
import type { StartedBackend } from '../backends/types';
import type { CommandRun } from '../report/schema';
import { connectionEnv, exportLines } from './child-env';
import { parseProxyArgs } from './exec-options';
import type { ProxyOptions } from './exec-options';
import { EXIT, checkBeforeStart, defaultOutDir, finishReport } from './finish';
import type { ExecResult } from './exec';
import type { Command } from './main';
import { argsCheckedOnly, usageExit } from './usage';
import { MeasuredWindows } from './windows';
import { describeWireChoice } from '../capture/wire-choice';

const HELP = `usage: sqltally proxy [options]

Starts (or reaches) the backend and serves the counting wire proxy and the control endpoint until Ctrl-C, for a
test suite or a shell started by hand: it prints where to connect (password masked) and writes the whole
environment, password and control token included, to a file of mode 0600 whose path it prints (source it with ".").
Windows are begun and ended through the control endpoint (see docs/exec.md); each name is one entry of the report
written at Ctrl-C, which sqltally gate reads.

options:
  --backend ID          sqlite, mariadb, mysql, postgres, optionally with a version; default postgres
  --wire proxy|passive  proxy (default): clients connect through the counting proxy; passive: they connect to the
                        server itself and a tcpdump copy of its loopback traffic is counted (needs CAP_NET_RAW; a
                        connection open at a window's end is then incomplete). auto is the proxy here
  --table [SCHEMA.]T    a table the windows write: its own counters are shown
  --env-file FILE       where to write the environment (mode 0600); default a new file in a private temporary
                        directory, removed when the proxy stops
  --show-password       print the password and token too, instead of ***
  --baseline FILE       gate the report against this baseline at the end
  --out DIR             output directory; default sqltally-report/<timestamp>
  --force               write into an existing non-empty output directory
  --json                print the report as JSON on stdout at the end
  --no-write            do not write files

exit: 0 stopped by Ctrl-C (SIGTERM) with every window assert or report; 1 a window incomplete, not ended, the gate
      failed or the report could not be written; 2 bad options.
`;

export interface ProxyIo {
  env: NodeJS.ProcessEnv;
  /** Aborted when serving should stop (Ctrl-C or SIGTERM in the CLI). */
  signal: AbortSignal;
  progress(line: string): void;
  /** Where the export lines go (stdout in the CLI). */
  print(line: string): void;
  /** Told the environment and its file once serving (tests connect with it). */
  onReady?(env: Record<string, string>, envFile: string): void;
}

/** Writes the environment a shell can source, readable by its owner only. */
function writeEnvFile(file: string, env: Record<string, string>): void {
  writeFileSync(file, '', { mode: 0o600 });
  chmodSync(file, 0o600);
  writeFileSync(file, `${exportLines(env, { maskSecrets: false }).join('\n')}\n`);
}

export async function runProxy(opts: ProxyOptions, backend: string | StartedBackend, io: ProxyIo): Promise<ExecResult> {
  const out = opts.out ?? defaultOutDir();
  const { baseline, problem } = await checkBeforeStart(opts, out);
  if (problem) {
    io.progress(problem);
    return { report: null, exitCode: EXIT.usage };
  }
  const measured = await MeasuredWindows.open(backend, opts.table, opts.wire, 'sqltally proxy serves windows to clients that outlive them');
  const description = measured.session.backend.description;
  io.progress(`ready ${description.id} (${description.serverVersion}, ${description.provider})`);
  io.progress(describeWireChoice(measured.wire));
  let privateDir: string | null = null;
  let failure = null;
  try {
    const endpoint = await measured.startEndpoint(null);
    const env = connectionEnv(description, measured.session.connection, endpoint);
    if (!opts.envFile) privateDir = mkdtempSync(path.join(os.tmpdir(), 'sqltally-proxy-'));
    const envFile = opts.envFile ?? path.join(privateDir!, 'env');
    writeEnvFile(envFile, env);
    const c = measured.session.connection;
    io.progress(
      c.kind === 'network'
        ? `connect through ${c.host}:${c.port} (user ${c.user}, database ${c.database}); windows at ${endpoint.url}`
        : `the database file is ${c.filename}; windows at ${endpoint.url}`,
    );
    io.progress(`the whole environment, password and token included, is in ${envFile} (mode 0600): . ${envFile}`);
    for (const line of exportLines(env, { maskSecrets: !opts.showPassword })) io.print(line);
    io.progress('serving until Ctrl-C');
    io.onReady?.(env, envFile);
    if (!io.signal.aborted) await new Promise((resolve) => io.signal.addEventListener('abort', resolve, { once: true }));
    const open = await measured.endOpenWindows(`sqltally proxy was stopped (${String(io.signal.reason ?? 'aborted')}) while it was open`);
    if (open.length > 0) io.progress(`window(s) still open at the stop, ended now and marked failed: ${open.join(', ')}`);
  } catch (err) {
    failure = { message: err instanceof Error ? err.message : String(err), backend: description.id, phase: 'workload' };
  } finally {
    if (privateDir) rmSync(privateDir, { recursive: true, force: true });
  }
  const closeFailure = await measured.close();
  failure ??= closeFailure;
  const bad = measured.windows.some((w) => w.error || w.verdict.kind === 'incomplete');
  const verdict = failure
    ? { code: EXIT.failed, reason: `sqltally failed: ${failure.message}` }
    : bad
      ? { code: EXIT.failed, reason: 'a window is incomplete or failed' }
      : { code: EXIT.ok, reason: measured.windows.length === 0 ? 'stopped; no window was measured' : 'stopped; every window is assert or report' };
  const run = (code: number, reason: string): CommandRun => ({
    mode: 'proxy',
    argv: [],
    exitCode: null,
    signal: null,
    stoppedBy: null,
    sqltallyExitCode: code,
    exitReason: reason,
    wire: measured.wire,
  });
  return finishReport(measured, run, failure, verdict, { ...opts, out }, baseline, io.progress);
}

export const command: Command = {
  summary: 'serve the counting proxy and the control endpoint until Ctrl-C, printing where to connect',
  async run(argv) {
    let opts: ProxyOptions | null;
    try {
      opts = parseProxyArgs(argv);
    } catch (err) {
      return usageExit('proxy', err);
    }
    if (!opts) {
      console.log(HELP);
      return EXIT.ok;
    }
    if (argsCheckedOnly('proxy')) return EXIT.ok;
    const progress = (line: string): void => void process.stderr.write(`sqltally: ${line}\n`);
    // Ctrl-C is how the proxy ends: its server must stay up until the open windows are read and the report written.
    const stop = interruptible(progress, {
      first: (signal) => `ending open windows and writing the report (${signal} again to stop at once)`,
      keepBackends: true,
    });
    try {
      return (await runProxy(opts, opts.backend, { env: process.env, signal: stop.signal, progress, print: (line) => console.log(line) })).exitCode;
    } finally {
      stop.release();
    }
  },
};
