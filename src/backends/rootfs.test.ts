import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PROVISION_SCRIPT, ROOTFS_STAMP_FILE, locateRootfs, mysqldArgs, rootfsInputsHash } from './rootfs';
import { MARIADB, MARIADB_ROOTFS, mariadbServerArgs } from './mariadb';
import { MYSQL, MYSQL_ROOTFS, mysqlServerArgs } from './mysql';

// The provisioning script is exercised with a stub debootstrap (which "installs" a fake server binary) and a
// stub chroot (which runs it on the host), so cache and stamp rules are tested without a mirror.

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

let work: string;
let cache: string;
let stubs: string;
let calls: string;

function writeExecutable(file: string, text: string): void {
  fs.writeFileSync(file, text, { mode: 0o755 });
}

beforeEach(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'rootfs-test-'));
  cache = path.join(work, 'cache');
  stubs = path.join(work, 'stubs');
  calls = path.join(work, 'debootstrap-calls');
  fs.mkdirSync(stubs);
  // Args: --variant=minbase --include=PKG SUITE TARGET MIRROR
  writeExecutable(
    path.join(stubs, 'debootstrap'),
    `#!/bin/bash
echo "$*" >> "${calls}"
[ "\${STUB_FAIL:-}" = 1 ] && { echo "E: Couldn't download packages" >&2; exit 1; }
target="$4"
mkdir -p "$target/usr/sbin" "$target/var/tmp"
for b in mysqld mariadbd; do
  printf '#!/bin/sh\\necho "%s"\\n' "\${STUB_VERSION:-/usr/sbin/mysqld  Ver 9.7.4-2 for Linux on x86_64 ((Debian))}" > "$target/usr/sbin/$b"
  chmod +x "$target/usr/sbin/$b"
done
`,
  );
  writeExecutable(path.join(stubs, 'chroot'), '#!/bin/bash\nroot="$1"; shift; bin="$1"; shift; exec "$root$bin" "$@"\n');
});

