import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqltallyError } from '../shared/errors';
import { driverModule } from '../driver/registry';
import { BACKENDS, envKey, parseBackendId, resolveBackend, startBackend, variantIds } from './registry';
import { BACKEND_NAMES } from './types';

/** Scripts that answer `--version` like the real servers, so provider choice is tested without real binaries. */
let fakeRoot: string;
let mariadbDir: string;
let mysqlIsMariadbDir: string;
let realMysqlDir: string;
const NO_ENGINE = 'unix:///nonexistent/sqltally-test/docker.sock';

function fakeBinary(dir: string, name: string, versionLine: string): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), `#!/bin/sh\necho '${versionLine}'\n`, { mode: 0o755 });
}

beforeAll(() => {
  fakeRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-unit-registry-'));
  mariadbDir = path.join(fakeRoot, 'mariadb');
  fakeBinary(mariadbDir, 'mariadbd', 'mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)');
  fakeBinary(mariadbDir, 'mariadb-install-db', '');
  mysqlIsMariadbDir = path.join(fakeRoot, 'mysql-is-mariadb');
  fakeBinary(mysqlIsMariadbDir, 'mysqld', 'mysqld  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)');
  realMysqlDir = path.join(fakeRoot, 'mysql');
  fakeBinary(realMysqlDir, 'mysqld', '/usr/sbin/mysqld  Ver 8.4.2 for Linux on x86_64 (MySQL Community Server - GPL)');
});

afterAll(() => fs.rmSync(fakeRoot, { recursive: true, force: true }));

/** No engine, no root filesystems, no PostgreSQL, the fake MariaDB: nothing from the machine leaks in. */
function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: '/nonexistent',
    DOCKER_HOST: NO_ENGINE,
    SQLTALLY_ROOTFS_CACHE: path.join(fakeRoot, 'no-rootfs'),
    SQLTALLY_POSTGRES_BINDIR: path.join(fakeRoot, 'no-postgres'),
    SQLTALLY_MARIADB_BINDIR: mariadbDir,
    SQLTALLY_MYSQL_BINDIR: mysqlIsMariadbDir,
    ...extra,
  };
}

describe('BACKENDS', () => {
  it('names for each backend a read driver that talks to it', () => {
    for (const name of BACKEND_NAMES) expect(driverModule(BACKENDS[name].readDriver).backends).toContain(name);
  });
});

describe('parseBackendId', () => {
  it('splits name and variant', () => {
    expect(parseBackendId('mariadb@10.11')).toEqual({ id: 'mariadb@10.11', name: 'mariadb', variant: '10.11' });
    expect(parseBackendId('postgres')).toEqual({ id: 'postgres', name: 'postgres', variant: undefined });
  });

  it.each(['oracle', 'mariadb@', 'postgres@15@16', '', 'MariaDB'])('rejects %p, listing the known backends', (id) => {
    expect(() => parseBackendId(id)).toThrow(SqltallyError);
    expect(() => parseBackendId(id)).toThrow('use one of sqlite, mariadb, mysql, postgres');
  });
});

describe('envKey', () => {
  it('names per-id variables', () => {
    expect(envKey(parseBackendId('postgres'), 'URL')).toBe('SQLTALLY_POSTGRES_URL');
    expect(envKey(parseBackendId('mariadb@10.11'), 'URL')).toBe('SQLTALLY_MARIADB_10_11_URL');
  });
});

