// @waits 70: psql, pgbench, the mariadb CLI and mariadb-slap under sqltally exec, through the proxy and captured passively.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serverOffersTls } from '../src/backends/listener';
import { connectionUrl } from '../src/backends/protocols';
import { withSqlClient } from '../src/backends/sql-client';
import type { SqlClient } from '../src/backends/sql-client';
import { describeWireChoice } from '../src/capture/wire-choice';
import type { BackendName, NetworkConnection, StartedBackend } from '../src/backends/types';
import { resolveCommand } from '../src/cli/child';
import { childEnvironment, connectionEnv } from '../src/cli/child-env';
import { parseExecArgs, parseProxyArgs } from '../src/cli/exec-options';
import { runExec } from '../src/cli/exec';
import type { ExecIo } from '../src/cli/exec';
import { runProxy } from '../src/cli/proxy';
import type { Window } from '../src/report/schema';
import { startPassiveCapture } from '../src/wire/passive';
import { cli } from './cli';
import { START_TIMEOUT_MS, describeEachBackend, withBackend } from './harness';

/**
 * `sqltally exec --wire passive` (issue 39): the same foreign clients counted once through the proxy and once from a
 * tcpdump copy of the loopback traffic, with the client connected to the server itself. The wire counts must be the
 * same, the server must agree, and the verdict is `assert` where the proxy's is; a capture that dies is `incomplete`.
 * With no `--wire` flag exec takes the capture where it can, and the proxy, naming why, where it cannot.
 */
jest.setTimeout(START_TIMEOUT_MS);

const ROWS = 50;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const CAP_NET_RAW = 13;
type CaseBackend = 'postgres' | 'mariadb' | 'mysql';

/** Why a passive capture cannot run here, or null: tcpdump on PATH and the capability to open a packet socket. */
function cannotCapture(): string | null {
  if (!resolveCommand('tcpdump', process.env).ok) return 'tcpdump is not installed (apt-get install tcpdump)';
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const effective = /^CapEff:\s*([0-9a-f]+)/m.exec(status)?.[1];
  if (!effective || (BigInt(`0x${effective}`) & (1n << BigInt(CAP_NET_RAW))) === 0n) return 'this process lacks CAP_NET_RAW (run as root)';
  return null;
}

/** What a command needs installed; each is a visible skip when missing. */
const CASES = {
  postgres: [
    { name: `psql: a file of ${ROWS} INSERTs`, needs: ['psql'], command: (file: string) => ['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', file] },
    { name: 'pgbench -S, 2 clients, 100 transactions each', needs: ['pgbench'], command: () => ['pgbench', '-n', '-S', '-c', '2', '-t', '100'] },
  ],
  mariadb: [
    {
      name: `the mariadb CLI: a file of ${ROWS} INSERTs`,
      needs: ['mariadb'],
      command: (file: string) => ['sh', '-c', 'exec mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" < "$1"', 'sh', file],
    },
    {
      name: 'mariadb-slap: 200 SELECT 1 on 2 connections',
      needs: ['mariadb-slap'],
      command: () => [
        'sh',
        '-c',
        'exec mariadb-slap -u "$MYSQL_USER" -h "$MYSQL_HOST" -P "$MYSQL_TCP_PORT" --create-schema="$MYSQL_DATABASE" --query="SELECT 1" --concurrency=2 --iterations=1 --number-of-queries=200',
      ],
    },
  ],
  // MySQL 9.x offers TLS and the mariadb CLI starts it unless told not to: an encrypted session cannot be read.
  mysql: [
    {
      name: `the mariadb CLI with --skip-ssl: a file of ${ROWS} INSERTs`,
      needs: ['mariadb'],
      command: (file: string) => ['sh', '-c', 'exec mariadb --skip-ssl --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" < "$1"', 'sh', file],
    },
  ],
} satisfies Partial<Record<BackendName, { name: string; needs: string[]; command: (file: string) => string[] }[]>>;

/**
 * A file of INSERTs through each backend's CLI as it comes, run with no --wire flag. The mariadb CLI takes TLS up
 * whenever the server offers it: on MySQL this passes only because sqltally starts its servers without TLS.
 */
