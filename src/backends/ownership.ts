import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/**
 * Who a private data directory belongs to, written beside it (`<dir>.owner.json`) before the directory exists and
 * removed after it is gone. A process killed by SIGKILL runs no cleanup; the record lets a later run tell its
 * directory (owner dead) from another run's (owner alive) and remove only the former.
 *
 * A pid alone is not an identity: pids are reused. The pid with its start time (field 22 of /proc/<pid>/stat, in
 * clock ticks since boot) is, within one boot and one pid namespace, which the record also names.
 */

export const OWNER_SUFFIX = '.owner.json';

export const ProcessIdentitySchema = z.object({
  pid: z.number().int().positive(),
  /** Start time in clock ticks since boot, as a decimal string (it outgrows 2^53 on no machine, but is read as text). */
  startTime: z.string().regex(/^\d+$/),
});
export type ProcessIdentity = z.infer<typeof ProcessIdentitySchema>;

export const OwnerRecordSchema = z.object({
  schemaVersion: z.literal(1),
  kind: z.literal('sqltally-private-dir'),
  /** The directory this record is for (absolute). */
  dir: z.string().min(1),
  /** Backend id as addressed (`mariadb`, `postgres@16`), for messages. */
  backend: z.string(),
  owner: ProcessIdentitySchema,
  /** `/proc/sys/kernel/random/boot_id`: a record from an earlier boot has a dead owner whatever its pid says. */
  bootId: z.string(),
  /** `/proc/self/ns/pid`: pids of another namespace (a container sharing this TMPDIR) cannot be judged from here. */
  pidNamespace: z.string(),
  /** Server processes started on the directory, with the signal that stops each cleanly. */
  servers: z.array(ProcessIdentitySchema.extend({ stopSignal: z.string() })),
  /** The uid the directory was handed to (root runs PostgreSQL as its own OS user); absent: the record's own owner. */
  dirUid: z.number().int().nonnegative().optional(),
  createdAt: z.string(),
});
export type OwnerRecord = z.infer<typeof OwnerRecordSchema>;

function readQuietly(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** `comm` may hold spaces and parentheses, so fields are counted from the last `)`. */
function statFields(pid: number): string[] | undefined {
  const stat = readQuietly(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // After ")": state (field 3) is index 0, so field n is index n - 3.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Process group and controlling terminal of a process (fields 5 and 7 of /proc/<pid>/stat). */
export function processGroupAndTty(pid: number): { pgrp: number; tty: number } | undefined {
  const fields = statFields(pid);
  if (!fields) return undefined;
  return { pgrp: Number(fields[5 - 3]), tty: Number(fields[7 - 3]) };
}

/** The pid and start time of a live process, or undefined when there is none by that pid. */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  const startTime = statFields(pid)?.[22 - 3];
  return startTime && /^\d+$/.test(startTime) ? { pid, startTime } : undefined;
}

/** True while that very process (not a later one with its pid) exists and is not a zombie. */
export function isRunning(identity: ProcessIdentity): boolean {
  const fields = statFields(identity.pid);
  if (!fields) return false;
  const state = fields[0];
  return state !== 'Z' && state !== 'X' && fields[22 - 3] === identity.startTime;
}

export function bootId(): string {
  return readQuietly('/proc/sys/kernel/random/boot_id')?.trim() ?? 'unknown';
}

export function pidNamespace(): string {
  try {
    return fs.readlinkSync('/proc/self/ns/pid');
  } catch {
    return 'unknown';
  }
}

export function ownerFileFor(dir: string): string {
  return `${dir}${OWNER_SUFFIX}`;
}

let self: ProcessIdentity | undefined;
function selfIdentity(): ProcessIdentity {
  self ??= processIdentity(process.pid) ?? { pid: process.pid, startTime: '0' };
  return self;
}

function writeRecord(file: string, record: OwnerRecord, flag: 'wx' | 'replace'): void {
  const text = `${JSON.stringify(record, null, 2)}\n`;
  if (flag === 'wx') {
    try {
      fs.writeFileSync(file, text, { flag: 'wx', mode: 0o600 });
    } catch (err) {
      // 'wx' created the file before the write failed (ENOSPC on a full $TMPDIR): an empty record is nobody's.
      // EEXIST means it was there before, someone else's: left alone.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') fs.rmSync(file, { force: true });
      throw err;
    }
    return;
  }
  // Hidden temp name (no sqltally- prefix), so a crash mid-rewrite leaves nothing that looks like a private dir.
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  fs.writeFileSync(temp, text, { mode: 0o600 });
  fs.renameSync(temp, file);
}

const NAME_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const MAX_NAME_ATTEMPTS = 20;

function randomSuffix(): string {
  return [...randomBytes(6)].map((b) => NAME_CHARS[b % NAME_CHARS.length]).join('');
}

/**
 * Creates `<prefix><random>` (mode 0700) under `base` with its owner record, the record first: there is never a
 * moment when the directory exists without saying whose it is. Throws the file system's error.
 */
export function createOwnedDir(base: string, prefix: string, backend: string): { dir: string; ownerFile: string } {
  for (let attempt = 0; ; attempt++) {
    const dir = path.join(base, `${prefix}${randomSuffix()}`);
    const ownerFile = ownerFileFor(dir);
    const record: OwnerRecord = {
      schemaVersion: 1,
      kind: 'sqltally-private-dir',
      dir,
      backend,
      owner: selfIdentity(),
      bootId: bootId(),
      pidNamespace: pidNamespace(),
      servers: [],
      createdAt: new Date().toISOString(),
    };
    try {
      writeRecord(ownerFile, record, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST' && attempt < MAX_NAME_ATTEMPTS) continue;
      throw err;
    }
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
      return { dir, ownerFile };
    } catch (err) {
      fs.rmSync(ownerFile, { force: true });
      if ((err as NodeJS.ErrnoException).code === 'EEXIST' && attempt < MAX_NAME_ATTEMPTS) continue;
      throw err;
    }
  }
}

/** Reads and validates a record; undefined when it is missing or not one of ours. */
export function readOwnerRecord(file: string): OwnerRecord | undefined {
  const text = readQuietly(file);
  if (text === undefined) return undefined;
  try {
    const parsed = OwnerRecordSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Adds a server process to the record of `dir`, so a later run can stop it if this process dies first. */
export function recordServer(dir: string, pid: number, stopSignal: string): void {
  const file = ownerFileFor(dir);
  const record = readOwnerRecord(file);
  const identity = processIdentity(pid);
  if (!record || !identity) return;
  writeRecord(file, { ...record, servers: [...record.servers, { ...identity, stopSignal }] }, 'replace');
}

/** Says in the record of `dir` that the directory now belongs to `uid` (chowned for a server's OS user). */
export function recordDirOwner(dir: string, uid: number): void {
  const file = ownerFileFor(dir);
  const record = readOwnerRecord(file);
  if (record) writeRecord(file, { ...record, dirUid: uid }, 'replace');
}

/** Whether the owner of a record is this very process. */
export function ownedBySelf(record: OwnerRecord): boolean {
  const me = selfIdentity();
  return record.owner.pid === me.pid && record.owner.startTime === me.startTime;
}
