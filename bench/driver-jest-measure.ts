/**
 * What bench/driver-jest.ts measures, in whatever context loads this file: plain Node (the bench process itself) or
 * a Jest test file (bench/driver-jest.bench.ts, where this file, sqltally's build and better-sqlite3 are all loaded
 * through Jest's module registry into its vm context, as a user's test suite loads an installed sqltally).
 */
import type { DriverRecorder as Recorder } from '../src/driver/driver-layer';
import { countExpandedValues, DriverRecorder, makeRows, wrapBetterSqlite3, wrapMysql2, wrapPg } from './shipped';
import { mysql2StandIn, pgStandIn, STAND_IN_INSERT, type PgStandIn } from './stand-ins';

export interface PairFigures {
  pairs: number;
  /** Median over pairs of counted / raw CPU time (raw / raw with `control`). */
  cpuRatio: number;
  /** Median over pairs of (counted - raw) CPU per driver call, ns. */
  addedNsPerCall: number;
  rawNsPerCall: number;
}

export interface ContextFigures {
  context: 'node' | 'jest';
  control: boolean;
  rows: number;
  /** better-sqlite3.per-row-tx: prepare, one `db.transaction()` of `run(...row)` per row, in a window each. */
  perRowTx: PairFigures;
  /** A prepared `SELECT 1`, `get()` 20000 times in a window. */
  select: PairFigures;
  /** An awaited 2-value INSERT of one text on a pg / mysql2 stand-in that settles at once, 5000 in a window. */
  network: { pg: PairFigures; mysql2: PairFigures };
  /**
   * Counting one mysql2 `VALUES ?` call's nested values (`rows` x 6), median CPU in ms: what the text-protocol wrappers
   * do per call. `cold` after 3 calls, as a bulk load makes few such calls; `warm` after 200 more. Here: 0.67 / 0.62 ms
   * in plain Node, 1.01 / 0.64 ms under Jest, where a process that loads only this function and the rows measures
   * 0.11-0.19 ms warm (so what ran before in this process, not the count, makes most of it; not yet found what).
   */
  expandedValuesMs: { cold: number; warm: number };
  /** One `Math.imul` reached through the global `Math`, and through a binding of this module, ns: the root cause. */
  globalLookupNs: number;
  bindingNs: number;
}

type Database = import('better-sqlite3').Database;
type Statement = import('better-sqlite3').Statement;

const SELECT_CALLS = 20_000;

