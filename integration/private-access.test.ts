// @waits 3: one private server per backend, tried from a second local account.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SHARED_SERVER_BASE } from '../src/backends/local-process';
import { startBackend } from '../src/backends/registry';
import { withSqlClient } from '../src/backends/sql-client';
import type { NetworkConnection } from '../src/backends/types';
import { describeEachBackend, START_TIMEOUT_MS, withBackend } from './harness';

jest.setTimeout(START_TIMEOUT_MS);

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const CLIENT = { postgres: 'psql', mariadb: 'mariadb', mysql: 'mysql' } as const;
/** A local account of this file's own (useradd caps names at 32 characters). */
const OTHER_USER = `sqltally-other-${process.pid}`.slice(0, 32);

function onPath(binary: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${binary}`]).status === 0;
}

/** What the other account gets from the command: its exit code and everything it printed. */
function asOther(args: string[], env: Record<string, string> = {}): { status: number | null; output: string } {
  const run = spawnSync('runuser', ['-u', OTHER_USER, '--', 'env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...args], {
    encoding: 'utf8',
    timeout: 30_000,
    cwd: '/',
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

let created = false;
beforeAll(() => {
  if (!isRoot) return;
  execFileSync('useradd', ['--no-create-home', '--shell', '/usr/sbin/nologin', OTHER_USER]);
  created = true;
});
afterAll(() => {
  if (created) execFileSync('userdel', [OTHER_USER]);
});

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);
    const client = CLIENT[b.backend as keyof typeof CLIENT];
    const why = !isRoot
      ? 'creating a second local account needs root'
      : b.provider !== 'local'
        ? `provider ${b.provider} is not a private server of sqltally's`
        : !onPath(client)
          ? `no ${client} client to log in with`
          : undefined;
    if (why) {
      it.skip(`another local account cannot log in (skipped: ${why})`, () => undefined);
      return;
    }

    it('another local account cannot log in over 127.0.0.1, with no password or a guessed one, nor through the socket', () => {
      const c = backend().connection as NetworkConnection;
      expect(c.host).toBe('127.0.0.1');
      expect(c.password).toMatch(/^.{16,}$/);
      const dir = backend().dataDir!;
      const attempts =
        b.backend === 'postgres'
          ? [
              asOther(['psql', '-w', '-h', '127.0.0.1', '-p', String(c.port), '-U', c.user, '-tAc', 'SELECT 1', c.database]),
              asOther(['psql', '-w', '-h', '127.0.0.1', '-p', String(c.port), '-U', c.user, '-tAc', 'SELECT 1', c.database], { PGPASSWORD: 'postgres' }),
              // The socket is in the private data directory.
              asOther(['psql', '-w', '-h', dir, '-p', String(c.port), '-U', c.user, '-tAc', 'SELECT 1', c.database]),
            ]
          : [
              asOther([client, '--no-defaults', '-h', '127.0.0.1', '-P', String(c.port), '-u', c.user, '-e', 'SELECT 1']),
              asOther([client, '--no-defaults', '-h', '127.0.0.1', '-P', String(c.port), '-u', c.user, '-proot', '-e', 'SELECT 1']),
              ...fs
                .readdirSync(dir)
                .filter((f) => f.endsWith('.sock'))
                .map((sock) => asOther([client, '--no-defaults', '-S', path.join(dir, sock), '-u', c.user, '-e', 'SELECT 1'])),
            ];
      for (const attempt of attempts) {
        expect(attempt.status).not.toBe(0);
        expect(attempt.output).toMatch(/password|denied|Permission denied|Can't connect|Can't create UNIX socket/i);
      }
    });

    it("sqltally's own session still logs in, with the password its connection details carry", async () => {
      const c = backend().connection as NetworkConnection;
      const rows = await withSqlClient(b.backend === 'postgres' ? 'postgres' : 'mysql', c, {}, (s) => s.query<{ one: unknown }>('SELECT 1 AS one'));
      expect(Number(rows[0]?.one)).toBe(1);
    });
  },
  (b) => b.backend !== 'sqlite',
);

describeEachBackend(
  (b) => {
    const why = !isRoot
      ? 'only root runs PostgreSQL as another OS user'
      : b.provider !== 'local'
        ? `provider ${b.provider} makes no data directory here`
        : undefined;
    if (why) {
      it.skip(`starts with a 0700 TMPDIR (skipped: ${why})`, () => undefined);
      return;
    }
    it("starts as root with a 0700 TMPDIR (mktemp -d's), its data directory where the postgres OS user reaches it", async () => {
      const closed = fs.mkdtempSync(path.join(os.tmpdir(), 'closed-'));
      try {
        expect(fs.statSync(closed).mode & 0o777).toBe(0o700);
        const started = await startBackend(b.id, { ...process.env, TMPDIR: closed });
        try {
          expect(path.dirname(started.dataDir!)).toBe(SHARED_SERVER_BASE);
          const rows = await withSqlClient('postgres', started.connection as NetworkConnection, {}, (s) => s.query<{ one: unknown }>('SELECT 1 AS one'));
          expect(Number(rows[0]?.one)).toBe(1);
        } finally {
          await started.stop();
        }
        expect(fs.existsSync(started.dataDir!)).toBe(false);
      } finally {
        fs.rmSync(closed, { recursive: true, force: true });
      }
    });
  },
  (b) => b.backend === 'postgres',
);
