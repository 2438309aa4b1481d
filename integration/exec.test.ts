// @waits 60: clients nobody here wrote (psql, the mariadb CLI, curl, sqlite3) run under sqltally exec and proxy.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { withSqlClient } from '../src/backends/sql-client';
import type { BackendName, NetworkConnection, StartedBackend, WireProtocol } from '../src/backends/types';
import { groupMembers, resolveCommand } from '../src/cli/child';
import { parseExecArgs, parseProxyArgs } from '../src/cli/exec-options';
import { runExec } from '../src/cli/exec';
import type { ExecIo } from '../src/cli/exec';
import { runProxy } from '../src/cli/proxy';
import { readReportFile } from '../src/report/schema';
import type { Report, Window } from '../src/report/schema';
import { cli } from './cli';
import { START_TIMEOUT_MS, describeEachBackend, withBackend } from './harness';
import { tsChild } from './ts-child';

/**
 * `sqltally exec` and `sqltally proxy` around real clients from Debian's packages, on the worker's pooled servers: each
 * count checked against the client's own work and the rows a fresh connection finds afterwards.
 */
jest.setTimeout(START_TIMEOUT_MS);

const ROOT = path.resolve(__dirname, '..');
const ROWS = 100;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A client a backend's users have at hand; a missing one is a visible skip. */
const CLIENT = {
  postgres: { binary: 'psql', package: 'postgresql-client-15' },
  mariadb: { binary: 'mariadb', package: 'mariadb-client' },
} as const satisfies Partial<Record<BackendName, { binary: string; package: string }>>;
type ServerBackend = keyof typeof CLIENT;

/** The shell line that runs one SQL text with the backend's own CLI, connected through the environment exec sets. */
const RUN_SQL: Record<ServerBackend, (sql: string) => string> = {
  postgres: (sql) => `psql -X -q -v ON_ERROR_STOP=1 -c "${sql}"`,
  mariadb: (sql) => `mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "${sql}"`,
};

/** Runs a file of statements with the CLI, one statement per line. */
const RUN_FILE: Record<ServerBackend, (file: string) => string[]> = {
  postgres: (file) => ['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', file],
  mariadb: (file) => ['sh', '-c', 'exec mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" < "$1"', 'sh', file],
};

/** What each client sends for a file of ROWS single-row INSERTs: one statement per wire request, then its goodbye. */
const FILE_OF_INSERTS: Record<ServerBackend, { commands: Record<string, number>; roundTrips: number }> = {
  postgres: { commands: { Query: ROWS, Terminate: 1 }, roundTrips: ROWS },
  mariadb: { commands: { COM_QUERY: ROWS, COM_QUIT: 1 }, roundTrips: ROWS },
};

/** One `RUN_SQL` inside a named window: its statement, and its goodbye. */
const ONE_STATEMENT: Record<ServerBackend, Record<string, number>> = {
  postgres: { Query: 1, Terminate: 1 },
  mariadb: { COM_QUERY: 1, COM_QUIT: 1 },
};

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

function protocolOf(b: StartedBackend): WireProtocol {
  const protocol = b.description.capabilities.wireProtocol;
  if (!protocol) throw new Error(`${b.description.id} speaks no wire protocol`);
  return protocol;
}

async function sql<T = Record<string, unknown>>(b: StartedBackend, text: string): Promise<T[]> {
  return withSqlClient(protocolOf(b), network(b), { backend: b.description.id }, (c) => c.query<T & Record<string, unknown>>(text));
}

async function rowCount(b: StartedBackend, table: string): Promise<number> {
  const [row] = await sql<{ n: unknown }>(b, `SELECT count(*) AS n FROM ${table}`);
  return Number(row?.n);
}

/** The command's output goes to a file (read when a test fails), stdin nowhere. */
function io(scratch: string, over: Partial<ExecIo> = {}): ExecIo & { said: string[] } {
  const said: string[] = [];
  const log = fs.openSync(path.join(scratch, 'command.log'), 'a');
  return { env: process.env, stdio: ['ignore', log, log], progress: (line) => void said.push(line), said, ...over };
}

function execOptions(argv: string[]) {
  const opts = parseExecArgs(argv);
  if (!opts) throw new Error('help');
  return opts;
}

function only(report: Report | null): Window {
  expect(report?.windows).toHaveLength(1);
  return report!.windows![0]!;
}