const DEFAULT_WIRE: Record<CaseBackend, { bin: string; command: (file: string) => string[] }> = {
  postgres: { bin: 'psql', command: (file) => ['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', file] },
  mariadb: { bin: 'mariadb', command: (file) => ['sh', '-c', 'exec mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" < "$1"', 'sh', file] },
  mysql: { bin: 'mariadb', command: (file) => ['sh', '-c', 'exec mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" < "$1"', 'sh', file] },
};

/** Each backend's command-line client: one statement, and a session fed on stdin (left open by the caller). */
const CLIENTS: Record<CaseBackend, { bin: string; one: string; session: string }> = {
  postgres: { bin: 'psql', one: 'psql -X -q -c "SELECT 1"', session: 'psql -X -q' },
  mariadb: {
    bin: 'mariadb',
    one: 'mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "SELECT 1"',
    session: 'mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE"',
  },
  mysql: {
    bin: 'mariadb',
    one: 'mariadb --skip-ssl --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "SELECT 1"',
    session: 'mariadb --skip-ssl --batch -u "$MYSQL_USER" "$MYSQL_DATABASE"',
  },
};

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

function io(scratch: string, said: string[] = []): ExecIo {
  const log = fs.openSync(path.join(scratch, 'command.log'), 'a');
  return { env: process.env, stdio: ['ignore', log, log], progress: (line) => void said.push(line) };
}

async function execWindow(b: StartedBackend, wire: 'proxy' | 'passive', argv: string[], scratch: string): Promise<Window> {
  const opts = parseExecArgs(['--no-write', '--wire', wire, '--', ...argv]);
  const result = await runExec(opts!, b, io(scratch));
  expect(result.report?.windows).toHaveLength(1);
  return result.report!.windows![0]!;
}

/** The figures both paths must agree on: what crossed the wire, and what the server says it did. */
function figures(w: Window) {
  const wire = w.layers.wire;
  return {
    commands: wire?.commands,
    roundTrips: wire?.roundTrips,
    rowsAffected: wire?.rowsAffected,
    connections: wire?.connections,
    completed: wire?.statements?.completed,
    server: { statements: w.layers.server?.summary.statements, inserts: w.layers.server?.summary.inserts, rows: w.layers.server?.summary.rowsInserted },
  };
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: 'ignore' });
    child.on('exit', (code) => resolve(code));
    child.on('error', () => resolve(null));
  });
}

const unable = cannotCapture();

