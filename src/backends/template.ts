import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { SqltallyError } from '../shared/errors';
import { trackLive } from './live';
import { runTool, serverTempBase } from './local-process';

/**
 * Initialised data directories, made once per server binary and copied for every private start (cheaper than
 * initialising): each start still gets its own copy, so counters, tables and accounts start from nothing.
 */

const DEFAULT_CACHE = '/var/cache/sqltally/templates';
/** Bumped when what a template holds changes in a way its identity does not show. */
const TEMPLATE_FORMAT = 1;
export const TEMPLATE_STAMP_FILE = 'template.json';
const DATA = 'data';
const CP = ['/bin/cp', '/usr/bin/cp'].find((p) => fs.existsSync(p)) ?? 'cp';
/** A build directory older than this belongs to a builder that died: the longest initialiser timeout is 3 minutes. */
const ABANDONED_BUILD_MS = 15 * 60_000;
const UNUSED_MS = 7 * 24 * 3_600_000;
/** How long a start waits for another process's build of the same template before building its own. */
const BUILD_WAIT_MS = 5 * 60_000;
const LOCK_POLL_MS = 100;
const LOCK_UNWRITTEN_MS = 10_000;

/** Written last, after the data directory is complete; its manifest is checked before every copy. */
export const TemplateStampSchema = z.object({
  schemaVersion: z.literal(1),
  key: z.string().regex(/^[0-9a-f]{16}$/),
  /** The identity lines the key was hashed from (binary paths, sizes, versions, arguments). */
  identity: z.array(z.string()),
  /** sha256 over every file's relative path, mode, size and mtime, in sorted order. */
  manifest: z.string().regex(/^[0-9a-f]{64}$/),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  buildMs: z.number().int().nonnegative(),
  builtAt: z.string(),
});
export type TemplateStamp = z.infer<typeof TemplateStampSchema>;

/** How one kind of data directory is made. */
export interface TemplateRecipe {
  /** Names the entry (`mariadb`, `postgres`); the key tells versions apart. */
  name: string;
  /** Everything the directory's contents depend on; a change in any line makes a new template. */
  identity: string[];
  /** Creates `<building>/data`; `building` is an empty directory, owned as `chown` says. */
  build(building: string): Promise<void>;
  /**
   * Who builds (PostgreSQL's initdb refuses root). Such a build runs in a scratch directory under `$TMPDIR`, where the
   * private servers of that user are made anyway, and is copied into the cache after: the cache (a root-owned 0700
   * directory, say) may not be one that user can reach.
   */
  chown?: { uid: number; gid: number };
}

export function templateCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const forced = env['SQLTALLY_TEMPLATE_CACHE'];
  if (forced) return forced;
  try {
    fs.mkdirSync(DEFAULT_CACHE, { recursive: true, mode: 0o755 });
    fs.accessSync(DEFAULT_CACHE, fs.constants.W_OK);
    return DEFAULT_CACHE;
  } catch {
    // Not root and no /var/cache of ours: a per-user cache under the temp directory.
    // Dot-named: the leak checks look for `sqltally-*` directories in the temp directory, and this one is meant to stay.
    return path.join(path.resolve(env['TMPDIR'] || os.tmpdir()), `.sqltally-templates-${typeof process.getuid === 'function' ? process.getuid() : 'user'}`);
  }
}

export function templateKey(identity: readonly string[]): string {
  return createHash('sha256')
    .update(`format ${TEMPLATE_FORMAT}\n${identity.join('\n')}`)
    .digest('hex')
    .slice(0, 16);
}

/** What identifies a binary on disk: where it really is, its size and when it last changed. */
export function fileIdentity(file: string): string {
  const real = fs.realpathSync(file);
  const st = fs.statSync(real);
  return `${real} ${st.size} ${Math.trunc(st.mtimeMs)}`;
}

/** The manifest of a directory tree: sorted `path mode size mtime` lines (directories too), hashed. */
export function manifestOf(root: string): { manifest: string; files: number; bytes: number } {
  const lines: string[] = [];
  let files = 0;
  let bytes = 0;
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      const st = fs.lstatSync(full);
      const rel = path.relative(root, full);
      if (entry.isDirectory()) {
        lines.push(`${rel}/ ${(st.mode & 0o7777).toString(8)}`);
        walk(full);
      } else {
        lines.push(`${rel} ${(st.mode & 0o7777).toString(8)} ${st.size} ${Math.trunc(st.mtimeMs)}`);
        files += 1;
        bytes += st.size;
      }
    }
  };
  walk(root);
  lines.sort();
  return { manifest: createHash('sha256').update(lines.join('\n')).digest('hex'), files, bytes };
}

/** Build directories left by a process killed mid-build (SIGKILL, a power cut): nothing else would remove them. */
function removeAbandonedBuilds(cacheDir: string): void {
  for (const name of fs.readdirSync(cacheDir)) {
    if (!name.startsWith('.building-')) continue;
    const full = path.join(cacheDir, name);
    try {
      if (Date.now() - fs.statSync(full).mtimeMs > ABANDONED_BUILD_MS) fs.rmSync(full, { recursive: true, force: true });
    } catch {
      // Finished or removed by its builder meanwhile.
    }
  }
}

