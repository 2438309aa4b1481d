import fs from 'node:fs';
import path from 'node:path';

/**
 * A RAM-backed `TMPDIR` for a test run, where the machine has one to spare: the kernel's side of writing the private
 * servers' data directories was most of a start on disk (figures: CONTRIBUTING.md). Only when nobody chose: a set
 * `TMPDIR` or `SQLTALLY_TEST_RAM_TMPDIR=0` keeps the default; needs `MIN_FREE_BYTES` free on a tmpfs at `/dev/shm`.
 */
export const RAM_TMPDIR_ENV = 'SQLTALLY_TEST_RAM_TMPDIR';
const SHM = '/dev/shm';
/** Five workers with a pool of local servers each, and the tests' own servers and scratch files, stay well below. */
const MIN_FREE_BYTES = 4 * 1024 ** 3;
const DIR_NAME = 'sqltally-tests-tmp';

export interface RamTmpdirProbe {
  platform: NodeJS.Platform;
  /** The mount table (`/proc/mounts`), or null when it cannot be read. */
  mounts: string | null;
  /** Bytes free at `/dev/shm`, or null when unknown. */
  freeBytes: number | null;
}

function probeMachine(): RamTmpdirProbe {
  let mounts: string | null = null;
  let freeBytes: number | null = null;
  try {
    mounts = fs.readFileSync('/proc/mounts', 'utf8');
    const s = fs.statfsSync(SHM);
    freeBytes = s.bavail * s.bsize;
  } catch {
    // Not Linux, or no /dev/shm: the answer below is null.
  }
  return { platform: process.platform, mounts, freeBytes };
}

/** The directory to use as `TMPDIR`, or why the run keeps its own (for the run's header). */
export function chooseRamTmpdir(env: NodeJS.ProcessEnv, probe: RamTmpdirProbe = probeMachine()): { dir: string } | { kept: string } {
  if (env['TMPDIR']) return { kept: `TMPDIR is set (${env['TMPDIR']})` };
  if (env[RAM_TMPDIR_ENV] === '0') return { kept: `${RAM_TMPDIR_ENV}=0` };
  if (probe.platform !== 'linux') return { kept: `not Linux (${probe.platform})` };
  const isTmpfs = (probe.mounts ?? '').split('\n').some((line) => {
    const [, where, type] = line.split(' ');
    return where === SHM && type === 'tmpfs';
  });
  if (!isTmpfs) return { kept: `${SHM} is not a tmpfs` };
  if (probe.freeBytes === null || probe.freeBytes < MIN_FREE_BYTES) {
    return {
      kept: `${SHM} has ${probe.freeBytes === null ? 'unknown' : `${(probe.freeBytes / 1024 ** 3).toFixed(1)} GiB`} free, less than ${MIN_FREE_BYTES / 1024 ** 3} GiB`,
    };
  }
  return { dir: path.join(SHM, DIR_NAME) };
}

/**
 * Points `env.TMPDIR` at the RAM-backed directory when {@link chooseRamTmpdir} picks one, making it like `/tmp`
 * (any user may create entries; each removes only its own), since a PostgreSQL started as root runs as `postgres`.
 * Returns what the run's header says about it.
 */
export function useRamTmpdir(env: NodeJS.ProcessEnv): string {
  const choice = chooseRamTmpdir(env);
  if ('kept' in choice) return `TMPDIR as it was: ${choice.kept}`;
  try {
    fs.mkdirSync(choice.dir, { recursive: true });
    fs.chmodSync(choice.dir, 0o1777);
  } catch (err) {
    return `TMPDIR as it was: cannot make ${choice.dir} (${(err as Error).message})`;
  }
  env['TMPDIR'] = choice.dir;
  return `TMPDIR=${choice.dir} (tmpfs; ${RAM_TMPDIR_ENV}=0 keeps the default)`;
}
