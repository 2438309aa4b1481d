import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cli } from '../cli';
import { readReportFile } from '../../src/report/schema';
import { findLeaks } from '../global-teardown';
import { START_TIMEOUT_MS, integrationBackends } from '../harness';
import { itForProvider, type ProviderTable } from './providers';

// A full disk under the report directory, and a full $TMPDIR under the servers' data (a small file system filled to
// the last byte): the run must exit non-zero naming the file, with no half-written report and nothing left behind.
jest.setTimeout(START_TIMEOUT_MS);

const SIZE = '2m';

interface Mounted {
  dir: string;
  how: string;
  unmount: () => void;
}

/** A small file system at a new directory, or the reason none could be had here. */
function mountSmall(): Mounted | string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-fault-full-'));
  const tried: string[] = [];
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE}`, 'tmpfs', dir], { stdio: 'pipe' });
    return { dir, how: `tmpfs of ${SIZE}`, unmount: () => execFileSync('umount', [dir]) };
  } catch (err) {
    tried.push(`mount -t tmpfs: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
  }
  const image = `${dir}.img`;
  try {
    execFileSync('truncate', ['-s', '4M', image]);
    execFileSync('mkfs.ext4', ['-q', '-F', image], { stdio: 'pipe' });
    execFileSync('mount', ['-o', 'loop', image, dir], { stdio: 'pipe' });
    return {
      dir,
      how: 'ext4 image of 4 MB on a loop device',
      unmount: () => {
        execFileSync('umount', [dir]);
        fs.rmSync(image, { force: true });
      },
    };
  } catch (err) {
    tried.push(`loop mount: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
    fs.rmSync(image, { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
    return tried.join('; ');
  }
}

/** Writes a filler file until the file system refuses another byte. */
function fill(dir: string): void {
  const fd = fs.openSync(path.join(dir, 'filler'), 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
  // The last partial chunk too: byte by byte until nothing fits.
  const small = fs.openSync(path.join(dir, 'filler2'), 'w');
  try {
    for (;;) fs.writeSync(small, Buffer.alloc(512, 1));
  } catch {
    // Full.
  } finally {
    fs.closeSync(small);
  }
}

/** Frees `bytes` of a filled file system: the owner record and the first files of a data directory then fit. */
function leaveFree(dir: string, bytes: number): void {
  fs.rmSync(path.join(dir, 'filler2'), { force: true });
  const filler = path.join(dir, 'filler');
  fs.truncateSync(filler, Math.max(0, fs.statSync(filler).size - bytes));
}

/** Every file on the small file system except the fillers: what the run left there. */
function leftOn(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'lost+found') walk(p);
      } else if (!/^filler2?$/.test(e.name)) out.push(path.relative(dir, p));
    }
  };
  walk(dir);
  return out;
}

/** Whose data directory lives under $TMPDIR, so a full $TMPDIR can fail its start. */
const DATA_UNDER_TMPDIR: ProviderTable = {
  local: 'runs',
  testcontainers: { notSupported: "the server's data lives inside its container, in the engine's storage: $TMPDIR is not under it" },
  external: { notSupported: "an external server's data directory is not sqltally's, and $TMPDIR is not under it" },
  embedded: { notSupported: 'SQLite under a full $TMPDIR is the case above' },
};

const mounted = mountSmall();
const SQLITE_RUN = ['run', '--backends', 'sqlite', '--strategies', 'better-sqlite3.multirow', '--rows', '20', '--hot-rows', ''];

if (typeof mounted === 'string') {
  describe.skip(`a full disk: skipped: no small file system could be mounted here (${mounted})`, () => {
    it('needs tmpfs or a loop device', () => undefined);
  });
} else {
  describe(`a full disk (${mounted.how})`, () => {
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-fault-disk-'));
    beforeAll(() => fill(mounted.dir));
    afterAll(() => {
      mounted.unmount();
      fs.rmSync(mounted.dir, { recursive: true, force: true });
      fs.rmSync(scratch, { recursive: true, force: true });
    });

    it('under the report directory: exit 1, the message names the file and says nothing was written, no half-written report', async () => {
      const out = path.join(mounted.dir, 'out');
      const { code, said } = await cli([...SQLITE_RUN, '--out', out]);
      expect(code).toBe(1);
      // Whichever of the report's files the space ran out on, by its own name (not the staging directory's).
      expect(said).toMatch(new RegExp(`cannot write ${out}/[^/\\s]+\\.(json|md|svg|html): no space left on device; nothing was written to ${out}`));
      expect(said).toContain(`could not write the report, nothing was written to ${out}`);
      expect(fs.existsSync(out)).toBe(false);
      expect(leftOn(mounted.dir)).toEqual([]);
      // The report reached a person anyway: on stdout, as JSON.
      expect(said).toContain('"schemaVersion"');
    });

    it('$TMPDIR full under the SQLite database file: the run fails with a report (written elsewhere) naming backend and phase, exit 1, nothing left in $TMPDIR', async () => {
      const out = path.join(scratch, 'sqlite');
      const env = { TMPDIR: mounted.dir, SQLTALLY_RUN_ID: `fltdisk${process.pid}` };
      const { code, said } = await cli([...SQLITE_RUN, '--out', out], env);
      expect(code).toBe(1);
      const report = readReportFile(path.join(out, 'report.json'));
      if (process.env['FAULT_DEBUG']) console.log(report.failure);
      expect(report.status).toBe('failed');
      expect(report.failure?.backend).toMatch(/^sqlite/);
      expect(report.failure?.message).toMatch(/no space left on device|ENOSPC|SQLITE_FULL|disk is full|database or disk is full/i);
      expect(said).toContain('run FAILED');
      expect(leftOn(mounted.dir)).toEqual([]);
      expect(findLeaks({ ...process.env, ...env })).toEqual([]);
    });

    const servers = integrationBackends().filter((b) => b.available && b.backend !== 'sqlite');
    for (const b of servers) {
      if (!b.available) continue;
      if (b.origin.startsWith('chroot')) {
        it.skip(`$TMPDIR full under ${b.id}: not applicable, its data directory is inside its root filesystem (${b.origin.split(' ')[1] ?? b.origin}/tmp), not under $TMPDIR`, () =>
          undefined);
        continue;
      }
      /** `sqltally run` on b with $TMPDIR on the small mount: exit 1, a failed report naming the backend and a start phase, no cell. */
      const runFailsToStart = async (suffix: string) => {
        const out = path.join(scratch, `${b.id.replace(/[^a-z0-9]/gi, '')}${suffix}`);
        const env = { TMPDIR: mounted.dir, SQLTALLY_RUN_ID: `fltdisk${process.pid}` };
        const { code, said } = await cli(['run', '--backends', b.id, '--rows', '20', '--hot-rows', '', '--out', out], env);
        expect(code).toBe(1);
        const report = readReportFile(path.join(out, 'report.json'));
        if (process.env['FAULT_DEBUG']) console.log(report.failure);
        expect(report.status).toBe('failed');
        expect(report.failure).toMatchObject({
          backend: expect.stringContaining(b.backend),
          phase: expect.stringMatching(/^(provision|start|connect|setup)$/),
        });
        expect(report.cells).toEqual([]);
        expect(said).toContain('run FAILED');
        return { env, report, said };
      };
      itForProvider(
        b,
        DATA_UNDER_TMPDIR,
        `$TMPDIR full under ${b.id}'s private data directory: the start fails naming backend and phase, the report is written elsewhere, exit 1, nothing left`,
        async () => {
          const { env } = await runFailsToStart('');
          expect(leftOn(mounted.dir)).toEqual([]);
          expect(findLeaks({ ...process.env, ...env })).toEqual([]);
        },
      );

      itForProvider(
        b,
        DATA_UNDER_TMPDIR,
        `$TMPDIR with 256 KB left under ${b.id}: the data directory starts and its copy (or the server's own set-up) runs out of space; the half-made directory is removed`,
        async () => {
          leaveFree(mounted.dir, 256 * 1024);
          try {
            const { env, report, said } = await runFailsToStart('-partial');
            // When the copy is what ran out of space, cp's own words reach the report and the terminal.
            if (/could not copy the template data directory/.test(report.failure?.message ?? '')) {
              expect(report.failure?.message).toMatch(/cp failed \(1\)[\s\S]*No space left on device/);
              expect(said).toMatch(/cp failed \(1\)[\s\S]*No space left on device/);
            }
            expect(leftOn(mounted.dir)).toEqual([]);
            expect(findLeaks({ ...process.env, ...env })).toEqual([]);
          } finally {
            fill(mounted.dir);
          }
        },
      );
    }
  });
}
