import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { BackendModule, InstallFinder, InstallSearch, LocalInstall, StartOptions } from './backend';
import { findExecutable } from './binaries';
import { SqltallyError } from '../shared/errors';
import { launchServer, makePrivateDir, runTool, loopbackConnection } from './local-process';
import { pingMysqlFamily, startedPrivateServer, THROWAWAY_DURABILITY_OPTIONS } from './mysql-family';
import { copyTemplate, ensureTemplate, fileIdentity } from './template';
import type { TemplateRecipe } from './template';
import type { StartedBackend } from './types';

/**
 * Servers that need a newer C library than the host's (MySQL 9.x from Debian sid, MariaDB 11.x from testing)
 * run from a Debian root filesystem built once per machine by scripts/provision-rootfs.sh, through chroot.
 * This file finds a complete build and starts the server in it with the shared process lifecycle.
 */

/** The provisioning script; its bytes are part of every cache entry's identity. */
// From the sources this file sits in src/backends/, from the build in dist/backends/: the script stays at the top.
export const PROVISION_SCRIPT =
  [path.resolve(__dirname, '..', 'scripts', 'provision-rootfs.sh'), path.resolve(__dirname, '..', '..', 'scripts', 'provision-rootfs.sh')].find((p) =>
    fs.existsSync(p),
  ) ?? path.resolve(__dirname, '..', '..', 'scripts', 'provision-rootfs.sh');
/**
 * How to run the provisioning script from here: relative to the working directory inside a checkout
 * (`scripts/provision-rootfs.sh`), and its own path from an app that installed sqltally, which ships the script.
 */
export function provisionCommand(name: string): string {
  const relative = path.relative(process.cwd(), PROVISION_SCRIPT);
  return `${relative.startsWith('..') || path.isAbsolute(relative) ? PROVISION_SCRIPT : relative} ${name}`;
}
export const ROOTFS_STAMP_FILE = '.sqltally-rootfs.json';
const DEFAULT_CACHE = '/var/cache/sqltally/rootfs';
const CHROOT_DIRS = ['/usr/sbin', '/usr/bin', '/sbin', '/bin'];
/** Inside the root filesystem: the datadir lives here, so the chrooted server can reach it. */
const PRIVATE_TMP = '/var/tmp';
/** Inside the root filesystem: initialised data directories that each start copies. */
const TEMPLATE_DIR = '/var/cache/sqltally-templates';
const DATABASE = 'sqltally';
const USER = 'root';
const MAX_ALLOWED_PACKET = '64M';
const BIND_FAILURE = /Address already in use|Can't start server: Bind on TCP\/IP port|another mysqld server running on port/i;
const VERSION_PATTERN = /Ver\s+(\S+)/;
const INITIALIZE_TIMEOUT_MS = 180_000;
/** One root filesystem, declared by the module of the backend it serves: how its server is initialised and run. */
export interface RootfsRecipe {
  /** The entry of scripts/provision-rootfs.sh that builds it. */
  readonly name: string;
  readonly serverBinary: string;
  /** How a private server of this recipe is stopped (its data directory is removed right after). */
  readonly stopSignal: NodeJS.Signals;
  /** Creates an empty data directory, using `tmpDir` for temporary files; paths are as the chrooted server sees them. */
  initialize(dataDir: string, tmpDir: string): { binary: string; args: string[] };
  /** This server's own options, after those every server started here takes ({@link mysqldArgs}). */
  readonly serverOptions: readonly string[];
}

/** The stamp the script writes last; its presence with the current hash is what "complete" means. */
export const RootfsStampSchema = z.object({
  schemaVersion: z.literal(1),
  name: z.string().min(1),
  inputsHash: z.string().regex(/^[0-9a-f]{16}$/),
  suite: z.string(),
  packages: z.string(),
  mirror: z.string(),
  serverBinary: z.string(),
  serverVersion: z.string(),
  buildSeconds: z.number().int().nonnegative(),
  builtAt: z.string(),
  complete: z.literal(true),
});
export type RootfsStamp = z.infer<typeof RootfsStampSchema>;

/** Where a usable root filesystem is, or why there is none. */
export type RootfsLocation = { found: true; dir: string; stamp: RootfsStamp } | { found: false; reason: string };

export function rootfsCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env['SQLTALLY_ROOTFS_CACHE'] || DEFAULT_CACHE;
}

/** The same value the script computes: sha256 of the script's bytes, a newline and the entry name. */
export function rootfsInputsHash(name: string, script: string = PROVISION_SCRIPT): string {
  return createHash('sha256').update(fs.readFileSync(script)).update(`\n${name}`).digest('hex').slice(0, 16);
}