afterEach(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

function provision(args: string[], extraEnv: Record<string, string> = {}): Run {
  const result = spawnSync('bash', [PROVISION_SCRIPT, ...args], {
    encoding: 'utf8',
    env: {
      PATH: process.env['PATH'],
      SQLTALLY_ROOTFS_CACHE: cache,
      SQLTALLY_DEBOOTSTRAP: path.join(stubs, 'debootstrap'),
      SQLTALLY_CHROOT: path.join(stubs, 'chroot'),
      SQLTALLY_DEBIAN_MIRROR: 'http://mirror.invalid/debian',
      SQLTALLY_SKIP_MIRROR_CHECK: '1',
      ...extraEnv,
    },
  });
  return { status: result.status, stdout: result.stdout.trim(), stderr: result.stderr };
}

function debootstrapCalls(): number {
  return fs.existsSync(calls) ? fs.readFileSync(calls, 'utf8').trim().split('\n').length : 0;
}

/** A stamp exactly as the script writes it, but from a build by an older version of the script. */
function olderStamp(): string {
  return JSON.stringify({
    schemaVersion: 1,
    name: 'mysql',
    inputsHash: '0123456789abcdef',
    suite: 'sid',
    packages: 'mysql-server-core',
    mirror: 'http://deb.debian.org/debian',
    serverBinary: '/usr/sbin/mysqld',
    serverVersion: '/usr/sbin/mysqld  Ver 9.6.0-1 for Linux on x86_64 ((Debian))',
    buildSeconds: 60,
    builtAt: '2026-01-01T00:00:00Z',
    complete: true,
  });
}

const runsAsRoot = process.getuid?.() === 0;
const rootOnly = runsAsRoot ? it : it.skip;

describe('provision-rootfs.sh cache rules', () => {
  rootOnly('builds once, stamps the build, and reuses it the second time', () => {
    const first = provision(['mysql']);
    expect(first.stderr).toContain('ready in');
    expect(first.status).toBe(0);
    const dir = first.stdout;
    expect(path.basename(dir)).toBe(`mysql-${rootfsInputsHash('mysql')}`);
    const stamp = JSON.parse(fs.readFileSync(path.join(dir, ROOTFS_STAMP_FILE), 'utf8'));
    expect(stamp).toMatchObject({ name: 'mysql', complete: true, suite: 'sid', serverVersion: expect.stringContaining('9.7.4') });

    const second = provision(['mysql']);
    expect(second.status).toBe(0);
    expect(second.stdout).toBe(dir);
    expect(debootstrapCalls()).toBe(1);
    expect(provision(['mysql', '--check']).stdout).toBe(dir);
  });

  rootOnly('never reuses a half-built temp folder or a final folder without a stamp', () => {
    const hash = rootfsInputsHash('mysql');
    const half = path.join(cache, `.building-mysql-${hash}-99999`);
    const unstamped = path.join(cache, `mysql-${hash}`);
    fs.mkdirSync(path.join(half, 'usr/sbin'), { recursive: true });
    fs.mkdirSync(path.join(unstamped, 'usr/sbin'), { recursive: true });
    writeExecutable(path.join(unstamped, 'usr/sbin/mysqld'), '#!/bin/sh\necho half\n');

    expect(provision(['mysql', '--check']).status).toBe(3);
    expect(locateRootfs('mysql', { SQLTALLY_ROOTFS_CACHE: cache })).toMatchObject({ found: false });

    const run = provision(['mysql']);
    expect(run.status).toBe(0);
    expect(debootstrapCalls()).toBe(1);
    expect(fs.existsSync(half)).toBe(false);
    expect(fs.existsSync(path.join(unstamped, ROOTFS_STAMP_FILE))).toBe(true);
  });

  rootOnly('rebuilds over a cache from an older build (another script hash) and removes it', () => {
    const older = path.join(cache, 'mysql-0123456789abcdef');
    fs.mkdirSync(path.join(older, 'usr/sbin'), { recursive: true });
    writeExecutable(path.join(older, 'usr/sbin/mysqld'), '#!/bin/sh\necho old\n');
    fs.writeFileSync(path.join(older, ROOTFS_STAMP_FILE), olderStamp());
    // Same folder name as the current build but stamped by an older script: also rebuilt.
    const current = path.join(cache, `mysql-${rootfsInputsHash('mysql')}`);
    fs.mkdirSync(path.join(current, 'usr/sbin'), { recursive: true });
    writeExecutable(path.join(current, 'usr/sbin/mysqld'), '#!/bin/sh\necho old\n');
    fs.writeFileSync(path.join(current, ROOTFS_STAMP_FILE), olderStamp());
    const located = locateRootfs('mysql', { SQLTALLY_ROOTFS_CACHE: cache });
    expect(located.found).toBe(false);
    if (!located.found) expect(located.reason).toMatch(/older build/);

    const run = provision(['mysql']);
    expect(run.status).toBe(0);
    expect(run.stderr).toContain('removing stale entry');
    expect(fs.existsSync(older)).toBe(false);
    expect(debootstrapCalls()).toBe(1);
    expect(locateRootfs('mysql', { SQLTALLY_ROOTFS_CACHE: cache })).toMatchObject({ found: true, dir: current });
  });

  rootOnly('a failed debootstrap leaves nothing behind and names the backend', () => {
    const run = provision(['mariadb11'], { STUB_FAIL: '1' });
    expect(run.status).toBe(6);
    expect(run.stderr).toContain('provision-rootfs[mariadb@11.x]: UNAVAILABLE: debootstrap of testing');
    expect(fs.readdirSync(cache).filter((f) => !f.startsWith('.lock') && !f.startsWith('.log'))).toEqual([]);
  });

  rootOnly('refuses a mysql root filesystem whose server says it is MariaDB', () => {
    const run = provision(['mysql'], { STUB_VERSION: 'mysqld  Ver 11.8.9-MariaDB-2 for debian-linux-gnu' });
    expect(run.status).toBe(7);
    expect(run.stderr).toMatch(/which is MariaDB, not MySQL/);
    expect(fs.readdirSync(cache).filter((f) => f.startsWith('mysql-'))).toEqual([]);
  });

  it('fails fast with a clear message when the mirror is unreachable', async () => {
    // A loopback port nobody listens on: the closest thing to "no network" that stays on this machine.
    const port = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const run = provision(['mysql'], {
      SQLTALLY_DEBIAN_MIRROR: `http://127.0.0.1:${port}/debian`,
      SQLTALLY_SKIP_MIRROR_CHECK: '',
    });
    if (!runsAsRoot) {
      expect(run.status).toBe(4);
      return;
    }
    expect(run.status).toBe(5);
    expect(run.stderr).toContain(`provision-rootfs[mysql@9.x]: UNAVAILABLE: mirror http://127.0.0.1:${port}/debian is unreachable`);
    expect(debootstrapCalls()).toBe(0);
  });

  it('rejects an unknown root filesystem name with usage', () => {
    const run = provision(['postgres']);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('usage:');
  });
});

describe('provision-rootfs.sh mirror from apt sources', () => {
  function mirrorFrom(files: Record<string, string>): string {
    const apt = path.join(work, 'apt');
    fs.mkdirSync(path.join(apt, 'sources.list.d'), { recursive: true });
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(apt, name), text);
    const run = provision(['mysql', '--print-mirror'], { SQLTALLY_APT_DIR: apt, SQLTALLY_DEBIAN_MIRROR: '' });
    expect(run.status).toBe(0);
    return run.stdout;
  }

  it('reads the one-line format, skipping comments, deb-src, security and options', () => {
    expect(
      mirrorFrom({
        'sources.list': [
          '# deb http://commented.example/debian bookworm main',
          'deb-src http://src.example/debian bookworm main',
          'deb http://security.debian.org/debian-security bookworm-security main',
          'deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://ftp.example.org/debian/ bookworm main contrib',
          'deb http://later.example/debian bookworm main',
        ].join('\n'),
      }),
    ).toBe('http://ftp.example.org/debian');
  });

  it('reads deb822 .sources stanzas, skipping security suites, vendor repos and disabled stanzas', () => {
    expect(
      mirrorFrom({
        'sources.list.d/nodesource.sources': 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n',
        'sources.list.d/debian.sources': [
          'Types: deb',
          'URIs: http://deb.debian.org/debian-security',
          'Suites: bookworm-security',
          'Components: main',
          '',
          'Types: deb',
          'URIs: http://disabled.example/debian',
          'Suites: bookworm',
          'Enabled: no',
          '',
          'Types: deb deb-src',
          '# http://snapshot.debian.org/archive/debian/20250520T000000Z',
          'URIs: http://mirror.example.net/debian',
          'Suites: bookworm bookworm-updates',
          'Components: main',
        ].join('\n'),
      }),
    ).toBe('http://mirror.example.net/debian');
  });

  it('ignores files apt itself ignores, and falls back to deb.debian.org', () => {
    expect(
      mirrorFrom({
        'sources.list.d/google.list.disabled-by-farm': 'deb http://ignored.example/debian bookworm main\n',
        'sources.list.d/cloud.list': 'deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n',
      }),
    ).toBe('http://deb.debian.org/debian');
  });

  it('prefers SQLTALLY_DEBIAN_MIRROR over the apt sources', () => {
    const run = provision(['mysql', '--print-mirror'], { SQLTALLY_DEBIAN_MIRROR: 'http://override.example/debian/' });
    expect(run.stdout).toBe('http://override.example/debian');
  });
});

