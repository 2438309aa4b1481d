import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DATADIR_PREFIX, makePrivateDir, SHARED_SERVER_BASE } from './local-process';
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

/**
 * A process that is alive until killed; detached, so it has no terminal, like a server sqltally spawns. `argv0`
 * puts a path in its command line, as a server's `--datadir=` does.
 */
function sleeper(cwd?: string, argv0?: string): ProcessIdentity {
  const child = spawn('sleep', ['300'], { detached: true, stdio: 'ignore', ...(cwd ? { cwd } : {}), ...(argv0 ? { argv0 } : {}) });
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
    expect(sweep).toEqual({ removed: [{ dir, backend: 'mariadb', ownerPid: owner.pid, bytes: 4096, stoppedPids: [] }], stuck: [], refused: [] });
    expect(describeSweep(sweep)).toEqual([`cleaned ${dir} (mariadb, 0.0 MB, owner pid ${owner.pid} is gone)`]);
  });

  it('leaves alone a directory whose owner is alive: this process, or another', async () => {
    const mine = makePrivateDir('sqlite', env);
    const theirs = leftBehind(env['TMPDIR']!, sleeper());
    expect(await sweepStalePrivateDirs(env)).toEqual({ removed: [], stuck: [], refused: [] });
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

  it('stops a server still running on a stale directory (recorded, or found by its working directory and command line) before removing it', async () => {
    const owner = await deadIdentity();
    const dir = leftBehind(env['TMPDIR']!, owner);
    const recorded = sleeper(dir, path.join(dir, 'data', 'mariadbd'));
    const unrecorded = sleeper(path.join(dir, 'data'), `--datadir=${dir}/data`);
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
    const sweep = await sweepStalePrivateDirs(env);
    expect(fs.existsSync(bare)).toBe(true);
    expect(kept(forged)).toBe(true);
    expect(kept(corrupt)).toBe(true);
    expect(sweep.refused).toEqual(
      expect.arrayContaining([
        { file: ownerFileFor(forged), reason: 'the record names another directory (/etc)' },
        { file: ownerFileFor(corrupt), reason: 'not an owner record this sqltally can read' },
      ]),
    );
  });

  it('looks inside each provisioned root filesystem too', async () => {
    const inside = path.join(cache, 'mysql-0123456789abcdef', 'var', 'tmp');
    fs.mkdirSync(inside, { recursive: true });
    expect(privateDirBases(env)).toEqual([env['TMPDIR'], ...(fs.existsSync(SHARED_SERVER_BASE) ? [SHARED_SERVER_BASE] : []), inside]);
    const dir = leftBehind(inside, await deadIdentity());
    await sweepStalePrivateDirs(env);
    expect(gone(dir)).toBe(true);
  });
});

