import { SqltallyError } from '../shared/errors';
import { BackendsReportSchema, command } from './backends';

/** Runs the command with console output captured. */
async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = jest.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const error = jest.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  try {
    const code = await command.run(argv);
    return { code, out: out.join('\n'), err: err.join('\n') };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

describe('sqltally backends', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const key of ['SQLTALLY_REQUIRE', 'SQLTALLY_MYSQL_PROVIDER', 'SQLTALLY_MYSQL_URL']) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });

  it('exits 2 with one line naming an unknown option, and where the usage is', async () => {
    const r = await run(['--bogus']);
    expect(r.code).toBe(2);
    expect(r.err).toBe('sqltally backends: unknown option --bogus\nrun "sqltally backends --help" for the options');
  });

  it('prints its usage with --help', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('--check');
  });

  it('rejects an unknown backend id before starting anything', async () => {
    await expect(run(['--check', 'oracle'])).rejects.toBeInstanceOf(SqltallyError);
  });

  it('checks the embedded SQLite and reports it as JSON that matches its schema', async () => {
    const r = await run(['--check', '--json', 'sqlite']);
    expect(r.code).toBe(0);
    const report = BackendsReportSchema.parse(JSON.parse(r.out));
    expect(report.backends).toHaveLength(1);
    expect(report.backends[0]).toMatchObject({ id: 'sqlite', available: true, provider: 'embedded', check: { ok: true, flavour: 'sqlite' } });
    expect(report.backends[0]?.check?.serverVersion).toMatch(/^3\.\d+\.\d+$/);
  });

  it('exits 1 when SQLTALLY_REQUIRE names an unavailable backend', async () => {
    // External forced without a URL: unavailable on any machine.
    process.env['SQLTALLY_MYSQL_PROVIDER'] = 'external';
    delete process.env['SQLTALLY_MYSQL_URL'];
    process.env['SQLTALLY_REQUIRE'] = 'sqlite,mysql';
    const r = await run(['sqlite']);
    expect(r.code).toBe(1);
    expect(r.out).toContain('required by SQLTALLY_REQUIRE but unavailable: mysql');
  });
});
