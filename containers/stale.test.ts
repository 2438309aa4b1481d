import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DATADIR_PREFIX, makePrivateDir } from './local-process';
import { bootId, createOwnedDir, isRunning, ownerFileFor, pidNamespace, processIdentity, readOwnerRecord } from './ownership';
import type { OwnerRecord, ProcessIdentity } from './ownership';
import { describeSweep, privateDirBases, sweepStalePrivateDirs } from './stale';

let base: string;
let cache: string;
let env: NodeJS.ProcessEnv;
const children: ChildProcess[] = [];

beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-unit-stale-'));
  cache = path.join(base, 'rootfs-cache');
  fs.mkdirSync(cache);
  env = { TMPDIR: path.join(base, 'tmp'), SQLTALLY_ROOTFS_CACHE: cache, SQLTALLY_RUN_ID: 'stale' };
  fs.mkdirSync(env['TMPDIR']!);
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.pid !== undefined) signalQuietly(c.pid);
  fs.rmSync(base, { recursive: true, force: true });
});

function signalQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone.
  }
}

/** A process that is alive until killed; detached, so it has no terminal, like a server sqltally spawns. */
function sleeper(cwd?: string): ProcessIdentity {
  const child = spawn('sleep', ['300'], { detached: true, stdio: 'ignore', ...(cwd ? { cwd } : {}) });
  children.push(child);
  const identity = child.pid !== undefined ? processIdentity(child.pid) : undefined;
  if (!identity) throw new Error('could not start sleep');
  return identity;
}

async function deadIdentity(): Promise<ProcessIdentity> {
  const child = spawn('sleep', ['300'], { stdio: 'ignore' });
  const identity = processIdentity(child.pid!)!;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  return identity;
}

/** A private directory as a dead (or live) run would have left it: some data, and its record. */
function leftBehind(where: string, owner: ProcessIdentity, extra: Partial<OwnerRecord> = {}): string {
  const dir = path.join(where, `${DATADIR_PREFIX}old-mariadb-${Math.random().toString(36).slice(2, 8)}`);
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'data', 'ibdata1'), Buffer.alloc(4096));
  const record: OwnerRecord = {
    schemaVersion: 1,
    kind: 'sqltally-private-dir',
    dir,
    backend: 'mariadb',
    owner,
    bootId: bootId(),
    pidNamespace: pidNamespace(),
    servers: [],
    createdAt: new Date().toISOString(),
    ...extra,
  };
  fs.writeFileSync(ownerFileFor(dir), JSON.stringify(record));
  return dir;
}

const gone = (dir: string): boolean => !fs.existsSync(dir) && !fs.existsSync(ownerFileFor(dir));
const kept = (dir: string): boolean => fs.existsSync(dir) && fs.existsSync(ownerFileFor(dir));

describe('owner records', () => {
  it('are written before the directory, naming this process by pid and start time', () => {
    const { dir, ownerFile } = createOwnedDir(env['TMPDIR']!, `${DATADIR_PREFIX}x-`, 'postgres');
    expect(fs.statSync(dir).isDirectory()).toBe(true);
    expect(ownerFile).toBe(`${dir}.owner.json`);
    const record = readOwnerRecord(ownerFile);
    expect(record).toMatchObject({ dir, backend: 'postgres', owner: processIdentity(process.pid), servers: [] });
    expect(isRunning(record!.owner)).toBe(true);
  });

  it('go with the directory when makePrivateDir removes it', async () => {
    const dir = makePrivateDir('sqlite', env);
    expect(readOwnerRecord(ownerFileFor(dir.path))?.dir).toBe(dir.path);
    await dir.remove();
    expect(gone(dir.path)).toBe(true);
    expect(fs.readdirSync(env['TMPDIR']!)).toEqual([]);
  });

  it('tell a reused pid from its owner by the start time', () => {
    const live = sleeper();
    expect(isRunning(live)).toBe(true);
    expect(isRunning({ ...live, startTime: String(Number(live.startTime) + 1) })).toBe(false);
  });
});

