import fs from 'node:fs';

/** Linux's USER_HZ: /proc reports CPU times in clock ticks of 1/100 s on every architecture Node runs on. */
const TICKS_PER_SECOND = 100;

/**
 * CPU (user + system) of this process's descendants reaped so far, in ms: fields 16 and 17 of /proc/self/stat
 * (`cutime`, `cstime`). A child counts once it has exited and been waited for, with whatever it reaped in turn; a
 * grandchild reparented to init when its parent exited is not in it. Ticks of 10 ms.
 */
export function childrenCpuMs(): number {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / TICKS_PER_SECOND;
}
