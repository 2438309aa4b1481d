import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { leadingVersion } from './backend';
import type { BackendModule, ContainerPlan, InstallSearch, LocalInstall, StartOptions } from './backend';
import { findExecutable, searchDirs, versionOutput } from './binaries';
import { makePrivateDir, runTool } from './local-process';
import { rootfsFinder } from './rootfs';
import type { RootfsRecipe } from './rootfs';
import { copyTemplate, ensureTemplate, fileIdentity, templateCacheDir } from './template';
import type { TemplateRecipe } from './template';
import { identifyMysqlFamily, MYSQL_FAMILY_MEMORY_OPTIONS, pingMysqlFamily, THROWAWAY_DURABILITY_OPTIONS, startPrivateMysqlFamily } from './mysql-family';
import type { NetworkConnection, StartedBackend } from './types';
import { isRoot } from '../shared/process';
import { withPlan } from './testcontainers';

const SERVER_BINARY = 'mariadbd';
const INSTALL_DB_BINARY = 'mariadb-install-db';
const DEFAULT_IMAGE = 'mariadb:11.4';
const DEFAULT_PORT = 3306;
const DATABASE = 'sqltally';
const USER = 'root';
// The wire tests send a single 22 MB statement.
const MAX_ALLOWED_PACKET = '64M';
const STOP_SIGNAL: NodeJS.Signals = 'SIGTERM';
const REDO_LOG_SIZE = '--innodb-log-file-size=16M';
const BIND_FAILURE = /Address already in use|Can't start server: Bind on TCP\/IP port/i;
const VERSION_PATTERN = /Ver\s+(\S+)/;
/** Beside the family's: the Aria page cache is 128 MB by default, allocated at start, and holds only system and temporary tables. */
const MEMORY_OPTIONS = [...MYSQL_FAMILY_MEMORY_OPTIONS, '--aria-pagecache-buffer-size=8M'];
/** MariaDB 11.4+ makes itself a certificate and offers TLS, which its clients take up by default; 10.x offers none. */
const PLAIN_TEXT_OPTIONS = ['--skip-ssl'];
/** MariaDB 11.8's default redo log made most of the root filesystem's template, which every start copies. */
const ROOTFS_REDO_SIZE = '--innodb-log-file-size=32M';
/** What mariadb-install-db feeds to `mariadbd --bootstrap`, in its order (without the help tables). */
const ROOTFS_BOOTSTRAP_SQL = [
  'mariadb_system_tables.sql',
  'mariadb_performance_tables.sql',
  'mariadb_system_tables_data.sql',
  'maria_add_gis_sp_bootstrap.sql',
  'mariadb_sys_schema.sql',
];

/**
 * A fresh data directory for the root filesystem's server. mariadb-install-db needs my_print_defaults, which
 * mariadb-server-core does not ship; feeding its system-table scripts to `mariadbd --bootstrap` is all it does.
 */
function bootstrapDataDir(dataDir: string, tmpDir: string): { binary: string; args: string[] } {
  const script = [
    `mkdir -p ${dataDir} ${tmpDir} &&`,
    // Bootstrap mode reads one statement per line.
    `{ printf '%s\\n' 'CREATE DATABASE IF NOT EXISTS mysql;' 'USE mysql;' 'SET @auth_root_socket=NULL;';`,
    ...ROOTFS_BOOTSTRAP_SQL.map((f) => `cat /usr/share/mariadb/${f};`),
    '} |',
    `/usr/sbin/mariadbd --no-defaults --bootstrap --user=root --datadir=${dataDir} --tmpdir=${tmpDir} --log-warnings=0 ${ROOTFS_REDO_SIZE}`,
    '--enforce-storage-engine= --max-allowed-packet=8M --net-buffer-length=16K',
  ];
  return { binary: '/bin/sh', args: ['-c', script.join(' ')] };
}

