import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { CallShape, StatementSink } from '../../sql/events';
import { wrapBetterSqlite3 } from '../better-sqlite3';
import { wrapMysql2 } from '../mysql2';
import { PromiseConnection, type Mysql2Callback } from '../mysql2.fixture';
import type { DriverName } from '../../shared/driver-names';
import { wrapPg } from '../pg';
import { wrapPostgresJs } from '../postgres-js';
import { DRIVER_PATH_ENV, FORCED_REASON, PathLedger, pathLabel, type DriverPath } from './path';

/** What one counted call looked like to the sink: everything a count or the model reads, no times. */
interface Seen {
  driver: DriverName;
  method: string;
  kind: string;
  sql: string;
  statementClass: string;
  bindValues: number;
  parameterSets: number;
  protocol: string | undefined;
  rows: number | null;
  failed: boolean;
  connectionId: number | null;
}

/** A sink that keeps every call and the path decisions. */
class PathSink implements StatementSink {
  readonly seen: Seen[] = [];
  readonly ledger = new PathLedger();
  record(driver: DriverName, shape: CallShape, _s: number, _e: number, rows: number | null, error: unknown, connectionId: number | null): void {
    const { method, kind, sql, statementClass, bindValues, parameterSets, protocol } = shape;
    this.seen.push({
      driver,
      method,
      kind,
      sql,
      statementClass,
      bindValues,
      parameterSets,
      protocol,
      rows,
      failed: error !== null && error !== undefined,
      connectionId,
    });
  }
  notePath(driver: DriverName, feature: string, reason: string | null): void {
    this.ledger.note(driver, feature, reason);
  }
}

/** A driver release for the table: the object to count, the workload run on it counted, and its clean-up. */
interface Release {
  target: object;
  run(counted: never): Promise<void>;
  close?(): void;
}

interface DriverCase {
  /** The installed release, or a stand-in built as it is: what the fast path expects. */
  expected(): Release;
  /** The same driver as a release whose internals differ from what the fast path reads. */
  changed(): Release;
  /** What the changed release's plain path says. */
  changedReason: RegExp;
  wrap(target: object, sink: StatementSink): object;
}

// ---- mysql2: promise methods that read as mysql2 3.x's, or (changed) ones that build a plain `new Promise`.
const HEADER = { fieldCount: 0, affectedRows: 1, insertId: 0 };
function mysqlCore() {
  return {
    threadId: 12,
    config: {},
    query(_sql: string, values: unknown, cb?: Mysql2Callback): void {
      const done = typeof values === 'function' ? (values as Mysql2Callback) : cb!;
      queueMicrotask(() => done(null, HEADER, undefined));
    },
    execute(sql: string, values: unknown, cb?: Mysql2Callback): void {
      this.query(sql, values, cb);
    },
    promise: (): unknown => undefined,
  };
}
type Core = ReturnType<typeof mysqlCore>;
class ChangedPromiseConnection extends PromiseConnection<Core> {
  override query(sql: string, params?: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => this.connection.query(sql, params, (e, r, f) => (e ? reject(e) : resolve([r, f]))));
  }
  override execute(sql: string, params?: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => this.connection.execute(sql, params, (e, r, f) => (e ? reject(e) : resolve([r, f]))));
  }
}
const mysql2Workload = async (c: PromiseConnection<Core>): Promise<void> => {
  await c.query('INSERT INTO t VALUES ?', [
    [
      [1, 'a'],
      [2, 'b'],
    ],
  ]);
  await c.execute('INSERT INTO t VALUES (?, ?)', [3, 'c']);
  const statement = (await c.prepare('INSERT INTO t VALUES (?, ?)')) as unknown as { execute(v: unknown): Promise<unknown> };
  await statement.execute([4, 'd']);
};

