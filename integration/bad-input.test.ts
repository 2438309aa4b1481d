// @waits 20: the CLI on bad input against every backend.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { cli } from './cli';
import { SqltallyError } from '../src/shared/errors';
import { resolveBackend, startBackend } from '../src/backends/registry';
import { ReportSchema, readReportFile } from '../src/report/schema';
import { MAX_ROWS_PER_CELL } from '../src/run/plan';
import { findLeaks } from './global-teardown';
import { START_TIMEOUT_MS, describeEachBackend, integrationBackends, withBackend } from './harness';
import { tsChild } from './ts-child';
import { itForProvider, type ProviderTable } from './faults/providers';

// Bad input that needs something real at the other end: a private database server, the Redis that may run on this
// machine, the built run itself interrupted mid-workload. The cases that need nothing are in src/cli/bad-input.test.ts.
jest.setTimeout(START_TIMEOUT_MS);

const ROOT = path.resolve(__dirname, '..');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The provider this run forces on every server backend, if any: the URL cases below run under it. */
const FORCED = process.env['SQLTALLY_PROVIDER'] || 'none';

/** A TCP listener of the test's own: one that speaks nothing, or one that answers any line like Redis does. */
async function listen(behaviour: 'silent' | 'redisLike'): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    if (behaviour === 'redisLike') s.on('data', () => s.write("-ERR unknown command 'QUIT'\r\n"));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    // close() alone waits for every connection to end, and a silent listener's peers may wait for it forever.
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

