/**
 * A text-protocol call's bind values model how the driver expands them into one SQL text no layer sees bound: each form
 * is checked against the server's count of what was written (columns a `SELECT` returns, or rows times columns).
 */
import { DriverRecorder } from '../src/driver/driver-layer';
import { markOf } from '../src/driver/counted';
import type { DriverName } from '../src/shared/driver-names';
import { openCountedConnection, runSql, type DriverHandle } from '../src/driver/open';
import { driversFor } from '../src/driver/registry';
import { describeEachBackend, withBackend } from './harness';

type Query = (sql: unknown, values?: unknown) => Promise<unknown>;

/** One call, and how many values the server says the driver wrote into its text. */
interface Form {
  name: string;
  call: (query: Query, table: string) => Promise<unknown>;
  /** From the call's result, or by reading the table back. */
  written: (result: unknown, query: Query, table: string) => Promise<number> | number;
}

/** Columns of the first row of a `rowsAsArray` SELECT: mysql2 gives `[rows, fields]`, mariadb the rows. */
function selectedColumns(result: unknown): number {
  const rows = (Array.isArray(result) && Array.isArray(result[1]) ? result[0] : result) as unknown[][];
  return rows[0]!.length;
}

/** affectedRows of an INSERT: mysql2 gives `[ResultSetHeader, undefined]`, mariadb an OkPacket. */
function affected(result: unknown): number {
  const header = (Array.isArray(result) ? result[0] : result) as { affectedRows: number | bigint };
  return Number(header.affectedRows);
}

/** Columns set in the table's only row: what an INSERT ... SET wrote. */
async function columnsSet(query: Query, table: string): Promise<number> {
  const result = await query({ sql: `SELECT a, b FROM ${table}`, rowsAsArray: true });
  const rows = (Array.isArray(result) && Array.isArray(result[1]) ? result[0] : result) as unknown[][];
  expect(rows).toHaveLength(1);
  return rows[0]!.filter((v) => v !== null).length;
}

const selectOf =
  (sql: string, values: unknown): Form['call'] =>
  (query) =>
    query({ sql, rowsAsArray: true }, values);

const MYSQL2: Form[] = [
  {
    name: 'VALUES ? with rows',
    call: (q, t) =>
      q(`INSERT INTO ${t} (a, b) VALUES ?`, [
        [
          [1, 'a'],
          [2, 'b'],
          [3, null],
        ],
      ]),
    written: (r) => affected(r) * 2,
  },
  {
    name: 'VALUES ? with an object and a Date in rows',
    call: (q, t) =>
      q(`INSERT INTO ${t} (a, b) VALUES ?`, [
        [
          [1, { x: 1, y: 2 }],
          [2, new Date(0)],
        ],
      ]),
    written: (r) => affected(r) * 2,
  },
  {
    name: 'SET ? skips a function-valued key',
    call: (q, t) => q(`INSERT INTO ${t} SET ?`, [{ a: 7, b: 'x', f: () => 1 }]),
    written: (_r, q, t) => columnsSet(q, t),
  },
  { name: 'a flat list', call: (q, t) => q(`INSERT INTO ${t} (a, b) VALUES (?, ?), (?, ?)`, [1, 'a', 2, 'b']), written: (r) => affected(r) * 2 },
  { name: 'SELECT ? of a list and a scalar', call: selectOf('SELECT ?, ?', [[1, 2, 3], 'k']), written: selectedColumns },
];

const MARIADB: Form[] = [
  { name: 'SELECT ? of a list and a scalar', call: selectOf('SELECT ?, ?', [[1, 2, 3], 'k']), written: selectedColumns },
  {
    name: 'an object among the values is one JSON string',
    call: (q, t) => q(`INSERT INTO ${t} (a, b) VALUES (?, ?)`, [1, { x: 1, y: 2 }]),
    written: (r) => affected(r) * 2,
  },
  { name: 'an object inside a list is one JSON string', call: selectOf('SELECT ?', [[1, { x: 1 }, 'k']]), written: selectedColumns },
  { name: 'a flat list', call: (q, t) => q(`INSERT INTO ${t} (a, b) VALUES (?, ?), (?, ?)`, [1, 'a', 2, 'b']), written: (r) => affected(r) * 2 },
];

/** Every driver: its text-protocol forms, or why it has none. A driver added without an entry is a compile error. */
const FORMS: { [D in DriverName]: Form[] | string } = {
  mysql2: MYSQL2,
  mariadb: MARIADB,
  pg: 'binds each value as one protocol parameter: counted from its values array, no expansion to model',
  'postgres-js': 'binds each value as one protocol parameter: counted from its values array, no expansion to model',
  'better-sqlite3': 'binds each value as one parameter in process: counted from its arguments, no expansion to model',
  sqlite3: 'binds each value as one parameter in process: counted from its arguments, no expansion to model',
};

const PLAIN_BACKENDS = new Set(['sqlite', 'mariadb', 'mysql', 'postgres']);

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);
    for (const driver of driversFor(b.backend)) {
      const forms = FORMS[driver];
      if (typeof forms === 'string') {
        it.skip(`${driver}: ${forms}`, () => undefined);
        continue;
      }
      describe(driver, () => {
        it.each(forms.map((form) => [form.name, form] as const))('%s: the values the window counts are the ones the server got', async (_name, form) => {
          const recorder = new DriverRecorder();
          const conn = await openCountedConnection(driver, backend().connection, recorder);
          const raw = (markOf(conn.handle)?.target ?? conn.handle) as DriverHandle<typeof driver>;
          const table = `ev_${driver}`;
          try {
            await runSql(driver, raw, `DROP TABLE IF EXISTS ${table}`);
            await runSql(driver, raw, `CREATE TABLE ${table} (a INT, b TEXT)`);
            const counted = conn.handle as unknown as { query: Query };
            const uncounted = raw as unknown as { query: Query };
            recorder.begin();
            const answer = await form.call((sql, values) => counted.query(sql, values), table);
            const counts = recorder.end();
            const written = await form.written(answer, (sql, values) => uncounted.query(sql, values), table);
            expect(written).toBeGreaterThan(0);
            expect(counts.layer.calls).toBe(1);
            expect(counts.layer.bindValues).toBe(written);
          } finally {
            await conn.close();
          }
        });
      });
    }
    // Expansion is the driver's, not the server version's: the plain backend ids are enough.
  },
  (b) => PLAIN_BACKENDS.has(b.id),
);
