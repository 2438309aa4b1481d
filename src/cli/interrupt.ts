import { deferSignalCleanup } from '../backends/live';

/** How a command answers Ctrl-C and SIGTERM. */
export interface InterruptOptions {
  /** The line printed at the first signal: what the command does now, and what a second signal does. */
  first(signal: NodeJS.Signals): string;
  /** Run at the second signal, before the process ends by it (kill what the command started). */
  second?(): void;
  /**
   * Keep the backends running past the first signal (live.ts otherwise stops them at once): the command still reads
   * them to finish its report.
   */
  keepBackends: boolean;
}

/** An installed handler: `signal` aborts at the first Ctrl-C or SIGTERM; `release` uninstalls it. */
export interface Interruptible {
  signal: AbortSignal;
  release(): void;
}

/**
 * The CLI's Ctrl-C and SIGTERM: the first aborts `signal` and says so (the command stops and reports what it has);
 * the second uninstalls the handler and raises the signal again, so the process ends by it.
 */
export function interruptible(progress: (line: string) => void, options: InterruptOptions): Interruptible {
  const interrupt = new AbortController();
  const undefer = options.keepBackends ? deferSignalCleanup() : () => undefined;
  const on = (signal: NodeJS.Signals): void => {
    if (interrupt.signal.aborted) {
      options.second?.();
      release();
      process.kill(process.pid, signal);
      return;
    }
    progress(`${signal}: ${options.first(signal)}`);
    interrupt.abort(signal);
  };
  const onSigint = (): void => on('SIGINT');
  const onSigterm = (): void => on('SIGTERM');
  const release = (): void => {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
    undefer();
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  return { signal: interrupt.signal, release };
}