// A URL that is set always wins, whatever provider the run forces (SQLTALLY_PROVIDER is this run's own): the error
// is about the address, never a container or a local server started instead.
describe(`a URL at a port that is not a database, under SQLTALLY_PROVIDER=${FORCED}`, () => {
  it.each([
    ['mariadb', 'mysql', 'MySQL/MariaDB', 'silent', 'accepted the connection but sent no answer in'],
    ['postgres', 'postgres', 'PostgreSQL', 'silent', 'accepted the connection but sent no answer in'],
    ['mariadb', 'mysql', 'MySQL/MariaDB', 'redisLike', 'answered, but not as a MySQL/MariaDB server (it sent "-ERR'],
    ['postgres', 'postgres', 'PostgreSQL', 'redisLike', 'answered, but not as a PostgreSQL server (it sent "-ERR'],
  ] as const)(
    '%s: a %s://... URL at a listener that is not a %s server (%s) is a SqltallyError naming backend, phase connect, what answered and the redacted URL',
    async (backend, scheme, _protocol, behaviour, says) => {
      const server = await listen(behaviour);
      try {
        const { port } = server;
        const variable = `SQLTALLY_${backend.toUpperCase()}_URL`;
        const err = await startBackend(backend, { ...process.env, [variable]: `${scheme}://u:hunter2@127.0.0.1:${port}/d` }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(SqltallyError);
        const message = (err as SqltallyError).message;
        expect(message).toContain(`[backend ${backend}, provider external, phase connect] 127.0.0.1:${port} ${says}`);
        expect(message).toContain(`from ${variable}=${scheme}://u:***@127.0.0.1:${port}/d`);
        expect(message).not.toContain('hunter2');
      } finally {
        await server.close();
      }
    },
  );

  it.each(['testcontainers', 'local'])(
    'SQLTALLY_MARIADB_PROVIDER=%s beside SQLTALLY_MARIADB_URL: sqltally run refuses both as bad usage (exit 2), naming both, the password masked',
    async (provider) => {
      const env = {
        SQLTALLY_MARIADB_PROVIDER: provider,
        SQLTALLY_MARIADB_URL: 'mariadb://u:hunter2@127.0.0.1:9/d?password=hunter2',
        SQLTALLY_RUN_ID: `conflict${process.pid}`,
      };
      const { code, said } = await cli(['run', '--backends', 'mariadb', '--rows', '10', '--hot-rows', '', '--no-write'], env);
      expect(code).toBe(2);
      expect(said).toContain(
        `SQLTALLY_MARIADB_PROVIDER=${provider} and SQLTALLY_MARIADB_URL=mariadb://u:***@127.0.0.1:9/d?password=*** are both set for mariadb`,
      );
      expect(said).not.toContain('hunter2');
      expect(findLeaks({ ...process.env, ...env })).toEqual([]);
    },
  );
});

// A password in the query string of a URL that the server refuses.
const ANY_SERVER: ProviderTable = {
  local: 'runs',
  testcontainers: 'runs',
  external: 'runs',
  embedded: { notSupported: 'SQLite has no URL and no server to refuse one' },
};
describeEachBackend(
  (b) => {
    const id = b.id;
    const server = withBackend(id);
    let scratch = '';
    beforeAll(() => {
      scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-bad-input-'));
    });
    afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

    // The server only lends its address: the run under test reaches it through the URL, over this run's forced provider.
    itForProvider(
      b,
      ANY_SERVER,
      `a ?password= in a refused URL never reaches stderr, the failure record or the report, and the run fails (SQLTALLY_PROVIDER=${FORCED})`,
      async () => {
        const { connection } = server();
        if (connection.kind !== 'network') throw new Error('expected a network backend');
        const scheme = id === 'postgres' ? 'postgres' : 'mariadb';
        // A user the private server does not have: refused by MariaDB ("access denied") and PostgreSQL (no such role).
        const url = `${scheme}://nobody@${connection.host}:${connection.port}/sqltally?password=hunter2&sslpassword=hunter2`;
        const variable = `SQLTALLY_${id.toUpperCase()}_URL`;
        const out = path.join(scratch, 'report');
        const strategy = id === 'postgres' ? 'pg.unnest' : 'mariadb.batch';
        const { code, said } = await cli(['run', '--backends', id, '--strategies', strategy, '--rows', '10', '--hot-rows', '', '--out', out], {
          [variable]: url,
        });
        expect(code).toBe(1);
        expect(said).toContain(`[backend ${id}, provider external, phase connect]`);
        expect(said).toContain(`${scheme}://nobody@${connection.host}:${connection.port}/sqltally?password=***&sslpassword=***`);
        expect(said).not.toContain('hunter2');
        const report = readReportFile(out);
        expect(report.status).toBe('failed');
        expect(report.failure).toMatchObject({ backend: id, phase: 'connect' });
        for (const file of fs.readdirSync(out)) expect(fs.readFileSync(path.join(out, file), 'utf8')).not.toContain('hunter2');
      },
    );
  },
  (b) => b.id === 'mariadb' || b.id === 'postgres',
);

/** Which providers can give one server under two ids: only a local install, named by its version label. */
const ONE_INSTALL_TWO_IDS: ProviderTable = {
  local: 'runs',
  testcontainers: { notSupported: 'every start is a container of its own, so mariadb and a variant id are never one server' },
  external: { notSupported: "a URL names one server for one id; which ids share it is the person's choice, not sqltally's to refuse" },
  embedded: { notSupported: 'MariaDB is never embedded' },
};

describe('two ids for one server', () => {
  const mariadb = integrationBackends().find((b) => b.id === 'mariadb');
  const title = 'mariadb and its own variant id are refused before anything starts';
  if (!mariadb?.available) it.skip(`${title}: skipped: ${mariadb ? mariadb.reason : 'mariadb is not in this run'}`, () => undefined);
  else
    itForProvider(mariadb, ONE_INSTALL_TWO_IDS, title, async () => {
      const plain = await resolveBackend('mariadb');
      const label = plain.available ? plain.expectedVersion?.split('.').slice(0, 2).join('.') : undefined;
      if (!label) throw new Error('the local mariadb has no version to name its variant by');
      // A run id of its own: anything this run leaves is told apart from the servers other test workers start meanwhile.
      const own = { SQLTALLY_RUN_ID: `twoids${process.pid}` };
      const { code, said } = await cli(['run', '--backends', `mariadb,mariadb@${label}`, '--no-write'], own);
      expect(code).toBe(2);
      expect(said).toContain(`--backends mariadb and mariadb@${label} are the same server here (local ${plain.available ? plain.origin : ''}`);
      expect(said).not.toContain('start mariadb');
      expect(findLeaks({ ...process.env, ...own })).toEqual([]);
    });
});

describe('standard output that cannot be written (> /dev/full)', () => {
  it('run --json --no-write: a clear message on stderr, exit 1, no stack', async () => {
    const full = fs.openSync('/dev/full', 'w');
    const code = `require('./src/cli/main').main(['run', '--backends', 'sqlite', '--strategies', 'better-sqlite3.multirow', '--rows', '10', '--hot-rows', '', '--no-write', '--json']).then((c) => { process.exitCode = c; });`;
    const child = spawn(process.execPath, [...tsChild(), '-e', code], { cwd: ROOT, env: process.env, stdio: ['ignore', full, 'pipe'] });
    fs.closeSync(full);
    let err = '';
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const exit = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
    expect(err).toContain('sqltally: could not write to standard output (ENOSPC: no space left on device, write): what it should have printed is lost');
    expect(err).not.toMatch(/\n\s+at |Unhandled 'error' event/);
    expect(exit).toBe(1);
  });
});

describe('sqltally run ends with a summary line', () => {
  it('counting cells by verdict', async () => {
    const { code, said } = await cli([
      'run',
      '--backends',
      'sqlite',
      '--strategies',
      'better-sqlite3.multirow',
      '--rows',
      '20',
      '--hot-rows',
      '',
      '--no-write',
      '--json',
    ]);
    expect(code).toBe(0);
    expect(said.trimEnd().split('\n').pop()).toBe('sqltally: 1 cell(s): 1 assert, 0 report, 0 incomplete');
  });
});

describe(`Ctrl-C during a long workload (better-sqlite3.multirow at the ${MAX_ROWS_PER_CELL} row maximum)`, () => {
  it('stops the run at the window in flight: a failed report on stdout, exit 130, no data directory behind', async () => {
    const env = { ...process.env, SQLTALLY_RUN_ID: `${process.env['SQLTALLY_RUN_ID'] ?? 'bad'}int${process.pid}` };
    const code = `require('./src/cli/main').main(['run', '--backends', 'sqlite', '--strategies', 'better-sqlite3.multirow', '--rows', '${MAX_ROWS_PER_CELL}', '--hot-rows', '', '--no-write', '--json']).then((c) => { process.exitCode = c; });`;
    const child = spawn(process.execPath, [...tsChild(), '-e', code], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    let out = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (c, s) => r({ code: c, signal: s })));
    const deadline = Date.now() + START_TIMEOUT_MS / 2;
    while (!err.includes('ready ') && child.exitCode === null && Date.now() < deadline) await sleep(50);
    expect(err).toContain('ready sqlite');
    // Inside the workload: the cell has 6 windows of 500 000 rows each, seconds of synchronous inserts.
    await sleep(1_000);
    expect(findLeaks(env).some((l) => l.kind === 'directory')).toBe(true);
    child.kill('SIGINT');
    const exit = await exited;
    expect(exit).toEqual({ code: 130, signal: null });
    expect(err).toContain('SIGINT: stopping after the window in flight');
    const report = ReportSchema.parse(JSON.parse(out));
    expect(report.status).toBe('failed');
    expect(report.failure?.message).toMatch(/^interrupted \(SIGINT\) after \d+ cell\(s\): the cells measured before are kept/);
    // The cell in flight never claims success.
    for (const c of report.cells) expect(c.verdict.kind).not.toBe('assert');
    expect(findLeaks(env)).toEqual([]);
  });
});
