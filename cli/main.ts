import { SqltallyError } from '../containers/errors';

/** A subcommand takes its own argv (after the command name) and returns the process exit code. */
export type Command = {
  summary: string;
  run(argv: string[]): Promise<number>;
};

// Loaded lazily so `sqltally backends` does not pay for loading every driver.
const COMMANDS: Record<string, () => Promise<Command>> = {
  backends: async () => (await import('./backends')).command,
  gate: async () => (await import('./gate')).command,
  merge: async () => (await import('./merge')).command,
  run: async () => (await import('./run')).command,
};

function usage(): string {
  const lines = Object.keys(COMMANDS).map((name) => `  sqltally ${name}`);
  return ['usage: sqltally <command> [options]', '', 'commands:', ...lines, '', 'Run `sqltally <command> --help` for its options.'].join('\n');
}

export async function main(argv: string[]): Promise<number> {
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
    // A SqltallyError already names backend, phase and statement; anything else is a bug worth its stack.
    console.error(err instanceof SqltallyError ? `sqltally: ${err.message}` : err);
    return err instanceof SqltallyError ? 1 : 2;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
