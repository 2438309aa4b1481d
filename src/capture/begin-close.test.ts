import Database from 'better-sqlite3';
import { CaptureSession } from './capture';
import { DeferredWorkTracker } from './deferred-work';

describe('a begin() window that is never ended', () => {
  it('close() turns off the hook that follows its work, and does not wait for that work', async () => {
    const trackers = new Set<DeferredWorkTracker>();
    const open = DeferredWorkTracker.prototype.open;
    const spy = jest.spyOn(DeferredWorkTracker.prototype, 'open').mockImplementation(function (this: DeferredWorkTracker, ambient?: boolean) {
      trackers.add(this);
      return open.call(this, ambient);
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const session = await CaptureSession.open({ backend: 'sqlite' });
      await session.begin();
      timer = setTimeout(() => undefined, 3_600_000);
      expect([...trackers].map((t) => t.following)).toEqual([true]);
      await session.close();
      expect([...trackers].map((t) => t.following)).toEqual([false]);
    } finally {
      clearTimeout(timer);
      spy.mockRestore();
    }
  });
});

describe('a begin() window given up', () => {
  it('is incomplete, and its late-commit summary says the window gave up, with the rows of the named table', async () => {
    const session = await CaptureSession.open({ backend: 'sqlite', table: { name: 'given_up' } });
    const c = session.connection;
    if (c.kind !== 'file') throw new Error('SQLite is a file');
    const db = session.count(new Database(c.filename));
    try {
      db.exec('CREATE TABLE given_up (id INTEGER PRIMARY KEY)');
      const window = await session.begin();
      db.prepare('INSERT INTO given_up (id) VALUES (1)').run();
      const tally = await window.giveUp('the command was stopped');
      expect(tally.verdict.kind).toBe('incomplete');
      expect(tally.lateCommits?.rowsAtGiveUp).toBe(1);
      expect(tally.lateCommits?.summary).toMatch(/0 row\(s\) committed to given_up after the window gave up/);
    } finally {
      db.close();
      await session.close();
    }
  });
});