function cpuNow(): number {
  const c = process.cpuUsage();
  return (c.user + c.system) * 1000;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Alternating pairs (raw first in even rounds), after warm-up rounds of both; a side may await (the network calls). */
async function pairs(n: number, calls: number, raw: () => number | Promise<number>, counted: () => number | Promise<number>): Promise<PairFigures> {
  for (let i = 0; i < 5; i++) {
    await raw();
    await counted();
  }
  const ratios: number[] = [];
  const added: number[] = [];
  const raws: number[] = [];
  for (let i = 0; i < n; i++) {
    let r: number;
    let c: number;
    if (i % 2 === 0) {
      r = await raw();
      c = await counted();
    } else {
      c = await counted();
      r = await raw();
    }
    ratios.push(c / r);
    added.push((c - r) / calls);
    raws.push(r / calls);
  }
  return { pairs: n, cpuRatio: median(ratios), addedNsPerCall: median(added), rawNsPerCall: median(raws) };
}

const NETWORK_CALLS = 5_000;

/** The network drivers' per-call path on stand-ins, the same in plain Node and under Jest. */
async function networkCost(recorder: Recorder, opts: { pairs: number; control: boolean }): Promise<{ pg: PairFigures; mysql2: PairFigures }> {
  const measure = async (driver: 'pg' | 'mysql2'): Promise<PairFigures> => {
    const raw: PgStandIn = driver === 'pg' ? pgStandIn() : mysql2StandIn();
    const counted = (opts.control ? raw : driver === 'pg' ? wrapPg(raw, recorder) : wrapMysql2(raw, recorder)) as PgStandIn;
    const sql = STAND_IN_INSERT[driver];
    const loop = (client: PgStandIn, windowed: boolean) => async (): Promise<number> => {
      if (windowed && !opts.control) recorder.begin();
      const cpu0 = cpuNow();
      for (let i = 0; i < NETWORK_CALLS; i++) await client.query(sql, [i, 'x']);
      const ns = cpuNow() - cpu0;
      if (windowed && !opts.control) recorder.end();
      return ns;
    };
    return pairs(opts.pairs, NETWORK_CALLS, loop(raw, false), loop(counted, true));
  };
  return { pg: await measure('pg'), mysql2: await measure('mysql2') };
}

export async function measureContext(context: ContextFigures['context'], opts: { rows: number; pairs: number; control: boolean }): Promise<ContextFigures> {
  const { default: Sqlite } = await import('better-sqlite3');
  const rows = makeRows(opts.rows);
  const recorder: Recorder = new DriverRecorder();
  const open = (counted: boolean): Database => {
    const raw = new Sqlite(':memory:');
    raw.defaultSafeIntegers(true);
    raw.exec('CREATE TABLE t (c1 INTEGER, c2 INTEGER, c3 TEXT, c4 REAL, c5 INTEGER, c6 TEXT)');
    return counted && !opts.control ? wrapBetterSqlite3(raw, recorder) : raw;
  };
  const rawDb = open(false);
  const countedDb = open(true);
  const windowed = <T>(counted: boolean, fn: () => T): T => {
    if (counted && !opts.control) recorder.begin();
    try {
      return fn();
    } finally {
      if (counted && !opts.control) recorder.end();
    }
  };
  // The per-row-tx strategy's shape: prepare, then one transaction of one run() per row.
  const perRow = (db: Database, counted: boolean) => (): number => {
    db.exec('DELETE FROM t');
    const cpu0 = cpuNow();
    windowed(counted, () => {
      const insert = db.prepare('INSERT INTO t (c1, c2, c3, c4, c5, c6) VALUES (?, ?, ?, ?, ?, ?)');
      db.transaction((all: typeof rows) => {
        for (const row of all) insert.run(...row);
      })(rows);
    });
    return cpuNow() - cpu0;
  };
  const perRowTx = await pairs(opts.pairs, rows.length + 3, perRow(rawDb, false), perRow(countedDb, true));
  const selectOf = (db: Database): Statement => db.prepare('SELECT 1');
  const rawSelect = selectOf(rawDb);
  const select = (counted: boolean) => (): number => {
    const cpu0 = cpuNow();
    windowed(counted, () => {
      const statement = counted ? selectOf(countedDb) : rawSelect;
      for (let i = 0; i < SELECT_CALLS; i++) statement.get();
    });
    return cpuNow() - cpu0;
  };
  const selectFigures = await pairs(opts.pairs, SELECT_CALLS, select(false), select(true));
  rawDb.close();
  countedDb.close();
  const network = await networkCost(recorder, opts);
  const { globalLookupNs, bindingNs } = lookupCost();
  return {
    context,
    control: opts.control,
    rows: opts.rows,
    perRowTx,
    select: selectFigures,
    network,
    expandedValuesMs: expandedValuesCost(rows),
    globalLookupNs,
    bindingNs,
  };
}

function expandedValuesCost(rows: readonly (readonly unknown[])[]): { cold: number; warm: number } {
  const args = [rows];
  const sample = (): number => {
    const times: number[] = [];
    for (let i = 0; i < 9; i++) {
      const t0 = cpuNow();
      countExpandedValues(args);
      times.push((cpuNow() - t0) / 1e6);
    }
    return median(times);
  };
  for (let i = 0; i < 3; i++) countExpandedValues(args);
  const cold = sample();
  for (let i = 0; i < 200; i++) countExpandedValues(args);
  return { cold, warm: sample() };
}

const imul = Math.imul;
const LOOKUPS = 200_000;

function lookupCost(): { globalLookupNs: number; bindingNs: number } {
  let sink = 0;
  const viaGlobal = (): number => {
    const t0 = cpuNow();
    for (let i = 0; i < LOOKUPS; i++) sink ^= Math.imul(i, 0x9e3779b1);
    return (cpuNow() - t0) / LOOKUPS;
  };
  const viaBinding = (): number => {
    const t0 = cpuNow();
    for (let i = 0; i < LOOKUPS; i++) sink ^= imul(i, 0x9e3779b1);
    return (cpuNow() - t0) / LOOKUPS;
  };
  const g: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < 7; i++) {
    g.push(viaGlobal());
    b.push(viaBinding());
  }
  if (sink === 0.5) throw new Error('unreachable: keeps the loops from being dropped');
  return { globalLookupNs: median(g), bindingNs: median(b) };
}