/** The stamp's mtime says when a template was last copied: what {@link removeUnused} goes by. */
function markUsed(entry: string): void {
  try {
    const now = new Date();
    fs.utimesSync(path.join(entry, TEMPLATE_STAMP_FILE), now, now);
  } catch {
    // A read-only cache: the template is still good, it only looks older than it is.
  }
}

/**
 * Templates of the same name not copied for {@link UNUSED_MS}: made for a binary or recipe since replaced (an
 * upgraded server, a new sqltally), each 30 to 120 MB. Another checkout still using one marks it every start.
 */
function removeUnused(cacheDir: string, name: string, keep: string): void {
  const sameName = new RegExp(`^${name}-[0-9a-f]{16}$`);
  for (const sibling of fs.readdirSync(cacheDir)) {
    const full = path.join(cacheDir, sibling);
    if (full === keep || !sameName.test(sibling)) continue;
    try {
      if (Date.now() - fs.statSync(path.join(full, TEMPLATE_STAMP_FILE)).mtimeMs > UNUSED_MS) fs.rmSync(full, { recursive: true, force: true });
    } catch {
      // No stamp (being moved aside) or removed meanwhile.
    }
  }
}

function readStamp(entry: string): TemplateStamp | undefined {
  try {
    return TemplateStampSchema.parse(JSON.parse(fs.readFileSync(path.join(entry, TEMPLATE_STAMP_FILE), 'utf8')));
  } catch {
    return undefined;
  }
}

/** {@link usable}, marked as used when it is: how every start that finds a template takes it. */
function reuse(entry: string, key: string): { dataDir: string; built: false } | undefined {
  const dataDir = usable(entry, key);
  if (dataDir === undefined) return undefined;
  markUsed(entry);
  return { dataDir, built: false };
}

