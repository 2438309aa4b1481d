import { AsyncResource } from 'node:async_hooks';
// @waits 34: pool exhaustion and cut connections waiting out their timeouts.
import net from 'node:net';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { CaptureSession, type Captured } from '../../src/capture/capture';
import { SqltallyError } from '../../src/shared/errors';
import type { BackendName, NetworkConnection, StartedBackend } from '../../src/backends/types';
import { START_TIMEOUT_MS, describeEachBackend, withBackend } from '../harness';
import { EVERY_PROVIDER, STRIKES_SERVER, itForProvider, serverControl, type FrozenServer } from './providers';

// Faults under the capture API, on one private server per backend for this file (its last case kills it): none may
// hang or end in a false assert.
jest.setTimeout(START_TIMEOUT_MS);

const POOL_LIMIT = 2;
const CONCURRENT = 5;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function network(c: CaptureSession['connection'] | StartedBackend['connection']): NetworkConnection {
  if (c.kind !== 'network') throw new Error('expected a network connection');
  return { kind: 'network', host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
}

/** One backend's clients: a small pool, one client, the SQL the cases send. */
interface Code {
  pool(at: NetworkConnection, limit: number): { pool: object; end: () => Promise<void> };
  insert(pool: object, a: number): Promise<unknown>;
  /** A plain client: `raw` is the driver's own object (count it), `query` runs on it uncounted. */
  client(
    at: NetworkConnection,
  ): Promise<{ raw: object; query: (sql: string, values?: unknown[]) => Promise<unknown>; end: () => Promise<void>; destroy: () => void }>;
  create: string;
  /** Sleeps before it answers: a command the network can be cut under. */
  slow: string;
  /** Counts the server's other sessions whose statement text holds the marker (written so it does not match itself). */
  runningWith: (marker: string) => string;
  /** Rows on the server's side, read through a plain client straight to the server. */
  count(at: NetworkConnection): Promise<number>;
}

const MYSQL_FAMILY: Code = {
  pool: (at, limit) => {
    const pool = mysql.createPool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, connectionLimit: limit });
    return { pool, end: () => pool.end() };
  },
  insert: (pool, a) => (pool as mysql.Pool).execute('INSERT INTO fault_items (a) VALUES (?)', [a]),
  client: async (at) => {
    const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    c.on('error', () => undefined);
    return { raw: c, query: (sql, values) => c.query(sql, values), end: () => c.end(), destroy: () => c.destroy() };
  },
  create: 'CREATE TABLE fault_items (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, pad LONGTEXT)',
  slow: 'SELECT SLEEP(2)',
  runningWith: (marker) => `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE '%${marker}%' AND ID <> CONNECTION_ID()`,
  count: async (at) => {
    const c = await mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    try {
      return Number(((await c.query('SELECT COUNT(*) AS n FROM fault_items'))[0] as { n: number }[])[0]?.n);
    } finally {
      await c.end();
    }
  },
};

const POSTGRES: Code = {
  pool: (at, limit) => {
    const pool = new pg.Pool({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database, max: limit });
    pool.on('error', () => undefined);
    return { pool, end: () => pool.end() };
  },
  insert: (pool, a) => (pool as pg.Pool).query('INSERT INTO fault_items (a) VALUES ($1)', [a]),
  client: async (at) => {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    c.on('error', () => undefined);
    await c.connect();
    return {
      raw: c,
      query: (sql, values) => c.query(sql, values),
      end: () => c.end(),
      destroy: () => (c as unknown as { connection: { stream: net.Socket } }).connection.stream.destroy(),
    };
  },
  create: 'CREATE TABLE fault_items (id serial PRIMARY KEY, a int NOT NULL, pad text)',
  slow: 'SELECT pg_sleep(2)',
  runningWith: (marker) => `SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE '%${marker}%' AND pid <> pg_backend_pid()`,
  count: async (at) => {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    await c.connect();
    try {
      return Number((await c.query('SELECT COUNT(*) AS n FROM fault_items')).rows[0]?.n);
    } finally {
      await c.end();
    }
  },
};

const CODE: Record<BackendName, Code | { skip: string }> = {
  sqlite: { skip: 'SQLite runs in-process: no pool of network connections, no wire to cut, no server to kill' },
  mariadb: MYSQL_FAMILY,
  mysql: MYSQL_FAMILY,
  postgres: POSTGRES,
};

