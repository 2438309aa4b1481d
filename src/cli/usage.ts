import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { SqltallyError } from '../shared/errors';

/**
 * Bad command-line input (a flag, its value, a missing argument). `line` is the whole story in one line, naming the
 * flag and the value; `sqltally` prints it and exits 2 without starting or writing anything.
 */
export class UsageError extends SqltallyError {
  readonly line: string;
  constructor(line: string) {
    super(line, { phase: 'config' });
    this.name = 'UsageError';
    this.line = line;
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** node:util's messages are several sentences with advice for another CLI; this says the same in one line. */
function usageLine(err: unknown, argv: readonly string[]): string {
  const e = err as { code?: string; message?: string };
  const message = e.message ?? String(err);
  const option = /'(-[^' ]+)/.exec(message)?.[1];
  // The occurrence whose next word starts with a dash is the ambiguous one: a flag given twice (`--rows 100 --rows
  // --no-write`) has an earlier, good value that must not be named instead.
  const valueAfter = (flag: string | undefined): string | undefined => {
    const at = argv.flatMap((a, i) => (a === flag ? [i] : []));
    const i = at.find((j) => argv[j + 1]?.startsWith('-')) ?? at.at(-1) ?? -1;
    return i >= 0 ? argv[i + 1] : undefined;
  };
  switch (e.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${option ?? message}`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument "${/'([^']*)'/.exec(message)?.[1] ?? message}"`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      if (/does not take an argument/.test(message))
        return `${option} takes no value, got "${argv.find((a) => a.startsWith(`${option}=`))?.slice((option ?? '').length + 1) ?? ''}"`;
      if (/ambiguous/.test(message)) {
        const value = valueAfter(option);
        return `${option} got "${value}", which looks like an option; write ${option}=${value} if that is the value`;
      }
      return `${option} needs a value`;
    }
    default:
      return message.split('\n')[0] ?? message;
  }
}

/** `parseArgs` (strict) whose errors are UsageErrors of one line. */
export function parseFlags<O extends Options>(
  argv: string[],
  options: O,
  allowPositionals = false,
): ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: boolean }>> {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals });
  } catch (err) {
    throw new UsageError(usageLine(err, argv));
  }
}

/** Printed under a UsageError's line: where the options are, without burying the line under them. */
export function helpPointer(command: string): string {
  return `run "sqltally ${command} --help" for the options`;
}

/** The environment variable that makes a command stop once its arguments are accepted. */
export const CHECK_ARGS_ENV = 'SQLTALLY_CLI_CHECK_ARGS';

/**
 * With SQLTALLY_CLI_CHECK_ARGS=1 a command stops once its arguments are parsed and checked, before it starts,
 * reads or writes anything, and says so: the documented command lines are checked this way (docs/shell-blocks.test.ts)
 * without minutes of work each. Returns true when the command must return 0 now.
 */
export function argsCheckedOnly(command: string): boolean {
  if (process.env[CHECK_ARGS_ENV] !== '1') return false;
  console.error(`sqltally ${command}: arguments accepted (${CHECK_ARGS_ENV}=1: nothing started)`);
  return true;
}

/** Every command's answer to bad options: the UsageError's line and where the options are, exit code 2; anything else is rethrown. */
export function usageExit(command: string, err: unknown): 2 {
  if (!(err instanceof UsageError)) throw err;
  console.error(`sqltally ${command}: ${err.line}\n${helpPointer(command)}`);
  return 2;
}
