/**
 * Records real proxy traffic for `wire-replay.ts`: a bench-only recording forwarder (no parsing) sits where the wire
 * proxy would, and one connection per scenario runs through it, handshake to close. Table set-up runs on a direct
 * connection, so a stream holds the scenario's own traffic and nothing else.
 */
import net from 'node:net';
import * as mariadb from 'mariadb';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import type { RecordedStream, StreamChunk } from './wire-replay';

export const ROWS = 5000;
/** Rows of the large result set. */
export const SELECT_ROWS = 100_000;

type Params = Omit<NetworkConnection, 'kind'>;

/**
 * What one recorded connection does. `prepare` runs on a direct connection first; `run` runs on the recorded one.
 */
interface Scenario {
  what: string;
  prepare?(direct: Params, table: string): Promise<void>;
  run(via: Params, table: string): Promise<void>;
}

function rows(n: number): [number, string][] {
  return Array.from({ length: n }, (_, i) => [i, `row-${i}`]);
}

async function mysqlFill(c: Params, table: string, total: number): Promise<void> {
  const conn = await mysql.createConnection(c);
  try {
    await conn.query(`DROP TABLE IF EXISTS ${table}`);
    await conn.query(`CREATE TABLE ${table} (id INT NOT NULL, label VARCHAR(40) NOT NULL)`);
    for (let done = 0; done < total; done += ROWS) await conn.query(`INSERT INTO ${table} (id, label) VALUES ?`, [rows(ROWS)]);
  } finally {
    await conn.end();
  }
}

async function pgFill(c: Params, table: string, total: number): Promise<void> {
  const client = new Client(c);
  await client.connect();
  try {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.query(`CREATE TABLE ${table} (id int NOT NULL, label text NOT NULL)`);
    if (total > 0) {
      await client.query(`INSERT INTO ${table} (id, label) SELECT i % ${ROWS}, 'row-' || (i % ${ROWS}) FROM generate_series(0, ${total - 1}) AS i`);
    }
  } finally {
    await client.end();
  }
}

export const MYSQL_SCENARIOS: Record<string, Scenario> = {
  'insert-multirow': {
    what: `mysql2 query(INSERT ... VALUES ?) of ${ROWS} rows: one COM_QUERY`,
    prepare: (c, t) => mysqlFill(c, t, 0),
    async run(c, t) {
      const conn = await mysql.createConnection(c);
      await conn.query(`INSERT INTO ${t} (id, label) VALUES ?`, [rows(ROWS)]);
      await conn.end();
    },
  },
  'execute-per-row': {
    what: `mysql2 execute(INSERT ... VALUES (?, ?)) ${ROWS} times: one COM_STMT_EXECUTE and one round trip each`,
    prepare: (c, t) => mysqlFill(c, t, 0),
    async run(c, t) {
      const conn = await mysql.createConnection(c);
      for (const row of rows(ROWS)) await conn.execute(`INSERT INTO ${t} (id, label) VALUES (?, ?)`, row);
      await conn.end();
    },
  },
  'execute-pipelined': {
    what: `mariadb connector batch() with bulk off: ${ROWS} COM_STMT_EXECUTE pipelined`,
    prepare: (c, t) => mysqlFill(c, t, 0),
    async run(c, t) {
      const conn = await mariadb.createConnection({ ...c, bulk: false });
      await conn.batch(`INSERT INTO ${t} (id, label) VALUES (?, ?)`, rows(ROWS));
      await conn.end();
    },
  },
  'select-large': {
    what: `mysql2 query(SELECT) of ${SELECT_ROWS} rows: one result set`,
    prepare: (c, t) => mysqlFill(c, t, SELECT_ROWS),
    async run(c, t) {
      const conn = await mysql.createConnection(c);
      await conn.query(`SELECT id, label FROM ${t}`);
      await conn.end();
    },
  },
};

