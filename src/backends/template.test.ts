import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqltallyError } from '../shared/errors';
import { TEMPLATE_STAMP_FILE, TemplateStampSchema, copyTemplate, ensureTemplate, templateCacheDir, templateKey } from './template';
import type { TemplateRecipe } from './template';

let work: string;
let cacheDir: string;

beforeEach(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'template-test-'));
  cacheDir = path.join(work, 'cache');
});
afterEach(() => fs.rmSync(work, { recursive: true, force: true }));

/** A recipe whose build writes a small data directory and counts how often it ran. */
function recipe(identity: string[] = ['server 1.0'], fail = false): TemplateRecipe & { builds: number } {
  const r = {
    name: 'fake',
    identity,
    builds: 0,
    build: async (building: string): Promise<void> => {
      r.builds += 1;
      const data = path.join(building, 'data');
      fs.mkdirSync(path.join(data, 'mysql'), { recursive: true, mode: 0o700 });
      fs.writeFileSync(path.join(data, 'mysql', 'user.MAD'), 'accounts');
      fs.writeFileSync(path.join(data, 'ibdata1'), Buffer.alloc(4096));
      // Yield, so two builders in one test really overlap.
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (fail) throw new Error('initialiser exited 1');
    },
  };
  return r;
}

const context = () => ({ backend: 'mariadb', cacheDir, env: { ...process.env, TMPDIR: work } });

describe('ensureTemplate', () => {
  it('builds once, then hands out the same directory with a stamp that validates', async () => {
    const r = recipe();
    const first = await ensureTemplate(r, context());
    const second = await ensureTemplate(r, context());
    expect(first.built).toBe(true);
    expect(second).toEqual({ dataDir: first.dataDir, built: false });
    expect(r.builds).toBe(1);
    const stamp = TemplateStampSchema.parse(JSON.parse(fs.readFileSync(path.join(path.dirname(first.dataDir), TEMPLATE_STAMP_FILE), 'utf8')));
    expect(stamp).toMatchObject({ key: templateKey(['server 1.0']), identity: ['server 1.0'], files: 2, bytes: 4096 + 'accounts'.length });
    // Nothing half-built is left beside it.
    expect(fs.readdirSync(cacheDir)).toEqual([path.basename(path.dirname(first.dataDir))]);
  });

  it('builds a new template when the binary identity changes, and keeps the old one', async () => {
    const a = await ensureTemplate(recipe(['server 1.0']), context());
    const b = await ensureTemplate(recipe(['server 1.1']), context());
    expect(b.built).toBe(true);
    expect(b.dataDir).not.toBe(a.dataDir);
    expect(fs.existsSync(a.dataDir)).toBe(true);
  });

  it('rebuilds a template whose files no longer match its stamp (a file changed, one missing, no stamp)', async () => {
    const r = recipe();
    const { dataDir } = await ensureTemplate(r, context());
    fs.appendFileSync(path.join(dataDir, 'ibdata1'), 'x');
    expect((await ensureTemplate(r, context())).built).toBe(true);
    fs.rmSync(path.join(dataDir, 'mysql', 'user.MAD'));
    expect((await ensureTemplate(r, context())).built).toBe(true);
    fs.rmSync(path.join(path.dirname(dataDir), TEMPLATE_STAMP_FILE));
    expect((await ensureTemplate(r, context())).built).toBe(true);
    expect(r.builds).toBe(4);
    expect((await ensureTemplate(r, context())).built).toBe(false);
    expect(fs.readFileSync(path.join(dataDir, 'mysql', 'user.MAD'), 'utf8')).toBe('accounts');
  });

  it('builds once when several starts want the same template at once: the others wait on its lock', async () => {
    const r = recipe();
    const all = await Promise.all([ensureTemplate(r, context()), ensureTemplate(r, context()), ensureTemplate(r, context())]);
    expect(r.builds).toBe(1);
    expect(all.map((t) => t.built).sort()).toEqual([false, false, true]);
    expect(new Set(all.map((t) => t.dataDir)).size).toBe(1);
    // The lock is gone with the build.
    expect(fs.readdirSync(cacheDir)).toHaveLength(1);
    expect(fs.readFileSync(path.join(all[0]!.dataDir, 'mysql', 'user.MAD'), 'utf8')).toBe('accounts');
  });

  it('takes over the lock of a builder that died, and waits for one that is alive', async () => {
    const r = recipe();
    const lock = path.join(cacheDir, `fake-${templateKey(r.identity)}.lock`);
    fs.mkdirSync(cacheDir, { recursive: true });
    // A pid that cannot be running (above pid_max).
    fs.writeFileSync(lock, JSON.stringify({ pid: 2 ** 30, at: Date.now() }));
    expect((await ensureTemplate(r, context())).built).toBe(true);
    expect(fs.existsSync(lock)).toBe(false);

    const other = recipe(['server 2.0']);
    const otherLock = path.join(cacheDir, `fake-${templateKey(other.identity)}.lock`);
    fs.writeFileSync(otherLock, JSON.stringify({ pid: process.pid, at: Date.now() }));
    const waiting = ensureTemplate(other, context());
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Still waiting on a live holder: nothing built yet.
    expect(other.builds).toBe(0);
    fs.rmSync(otherLock);
    expect((await waiting).built).toBe(true);
    expect(other.builds).toBe(1);
  });

  it('leaves nothing behind when the build fails, and the error is the build error', async () => {
    await expect(ensureTemplate(recipe(['x'], true), context())).rejects.toThrow('initialiser exited 1');
    expect(fs.readdirSync(cacheDir)).toEqual([]);
  });

  it('says where it could not create the cache, with the backend and phase', async () => {
    const file = path.join(work, 'a-file');
    fs.writeFileSync(file, '');
    const err = await ensureTemplate(recipe(), { backend: 'postgres', cacheDir: path.join(file, 'cache'), env: process.env }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).message).toContain('cannot create a template data directory');
    expect(err).toMatchObject({ backend: 'postgres', phase: 'provision' });
  });
});

