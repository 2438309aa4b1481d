// @waits 14: servers started, stopped and raced for ports on every backend.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import type { LocalInstall } from '../src/backends/backend';
import { SqltallyError } from '../src/shared/errors';
import { processAlive } from '../src/backends/live';
import { freePort } from '../src/backends/local-process';
import { BACKENDS, localInstalls, startBackend } from '../src/backends/registry';
import type { BackendName, ConnectionInfo, Flavour, NetworkConnection, StartedBackend } from '../src/backends/types';
import { describeEachBackend, integrationBackends, START_TIMEOUT_MS, withBackend } from './harness';
import type { AvailableIntegrationBackend } from './harness';

// jest's testTimeout is a global option, not a project one: set it for this file's server starts and stops.
jest.setTimeout(START_TIMEOUT_MS);

/** What each backend must turn out to be when started here. */
const EXPECTED_FLAVOUR = { sqlite: 'sqlite', mariadb: 'mariadb', mysql: 'mysql', postgres: 'postgres' } as const satisfies Record<BackendName, Flavour>;
const ROWS = 3;
/**
 * Resident memory of a private server from local binaries once ready and used by a few tests, in MB, with room for
 * versions (bench/HISTORY.md has the readings); null where nothing was made smaller (SQLite, PostgreSQL).
 */
const RESIDENT_MB_AT_MOST = { sqlite: null, mariadb: 160, mysql: 400, postgres: null } as const satisfies Record<BackendName, number | null>;