// ---- pg: a Client whose `query` builds `new this._Promise(...)` as pg 8 does, or (changed) an async `query`.
type PgCallback = (error: Error | null, result?: unknown) => void;
type PgConfig = { text: string; values?: unknown[]; name?: string };
function pgAnswer(config: string | PgConfig, done: PgCallback): void {
  const text = typeof config === 'string' ? config : config.text;
  const command = text.split(' ')[0]!.toUpperCase();
  queueMicrotask(() => done(null, { command, rowCount: command === 'INSERT' ? 1 : null, rows: [] }));
}
function pgClient() {
  return {
    processID: 4,
    _Promise: Promise,
    connect: (): Promise<void> => Promise.resolve(),
    query(this: { _Promise: PromiseConstructor }, config: string | PgConfig, values?: unknown, callback?: PgCallback): unknown {
      const cb = typeof values === 'function' ? (values as PgCallback) : callback;
      if (cb) return pgAnswer(config, cb);
      const done: { cb?: PgCallback } = {};
      const result = new this._Promise((resolve, reject) => {
        done.cb = (err, res) => (err ? reject(err) : resolve(res));
      }).catch((err: Error) => {
        Error.captureStackTrace(err);
        throw err;
      });
      pgAnswer(config, done.cb!);
      return result;
    },
  };
}
function changedPgClient() {
  return {
    processID: 4,
    connect: (): Promise<void> => Promise.resolve(),
    query(config: string | PgConfig, values?: unknown, callback?: PgCallback): unknown {
      const cb = typeof values === 'function' ? (values as PgCallback) : callback;
      if (cb) return pgAnswer(config, cb);
      return new Promise((resolve, reject) => pgAnswer(config, (e, r) => (e ? reject(e) : resolve(r))));
    },
  };
}
const pgWorkload = async (c: { query(...a: unknown[]): unknown }): Promise<void> => {
  await c.query('BEGIN');
  await c.query('INSERT INTO t VALUES ($1, $2)', [1, 'a']);
  await c.query({ text: 'INSERT INTO t VALUES ($1, $2)', values: [2, 'b'], name: 'ins' });
  await new Promise<void>((resolve) => c.query('SELECT 1', () => resolve()));
  await c.query('COMMIT');
};

// ---- better-sqlite3: the installed release, or (changed) one whose statements carry `run` as their own property.
function sqliteDb(): Database.Database {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, label TEXT)');
  return db;
}
function changedSqliteDb(): Database.Database {
  const db = sqliteDb();
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    const statement = prepare(sql);
    // A release that puts its methods on each statement: the counting prototype would never be reached.
    (statement as unknown as Record<string, unknown>).run = (Object.getPrototypeOf(statement) as { run: unknown }).run;
    return statement;
  }) as typeof db.prepare;
  return db;
}
const sqliteWorkload = async (db: Database.Database): Promise<void> => {
  const insert = db.prepare('INSERT INTO t VALUES (?, ?)');
  db.transaction((n: number) => {
    for (let i = 1; i <= n; i++) insert.run(i, `r${i}`);
  })(5);
  db.prepare('INSERT INTO t VALUES (?, ?)').bind(9, 'z').run();
  db.prepare('SELECT * FROM t WHERE id = ?').get(1);
  db.prepare('SELECT * FROM t').all();
  db.prepare('INSERT INTO t VALUES (@id, @label)').run({ id: 20, label: 'n' });
};

