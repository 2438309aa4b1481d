import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { main } from './main';
import { CHECK_ARGS_ENV } from './usage';

/**
 * SQLTALLY_CLI_CHECK_ARGS=1 (how docs/shell-blocks.test.ts checks documented command lines): every command stops
 * once its arguments are accepted, says so and exits 0, reading and writing nothing; bad arguments still exit 2.
 */
const ACCEPTED: Record<string, string[]> = {
  backends: ['backends', '--check', '--json', 'mariadb'],
  exec: ['exec', '--backend', 'postgres', '--named-windows', '--', 'false'],
  gate: ['gate', '--report', 'missing-dir', '--baseline', 'missing.json', '--update'],
  merge: ['merge', '--out', 'merged', 'missing-a', 'missing-b'],
  proxy: ['proxy', '--backend', 'postgres'],
  report: ['report', 'missing-dir'],
  run: ['run', '--backends', 'sqlite', '--rows', '10', '--out', 'out'],
};

describe(`${CHECK_ARGS_ENV}=1`, () => {
  let dir: string;
  let cwd: string;
  let said: string[];
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-check-args-'));
    cwd = process.cwd();
    process.chdir(dir);
    process.env[CHECK_ARGS_ENV] = '1';
    said = [];
    const capture = (m: unknown): void => void said.push(String(m));
    jest.spyOn(console, 'error').mockImplementation(capture);
    jest.spyOn(console, 'log').mockImplementation(capture);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    delete process.env[CHECK_ARGS_ENV];
    process.chdir(cwd);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each(Object.entries(ACCEPTED))('sqltally %s: accepted, nothing started, nothing written', async (name, argv) => {
    expect(await main(argv)).toBe(0);
    expect(said).toEqual([`sqltally ${name}: arguments accepted (${CHECK_ARGS_ENV}=1: nothing started)`]);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it.each([
    [['run', '--strategy', 'x'], /unknown option --strategy/],
    [['exec', '--backend', 'postgres', '--named-window', '--', 'false'], /unknown option --named-window/],
    [['gate', '--report', 'r'], /--baseline is required/],
  ])('bad arguments still exit 2: %j', async (argv, why) => {
    expect(await main(argv)).toBe(2);
    expect(said.join('\n')).toMatch(why);
  });
});