describe('sweepStalePrivateDirs', () => {
  it('removes a directory whose owner died, and says what it removed', async () => {
    const owner = await deadIdentity();
    const dir = leftBehind(env['TMPDIR']!, owner);
    const sweep = await sweepStalePrivateDirs(env);
    expect(gone(dir)).toBe(true);
    expect(sweep).toEqual({ removed: [{ dir, backend: 'mariadb', ownerPid: owner.pid, bytes: 4096, stoppedPids: [] }], stuck: [] });
    expect(describeSweep(sweep)).toEqual([`cleaned ${dir} (mariadb, 0.0 MB, owner pid ${owner.pid} is gone)`]);
  });

  it('leaves alone a directory whose owner is alive: this process, or another', async () => {
    const mine = makePrivateDir('sqlite', env);
    const theirs = leftBehind(env['TMPDIR']!, sleeper());
    expect(await sweepStalePrivateDirs(env)).toEqual({ removed: [], stuck: [] });
    expect(kept(mine.path)).toBe(true);
    expect(kept(theirs)).toBe(true);
    await mine.remove();
  });

  it('takes a live process with the recorded pid but another start time for a dead owner', async () => {
    const live = sleeper();
    const dir = leftBehind(env['TMPDIR']!, { ...live, startTime: String(Number(live.startTime) - 1) });
    await sweepStalePrivateDirs(env);
    expect(gone(dir)).toBe(true);
    expect(isRunning(live)).toBe(true);
  });

  it('stops a server still running on a stale directory (recorded, or found by its working directory) before removing it', async () => {
    const owner = await deadIdentity();
    const dir = leftBehind(env['TMPDIR']!, owner);
    const recorded = sleeper(dir);
    const unrecorded = sleeper(dir);
    const record = readOwnerRecord(ownerFileFor(dir))!;
    fs.writeFileSync(ownerFileFor(dir), JSON.stringify({ ...record, servers: [{ ...recorded, stopSignal: 'SIGTERM' }] }));
    const sweep = await sweepStalePrivateDirs(env);
    expect(isRunning(recorded)).toBe(false);
    expect(isRunning(unrecorded)).toBe(false);
    expect(gone(dir)).toBe(true);
    expect(sweep.removed[0]?.stoppedPids.sort()).toEqual([recorded.pid, unrecorded.pid].sort());
  });

  it('treats a record from another boot as dead, and leaves one from another pid namespace alone', async () => {
    const live = sleeper();
    const earlierBoot = leftBehind(env['TMPDIR']!, live, { bootId: 'not-this-boot' });
    const otherNamespace = leftBehind(env['TMPDIR']!, await deadIdentity(), { pidNamespace: 'pid:[1]' });
    await sweepStalePrivateDirs(env);
    expect(gone(earlierBoot)).toBe(true);
    expect(kept(otherNamespace)).toBe(true);
  });

  it('never touches a directory without a record, or one whose record is not ours', async () => {
    const bare = path.join(env['TMPDIR']!, `${DATADIR_PREFIX}cli-mariadb-legacy`);
    fs.mkdirSync(bare);
    const forged = leftBehind(env['TMPDIR']!, await deadIdentity(), { dir: '/etc' });
    const corrupt = leftBehind(env['TMPDIR']!, await deadIdentity());
    fs.writeFileSync(ownerFileFor(corrupt), '{"schemaVersion": 1, "kind": "sqltally-priv');
    await sweepStalePrivateDirs(env);
    expect(fs.existsSync(bare)).toBe(true);
    expect(kept(forged)).toBe(true);
    expect(kept(corrupt)).toBe(true);
  });

  it('looks inside each provisioned root filesystem too', async () => {
    const inside = path.join(cache, 'mysql-0123456789abcdef', 'var', 'tmp');
    fs.mkdirSync(inside, { recursive: true });
    expect(privateDirBases(env)).toEqual([env['TMPDIR'], inside]);
    const dir = leftBehind(inside, await deadIdentity());
    await sweepStalePrivateDirs(env);
    expect(gone(dir)).toBe(true);
  });
});