/** The entry's data directory when its stamp is for `key` and the files are still what the stamp says. */
function usable(entry: string, key: string): string | undefined {
  const stamp = readStamp(entry);
  if (!stamp || stamp.key !== key) return undefined;
  const data = path.join(entry, DATA);
  try {
    return manifestOf(data).manifest === stamp.manifest ? data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The template data directory for `recipe`, built now if there is none or the one there no longer matches its
 * stamp. One process builds while the others wait on its lock file (`<entry>.lock`, with its pid; a holder that died
 * loses it). Built in a scratch directory and renamed into place, so a build killed halfway leaves nothing that looks
 * complete; should two build at once all the same (a stuck holder), both succeed and the first rename wins.
 */
export async function ensureTemplate(
  recipe: TemplateRecipe,
  context: { backend: string; cacheDir: string; env: NodeJS.ProcessEnv },
): Promise<{ dataDir: string; built: boolean }> {
  const key = templateKey(recipe.identity);
  const entry = path.join(context.cacheDir, `${recipe.name}-${key}`);
  const ready = reuse(entry, key);
  if (ready) return ready;
  const lock = `${entry}.lock`;
  const deadline = Date.now() + BUILD_WAIT_MS;
  for (;;) {
    if (takeLock(lock, context)) {
      // Held by this process: a signal mid-build removes it with the build directory.
      const untrack = trackLive({ label: `${context.backend} template lock ${lock}`, dir: lock });
      try {
        return reuse(entry, key) ?? (await buildTemplate(recipe, context, key, entry));
      } finally {
        fs.rmSync(lock, { force: true });
        untrack();
      }
    }
    // Another process (or another start in this one) is building it: five Jest workers starting at once on a new
    // machine would otherwise each initialise the same template, MySQL's taking seconds of CPU each.
    if (lockAbandoned(lock)) {
      fs.rmSync(lock, { force: true });
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
    const theirs = reuse(entry, key);
    if (theirs) return theirs;
    // A builder that is alive but stuck: build beside it, as before there were locks (the first rename wins).
    if (Date.now() > deadline) return buildTemplate(recipe, context, key, entry);
  }
}

/** Creates the lock file; false when another holds it. */
function takeLock(lock: string, context: { backend: string; cacheDir: string }): boolean {
  try {
    fs.mkdirSync(context.cacheDir, { recursive: true, mode: 0o755 });
    fs.writeFileSync(lock, JSON.stringify({ pid: process.pid, at: Date.now() }), { flag: 'wx', mode: 0o644 });
    return true;
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw cacheError(context, cause);
  }
}

function cacheError(context: { backend: string; cacheDir: string }, cause: unknown): SqltallyError {
  return new SqltallyError(`cannot create a template data directory under ${context.cacheDir}`, {
    backend: context.backend,
    phase: 'provision',
    provider: 'local',
    cause,
    hint: 'set SQLTALLY_TEMPLATE_CACHE to a writable directory',
  });
}

/** A lock whose holder is gone (killed mid-build) or that is older than any build takes. */
function lockAbandoned(lock: string): boolean {
  let text: string;
  let age: number;
  try {
    text = fs.readFileSync(lock, 'utf8');
    age = Date.now() - fs.statSync(lock).mtimeMs;
  } catch {
    return false; // released meanwhile: the next round takes it
  }
  if (age > ABANDONED_BUILD_MS) return true;
  let pid: unknown;
  try {
    pid = (JSON.parse(text) as { pid?: unknown }).pid;
  } catch {
    // Created and not yet written, or cut short by a crash: a moment's grace, then it is abandoned.
    return age > LOCK_UNWRITTEN_MS;
  }
  if (typeof pid !== 'number') return age > LOCK_UNWRITTEN_MS;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

async function buildTemplate(
  recipe: TemplateRecipe,
  context: { backend: string; cacheDir: string; env: NodeJS.ProcessEnv },
  key: string,
  entry: string,
): Promise<{ dataDir: string; built: boolean }> {
  let building: string;
  try {
    fs.mkdirSync(context.cacheDir, { recursive: true, mode: 0o755 });
    removeAbandonedBuilds(context.cacheDir);
    building = fs.mkdtempSync(path.join(context.cacheDir, `.building-${recipe.name}-${key}-`));
  } catch (cause) {
    throw cacheError(context, cause);
  }
  // Tracked like a data directory, so a signal mid-build removes it (after stopping the initialiser).
  const untrack = trackLive({ label: `${context.backend} template build ${building}`, dir: building });
  let scratch: { dir: string; untrack: () => void } | undefined;
  try {
    const started = Date.now();
    if (recipe.chown) {
      // Dot-named: the leak checks look for `sqltally-*` directories, and this one is removed below in any case.
      const owner = { user: `uid ${recipe.chown.uid}`, ...recipe.chown };
      const dir = fs.mkdtempSync(path.join(serverTempBase(context.env, owner, context.backend), `.sqltally-template-${recipe.name}-`));
      scratch = { dir, untrack: trackLive({ label: `${context.backend} template build ${dir}`, dir }) };
      fs.chownSync(dir, recipe.chown.uid, recipe.chown.gid);
      await recipe.build(dir);
      await copyTemplate(path.join(dir, DATA), path.join(building, DATA), context.backend, context.env);
    } else {
      await recipe.build(building);
    }
    const made = manifestOf(path.join(building, DATA));
    const stamp: TemplateStamp = {
      schemaVersion: 1,
      key,
      identity: recipe.identity,
      ...made,
      buildMs: Date.now() - started,
      builtAt: new Date().toISOString(),
    };
    fs.writeFileSync(path.join(building, TEMPLATE_STAMP_FILE), `${JSON.stringify(stamp, null, 2)}\n`, { mode: 0o644 });
    // A stale entry (wrong manifest, no stamp) is moved aside first; a good one another process just finished stays.
    if (fs.existsSync(entry) && !usable(entry, key)) {
      const aside = `${entry}.stale-${process.pid}-${Date.now()}`;
      try {
        fs.renameSync(entry, aside);
        fs.rmSync(aside, { recursive: true, force: true });
      } catch {
        // Another process moved it first.
      }
    }
    try {
      fs.renameSync(building, entry);
    } catch (err) {
      const theirs = reuse(entry, key);
      if (!theirs) throw err;
      return theirs;
    }
    removeUnused(context.cacheDir, recipe.name, entry);
    return { dataDir: path.join(entry, DATA), built: true };
  } finally {
    fs.rmSync(building, { recursive: true, force: true });
    untrack();
    if (scratch) {
      fs.rmSync(scratch.dir, { recursive: true, force: true });
      scratch.untrack();
    }
  }
}

/**
 * Copies what a template's data directory holds into `dest` (made if missing), keeping modes, owners and times: a
 * data directory must belong to the user its server runs as, and PostgreSQL refuses one whose mode is not 0700.
 */
export async function copyTemplate(template: string, dest: string, backend: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  try {
    // cp -a keeps owners where Node's fs.cp does not, and copies sparse files (InnoDB's redo log) as sparse. Run as a
    // tracked tool, so a signal mid-copy stops cp before the half-copied directory is removed (else cp refills it).
    const to = path.resolve(dest);
    await runTool(backend, CP, ['-a', '--', `${path.resolve(template)}/.`, to], { cwd: path.dirname(to), env });
  } catch (cause) {
    // runTool's error says `cp failed (1)` and carries cp's own words (`No space left on device`) as its hint: both
    // belong in this message, which would otherwise keep neither (a SqltallyError cause is not repeated).
    const tool = cause instanceof SqltallyError ? cause : undefined;
    const said = tool ? `: ${tool.message.split('\n')[0]?.replace(/^\[[^\]]*\]\s*/, '')}` : '';
    throw new SqltallyError(`could not copy the template data directory ${template} to ${dest}${said}`, {
      backend,
      phase: 'provision',
      provider: 'local',
      cause,
      ...(tool?.hint ? { hint: tool.hint } : {}),
    });
  }
}