describe('copyTemplate', () => {
  it('copies every file with its mode into a new directory or an existing empty one', async () => {
    const { dataDir } = await ensureTemplate(recipe(), context());
    for (const dest of [path.join(work, 'fresh'), fs.mkdtempSync(path.join(work, 'existing-'))]) {
      await copyTemplate(dataDir, dest, 'mariadb');
      expect(fs.readFileSync(path.join(dest, 'mysql', 'user.MAD'), 'utf8')).toBe('accounts');
      expect(fs.statSync(path.join(dest, 'mysql')).mode & 0o777).toBe(0o700);
      expect(fs.statSync(path.join(dest, 'ibdata1')).size).toBe(4096);
    }
    // A copy is private: writing to it leaves the template as it was.
    fs.writeFileSync(path.join(work, 'fresh', 'ibdata1'), 'changed');
    expect((await ensureTemplate(recipe(), context())).built).toBe(false);
  });

  it('fails with the backend and the paths when the template is missing', async () => {
    const err = await copyTemplate(path.join(work, 'nope'), path.join(work, 'dest'), 'mysql').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).message).toMatch(/could not copy the template data directory .*nope/);
    expect(err).toMatchObject({ backend: 'mysql', phase: 'provision' });
  });

  it('says cp failed and what cp said (its reason, as No space left on device), not just that the copy failed', async () => {
    const { dataDir } = await ensureTemplate(recipe(), context());
    // Nobody, root included, makes a directory in /proc: cp starts and fails with words of its own.
    const err = await copyTemplate(dataDir, '/proc/sqltally-no-such-dest', 'mariadb').catch((e: unknown) => e);
    expect((err as SqltallyError).message).toMatch(/could not copy the template data directory .*: cp failed \(1\)/);
    expect((err as SqltallyError).message).toMatch(/cp: .*sqltally-no-such-dest.*: \S/);
  });

  it('copies into a relative destination, as a relative TMPDIR gives', async () => {
    const { dataDir } = await ensureTemplate(recipe(), context());
    const cwd = process.cwd();
    process.chdir(work);
    try {
      fs.mkdirSync('rel');
      await copyTemplate(dataDir, path.join('rel', 'dest'), 'mariadb');
    } finally {
      process.chdir(cwd);
    }
    expect(fs.readFileSync(path.join(work, 'rel', 'dest', 'mysql', 'user.MAD'), 'utf8')).toBe('accounts');
  });
});