/** How each backend refuses a statement above its packet limit, or why the case cannot run there. */
const OVERSIZE: Record<BackendName, { limitBytes: number; setLimit: string; refused: RegExp } | { skip: string }> = {
  sqlite: { skip: 'SQLite has no packet limit (its limit is SQLITE_MAX_LENGTH, 1 GB by default, in-process)' },
  mariadb: { limitBytes: 16_384, setLimit: 'SET GLOBAL max_allowed_packet = 16384', refused: /max_allowed_packet|packet bigger|Connection lost|closed/i },
  mysql: { limitBytes: 16_384, setLimit: 'SET GLOBAL max_allowed_packet = 16384', refused: /max_allowed_packet|packet bigger|Connection lost|closed/i },
  postgres: {
    skip: "PostgreSQL's limit is 1 GB per message (MaxAllocSize): building and sending one is out of reach on this 2-core machine, and max_allowed_packet has no PostgreSQL counterpart to set smaller",
  },
};

/**
 * The network between a client and the session's proxy: `cutOn(marker)` destroys both sockets once the client sent
 * the marker (no answer comes back); `halveOn(marker)` first forwards half that chunk, so the proxy sees a cut frame.
 */
async function startRelay(target: { host: string; port: number }) {
  let rule: { marker: string; how: 'cut' | 'halve' } | null = null;
  let struck = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    upstream.on('data', (d) => client.write(d));
    client.on('data', (d) => {
      if (rule && d.includes(rule.marker)) {
        struck++;
        if (rule.how === 'halve') {
          upstream.write(d.subarray(0, Math.floor(d.length / 2)), () => {
            upstream.destroy();
            client.destroy();
          });
          return;
        }
        // Forwarded whole, then the network goes: the server runs the command, the answer has nowhere to go.
        upstream.write(d, () => setTimeout(() => (upstream.destroy(), client.destroy()), 200));
        return;
      }
      upstream.write(d);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    on(marker: string, how: 'cut' | 'halve') {
      rule = { marker, how };
    },
    get struck() {
      return struck;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function notAssert(tally: Captured<unknown>): void {
  expect(tally.verdict.kind).not.toBe('assert');
}

describeEachBackend((b) => {
  const code = CODE[b.backend];
  if ('skip' in code) {
    it.skip(`capture faults: ${code.skip}`, () => undefined);
    return;
  }
  // Every case below is done to the client side or to what any server does: it runs whatever the provider.
  const on = (title: string, body: () => Promise<void>) => itForProvider(b, EVERY_PROVIDER, title, body);
  const backend = withBackend(b.id, { fresh: true });
  let session: CaptureSession;
  const table = { name: 'fault_items', ...(b.backend === 'postgres' ? { schema: 'public' } : {}) };

  beforeAll(async () => {
    session = await CaptureSession.open({ backend: backend(), table });
  });
  afterAll(async () => {
    await session?.close().catch(() => undefined);
  });
  beforeEach(async () => {
    const c = await code.client(network(backend().connection));
    try {
      await c.query('DROP TABLE IF EXISTS fault_items');
      await c.query(code.create);
    } finally {
      await c.end();
    }
  });

  on(`pool exhaustion: ${CONCURRENT} concurrent inserts through a pool of ${POOL_LIMIT} queue on its connections and count exactly, assert`, async () => {
    const own = code.pool(network(session.connection), POOL_LIMIT);
    try {
      const pool = session.count(own.pool);
      // Warm outside the window, so the handshakes and prepares are not the window's.
      await Promise.all(Array.from({ length: POOL_LIMIT }, (_, i) => code.insert(pool, -1 - i)));
      const tally = await session.measure(() => Promise.all(Array.from({ length: CONCURRENT }, (_, i) => code.insert(pool, i))));
      expect({ kind: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ kind: 'assert', reason: expect.any(String) });
      expect(tally.layers.driver).toMatchObject({ calls: CONCURRENT, byClass: { insert: CONCURRENT } });
      expect(tally.layers.wire?.connections).toBe(POOL_LIMIT);
      expect(tally.layers.server?.summary).toMatchObject({ inserts: CONCURRENT, rowsInserted: CONCURRENT });
      expect(await code.count(network(backend().connection))).toBe(CONCURRENT + POOL_LIMIT);
    } finally {
      await own.end();
    }
  });

  on(`pool exhaustion: ${CONCURRENT} concurrent measure() calls on one session: one window, the others refused by name, no hang`, async () => {
    const own = code.pool(network(session.connection), POOL_LIMIT);
    try {
      const pool = session.count(own.pool);
      await Promise.all(Array.from({ length: POOL_LIMIT }, (_, i) => code.insert(pool, -1 - i)));
      const outcomes = await Promise.allSettled(Array.from({ length: CONCURRENT }, (_, i) => session.measure(() => code.insert(pool, i))));
      const done = outcomes.filter((o): o is PromiseFulfilledResult<Captured<unknown>> => o.status === 'fulfilled');
      const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
      expect(done).toHaveLength(1);
      expect(done[0]?.value.verdict.kind).toBe('assert');
      expect(done[0]?.value.layers.server?.summary).toMatchObject({ inserts: 1, rowsInserted: 1 });
      expect(refused).toHaveLength(CONCURRENT - 1);
      for (const r of refused) {
        expect(r.reason).toBeInstanceOf(SqltallyError);
        expect(String((r.reason as Error).message)).toContain(`[backend ${backend().description.id}, phase workload] a window is already open on this session`);
      }
      expect(await code.count(network(backend().connection))).toBe(1 + POOL_LIMIT);
    } finally {
      await own.end();
    }
  });

  on(
    `pool exhaustion past a timeout: ${CONCURRENT} slow statements on a pool of ${POOL_LIMIT} give up after 500 ms, incomplete, the late work accounted`,
    async () => {
      const own = code.pool(network(session.connection), POOL_LIMIT);
      try {
        const pool = session.count(own.pool) as { query: (sql: string) => Promise<unknown> };
        await Promise.all(Array.from({ length: POOL_LIMIT }, (_, i) => code.insert(pool, -1 - i)));
        const tally = await session.measure(() => Promise.all(Array.from({ length: CONCURRENT }, () => pool.query(code.slow).catch(() => undefined))), {
          timeoutMs: 500,
          onTimeout: 'wait',
        });
        expect(tally.verdict.kind).toBe('incomplete');
        expect(tally.verdict.reason).toContain('timed out after 500 ms');
        expect(tally.lateCommits).toMatchObject({ running: POOL_LIMIT, table: 'fault_items', rowsCommittedAfterGivingUp: 0 });
      } finally {
        await own.end();
      }
    },
  );

  on('a connection cut by the network mid-command: the driver sees the loss, the wire layer is incomplete, no assert', async () => {
    const relay = await startRelay(network(session.connection));
    try {
      const c = await code.client({ ...network(session.connection), host: '127.0.0.1', port: relay.port });
      const counted = session.count(c.raw) as { query: (sql: string) => Promise<unknown> };
      relay.on('cutmarker', 'cut');
      const tally = await session.measure(() => counted.query(`${code.slow} /* cutmarker */`));
      expect(relay.struck).toBe(1);
      if (process.env['FAULT_DEBUG']) console.log(tally.verdict.reason, tally.workloadError, tally.layers.wire?.incompleteReasons);
      notAssert(tally);
      expect(tally.workloadError?.message).toMatch(/Connection lost|terminated|closed|ECONNRESET|ended/i);
      expect(tally.layers.wire?.incomplete).toBe(true);
      expect(tally.layers.wire?.incompleteReasons.join('; ')).toMatch(/unanswered|never answered|request/i);
      expect(tally.workloadError?.statement).toContain('cutmarker');
      c.destroy();
    } finally {
      await relay.close();
      // The server runs the cut statement to its end: wait for it, so the next case starts on a quiet server.
      const admin = await code.client(network(backend().connection));
      try {
        for (let i = 0; i < 200; i++) {
          const rows = (await admin.query(code.runningWith('cutmarker'))) as unknown;
          const first = (Array.isArray(rows) ? (Array.isArray(rows[0]) ? rows[0][0] : rows[0]) : (rows as { rows: unknown[] }).rows[0]) as { n: unknown };
          if (Number(first.n) === 0) break;
          await sleep(50);
        }
      } finally {
        await admin.end();
      }
    }
  });

  on('a frame cut in half by the network: the wire layer comes out incomplete (never an assert, never a parser assert)', async () => {
    const relay = await startRelay(network(session.connection));
    try {
      const c = await code.client({ ...network(session.connection), host: '127.0.0.1', port: relay.port });
      const counted = session.count(c.raw) as { query: (sql: string) => Promise<unknown> };
      relay.on('halfmarker', 'halve');
      const tally = await session.measure(() => counted.query(`INSERT INTO fault_items (a, pad) VALUES (1, '${'x'.repeat(4000)}') /* halfmarker */`));
      expect(relay.struck).toBe(1);
      if (process.env['FAULT_DEBUG']) console.log(tally.verdict.reason, tally.workloadError, tally.layers.wire?.incompleteReasons);
      notAssert(tally);
      expect(tally.workloadError).not.toBeNull();
      expect(tally.layers.wire?.incomplete).toBe(true);
      expect(tally.layers.wire?.incompleteReasons.join('; ')).toMatch(/half|cut|partial|mid|frame|incomplete/i);
      // The server never got the whole statement: nothing committed.
      expect(await code.count(network(backend().connection))).toBe(0);
      c.destroy();
    } finally {
      await relay.close();
    }
  });

  const oversize = OVERSIZE[b.backend];
  if ('skip' in oversize) it.skip(`an oversize statement: ${oversize.skip}`, () => undefined);
  else
    on(
      `an oversize statement above max_allowed_packet (${oversize.limitBytes} bytes on this fresh server): the server refuses, the error names backend and statement, no assert`,
      async () => {
        const admin = await code.client(network(backend().connection));
        try {
          await admin.query(oversize.setLimit);
        } finally {
          await admin.end();
        }
        // A new session, so its connections see the new limit (max_allowed_packet is read at connect).
        await using small = await CaptureSession.open({ backend: backend(), table });
        const pad = 'y'.repeat(oversize.limitBytes * 4);
        const tally = await small.measure((h: any) => h.query(`INSERT INTO fault_items (a, pad) VALUES (1, '${pad}')`));
        notAssert(tally);
        expect(tally.verdict.kind).toBe('incomplete');
        expect(tally.workloadError?.message).toMatch(oversize.refused);
        expect(tally.backend.id).toBe(backend().description.id);
        expect(tally.workloadError?.statement ?? '').toMatch(/^INSERT INTO fault_items/);
        expect(await code.count(network(backend().connection))).toBe(0);
      },
    );

  // Local: SIGSTOP then SIGKILL of every process; Testcontainers: `docker pause` then `docker kill -s KILL`.
  itForProvider(
    b,
    STRIKES_SERVER,
    'SIGKILL of the server while the probe reads: the window is incomplete, naming the reading that failed, and nothing hangs',
    async () => {
      const control = serverControl(backend());
      let frozen: FrozenServer | undefined;
      let killed: Promise<void> | undefined;
      // The kill is the test's, not the workload's: bound outside the window's async context, so the window does not
      // wait for it as work the function left running (it must land while the closing reading waits).
      const killLater = AsyncResource.bind(() => sleep(1_000).then(() => control.kill()));
      const tally = await session.measure(async (h: any) => {
        await h.query('INSERT INTO fault_items (a) VALUES (1)');
        // Frozen as the function returns, so the probe's closing reading is sent to a server that does not answer;
        // killed while that reading waits (every process: PostgreSQL's backends are not in the postmaster's group).
        frozen = await control.freeze();
        killed = killLater();
      });
      await killed;
      await frozen?.thaw();
      if (process.env['FAULT_DEBUG']) console.log(tally.verdict.reason, tally.workloadError);
      // One object, so a failure shows what the window saw; `stoppedAtReturn` says whether the freeze had stopped the
      // whole server when it returned (a reading answered by a half-stopped server could pass as `assert`).
      expect({
        stoppedAtReturn: frozen?.stopped,
        verdict: tally.verdict.kind,
        reason: tally.verdict.reason,
        frozen: frozen?.what,
        gone: await control.gone(),
        server: tally.layers.server ? { incomplete: tally.layers.server.incomplete, reasons: tally.layers.server.incompleteReasons } : null,
      }).toEqual({
        stoppedAtReturn: true,
        verdict: 'incomplete',
        reason: expect.stringMatching(/^server layer incomplete: .*(SHOW GLOBAL STATUS failed|statistics read failed)/),
        frozen: expect.any(String),
        gone: true,
        server: expect.anything(),
      });
    },
  );
});
