/**
 * The in-process clients of bench/wire-cost.ts (pg and mysql2 inserting 5000 rows), shared with the child process
 * that runs them when a passive capture is measured (bench/wire-cost-child.ts): a passive capture sets this
 * process's own connections aside, so only a client in another process is counted.
 */
import type { Duplex } from 'node:stream';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import type { NetworkConnection } from '../src/backends/types';

export type Protocol = 'mysql' | 'postgres';

export interface Endpoint {
  host: string;
  port: number;
  /** In-process drivers connect through this stream instead (`--relay stream`). */
  stream?: () => Duplex;
}

/** One measured run against one endpoint: its figure (tps, queries/s or ns) and whether higher is better. */
export interface Workload {
  name: string;
  protocol: Protocol;
  unit: 'tps' | 'queries/s' | 'ms';
  /** A driver in this process (it can take `--relay stream`), not a client program. */
  inProcess?: boolean;
  /** How bench/wire-cost-child.ts runs the same client in a process of its own (for a passive capture). */
  child?: { client: 'pg' | 'mysql2'; oneStatement: boolean };
  /** Set-up done once per endpoint (a connection opened, not timed). */
  open(server: NetworkConnection, at: Endpoint): Promise<{ run(): Promise<number>; end(): Promise<void> }>;
}

export const ROWS = 5000;
/** One statement is timed this many times per run, after one untimed on the new connection, and the median kept. */
export const STATEMENT_REPEATS = 11;

/** The median of `times` runs of `statement`, each after `reset` (untimed), the first run not counted. */
async function medianOf(times: number, reset: () => Promise<unknown>, statement: () => Promise<unknown>): Promise<number> {
  const took: number[] = [];
  for (let r = 0; r <= times; r++) {
    await reset();
    const start = process.hrtime.bigint();
    await statement();
    if (r > 0) took.push(timeNs(start));
  }
  return took.sort((x, y) => x - y)[Math.floor(times / 2)]!;
}
const LABELS = Array.from({ length: ROWS }, (_, i) => `row-${i}`);

function timeNs(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export function pgInserts(name: string, oneStatement: boolean): Workload {
  return {
    name,
    protocol: 'postgres',
    unit: 'ms',
    inProcess: true,
    child: { client: 'pg', oneStatement },
    async open(server, at) {
      const client = new Client({
        host: at.host,
        port: at.port,
        user: server.user,
        password: server.password,
        database: server.database,
        ...(at.stream ? { stream: at.stream } : {}),
      });
      await client.connect();
      const table = `wire_cost_${process.pid}`;
      await client.query(`CREATE TABLE IF NOT EXISTS ${table} (id int NOT NULL, label text NOT NULL)`);
      const oneSql = `INSERT INTO ${table} (id, label) VALUES ${LABELS.map((_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ')}`;
      const oneValues = LABELS.flatMap((l, i) => [i, l]);
      return {
        run: async () => {
          if (oneStatement) {
            return medianOf(
              STATEMENT_REPEATS,
              () => client.query(`TRUNCATE ${table}`),
              () => client.query(oneSql, oneValues),
            );
          }
          await client.query(`TRUNCATE ${table}`);
          const start = process.hrtime.bigint();
          await client.query('BEGIN');
          for (let i = 0; i < ROWS; i++) await client.query(`INSERT INTO ${table} (id, label) VALUES ($1, $2)`, [i, LABELS[i]]);
          await client.query('COMMIT');
          return timeNs(start);
        },
        end: () => client.end(),
      };
    },
  };
}

export function mysqlInserts(name: string, oneStatement: boolean): Workload {
  return {
    name,
    protocol: 'mysql',
    unit: 'ms',
    inProcess: true,
    child: { client: 'mysql2', oneStatement },
    async open(server, at) {
      const conn = await mysql.createConnection({
        host: at.host,
        port: at.port,
        user: server.user,
        password: server.password,
        database: server.database,
        ...(at.stream ? { stream: at.stream } : {}),
      });
      const table = `wire_cost_${process.pid}`;
      await conn.query(`CREATE TABLE IF NOT EXISTS ${table} (id INT NOT NULL, label VARCHAR(40) NOT NULL)`);
      const rows = LABELS.map((l, i) => [i, l]);
      return {
        run: async () => {
          if (oneStatement) {
            return medianOf(
              STATEMENT_REPEATS,
              () => conn.query(`TRUNCATE TABLE ${table}`),
              () => conn.query(`INSERT INTO ${table} (id, label) VALUES ?`, [rows]),
            );
          }
          await conn.query(`TRUNCATE TABLE ${table}`);
          const start = process.hrtime.bigint();
          await conn.query('BEGIN');
          for (let i = 0; i < ROWS; i++) await conn.query(`INSERT INTO ${table} (id, label) VALUES (?, ?)`, [i, LABELS[i]]);
          await conn.query('COMMIT');
          return timeNs(start);
        },
        end: () => conn.end(),
      };
    },
  };
}