describeEachBackend(
  (b) => {
    const id = b.backend as CaseBackend;
    const server = withBackend(b.id);
    let scratch = '';
    let file = '';
    beforeAll(async () => {
      scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-passive-'));
      const table = `passive_${process.pid}`;
      file = path.join(scratch, 'inserts.sql');
      await withSqlClient(server().description.capabilities.wireProtocol!, network(server()), { backend: b.id }, (client) =>
        client.query(`CREATE TABLE ${table} (id int)`),
      );
      fs.writeFileSync(file, Array.from({ length: ROWS }, (_, i) => `INSERT INTO ${table} VALUES (${i});\n`).join(''));
      const c = network(server());
      if (id === 'postgres' && resolveCommand('pgbench', process.env).ok) {
        const env = { ...process.env, PGHOST: c.host, PGPORT: String(c.port), PGUSER: c.user, PGPASSWORD: c.password ?? '', PGDATABASE: c.database };
        expect(await run('pgbench', ['-i', '-q', '-s', '1'], env)).toBe(0);
      }
    }, START_TIMEOUT_MS);
    afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

    for (const c of CASES[id]) {
      const missing = unable ?? c.needs.filter((n) => !resolveCommand(n, process.env).ok).map((n) => `${n} is not installed`)[0] ?? null;
      const maybe = missing ? it.skip : it;
      maybe(
        `${c.name}: the passive capture counts what the proxy counts, the server agrees, assert where the proxy asserts${missing ? ` (skipped: ${missing})` : ''}`,
        async () => {
          const proxied = await execWindow(server(), 'proxy', c.command(file), scratch);
          const passive = await execWindow(server(), 'passive', c.command(file), scratch);
          expect(passive.error).toBeUndefined();
          expect(passive.layers.wire?.incompleteReasons).toEqual([]);
          expect(figures(passive)).toEqual(figures(proxied));
          expect(passive.layers.wire?.commandsTotal).toBeGreaterThan(0);
          // The reconciliation of wire and server held on both paths: where the proxy asserts, passive does too.
          expect(passive.verdict.discrepancies).toEqual([]);
          if (proxied.verdict.kind === 'assert') expect([passive.verdict.kind, passive.verdict.reason]).toEqual(['assert', expect.any(String)]);
        },
      );
    }

    const plain = DEFAULT_WIRE[id];
    const defaultSkip = !resolveCommand(plain.bin, process.env).ok
      ? `${plain.bin} is not installed`
      : process.env[`SQLTALLY_${id.toUpperCase()}_URL`]
        ? 'a server sqltally did not start: the default takes the proxy there (src/capture/wire-choice.test.ts)'
        : null;
    (defaultSkip ? it.skip : it)(
      `${plain.bin} with no --wire flag: ${unable ? `the proxy, naming why (${unable})` : 'the passive capture'}, counting what --wire proxy counts, assert${defaultSkip ? ` (skipped: ${defaultSkip})` : ''}`,
      async () => {
        const proxied = await execWindow(server(), 'proxy', plain.command(file), scratch);
        const said: string[] = [];
        const result = await runExec(parseExecArgs(['--no-write', '--', ...plain.command(file)])!, server(), io(scratch, said));
        expect(result.report?.windows).toHaveLength(1);
        const w = result.report!.windows![0]!;
        const wire = result.report?.command?.wire;
        if (unable) expect(wire).toEqual({ requested: 'auto', capture: 'proxy', reason: expect.stringMatching(/tcpdump not found on PATH|no CAP_NET_RAW/) });
        else
          expect(wire).toEqual({
            requested: 'auto',
            capture: 'passive',
            reason: 'a private server on loopback offering no TLS, and tcpdump to copy its traffic',
          });
        // Said at the start, right after the server is ready.
        expect(said.slice(0, 2)).toEqual([expect.stringMatching(new RegExp(`^ready ${id}@`)), describeWireChoice(wire!)]);
        expect(w.error).toBeUndefined();
        expect(w.layers.wire?.incompleteReasons).toEqual([]);
        expect(figures(w)).toEqual(figures(proxied));
        expect(figures(w).server).toEqual({ statements: ROWS, inserts: ROWS, rows: ROWS });
        expect([proxied.verdict.kind, w.verdict.kind]).toEqual(['assert', 'assert']);
        if (id === 'postgres' && !unable) {
          // docs/exec.md shows these two lines: the wire line word for word.
          const markdown = fs.readFileSync(path.join(__dirname, '..', 'docs', 'exec.md'), 'utf8');
          const at = markdown.indexOf('### The hop-free wire: `--wire passive`');
          const shown = (/```text\n([\s\S]*?)\n```/.exec(markdown.slice(at))?.[1] ?? '').split('\n');
          expect(shown).toEqual([expect.stringMatching(/^sqltally: ready postgres@\d+ \(.+, local\)$/), `sqltally: ${said[1]}`]);
        }
      },
    );

    const standInSkip = id !== 'postgres' ? 'shown on postgres' : resolveCommand('psql', process.env).ok ? null : 'psql is not installed';
    (standInSkip ? it.skip : it)(
      `a tcpdump that cannot capture (a stand-in saying what tcpdump says without CAP_NET_RAW): the default falls back to the proxy, naming why, and asserts${standInSkip ? ` (skipped: ${standInSkip})` : ''}`,
      async () => {
        const bin = path.join(scratch, 'no-cap-net-raw');
        fs.mkdirSync(bin);
        const said = ["tcpdump: lo: You don't have permission to perform this capture on that device", '(socket: Operation not permitted)'];
        fs.writeFileSync(path.join(bin, 'tcpdump'), `#!/bin/sh\ncat >&2 <<'EOF'\n${said.join('\n')}\nEOF\nexit 1\n`, { mode: 0o755 });
        const path0 = process.env['PATH'];
        process.env['PATH'] = `${bin}:${path0}`;
        try {
          const result = await runExec(parseExecArgs(['--no-write', '--', ...DEFAULT_WIRE.postgres.command(file)])!, server(), io(scratch));
          expect(result.report?.command?.wire).toEqual({
            requested: 'auto',
            capture: 'proxy',
            reason: `no CAP_NET_RAW to capture on lo (run as root for the hop-free wire): tcpdump exited (code 1): ${said.join(' / ')}`,
          });
          expect(result.report?.windows?.[0]?.verdict.kind).toBe('assert');
          expect(result.report?.windows?.[0]?.layers.wire?.commands).toEqual({ Query: ROWS, Terminate: 1 });
        } finally {
          process.env['PATH'] = path0;
        }
      },
    );

    const doc =
      id === 'postgres' ? (unable ?? (resolveCommand('pgbench', process.env).ok ? null : 'pgbench is not installed')) : 'the page shows it on postgres';
    (doc ? it.skip : it)(`the --wire passive block of docs/exec.md runs as written, on this server${doc ? ` (skipped: ${doc})` : ''}`, async () => {
      const markdown = fs.readFileSync(path.join(__dirname, '..', 'docs', 'exec.md'), 'utf8');
      const at = markdown.indexOf('### The hop-free wire: `--wire passive`');
      const block = /```sh\n([\s\S]*?)\n```/.exec(markdown.slice(at))?.[1] ?? '';
      const [npx, sqltally, exec, ...rest] = block.trim().split(/\s+/);
      expect([npx, sqltally, exec]).toEqual(['npx', 'sqltally', 'exec']);
      const c = network(server());
      const url = `postgres://${c.user}:${encodeURIComponent(c.password ?? '')}@${c.host}:${c.port}/${c.database}`;
      const result = await cli(['exec', '--no-write', ...rest], { SQLTALLY_POSTGRES_URL: url });
      expect(result.said).toMatch(/ready postgres/);
      expect(result.said).not.toMatch(/INCOMPLETE/);
      expect(result.code).toBe(0);
    });

    const client = CLIENTS[id].bin;
    const proxySkip = unable ?? (resolveCommand(client, process.env).ok ? null : `${client} is not installed`);
    (proxySkip ? it.skip : it)(
      `sqltally proxy --wire passive: a client that exits inside its named window asserts; one still connected at the window's end is incomplete, named${proxySkip ? ` (skipped: ${proxySkip})` : ''}`,
      async () => {
        const stop = new AbortController();
        let env: Record<string, string> = {};
        const serving = runProxy(parseProxyArgs(['--no-write', '--wire', 'passive'])!, server(), {
          env: process.env,
          signal: stop.signal,
          progress: () => undefined,
          print: () => undefined,
          onReady: (e) => (env = e),
        });
        while (!env['SQLTALLY_CONTROL_URL']) {
          if (await Promise.race([serving, sleep(20)])) throw new Error('sqltally proxy ended before serving');
        }
        const auth = { authorization: `Bearer ${env['SQLTALLY_CONTROL_TOKEN']}` };
        const window = async (name: string, work: () => Promise<unknown>) => {
          expect((await fetch(`${env['SQLTALLY_CONTROL_URL']}/windows/${name}/begin`, { method: 'POST', headers: auth })).status).toBe(201);
          await work();
          const ended = await fetch(`${env['SQLTALLY_CONTROL_URL']}/windows/${name}/end`, { method: 'POST', headers: auth });
          return (await ended.json()) as { verdict: { kind: string; reason: string }; window: Window };
        };
        const sh = (line: string) =>
          new Promise<number | null>((resolve) => spawn('sh', ['-c', line], { env: { ...process.env, ...env }, stdio: 'ignore' }).once('exit', resolve));
        const statement = CLIENTS[id].one;
        const lingering = `(echo "SELECT 1;"; sleep 2) | ${CLIENTS[id].session}`;
        try {
          expect(env[id === 'postgres' ? 'PGPORT' : 'MYSQL_TCP_PORT']).toBe(String(network(server()).port));
          const one = await window('one', () => sh(statement));
          expect(one.verdict.kind).toBe('assert');
          expect(one.window.layers.wire?.connections).toBe(1);
          let running: Promise<number | null> | null = null;
          const open = await window('open', async () => {
            running = sh(lingering);
            // Its statement answered, its connection still open.
            await sleep(1000);
          });
          await running;
          expect(open.verdict.kind).toBe('incomplete');
          expect(open.verdict.reason).toMatch(/a passive capture cannot send it a request of its own/);
        } finally {
          stop.abort('SIGINT');
          await serving;
        }
      },
    );

    // sqltally starts its servers without TLS; MySQL lets it be switched on at run time (tls_version is dynamic), which
    // stands in for an external server that offers it.
    const tlsSkip =
      id !== 'mysql'
        ? 'TLS is switched on at run time on MySQL only'
        : (unable ?? (resolveCommand('mariadb', process.env).ok ? null : 'mariadb is not installed'));
    (tlsSkip ? it.skip : it)(
      `a server offering TLS: the default takes the proxy, naming TLS, and asserts; a passive capture of a client that starts TLS (the mariadb CLI by default) is incomplete, naming it${tlsSkip ? ` (skipped: ${tlsSkip})` : ''}`,
      async () => {
        const c = network(server());
        const admin = (text: string) => withSqlClient('mysql', c, { backend: b.id }, (client) => client.query(text));
        const one = ['sh', '-c', 'exec mariadb --batch -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "SELECT 1"'];
        expect(await serverOffersTls(c.host, c.port, 'mysql')).toBe(false);
        await admin("SET GLOBAL tls_version = 'TLSv1.2,TLSv1.3'");
        await admin('ALTER INSTANCE RELOAD TLS');
        try {
          expect(await serverOffersTls(c.host, c.port, 'mysql')).toBe(true);
          const auto = await runExec(parseExecArgs(['--no-write', '--', ...one])!, server(), io(scratch));
          expect(auto.report?.command?.wire).toEqual({ requested: 'auto', capture: 'proxy', reason: expect.stringMatching(/^the server offers TLS/) });
          expect(auto.report?.windows?.[0]?.verdict.kind).toBe('assert');
          const w = await execWindow(server(), 'passive', one, scratch);
          expect(w.verdict.kind).toBe('incomplete');
          expect(w.layers.wire?.incompleteReasons.join('; ')).toMatch(/the client started TLS: the encrypted session cannot be counted/);
        } finally {
          // An empty version list is no TLS context: without NO ROLLBACK the reload refuses it and keeps TLS on.
          await admin("SET GLOBAL tls_version = ''");
          await admin('ALTER INSTANCE RELOAD TLS NO ROLLBACK ON ERROR');
        }
        expect(await serverOffersTls(c.host, c.port, 'mysql')).toBe(false);
      },
    );

    const maybe = unable ? it.skip : it;
    maybe(`tcpdump killed inside a window: the window's wire layer is incomplete and says so${unable ? ` (skipped: ${unable})` : ''}`, async () => {
      const c = network(server());
      const capture = await startPassiveCapture({ protocol: server().description.capabilities.wireProtocol!, target: { host: c.host, port: c.port } });
      try {
        const before = capture.snapshot();
        process.kill(capture.tcpdumpPid!, 'SIGKILL');
        await capture.caughtUp();
        const window = capture.diff(before, capture.snapshot());
        expect(window.incomplete).toBe(true);
        expect(window.incompleteReasons.join('; ')).toMatch(/^capture: .*tcpdump exited \(SIGKILL\)/);
        // Every later window is told too.
        const next = capture.snapshot();
        await capture.caughtUp();
        expect(capture.diff(next, capture.snapshot()).incompleteReasons.join('; ')).toMatch(/the capture is not running/);
      } finally {
        await capture.close();
      }
    });

    maybe(`reads nothing of the capture while a client runs, and all of it at the next edge${unable ? ` (skipped: ${unable})` : ''}`, async () => {
      const c = network(server());
      const capture = await startPassiveCapture({ protocol: server().description.capabilities.wireProtocol!, target: { host: c.host, port: c.port } });
      try {
        const before = capture.snapshot();
        const readAtStart = capture.bytesRead;
        const env = childEnvironment(
          process.env,
          connectionEnv({ id: b.id, name: server().description.name }, { ...c, url: connectionUrl(server().description.capabilities.wireProtocol!, c) }),
        );
        const [bin, ...args] = DEFAULT_WIRE[id].command(file);
        expect(await run(bin!, args, env)).toBe(0);
        // Longer than the kernel's one-second block timeout, so tcpdump has had every packet to write.
        await new Promise((r) => setTimeout(r, 1_500));
        expect(capture.bytesRead).toBe(readAtStart);
        await capture.caughtUp();
        const window = capture.diff(before, capture.snapshot());
        expect(capture.bytesRead).toBeGreaterThan(readAtStart);
        expect(window.incompleteReasons).toEqual([]);
        expect(window.statements?.completed).toBeGreaterThanOrEqual(ROWS);
      } finally {
        await capture.close();
      }
    });

    // Shown once: the bounds are the capture's, whatever the protocol.
    const boundSkip = unable ?? (id !== 'postgres' ? 'shown on postgres' : null);
    (boundSkip ? it.skip : it)(`closes while a read for its bounds waits on a marker${boundSkip ? ` (skipped: ${boundSkip})` : ''}`, async () => {
      const c = network(server());
      // A 4 MiB ring (16 blocks) is read every 4 seconds; a stopped tcpdump lets no marker out, so that read waits at close.
      const capture = await startPassiveCapture({
        protocol: server().description.capabilities.wireProtocol!,
        target: { host: c.host, port: c.port },
        bufferKiB: 4096,
      });
      process.kill(capture.tcpdumpPid!, 'SIGSTOP');
      await sleep(4_300);
      await capture.close();
      // The marker's padding datagrams were sent every 2 ms: one sent after the socket closed would throw here.
      await sleep(50);
    });

    /** A capture with a ring of `bufferKiB` around `work` on a connection of this process: what it read meanwhile, and the window's reasons. */
    const captureAround = async (bufferKiB: number, work: (client: SqlClient) => Promise<void>) => {
      const c = network(server());
      const protocol = server().description.capabilities.wireProtocol!;
      const capture = await startPassiveCapture({ protocol, target: { host: c.host, port: c.port }, bufferKiB });
      try {
        const before = capture.snapshot();
        const readAtStart = capture.bytesRead;
        await withSqlClient(protocol, c, { backend: b.id }, work);
        const readMeanwhile = capture.bytesRead - readAtStart;
        await capture.caughtUp();
        return { readMeanwhile, reasons: capture.diff(before, capture.snapshot()).incompleteReasons };
      } finally {
        await capture.close();
      }
    };

    (boundSkip ? it.skip : it)(
      `reads without an edge once more loopback traffic came than its ring may hold${boundSkip ? ` (skipped: ${boundSkip})` : ''}`,
      async () => {
        // A 16 MiB ring (each lo packet in it twice) and 20 MB of results in four seconds: left unread until the edge,
        // the kernel drops; read at every 2 MiB, the ring holds what comes while a read catches up on a loaded machine.
        const { readMeanwhile, reasons } = await captureAround(16 * 1024, async (client) => {
          for (let i = 0; i < 40; i++) {
            await client.query("SELECT REPEAT('x', 500000)");
            await sleep(100);
          }
        });
        expect(readMeanwhile).toBeGreaterThan(10_000_000);
        expect(reasons).toEqual([]);
      },
    );

    (boundSkip ? it.skip : it)(
      `reads without an edge once slow traffic has taken a quarter of its ring's blocks${boundSkip ? ` (skipped: ${boundSkip})` : ''}`,
      async () => {
        // 16 blocks: a result that leaves tcpdump waiting on the full pipe (4 blocks), then a query every 250 ms for
        // 16 seconds, each second's packets taking a block of their own.
        const { readMeanwhile, reasons } = await captureAround(4 * 1024, async (client) => {
          await client.query("SELECT REPEAT('x', 450000)");
          for (let i = 0; i < 64; i++) {
            await client.query('SELECT 1');
            await sleep(250);
          }
        });
        expect(readMeanwhile).toBeGreaterThan(0);
        expect(reasons).toEqual([]);
      },
    );
  },
  (b) => b.backend in CASES,
);
