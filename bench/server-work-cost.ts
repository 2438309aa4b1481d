/**
 * What reading the server-work counters (rows examined, scans...: counters/probes/server-work.ts) adds to each
 * window: two probes on one private server, one reading them at the window's edges and one not (`serverWork:
 * false`), each taking empty windows (begin, with its control window, then end) around one idle workload
 * connection, the two sides alternating pair by pair. Per window: wall time (the readings are round trips to the
 * server) and this process's CPU. `--control` runs both sides without the work reads: the noise floor.
 *
 *   npm run build && npx tsx bench/server-work-cost.ts --backend mariadb [--pairs 11] [--windows 20] [--control]
 */
import { parseArgs } from 'node:util';
import { createProbe, openRawConnection, startBackend } from './shipped';

const { values } = parseArgs({
  options: {
    backend: { type: 'string', default: 'mariadb' },
    pairs: { type: 'string', default: '11' },
    windows: { type: 'string', default: '20' },
    control: { type: 'boolean', default: false },
  },
});
const PAIRS = Number(values.pairs);
const WINDOWS = Number(values.windows);
const CONTROL = values.control === true;
const DRIVER = { mariadb: 'mysql2', mysql: 'mysql2', postgres: 'pg' } as const;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const cpuNs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};

async function main(): Promise<void> {
  const name = values.backend as keyof typeof DRIVER;
  if (!(name in DRIVER)) throw new Error(`--backend must be one of ${Object.keys(DRIVER).join(', ')}: SQLite reads no server work`);
  const backend = await startBackend(name);
  const workload = await openRawConnection(DRIVER[name], backend.connection, { backend: name });
  // The workload connection stays idle: there is nothing of its own to settle before a reading.
  const ctx = { workloadConnectionIds: [workload.connectionId!], settle: async () => [] as string[] };
  const withWork = await createProbe(backend, { serverWork: !CONTROL });
  const without = await createProbe(backend, { serverWork: false });
  const wall: number[] = [];
  const cpu: number[] = [];
  const withoutWall: number[] = [];
  let workSeen = false;
  try {
    for (const probe of [withWork, without]) await probe.calibrate(ctx);
    for (let pair = 0; pair < PAIRS + 1; pair++) {
      const sides = pair % 2 === 0 ? [withWork, without] : [without, withWork];
      const w: Record<'with' | 'without', { wall: number; cpu: number }> = { with: { wall: 0, cpu: 0 }, without: { wall: 0, cpu: 0 } };
      for (const probe of sides) {
        const t0 = process.hrtime.bigint();
        const c0 = cpuNs();
        for (let i = 0; i < WINDOWS; i++) {
          const layer = await (await probe.begin(ctx)).end();
          if (layer.work) workSeen = true;
          if (layer.incomplete) throw new Error(`an empty window was incomplete: ${layer.incompleteReasons.join('; ')}`);
        }
        const side = probe === withWork ? 'with' : 'without';
        w[side] = { wall: Number(process.hrtime.bigint() - t0) / WINDOWS, cpu: (cpuNs() - c0) / WINDOWS };
      }
      // The first pair warms both sides up.
      if (pair === 0) continue;
      wall.push(w.with.wall - w.without.wall);
      cpu.push(w.with.cpu - w.without.cpu);
      withoutWall.push(w.without.wall);
    }
  } finally {
    await withWork.close();
    await without.close();
    await workload.close();
    await backend.stop();
  }
  const tag = CONTROL ? 'control (no work reads on either side): ' : '';
  const us = (ns: number): string => (ns / 1000).toFixed(0);
  console.log(`${backend.description.id} ${backend.description.serverVersion}; ${WINDOWS} empty windows a side, median of ${PAIRS} alternating pairs`);
  console.log(
    `${tag}server-work reads per window: +${us(median(wall))} us wall (pairs ${us(Math.min(...wall))}..${us(Math.max(...wall))}), +${us(median(cpu))} us CPU of this process`,
  );
  console.log(`window without them: ${us(median(withoutWall))} us wall; work section read: ${workSeen}`);
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
