import { SqltallyError, redactSecrets } from '../shared/errors';
import { UsageError, helpPointer } from './usage';

/** A subcommand takes its own argv (after the command name) and returns the process exit code. */
export type Command = {
  summary: string;
  run(argv: string[]): Promise<number>;
};

// Loaded lazily so `sqltally backends` does not pay for loading every driver.
const COMMANDS: Record<string, () => Promise<Command>> = {
  backends: async () => (await import('./backends')).command,
  exec: async () => (await import('./exec')).command,
  gate: async () => (await import('./gate')).command,
  merge: async () => (await import('./merge')).command,
  proxy: async () => (await import('./proxy')).command,
  report: async () => (await import('./report')).command,
  run: async () => (await import('./run')).command,
};

function usage(): string {
  const lines = Object.keys(COMMANDS).map((name) => `  sqltally ${name}`);
  return ['usage: sqltally <command> [options]', '', 'commands:', ...lines, '', 'Run `sqltally <command> --help` for its options.'].join('\n');
}

/**
 * Watches standard output for a write that failed (`> /dev/full`, a closed pipe): unheard, the stream's 'error' ends the
 * process with a stack and no word on what was lost. Returns what failed, if anything, once output has settled.
 */
function watchStdout(): () => Promise<string | null> {
  let failed: string | null = null;
  const onError = (err: NodeJS.ErrnoException): void => {
    failed ??= err.message;
  };
  process.stdout.on('error', onError);
  return async () => {
    // A file's write fails at once but the stream reports it on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    process.stdout.off('error', onError);
    return failed;
  };
}

export async function main(argv: string[]): Promise<number> {
  const stdoutFailure = watchStdout();
  const code = await runCommand(argv);
  const failed = await stdoutFailure();
  if (failed === null) return code;
  console.error(`sqltally: could not write to standard output (${failed}): what it should have printed is lost`);
  return code === 0 ? 1 : code;
}

async function runCommand(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    console.log(usage());
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    console.error(`sqltally: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  try {
    const command = await load();
    return await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`sqltally ${name}: ${err.line}\n${helpPointer(name)}`);
      return 2;
    }
    // A SqltallyError already names backend, phase and statement; anything else is a bug worth its stack, which
    // may quote a connection string, so it is redacted like every other message.
    if (err instanceof SqltallyError) {
      console.error(`sqltally: ${err.message}`);
      // Bad configuration (an unknown backend id, a provider that does not exist) is bad usage, found before any work.
      return err.phase === 'config' ? 2 : 1;
    }
    console.error(redactSecrets(err instanceof Error ? (err.stack ?? err.message) : String(err)));
    return 2;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
