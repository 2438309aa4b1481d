// @waits 10: private servers, several windows each.
import { CaptureSession } from '../capture/capture';
import { describeEachBackend, withBackend } from './harness';

describeEachBackend((b) => {
  const backend = withBackend(b.id);
  it('smoke', async () => {
    const isPg = b.backend === 'postgres';
    if (b.backend === 'sqlite') return;
    await using session = await CaptureSession.open({ backend: backend(), driver: isPg ? 'pg' : 'mysql2' });
    const q = (db: any, sql: string, v: unknown[] = []) => db.query(sql, v);
    const setupTally = await session.measure(async (db: any) => {
      await q(db, 'DROP TABLE IF EXISTS t');
      await q(db, 'DROP TABLE IF EXISTS u');
      await q(db, isPg ? 'CREATE TABLE t (id int PRIMARY KEY, a int, b int)' : 'CREATE TABLE t (id int PRIMARY KEY, a int, b int) ENGINE=InnoDB');
      await q(db, 'CREATE INDEX t_a ON t (a)');
      await q(db, 'CREATE TABLE u (c int)');
      for (let i = 0; i < 20; i++) {
        const rows = Array.from({ length: 1000 }, (_, j) => i * 1000 + j + 1);
        await q(db, `INSERT INTO t (id, a, b) VALUES ${rows.map((n) => `(${n}, ${n}, ${n})`).join(', ')}`);
      }
      await q(db, `INSERT INTO u (c) VALUES ${Array.from({ length: 10 }, (_, i) => `(${i + 1})`).join(', ')}`);
    });
    console.log('setup', JSON.stringify(setupTally.layers.server?.summary), JSON.stringify(setupTally.layers.server?.work?.tables), setupTally.layers.server?.settleNs);
    const p = isPg ? '$1' : '?';
    const tally = await session.measure(async (db: any) => {
      await q(db, `SELECT b FROM t WHERE a = ${p}`, [5]);
      await q(db, `SELECT a FROM t WHERE b = ${p}`, [5]);
      await q(db, 'SELECT t.id FROM t JOIN u ON u.c = t.b');
    });
    if (isPg) await session.measure(async (db: any) => { console.log(JSON.stringify((await q(db, "SELECT relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins FROM pg_stat_user_tables")).rows)); });
    console.log(b.id, tally.verdict.kind, tally.verdict.reason.slice(0, 300), JSON.stringify(tally.layers.server?.work, null, 1));
  });
});
