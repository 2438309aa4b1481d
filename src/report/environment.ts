import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { DRIVER_NAMES } from '../shared/driver-names';
import { DRIVERS } from '../driver/registry';
import type { DriverName } from '../shared/driver-names';
import { redactSecrets } from '../shared/errors';
import { EnvironmentSchema, parseValue } from './schema';
import type { Environment } from './schema';

const GIT_TIMEOUT_MS = 5_000;
const OS_RELEASE_FILE = '/etc/os-release';

/** Where to look and what to call it; everything has a default read from the running process. */
export interface EnvironmentOptions {
  /** Environment id inside the report; default: the CI job name, else `local`. */
  id?: string;
  /** Directory whose git commit is recorded; default `process.cwd()`. */
  cwd?: string;
  /** Variables to read CI details from; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  now?: Date;
}

/** Reads the machine, runtime, driver versions and git state at run time. Never throws for a missing piece. */
export function collectEnvironment(options: EnvironmentOptions = {}): Environment {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const ci = ciOf(env);
  const cpus = os.cpus();
  const drivers = Object.fromEntries(DRIVER_NAMES.map((d) => [d, packageVersion(DRIVERS[d].packageName)])) as Record<DriverName, string | null>;
  const raw: Environment = {
    id: options.id ?? ci?.job ?? 'local',
    collectedAt: (options.now ?? new Date()).toISOString(),
    os: { platform: os.platform(), release: os.release(), prettyName: osPrettyName() },
    arch: os.arch(),
    cpu: { model: cpus[0]?.model.trim() || 'unknown', cores: os.availableParallelism?.() ?? Math.max(1, cpus.length) },
    memoryBytes: os.totalmem(),
    node: process.version,
    sqltallyVersion: ownVersion(),
    drivers,
    git: gitState(cwd),
    ci,
  };
  // Strings here come from the environment and files we do not control: strip any URL password before it can
  // reach a report.
  return parseValue(EnvironmentSchema, JSON.parse(redactSecrets(JSON.stringify(raw))), 'environment');
}

function osPrettyName(): string | null {
  try {
    const match = /^PRETTY_NAME=(.*)$/m.exec(readFileSync(OS_RELEASE_FILE, 'utf8'));
    return match?.[1] ? match[1].trim().replace(/^["']|["']$/g, '') : null;
  } catch {
    return null;
  }
}

/** The installed version of a package, found the way `require` would find it; null when not installed. */
export function packageVersion(pkg: string): string | null {
  try {
    return readVersion(require.resolve(`${pkg}/package.json`), pkg);
  } catch {
    // Packages with an `exports` map may hide package.json: walk up from the entry point instead.
  }
  try {
    let dir = dirname(require.resolve(pkg));
    for (;;) {
      const candidate = join(dir, 'package.json');
      if (existsSync(candidate)) {
        const version = readVersion(candidate, pkg);
        if (version) return version;
      }
      const parent = dirname(dir);
      if (parent === dir) return null;
      dir = parent;
    }
  } catch {
    return null;
  }
}

function readVersion(file: string, name: string): string | null {
  const json = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
  return json.name === name && typeof json.version === 'string' ? json.version : null;
}

function ownVersion(): string {
  // Works from the sources (src/report/) and from the build (dist/report/) alike.
  let dir = __dirname;
  for (;;) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) {
      const version = readVersion(candidate, 'sqltally');
      if (version) return version;
    }
    const parent = dirname(dir);
    if (parent === dir) return 'unknown';
    dir = parent;
  }
}

function git(cwd: string, args: string[]): string | null {
  try {
    return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: GIT_TIMEOUT_MS });
  } catch {
    return null;
  }
}

/** Commit and dirty flag; both null outside a repository or without git. */
export function gitState(cwd: string): Environment['git'] {
  const commit = git(cwd, ['rev-parse', 'HEAD'])?.trim() || null;
  if (!commit) return { commit: null, dirty: null };
  const status = git(cwd, ['status', '--porcelain']);
  return { commit, dirty: status === null ? null : status.trim().length > 0 };
}

function ciOf(env: NodeJS.ProcessEnv): Environment['ci'] {
  if (env.GITHUB_ACTIONS === 'true') {
    return {
      provider: 'github-actions',
      job: env.SQLTALLY_JOB || env.GITHUB_JOB || null,
      runId: env.GITHUB_RUN_ID ?? null,
      runner: env.RUNNER_NAME ?? null,
    };
  }
  if (env.CI) return { provider: 'ci', job: env.SQLTALLY_JOB || null, runId: null, runner: null };
  return null;
}