describe('locateRootfs', () => {
  it('explains a missing cache in words a person can act on', () => {
    const located = locateRootfs('mariadb11', { SQLTALLY_ROOTFS_CACHE: cache });
    expect(located).toEqual({
      found: false,
      reason: expect.stringContaining('run scripts/provision-rootfs.sh mariadb11'),
    });
  });

  it('rejects a stamp that does not parse', () => {
    const dir = path.join(cache, `mysql-${rootfsInputsHash('mysql')}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, ROOTFS_STAMP_FILE), '{"schemaVersion": 1, "name": "mysql"');
    const located = locateRootfs('mysql', { SQLTALLY_ROOTFS_CACHE: cache });
    expect(located.found).toBe(false);
    if (!located.found) expect(located.reason).toMatch(/stamp .* unreadable/);
  });
});

describe('mysqldArgs', () => {
  it("starts a private, loopback-only server ready for counting, with paths inside the chroot, the recipe's options last", () => {
    const args = mysqldArgs({ serverOptions: ['--own-option'], dataDir: '/var/tmp/sqltally-x/data', runDir: '/var/tmp/sqltally-x', port: 40001 });
    expect(args[0]).toBe('--no-defaults');
    expect(args).toEqual(
      expect.arrayContaining([
        '--user=root',
        '--datadir=/var/tmp/sqltally-x/data',
        '--bind-address=127.0.0.1',
        '--port=40001',
        '--secure-file-priv=',
        '--performance-schema=ON',
        '--max-allowed-packet=64M',
        '--init-file=/var/tmp/sqltally-x/init.sql',
        '--tmpdir=/var/tmp/sqltally-x/tmp',
      ]),
    );
    expect(args.at(-1)).toBe('--own-option');
  });

  it('gives MySQL-only options to the MySQL recipe alone', () => {
    expect(MYSQL_ROOTFS.serverOptions).toContain('--mysqlx=OFF');
    expect(MARIADB_ROOTFS.serverOptions.some((a) => a.startsWith('--mysqlx'))).toBe(false);
  });

  // MySQL 9.7 and MariaDB 11.8 from these root filesystems offer TLS unless told not to (checked on the binaries).
  it("starts every private server of a backend with its module's plain-text options, wherever it runs", () => {
    expect(MYSQL.plainTextOptions).toEqual(['--tls-version=']);
    expect(MARIADB.plainTextOptions).toEqual(['--skip-ssl']);
    for (const [module, recipe, local] of [
      [MYSQL, MYSQL_ROOTFS, mysqlServerArgs('/d', 1, '/i', '/t')],
      [MARIADB, MARIADB_ROOTFS, mariadbServerArgs('/p', 1)],
    ] as const) {
      expect(recipe.serverOptions).toEqual(expect.arrayContaining([...module.plainTextOptions]));
      expect(local).toEqual(expect.arrayContaining([...module.plainTextOptions]));
      expect(module.containerPlan('image:tag').command).toEqual(expect.arrayContaining([...module.plainTextOptions]));
    }
  });
});

// The images built from these root filesystems (scripts/docker-stage.sh) must accept the official images'
// environment, so @testcontainers/* work unchanged; the entrypoints' dry run shows what they would do.
describe('docker entrypoints', () => {
  const DOCKER_DIR = path.resolve(__dirname, '..', '..', 'docker');

  function entrypoint(script: string, env: Record<string, string>, args: string[] = []): Run {
    const result = spawnSync('bash', [path.join(DOCKER_DIR, script), ...args], {
      encoding: 'utf8',
      env: { PATH: process.env['PATH'], SQLTALLY_ENTRYPOINT_DRY_RUN: '1', ...env },
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  it('mysql: creates the database, the user and root@% from MYSQL_*, and passes extra server options last', () => {
    const run = entrypoint(
      'mysql-entrypoint.sh',
      { SQLTALLY_FLAVOUR: 'mysql', MYSQL_ROOT_PASSWORD: "ro'ot", MYSQL_DATABASE: 'test', MYSQL_USER: 'test', MYSQL_PASSWORD: 'pw' },
      ['--performance-schema=ON', '--max-allowed-packet=64M'],
    );
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("ALTER USER 'root'@'localhost' IDENTIFIED BY 'ro''ot';");
    expect(run.stdout).toContain("CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY 'ro''ot';");
    expect(run.stdout).toContain('CREATE DATABASE IF NOT EXISTS `test`;');
    expect(run.stdout).toContain("GRANT ALL PRIVILEGES ON `test`.* TO 'test'@'%';");
    const server = run.stdout.split('-- server\n')[1]?.trim().split('\n') ?? [];
    expect(server[0]).toBe('/usr/sbin/mysqld');
    expect(server).toContain('--mysqlx=OFF');
    expect(server.slice(-2)).toEqual(['--performance-schema=ON', '--max-allowed-packet=64M']);
  });

  it('mariadb: prefers MARIADB_* over MYSQL_* and drops a leading "mariadbd"', () => {
    const run = entrypoint(
      'mysql-entrypoint.sh',
      { SQLTALLY_FLAVOUR: 'mariadb', MARIADB_ROOT_PASSWORD: 'a', MYSQL_ROOT_PASSWORD: 'b', MARIADB_DATABASE: 'db1' },
      ['mariadbd', '--performance-schema=ON'],
    );
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("IDENTIFIED BY 'a';");
    expect(run.stdout).not.toContain("'b'");
    expect(run.stdout).toContain('CREATE DATABASE IF NOT EXISTS `db1`;');
    const server = run.stdout.split('-- server\n')[1]?.trim().split('\n') ?? [];
    expect(server[0]).toBe('/usr/sbin/mariadbd');
    expect(server).not.toContain('--mysqlx=OFF');
    expect(server.at(-1)).toBe('--performance-schema=ON');
  });

  it('mysql family: refuses to start without a root password setting, like the official images', () => {
    const run = entrypoint('mysql-entrypoint.sh', { SQLTALLY_FLAVOUR: 'mariadb', MARIADB_DATABASE: 'x' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD');
    const allowed = entrypoint('mysql-entrypoint.sh', { SQLTALLY_FLAVOUR: 'mariadb', MARIADB_ALLOW_EMPTY_ROOT_PASSWORD: '1' });
    expect(allowed.status).toBe(0);
    expect(allowed.stdout).toContain("ALTER USER 'root'@'localhost' IDENTIFIED BY '';");
  });

  it('postgres: honours POSTGRES_USER/DB/PASSWORD and passes -c options to the server', () => {
    const run = entrypoint('postgres-entrypoint.sh', { POSTGRES_USER: 'test', POSTGRES_DB: 'te"st', POSTGRES_PASSWORD: 'pw' }, [
      '-c',
      'shared_preload_libraries=pg_stat_statements',
    ]);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('initdb -D /var/lib/postgresql/data -U test --auth-local=trust --auth-host=scram-sha-256');
    expect(run.stdout).toContain('host all all all scram-sha-256');
    expect(run.stdout).toContain('CREATE DATABASE "te""st"');
    const server = run.stdout.split('-- server\n')[1]?.trim().split('\n') ?? [];
    expect(server.slice(-2)).toEqual(['-c', 'shared_preload_libraries=pg_stat_statements']);
    expect(server).toContain('listen_addresses=*');
  });

  it('postgres: refuses an empty password unless POSTGRES_HOST_AUTH_METHOD=trust', () => {
    expect(entrypoint('postgres-entrypoint.sh', {}).status).toBe(1);
    const trust = entrypoint('postgres-entrypoint.sh', { POSTGRES_HOST_AUTH_METHOD: 'trust' });
    expect(trust.status).toBe(0);
    expect(trust.stdout).toContain('host all all all trust');
    expect(trust.stdout).not.toContain('-- single-user');
  });
});
