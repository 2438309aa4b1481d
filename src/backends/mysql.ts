import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { leadingVersion } from './backend';
import type { BackendModule, ContainerPlan, InstallSearch, LocalInstall, StartOptions } from './backend';
import { findExecutable, searchDirs, versionOutput } from './binaries';
import { makePrivateDir, runTool } from './local-process';
import { provisionCommand, rootfsFinder } from './rootfs';
import type { RootfsRecipe } from './rootfs';
import { identifyMysqlFamily, MYSQL_FAMILY_MEMORY_OPTIONS, pingMysqlFamily, THROWAWAY_DURABILITY_OPTIONS, startPrivateMysqlFamily } from './mysql-family';
import type { NetworkConnection, StartedBackend } from './types';
import { isRoot } from '../shared/process';
import { withPlan } from './testcontainers';

const SERVER_BINARY = 'mysqld';
const DEFAULT_IMAGE = 'mysql:8.4';
const DEFAULT_PORT = 3306;
const DATABASE = 'sqltally';
const USER = 'root';
const MAX_ALLOWED_PACKET = '64M';
const STOP_SIGNAL: NodeJS.Signals = 'SIGTERM';
const BIND_FAILURE = /Address already in use|Do you already have another mysqld server running/i;
const VERSION_PATTERN = /Ver\s+(\S+)/;
/** Beside the family's: 16 MB of error summaries by thread, and again by account, user and host, that no probe reads. */
const MEMORY_OPTIONS = [...MYSQL_FAMILY_MEMORY_OPTIONS, '--performance-schema-error-size=0'];
/**
 * The redo log MySQL makes at initialise, which every start copies: sized down from the default, it still takes a
 * single 3 MB BLOB (InnoDB refuses a BLOB over a tenth of the redo log).
 */
const ROOTFS_REDO_CAPACITY = '--innodb-redo-log-capacity=32M';
/**
 * No doublewrite buffer: it guards against torn writes in a crash a throwaway server never recovers from, costs files
 * every start copies and writes each page twice. Given at initialise too, so the files are never made.
 */
const ROOTFS_NO_DOUBLEWRITE = '--innodb-doublewrite=OFF';
/**
 * MySQL 8+ makes itself a certificate and offers TLS, which its clients take up by default. An empty TLS version
 * list turns it off (9.x has no `--ssl` option any more).
 */
const PLAIN_TEXT_OPTIONS = ['--tls-version='];

/** MySQL 9.x needs a newer C library than Debian 12: it runs from a provisioned root filesystem through chroot. */
export const MYSQL_ROOTFS: RootfsRecipe = {
  name: 'mysql',
  serverBinary: '/usr/sbin/mysqld',
  // A clean shutdown mostly waits, to save a data directory that is deleted next: killed outright.
  stopSignal: 'SIGKILL',
  initialize: (dataDir, tmpDir) => ({
    binary: '/usr/sbin/mysqld',
    args: ['--no-defaults', '--initialize-insecure', '--user=root', `--datadir=${dataDir}`, `--tmpdir=${tmpDir}`, ROOTFS_REDO_CAPACITY, ROOTFS_NO_DOUBLEWRITE],
  }),
  // The X protocol would listen on a second fixed port (33060) and collide between parallel servers.
  serverOptions: ['--mysqlx=OFF', ROOTFS_REDO_CAPACITY, ROOTFS_NO_DOUBLEWRITE, ...MEMORY_OPTIONS, ...PLAIN_TEXT_OPTIONS],
};

/**
 * Server options for a private MySQL: loopback only, performance_schema on, no binary log, and a temporary
 * directory of its own (a starting MySQL deletes every `#sql*` file in its tmpdir, another server's included).
 */
export function mysqlServerArgs(dataDir: string, port: number, initFile: string, tmpDir: string): string[] {
  return [
    '--no-defaults',
    `--datadir=${dataDir}`,
    `--tmpdir=${tmpDir}`,
    `--socket=${path.join(dataDir, 'mysqld.sock')}`,
    `--pid-file=${path.join(dataDir, 'mysqld.pid')}`,
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    // X Protocol would open a second port (33060) that collides between private servers.
    '--mysqlx=OFF',
    '--skip-name-resolve',
    '--performance-schema=ON',
    `--max-allowed-packet=${MAX_ALLOWED_PACKET}`,
    `--init-file=${initFile}`,
    // LOAD DATA LOCAL INFILE (the load-data strategies): off by default on MySQL 8.
    '--local-infile=1',
    ...THROWAWAY_DURABILITY_OPTIONS,
    ...MEMORY_OPTIONS,
    ...PLAIN_TEXT_OPTIONS,
    ...(isRoot() ? ['--user=root'] : []),
  ];
}

