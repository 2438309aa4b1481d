/**
 * 2000 single-row INSERTs in a transaction (twice: the first warms up) through sqltally's proxy, reached over
 * loopback (`tcp`) or through `openStream()` (`stream`); prints the time per statement and the proxy's client writes
 * per statement. For system calls per statement run it under strace, one file per thread, and divide by 4000:
 *
 *   strace -ff -qq -o /tmp/st/t -e trace=read,write,writev,sendto,recvfrom,epoll_pwait,epoll_wait,futex,mprotect \
 *     npx tsx bench/wire-stream-probe.ts postgres|mysql stream|tcp
 */
import { Client } from 'pg';
import mysql from 'mysql2/promise';
import { startBackend } from '../src/backends/registry';
import type { NetworkConnection } from '../src/backends/types';
import { startWireProxy } from '../src/wire/proxy';
const N = 2000;

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'postgres';
  const b = await startBackend(which === 'postgres' ? 'postgres' : 'mariadb');
  const s = b.connection as NetworkConnection;
  const proxy = await startWireProxy({ protocol: which === 'postgres' ? 'postgres' : 'mysql', target: { host: s.host, port: s.port } });
  try {
    const mode = process.argv[3] ?? 'stream';
    const at = mode === 'stream' ? { stream: () => proxy.openStream() } : {};
    let run: () => Promise<void>;
    let end: () => Promise<void>;
    if (which === 'postgres') {
      const c = new Client({ host: '127.0.0.1', port: proxy.port, user: s.user, password: s.password, database: s.database, ...at });
      await c.connect();
      await c.query('CREATE TABLE IF NOT EXISTS probe (id int, label text)');
      run = async () => {
        await c.query('BEGIN');
        for (let i = 0; i < N; i++) await c.query('INSERT INTO probe (id, label) VALUES ($1, $2)', [i, 'x']);
        await c.query('COMMIT');
      };
      end = () => c.end();
    } else {
      const c = await mysql.createConnection({ host: '127.0.0.1', port: proxy.port, user: s.user, password: s.password, database: s.database, ...at });
      await c.query('CREATE TABLE IF NOT EXISTS probe (id int, label text)');
      run = async () => {
        await c.query('BEGIN');
        for (let i = 0; i < N; i++) await c.query('INSERT INTO probe (id, label) VALUES (?, ?)', [i, 'x']);
        await c.query('COMMIT');
      };
      end = () => c.end();
    }
    await run();
    const a = proxy.snapshot();
    const st = process.hrtime.bigint();
    await run();
    const ms = Number(process.hrtime.bigint() - st) / 1e6;
    const d = proxy.diff(a, proxy.snapshot());
    console.log(
      `${which} ${mode}: ${ms.toFixed(1)} ms, ${((ms * 1000) / N).toFixed(1)} us/stmt, clientWrites/stmt ${(d.clientWrites / N).toFixed(2)}, roundTrips ${d.roundTrips}`,
    );
    await end();
  } finally {
    await proxy.close();
    await b.stop();
  }
}
void main();