describe('resolveBackend: provider order', () => {
  it('takes an external URL first, showing it without password', async () => {
    const r = await resolveBackend('mariadb', env({ SQLTALLY_MARIADB_URL: 'mysql://app:hunter2@127.0.0.1:3306/x' }));
    expect(r).toMatchObject({ available: true, provider: 'external', origin: 'mysql://app:***@127.0.0.1:3306/x', tried: [] });
  });

  it('falls to local binaries when there is no URL and no engine, saying why each earlier one was passed over', async () => {
    const r = await resolveBackend('mariadb', env());
    expect(r).toMatchObject({
      available: true,
      provider: 'local',
      origin: path.join(mariadbDir, 'mariadbd'),
      expectedVersion: '10.11.19-MariaDB-0+deb12u1',
      tried: [
        { provider: 'external', reason: 'SQLTALLY_MARIADB_URL not set' },
        { provider: 'testcontainers', reason: 'no container engine (DOCKER_HOST socket /nonexistent/sqltally-test/docker.sock absent)' },
      ],
    });
  });

  it('skips with a reason a person can act on when nothing can serve', async () => {
    const r = await resolveBackend('mariadb', env({ SQLTALLY_MARIADB_BINDIR: path.join(fakeRoot, 'empty') }));
    expect(r.available).toBe(false);
    if (r.available) return;
    // The local part may list several finders (host binaries, provisioned root filesystems), joined by "; ".
    expect(
      r.reason.startsWith(
        `no container engine (DOCKER_HOST socket /nonexistent/sqltally-test/docker.sock absent) and no mariadbd on SQLTALLY_MARIADB_BINDIR=${path.join(fakeRoot, 'empty')}`,
      ),
    ).toBe(true);
    expect(r.reason.endsWith(': install mariadb-server (apt-get install mariadb-server) or set SQLTALLY_MARIADB_URL')).toBe(true);
  });

  it('does not take a mysqld that is MariaDB for MySQL', async () => {
    const r = await resolveBackend('mysql', env());
    expect(r.available).toBe(false);
    if (r.available) return;
    expect(r.reason).toContain(`no MySQL server binary (mysqld on SQLTALLY_MYSQL_BINDIR=${mysqlIsMariadbDir} is MariaDB)`);
    expect(r.reason).toContain('set SQLTALLY_MYSQL_URL');
    // The root filesystem's reason already says to run the provisioning script: the hint does not say it again.
    expect(r.reason.split('provision-rootfs.sh mysql (as root)').length - 1).toBe(1);
    expect(r.reason).toMatch(/provision-rootfs\.sh mysql \(as root\); or set SQLTALLY_MYSQL_URL$/);
  });

  it('takes a mysqld that says MySQL, and resolves its variant id', async () => {
    const e = env({ SQLTALLY_MYSQL_BINDIR: realMysqlDir });
    await expect(resolveBackend('mysql', e)).resolves.toMatchObject({ available: true, provider: 'local', expectedVersion: '8.4.2' });
    await expect(resolveBackend('mysql@8.4', e)).resolves.toMatchObject({ available: true, id: 'mysql@8.4' });
    const other = await resolveBackend('mysql@9.1', e);
    expect(other.available).toBe(false);
    if (!other.available) expect(other.reason).toContain('no mysql 9.1 binaries (found 8.4.2)');
  });

  it('does not fall through to another server when the URL a person set is malformed', async () => {
    const e = env({ SQLTALLY_MARIADB_URL: 'mysql://app:hunter2@127.0.0.1:notaport/x' });
    const r = await resolveBackend('mariadb', e);
    expect(r.available).toBe(false);
    if (!r.available) {
      expect(r.reason).toContain('SQLTALLY_MARIADB_URL is not a usable URL');
      expect(r.reason).not.toContain('hunter2');
    }
    const err = await startBackend('mariadb', e).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).message).toContain('backend mariadb');
    expect((err as SqltallyError).message).toContain('provider external');
    expect((err as SqltallyError).message).not.toContain('hunter2');
  });
});