// Untested here: this machine has no MySQL binary (its mysqld is MariaDB). Written to MySQL 8.4's documented
// --initialize-insecure flow; H7's provider is the tested way to a local MySQL.
async function startLocal(binary: string, options: StartOptions): Promise<StartedBackend> {
  const dir = makePrivateDir('mysql', options.env);
  const dataDir = path.join(dir.path, 'data');
  const initFile = path.join(dir.path, 'sqltally-init.sql');
  const tmpDir = path.join(dir.path, 'tmp');
  return startPrivateMysqlFamily(
    {
      module: MYSQL,
      binary,
      dir,
      initFile,
      user: USER,
      database: DATABASE,
      prepare: async () => {
        fs.mkdirSync(tmpDir, { mode: 0o700 });
        // --initialize refuses a non-empty datadir, so the data lives one level below our private directory.
        await runTool(
          options.id,
          binary,
          ['--no-defaults', '--initialize-insecure', `--datadir=${dataDir}`, `--tmpdir=${tmpDir}`, ...(isRoot() ? ['--user=root'] : [])],
          { cwd: dir.path, env: options.env },
        );
      },
      args: (port) => mysqlServerArgs(dataDir, port, initFile, tmpDir),
      stopSignal: STOP_SIGNAL,
      bindFailure: BIND_FAILURE,
    },
    options,
  );
}

/** A `mysqld` counts only if its own `--version` says MySQL: Debian's mysqld is a symlink to mariadbd. */
async function findLocalMysql(env: NodeJS.ProcessEnv): Promise<InstallSearch> {
  const { dirs, described } = searchDirs(env, 'mysql');
  const binary = findExecutable(SERVER_BINARY, dirs);
  if (!binary) return { installs: [], missing: [`no MySQL server binary (no ${SERVER_BINARY} on ${described})`] };
  const output = (await versionOutput(binary)) ?? '';
  if (/mariadb/i.test(output)) {
    return { installs: [], missing: [`no MySQL server binary (${SERVER_BINARY} on ${described} is MariaDB)`] };
  }
  const version = VERSION_PATTERN.exec(output)?.[1];
  if (!version) return { installs: [], missing: [`${binary} --version did not answer`] };
  const install: LocalInstall = {
    backend: 'mysql',
    provider: 'local',
    version,
    label: MYSQL.variantLabel(version),
    origin: binary,
    start: (options) => startLocal(binary, options),
  };
  return { installs: [install], missing: [] };
}

export const MYSQL = {
  name: 'mysql',
  providers: ['external', 'testcontainers', 'local'],
  urlSchemes: ['mysql'],
  jdbcScheme: 'mysql',
  readDriver: 'mysql2',
  defaultPort: DEFAULT_PORT,
  defaultImage: DEFAULT_IMAGE,
  unavailableHint: `run ${provisionCommand(MYSQL_ROOTFS.name)} (as root) or set SQLTALLY_MYSQL_URL`,
  installFinders: [findLocalMysql, rootfsFinder(MYSQL_ROOTFS, (): BackendModule => MYSQL)],
  plainTextOptions: PLAIN_TEXT_OPTIONS,
  variantLabel: (version: string) => leadingVersion(version, 2),
  identify: identifyMysqlFamily,
  ping: (connection: NetworkConnection) => pingMysqlFamily(connection),
  containerPlan: (image: string): ContainerPlan => ({
    image,
    command: [
      `--max-allowed-packet=${MAX_ALLOWED_PACKET}`,
      '--performance-schema=ON',
      '--local-infile=1',
      ...THROWAWAY_DURABILITY_OPTIONS,
      ...MEMORY_OPTIONS,
      ...PLAIN_TEXT_OPTIONS,
    ],
    environment: {},
    reuse: false,
    containerPort: DEFAULT_PORT,
    user: USER,
    // A fresh password per container: a known one would let any local process in through the published port.
    password: randomBytes(18).toString('base64url'),
    database: DATABASE,
  }),
  containerBuilder: {
    packageName: '@testcontainers/mysql',
    build: async (plan) => {
      const { MySqlContainer } = await import('@testcontainers/mysql');
      return withPlan(new MySqlContainer(plan.image).withRootPassword(plan.password), plan);
    },
  },
} satisfies BackendModule;