// ---- postgres.js: a `sql` whose queries are built as postgres.js 3.4 builds them (run by `this.handler(this)` when
// first awaited), or (changed) one that keeps its runner under another name.
const ORIGIN = Symbol('OriginError');
function fakePostgres(variant: 'expected' | 'changed') {
  const key = variant === 'expected' ? 'handler' : 'runner';
  class Query extends Promise<unknown> {
    static override get [Symbol.species](): PromiseConstructor {
      return Promise;
    }
    [k: string | symbol]: unknown;
    executed = false;
    constructor(strings: readonly string[], args: unknown[], options: { simple?: boolean }, run: (q: Query) => void) {
      let res!: (v: unknown) => void;
      let rej!: (e: unknown) => void;
      super((a, b) => {
        res = a;
        rej = b;
      });
      this.strings = strings;
      this.args = args;
      this[ORIGIN] = new Error();
      this.options = options;
      this[key] = run;
      this.resolve = (x: unknown) => res(x);
      this.reject = (x: unknown) => rej(x);
    }
    override then<A = unknown, B = never>(a?: ((v: unknown) => A | PromiseLike<A>) | null, b?: ((e: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
      if (!this.executed) {
        this.executed = true;
        queueMicrotask(() => (this[key] as (q: Query) => void).call(this, this));
      }
      return super.then(a, b);
    }
  }
  const run = (q: Query): void => {
    const strings = q.strings as string[];
    const args = q.args as unknown[];
    const simple = (q.options as { simple?: boolean }).simple === true;
    const text = strings.reduce((acc, s, i) => `${acc}$${i}${s}`);
    q.string = text;
    q.parameters = args;
    q.prepare = !simple && strings.length > 1;
    q.state = { pid: 7 };
    const command = text.split(' ')[0]!.toUpperCase();
    const result = Object.assign([], {
      command,
      count: command === 'INSERT' ? 1 : null,
      statement: { string: text, types: args.map(() => 23) },
      state: { pid: 7 },
    });
    (q.resolve as (v: unknown) => void)(result);
  };
  const sql = (strings: readonly string[], ...args: unknown[]): Query => new Query(strings, args, {}, run);
  return Object.assign(sql, {
    options: { prepare: true },
    unsafe: (text: string, args: unknown[] = []) => new Query([text], args, { simple: args.length === 0 }, run),
    begin: () => Promise.reject(new Error('not in this stand-in')),
    end: () => Promise.resolve(),
    array: (v: unknown) => v,
    file: () => Promise.reject(new Error('not in this stand-in')),
  });
}
const postgresJsWorkload = async (sql: ReturnType<typeof fakePostgres>): Promise<void> => {
  await sql`INSERT INTO t VALUES (${1}, ${'a'})`;
  await sql.unsafe('INSERT INTO t VALUES ($1, $2)', [2, 'b']);
  await sql.unsafe('SELECT 1');
  // Built, never awaited: a call on neither path.
  void sql`SELECT ${2}`.constructor;
};

const stand = (target: object, run: (c: never) => Promise<void>, close?: () => void): Release => ({ target, run, close });

/** Every driver with a fast path; a new driver is a compile error here until it says how its paths are tested. */
const CASES: { [D in DriverName]: DriverCase | { noFastPath: string } } = {
  mysql2: {
    expected: () => stand(new PromiseConnection(mysqlCore()), mysql2Workload as never),
    changed: () => stand(new ChangedPromiseConnection(mysqlCore()), mysql2Workload as never),
    changedReason: /query of this release: it does not build new this\.Promise/,
    wrap: (t, s) => wrapMysql2(t, s),
  },
  mariadb: { noFastPath: 'the connector is counted through its public API only: mariadb.ts reads no source text or private field' },
  sqlite3: { noFastPath: 'node-sqlite3 is counted through its public API only: sqlite3.ts reads no source text or private field' },
  pg: {
    expected: () => stand(pgClient(), pgWorkload as never),
    changed: () => stand(changedPgClient(), pgWorkload as never),
    changedReason: /no _Promise constructor on the Client/,
    wrap: (t, s) => wrapPg(t, s),
  },
  'better-sqlite3': {
    expected: () => {
      const db = sqliteDb();
      return stand(db, sqliteWorkload as never, () => db.close());
    },
    changed: () => {
      const db = changedSqliteDb();
      return stand(db, sqliteWorkload as never, () => db.close());
    },
    changedReason: /the statement has its own run/,
    wrap: (t, s) => wrapBetterSqlite3(t as Database.Database, s),
  },
  'postgres-js': {
    expected: () => stand(fakePostgres('expected'), postgresJsWorkload as never),
    changed: () => stand(fakePostgres('changed'), postgresJsWorkload as never),
    changedReason: /queries of this release carry no handler function/,
    wrap: (t, s) => wrapPostgresJs(t, s),
  },
};

async function countOn(
  release: Release,
  wrap: DriverCase['wrap'],
  driver: DriverName,
  forced: boolean,
): Promise<{ seen: Seen[]; path: DriverPath | undefined }> {
  const before = process.env[DRIVER_PATH_ENV];
  if (forced) process.env[DRIVER_PATH_ENV] = 'plain';
  else delete process.env[DRIVER_PATH_ENV];
  const sink = new PathSink();
  try {
    await release.run(wrap(release.target, sink) as never);
  } finally {
    if (before === undefined) delete process.env[DRIVER_PATH_ENV];
    else process.env[DRIVER_PATH_ENV] = before;
    release.close?.();
  }
  return { seen: sink.seen, path: sink.ledger.pathOf(driver) };
}

describe.each(Object.entries(CASES) as [DriverName, DriverCase | { noFastPath: string }][])('%s: the fast and the plain path', (driver, c) => {
  if ('noFastPath' in c) {
    it(`has none to compare (${c.noFastPath})`, () => {
      const source = readFileSync(path.join(__dirname, '..', `${driver}.ts`), 'utf8');
      expect(source).not.toMatch(/sourceOf|toString\(|getPrototypeOf|setPrototypeOf|\._[a-z]/);
    });
    return;
  }

  it('count the same calls, on the release the fast path expects', async () => {
    const fast = await countOn(c.expected(), c.wrap, driver, false);
    const plain = await countOn(c.expected(), c.wrap, driver, true);
    expect(fast.seen.length).toBeGreaterThan(2);
    expect(plain.seen).toEqual(fast.seen);
    expect(fast.path?.plain).toEqual([]);
    expect(fast.path?.fast.length).toBeGreaterThan(0);
    expect(pathLabel(fast.path)).toBe('fast path');
    expect(plain.path?.fast).toEqual([]);
    expect(plain.path?.plain.map((p) => p.reason)).toEqual(plain.path?.plain.map(() => FORCED_REASON));
    expect(pathLabel(plain.path)).toMatch(/^plain path: .*forced by SQLTALLY_DRIVER_PATH=plain/);
  });

  it('take the plain path by themselves on a release whose internals differ, say why, and count the same', async () => {
    const expected = await countOn(c.expected(), c.wrap, driver, false);
    const changed = await countOn(c.changed(), c.wrap, driver, false);
    expect(changed.seen).toEqual(expected.seen);
    expect(changed.path?.plain.length).toBeGreaterThan(0);
    expect(pathLabel(changed.path)).toMatch(c.changedReason);
  });
});
