import type { BackendName, StartedBackend } from '../../src/backends/types';
import { openRawConnection, runSql } from '../../src/driver/open';
import { readDriverFor } from '../../src/workload/connect';
import type { DriverName } from '../../src/shared/driver-names';

/**
 * The data every ORM test works on: PARENTS parents with SEEDED_PER_PARENT children each, made before any ORM is
 * built, through a plain client straight to the server that sqltally does not count and that is closed before any
 * window; and BULK_ROWS children that a test inserts through the ORM's own bulk API.
 */
export const PARENTS = 20;
export const SEEDED_PER_PARENT = 10;
export const BULK_ROWS = 5000;

/** One child row as every ORM's model spells it (the column is `parent_id`). */
export interface ChildRow {
  parentId: number;
  name: string;
}

/** BULK_ROWS children spread over the parents, named `bulk-<tag>-<i>` so a check counts one test's rows only. */
export function bulkRows(tag: string): ChildRow[] {
  return Array.from({ length: BULK_ROWS }, (_, i) => ({ parentId: (i % PARENTS) + 1, name: `bulk-${tag}-${i}` }));
}

/** Sum of `parent_id` over {@link bulkRows}: 250 rows of each parent 1..20. */
export const BULK_PARENT_ID_SUM = (BULK_ROWS / PARENTS) * ((PARENTS * (PARENTS + 1)) / 2);

/** A plain client straight to the server (never through the proxy, never counted), for DDL and for checks. */
interface PlainClient {
  exec(sql: string): Promise<void>;
  rows(sql: string): Promise<Record<string, unknown>[]>;
  end(): Promise<void>;
}

/**
 * sqltally's own raw connection for reading back (SQLite's through the ORM's driver: no two copies on one file), noted
 * as departed when closed, or the next window would take its lingering session for a client around the proxy.
 */
async function plainClient(backend: StartedBackend, cellDriver?: DriverName): Promise<PlainClient> {
  const driver = readDriverFor(backend.description.name, cellDriver);
  const opened = await openRawConnection(driver, backend.connection, { backend: backend.description.id });
  const run = (sql: string): Promise<unknown[]> => runSql(driver, opened.handle as never, sql);
  return {
    exec: async (sql) => void (await run(sql)),
    rows: async (sql) => (await run(sql)) as Record<string, unknown>[],
    end: opened.close,
  };
}

const DDL = {
  postgres: [
    'CREATE TABLE parents (id serial PRIMARY KEY, name text NOT NULL)',
    'CREATE TABLE children (id serial PRIMARY KEY, parent_id int NOT NULL REFERENCES parents (id), name text NOT NULL)',
    'CREATE INDEX children_parent_id ON children (parent_id)',
  ],
  mariadb: [
    'CREATE TABLE parents (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64) NOT NULL)',
    'CREATE TABLE children (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT NOT NULL, name VARCHAR(64) NOT NULL, KEY (parent_id))',
  ],
  mysql: [
    'CREATE TABLE parents (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64) NOT NULL)',
    'CREATE TABLE children (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT NOT NULL, name VARCHAR(64) NOT NULL, KEY (parent_id))',
  ],
  sqlite: [
    'CREATE TABLE parents (id INTEGER PRIMARY KEY, name TEXT NOT NULL)',
    'CREATE TABLE children (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parents (id), name TEXT NOT NULL)',
    'CREATE INDEX children_parent_id ON children (parent_id)',
  ],
} satisfies Record<BackendName, string[]>;

/**
 * Drops and makes both tables and seeds them, on a plain client that is closed again before this returns: none of
 * it is a window's, and no connection but the ORM's is open when a window starts (on a server sqltally started,
 * any other connection would make the verdict `report`).
 */
export async function createTables(backend: StartedBackend, cellDriver?: DriverName): Promise<void> {
  const client = await plainClient(backend, cellDriver);
  try {
    await client.exec('DROP TABLE IF EXISTS children');
    await client.exec('DROP TABLE IF EXISTS parents');
    for (const sql of DDL[backend.description.name]) await client.exec(sql);
    const parents = Array.from({ length: PARENTS }, (_, i) => `(${i + 1}, 'parent-${i + 1}')`);
    await client.exec(`INSERT INTO parents (id, name) VALUES ${parents.join(', ')}`);
    const children = Array.from({ length: PARENTS * SEEDED_PER_PARENT }, (_, i) => `(${(i % PARENTS) + 1}, 'seeded-${i}')`);
    await client.exec(`INSERT INTO children (parent_id, name) VALUES ${children.join(', ')}`);
  } finally {
    await client.end();
  }
}

/** What a fresh, uncounted connection finds of one bulk insert's rows. */
export interface BulkCheck {
  rows: number;
  parentIdSum: number;
  distinctNames: number;
}

export async function checkBulk(backend: StartedBackend, tag: string, cellDriver?: DriverName): Promise<BulkCheck> {
  const client = await plainClient(backend, cellDriver);
  try {
    const [row] = await client.rows(
      `SELECT COUNT(*) AS n, COALESCE(SUM(parent_id), 0) AS s, COUNT(DISTINCT name) AS d FROM children WHERE name LIKE 'bulk-${tag}-%'`,
    );
    return { rows: Number(row?.n), parentIdSum: Number(row?.s), distinctNames: Number(row?.d) };
  } finally {
    await client.end();
  }
}

/** How many children the first PARENTS parents have, read through a fresh, uncounted connection. */
export async function childrenOfParents(backend: StartedBackend, cellDriver?: DriverName): Promise<number> {
  const client = await plainClient(backend, cellDriver);
  try {
    const [row] = await client.rows(`SELECT COUNT(*) AS n FROM children WHERE parent_id <= ${PARENTS}`);
    return Number(row?.n);
  } finally {
    await client.end();
  }
}
