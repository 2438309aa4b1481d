/**
 * What bench/deferred-cost.ts measures, in whatever context loads this file: plain Node (the bench process itself) or
 * a Jest test file (bench/deferred-jest.bench.ts, where this file, sqltally's build and better-sqlite3 load through
 * Jest's module registry into its vm context, as a user's test suite loads an installed sqltally).
 */
import Database from 'better-sqlite3';
import { CaptureSession, startBackend } from './shipped';

export interface DeferredCostFigures {
  context: 'node' | 'jest';
  control: boolean;
  pairs: number;
  /** Per pair: (tracked - untracked) CPU per awaited call, ns. */
  addedNsPerCall: number[];
  /** Per pair: tracked / untracked CPU per awaited call. */
  ratios: number[];
  /** Per pair: untracked CPU per awaited call, ns. */
  untrackedNsPerCall: number[];
  /** Per pair: (tracked - untracked) CPU per empty window, ns. */
  addedNsPerWindow: number[];
  verdicts: string[];
}

function cpuNs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

/** One side of the loop: a session, its counted connection and the awaited call. */
export interface LoopSide {
  session: Awaited<ReturnType<typeof CaptureSession.open>>;
  db: Database.Database;
  call: (a: number) => Promise<unknown>;
}

/**
 * A private SQLite backend with the bench's table, and sessions on it with the tracking on or off, each with a counted
 * connection and the call the loops await: an async function around a counted prepared INSERT.
 */
export async function sqliteLoop(): Promise<{ backend: Awaited<ReturnType<typeof startBackend>>; open: (tracked: boolean) => Promise<LoopSide> }> {
  const backend = await startBackend('sqlite');
  if (backend.connection.kind !== 'file') throw new Error('expected SQLite');
  const file = backend.connection.filename;
  const setup = new Database(file);
  setup.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER NOT NULL)');
  setup.close();
  const open = async (tracked: boolean): Promise<LoopSide> => {
    const session = await CaptureSession.open({ backend, deferredWork: tracked });
    const db = session.count(new Database(file));
    const insert = db.prepare('INSERT INTO t (a) VALUES (?)');
    const call = async (a: number) => insert.run(a);
    return { session, db, call };
  };
  return { backend, open };
}

/**
 * The same windows with the tracking on and off (`deferredWork: false`), alternating, on SQLite: per call a window of
 * `calls` awaited async functions around a counted prepared INSERT; per window an empty one. `control`: off on both.
 */
export async function measureDeferredCost(
  context: DeferredCostFigures['context'],
  opts: { pairs: number; calls: number; windows: number; control: boolean },
): Promise<DeferredCostFigures> {
  const { backend, open } = await sqliteLoop();
  const tracked = await open(!opts.control);
  const untracked = await open(false);
  const out: DeferredCostFigures = {
    context,
    control: opts.control,
    pairs: opts.pairs,
    addedNsPerCall: [],
    ratios: [],
    untrackedNsPerCall: [],
    addedNsPerWindow: [],
    verdicts: [],
  };
  const verdicts = new Set<string>();
  try {
    for (let pair = 0; pair < opts.pairs + 1; pair++) {
      const sides = pair % 2 === 0 ? [tracked, untracked] : [untracked, tracked];
      const calls: number[] = [];
      const windows: number[] = [];
      for (const side of sides) {
        let t0 = cpuNs();
        const tally = await side.session.measure(async () => {
          for (let i = 0; i < opts.calls; i++) await side.call(i);
        });
        const callNs = (cpuNs() - t0) / opts.calls;
        verdicts.add(tally.verdict.kind);
        t0 = cpuNs();
        for (let w = 0; w < opts.windows; w++) await side.session.measure(async () => undefined);
        const windowNs = (cpuNs() - t0) / opts.windows;
        calls[side === tracked ? 0 : 1] = callNs;
        windows[side === tracked ? 0 : 1] = windowNs;
      }
      // The first pair warms both sides up.
      if (pair === 0) continue;
      out.addedNsPerCall.push(calls[0]! - calls[1]!);
      out.ratios.push(calls[0]! / calls[1]!);
      out.untrackedNsPerCall.push(calls[1]!);
      out.addedNsPerWindow.push(windows[0]! - windows[1]!);
    }
  } finally {
    for (const side of [tracked, untracked]) {
      side.db.close();
      await side.session.close();
    }
    await backend.stop();
  }
  out.verdicts = [...verdicts];
  return out;
}