describe('templateCacheDir', () => {
  it('is SQLTALLY_TEMPLATE_CACHE when set', () => {
    expect(templateCacheDir({ SQLTALLY_TEMPLATE_CACHE: '/somewhere' })).toBe('/somewhere');
  });
});

describe('abandoned builds', () => {
  it('removes a build directory left by a builder that died long ago, and keeps a recent one', async () => {
    fs.mkdirSync(cacheDir, { recursive: true });
    const old = path.join(cacheDir, '.building-fake-0123456789abcdef-old');
    const recent = path.join(cacheDir, '.building-fake-0123456789abcdef-new');
    fs.mkdirSync(path.join(old, 'data'), { recursive: true });
    fs.mkdirSync(recent);
    const hourAgo = new Date(Date.now() - 3_600_000);
    fs.utimesSync(old, hourAgo, hourAgo);
    await ensureTemplate(recipe(), context());
    expect(fs.existsSync(old)).toBe(false);
    expect(fs.existsSync(recent)).toBe(true);
  });
});

describe('templates nobody uses any more', () => {
  it('are removed when a new template of the same name is built, once unused for a week; recent ones and other names stay', async () => {
    const old = await ensureTemplate(recipe(['server 1.0']), context());
    const recent = await ensureTemplate(recipe(['server 1.1']), context());
    const other = await ensureTemplate({ ...recipe(['server 1.0']), name: 'other' }, context());
    const weekAgo = new Date(Date.now() - 8 * 24 * 3_600_000);
    for (const t of [old, other]) fs.utimesSync(path.join(path.dirname(t.dataDir), TEMPLATE_STAMP_FILE), weekAgo, weekAgo);
    await ensureTemplate(recipe(['server 1.2']), context());
    expect(fs.existsSync(old.dataDir)).toBe(false);
    expect(fs.existsSync(recent.dataDir)).toBe(true);
    expect(fs.existsSync(other.dataDir)).toBe(true);
  });

  it('a copy marks its template as used', async () => {
    const t = await ensureTemplate(recipe(['server 1.0']), context());
    const stamp = path.join(path.dirname(t.dataDir), TEMPLATE_STAMP_FILE);
    const weekAgo = new Date(Date.now() - 8 * 24 * 3_600_000);
    fs.utimesSync(stamp, weekAgo, weekAgo);
    await ensureTemplate(recipe(['server 1.0']), context());
    expect(Date.now() - fs.statSync(stamp).mtimeMs).toBeLessThan(60_000);
  });
});

describe('a build that runs as another user (PostgreSQL refuses root)', () => {
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  (root ? it : it.skip)(
    `${root ? '' : '(skipped: needs root to hand a directory to another user) '}builds under $TMPDIR as that user, then copies into a cache that user could not reach; no scratch is left`,
    async () => {
      const locked = path.join(work, 'locked');
      fs.mkdirSync(locked, { mode: 0o700 });
      // A TMPDIR that user can pass through (a 0700 one sends the build to SHARED_SERVER_BASE, local-process.test.ts).
      fs.chmodSync(work, 0o711);
      const seen: { owner?: number; dir?: string } = {};
      const r = recipe(['server 1.0']);
      const built = await ensureTemplate(
        {
          ...r,
          chown: { uid: 65534, gid: 65534 },
          build: async (building) => {
            seen.owner = fs.statSync(building).uid;
            seen.dir = building;
            await r.build(building);
            fs.chownSync(path.join(building, 'data', 'ibdata1'), 65534, 65534);
          },
        },
        { backend: 'postgres', cacheDir: path.join(locked, 'cache'), env: { ...process.env, TMPDIR: work } },
      );
      expect(seen.owner).toBe(65534);
      expect(path.dirname(seen.dir ?? '')).toBe(work);
      expect(fs.existsSync(seen.dir ?? '')).toBe(false);
      expect(built.dataDir.startsWith(path.join(locked, 'cache'))).toBe(true);
      // Owners survive the copy: the servers of that user own their data directories.
      expect(fs.statSync(path.join(built.dataDir, 'ibdata1')).uid).toBe(65534);
      expect(fs.readdirSync(work).filter((n) => n.startsWith('.sqltally-template-'))).toEqual([]);
    },
  );
});
