/**
 * Every call form of every driver hands the window the values it binds (1, 2 and 2 are two distinct parameter sets) and
 * the calling line; a wrapper handing over the wrong argument shows as every call looking like the same set.
 */
import { DriverRecorder } from '../src/driver/driver-layer';
import { markOf } from '../src/driver/counted';
import type { DriverName } from '../src/shared/driver-names';
import { openCountedConnection, runSql, type DriverHandle } from '../src/driver/open';
import { driversFor } from '../src/driver/registry';
import { installedReleases } from '../src/driver/releases';
import { describeEachBackend, withBackend } from './harness';

type Callback = (err: unknown, result?: unknown) => void;

/** Runs a callback-API call to its callback. */
function settled(call: (cb: Callback) => void): Promise<unknown> {
  return new Promise((resolve, reject) => call((err, result) => (err ? reject(err) : resolve(result))));
}

/** One way of handing a driver one value to insert; `prepare` runs before the window, once per form. */
interface Form<H> {
  name: string;
  prepare?: (handle: H, table: string) => Promise<unknown>;
  call: (handle: H, table: string, value: number, prepared: unknown) => Promise<unknown> | unknown;
  /** Lets go of what `prepare` made before the connection closes (node-sqlite3 refuses to close over a statement). */
  release?: (prepared: unknown) => Promise<unknown>;
}

// Structural views of the handles: the forms reach past the types sqltally opens with (callback cores, statements).
type Mysql2Like = {
  query(sql: unknown, values?: unknown): Promise<unknown>;
  execute(sql: string, values: unknown[]): Promise<unknown>;
  prepare(sql: string): Promise<{ execute(values: unknown[]): Promise<unknown>; close(): unknown }>;
  connection: {
    query(sql: string, values: unknown[], cb: Callback): unknown;
    execute(sql: string, values: unknown[], cb: Callback): unknown;
    prepare(sql: string, cb: Callback): unknown;
  };
};
type MariadbLike = {
  query(sql: unknown, values?: unknown): Promise<unknown>;
  execute(sql: string, values: unknown[]): Promise<unknown>;
  prepare(sql: string): Promise<{ execute(values: unknown[]): Promise<unknown>; close(): unknown }>;
};
type PgLike = { query(config: unknown, values?: unknown, cb?: Callback): Promise<unknown> | undefined };
type PostgresJsQueryLike = Promise<unknown> & { execute(): Promise<unknown> };
type PostgresJsLike = ((strings: TemplateStringsArray, ...values: unknown[]) => PostgresJsQueryLike) & {
  unsafe(text: string, values?: unknown[]): Promise<unknown>;
  begin(body: (tx: PostgresJsLike) => Promise<unknown>): Promise<unknown>;
  reserve(): Promise<PostgresJsLike & { release(): void }>;
};
type SqliteLike = { prepare(sql: string): { run(...args: unknown[]): unknown } };
type Sqlite3StatementLike = { run(...args: unknown[]): unknown; finalize(cb: Callback): unknown };
type Sqlite3Like = {
  run(sql: string, ...args: unknown[]): unknown;
  prepare(sql: string, ...args: unknown[]): Sqlite3StatementLike;
  serialize(fn: () => void): void;
  wait(cb: Callback): unknown;
};

const MYSQL2_FORMS: Form<Mysql2Like>[] = [
  { name: 'query(sql, values)', call: (h, t, v) => h.query(`INSERT INTO ${t} VALUES (?)`, [v]) },
  { name: 'query({ sql, values })', call: (h, t, v) => h.query({ sql: `INSERT INTO ${t} VALUES (?)`, values: [v] }) },
  { name: 'query(sql, scalar)', call: (h, t, v) => h.query(`INSERT INTO ${t} VALUES (?)`, v) },
  { name: 'execute(sql, values)', call: (h, t, v) => h.execute(`INSERT INTO ${t} VALUES (?)`, [v]) },
  { name: 'execute({ sql }, values)', call: (h, t, v) => h.execute({ sql: `INSERT INTO ${t} VALUES (?)` } as never, [v]) },
  {
    name: 'prepare, then execute(values)',
    prepare: (h, t) => h.prepare(`INSERT INTO ${t} VALUES (?)`),
    call: (_h, _t, v, st) => (st as { execute(values: unknown[]): Promise<unknown> }).execute([v]),
  },
  { name: 'callback API: query(sql, values, cb)', call: (h, t, v) => settled((cb) => h.connection.query(`INSERT INTO ${t} VALUES (?)`, [v], cb)) },
  { name: 'callback API: execute(sql, values, cb)', call: (h, t, v) => settled((cb) => h.connection.execute(`INSERT INTO ${t} VALUES (?)`, [v], cb)) },
  {
    name: 'callback API: prepare, then execute(values, cb)',
    prepare: (h, t) => settled((cb) => h.connection.prepare(`INSERT INTO ${t} VALUES (?)`, cb)),
    call: (_h, _t, v, st) => settled((cb) => (st as { execute(values: unknown[], cb: Callback): unknown }).execute([v], cb)),
  },
];

