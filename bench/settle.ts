import { Client } from 'pg';
import { startBackend } from '../src/backends/registry';
import type { StartedBackend } from '../src/backends/types';
import { createProbe } from '../src/server';

/**
 * How long PostgreSQL statistics take to become visible after a 5000-row INSERT, as the probe measures it
 * (`ServerLayer.settleNs`: from the window's end until the table's counters were read with the rows in them).
 * The probe forces the writer's flush (15+), so this should be milliseconds, not the 0.8-10 s a polling reader waits.
 *
 *   npx tsx bench/settle.ts [postgres@15 postgres@17 ...] [--runs 31]
 */

const ROWS = 5000;
const DEFAULT_RUNS = 31;
const TARGET_MS = 25;

export interface SettleResult {
  backend: string;
  serverVersion: string;
  runs: number;
  /** Raw samples, integer ns, kept so percentiles can be recomputed. */
  samplesNs: number[];
  medianNs: number;
  p90Ns: number;
  minNs: number;
  maxNs: number;
}

/** Nearest-rank percentile over raw samples. */
function percentile(sorted: number[], p: number): number {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] ?? 0;
}

function ms(ns: number): string {
  return (ns / 1e6).toFixed(6);
}

export async function measureSettle(backend: StartedBackend, runs = DEFAULT_RUNS): Promise<SettleResult> {
  const c = backend.connection;
  if (c.kind !== 'network') throw new Error(`${backend.description.id} is not PostgreSQL`);
  const writer = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
  writer.on('error', () => undefined);
  await writer.connect();
  const table = `settle_${process.pid}`;
  await writer.query(`CREATE TABLE public.${table} (id serial PRIMARY KEY, a int NOT NULL, b text NOT NULL) WITH (autovacuum_enabled = false)`);
  const sql = `INSERT INTO public.${table} (a, b) VALUES ${Array.from({ length: ROWS }, (_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ')}`;
  const values = Array.from({ length: ROWS }, (_, i) => [i, `row-${i}`]).flat();
  const probe = await createProbe(backend);
  const ctx = {
    workloadConnectionIds: [(writer as unknown as { processID: number }).processID],
    table: { schema: 'public', name: table },
    onWorkloadConnection: async (q: string) => (await writer.query(q)).rows,
  };
  const samplesNs: number[] = [];
  try {
    await probe.calibrate(ctx);
    for (let i = 0; i < runs; i++) {
      const win = await probe.begin(ctx);
      await writer.query(sql, values);
      const layer = await win.end();
      if (layer.incomplete) throw new Error(`run ${i}: server layer incomplete: ${layer.incompleteReasons.join('; ')}`);
      if (layer.summary.rowsInserted !== ROWS) throw new Error(`run ${i}: ${layer.summary.rowsInserted} rows visible, expected ${ROWS}`);
      if (layer.settleNs === null) throw new Error(`run ${i}: no settle time recorded`);
      samplesNs.push(layer.settleNs);
    }
  } finally {
    await probe.close();
    await writer.end();
  }
  const sorted = [...samplesNs].sort((a, b) => a - b);
  return {
    backend: backend.description.id,
    serverVersion: backend.description.serverVersion,
    runs,
    samplesNs,
    medianNs: percentile(sorted, 50),
    p90Ns: percentile(sorted, 90),
    minNs: sorted[0] ?? 0,
    maxNs: sorted[sorted.length - 1] ?? 0,
  };
}

async function main(argv: string[]): Promise<number> {
  const runsAt = argv.indexOf('--runs');
  const runs = runsAt >= 0 ? Number(argv[runsAt + 1]) : DEFAULT_RUNS;
  if (!Number.isInteger(runs) || runs < 1) {
    console.error(`--runs needs a positive integer, got ${argv[runsAt + 1]}`);
    return 2;
  }
  const ids = argv.filter((a, i) => !a.startsWith('--') && (runsAt < 0 || i !== runsAt + 1));
  let failed = false;
  for (const id of ids.length > 0 ? ids : ['postgres']) {
    const backend = await startBackend(id);
    try {
      const r = await measureSettle(backend, runs);
      const verdict = r.medianNs <= TARGET_MS * 1e6 ? 'within' : 'OVER';
      console.log(
        `${r.backend} (${r.serverVersion}): settle after a ${ROWS}-row INSERT over ${r.runs} runs: median ${ms(r.medianNs)} ms, ` +
          `p90 ${ms(r.p90Ns)} ms, min ${ms(r.minNs)} ms, max ${ms(r.maxNs)} ms: ${verdict} the ${TARGET_MS} ms target`,
      );
      if (verdict === 'OVER') failed = true;
    } finally {
      await backend.stop();
    }
  }
  return failed ? 1 : 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : String(err));
      process.exitCode = 2;
    },
  );
}
