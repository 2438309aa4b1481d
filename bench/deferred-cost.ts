/**
 * What following a measured function's asynchronous work costs (src/capture/deferred-work.ts): the same windows with the
 * tracking on and off (`deferredWork: false`), alternating, on SQLite (in process, so the figure is the tracking's
 * and not a server's). Per call: a window of N awaited calls, each an async function around a counted prepared
 * INSERT (each call makes a few promises, every one followed). Per window: an empty window. CPU time of this process.
 * `--control` runs untracked on both sides: the noise floor.
 *
 *   npm run build && npx tsx bench/deferred-cost.ts [--pairs 21] [--calls 5000] [--control]
 */
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { CaptureSession, startBackend } from './shipped';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '21' },
    calls: { type: 'string', default: '5000' },
    windows: { type: 'string', default: '200' },
    control: { type: 'boolean', default: false },
  },
});
const PAIRS = Number(values.pairs);
const CALLS = Number(values.calls);
const WINDOWS = Number(values.windows);
const CONTROL = values.control === true;

function cpuNs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const backend = await startBackend('sqlite');
  if (backend.connection.kind !== 'file') throw new Error('expected SQLite');
  const file = backend.connection.filename;
  const setup = new Database(file);
  setup.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER NOT NULL)');
  setup.close();
  const open = async (tracked: boolean) => {
    const session = await CaptureSession.open({ backend, deferredWork: tracked });
    const db = session.count(new Database(file));
    const insert = db.prepare('INSERT INTO t (a) VALUES (?)');
    const call = async (a: number) => insert.run(a);
    return { session, db, call };
  };
  const tracked = await open(!CONTROL);
  const untracked = await open(false);
  const perCall: number[] = [];
  const perWindow: number[] = [];
  const ratios: number[] = [];
  const untrackedCall: number[] = [];
  const verdicts = new Set<string>();
  try {
    for (let pair = 0; pair < PAIRS + 1; pair++) {
      const sides = pair % 2 === 0 ? [tracked, untracked] : [untracked, tracked];
      const calls: number[] = [];
      const windows: number[] = [];
      for (const side of sides) {
        let t0 = cpuNs();
        const tally = await side.session.measure(async () => {
          for (let i = 0; i < CALLS; i++) await side.call(i);
        });
        const callNs = (cpuNs() - t0) / CALLS;
        verdicts.add(tally.verdict.kind);
        t0 = cpuNs();
        for (let w = 0; w < WINDOWS; w++) await side.session.measure(async () => undefined);
        const windowNs = (cpuNs() - t0) / WINDOWS;
        calls[side === tracked ? 0 : 1] = callNs;
        windows[side === tracked ? 0 : 1] = windowNs;
      }
      // The first pair warms both sides up.
      if (pair === 0) continue;
      perCall.push(calls[0]! - calls[1]!);
      ratios.push(calls[0]! / calls[1]!);
      untrackedCall.push(calls[1]!);
      perWindow.push(windows[0]! - windows[1]!);
    }
  } finally {
    for (const side of [tracked, untracked]) {
      side.db.close();
      await side.session.close();
    }
    await backend.stop();
  }
  const tag = CONTROL ? 'control (untracked on both sides): ' : '';
  console.log(
    `${tag}tracking cost per awaited call (async function around a counted INSERT, ${CALLS} calls a window, CPU, median of ${PAIRS} pairs): ${Math.round(median(perCall))} ns`,
  );
  console.log(
    `${tag}tracking cost per window (an empty window, CPU, ${WINDOWS} windows a side, median of ${PAIRS} pairs): ${Math.round(median(perWindow) / 1000)} us`,
  );
  console.log(`${tag}tracked/untracked CPU per awaited call: ${median(ratios).toFixed(2)} (untracked: ${Math.round(median(untrackedCall))} ns a call)`);
  console.log(`verdicts: ${[...verdicts].join(', ')}`);
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