const MARIADB_FORMS: Form<MariadbLike>[] = [
  { name: 'query(sql, values)', call: (h, t, v) => h.query(`INSERT INTO ${t} VALUES (?)`, [v]) },
  { name: 'query({ sql }, values)', call: (h, t, v) => h.query({ sql: `INSERT INTO ${t} VALUES (?)` }, [v]) },
  { name: 'execute(sql, values)', call: (h, t, v) => h.execute(`INSERT INTO ${t} VALUES (?)`, [v]) },
  {
    name: 'prepare, then execute(values)',
    prepare: (h, t) => h.prepare(`INSERT INTO ${t} VALUES (?)`),
    call: (_h, _t, v, st) => (st as { execute(values: unknown[]): Promise<unknown> }).execute([v]),
  },
];

const PG_FORMS: Form<PgLike>[] = [
  { name: 'query(text, values)', call: (h, t, v) => h.query(`INSERT INTO ${t} VALUES ($1)`, [v]) },
  { name: 'query({ text, values })', call: (h, t, v) => h.query({ text: `INSERT INTO ${t} VALUES ($1)`, values: [v] }) },
  { name: 'query({ text }, values)', call: (h, t, v) => h.query({ text: `INSERT INTO ${t} VALUES ($1)` }, [v]) },
  { name: 'query({ name, text, values })', call: (h, t, v) => h.query({ name: `dv_named_${t}`, text: `INSERT INTO ${t} VALUES ($1)`, values: [v] }) },
  { name: 'query(text, values, cb)', call: (h, t, v) => settled((cb) => h.query(`INSERT INTO ${t} VALUES ($1)`, [v], cb)) },
];

const POSTGRES_JS_FORMS: Form<PostgresJsLike>[] = [
  // A template's table name is a fixed part of its text: one table for this form (see TABLE below).
  { name: 'tagged template', call: (h, _t, v) => h`INSERT INTO dv_postgres_js VALUES (${v})` },
  { name: 'unsafe(text, values)', call: (h, t, v) => h.unsafe(`INSERT INTO ${t} VALUES ($1)`, [v]) },
  // Run by `.execute()` rather than by `await`, in a transaction, and on a reserved connection: each runs the query
  // once, through the handler the wrapper counts it by.
  { name: 'tagged template, execute()', call: (h, _t, v) => h`INSERT INTO dv_postgres_js VALUES (${v})`.execute() },
  { name: 'tagged template in begin()', call: (h, _t, v) => h.begin((tx) => tx`INSERT INTO dv_postgres_js VALUES (${v})`) },
  {
    name: 'tagged template on reserve()',
    call: async (h, _t, v) => {
      const reserved = await h.reserve();
      try {
        await reserved`INSERT INTO dv_postgres_js VALUES (${v})`;
      } finally {
        reserved.release();
      }
    },
  },
];

const SQLITE_FORMS: Form<SqliteLike>[] = [
  {
    name: 'run(value)',
    prepare: (h, t) => Promise.resolve(h.prepare(`INSERT INTO ${t} VALUES (?)`)),
    call: (_h, _t, v, st) => (st as { run(...a: unknown[]): unknown }).run(v),
  },
  {
    name: 'run([value])',
    prepare: (h, t) => Promise.resolve(h.prepare(`INSERT INTO ${t} VALUES (?)`)),
    call: (_h, _t, v, st) => (st as { run(...a: unknown[]): unknown }).run([v]),
  },
  {
    name: 'run({ v })',
    prepare: (h, t) => Promise.resolve(h.prepare(`INSERT INTO ${t} VALUES (@v)`)),
    call: (_h, _t, v, st) => (st as { run(...a: unknown[]): unknown }).run({ v }),
  },
];

/** A statement once node-sqlite3 has prepared it (its callback), so the prepare is done before the window opens. */
function prepared(h: Sqlite3Like, sql: string): Promise<Sqlite3StatementLike> {
  return new Promise((resolve, reject) => {
    const statement = h.prepare(sql, (err: Error | null) => (err ? reject(err) : resolve(statement as Sqlite3StatementLike)));
  });
}