describeEachBackend(
  (b) => {
    const id = b.backend as ServerBackend;
    const client = CLIENT[id];
    const server = withBackend(b.id);
    const have = resolveCommand(client.binary, process.env).ok && resolveCommand('curl', process.env).ok;
    const maybe = have ? it : it.skip;
    const skipped = have ? '' : ` (skipped: ${client.binary} or curl not installed: apt-get install ${client.package} curl)`;
    let scratch = '';
    let table = '';
    let seq = 0;
    beforeAll(() => {
      scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-exec-'));
    });
    afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));
    beforeEach(async () => {
      seq += 1;
      table = `exec_${process.pid}_${seq}`;
      await sql(server(), `CREATE TABLE ${table} (id int)`);
    });

    maybe(`${client.binary} running a file of ${ROWS} INSERTs: each layer exact, assert, a report sqltally gate approves and passes${skipped}`, async () => {
      const file = path.join(scratch, `${table}.sql`);
      fs.writeFileSync(file, Array.from({ length: ROWS }, (_, i) => `INSERT INTO ${table} VALUES (${i});\n`).join(''));
      const out = path.join(scratch, `${table}-report`);
      // The proxy by name: exec's default may take the passive capture (integration/passive.test.ts compares the two).
      const result = await runExec(execOptions(['--wire', 'proxy', '--name', 'load', '--out', out, '--', ...RUN_FILE[id](file)]), server(), io(scratch));
      expect(result.exitCode).toBe(0);
      const w = only(result.report);
      expect(w.verdict.kind).toBe('assert');
      expect(w.layers.wire).toMatchObject({
        commands: FILE_OF_INSERTS[id].commands,
        roundTrips: FILE_OF_INSERTS[id].roundTrips,
        rowsAffected: ROWS,
        connections: 1,
      });
      expect(w.layers.server?.summary).toMatchObject({ statements: ROWS, inserts: ROWS, rowsInserted: ROWS });
      expect(await rowCount(server(), table)).toBe(ROWS);
      expect(result.report?.command).toMatchObject({
        mode: 'exec',
        exitCode: 0,
        stoppedBy: null,
        sqltallyExitCode: 0,
        wire: { requested: 'proxy', capture: 'proxy', reason: '--wire proxy' },
      });

      const baseline = path.join(scratch, `${table}-baseline.json`);
      expect((await cli(['gate', '--report', out, '--baseline', baseline, '--update'])).code).toBe(0);
      const gate = await cli(['gate', '--report', out, '--baseline', baseline]);
      expect(gate.said).toContain('sqltally gate: PASS');
      expect(gate.code).toBe(0);
      expect(readReportFile(out).windows?.[0]?.name).toBe('load');
    });

    maybe(`a shell loop with curl opens a window per row count through the control endpoint; 401, 404 and 409 on bad requests${skipped}`, async () => {
      const codes = path.join(scratch, `${table}-codes`);
      const script = [
        'set -e',
        'auth="Authorization: Bearer $SQLTALLY_CONTROL_TOKEN"',
        'for n in 1 10; do',
        '  curl -fsS -X POST -H "$auth" "$SQLTALLY_CONTROL_URL/windows/insert-$n/begin" >/dev/null',
        `  ${RUN_SQL[id](`INSERT INTO ${table} VALUES $(seq -s, 1 $n | sed 's/[0-9][0-9]*/(&)/g')`)}`,
        '  curl -fsS -X POST -H "$auth" "$SQLTALLY_CONTROL_URL/windows/insert-$n/end" >/dev/null',
        'done',
        `code() { curl -s -o /dev/null -w '%{http_code}\\n' -X POST "$@" >> ${codes}; }`,
        'code "$SQLTALLY_CONTROL_URL/windows/insert-1/begin"',
        'code -H "$auth" "$SQLTALLY_CONTROL_URL/windows/never/end"',
        'code -H "$auth" "$SQLTALLY_CONTROL_URL/windows/insert-1/end"',
      ].join('\n');
      const out = path.join(scratch, `${table}-report`);
      const result = await runExec(execOptions(['--named-windows', '--out', out, '--', 'sh', '-c', script]), server(), io(scratch));
      expect(fs.readFileSync(codes, 'utf8').trim().split('\n')).toEqual(['401', '404', '409']);
      expect(result.exitCode).toBe(0);
      // Connections may outlive a named window, and only the proxy can settle them: the default takes it, saying so.
      expect(result.report?.command?.wire).toEqual({ requested: 'auto', capture: 'proxy', reason: expect.stringMatching(/^--named-windows: /) });
      const windows = result.report?.windows ?? [];
      expect(windows.map((w) => [w.name, w.source, w.verdict.kind, w.layers.server?.summary.rowsInserted, w.layers.wire?.rowsAffected])).toEqual([
        ['insert-1', 'control', 'assert', 1, 1],
        ['insert-10', 'control', 'assert', 10, 10],
      ]);
      for (const w of windows) expect(w.layers.wire?.commands).toEqual(ONE_STATEMENT[id]);
      expect(await rowCount(server(), table)).toBe(11);
      const baseline = path.join(scratch, `${table}-baseline.json`);
      expect((await cli(['gate', '--report', out, '--baseline', baseline, '--update'])).said).toContain('approved 0 cell(s)');
      expect(JSON.parse(fs.readFileSync(baseline, 'utf8')).windows.map((w: { name: string }) => w.name)).toEqual(['insert-1', 'insert-10']);
    });

    maybe(`a command that exits 3: its exit code passes through, the report is failed and says so${skipped}`, async () => {
      const result = await runExec(
        execOptions(['--no-write', '--', 'sh', '-c', `${RUN_SQL[id](`INSERT INTO ${table} VALUES (1)`)}; exit 3`]),
        server(),
        io(scratch),
      );
      expect(result.exitCode).toBe(3);
      expect(result.report).toMatchObject({
        status: 'failed',
        failure: { message: 'the command exited with code 3' },
        command: { exitCode: 3, sqltallyExitCode: 3 },
      });
      const w = only(result.report);
      expect(w.error?.message).toBe('the command exited with code 3');
      expect(w.verdict.kind).toBe('incomplete');
      expect(w.layers.server?.summary.rowsInserted).toBe(1);
    });

    maybe(`a command past --timeout-ms: its whole process group is stopped and the rows committed anyway are counted${skipped}`, async () => {
      let group: number | null = null;
      // Ignores SIGTERM, so only SIGKILL after the grace ends it; a statement a second keeps committing meanwhile.
      const loop = `trap '' TERM; while :; do ${RUN_SQL[id](`INSERT INTO ${table} VALUES (1)`)}; done`;
      const result = await runExec(
        // The proxy cuts its clients at the give-up; what a capture does there is integration/passive.test.ts's.
        execOptions(['--wire', 'proxy', '--no-write', '--table', table, '--timeout-ms', '1500', '--kill-grace-ms', '300', '--', 'sh', '-c', loop]),
        server(),
        {
          ...io(scratch),
          onChild: (pgid) => (group ??= pgid),
        },
      );
      expect(result.exitCode).toBe(124);
      expect(result.report?.command).toMatchObject({ stoppedBy: 'timeout', signal: 'SIGKILL', sqltallyExitCode: 124 });
      expect(result.report?.failure?.message).toMatch(/^timed out after 1500 ms \(--timeout-ms\): the command was stopped/);
      expect(group).not.toBeNull();
      expect(groupMembers(group!)).toEqual([]);
      const w = only(result.report);
      expect(w.verdict.kind).toBe('incomplete');
      const truth = await rowCount(server(), table);
      expect(w.lateCommits).toMatchObject({ table, rowsAfterwards: truth });
      expect(w.lateCommits!.rowsCommittedAfterGivingUp).toBe(truth - w.lateCommits!.rowsAtGiveUp!);
      await sleep(500);
      expect(await rowCount(server(), table)).toBe(truth);
    });

    maybe(`a client connecting straight to the server's own port, around the proxy, is never assert${skipped}`, async () => {
      const direct = id === 'postgres' ? `PGPORT=${network(server()).port}` : `MYSQL_TCP_PORT=${network(server()).port}`;
      const result = await runExec(
        // A passive capture (the default where it can run) counts such a client: going around is a proxy matter.
        execOptions(['--wire', 'proxy', '--no-write', '--', 'sh', '-c', `${direct} ${RUN_SQL[id](`INSERT INTO ${table} VALUES (1), (2)`)}`]),
        server(),
        io(scratch),
      );
      const w = only(result.report);
      expect(w.layers.wire?.commandsTotal ?? 0).toBe(0);
      expect(await rowCount(server(), table)).toBe(2);
      expect(w.verdict.kind).not.toBe('assert');
    });

    maybe(
      `sqltally proxy: prints where to connect with the password masked, writes the environment to a 0600 file, and reports its windows at the stop${skipped}`,
      async () => {
        const stop = new AbortController();
        const printed: string[] = [];
        let env: Record<string, string> = {};
        let envFile = '';
        const serving = runProxy(parseProxyArgs(['--no-write'])!, server(), {
          env: process.env,
          signal: stop.signal,
          progress: (line) => void printed.push(line),
          print: (line) => void printed.push(line),
          onReady: (e, f) => {
            env = e;
            envFile = f;
          },
        });
        while (!envFile) {
          const early = await Promise.race([serving, sleep(20)]);
          if (early) throw new Error(`sqltally proxy ended before serving: ${printed.join('\n')}`);
        }
        // Stopped whatever the checks say: a proxy left serving keeps its session's connections open, and the server
        // handed back dirty would hide which check failed.
        let result: Awaited<typeof serving>;
        try {
          expect(fs.statSync(envFile).mode & 0o777).toBe(0o600);
          expect(fs.readFileSync(envFile, 'utf8')).toContain(`export SQLTALLY_PASSWORD='${network(server()).password}'`);
          const auth = { authorization: `Bearer ${env['SQLTALLY_CONTROL_TOKEN']}` };
          expect((await fetch(`${env['SQLTALLY_CONTROL_URL']}/windows/one/begin`, { method: 'POST', headers: auth })).status).toBe(201);
          // Asynchronously: the proxy runs in this process, so a synchronous spawn would hold the very traffic it waits for.
          const ran = await new Promise<number | null>((resolve) =>
            spawn('sh', ['-c', RUN_SQL[id](`INSERT INTO ${table} VALUES (7)`)], { env: { ...process.env, ...env }, stdio: 'ignore' }).once('exit', resolve),
          );
          expect(ran).toBe(0);
          const ended = (await (await fetch(`${env['SQLTALLY_CONTROL_URL']}/windows/one/end`, { method: 'POST', headers: auth })).json()) as {
            verdict: { kind: string };
            counts: { server: Record<string, number> };
          };
          expect(ended.verdict.kind).toBe('assert');
          expect(ended.counts.server['rowsInserted']).toBe(1);
        } finally {
          stop.abort('SIGINT');
          result = await serving;
        }
        expect(result.exitCode).toBe(0);
        expect(result.report?.windows?.map((w) => w.name)).toEqual(['one']);
        expect(result.report?.command?.mode).toBe('proxy');
        expect(result.report?.command?.wire).toEqual({ requested: 'proxy', capture: 'proxy', reason: '--wire proxy' });
        const said = printed.join('\n');
        const password = network(server()).password;
        expect(said).toContain(`export ${id === 'postgres' ? 'PGPASSWORD' : 'MYSQL_PWD'}='${password ? '***' : ''}'`);
        if (password) expect(said).not.toContain(password);
        expect(said).not.toContain(env['SQLTALLY_CONTROL_TOKEN']);
        expect(fs.existsSync(envFile)).toBe(false);
      },
    );

    maybe(
      `sqltally proxy stopped with a named window open while a client writes: the window is given up and the rows committed anyway are counted${skipped}`,
      async () => {
        const stop = new AbortController();
        const printed: string[] = [];
        let env: Record<string, string> = {};
        const serving = runProxy(parseProxyArgs(['--no-write', '--table', table])!, server(), {
          env: process.env,
          signal: stop.signal,
          progress: (line) => void printed.push(line),
          print: () => undefined,
          onReady: (e) => (env = e),
        });
        while (!env['SQLTALLY_CONTROL_URL']) {
          const early = await Promise.race([serving, sleep(20)]);
          if (early) throw new Error(`sqltally proxy ended before serving: ${printed.join('\n')}`);
        }
        const auth = { authorization: `Bearer ${env['SQLTALLY_CONTROL_TOKEN']}` };
        expect((await fetch(`${env['SQLTALLY_CONTROL_URL']}/windows/loop/begin`, { method: 'POST', headers: auth })).status).toBe(201);
        const loop = spawn('sh', ['-c', `while :; do ${RUN_SQL[id](`INSERT INTO ${table} VALUES (1)`)} 2>/dev/null; done`], {
          env: { ...process.env, ...env },
          stdio: 'ignore',
          detached: true,
        });
        try {
          while ((await rowCount(server(), table)) < 3) await sleep(50);
          stop.abort('SIGINT');
          const result = await serving;
          process.kill(-loop.pid!, 'SIGKILL');
          await sleep(300);
          const truth = await rowCount(server(), table);
          expect(result.exitCode).toBe(1);
          const w = only(result.report);
          expect(w.name).toBe('loop');
          expect(w.verdict.kind).toBe('incomplete');
          expect(w.error?.message).toMatch(/^window "loop" was not ended: sqltally proxy was stopped \(SIGINT\)/);
          expect(w.lateCommits).toMatchObject({ table, rowsAfterwards: truth });
          expect(w.lateCommits!.rowsAtGiveUp).not.toBeNull();
          expect(w.lateCommits!.rowsCommittedAfterGivingUp).toBe(truth - w.lateCommits!.rowsAtGiveUp!);
          // Everything in the table was written in the window or after its give-up: none is missing from the report.
          expect((w.layers.server?.summary.rowsInserted ?? 0) + w.lateCommits!.rowsCommittedAfterGivingUp!).toBeGreaterThanOrEqual(truth);
        } finally {
          try {
            process.kill(-loop.pid!, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      },
    );
  },
  (b) => b.backend === 'postgres' || b.backend === 'mariadb',
);

describe('bad input that needs no server', () => {
  it('a command that does not exist: exit 127 with the reason, nothing started', async () => {
    const { code, said } = await cli(['exec', '--backend', 'postgres', '--no-write', '--', 'sqltally-no-such-command']);
    expect(code).toBe(127);
    expect(said).toContain('cannot run the command: sqltally-no-such-command: command not found on PATH; nothing was started');
    expect(said).not.toContain('ready ');
  });
});

describe('sqlite', () => {
  const have = resolveCommand('sqlite3', process.env).ok;
  const maybe = have ? it : it.skip;
  const skipped = have ? '' : ' (skipped: sqlite3 not installed: apt-get install sqlite3)';
  let scratch = '';
  beforeAll(() => {
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-exec-sqlite-'));
  });
  afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

  maybe(`the command gets the database file; what another process writes there is not seen by any layer, so it is not assert${skipped}`, async () => {
    const seen = path.join(scratch, 'seen');
    const script = `echo "$SQLTALLY_SQLITE_PATH $DATABASE_URL" > ${seen}; sqlite3 "$SQLTALLY_SQLITE_PATH" 'CREATE TABLE t(i); INSERT INTO t VALUES (1), (2);'`;
    const result = await runExec(execOptions(['--backend', 'sqlite', '--table', 't', '--no-write', '--', 'sh', '-c', script]), 'sqlite', io(scratch));
    expect(result.exitCode).toBe(0);
    const [file, url] = fs.readFileSync(seen, 'utf8').trim().split(' ');
    expect(url).toBe(`file:${file}`);
    expect(only(result.report).verdict.kind).toBe('report');
    expect(result.report?.command?.wire).toEqual({
      requested: 'auto',
      capture: 'none',
      reason: expect.stringMatching(/^sqlite@[\d.]+ runs in-process: no wire$/),
    });
  });

  maybe(`Ctrl-C during sqltally exec: the command's group is stopped, the report is failed, exit 130, nothing left running${skipped}`, async () => {
    const out = path.join(scratch, 'interrupted');
    const loop = `sqlite3 "$SQLTALLY_SQLITE_PATH" 'CREATE TABLE t(i)'; while :; do sqlite3 "$SQLTALLY_SQLITE_PATH" 'INSERT INTO t VALUES (1)'; done`;
    const argv = ['exec', '--backend', 'sqlite', '--table', 't', '--out', out, '--', 'sh', '-c', loop];
    const code = `require('./src/cli/main').main(${JSON.stringify(argv)}).then((c) => { process.exitCode = c; });`;
    const child = spawn(process.execPath, [...tsChild(), '-e', code], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout.resume();
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (c, s) => r({ code: c, signal: s })));
    const deadline = Date.now() + START_TIMEOUT_MS / 2;
    while (!/process group \d+/.test(err) && child.exitCode === null && Date.now() < deadline) await sleep(50);
    const group = Number(/process group (\d+)/.exec(err)?.[1]);
    expect(groupMembers(group).length).toBeGreaterThan(0);
    await sleep(1_000);
    child.kill('SIGINT');
    expect(await exited).toEqual({ code: 130, signal: null });
    expect(err).toContain("SIGINT: stopping the command's process group");
    expect(groupMembers(group)).toEqual([]);
    const report = readReportFile(out);
    expect(report.status).toBe('failed');
    expect(report.failure?.message).toMatch(/^interrupted \(SIGINT\): the command was stopped/);
    expect(report.command).toMatchObject({ stoppedBy: 'SIGINT', sqltallyExitCode: 130 });
    const w = only(report);
    expect(w.verdict.kind).toBe('incomplete');
    expect(w.lateCommits).toMatchObject({ table: 't', rowsAfterwards: expect.any(Number) });
    expect(w.lateCommits!.rowsAfterwards).toBeGreaterThan(0);
  });
});
