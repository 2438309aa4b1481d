import * as mariadb from 'mariadb';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import type { BackendName, NetworkConnection, StartedBackend } from '../src/backends/types';
import { startWireProxy } from '../src/wire/proxy';
import type { WireProxy } from '../src/wire/proxy';
import type { WireCounts } from '../src/wire/types';
import { describeEachBackend, withBackend } from './harness';

/**
 * The wire proxy between raw drivers and private servers: per insert-many strategy the wire's commands and round trips
 * are exact and agree with the server's counters for the window (MySQL session counters, pg_stat_statements calls).
 */

const MULTI_ROW = 500;
const PER_ROW = 50;
const BATCH_ROWS = 1000;
const CONCURRENT = 20;
const BIG_QUERY_BYTES = 22 * 1024 * 1024;

let tableSeq = 0;
function tableName(): string {
  tableSeq += 1;
  return `h3_wire_${process.pid}_${tableSeq}`;
}

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

function rows(n: number): [number, string][] {
  return Array.from({ length: n }, (_, i) => [i, `row-${i}`]);
}

/**
 * Waits until the proxy has seen every connection close, so a goodbye (COM_QUIT, Terminate) the driver wrote without
 * waiting for an answer cannot fall into the next test's window.
 */
async function allClosed(proxy: WireProxy | undefined): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (proxy && proxy.connections().some((c) => c.closedAtNs === null)) {
    if (Date.now() > deadline) throw new Error('proxied connections still open 10 s after the test ended them');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** What the wire shows in one window, with nothing else in it. */
function expectCleanWindow(w: WireCounts): void {
  expect(w.incompleteReasons).toEqual([]);
  expect(w.incomplete).toBe(false);
  expect(w.unansweredRequests).toBe(0);
  expect(w.connections).toBe(1);
}

// ---------------------------------------------------------------------------------------------------------------
// MySQL and MariaDB
// ---------------------------------------------------------------------------------------------------------------

/** A batch through the mariadb connector is one bulk command where the server advertises it (MariaDB), else N executes. */
const MARIADB_BATCH_COMMANDS = {
  mariadb: { COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 },
  mysql: { COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: BATCH_ROWS },
} satisfies Partial<Record<BackendName, Record<string, number>>>;

const STATUS_NAMES = ['Com_stmt_execute', 'Com_stmt_prepare', 'Questions'] as const;
type SessionStatus = Record<(typeof STATUS_NAMES)[number], number>;

interface Queryable {
  query(sql: string): Promise<unknown>;
}

async function sessionStatus(conn: Queryable, driver: 'mysql2' | 'mariadb'): Promise<SessionStatus> {
  const result = await conn.query(`SHOW SESSION STATUS WHERE Variable_name IN (${STATUS_NAMES.map((n) => `'${n}'`).join(', ')})`);
  const list = (driver === 'mysql2' ? (result as [unknown[]])[0] : result) as { Variable_name: string; Value: string }[];
  const out = Object.fromEntries(list.map((r) => [r.Variable_name, Number(r.Value)]));
  return out as SessionStatus;
}

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    const family = b.backend as 'mariadb' | 'mysql';
    let proxy: WireProxy;
    const opened: { end(): Promise<void> }[] = [];

    beforeAll(async () => {
      const c = network(get());
      proxy = await startWireProxy({ protocol: 'mysql', target: { host: c.host, port: c.port } });
      const admin = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
      // The 22 MB query needs room; new connections read the global value.
      await admin.query('SET GLOBAL max_allowed_packet = 67108864');
      await admin.end();
    });
    // Each test's connections end before the next test (and long before the server stops).
    afterEach(async () => {
      for (const conn of opened.splice(0)) await conn.end().catch(() => undefined);
      await allClosed(proxy);
    });
    afterAll(async () => {
      await proxy?.close();
    });

    const viaProxy = {
      mysql2: async () => {
        const c = network(get());
        const conn = await mysql.createConnection({ host: proxy.host, port: proxy.port, user: c.user, password: c.password, database: c.database });
        conn.on('error', () => undefined);
        opened.push(conn);
        return conn;
      },
      mariadb: async () => {
        const c = network(get());
        const conn = await mariadb.createConnection({ host: proxy.host, port: proxy.port, user: c.user, password: c.password, database: c.database });
        opened.push(conn);
        return conn;
      },
    };

    async function createTable(conn: Queryable): Promise<string> {
      const table = tableName();
      await conn.query(`CREATE TABLE ${table} (id INT NOT NULL, label VARCHAR(40) NOT NULL)`);
      return table;
    }

    /** Server session counters read on the same connection around the wire window (their own reads stay outside). */
    async function window(conn: Queryable, driver: 'mysql2' | 'mariadb', work: () => Promise<unknown>) {
      const s0 = await sessionStatus(conn, driver);
      const before = proxy.snapshot();
      await work();
      const after = proxy.snapshot();
      const s1 = await sessionStatus(conn, driver);
      const wire = proxy.diff(before, after);
      // The second SHOW STATUS counts itself in Questions.
      const server = {
        executes: s1.Com_stmt_execute - s0.Com_stmt_execute,
        prepares: s1.Com_stmt_prepare - s0.Com_stmt_prepare,
        questions: s1.Questions - s0.Questions - 1,
      };
      return { wire, server };
    }

    /** The agreement every MySQL-family window must show, whatever the strategy. */
    function expectAgreement(wire: WireCounts, server: { executes: number; prepares: number; questions: number }): void {
      const c = wire.commands;
      expect(server.executes).toBe((c.COM_STMT_EXECUTE ?? 0) + (c.COM_STMT_BULK_EXECUTE ?? 0));
      expect(server.prepares).toBe(c.COM_STMT_PREPARE ?? 0);
      // COM_STMT_PREPARE (and CLOSE/RESET/PING) are not in Questions.
      expect(server.questions).toBe((c.COM_QUERY ?? 0) + (c.COM_STMT_EXECUTE ?? 0) + (c.COM_STMT_BULK_EXECUTE ?? 0));
    }

    it("learns the server connection id and keeps a new connection's handshake out of the commands", async () => {
      const before = proxy.snapshot();
      const conn = await viaProxy.mysql2();
      await conn.query('SELECT 1');
      const wire = proxy.diff(before, proxy.snapshot());
      expect(wire.commands).toEqual({ COM_QUERY: 1 });
      expect(wire.roundTrips).toBe(1);
      expect(wire.setup?.connectionsOpened).toBe(1);
      expect(wire.setup?.clientMessages).toBeGreaterThanOrEqual(1);
      const record = proxy.connections().find((r) => r.serverConnectionId === conn.threadId);
      expect(record).toBeDefined();
      expect(record?.closedAtNs).toBeNull();
    });

    it('mysql2 query with a multi-row VALUES list: one COM_QUERY, one round trip', async () => {
      const conn = await viaProxy.mysql2();
      const table = await createTable(conn);
      const { wire, server } = await window(conn, 'mysql2', () => conn.query(`INSERT INTO ${table} (id, label) VALUES ?`, [rows(MULTI_ROW)]));
      expectCleanWindow(wire);
      expect(wire.commands).toEqual({ COM_QUERY: 1 });
      expect(wire.roundTrips).toBe(1);
      expect(wire.clientWrites).toBe(1);
      expect(wire.rowsAffected).toBe(MULTI_ROW);
      expectAgreement(wire, server);
    });

    it('mysql2 execute per row: one prepare, N executes, one round trip and one write each', async () => {
      const conn = await viaProxy.mysql2();
      const table = await createTable(conn);
      const { wire, server } = await window(conn, 'mysql2', async () => {
        for (const [id, label] of rows(PER_ROW)) await conn.execute(`INSERT INTO ${table} (id, label) VALUES (?, ?)`, [id, label]);
      });
      expectCleanWindow(wire);
      expect(wire.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: PER_ROW });
      expect(wire.roundTrips).toBe(PER_ROW + 1);
      expect(wire.clientWrites).toBe(PER_ROW + 1);
      expect(wire.rowsAffected).toBe(PER_ROW);
      expectAgreement(wire, server);
      expect(server).toEqual({ executes: PER_ROW, prepares: 1, questions: PER_ROW });
    });

    it('mysql2 Promise.all of queries on one connection: queued, never pipelined', async () => {
      const conn = await viaProxy.mysql2();
      const table = await createTable(conn);
      const { wire, server } = await window(conn, 'mysql2', () =>
        Promise.all(rows(CONCURRENT).map(([id, label]) => conn.query(`INSERT INTO ${table} (id, label) VALUES (?, ?)`, [id, label]))),
      );
      expectCleanWindow(wire);
      expect(wire.commands).toEqual({ COM_QUERY: CONCURRENT });
      expect(wire.roundTrips).toBe(CONCURRENT);
      expect(wire.clientWrites).toBe(CONCURRENT);
      expectAgreement(wire, server);
    });

    it('mariadb batch (bulk on): the commands this server makes of it', async () => {
      const conn = await viaProxy.mariadb();
      const table = await createTable(conn);
      const { wire, server } = await window(conn, 'mariadb', () => conn.batch(`INSERT INTO ${table} (id, label) VALUES (?, ?)`, rows(BATCH_ROWS)));
      expectCleanWindow(wire);
      expect(wire.commands).toEqual(MARIADB_BATCH_COMMANDS[family]);
      expect(wire.roundTrips).toBe(wire.commandsTotal);
      // MariaDB 11.5+ answers a bulk with per-row unit results (a result set) instead of one OK: rows not summed then.
      if (wire.serverMessages?.ResultSet) expect(wire.rowsAffected).toBeUndefined();
      else expect(wire.rowsAffected).toBe(BATCH_ROWS);
      expectAgreement(wire, server);
    });

    it('mariadb batch with bulk off: one prepare and N pipelined executes in fewer writes than commands', async () => {
      const conn = await viaProxy.mariadb();
      const table = await createTable(conn);
      const { wire, server } = await window(conn, 'mariadb', () =>
        conn.batch({ sql: `INSERT INTO ${table} (id, label) VALUES (?, ?)`, bulk: false } as unknown as string, rows(BATCH_ROWS)),
      );
      expectCleanWindow(wire);
      expect(wire.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: BATCH_ROWS });
      expect(wire.roundTrips).toBe(BATCH_ROWS + 1);
      expect(wire.clientWrites).toBeLessThan(wire.commandsTotal);
      expect(wire.rowsAffected).toBe(BATCH_ROWS);
      expectAgreement(wire, server);
      expect(server.executes).toBe(BATCH_ROWS);
    });

    it('mariadb Promise.all of executes on one connection: pipelined, each answered', async () => {
      const conn = await viaProxy.mariadb();
      const table = await createTable(conn);
      const { wire, server } = await window(conn, 'mariadb', () =>
        Promise.all(rows(CONCURRENT).map(([id, label]) => conn.execute(`INSERT INTO ${table} (id, label) VALUES (?, ?)`, [id, label]))),
      );
      expectCleanWindow(wire);
      expect(wire.commands.COM_STMT_EXECUTE).toBe(CONCURRENT);
      // The connector prepares the same SQL once per concurrent execute and closes the duplicates (no answer to those).
      expect(wire.commands.COM_STMT_PREPARE).toBe(server.prepares);
      expect(wire.roundTrips).toBe(wire.commandsTotal - (wire.commands.COM_STMT_CLOSE ?? 0));
      expect(wire.clientWrites).toBeLessThan(wire.commandsTotal);
      expectAgreement(wire, server);
    });

    it('a 22 MB query is one COM_QUERY (carried in two packets) and one round trip', async () => {
      const conn = await viaProxy.mysql2();
      const table = await createTable(conn);
      const label = 'x'.repeat(BIG_QUERY_BYTES);
      await conn.query(`ALTER TABLE ${table} MODIFY label LONGTEXT NOT NULL`);
      const { wire, server } = await window(conn, 'mysql2', () => conn.query(`INSERT INTO ${table} (id, label) VALUES (1, '${label}')`));
      expectCleanWindow(wire);
      expect(wire.commands).toEqual({ COM_QUERY: 1 });
      expect(wire.roundTrips).toBe(1);
      expect(wire.bytesClientToServer).toBeGreaterThan(BIG_QUERY_BYTES);
      expect(wire.bytesClientToServer).toBeLessThan(BIG_QUERY_BYTES + 200);
      expectAgreement(wire, server);
    }, 120_000);

    it('TLS: refuse keeps the client in plain text; passthrough lets TLS through and marks the connection incomplete', async () => {
      const c = network(get());
      const params = { user: c.user, password: c.password, database: c.database, ssl: { rejectUnauthorized: false } };
      // Refused: the greeting the client sees has no CLIENT_SSL, so a client that insists on TLS gives up.
      const before = proxy.snapshot();
      await expect(mysql.createConnection({ ...params, host: proxy.host, port: proxy.port })).rejects.toThrow(/secure connection|SSL/i);
      const refused = proxy.diff(before, proxy.snapshot());
      expect(refused.commandsTotal).toBe(0);
      expect(refused.incomplete).toBe(false);

      // sqltally starts its servers without TLS; MySQL can switch it on at run time (tls_version is dynamic there).
      const admin = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
      if (family === 'mysql') {
        await admin.query("SET GLOBAL tls_version = 'TLSv1.2,TLSv1.3'");
        await admin.query('ALTER INSTANCE RELOAD TLS');
      }
      try {
        const serverHasTls = await mysql
          .createConnection({ ...params, host: c.host, port: c.port })
          .then(async (direct) => (await direct.end(), true))
          .catch(() => false);
        if (family === 'mysql') expect(serverHasTls).toBe(true);
        await using passthrough = await startWireProxy({ protocol: 'mysql', target: { host: c.host, port: c.port }, tls: 'passthrough' });
        const attempt = mysql.createConnection({ ...params, host: passthrough.host, port: passthrough.port });
        if (!serverHasTls) {
          // NOT_SUPPORTED here: this server has no TLS, so passthrough has nothing encrypted to step aside for.
          await expect(attempt).rejects.toThrow(/secure connection|SSL/i);
          return;
        }
        const conn = await attempt;
        conn.on('error', () => undefined);
        await conn.query('SELECT 1');
        const [record] = passthrough.connections();
        expect(record?.counts.incomplete).toBe(true);
        expect(record?.counts.incompleteReasons).toEqual(['the client started TLS: the encrypted session cannot be counted']);
        expect(record?.counts.commandsTotal).toBe(0);
        await conn.end();
      } finally {
        if (family === 'mysql') {
          // An empty version list is no TLS context: without NO ROLLBACK the reload refuses it and keeps TLS on.
          await admin.query("SET GLOBAL tls_version = ''");
          await admin.query('ALTER INSTANCE RELOAD TLS NO ROLLBACK ON ERROR');
        }
        await admin.end();
      }
    });
  },
  (b) => b.backend === 'mariadb' || b.backend === 'mysql',
);

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------------------------

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    let proxy: WireProxy;
    let observer: Client;
    const opened: Client[] = [];

    beforeAll(async () => {
      const c = network(get());
      proxy = await startWireProxy({ protocol: 'postgres', target: { host: c.host, port: c.port } });
      // Reads pg_stat_statements directly, never through the proxy.
      observer = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
      observer.on('error', () => undefined);
      await observer.connect();
      await observer.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    });
    afterEach(async () => {
      for (const client of opened.splice(0)) await client.end().catch(() => undefined);
      await allClosed(proxy);
    });
    afterAll(async () => {
      await observer?.end();
      await proxy?.close();
    });

    async function viaProxy(pipeline = false): Promise<Client> {
      const c = network(get());
      const client = new Client({
        host: proxy.host,
        port: proxy.port,
        user: c.user,
        password: c.password,
        database: c.database,
        pipeline,
      } as ConstructorParameters<typeof Client>[0]);
      client.on('error', () => undefined);
      await client.connect();
      opened.push(client);
      return client;
    }

    async function createTable(client: Client): Promise<string> {
      const table = tableName();
      await client.query(`CREATE TABLE ${table} (id int NOT NULL, label text NOT NULL)`);
      return table;
    }

    /** pg_stat_statements calls of INSERTs into `table`: entries are per table, so nothing else lands there. */
    async function insertCalls(table: string): Promise<number> {
      const r = await observer.query<{ calls: string }>(`SELECT coalesce(sum(calls), 0) AS calls FROM pg_stat_statements WHERE query LIKE $1`, [
        `INSERT INTO ${table} %`,
      ]);
      return Number(r.rows[0]?.calls ?? 0);
    }

    async function window(table: string, work: () => Promise<unknown>) {
      const calls0 = await insertCalls(table);
      const before = proxy.snapshot();
      await work();
      const after = proxy.snapshot();
      return { wire: proxy.diff(before, after), calls: (await insertCalls(table)) - calls0 };
    }

    const extended = (n: number, parses: number) => ({ Parse: parses, Bind: n, Describe: n, Execute: n, Sync: n });

    it('learns the backend pid from BackendKeyData', async () => {
      const client = await viaProxy();
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
      expect(proxy.connections().some((r) => r.serverConnectionId === pid)).toBe(true);
    });

    it('pg parameterised multi-row insert: one Parse/Bind/Describe/Execute/Sync, one round trip', async () => {
      const client = await viaProxy();
      const table = await createTable(client);
      const values = rows(MULTI_ROW);
      const placeholders = values.map((_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ');
      const { wire, calls } = await window(table, () => client.query(`INSERT INTO ${table} (id, label) VALUES ${placeholders}`, values.flat()));
      expectCleanWindow(wire);
      expect(wire.commands).toEqual(extended(1, 1));
      expect(wire.roundTrips).toBe(1);
      expect(wire.clientWrites).toBe(1);
      expect(wire.rowsAffected).toBe(MULTI_ROW);
      expect(calls).toBe(wire.commands.Sync);
    });

    it('pg named statement per row: parsed once, N binds and executes, N round trips', async () => {
      const client = await viaProxy();
      const table = await createTable(client);
      const { wire, calls } = await window(table, async () => {
        for (const [id, label] of rows(PER_ROW))
          await client.query({ name: `ins_${table}`, text: `INSERT INTO ${table} (id, label) VALUES ($1, $2)`, values: [id, label] });
      });
      expectCleanWindow(wire);
      expect(wire.commands).toEqual(extended(PER_ROW, 1));
      expect(wire.roundTrips).toBe(PER_ROW);
      expect(calls).toBe(PER_ROW);
      expect(calls).toBe(wire.commands.Execute);
    });

    it('pg unnest insert: one round trip and one server call whatever the row count', async () => {
      const client = await viaProxy();
      const table = await createTable(client);
      const values = rows(MULTI_ROW);
      const { wire, calls } = await window(table, () =>
        client.query(`INSERT INTO ${table} (id, label) SELECT * FROM unnest($1::int[], $2::text[])`, [values.map((r) => r[0]), values.map((r) => r[1])]),
      );
      expectCleanWindow(wire);
      expect(wire.commands).toEqual(extended(1, 1));
      expect(wire.roundTrips).toBe(1);
      expect(wire.rowsAffected).toBe(MULTI_ROW);
      expect(calls).toBe(1);
    });

    it('pg simple-protocol query: one Query message, one round trip', async () => {
      const client = await viaProxy();
      const table = await createTable(client);
      const { wire, calls } = await window(table, () => client.query(`INSERT INTO ${table} (id, label) VALUES (1, 'a'), (2, 'b')`));
      expectCleanWindow(wire);
      expect(wire.commands).toEqual({ Query: 1 });
      expect(wire.roundTrips).toBe(1);
      expect(wire.rowsAffected).toBe(2);
      expect(calls).toBe(1);
    });

    it('pg Promise.all on one client without pipelining: queued, one write per query', async () => {
      const client = await viaProxy(false);
      const table = await createTable(client);
      const { wire, calls } = await window(table, () =>
        Promise.all(rows(CONCURRENT).map(([id, label]) => client.query(`INSERT INTO ${table} (id, label) VALUES ($1, $2)`, [id, label]))),
      );
      expectCleanWindow(wire);
      expect(wire.commands).toEqual(extended(CONCURRENT, CONCURRENT));
      expect(wire.roundTrips).toBe(CONCURRENT);
      expect(wire.clientWrites).toBe(CONCURRENT);
      expect(calls).toBe(CONCURRENT);
    });

    it('pg Promise.all with pipeline: true: same messages and round trips, fewer writes', async () => {
      const client = await viaProxy(true);
      const table = await createTable(client);
      const { wire, calls } = await window(table, () =>
        Promise.all(rows(CONCURRENT).map(([id, label]) => client.query(`INSERT INTO ${table} (id, label) VALUES ($1, $2)`, [id, label]))),
      );
      expectCleanWindow(wire);
      expect(wire.commands).toEqual(extended(CONCURRENT, CONCURRENT));
      expect(wire.roundTrips).toBe(CONCURRENT);
      expect(wire.clientWrites).toBeLessThan(CONCURRENT);
      expect(calls).toBe(CONCURRENT);
    });

    it("TLS: refuse answers 'N' for the server; passthrough follows the server's answer", async () => {
      const c = network(get());
      const params = { user: c.user, password: c.password, database: c.database, ssl: { rejectUnauthorized: false } };
      const before = proxy.snapshot();
      const refusedClient = new Client({ ...params, host: proxy.host, port: proxy.port });
      refusedClient.on('error', () => undefined);
      await expect(refusedClient.connect()).rejects.toThrow(/does not support SSL/);
      const refused = proxy.diff(before, proxy.snapshot());
      expect(refused.setup?.tlsRefused).toBe(1);
      expect(refused.commandsTotal).toBe(0);
      expect(refused.incomplete).toBe(false);

      const sslOn = (await observer.query<{ ssl: string }>('SHOW ssl')).rows[0]?.ssl === 'on';
      await using passthrough = await startWireProxy({ protocol: 'postgres', target: { host: c.host, port: c.port }, tls: 'passthrough' });
      const client = new Client({ ...params, host: passthrough.host, port: passthrough.port });
      client.on('error', () => undefined);
      if (!sslOn) {
        // The server itself answers 'N': nothing encrypted, nothing incomplete.
        await expect(client.connect()).rejects.toThrow(/does not support SSL/);
        expect(passthrough.connections()[0]?.counts.incomplete).toBe(false);
        return;
      }
      await client.connect();
      await client.query('SELECT 1');
      expect(passthrough.connections()[0]?.counts.incompleteReasons).toEqual(['the server accepted TLS: the encrypted session cannot be counted']);
      expect(passthrough.connections()[0]?.counts.commandsTotal).toBe(0);
      await client.end();
    });
  },
  (b) => b.backend === 'postgres',
);
