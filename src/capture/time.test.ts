import type Database from 'better-sqlite3';
import { CaptureSession } from './capture';

// SQLite: in-process, so the session's connections and time()'s are handles on one file, started in milliseconds.
describe('CaptureSession.time (counting off)', () => {
  let session: CaptureSession<'better-sqlite3'>;
  beforeAll(async () => {
    session = await CaptureSession.open({ backend: 'sqlite' });
    await session.prepare(async (db) => void db.exec('CREATE TABLE t (id INTEGER)'));
  });
  afterAll(() => session.close());

  it('runs fn on a new uncounted connection per run, warm-ups apart, and the next window counts none of it', async () => {
    const insert = (db: Database.Database) => void db.prepare('INSERT INTO t (id) VALUES (?)').run(100);
    const before = await session.measure(insert);
    const seen: Database.Database[] = [];
    const times = await session.time(
      (db) => {
        seen.push(db);
        db.prepare('INSERT INTO t (id) VALUES (?)').run(seen.length);
      },
      { repeats: 5, warmups: 2, before: async (db) => void db.exec('DELETE FROM t') },
    );
    expect(times.warmupNs).toHaveLength(2);
    expect(times.samplesNs).toHaveLength(5);
    for (const ns of [...times.warmupNs, ...times.samplesNs]) expect(Number.isInteger(ns) && ns > 0).toBe(true);
    expect(new Set(seen).size).toBe(7);
    // The same window as before time() ran: its seven inserts are in no count.
    const after = await session.measure(insert);
    expect(after.layers.driver?.calls).toBe(before.layers.driver?.calls);
    expect(after.layers.server?.summary.rowsInserted).toBe(1);
    expect(after.verdict.kind).toBe('assert');
  });

  it('hot: each timed run follows one untimed run of fn on the same connection', async () => {
    const runs: Database.Database[] = [];
    const times = await session.time((db) => void runs.push(db), { repeats: 2, connection: 'hot' });
    expect(times.samplesNs).toHaveLength(2);
    expect(runs).toHaveLength(4);
    expect(runs[0]).toBe(runs[1]);
    expect(runs[2]).toBe(runs[3]);
    expect(runs[1]).not.toBe(runs[2]);
  });

  it('refuses while a window is open, and bad repeat counts', async () => {
    const open = await session.begin();
    await expect(session.time(() => undefined)).rejects.toThrow(/cannot run while a window is open/);
    await open.end();
    await expect(session.time(() => undefined, { repeats: 1.5 })).rejects.toThrow(/repeats must be a whole number/);
  });

  it('a run that throws rejects time() with its error', async () => {
    await expect(
      session.time(() => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
  });
});
