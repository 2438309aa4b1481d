import net from 'node:net';
import * as mariadb from 'mariadb';
import mysql from 'mysql2/promise';
import pg from 'pg';
import postgres from 'postgres';
import { CaptureSession } from '../src/capture/capture';
import type { ClientOptions } from '../src/capture/capture';
import { DRIVERS, driversFor } from '../src/driver/registry';
import type { DriverName } from '../src/shared/driver-names';
import type { BackendName } from '../src/backends/types';
import { describeEachBackend, withBackend } from './harness';

/**
 * `session.clientOptions(driver)`: a client of the user's own in this process reaches the wire proxy through an
 * in-process stream instead of a loopback socket, and every layer counts the same as through `session.connection`.
 */

interface OwnClient {
  handle: object;
  insert(counted: object, i: number): Promise<unknown>;
  end(): Promise<void>;
}

type NetworkDriver = Exclude<DriverName, 'better-sqlite3' | 'sqlite3'>;

/** One client per driver that can take a stream, and the option it takes it by. */
const CLIENTS: Record<NetworkDriver, { option: string; open(o: ClientOptions): Promise<OwnClient> }> = {
  pg: {
    option: 'stream',
    async open(o) {
      const c = new pg.Client({ ...o });
      await c.connect();
      return { handle: c, insert: (h, i) => (h as pg.Client).query('INSERT INTO co_items (a) VALUES ($1)', [i]), end: () => c.end() };
    },
  },
  mysql2: {
    option: 'stream',
    async open(o) {
      const c = await mysql.createConnection({ ...o });
      return { handle: c, insert: (h, i) => (h as mysql.Connection).execute('INSERT INTO co_items (a) VALUES (?)', [i]), end: () => c.end() };
    },
  },
  mariadb: {
    option: 'stream',
    async open(o) {
      const c = await mariadb.createConnection({ ...o });
      return { handle: c, insert: (h, i) => (h as mariadb.Connection).query('INSERT INTO co_items (a) VALUES (?)', [i]), end: () => c.end() };
    },
  },
  'postgres-js': {
    option: 'socket',
    async open(o) {
      const sql = postgres({ ...o, max: 1, onnotice: () => undefined });
      await sql`SELECT 1`;
      return { handle: sql, insert: (h, i) => (h as postgres.Sql)`INSERT INTO co_items (a) VALUES (${i})`, end: () => sql.end({ timeout: 5 }) };
    },
  },
};

const CREATE: Partial<Record<BackendName, string>> = {
  mariadb: 'CREATE TABLE co_items (a INT NOT NULL)',
  mysql: 'CREATE TABLE co_items (a INT NOT NULL)',
  postgres: 'CREATE TABLE co_items (a int NOT NULL)',
};

/** How many sockets of this process connect to `port` while `fn` runs. */
async function connectsTo<T>(port: number, fn: () => Promise<T>): Promise<{ connects: number; result: T }> {
  const original = net.Socket.prototype.connect;
  let connects = 0;
  const portOf = (a: unknown): unknown => (Array.isArray(a) ? portOf(a[0]) : typeof a === 'object' && a !== null ? (a as { port?: unknown }).port : a);
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    if (Number(portOf(args[0])) === port) connects += 1;
    return (original as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof original;
  try {
    const result = await fn();
    return { connects, result };
  } finally {
    net.Socket.prototype.connect = original;
  }
}

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);
    let session: CaptureSession;
    beforeAll(async () => {
      session = await CaptureSession.open({ backend: backend() });
    });
    afterAll(async () => {
      await session?.close();
    });

    const drivers = driversFor(b.backend).filter((d): d is NetworkDriver => d in CLIENTS);
    for (const driver of drivers) {
      it(`${driver}: through the in-process stream, no socket to the proxy, and the same counts as over loopback`, async () => {
        const streamed = session.clientOptions(driver);
        expect(typeof streamed[CLIENTS[driver].option]).toBe('function');
        expect(DRIVERS[driver].streamOptions).not.toBeNull();
        const c = session.connection;
        if (c.kind !== 'network') throw new Error('expected a network connection');
        const loopback: ClientOptions = { host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };

        const ddl = await CLIENTS[b.backend === 'postgres' ? 'pg' : 'mysql2'].open(loopback);
        await (ddl.handle as { query(sql: string): Promise<unknown> }).query('DROP TABLE IF EXISTS co_items');
        await (ddl.handle as { query(sql: string): Promise<unknown> }).query(CREATE[b.backend] as string);
        await ddl.end();

        const run = async (options: ClientOptions) => {
          const { connects: opened, result: own } = await connectsTo(options.port, () => CLIENTS[driver].open(options));
          try {
            const counted = session.count(own.handle);
            await own.insert(counted, 0); // a prepare, where the driver prepares, outside the window
            const tally = await session.measure(async () => {
              for (let i = 1; i <= 3; i++) await own.insert(counted, i);
            });
            return { opened, tally };
          } finally {
            await own.end();
          }
        };
        const viaStream = await run(streamed);
        const viaLoopback = await run(loopback);
        // Through the stream the client opens no socket to the proxy; over loopback it opens one.
        expect({ stream: viaStream.opened, loopback: viaLoopback.opened }).toEqual({ stream: 0, loopback: 1 });
        for (const { tally } of [viaStream, viaLoopback])
          expect({ kind: tally.verdict.kind, reason: tally.verdict.reason }).toEqual({ kind: 'assert', reason: expect.any(String) });
        const layers = ({ tally }: typeof viaStream) => ({
          driver: tally.layers.driver?.calls,
          commands: tally.layers.wire?.commands,
          roundTrips: tally.layers.wire?.roundTrips,
          clientWrites: tally.layers.wire?.clientWrites,
          connections: tally.layers.wire?.connections,
          statements: tally.layers.server?.summary.statements,
          inserts: tally.layers.server?.summary.inserts,
        });
        expect(layers(viaStream)).toEqual(layers(viaLoopback));
        expect(layers(viaStream)).toMatchObject({ driver: 3, connections: 1, inserts: 3 });
      });
    }

    it('refuses a driver of another backend, naming the ones that fit', () => {
      const other: DriverName = b.backend === 'postgres' ? 'mysql2' : 'pg';
      expect(() => session.clientOptions(other)).toThrow(/is not a network driver for/);
    });
  },
  (b) => b.backend !== 'sqlite',
);
