// @waits 4: one window each on a private server, closed from inside.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { CaptureSession } from '../src/capture/capture';
import { describeEachBackend, START_TIMEOUT_MS, withBackend } from './harness';

jest.setTimeout(START_TIMEOUT_MS);

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);

    it('session.close() inside a measured function is refused: the window is incomplete with that error, no negative count, the session goes on', async () => {
      const session = await CaptureSession.open({ backend: backend() });
      try {
        const c = session.connection;
        if (c.kind !== 'network') throw new Error('expected a network backend');
        const query = async (sql: string): Promise<void> => {
          if (b.backend === 'postgres') {
            const client = session.count(new pg.Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database }));
            await client.connect();
            await client.query(sql);
            await client.end();
          } else {
            const conn = session.count(await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database }));
            await conn.query(sql);
            await conn.end();
          }
        };
        const closedInside = await session.measure(async () => {
          await query('SELECT 1');
          await session.close();
        });
        expect(closedInside.verdict.kind).toBe('incomplete');
        expect(closedInside.workloadError?.message).toContain('close() was called inside a measured function');
        for (const [field, value] of Object.entries(closedInside.layers.server?.summary ?? {})) {
          expect([field, value === null || value >= 0]).toEqual([field, true]);
        }
        const after = await session.measure(() => query('SELECT 1'));
        expect(after.workloadError).toBeNull();
        expect(after.layers.driver?.calls).toBe(1);
      } finally {
        await session.close();
      }
    });
  },
  (b) => b.backend !== 'sqlite',
);
