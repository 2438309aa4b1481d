import type { DriverHandle } from '../driver/open';
import { ownConnectionSettle } from './own-settle';

/** Just enough of a mysql2 connection for the driver's ping: counts pings, answers them as told. */
function fakeMysql2(answer: () => Promise<void>) {
  const handle = { pings: 0, ping: () => ((handle.pings += 1), answer()) };
  return handle;
}
const as = (h: unknown) => h as DriverHandle<'mysql2'>;

describe('ownConnectionSettle (no wire proxy)', () => {
  it('pings the session connection before each reading on MySQL/MariaDB', async () => {
    const h = fakeMysql2(async () => undefined);
    const settle = ownConnectionSettle('mysql', 'mysql2', () => ({ handle: as(h), connectionId: 12 }));
    expect(settle).not.toBeNull();
    expect(await settle!()).toEqual([]);
    expect(await settle!()).toEqual([]);
    expect(h.pings).toBe(2);
  });

  it('has nothing to settle before the session has a connection', async () => {
    const settle = ownConnectionSettle('mysql', 'mysql2', () => null);
    expect(await settle!()).toEqual([]);
  });

  it('names the connection when its ping fails or is not answered in time, never a silent settle', async () => {
    const failing = ownConnectionSettle('mysql', 'mysql2', () => ({
      handle: as(fakeMysql2(() => Promise.reject(new Error('Connection lost')))),
      connectionId: 12,
    }));
    expect(await failing!()).toEqual(['connection #12 (its ping failed: Connection lost)']);
    const hanging = ownConnectionSettle('mysql', 'mysql2', () => ({ handle: as(fakeMysql2(() => new Promise<void>(() => undefined))), connectionId: 13 }), 20);
    expect(await hanging!()).toEqual(['connection #13 (its ping was not answered in 20 ms)']);
  });

  it('gives no hook on PostgreSQL (the probe flushes the session connection itself) nor on SQLite', () => {
    expect(ownConnectionSettle('postgres', 'pg', () => null)).toBeNull();
    expect(ownConnectionSettle(null, 'better-sqlite3', () => null)).toBeNull();
  });
});