export const PG_SCENARIOS: Record<string, Scenario> = {
  'insert-multirow': {
    what: `pg query(INSERT ... VALUES ($1, $2), ...) of ${ROWS} rows: one Parse/Bind/Describe/Execute/Sync`,
    prepare: (c, t) => pgFill(c, t, 0),
    async run(c, t) {
      const client = new Client(c);
      await client.connect();
      const placeholders = Array.from({ length: ROWS }, (_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ');
      await client.query(`INSERT INTO ${t} (id, label) VALUES ${placeholders}`, rows(ROWS).flat());
      await client.end();
    },
  },
  'execute-per-row': {
    what: `pg named prepared INSERT ${ROWS} times: Bind/Execute/Sync and one round trip each`,
    prepare: (c, t) => pgFill(c, t, 0),
    async run(c, t) {
      const client = new Client(c);
      await client.connect();
      for (const row of rows(ROWS)) await client.query({ name: 'ins', text: `INSERT INTO ${t} (id, label) VALUES ($1, $2)`, values: row });
      await client.end();
    },
  },
  'select-large': {
    what: `pg query(SELECT) of ${SELECT_ROWS} rows: one result set`,
    prepare: (c, t) => pgFill(c, t, SELECT_ROWS),
    async run(c, t) {
      const client = new Client(c);
      await client.connect();
      await client.query(`SELECT id, label FROM ${t}`);
      await client.end();
    },
  },
};

/** A forwarder that records every socket read of every connection, as the wire proxy would receive them. */
export async function startRecorder(target: { host: string; port: number }): Promise<{
  port: number;
  /** Chunks of each connection, in accept order; a connection's list is complete once both sides closed. */
  connections: StreamChunk[][];
  closed(): Promise<void>;
  stop(): Promise<void>;
}> {
  const connections: StreamChunk[][] = [];
  const done: Promise<void>[] = [];
  const sockets: net.Socket[] = [];
  const server = net.createServer({ noDelay: true }, (client) => {
    const chunks: StreamChunk[] = [];
    connections.push(chunks);
    const upstream = net.connect(target);
    sockets.push(client, upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (bytes: Buffer) => {
      chunks.push({ from: 'client', bytes });
      if (!upstream.write(bytes)) client.pause();
    });
    upstream.on('data', (bytes: Buffer) => {
      chunks.push({ from: 'server', bytes });
      if (!client.write(bytes)) upstream.pause();
    });
    upstream.on('drain', () => client.resume());
    client.on('drain', () => upstream.resume());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    let open = 2;
    done.push(
      new Promise<void>((resolve) => {
        const one = (): void => {
          open -= 1;
          if (open === 0) resolve();
        };
        client.on('close', () => {
          upstream.end();
          one();
        });
        upstream.on('close', () => {
          client.end();
          one();
        });
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections,
    closed: () => Promise.all(done).then(() => undefined),
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Records the named scenarios (all by default) of the backend's protocol, one connection each. */
export async function recordStreams(backend: StartedBackend, only?: readonly string[]): Promise<RecordedStream[]> {
  const c = backend.connection;
  if (c.kind !== 'network') throw new Error(`${backend.description.id} is not a network backend`);
  const protocol = backend.description.name === 'postgres' ? 'postgres' : 'mysql';
  const scenarios = protocol === 'mysql' ? MYSQL_SCENARIOS : PG_SCENARIOS;
  const direct: Params = { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
  const out: RecordedStream[] = [];
  for (const [name, scenario] of Object.entries(scenarios)) {
    if (only && !only.includes(name)) continue;
    const table = `h3_wire_stream_${process.pid}`;
    await scenario.prepare?.(direct, table);
    const recorder = await startRecorder({ host: c.host, port: c.port });
    try {
      await scenario.run({ ...direct, port: recorder.port, host: '127.0.0.1' }, table);
      await recorder.closed();
    } finally {
      await recorder.stop();
    }
    if (recorder.connections.length !== 1) throw new Error(`${name}: ${recorder.connections.length} connections recorded, expected 1`);
    out.push({
      protocol,
      scenario: name,
      backend: backend.description.id,
      serverVersion: backend.description.serverVersion,
      chunks: recorder.connections[0] as StreamChunk[],
    });
  }
  return out;
}