/** Finds the complete build of `name` made by the current script; anything else is reported, never used. */
export function locateRootfs(name: string, env: NodeJS.ProcessEnv = process.env): RootfsLocation {
  const provision = `run ${provisionCommand(name)} (as root)`;
  let hash: string;
  try {
    hash = rootfsInputsHash(name);
  } catch (cause) {
    return { found: false, reason: `cannot read ${PROVISION_SCRIPT}: ${String(cause)}` };
  }
  const dir = path.join(rootfsCacheDir(env), `${name}-${hash}`);
  const stampFile = path.join(dir, ROOTFS_STAMP_FILE);
  let text: string;
  try {
    text = fs.readFileSync(stampFile, 'utf8');
  } catch {
    const exists = fs.existsSync(dir);
    return {
      found: false,
      reason: exists
        ? `root filesystem ${dir} has no stamp (half-built): ${provision}`
        : `no ${name} root filesystem built in ${rootfsCacheDir(env)}: ${provision}`,
    };
  }
  let stamp: RootfsStamp;
  try {
    stamp = RootfsStampSchema.parse(JSON.parse(text));
  } catch (cause) {
    const detail = cause instanceof z.ZodError ? z.prettifyError(cause) : String(cause);
    return { found: false, reason: `stamp ${stampFile} is unreadable (${detail.split('\n')[0]}): ${provision}` };
  }
  if (stamp.inputsHash !== hash || stamp.name !== name) {
    return { found: false, reason: `root filesystem ${dir} is an older build (hash ${stamp.inputsHash}, script now ${hash}): ${provision}` };
  }
  if (!findExecutable(path.basename(stamp.serverBinary), [path.join(dir, path.dirname(stamp.serverBinary))])) {
    return { found: false, reason: `${stamp.serverBinary} is missing from ${dir}: ${provision}` };
  }
  return { found: true, dir, stamp };
}

/** Paths as the chrooted server sees them. */
export interface MysqldLayout {
  /** The recipe's own options ({@link RootfsRecipe.serverOptions}). */
  serverOptions: readonly string[];
  dataDir: string;
  /** Holds the socket, the pid file, the init file and the server's own `tmp` directory. */
  runDir: string;
  port: number;
}

/** The server's temporary directory inside its run directory (see `mysqldArgs`). */
export const RUN_TMP = 'tmp';

/** Options for a private, loopback-only server that is ready for counting (performance_schema on). */
export function mysqldArgs(layout: MysqldLayout): string[] {
  return [
    // No option file from the root filesystem: what the server runs with is exactly this list.
    '--no-defaults',
    // chroot already needs root; the server would otherwise refuse to run as root.
    '--user=root',
    `--datadir=${layout.dataDir}`,
    `--socket=${path.posix.join(layout.runDir, 'mysqld.sock')}`,
    `--pid-file=${path.posix.join(layout.runDir, 'mysqld.pid')}`,
    `--init-file=${path.posix.join(layout.runDir, 'init.sql')}`,
    // Its own: a starting server deletes every #sql* file in its tmpdir, so the root filesystem's shared /tmp
    // would let one server destroy the temporary tables of another running from the same root filesystem.
    `--tmpdir=${path.posix.join(layout.runDir, RUN_TMP)}`,
    `--port=${layout.port}`,
    '--bind-address=127.0.0.1',
    // Clients on 127.0.0.1 match 'root'@'127.0.0.1' by address; no resolver needed inside the chroot.
    '--skip-name-resolve',
    '--secure-file-priv=',
    '--performance-schema=ON',
    // Prepared executes are counted per statement only while statement events are recorded (off by default on MariaDB).
    '--performance-schema-consumer-events-statements-current=ON',
    `--max-allowed-packet=${MAX_ALLOWED_PACKET}`,
    // LOAD DATA LOCAL INFILE (the load-data strategies): off by default on MySQL 8 and later.
    '--local-infile=1',
    ...THROWAWAY_DURABILITY_OPTIONS,
    ...layout.serverOptions,
  ];
}

function initSql(password: string): string {
  return [
    `CREATE USER IF NOT EXISTS '${USER}'@'127.0.0.1' IDENTIFIED BY '${password}';`,
    `ALTER USER '${USER}'@'127.0.0.1' IDENTIFIED BY '${password}';`,
    `GRANT ALL PRIVILEGES ON *.* TO '${USER}'@'127.0.0.1' WITH GRANT OPTION;`,
    `CREATE USER IF NOT EXISTS '${USER}'@'%' IDENTIFIED BY '${password}';`,
    `ALTER USER '${USER}'@'%' IDENTIFIED BY '${password}';`,
    `GRANT ALL PRIVILEGES ON *.* TO '${USER}'@'%' WITH GRANT OPTION;`,
    `CREATE DATABASE IF NOT EXISTS ${DATABASE};`,
    '',
  ].join('\n');
}

function chrootBinary(): string | undefined {
  return findExecutable('chroot', CHROOT_DIRS);
}