/** Driver options from connection info (mysql2 warns about keys it does not know, such as `kind`). */
function driverOptions(c: NetworkConnection): { host: string; port: number; user: string; password: string; database: string } {
  return { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
}

/** Creates a table, inserts ROWS rows and counts them back, through the backend's own driver. */
async function roundTrip(connection: ConnectionInfo, name: BackendName): Promise<number> {
  if (connection.kind === 'file') {
    const db = new Database(connection.filename);
    try {
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
      const insert = db.prepare('INSERT INTO t (id) VALUES (?)');
      for (let i = 1; i <= ROWS; i++) insert.run(i);
      return (db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n;
    } finally {
      db.close();
    }
  }
  if (name === 'postgres') {
    const client = new Client(driverOptions(connection));
    await client.connect();
    try {
      await client.query('CREATE TABLE t (id int PRIMARY KEY)');
      await client.query('INSERT INTO t (id) SELECT generate_series(1, $1::int)', [ROWS]);
      return Number((await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM t')).rows[0]?.n);
    } finally {
      await client.end();
    }
  }
  const conn = await mysql.createConnection(driverOptions(connection));
  try {
    await conn.query('CREATE TABLE t (id int PRIMARY KEY)');
    await conn.query('INSERT INTO t (id) VALUES ?', [Array.from({ length: ROWS }, (_, i) => [i + 1])]);
    const [rows] = await conn.query('SELECT COUNT(*) AS n FROM t');
    return Number((rows as { n: number }[])[0]?.n);
  } finally {
    await conn.end();
  }
}

/** Runs one statement through the backend's driver; the `n` column of its first row, if any. */
async function queryN(connection: NetworkConnection, name: BackendName, sql: string): Promise<number | undefined> {
  if (name === 'postgres') {
    const client = new Client(driverOptions(connection));
    await client.connect();
    try {
      const n = (await client.query<{ n?: string }>(sql)).rows[0]?.n;
      return n === undefined ? undefined : Number(n);
    } finally {
      await client.end();
    }
  }
  const conn = await mysql.createConnection(driverOptions(connection));
  try {
    const [rows] = await conn.query(sql);
    const n = Array.isArray(rows) ? (rows as { n?: number }[])[0]?.n : undefined;
    return n === undefined ? undefined : Number(n);
  } finally {
    await conn.end();
  }
}

async function refusedConnection(connection: NetworkConnection, name: BackendName): Promise<string | undefined> {
  try {
    if (name === 'postgres') {
      const client = new Client({ ...driverOptions(connection), connectionTimeoutMillis: 3_000 });
      client.on('error', () => undefined);
      await client.connect();
      await client.end();
    } else {
      const conn = await mysql.createConnection({ ...driverOptions(connection), connectTimeout: 3_000 });
      await conn.end();
    }
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}

async function rejection(promise: Promise<unknown>): Promise<SqltallyError> {
  const err = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  if (!(err instanceof SqltallyError)) throw err;
  return err;
}

describeEachBackend((b) => {
  // Its own server: the last test stops it, and the start itself is what this file tests.
  const backend = withBackend(b.id, { fresh: true });

  it('reads its flavour and version from the server itself', () => {
    const d = backend().description;
    expect(d.name).toBe(b.backend);
    expect(d.flavour).toBe(EXPECTED_FLAVOUR[b.backend]);
    expect(d.provider).toBe(b.provider);
    expect(d.serverVersion).toMatch(/^\d+\.\d+/);
    expect(d.id).toBe(`${b.backend}@${BACKENDS[b.backend].variantLabel(d.serverVersion)}`);
    if (b.id.includes('@')) expect(d.id.startsWith(b.id)).toBe(true);
  });

  it('runs real statements: 3 rows in, 3 rows counted back', async () => {
    expect(await roundTrip(backend().connection, b.backend)).toBe(ROWS);
  });

  it('is ready for counting', async () => {
    const { connection, description } = backend();
    if (connection.kind === 'file') {
      expect(description.capabilities.rowCounter).toBe('total_changes');
      return;
    }
    if (b.backend === 'postgres') {
      expect(description.capabilities.statementStats).toBe(true);
      const client = new Client(driverOptions(connection));
      await client.connect();
      try {
        const r = await client.query<{ n: string }>('SELECT COUNT(*) AS n FROM pg_stat_statements');
        expect(Number(r.rows[0]?.n)).toBeGreaterThan(0);
      } finally {
        await client.end();
      }
      return;
    }
    expect(description.capabilities.perThreadStatements).toBe(true);
    const conn = await mysql.createConnection(driverOptions(connection));
    try {
      const [rows] = await conn.query('SELECT @@performance_schema AS ps, @@max_allowed_packet AS packet');
      const row = (rows as { ps: number; packet: number }[])[0];
      expect(row?.ps).toBe(1);
      // The wire tests send one 22 MB statement.
      expect(Number(row?.packet)).toBeGreaterThanOrEqual(64 * 1024 * 1024);
    } finally {
      await conn.end();
    }
  });

  if (b.provider === 'local' || b.provider === 'embedded') {
    it('keeps its data in a private mode-0700 directory, and a server listens on loopback only', () => {
      const { dataDir, connection } = backend();
      expect(dataDir).toBeDefined();
      expect(fs.statSync(dataDir ?? '').mode & 0o777).toBe(0o700);
      if (connection.kind === 'network') expect(connection.host).toBe('127.0.0.1');
    });
  }

  if ((b.provider === 'local' || b.provider === 'embedded') && b.backend !== 'sqlite') {
    it('starts from its own copy of the initialised data directory: what one server made is not in the next', async () => {
      const first = backend().connection as NetworkConnection;
      await queryN(first, b.backend, 'CREATE TABLE made_by_first (id int)');
      const second = await startBackend(b.id);
      try {
        expect(second.dataDir).not.toBe(backend().dataDir);
        // Each start sets its own password on its copy: the first server's is refused by the second (PostgreSQL's
        // private servers trust loopback and have none).
        if (b.backend !== 'postgres') {
          expect(await refusedConnection({ ...(second.connection as NetworkConnection), password: first.password }, b.backend)).toBe('ER_ACCESS_DENIED_ERROR');
        }
        expect(
          await queryN(
            second.connection as NetworkConnection,
            b.backend,
            "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name = 'made_by_first'",
          ),
        ).toBe(0);
        expect(await queryN(first, b.backend, "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name = 'made_by_first'")).toBe(1);
      } finally {
        await second.stop();
        await queryN(first, b.backend, 'DROP TABLE made_by_first');
      }
    });
  }

  const residentLimit = RESIDENT_MB_AT_MOST[b.backend];
  if (b.provider === 'local' && residentLimit !== null) {
    it(`starts lean: at most ${residentLimit} MB resident (memory counting never reads is kept small)`, () => {
      // Every page a server fills at start is a page fault, so the memory options keep starts cheap
      // (each MySQL-family backend's MEMORY_OPTIONS; `bench/server-start.ts` prints it).
      const status = fs.readFileSync(`/proc/${backend().pid}/status`, 'utf8');
      const residentKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
      expect(residentKb / 1024).toBeLessThanOrEqual(residentLimit);
    });
  }

  if ((b.provider === 'local' || b.provider === 'embedded') && b.backend === 'postgres') {
    it("keeps its dynamic shared memory in its data directory, not in /dev/shm, where a killed server's segments would stay", async () => {
      const { dataDir, pid } = backend();
      // The control segment exists from the start; a posix one would be /dev/shm/PostgreSQL.<n>, mapped here.
      const maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8');
      expect(maps).not.toContain('/dev/shm/PostgreSQL.');
      expect(fs.readdirSync(path.join(dataDir ?? '', 'pg_dynshmem')).some((f) => f.startsWith('mmap.'))).toBe(true);
    });
  }

  if (b.provider === 'local' && (b.backend === 'mariadb' || b.backend === 'mysql')) {
    it('keeps its temporary files in its own private directory, where no other starting server deletes them', async () => {
      // A starting MySQL or MariaDB deletes every #sql* file in its tmpdir: a shared /tmp would let it destroy the
      // temporary tables of every other server running there.
      const { dataDir } = backend();
      const conn = await mysql.createConnection(driverOptions(backend().connection as NetworkConnection));
      try {
        const [rows] = await conn.query('SELECT @@tmpdir AS tmp');
        expect((rows as { tmp: string }[])[0]?.tmp.replace(/\/$/, '')).toMatch(new RegExp(`/${path.basename(dataDir ?? '(none)')}/tmp$`));
      } finally {
        await conn.end();
      }
    });
  }

  if (b.provider === 'local') {
    it('refuses a wrong password at the external provider, with a message that names backend, provider and fix', async () => {
      const c = backend().connection as NetworkConnection;
      if (b.backend === 'postgres') {
        // A private PostgreSQL asks for the password on 127.0.0.1 (scram-sha-256), like any other server.
        const url = `postgres://${c.user}:wrong-secret@127.0.0.1:${c.port}/${c.database}`;
        const err = await rejection(startBackend('postgres', { ...process.env, SQLTALLY_POSTGRES_URL: url }));
        expect(err.message).toContain(`[backend postgres, provider external, phase connect] access denied for user "${c.user}"`);
        expect(err.message).toContain('what to do: check the user and password in SQLTALLY_POSTGRES_URL');
        expect(err.message).not.toContain('wrong-secret');
        return;
      }
      const variable = `SQLTALLY_${b.backend.toUpperCase()}_URL`;
      const url = `mysql://${c.user}:wrong-secret@127.0.0.1:${c.port}/${c.database}`;
      const err = await rejection(startBackend(b.backend, { ...process.env, [variable]: url }));
      expect(err.message).toContain(`[backend ${b.backend}, provider external, phase connect] access denied for user "root"`);
      expect(err.message).toContain(`what to do: check the user and password in ${variable}`);
      expect(err.message).not.toContain('wrong-secret');
    });

    it('connects through the external provider with the right credentials, as a shared (not private) server', async () => {
      const c = backend().connection as NetworkConnection;
      const scheme = b.backend === 'postgres' ? 'postgres' : 'mysql';
      const url = `${scheme}://${c.user}:${encodeURIComponent(c.password)}@127.0.0.1:${c.port}/${c.database}`;
      const external = await startBackend(b.backend, { ...process.env, [`SQLTALLY_${b.backend.toUpperCase()}_URL`]: url });
      await external.stop();
      expect(external.description).toMatchObject({ provider: 'external', flavour: EXPECTED_FLAVOUR[b.backend], capabilities: { privateServer: false } });
      expect(external.description.origin).not.toContain(c.password || 'no-password');
      // Stopping an external server's handle leaves the server alone: it still accepts connections.
      expect(await refusedConnection(c, b.backend)).toBeUndefined();
    });

    if (b.backend === 'mariadb') {
      it('records a MariaDB reached through SQLTALLY_MYSQL_URL as MariaDB, with MariaDB capabilities', async () => {
        const c = backend().connection as NetworkConnection;
        const url = `mysql://${c.user}:${c.password}@127.0.0.1:${c.port}/${c.database}`;
        const started = await startBackend('mysql', { ...process.env, SQLTALLY_MYSQL_URL: url });
        await started.stop();
        expect(started.description).toMatchObject({ name: 'mysql', flavour: 'mariadb', capabilities: { rowCounter: 'Handler_write', bulkExecute: true } });
      });
    }
  }

  // Last: the shared server is stopped here, and afterAll's stop must then be a no-op.
  it('stops cleanly: process gone, directory gone, port closed; a second stop is a no-op', async () => {
    const started = backend();
    await started.stop();
    await started.stop();
    if (started.pid !== undefined) expect(processAlive(started.pid)).toBe(false);
    if (started.dataDir !== undefined) expect(fs.existsSync(started.dataDir)).toBe(false);
    if (started.connection.kind === 'network' && started.description.provider !== 'external') {
      expect(await refusedConnection(started.connection, b.backend)).toBe('ECONNREFUSED');
    }
  });
});

/** Ids of available backends started from local binaries: the ones whose start-up this machine controls. */
const localIds = integrationBackends().filter((b): b is AvailableIntegrationBackend => b.available && b.provider === 'local' && !b.id.includes('@'));

describe('bad input', () => {
  it('rejects an unknown backend, listing the known ones', async () => {
    const err = await rejection(startBackend('oracle'));
    expect(err.message).toBe(
      '[backend oracle, phase config] unknown backend "oracle"\n  what to do: use one of sqlite, mariadb, mysql, postgres, optionally with a version: mariadb@10.11, postgres@15',
    );
  });

  it('rejects a malformed URL without trying anything else', async () => {
    const err = await rejection(startBackend('postgres', { ...process.env, SQLTALLY_POSTGRES_URL: 'postgres://u:pw@127.0.0.1:port/db' }));
    expect(err.message).toContain('SQLTALLY_POSTGRES_URL is not a usable URL');
    expect(err.message).toContain('provider external');
  });

  it.each(['mariadb', 'postgres'] as const)('explains an unreachable %s URL (a closed loopback port)', async (name) => {
    const port = await freePort();
    const scheme = name === 'postgres' ? 'postgres' : 'mysql';
    const variable = `SQLTALLY_${name.toUpperCase()}_URL`;
    const err = await rejection(startBackend(name, { ...process.env, [variable]: `${scheme}://u:sekrit@127.0.0.1:${port}/db` }));
    expect(err.message).toContain(
      `[backend ${name}, provider external, phase connect] nothing listens on 127.0.0.1:${port} (ECONNREFUSED), from ${variable}=${scheme}://u:***@127.0.0.1:${port}/db`,
    );
    expect(err.message).toContain(`what to do: start the server or correct the host and port in ${variable}`);
    expect(err.message).not.toContain('sekrit');
  });

  it('says what to install when the binaries are missing (no provider forced, whatever this run forces)', async () => {
    const env = {
      ...process.env,
      SQLTALLY_PROVIDER: undefined,
      SQLTALLY_POSTGRES_PROVIDER: undefined,
      DOCKER_HOST: 'unix:///nonexistent/docker.sock',
      SQLTALLY_POSTGRES_BINDIR: '/nonexistent/bin',
    };
    const err = await rejection(startBackend('postgres', env));
    expect(err.phase).toBe('provision');
    expect(err.message).toContain('no initdb and postgres in SQLTALLY_POSTGRES_BINDIR=/nonexistent/bin');
    expect(err.message).toContain('install postgresql (apt-get install postgresql) or set SQLTALLY_POSTGRES_URL');
  });

  // Chrooted servers keep their data inside their root filesystem by design, whatever TMPDIR says.
  const tmpdirIds = localIds.filter((b) => !b.origin.startsWith('chroot')).map((b) => b.id);
  it.each(['sqlite', ...tmpdirIds])('fails cleanly on %s when the data directory cannot be created', async (id) => {
    // Root writes through permission bits, so "not writable" is a TMPDIR that is a file.
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-test-tmpdir-'));
    const notADir = path.join(scratch, 'file');
    fs.writeFileSync(notADir, '');
    try {
      const err = await rejection(startBackend(id, { ...process.env, TMPDIR: notADir }));
      expect(err.phase).toBe('provision');
      expect(err.message).toContain(`cannot create a private data directory under ${notADir}`);
      expect(err.message).toContain('what to do: set TMPDIR to a writable directory');
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  });

  // describe.each refuses an empty table (no local servers, e.g. under SQLTALLY_PROVIDER=testcontainers).
  const portRaceCases = localIds.map((b) => [b.id, b.backend] as const);
  if (portRaceCases.length === 0) {
    describe.skip('port taken between probe and bind: skipped: no backend runs from local binaries here', () => {
      it('needs a local server', () => undefined);
    });
  } else
    describe.each(portRaceCases)('%s: port taken between probe and bind', (id, name) => {
      let holder: net.Server;
      let takenPort: number;
      let started: StartedBackend | undefined;
      beforeAll(async () => {
        // Accepts and drops: the port is taken for bind(), and a ping that reaches it fails at once.
        holder = net.createServer((socket) => socket.destroy());
        await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
        takenPort = (holder.address() as net.AddressInfo).port;
      });
      afterAll(async () => {
        await started?.stop();
        await new Promise<void>((r) => holder.close(() => r()));
      });

      it(
        'retries on another port',
        async () => {
          const { installs } = await localInstalls(BACKENDS[name], process.env);
          const install: LocalInstall | undefined = installs[0];
          if (!install) throw new Error(`no local install of ${name}`);
          const picked: number[] = [];
          // The first pick is a port someone else holds: exactly the race between probing a port and binding it.
          const pickPort = async (): Promise<number> => {
            const port = picked.length === 0 ? takenPort : await freePort();
            picked.push(port);
            return port;
          };
          started = await install.start({ env: process.env, id, pickPort });
          expect(picked[0]).toBe(takenPort);
          // At least one retry, the server on the last port picked; not exactly one, since other workers draw from the
          // same ephemeral ports and the retry itself may meet a port taken in between.
          expect(picked.length).toBeGreaterThanOrEqual(2);
          expect(picked.slice(1)).not.toContain(takenPort);
          expect((started.connection as NetworkConnection).port).toBe(picked[picked.length - 1]);
          expect(await roundTrip(started.connection, name)).toBe(ROWS);
        },
        START_TIMEOUT_MS,
      );
    });
});