/** Every process.kill of a sweep, so a test can show no group, init or stranger was ever signalled. */
function recordKills(): { calls: [number, string | number | undefined][]; restore: () => void } {
  const calls: [number, string | number | undefined][] = [];
  const real = process.kill.bind(process);
  const spy = jest.spyOn(process, 'kill').mockImplementation((pid: number, sig?: string | number) => {
    calls.push([pid, sig]);
    return real(pid, sig);
  });
  return { calls, restore: () => spy.mockRestore() };
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
/** A uid that is not ours: nobody's when we are root. */
const OTHER_UID = 65534;

describe('a planted owner record', () => {
  let kills: ReturnType<typeof recordKills>;
  beforeEach(() => (kills = recordKills()));
  afterEach(() => kills.restore());

  it('naming another process as its server is refused, and that process survives', async () => {
    const victim = sleeper(os.tmpdir());
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity(), { servers: [{ ...victim, stopSignal: 'SIGKILL' }] });
    const sweep = await sweepStalePrivateDirs(env);
    expect(isRunning(victim)).toBe(true);
    expect(kept(dir)).toBe(true);
    expect(sweep.refused).toEqual([
      { file: ownerFileFor(dir), reason: `it names pid ${victim.pid} as its server, which is not a server of ours on this directory` },
    ]);
    expect(describeSweep(sweep)).toEqual([`left ${ownerFileFor(dir)} alone: ${sweep.refused[0]!.reason}`]);
    expect(kills.calls).toEqual([]);
  });

  it('naming pid 1 is refused, and nothing is signalled', async () => {
    const init = processIdentity(1)!;
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity(), { servers: [{ ...init, stopSignal: 'SIGKILL' }] });
    const sweep = await sweepStalePrivateDirs(env);
    expect(sweep.refused.map((r) => r.file)).toEqual([ownerFileFor(dir)]);
    expect(kept(dir)).toBe(true);
    expect(kills.calls).toEqual([]);
  });

  it('naming a process group leader is refused: neither the leader nor its group is signalled', async () => {
    // A shell leading its own group, with a child in it.
    const leader = spawn('sh', ['-c', 'sleep 300 & wait'], { detached: true, stdio: 'ignore' });
    children.push(leader);
    const identity = processIdentity(leader.pid!)!;
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity(), { servers: [{ ...identity, stopSignal: 'SIGTERM' }] });
    const sweep = await sweepStalePrivateDirs(env);
    expect(sweep.refused.map((r) => r.file)).toEqual([ownerFileFor(dir)]);
    expect(isRunning(identity)).toBe(true);
    expect(kills.calls.filter(([pid]) => pid <= 1)).toEqual([]);
    expect(kills.calls).toEqual([]);
    process.kill(-leader.pid!, 'SIGKILL');
  });

  it('that a process of ours merely works in (its command line does not name the directory) leaves it running', async () => {
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity());
    const bystander = sleeper(dir);
    const sweep = await sweepStalePrivateDirs(env);
    expect(isRunning(bystander)).toBe(true);
    expect(sweep.removed.map((r) => r.stoppedPids)).toEqual([[]]);
  });

  it('that is a symbolic or hard link to a record is refused', async () => {
    const real = leftBehind(env['TMPDIR']!, await deadIdentity());
    const linked = path.join(env['TMPDIR']!, `${DATADIR_PREFIX}linked`);
    fs.mkdirSync(linked);
    const text = JSON.stringify({ ...readOwnerRecord(ownerFileFor(real))!, dir: linked });
    const elsewhere = path.join(base, 'record.json');
    fs.writeFileSync(elsewhere, text);
    fs.symlinkSync(elsewhere, ownerFileFor(linked));
    // The real one gets a second name, as anyone's `ln` into a shared TMPDIR would give it.
    fs.linkSync(ownerFileFor(real), path.join(base, 'second-name'));
    const sweep = await sweepStalePrivateDirs(env);
    expect(sweep.refused).toEqual(
      expect.arrayContaining([
        { file: ownerFileFor(linked), reason: 'the record is not a regular file' },
        { file: ownerFileFor(real), reason: 'the record has 2 links' },
      ]),
    );
    expect(fs.existsSync(linked) && kept(real)).toBe(true);
  });

  it('writable by others is refused', async () => {
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity());
    fs.chmodSync(ownerFileFor(dir), 0o666);
    const sweep = await sweepStalePrivateDirs(env);
    expect(sweep.refused).toEqual([{ file: ownerFileFor(dir), reason: 'the record is writable by others (mode 666)' }]);
    expect(kept(dir)).toBe(true);
  });

  const asRoot = isRoot ? it : it.skip;
  if (!isRoot) it("(skipped: the cases of another user's record and directory need root to chown)", () => undefined);

  asRoot('written by another user is refused, and the process it names survives, though it runs on that directory', async () => {
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity());
    const server = sleeper(dir, path.join(dir, 'mariadbd'));
    const record = readOwnerRecord(ownerFileFor(dir))!;
    fs.writeFileSync(ownerFileFor(dir), JSON.stringify({ ...record, servers: [{ ...server, stopSignal: 'SIGKILL' }] }));
    fs.chownSync(ownerFileFor(dir), OTHER_UID, OTHER_UID);
    const sweep = await sweepStalePrivateDirs(env);
    expect(sweep.refused).toEqual([{ file: ownerFileFor(dir), reason: `the record belongs to uid ${OTHER_UID}, not to this user (uid 0)` }]);
    expect(isRunning(server)).toBe(true);
    expect(kept(dir)).toBe(true);
    expect(kills.calls).toEqual([]);
  });

  asRoot('whose directory belongs to another user than it says is refused', async () => {
    const dir = leftBehind(env['TMPDIR']!, await deadIdentity());
    fs.chownSync(dir, OTHER_UID, OTHER_UID);
    const handed = leftBehind(env['TMPDIR']!, await deadIdentity(), { dirUid: OTHER_UID });
    fs.chownSync(handed, OTHER_UID, OTHER_UID);
    const sweep = await sweepStalePrivateDirs(env);
    expect(sweep.refused).toEqual([{ file: ownerFileFor(dir), reason: `its directory belongs to uid ${OTHER_UID}, not 0` }]);
    expect(kept(dir)).toBe(true);
    // A directory root handed to a server's OS user, and said so in its record, is root's to clean.
    expect(gone(handed)).toBe(true);
  });
});
