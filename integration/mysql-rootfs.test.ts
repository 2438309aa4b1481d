import fs from 'node:fs';
import mysql from 'mysql2/promise';
import { processAlive } from '../src/backends/live';
import { startBackend } from '../src/backends/registry';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import { integrationBackends, START_TIMEOUT_MS } from './harness';

// Smoke test of real MySQL: what makes it different from MariaDB (Innodb_rows_inserted, performance_schema on by
// default, the event_scheduler daemon thread) is read from the running server, and stopping it leaves nothing.

/** The server process serving `port`, found by its command line: the one sqltally spawned for this start. */
function serverProcess(port: number): { pid: number; datadir: string | undefined } | undefined {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!args.includes(`--port=${port}`) || !args.some((a) => /mysqld|mariadbd/.test(a))) continue;
    const datadir = args.find((a) => a.startsWith('--datadir='))?.slice('--datadir='.length);
    // A chrooted server names its datadir inside its root, which /proc shows as the process's root link.
    let root = '/';
    try {
      root = fs.readlinkSync(`/proc/${entry}/root`);
    } catch {
      // Gone meanwhile, or not ours to look at: the datadir is then taken as is.
    }
    return { pid: Number(entry), datadir: datadir && root !== '/' ? `${root}${datadir}` : datadir };
  }
  return undefined;
}

const mysqlBackends = integrationBackends().filter((b) => b.backend === 'mysql');

if (mysqlBackends.length === 0) {
  describe.skip('mysql: not selected by SQLTALLY_BACKENDS', () => {
    it('needs mysql', () => undefined);
  });
}

for (const b of mysqlBackends) {
  if (!b.available) {
    describe.skip(`${b.id}: skipped: ${b.reason}`, () => {
      it('needs this backend', () => undefined);
    });
    continue;
  }
  describe(`${b.id} smoke (${b.provider})`, () => {
    let started: StartedBackend | undefined;
    let conn: mysql.Connection | undefined;

    beforeAll(async () => {
      started = await startBackend(b.id);
      const c = started.connection as NetworkConnection;
      conn = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
    }, START_TIMEOUT_MS);

    afterAll(async () => {
      await conn?.end().catch(() => undefined);
      await started?.stop();
    }, START_TIMEOUT_MS);

    const db = (): mysql.Connection => {
      if (!conn) throw new Error('not connected');
      return conn;
    };

    it('is MySQL by its own words, not by the name it was started under', async () => {
      const [rows] = await db().query('SELECT VERSION() AS version, @@version_comment AS comment');
      const row = (rows as { version: string; comment: string }[])[0];
      expect(row?.version).toBe(started?.description.serverVersion);
      expect(`${row?.version} ${row?.comment}`).not.toMatch(/mariadb/i);
      expect(started?.description.flavour).toBe('mysql');
      expect(started?.description.capabilities.rowCounter).toBe('Innodb_rows_inserted');
    });

    it('counts inserted rows in Innodb_rows_inserted', async () => {
      await db().query('CREATE TABLE smoke (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB');
      const read = async (): Promise<number> => {
        const [rows] = await db().query("SHOW GLOBAL STATUS LIKE 'Innodb_rows_inserted'");
        const value = (rows as { Variable_name: string; Value: string }[])[0]?.Value;
        if (value === undefined) throw new Error('Innodb_rows_inserted is missing');
        return Number(value);
      };
      const before = await read();
      await db().query('INSERT INTO smoke VALUES (1, ?), (2, ?), (3, ?)', ['a', 'b', 'c']);
      expect((await read()) - before).toBe(3);
    });

    it('runs with performance_schema on and shows the event_scheduler daemon in the process list', async () => {
      const [ps] = await db().query('SELECT @@performance_schema AS on_');
      expect(Number((ps as { on_: number }[])[0]?.on_)).toBe(1);
      const [list] = await db().query('SHOW FULL PROCESSLIST');
      const daemons = (list as { User: string; Command: string }[]).filter((r) => r.User === 'event_scheduler');
      expect(daemons).toEqual([expect.objectContaining({ User: 'event_scheduler', Command: 'Daemon' })]);
    });

    if (b.provider === 'local') {
      it('stops by PID and leaves neither the process nor its data directory', async () => {
        const port = (started?.connection as NetworkConnection).port;
        const server = serverProcess(port);
        expect(server).toBeDefined();
        expect(server?.datadir && fs.existsSync(server.datadir)).toBe(true);
        await conn?.end();
        conn = undefined;
        await started?.stop();
        expect(processAlive(server?.pid ?? -1)).toBe(false);
        expect(fs.existsSync(server?.datadir ?? '/nonexistent-but-checked')).toBe(false);
      });
    }
  });
}