const SQLITE3_FORMS: Form<Sqlite3Like>[] = [
  { name: 'run(sql, value, cb)', call: (h, t, v) => settled((cb) => h.run(`INSERT INTO ${t} VALUES (?)`, v, cb)) },
  { name: 'run(sql, [value], cb)', call: (h, t, v) => settled((cb) => h.run(`INSERT INTO ${t} VALUES (?)`, [v], cb)) },
  { name: 'run(sql, { $v }, cb)', call: (h, t, v) => settled((cb) => h.run(`INSERT INTO ${t} VALUES ($v)`, { $v: v }, cb)) },
  // No callback, as code inside serialize() is written: wait() hands back once the queued call has run.
  { name: 'run(sql, value), no callback', call: (h, t, v) => (h.run(`INSERT INTO ${t} VALUES (?)`, v), settled((cb) => h.wait(cb))) },
  {
    name: 'prepare, then run(value, cb)',
    prepare: (h, t) => prepared(h, `INSERT INTO ${t} VALUES (?)`),
    call: (_h, _t, v, st) => settled((cb) => (st as Sqlite3StatementLike).run(v, cb)),
    release: (st) => settled((cb) => (st as Sqlite3StatementLike).finalize(cb)),
  },
  {
    name: 'prepare, then run({ $v }, cb)',
    prepare: (h, t) => prepared(h, `INSERT INTO ${t} VALUES ($v)`),
    call: (_h, _t, v, st) => settled((cb) => (st as Sqlite3StatementLike).run({ $v: v }, cb)),
    release: (st) => settled((cb) => (st as Sqlite3StatementLike).finalize(cb)),
  },
];

/** Every driver's forms: a driver added to DRIVER_NAMES without its forms here is a compile error. */
const FORMS: { [D in DriverName]: Form<unknown>[] } = {
  mysql2: MYSQL2_FORMS as Form<unknown>[],
  mariadb: MARIADB_FORMS as Form<unknown>[],
  pg: PG_FORMS as Form<unknown>[],
  'postgres-js': POSTGRES_JS_FORMS as Form<unknown>[],
  'better-sqlite3': SQLITE_FORMS as Form<unknown>[],
  sqlite3: SQLITE3_FORMS as Form<unknown>[],
};

const PLAIN_BACKENDS = new Set(['sqlite', 'mariadb', 'mysql', 'postgres']);

const TABLE = (driver: DriverName): string => `dv_${driver.replace('-', '_')}`;

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);
    for (const driver of driversFor(b.backend)) {
      if (installedReleases(driver).length === 0) {
        it.skip(`${driver}: not installed here (an optional peer dependency)`, () => undefined);
        continue;
      }
      describe(driver, () => {
        it.each(FORMS[driver].map((form) => [form.name, form] as const))('%s: 1, 2, 2 are two distinct parameter sets of three calls', async (_name, form) => {
          const recorder = new DriverRecorder();
          const conn = await openCountedConnection(driver, backend().connection, recorder);
          const raw = (markOf(conn.handle)?.target ?? conn.handle) as DriverHandle<typeof driver>;
          const table = TABLE(driver);
          let prepared: unknown;
          try {
            await runSql(driver, raw, `DROP TABLE IF EXISTS ${table}`);
            await runSql(driver, raw, `CREATE TABLE ${table} (v INT)`);
            const handle: unknown = conn.handle;
            prepared = form.prepare ? await form.prepare(handle, table) : undefined;
            recorder.begin();
            for (const value of [1, 2, 2]) await form.call(handle, table, value, prepared);
            const window = recorder.end();
            const inserts = window.layer.shapes.filter((shape) => shape.statementClass === 'insert');
            expect(inserts).toHaveLength(1);
            expect(inserts[0]).toMatchObject({ calls: 3, parameterSets: 3, distinctParameterSets: 2, distinctOf: 3, rows: 3 });
            // And the line that made the call, in this file (the form's own line in the table above), on every form.
            expect(inserts[0]!.caller).toMatch(/^integration\/distinct-values\.test\.ts:\d+:\d+$/);
            expect(window.layer.bindValues).toBe(3);
            // The three rows are the server's.
            const [row] = (await runSql(driver, raw, `SELECT COUNT(*) AS n FROM ${table}`)) as Array<{ n: unknown }>;
            expect(Number(row!.n)).toBe(3);
          } finally {
            if (prepared !== undefined) await form.release?.(prepared);
            await conn.close();
          }
        });
      });
    }
    // Call forms are the driver's, not the server version's: the plain backend ids are enough.
  },
  (b) => PLAIN_BACKENDS.has(b.id),
);
