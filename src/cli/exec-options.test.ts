import { DEFAULT_BACKEND, DEFAULT_KILL_GRACE_MS, parseExecArgs, parseProxyArgs } from './exec-options';
import { UsageError } from './usage';

function refused(argv: string[], parse: (a: string[]) => unknown = parseExecArgs): string {
  try {
    parse(argv);
  } catch (err) {
    if (err instanceof UsageError) return err.line;
    throw err;
  }
  throw new Error(`accepted: ${argv.join(' ')}`);
}

describe('sqltally exec arguments', () => {
  it('split at the first --: the command keeps its own options and a second -- untouched', () => {
    const opts = parseExecArgs(['--backend', 'mariadb@10.11', '--timeout-ms', '5000', '--', 'psql', '-v', 'ON_ERROR_STOP=1', '--', '-f', 'x.sql'])!;
    expect(opts.backend).toBe('mariadb@10.11');
    expect(opts.argv).toEqual(['psql', '-v', 'ON_ERROR_STOP=1', '--', '-f', 'x.sql']);
    expect(opts.timeoutMs).toBe(5000);
  });

  it('default: postgres, the window named after the command file, no timeout, a 2 s grace, write a report', () => {
    expect(parseExecArgs(['--', '/usr/bin/pgbench', '-c', '4'])).toEqual({
      backend: DEFAULT_BACKEND,
      wire: 'auto',
      table: undefined,
      out: undefined,
      force: false,
      write: true,
      json: false,
      baseline: undefined,
      argv: ['/usr/bin/pgbench', '-c', '4'],
      name: 'pgbench',
      named: false,
      timeoutMs: undefined,
      killGraceMs: DEFAULT_KILL_GRACE_MS,
    });
  });

  it('--help wins, with or without a command', () => {
    expect(parseExecArgs(['--help'])).toBeNull();
    expect(parseExecArgs(['-h', '--', 'psql'])).toBeNull();
  });

  it('--wire takes auto, proxy or passive, for exec and proxy alike; exec defaults to auto, proxy to the proxy', () => {
    expect(parseExecArgs(['--wire', 'passive', '--', 'x'])!.wire).toBe('passive');
    expect(parseExecArgs(['--wire', 'proxy', '--', 'x'])!.wire).toBe('proxy');
    expect(parseExecArgs(['--', 'x'])!.wire).toBe('auto');
    expect(parseProxyArgs(['--wire', 'passive'])!.wire).toBe('passive');
    expect(parseProxyArgs(['--wire', 'auto'])!.wire).toBe('auto');
    expect(parseProxyArgs([])!.wire).toBe('proxy');
    expect(refused(['--wire', 'tap', '--', 'x'])).toBe('--wire takes auto, proxy or passive, got "tap"');
  });

  it('--table takes a name or schema.name', () => {
    expect(parseExecArgs(['--table', 'public.t_1', '--', 'x'])!.table).toEqual({ schema: 'public', name: 't_1' });
    expect(parseExecArgs(['--table', 'items', '--', 'x'])!.table).toEqual({ name: 'items' });
    expect(refused(['--table', 'a.b.c', '--', 'x'])).toBe('--table takes a table name or schema.name (letters, digits, _), got "a.b.c"');
    expect(refused(['--table', 't; drop table t', '--', 'x'])).toMatch(/^--table takes/);
  });

  it.each([
    [[], 'no command: name it after --, as in sqltally exec --backend postgres -- psql -f load.sql'],
    [['--backend', 'postgres'], 'no command: name it after --, as in sqltally exec --backend postgres -- psql -f load.sql'],
    [['--'], 'no command: name it after --, as in sqltally exec --backend postgres -- psql -f load.sql'],
    [['psql', '-c', 'x'], 'unknown option -c'],
    [['psql', '--', 'x'], '"psql" before --: put the command after --, as in sqltally exec --backend postgres -- psql -f load.sql'],
    [
      ['--backend', 'oracle', '--', 'x'],
      '--backend "oracle": unknown backend; use sqlite, mariadb, mysql, postgres (optionally with a version: mariadb@10.11, postgres@15)',
    ],
    [['--timeout-ms', '0', '--', 'x'], '--timeout-ms takes whole milliseconds from 1 to 86400000, got "0"'],
    [['--timeout-ms', '1.5', '--', 'x'], '--timeout-ms takes whole milliseconds from 1 to 86400000, got "1.5"'],
    [['--kill-grace-ms', '-1', '--', 'x'], '--kill-grace-ms got "-1", which looks like an option; write --kill-grace-ms=-1 if that is the value'],
    [
      ['--name', 'a', '--named-windows', '--', 'x'],
      '--name "a" and --named-windows contradict each other: with --named-windows the command names its own windows',
    ],
    [['--name', '', '--', 'x'], '--name takes 1 to 200 characters, got ""'],
    [['--out', 'r', '--no-write', '--', 'x'], '--out "r" and --no-write contradict each other: drop one'],
    [['--baseline', ' ', '--', 'x'], '--baseline is empty: name the baseline file to gate against'],
  ])('refuse %j in one line: %s', (argv, line) => {
    expect(refused(argv)).toBe(line);
  });
});

describe('sqltally proxy arguments', () => {
  it('take no command, and --env-file and --show-password besides the shared ones', () => {
    expect(parseProxyArgs(['--backend', 'sqlite', '--env-file', '/tmp/e', '--show-password'])).toMatchObject({
      backend: 'sqlite',
      envFile: '/tmp/e',
      showPassword: true,
    });
    expect(parseProxyArgs([])).toMatchObject({ backend: DEFAULT_BACKEND, envFile: undefined, showPassword: false });
    expect(refused(['psql'], parseProxyArgs)).toBe('unexpected argument "psql"');
    expect(refused(['--env-file', ''], parseProxyArgs)).toBe('--env-file is empty: name the file to write the environment to');
  });
});
