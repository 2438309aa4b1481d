import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { SqltallyError } from '../shared/errors';

/** A rendered file: its name inside the output directory and its full content. */
export interface RenderedFile {
  name: string;
  content: string;
}

export interface WriteOutputOptions {
  /** Write into an existing non-empty directory (only the named files are replaced). */
  force?: boolean;
}

function errnoText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  switch (e.code) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EROFS':
      return 'read-only file system';
    case 'ENOTDIR':
      return 'a part of the path is a file, not a directory';
    case 'ENOSPC':
      return 'no space left on device';
    default:
      return e.message ?? String(err);
  }
}

function reportError(message: string, path: string, cause: unknown, hint?: string): SqltallyError {
  return new SqltallyError(message, { phase: 'report', statement: path, cause, hint });
}

function tempName(target: string): string {
  return join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

async function fsyncDir(dir: string): Promise<void> {
  // Makes the rename itself durable; some file systems refuse to open a directory for this, which is harmless.
  try {
    const handle = await fs.open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    /* best effort */
  }
}

/** Writes `content` to a new temp file beside `target`, synced; returns its name. Removes it again on failure. */
async function writeTemp(target: string, content: string): Promise<string> {
  const temp = tempName(target);
  try {
    const handle = await fs.open(temp, 'wx', 0o644);
    try {
      await handle.writeFile(content, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    return temp;
  } catch (err) {
    await fs.rm(temp, { force: true }).catch(() => undefined);
    throw reportError(`cannot write ${target}: ${errnoText(err)}`, target, err);
  }
}

/**
 * Writes a file so that a reader sees either the old content or the new, never half: a temp file in the same
 * directory (rename is only atomic within one file system), fsync, then rename over the target.
 */
export async function writeFileAtomic(target: string, content: string): Promise<void> {
  const temp = await writeTemp(target, content);
  try {
    await fs.rename(temp, target);
  } catch (err) {
    await fs.rm(temp, { force: true }).catch(() => undefined);
    throw reportError(`cannot write ${target}: ${errnoText(err)}`, target, err);
  }
  await fsyncDir(dirname(target));
}

/**
 * Replaces several files in a directory: all new contents are written to temp files before any is renamed over its
 * target, so a failed write leaves every old file, never a new report.md beside an old report.json.
 */
async function replaceFiles(dir: string, files: readonly RenderedFile[]): Promise<void> {
  const temps: [string, string][] = [];
  try {
    for (const f of files) {
      const target = join(dir, f.name);
      temps.push([await writeTemp(target, f.content), target]);
    }
    for (const [temp, target] of temps) await fs.rename(temp, target);
  } catch (err) {
    await Promise.all(temps.map(([temp]) => fs.rm(temp, { force: true }).catch(() => undefined)));
    if (err instanceof SqltallyError) throw err;
    throw reportError(`cannot write into output directory ${dir}: ${errnoText(err)}`, dir, err);
  }
  await fsyncDir(dir);
}

/** What is at `dir` now. */
async function inspect(dir: string): Promise<'missing' | 'empty' | 'non-empty'> {
  let stat;
  try {
    stat = await fs.stat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      // A dangling symbolic link: stat says missing, but nothing can be made in its place.
      const target = await fs.readlink(dir).catch(() => null);
      if (target !== null) {
        throw reportError(
          `output path ${dir} is a symbolic link to ${target}, which does not exist`,
          dir,
          undefined,
          'choose another --out, or create the directory the link points to',
        );
      }
      return 'missing';
    }
    throw reportError(`cannot use output directory ${dir}: ${errnoText(err)}`, dir, err);
  }
  if (!stat.isDirectory()) throw reportError(`output path ${dir} exists and is not a directory`, dir, undefined, 'choose another --out');
  const entries = await fs.readdir(dir);
  return entries.length === 0 ? 'empty' : 'non-empty';
}

/**
 * Checks, before any work is done, that `dir` can receive a run's output: refuses an existing non-empty
 * directory without `force`, and proves the place is writable by creating and removing a probe file.
 * Run this first, so a long run does not end on an unwritable directory.
 */
export async function checkOutputDir(dir: string, options: WriteOutputOptions = {}): Promise<void> {
  const abs = resolve(dir);
  const state = await inspect(abs);
  if (state === 'non-empty' && !options.force) {
    const entries = (await fs.readdir(abs)).slice(0, 5).join(', ');
    throw reportError(
      `output directory ${dir} already exists and is not empty (${entries})`,
      dir,
      undefined,
      'choose a new --out directory, or pass --force to replace the report files in it',
    );
  }
  const probeDir = state === 'missing' ? await nearestExisting(abs) : abs;
  const probe = tempName(join(probeDir, 'write-check'));
  try {
    await fs.writeFile(probe, '', { flag: 'wx' });
    await fs.rm(probe, { force: true });
  } catch (err) {
    throw reportError(`output directory ${dir} is not writable: ${errnoText(err)}`, dir, err, 'choose a writable --out directory');
  }
}

async function nearestExisting(abs: string): Promise<string> {
  let dir = dirname(abs);
  for (;;) {
    try {
      const stat = await fs.stat(dir);
      if (!stat.isDirectory()) throw reportError(`cannot create output directory ${abs}: ${dir} is a file`, abs, undefined);
      return dir;
    } catch (err) {
      if (err instanceof SqltallyError) throw err;
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw reportError(`cannot create output directory ${abs}: ${errnoText(err)}`, abs, err);
      const parent = dirname(dir);
      if (parent === dir) return dir;
      dir = parent;
    }
  }
}

/**
 * Writes a run's files, all already rendered, so no partial report is ever left. A new directory is filled
 * under a temporary name beside it and renamed into place in one step. An existing directory (empty, or
 * non-empty with `force`) gets each file replaced atomically, the files in the order given: put the one readers
 * look for first (report.json) last.
 */
export async function writeOutputDir(dir: string, files: readonly RenderedFile[], options: WriteOutputOptions = {}): Promise<void> {
  for (const f of files) {
    if (f.name !== basename(f.name) || f.name.startsWith('.')) throw reportError(`bad output file name "${f.name}"`, f.name, undefined);
  }
  const abs = resolve(dir);
  const state = await inspect(abs);
  if (state === 'non-empty' && !options.force) {
    throw reportError(
      `output directory ${dir} already exists and is not empty`,
      dir,
      undefined,
      'choose a new --out directory, or pass --force to replace the report files in it',
    );
  }
  if (state !== 'missing') {
    await replaceFiles(abs, files);
    return;
  }
  const parent = dirname(abs);
  try {
    await fs.mkdir(parent, { recursive: true });
  } catch (err) {
    throw reportError(`cannot create output directory ${dir}: ${errnoText(err)}`, dir, err, 'choose a writable --out directory');
  }
  const staging = tempName(abs);
  try {
    await fs.mkdir(staging);
    for (const f of files) {
      try {
        await writeFileAtomic(join(staging, f.name), f.content);
      } catch (err) {
        // Named by where it was going, not by the staging directory a person never sees.
        const cause = err instanceof SqltallyError && err.cause !== undefined ? err.cause : err;
        throw reportError(
          `cannot write ${join(dir, f.name)}: ${errnoText(cause)}; nothing was written to ${dir}`,
          join(dir, f.name),
          cause,
          'free space on that file system, or choose another --out directory',
        );
      }
    }
    await fs.rename(staging, abs);
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true }).catch(() => undefined);
    if (err instanceof SqltallyError) throw err;
    throw reportError(`cannot write output directory ${dir}: ${errnoText(err)}`, dir, err, 'choose a writable --out directory');
  }
  await fsyncDir(parent);
}