async function startInRootfs(recipe: RootfsRecipe, rootfs: string, module: BackendModule, options: StartOptions): Promise<StartedBackend> {
  const chroot = chrootBinary();
  if (!chroot) {
    throw new SqltallyError('chroot is not installed', { backend: options.id, phase: 'start', provider: 'local', hint: 'install coreutils' });
  }
  // The private directory is made inside the root filesystem so the chrooted server can use it; the shared
  // lifecycle then tracks and removes it like any other data directory.
  const dir = makePrivateDir(module.name, { ...options.env, TMPDIR: path.join(rootfs, PRIVATE_TMP) });
  const inside = (hostPath: string): string => `/${path.relative(rootfs, hostPath)}`;
  const runDir = inside(dir.path);
  const dataDir = path.posix.join(runDir, 'data');
  const password = randomBytes(12).toString('hex');
  try {
    const template = await ensureTemplate(initializeTemplate(recipe, rootfs, chroot, options), {
      backend: options.id,
      cacheDir: path.join(rootfs, TEMPLATE_DIR),
      env: options.env,
    });
    await copyTemplate(template.dataDir, path.join(dir.path, 'data'), options.id, options.env);
    fs.mkdirSync(path.join(dir.path, RUN_TMP), { mode: 0o700 });
    fs.writeFileSync(path.join(dir.path, 'init.sql'), initSql(password), { mode: 0o600 });
  } catch (err) {
    await dir.remove();
    throw err;
  }
  const connectionFor = loopbackConnection(USER, password, DATABASE);
  const running = await launchServer({
    id: options.id,
    binary: chroot,
    args: (port) => [rootfs, recipe.serverBinary, ...mysqldArgs({ serverOptions: recipe.serverOptions, dataDir, runDir, port })],
    dir,
    stopSignal: recipe.stopSignal,
    bindFailure: BIND_FAILURE,
    ping: (port) => pingMysqlFamily(connectionFor(port), DATABASE),
    env: options.env,
    ...(options.pickPort ? { pickPort: options.pickPort } : {}),
  });
  // The root filesystem's name says what it should hold; the server's own answer is what is recorded.
  return startedPrivateServer(module, running, connectionFor(running.port), `chroot ${rootfs} ${recipe.serverBinary}`, options.id);
}

/**
 * A freshly initialised data directory, made once per root filesystem and copied for every start (template.ts), far
 * cheaper than initialising; inside the root filesystem because the chrooted initialiser writes it there.
 */
function initializeTemplate(recipe: RootfsRecipe, rootfs: string, chroot: string, options: StartOptions): TemplateRecipe {
  const { name } = recipe;
  const placeholder = recipe.initialize('<data>', '<tmp>');
  return {
    name,
    identity: [rootfs, fileIdentity(path.join(rootfs, recipe.serverBinary)), placeholder.binary, ...placeholder.args],
    build: async (building) => {
      // Where templates were kept before they had stamps.
      fs.rmSync(path.join(path.dirname(building), `${name}-data`), { recursive: true, force: true });
      const inside = `/${path.relative(rootfs, building)}`;
      fs.mkdirSync(path.join(building, 'tmp'), { mode: 0o700 });
      const init = recipe.initialize(`${inside}/data`, `${inside}/tmp`);
      await runTool(options.id, chroot, [rootfs, init.binary, ...init.args], { cwd: building, env: options.env, timeoutMs: INITIALIZE_TIMEOUT_MS });
    },
  };
}

/**
 * An install finder for a backend's registry entry: the root filesystem of `recipe` when it is provisioned, else
 * the reason it is not. `module` is a getter because the backend file that lists this finder is the module.
 */
export function rootfsFinder(recipe: RootfsRecipe, module: () => BackendModule): InstallFinder {
  return async (env): Promise<InstallSearch> => {
    const located = locateRootfs(recipe.name, env);
    if (!located.found) return { installs: [], missing: [located.reason] };
    if (typeof process.getuid === 'function' && process.getuid() !== 0) {
      return { installs: [], missing: [`root filesystem ${located.dir} needs root to chroot into; run as root`] };
    }
    if (!chrootBinary()) return { installs: [], missing: ['no chroot binary in /usr/sbin or /usr/bin'] };
    const version = VERSION_PATTERN.exec(located.stamp.serverVersion)?.[1];
    if (!version) return { installs: [], missing: [`stamp of ${located.dir} has no version: ${located.stamp.serverVersion}`] };
    const install: LocalInstall = {
      backend: module().name,
      provider: 'local',
      version,
      label: module().variantLabel(version),
      origin: `chroot ${located.dir} ${recipe.serverBinary}`,
      start: (options) => startInRootfs(recipe, located.dir, module(), options),
    };
    return { installs: [install], missing: [] };
  };
}