describe('resolveBackend: forcing a provider', () => {
  it('honours SQLTALLY_PROVIDER, and says it was forced when that provider cannot serve', async () => {
    const r = await resolveBackend('mariadb', env({ SQLTALLY_PROVIDER: 'testcontainers' }));
    expect(r.available).toBe(false);
    if (!r.available) expect(r.reason.startsWith('SQLTALLY_PROVIDER=testcontainers: no container engine')).toBe(true);
  });

  it('lets the per-backend variable win over the global one', async () => {
    const r = await resolveBackend('mariadb', env({ SQLTALLY_PROVIDER: 'testcontainers', SQLTALLY_MARIADB_PROVIDER: 'local' }));
    expect(r).toMatchObject({ available: true, provider: 'local', tried: [] });
  });

  it('asks for the URL when external is forced without one', async () => {
    const r = await resolveBackend('postgres', env({ SQLTALLY_PROVIDER: 'external' }));
    expect(r).toMatchObject({ available: false, reason: expect.stringContaining('SQLTALLY_POSTGRES_URL not set') });
  });

  it('keeps SQLite embedded whatever the global provider', async () => {
    await expect(resolveBackend('sqlite', env({ SQLTALLY_PROVIDER: 'testcontainers' }))).resolves.toMatchObject({ available: true, provider: 'embedded' });
    await expect(resolveBackend('sqlite', env({ SQLTALLY_SQLITE_PROVIDER: 'local' }))).resolves.toMatchObject({ available: true, provider: 'embedded' });
    const forced = await resolveBackend('sqlite', env({ SQLTALLY_SQLITE_PROVIDER: 'external' }));
    expect(forced).toMatchObject({ available: false, reason: 'SQLTALLY_SQLITE_PROVIDER=external, but sqlite can only use embedded' });
  });

  // A URL that is set is never passed over: forcing a provider for every backend does not silence it.
  it.each(['testcontainers', 'local'])('lets a set URL win over SQLTALLY_PROVIDER=%s', async (provider) => {
    const r = await resolveBackend('mariadb', env({ SQLTALLY_PROVIDER: provider, SQLTALLY_MARIADB_URL: 'mariadb://u:pw@db.example:3306/x' }));
    expect(r).toMatchObject({ available: true, provider: 'external', origin: 'mariadb://u:***@db.example:3306/x' });
  });

  it('fails a set but malformed URL under SQLTALLY_PROVIDER=local rather than starting the local server', async () => {
    const r = await resolveBackend('mariadb', env({ SQLTALLY_PROVIDER: 'local', SQLTALLY_MARIADB_URL: 'http://x' }));
    expect(r).toMatchObject({ available: false, misconfigured: { variable: 'SQLTALLY_MARIADB_URL' } });
  });

  it.each(['testcontainers', 'local'])(
    'refuses SQLTALLY_MARIADB_PROVIDER=%s beside SQLTALLY_MARIADB_URL as a usage error naming both, the password masked',
    async (provider) => {
      const err = await resolveBackend(
        'mariadb',
        env({ SQLTALLY_MARIADB_PROVIDER: provider, SQLTALLY_MARIADB_URL: 'mariadb://u:hunter2@db.example:3306/x?password=hunter2' }),
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SqltallyError);
      expect((err as SqltallyError).phase).toBe('config');
      const message = (err as SqltallyError).message;
      expect(message).toContain(
        `SQLTALLY_MARIADB_PROVIDER=${provider} and SQLTALLY_MARIADB_URL=mariadb://u:***@db.example:3306/x?password=*** are both set for mariadb`,
      );
      expect(message).not.toContain('hunter2');
    },
  );

  it('takes SQLTALLY_MARIADB_PROVIDER=external beside the URL as agreeing, and a variant URL only for its variant', async () => {
    const agreed = await resolveBackend('mariadb', env({ SQLTALLY_MARIADB_PROVIDER: 'external', SQLTALLY_MARIADB_URL: 'mariadb://u@db.example/x' }));
    expect(agreed).toMatchObject({ available: true, provider: 'external' });
    const other = { SQLTALLY_MARIADB_PROVIDER: 'local', SQLTALLY_MARIADB_11_URL: 'mariadb://u@db.example/x' };
    await expect(resolveBackend('mariadb', env(other))).resolves.toMatchObject({ available: true, provider: 'local' });
    await expect(resolveBackend('mariadb@11', env(other))).rejects.toThrow('SQLTALLY_MARIADB_PROVIDER=local and SQLTALLY_MARIADB_11_URL=');
  });

  it('rejects a provider name that does not exist', async () => {
    await expect(resolveBackend('mariadb', env({ SQLTALLY_PROVIDER: 'docker' }))).rejects.toThrow('SQLTALLY_PROVIDER="docker" is not a provider');
  });
});

describe('startBackend and variantIds', () => {
  it('throws a provision-phase SqltallyError for an unavailable backend', async () => {
    const err = await startBackend('postgres', env()).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).phase).toBe('provision');
    expect((err as SqltallyError).message).toContain('install postgresql');
  });

  it('rejects an unknown backend', async () => {
    await expect(resolveBackend('oracle', env())).rejects.toThrow('unknown backend "oracle"');
  });

  it('lists every backend name first-class, in registry order', async () => {
    const ids = await variantIds(env());
    expect(ids.filter((id) => !id.includes('@'))).toEqual([...BACKEND_NAMES]);
  });
});
