import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { resolveBackend, startBackend } from '../src/backends/registry';
import { childrenCpuMs } from './children-cpu';

/**
 * What a private server start costs, from its template data directory (what every start does) beside one that
 * initialises its data directory first (mariadb-install-db, initdb: what every start did before templates; forced by
 * pointing SQLTALLY_TEMPLATE_CACHE at an empty directory each time, so it also pays the copy). Pairs run alternately
 * in one process; the control pairs are template against template, the noise floor of the ratio.
 *
 * CPU is the children's (`cutime + cstime` of /proc/self/stat): the installer, cp and the server itself, all reaped
 * by this process once stopped. Wall time is start to ready, then stop, printed beside it, and the server's resident
 * memory once ready. Nothing is asserted.
 *
 *   npx tsx bench/server-start.ts [--backends mariadb,postgres,mysql] [--pairs 7]
 */

const DEFAULT_BACKENDS = ['mariadb', 'postgres', 'mysql'];
const DEFAULT_PAIRS = 7;

interface Sample {
  cpuMs: number;
  startMs: number;
  stopMs: number;
  /** The server process's resident memory once ready (VmRSS), in MB; NaN when it cannot be read. */
  residentMb: number;
}

// What a start fills is most of its cost where a first-touched page is expensive (README, the eighth stop).
function residentMb(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? NaN : Number(kb) / 1024;
  } catch {
    return NaN;
  }
}

async function once(id: string, env: NodeJS.ProcessEnv): Promise<Sample> {
  const cpu0 = childrenCpuMs();
  const t0 = performance.now();
  const started = await startBackend(id, env);
  const t1 = performance.now();
  const resident = residentMb(started.pid);
  await started.stop();
  const t2 = performance.now();
  // The server was reaped by stop(); its CPU is in cutime now.
  return { cpuMs: childrenCpuMs() - cpu0, startMs: t1 - t0, stopMs: t2 - t1, residentMb: resident };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] ?? NaN;
}

function row(label: string, samples: Sample[]): string {
  const cpu = median(samples.map((s) => s.cpuMs));
  return `  ${label.padEnd(38)} CPU ${cpu.toFixed(0).padStart(5)} ms   start ${median(samples.map((s) => s.startMs))
    .toFixed(0)
    .padStart(5)} ms   stop ${median(samples.map((s) => s.stopMs))
    .toFixed(0)
    .padStart(5)} ms   resident ${median(samples.map((s) => s.residentMb))
    .toFixed(0)
    .padStart(4)} MB   (median of ${samples.length})`;
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { backends: { type: 'string' }, pairs: { type: 'string' } } });
  const ids = values.backends ? values.backends.split(',') : DEFAULT_BACKENDS;
  const pairs = Number(values.pairs ?? DEFAULT_PAIRS);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-bench-start-'));
  try {
    for (const id of ids) {
      const resolution = await resolveBackend(id);
      if (!resolution.available || resolution.provider !== 'local') {
        console.log(`${id}: skipped (${resolution.available ? `provider ${resolution.provider}, not local binaries` : resolution.reason})`);
        continue;
      }
      // Templates of root-filesystem servers live inside the root filesystem (their initialiser runs in the chroot),
      // where SQLTALLY_TEMPLATE_CACHE does not reach: only the template side is measured for them.
      const rootfs = resolution.origin.startsWith('chroot ');
      await once(id, process.env); // the template exists from here on, and the binaries are in the page cache
      const template: Sample[] = [];
      const control: Sample[] = [];
      const fresh: Sample[] = [];
      for (let i = 0; i < pairs; i++) {
        template.push(await once(id, process.env));
        control.push(await once(id, process.env));
        if (!rootfs) fresh.push(await once(id, { ...process.env, SQLTALLY_TEMPLATE_CACHE: fs.mkdtempSync(path.join(scratch, 'cache-')) }));
      }
      console.log(`${id} (${resolution.origin}):`);
      console.log(row('from the template (every start)', template));
      console.log(row('the same again (control)', control));
      if (fresh.length > 0) console.log(row('initialised first (before templates)', fresh));
      const ratio = (a: Sample[], b: Sample[]): string => (median(a.map((s) => s.cpuMs)) / median(b.map((s) => s.cpuMs))).toFixed(2);
      console.log(
        `  children's CPU per start, template / initialised: ${fresh.length > 0 ? ratio(template, fresh) : 'n/a (root filesystem)'}; control template / template: ${ratio(control, template)}`,
      );
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
