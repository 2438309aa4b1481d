/**
 * What each driver's fast path buys over its plain path (src/driver/compat): the same counted call, CPU per call.
 *
 *   npm run build && npx tsx bench/driver-paths.ts [--pairs 7] [--calls 4000] [--json]
 *
 * Per driver, three counted objects over the same driver object kind: one wrapped on the fast path, one wrapped with
 * SQLTALLY_DRIVER_PATH=plain, and a second fast one as the control. Each pair runs a round of calls on each, in an
 * order that rotates from pair to pair, into a DriverRecorder with a window open (what a capture session pays). The
 * figure is the median over pairs of plain/fast CPU; the control's fast/fast median beside it is the noise floor.
 * Network drivers run on the benches' stand-ins (bench/stand-ins.ts: calls settle at once, so counting is not hidden
 * by I/O); better-sqlite3 on in-memory SQLite. mariadb has no fast path, so nothing to compare.
 */
import Database from 'better-sqlite3';
import { parseArgs } from 'node:util';
import { DriverRecorder, wrapBetterSqlite3, wrapMysql2, wrapPg, wrapPostgresJs } from './shipped';
import { mysql2StandIn, pgStandIn, postgresJsStandIn, STAND_IN_INSERT } from './stand-ins';

const ENV = 'SQLTALLY_DRIVER_PATH';

interface Subject {
  /** Wraps a fresh driver object into the recorder; the path switch is read as it is wrapped. */
  make(recorder: InstanceType<typeof DriverRecorder>): Promise<{ call(i: number): unknown; close(): Promise<void> }>;
  /** What one call is. */
  call: string;
}

const SUBJECTS: Record<string, Subject> = {
  mysql2: {
    call: 'promise `execute` of a 2-value INSERT (stand-in connection)',
    make: async (recorder) => {
      const c = wrapMysql2(mysql2StandIn(), recorder);
      return { call: (i) => c.execute(STAND_IN_INSERT.mysql2, [i, 'a']), close: async () => undefined };
    },
  },
  pg: {
    call: 'promise `query` of a 2-value INSERT (stand-in Client)',
    make: async (recorder) => {
      const c = wrapPg(pgStandIn(), recorder);
      return { call: (i) => c.query(STAND_IN_INSERT.pg, [i, 'a']), close: async () => undefined };
    },
  },
  'postgres-js': {
    call: 'a tagged-template 2-value INSERT (postgres.js over a stand-in socket)',
    make: async (recorder) => {
      const raw = postgresJsStandIn();
      const sql = wrapPostgresJs(raw, recorder);
      await sql`SELECT 1`;
      return { call: (i) => sql`INSERT INTO t (a, b) VALUES (${i}, ${'a'})`, close: () => raw.end({ timeout: 0 }) };
    },
  },
  'better-sqlite3': {
    call: 'prepared 2-value INSERT `run` inside a transaction (in-memory SQLite)',
    make: async (recorder) => {
      const raw = new Database(':memory:');
      raw.exec('CREATE TABLE t (a INTEGER, b TEXT)');
      const db = wrapBetterSqlite3(raw, recorder);
      const insert = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
      raw.exec('BEGIN');
      return {
        call: (i) => insert.run(i, 'a'),
        close: async () => {
          raw.exec('COMMIT');
          raw.close();
        },
      };
    },
  },
};

function cpuNs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function wrapped(subject: Subject, recorder: InstanceType<typeof DriverRecorder>, plain: boolean) {
  if (plain) process.env[ENV] = 'plain';
  else delete process.env[ENV];
  try {
    return await subject.make(recorder);
  } finally {
    delete process.env[ENV];
  }
}

async function round(target: { call(i: number): unknown }, recorder: InstanceType<typeof DriverRecorder>, calls: number): Promise<number> {
  // No forced collection per round: after one, the next calls run slower on both sides while V8 warms up again.
  recorder.begin();
  const start = cpuNs();
  for (let i = 0; i < calls; i++) {
    const r = target.call(i);
    if (r !== null && typeof r === 'object' && typeof (r as PromiseLike<unknown>).then === 'function') await r;
  }
  const spent = cpuNs() - start;
  recorder.end();
  return spent / calls;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pairs: { type: 'string', default: '7' },
      calls: { type: 'string', default: '4000' },
      json: { type: 'boolean', default: false },
      drivers: { type: 'string' },
    },
  });
  const pairs = Number(values.pairs);
  const calls = Number(values.calls);
  if (!(pairs >= 5)) throw new Error('--pairs: at least 5');
  const chosen = values.drivers ? values.drivers.split(',') : Object.keys(SUBJECTS);
  const rows = [];
  for (const name of chosen) {
    const subject = SUBJECTS[name];
    if (!subject) throw new Error(`--drivers: no ${name}; known: ${Object.keys(SUBJECTS).join(', ')}`);
    const recorders = { fast: new DriverRecorder(), plain: new DriverRecorder(), control: new DriverRecorder() };
    const targets = {
      fast: await wrapped(subject, recorders.fast, false),
      plain: await wrapped(subject, recorders.plain, true),
      control: await wrapped(subject, recorders.control, false),
    };
    const sides = ['fast', 'plain', 'control'] as const;
    // Warm-up: every side runs one round before anything is timed.
    for (const side of sides) await round(targets[side], recorders[side], calls);
    const per: Record<(typeof sides)[number], number[]> = { fast: [], plain: [], control: [] };
    const ratios: number[] = [];
    const floors: number[] = [];
    for (let p = 0; p < pairs; p++) {
      const order = [...sides.slice(p % 3), ...sides.slice(0, p % 3)];
      const got: Partial<Record<(typeof sides)[number], number>> = {};
      for (const side of order) got[side] = await round(targets[side], recorders[side], calls);
      for (const side of sides) per[side].push(got[side]!);
      ratios.push(got.plain! / got.fast!);
      floors.push(got.control! / got.fast!);
    }
    for (const side of sides) await targets[side].close();
    rows.push({
      driver: name,
      call: subject.call,
      fastNs: Math.round(median(per.fast)),
      plainNs: Math.round(median(per.plain)),
      ratio: Number(median(ratios).toFixed(3)),
      noiseFloor: Number(median(floors).toFixed(3)),
      ratios: ratios.map((r) => Number(r.toFixed(3))),
      floors: floors.map((r) => Number(r.toFixed(3))),
    });
  }
  if (values.json) {
    console.log(JSON.stringify({ pairs, calls, node: process.version, rows }, null, 2));
    return;
  }
  console.log(`driver paths: CPU per counted call, median of ${pairs} rotating triples of ${calls} calls (node ${process.version})`);
  console.log('| driver | call | fast path ns/call | plain path ns/call | plain/fast (median) | fast/fast control (noise floor) |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.driver} | ${r.call} | ${r.fastNs} | ${r.plainNs} | ${r.ratio} | ${r.noiseFloor} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
