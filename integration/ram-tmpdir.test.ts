import { chooseRamTmpdir, RAM_TMPDIR_ENV } from './ram-tmpdir';
import type { RamTmpdirProbe } from './ram-tmpdir';

// The integration run's choice of a RAM-backed TMPDIR (integration/ram-tmpdir.ts), on machines described by hand.
const GiB = 1024 ** 3;
const MOUNTS = ['sysfs /sys sysfs rw 0 0', '/dev/vda / ext4 rw,relatime 0 0', 'tmpfs /dev/shm tmpfs rw,relatime,size=24683652k 0 0', ''].join('\n');
const linux = (over: Partial<RamTmpdirProbe> = {}): RamTmpdirProbe => ({ platform: 'linux', mounts: MOUNTS, freeBytes: 20 * GiB, ...over });

describe('chooseRamTmpdir', () => {
  it('takes /dev/shm when it is a tmpfs with room and nobody set TMPDIR', () => {
    expect(chooseRamTmpdir({}, linux())).toEqual({ dir: '/dev/shm/sqltally-tests-tmp' });
  });

  it('keeps a TMPDIR someone set, and the default when told to', () => {
    expect(chooseRamTmpdir({ TMPDIR: '/scratch' }, linux())).toEqual({ kept: 'TMPDIR is set (/scratch)' });
    expect(chooseRamTmpdir({ [RAM_TMPDIR_ENV]: '0' }, linux())).toEqual({ kept: `${RAM_TMPDIR_ENV}=0` });
  });

  it('keeps the default where /dev/shm is missing, not a tmpfs, or too small (a container 64 MB one)', () => {
    expect(chooseRamTmpdir({}, linux({ platform: 'darwin' }))).toEqual({ kept: 'not Linux (darwin)' });
    expect(chooseRamTmpdir({}, linux({ mounts: MOUNTS.replace('tmpfs /dev/shm tmpfs', 'none /dev/shm ext4') }))).toEqual({ kept: '/dev/shm is not a tmpfs' });
    expect(chooseRamTmpdir({}, linux({ mounts: null, freeBytes: null }))).toEqual({ kept: '/dev/shm is not a tmpfs' });
    expect(chooseRamTmpdir({}, linux({ freeBytes: 64 * 1024 ** 2 }))).toEqual({ kept: '/dev/shm has 0.1 GiB free, less than 4 GiB' });
  });
});