/** MariaDB 11.x (Debian testing) from a provisioned root filesystem, through chroot. */
export const MARIADB_ROOTFS: RootfsRecipe = {
  name: 'mariadb11',
  serverBinary: '/usr/sbin/mariadbd',
  // MariaDB's clean shutdown is quick, so it keeps one.
  stopSignal: 'SIGTERM',
  initialize: bootstrapDataDir,
  serverOptions: [ROOTFS_REDO_SIZE, ...MEMORY_OPTIONS, ...PLAIN_TEXT_OPTIONS],
};

/**
 * Where one private MariaDB keeps its files, all inside its private directory. The temporary directory is its own:
 * a MariaDB deletes every `#sql*` file in its tmpdir when it starts, so a shared /tmp lets one starting server
 * destroy the temporary tables another is using (seen as "Error on delete of '/tmp/#sql-temptable-...'").
 */
export function mariadbLayout(privateDir: string): { dataDir: string; tmpDir: string; initFile: string } {
  return { dataDir: path.join(privateDir, 'data'), tmpDir: path.join(privateDir, 'tmp'), initFile: path.join(privateDir, 'sqltally-init.sql') };
}

/** Server options that make every private MariaDB ready for counting and reachable only from loopback. */
export function mariadbServerArgs(privateDir: string, port: number): string[] {
  const { dataDir, tmpDir, initFile } = mariadbLayout(privateDir);
  return [
    '--no-defaults',
    `--datadir=${dataDir}`,
    `--tmpdir=${tmpDir}`,
    `--socket=${path.join(privateDir, 'mysqld.sock')}`,
    `--pid-file=${path.join(privateDir, 'mysqld.pid')}`,
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    '--skip-networking=0',
    // Clients on 127.0.0.1 then match 'root'@'127.0.0.1' exactly, not whatever 'localhost' resolves to.
    '--skip-name-resolve',
    // Off by default on MariaDB; the per-thread statement probes need it.
    '--performance-schema=ON',
    // Off by default on MariaDB too, and without it prepared_statements_instances never counts an execute, so a
    // connection's prepared executes could not be told apart by statement class.
    '--performance-schema-consumer-events-statements-current=ON',
    `--max-allowed-packet=${MAX_ALLOWED_PACKET}`,
    `--init-file=${initFile}`,
    // LOAD DATA LOCAL INFILE (the load-data strategies); a server with it off refuses them by name.
    '--local-infile=1',
    // The size the template's redo log was made with: any other and every start rewrote it (10.11 resizes the log
    // to the configured size at startup: 96 MB written per start with the default).
    REDO_LOG_SIZE,
    ...THROWAWAY_DURABILITY_OPTIONS,
    ...MEMORY_OPTIONS,
    ...PLAIN_TEXT_OPTIONS,
    ...(isRoot() ? ['--user=root'] : []),
  ];
}

/** What mariadb-install-db gets after `--no-defaults` (which must come first) and its paths; part of the template's identity. */
const INSTALL_OPTIONS = [
  '--skip-test-db',
  '--auth-root-authentication-method=normal',
  // A smaller redo log makes the install and the datadir a fraction of the default size.
  REDO_LOG_SIZE,
];

/** A data directory as mariadb-install-db makes it for this binary, built once and copied for every start. */
function installTemplate(install: { binary: string; installDb: string }, options: StartOptions): TemplateRecipe {
  const userArgs = isRoot() ? ['--user=root'] : [];
  return {
    name: 'mariadb',
    identity: [fileIdentity(install.binary), fileIdentity(install.installDb), ...INSTALL_OPTIONS, ...userArgs],
    build: async (building) => {
      const tmpDir = path.join(building, 'tmp');
      fs.mkdirSync(tmpDir, { mode: 0o700 });
      await runTool(
        options.id,
        install.installDb,
        // The bootstrap server the installer runs has temporary tables of its own: give it the scratch tmpdir.
        ['--no-defaults', `--datadir=${path.join(building, 'data')}`, `--tmpdir=${tmpDir}`, ...INSTALL_OPTIONS, ...userArgs],
        { cwd: building, env: options.env },
      );
    },
  };
}

async function startLocal(install: { binary: string; installDb: string }, options: StartOptions): Promise<StartedBackend> {
  const dir = makePrivateDir('mariadb', options.env);
  const layout = mariadbLayout(dir.path);
  return startPrivateMysqlFamily(
    {
      module: MARIADB,
      binary: install.binary,
      dir,
      initFile: layout.initFile,
      user: USER,
      database: DATABASE,
      prepare: async () => {
        fs.mkdirSync(layout.tmpDir, { mode: 0o700 });
        const template = await ensureTemplate(installTemplate(install, options), {
          backend: options.id,
          cacheDir: templateCacheDir(options.env),
          env: options.env,
        });
        await copyTemplate(template.dataDir, layout.dataDir, options.id, options.env);
      },
      // The install makes root@'::1' and root@'<hostname>' without a password: only the password account on
      // 127.0.0.1 and the socket's root@localhost (in the 0700 private directory) are kept.
      initPrelude: [
        `DELETE FROM mysql.global_priv WHERE NOT (User = '${USER}' AND Host IN ('localhost', '127.0.0.1')) AND User <> 'mariadb.sys';`,
        'FLUSH PRIVILEGES;',
      ],
      args: (port) => mariadbServerArgs(dir.path, port),
      stopSignal: STOP_SIGNAL,
      bindFailure: BIND_FAILURE,
    },
    options,
  );
}

/** Finds `mariadbd` + `mariadb-install-db` and asks the binary its version. */
async function findLocalMariadb(env: NodeJS.ProcessEnv): Promise<InstallSearch> {
  const { dirs, described } = searchDirs(env, 'mariadb');
  const binary = findExecutable(SERVER_BINARY, dirs);
  const installDb = findExecutable(INSTALL_DB_BINARY, dirs);
  if (!binary) return { installs: [], missing: [`no ${SERVER_BINARY} on ${described}`] };
  if (!installDb) return { installs: [], missing: [`${SERVER_BINARY} found but no ${INSTALL_DB_BINARY} on ${described}`] };
  const output = await versionOutput(binary);
  const version = output ? VERSION_PATTERN.exec(output)?.[1] : undefined;
  if (!version) return { installs: [], missing: [`${binary} --version did not answer`] };
  const install: LocalInstall = {
    backend: 'mariadb',
    provider: 'local',
    version,
    label: MARIADB.variantLabel(version),
    origin: binary,
    start: (options) => startLocal({ binary, installDb }, options),
  };
  return { installs: [install], missing: [] };
}

export const MARIADB = {
  name: 'mariadb',
  providers: ['external', 'testcontainers', 'local'],
  urlSchemes: ['mariadb', 'mysql'],
  jdbcScheme: 'mariadb',
  readDriver: 'mysql2',
  defaultPort: DEFAULT_PORT,
  defaultImage: DEFAULT_IMAGE,
  unavailableHint: 'install mariadb-server (apt-get install mariadb-server) or set SQLTALLY_MARIADB_URL',
  // The root filesystem's server is listed after the host's own.
  installFinders: [findLocalMariadb, rootfsFinder(MARIADB_ROOTFS, (): BackendModule => MARIADB)],
  plainTextOptions: PLAIN_TEXT_OPTIONS,
  variantLabel: (version: string) => leadingVersion(version, 2),
  identify: identifyMysqlFamily,
  ping: (connection: NetworkConnection) => pingMysqlFamily(connection),
  containerPlan: (image: string): ContainerPlan => ({
    image,
    command: [
      '--performance-schema=ON',
      '--performance-schema-consumer-events-statements-current=ON',
      `--max-allowed-packet=${MAX_ALLOWED_PACKET}`,
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
    packageName: '@testcontainers/mariadb',
    build: async (plan) => {
      const { MariaDbContainer } = await import('@testcontainers/mariadb');
      return withPlan(new MariaDbContainer(plan.image).withRootPassword(plan.password), plan);
    },
  },
} satisfies BackendModule;
