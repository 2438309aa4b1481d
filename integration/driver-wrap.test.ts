// @waits 9: the drivers of each backend wrapped and run against it.
import { spawnSync } from 'node:child_process';
import dc from 'node:diagnostics_channel';
import path from 'node:path';
import mysql2Callback from 'mysql2';
import mysql2 from 'mysql2/promise';
import * as mariadb from 'mariadb';
import pg from 'pg';
import type { NetworkConnection } from '../src/backends/types';
import { DriverRecorder, DriverTally } from '../src/driver/driver-layer';
import type { StatementEvent } from '../src/sql/events';
import { wrapMariadb } from '../src/driver/mariadb';
import { wrapMysql2 } from '../src/driver/mysql2';
import { openCountedConnection, openRawConnection } from '../src/driver/open';
import { wrapPg } from '../src/driver/pg';
import { forcedPlain } from '../src/driver/compat/path';
import { wrapPostgresJs } from '../src/driver/postgres-js';
import { describeEachBackend, withBackend } from './harness';
import { tsChild } from './ts-child';

/** A frame of sqltally's postgres.js wrapper (the stale `counters/driver` path matched nothing since src/ moved). */
const WRAPPER_FRAME = /src[\\/]driver[\\/]postgres-js\.ts/;

// Driver wrapping is about the driver, not the server version: the plain backend ids are enough.
const NETWORK_BACKENDS = new Set(['mariadb', 'mysql', 'postgres']);

const COLUMNS = 3;
function rows(n: number, offset = 0): [number, string, number][] {
  return Array.from({ length: n }, (_, i) => [offset + i + 1, `row-${offset + i + 1}`, (offset + i) * 1.5]);
}

function network(connection: unknown): NetworkConnection {
  const c = connection as NetworkConnection;
  if (c.kind !== 'network') throw new Error('expected a network backend');
  return c;
}

function brief(events: StatementEvent[]): string[] {
  return events.map((e) => `${e.method}/${e.kind}/${e.statementClass}/b${e.bindValues}/p${e.parameterSets}/r${e.rowsAffected}`);
}

/**
 * Replaces `method` on the ORIGINAL object (before wrapping) with a pass-through that remembers the rejection
 * the driver produced, so a test can check the wrapper rethrows that very instance.
 */
function rememberRejection(target: object, method: string): { seen: () => unknown } {
  const o = target as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const original = o[method]!;
  let seen: unknown;
  o[method] = function (this: unknown, ...args: unknown[]) {
    const p = original.apply(this, args);
    p.catch((e: unknown) => {
      seen = e;
    });
    return p;
  };
  return { seen: () => seen };
}

async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the call to fail');
}

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id);

    if (b.backend === 'postgres') {
      describe('postgres.js', () => {
        it('counts tagged templates, unsafe, the multi-row helper and transactions; a fragment or an unawaited query is not a call', async () => {
          const tally = new DriverTally();
          const conn = await openCountedConnection('postgres-js', backend().connection, tally);
          try {
            const sql = conn.handle;
            await sql`DROP TABLE IF EXISTS wrap_pgjs`;
            await sql`CREATE TABLE wrap_pgjs (id int PRIMARY KEY, label text, score double precision)`;
            const mark = tally.mark();
            const five = rows(5).map(([id, label, score]) => ({ id, label, score }));
            expect((await sql`INSERT INTO wrap_pgjs ${sql(five, 'id', 'label', 'score')}`).count).toBe(5);
            // A query nested as a fragment runs inside its parent: one call, not two.
            const where = sql`WHERE id > ${2}`;
            expect((await sql`SELECT id FROM wrap_pgjs ${where}`).length).toBe(3);
            await sql.unsafe('UPDATE wrap_pgjs SET score = score + 1');
            await sql.unsafe('DELETE FROM wrap_pgjs WHERE id = $1', [5]);
            // Built and never awaited: postgres.js never runs it, so it crosses no layer.
            void sql`SELECT 1 AS never_run`;
            const inTx = await sql.begin(async (tx) => {
              await tx`INSERT INTO wrap_pgjs VALUES (${6}, ${'six'}, ${6.5})`;
              await tx.savepoint(async (sp) => {
                await sp`INSERT INTO wrap_pgjs VALUES (${7}, ${'seven'}, ${7.5})`;
              });
              return 'done';
            });
            expect(inTx).toBe('done');
            await expect(sql.begin(async (tx) => tx`INSERT INTO wrap_pgjs VALUES (${1}, ${'dup'}, ${0})`)).rejects.toThrow(/duplicate key/);
            const events = tally.since(mark);
            expect(brief(events)).toEqual([
              'sql/query/insert/b15/p1/r5',
              'sql/query/select/b1/p1/rnull',
              'unsafe/query/update/b0/p1/r5',
              'unsafe/query/delete/b1/p1/r1',
              'begin/query/begin/b0/p1/rnull',
              'sql/query/insert/b3/p1/r1',
              'begin/query/savepoint/b0/p1/rnull',
              'sql/query/insert/b3/p1/r1',
              'begin/query/commit/b0/p1/rnull',
              'begin/query/begin/b0/p1/rnull',
              'sql/query/insert/b3/p1/rnull',
              'begin/query/rollback/b0/p1/rnull',
            ]);
            expect(events[0]?.sql).toMatch(/^INSERT INTO wrap_pgjs \("id","label","score"\)values\(\$1,\$2,\$3\),/);
            expect(events[1]?.sql).toBe('SELECT id FROM wrap_pgjs WHERE id > $1');
            expect(events[10]?.error).toMatch(/duplicate key/);
            // The backend pid of the connection that ran it, read from the query itself. The plain path reads it from the
            // public result (`.state`): a failed query has none, and postgres.js's error carries no pid.
            const named = forcedPlain() ? events.filter((e) => e.error === null) : events;
            expect(new Set(named.filter((e) => e.method !== 'begin').map((e) => e.connectionId))).toEqual(new Set([conn.connectionId]));
            if (forcedPlain()) expect(events[10]?.connectionId).toBeNull();
          } finally {
            await conn.close();
          }
        });

        it.each([false, true])('a failed query names the line that built it, as raw postgres.js does (debug %s)', async (debug) => {
          const raw = await openRawConnection('postgres-js', backend().connection, { driverOptions: { debug } });
          try {
            const rawSql = raw.handle;
            const sql = wrapPostgresJs(rawSql, new DriverTally());
            const stackOf = (query: Promise<unknown>): Promise<string> =>
              query.then(
                () => 'resolved',
                (e: Error) => e.stack ?? '',
              );
            // A template built first through the wrapper: postgres.js makes and keeps its origin then. Before, the
            // fourth of its four frames was the wrapper's and the test's line was not there at all.
            const wrapped = await stackOf(sql`SELECT 1 / ${0}::int AS wrapped_first`);
            const plain = await stackOf(rawSql`SELECT 1 / ${0}::int AS raw_first`);
            const viaUnsafe = await stackOf(sql.unsafe('SELECT 1 / 0 AS by_unsafe'));
            const rawUnsafe = await stackOf(rawSql.unsafe('SELECT 1 / 0 AS by_unsafe'));
            const origin = (stack: string): string[] =>
              stack
                .split('\n')
                .filter((l) => /postgres\/cjs\/src\/(query|index)\.js|driver-wrap\.test\.ts/.test(l) || WRAPPER_FRAME.test(l))
                .map((l) => l.replace(/\(?[^ ]*driver-wrap\.test\.ts:\d+:\d+\)?/, 'TEST').trim());
            expect(wrapped).toMatch(/division by zero/);
            if (forcedPlain()) {
              // An origin is postgres.js's private OriginError, made as the query is built: no public API sets it, so on
              // the plain path the wrapper's frame stays in it (the last of four without debug, above the caller's with it).
              expect(origin(wrapped)[origin(wrapped).length - 1]).toMatch(debug ? /TEST$/ : WRAPPER_FRAME);
              expect(wrapped).toMatch(WRAPPER_FRAME);
              return;
            }
            expect(origin(wrapped)[origin(wrapped).length - 1]).toMatch(/TEST$/);
            expect(origin(wrapped).slice(0, 3)).toEqual(origin(plain).slice(0, 3));
            expect(wrapped).not.toMatch(WRAPPER_FRAME);
            expect(origin(viaUnsafe)).toEqual(origin(rawUnsafe));
            expect(viaUnsafe).not.toMatch(WRAPPER_FRAME);
          } finally {
            await raw.close();
          }
        });

        it('counts queries postgres.js pipelines on one connection one call each', async () => {
          const tally = new DriverTally();
          const conn = await openCountedConnection('postgres-js', backend().connection, tally);
          try {
            const sql = conn.handle;
            const mark = tally.mark();
            const results = await Promise.all(Array.from({ length: 20 }, (_, i) => sql`SELECT ${i}::int AS n`));
            expect(results.map((r) => r[0]?.n)).toEqual(Array.from({ length: 20 }, (_, i) => i));
            expect(tally.since(mark).map((e) => e.statementClass)).toEqual(new Array(20).fill('select'));
          } finally {
            await conn.close();
          }
        });

        it('names the line that built each query, pipelined ones too: postgres.js runs and settles them from its own callbacks', async () => {
          const recorder = new DriverRecorder();
          const conn = await openCountedConnection('postgres-js', backend().connection, recorder);
          try {
            const sql = conn.handle;
            recorder.begin();
            await Promise.all(Array.from({ length: 5 }, (_, i) => sql`SELECT ${i}::int AS n`));
            await sql.unsafe('SELECT 1 AS one');
            const shapes = recorder.end().layer.shapes;
            expect(shapes.map((s) => [s.fingerprint, s.calls])).toEqual([
              ['SELECT ?::INT AS n', 5],
              ['SELECT ? AS one', 1],
            ]);
            for (const s of shapes) expect(s.caller).toMatch(/^integration\/driver-wrap\.test\.ts:\d+:\d+$/);
          } finally {
            await conn.close();
          }
        });

        it("captures a looped template's line once a window: a loop of 300 leaves the window's captures to the templates after it", async () => {
          // An ask answered under the `$n` text must be remembered, or every build asks and captures again until the
          // window's captures are gone and a later template names no line.
          const recorder = new DriverRecorder();
          const conn = await openCountedConnection('postgres-js', backend().connection, recorder);
          try {
            const sql = conn.handle;
            recorder.begin();
            for (let i = 0; i < 300; i++) await sql`SELECT ${i}::int AS looped`;
            await sql`SELECT ${1}::int AS after_the_loop`;
            const shapes = recorder.end().layer.shapes;
            expect(shapes.map((s) => [s.fingerprint, s.calls])).toEqual([
              ['SELECT ?::INT AS looped', 300],
              ['SELECT ?::INT AS after_the_loop', 1],
            ]);
            for (const s of shapes) expect(s.caller).toMatch(/^integration\/driver-wrap\.test\.ts:\d+:\d+$/);
          } finally {
            await conn.close();
          }
        });

        it("counts a template once against the window's text cap: its ask under the strings is answered as the $n text is recorded", async () => {
          // With the asks left pending each template counted twice (asked text + recorded text), and the third of
          // three templates under a cap of three was refused its capture at build: it named no line.
          const recorder = new DriverRecorder({ maxTexts: 3 });
          const conn = await openCountedConnection('postgres-js', backend().connection, recorder);
          try {
            const sql = conn.handle;
            recorder.begin();
            await sql`SELECT ${1}::int AS a`;
            await sql`SELECT ${2}::int AS b`;
            await sql`SELECT ${3}::int AS c`;
            const shapes = recorder.end().layer.shapes;
            expect(shapes.map((s) => [s.fingerprint, s.calls])).toEqual([
              ['SELECT ?::INT AS a', 1],
              ['SELECT ?::INT AS b', 1],
              ['SELECT ?::INT AS c', 1],
            ]);
            for (const s of shapes) expect(s.caller).toMatch(/^integration\/driver-wrap\.test\.ts:\d+:\d+$/);
          } finally {
            await conn.close();
          }
        });
      });
    }

    if (b.backend === 'postgres') {
      describe('pg', () => {
        it('counts every query form with bind values, rows affected and the backend pid', async () => {
          const tally = new DriverTally();
          const conn = await openCountedConnection('pg', backend().connection, tally);
          try {
            const client = conn.handle;
            await client.query('DROP TABLE IF EXISTS wrap_pg');
            await client.query('CREATE TABLE wrap_pg (id int PRIMARY KEY, label text, score double precision)');
            const mark = tally.mark();
            const five = rows(5);
            const text = `INSERT INTO wrap_pg VALUES ${five.map((_, i) => `($${i * 3 + 1}, $${i * 3 + 2}, $${i * 3 + 3})`).join(', ')}`;
            expect((await client.query(text, five.flat())).rowCount).toBe(5);
            await client.query({ name: 'one_row', text: 'INSERT INTO wrap_pg VALUES ($1, $2, $3)', values: rows(1, 5)[0] });
            await client.query({ name: 'one_row', text: 'INSERT INTO wrap_pg VALUES ($1, $2, $3)', values: rows(1, 6)[0] });
            const unnest = rows(4, 7);
            await client.query('INSERT INTO wrap_pg SELECT * FROM unnest($1::int[], $2::text[], $3::float8[])', [
              unnest.map((r) => r[0]),
              unnest.map((r) => r[1]),
              unnest.map((r) => r[2]),
            ]);
            const viaCallback = await new Promise<number>((resolve, reject) =>
              client.query('SELECT count(*)::int AS n FROM wrap_pg', (err: Error | null, res: pg.QueryResult) =>
                err ? reject(err) : resolve(res.rows[0].n as number),
              ),
            );
            expect(viaCallback).toBe(11);
            const submitted = client.query(new pg.Query('SELECT 1'));
            await new Promise((resolve) => submitted.on('end', resolve));
            const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;

            const events = tally.since(mark);
            expect(brief(events)).toEqual([
              'query/query/insert/b15/p1/r5',
              'query/query/insert/b3/p1/r1',
              'query/query/insert/b3/p1/r1',
              // One value per array: pg sends each array as one parameter.
              'query/query/insert/b3/p1/r4',
              'query/query/select/b0/p1/rnull',
              'query/query/select/b0/p1/rnull',
              'query/query/select/b0/p1/rnull',
            ]);
            expect(conn.connectionId).toBe(pid);
            expect(events.every((e) => e.connectionId === pid && e.driver === 'pg')).toBe(true);
            expect(events.every((e) => e.error === null && e.durationNs > 0)).toBe(true);
          } finally {
            await conn.close();
          }
        });

        it('returns the same results and rethrows the driver’s own error instance', async () => {
          const info = backend().connection;
          const raw = await openRawConnection('pg', info);
          const rawClient = raw.handle;
          const tally = new DriverTally();
          const other = await openRawConnection('pg', info);
          const spy = rememberRejection(other.handle, 'query');
          const wrapped = wrapPg(other.handle, tally);
          try {
            await rawClient.query('CREATE TABLE IF NOT EXISTS wrap_pg_same (id int PRIMARY KEY, label text)');
            await rawClient.query('TRUNCATE wrap_pg_same');
            const inserted = await wrapped.query('INSERT INTO wrap_pg_same VALUES ($1, $2), ($3, $4) RETURNING id', [1, 'a', 2, 'b']);
            expect(inserted.rows).toEqual([{ id: 1 }, { id: 2 }]);
            const fromRaw = await rawClient.query('SELECT * FROM wrap_pg_same ORDER BY id');
            const fromWrapped = await wrapped.query('SELECT * FROM wrap_pg_same ORDER BY id');
            expect(fromWrapped.rows).toEqual(fromRaw.rows);
            expect(fromWrapped.rowCount).toBe(fromRaw.rowCount);
            expect(fromWrapped.fields.map((f) => f.name)).toEqual(fromRaw.fields.map((f) => f.name));

            const error = await rejectionOf(wrapped.query('INSERT INTO wrap_pg_same VALUES ($1, $2)', [1, 'dup']));
            expect(error).toBe(spy.seen());
            expect((error as { code?: string }).code).toBe('23505');
            expect(tally.events.at(-1)).toMatchObject({ error: (error as Error).message, rowsAffected: null });
            // The client is still usable and still an EventEmitter.
            expect(wrapped.listenerCount('error')).toBe(other.handle.listenerCount('error'));
            expect((await wrapped.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
          } finally {
            await raw.close();
            await other.close();
          }
        });

        // A promise-form call goes through pg's callback form inside pg's own kind of promise: all the caller observes
        // must be pg's (result, error and stack, promise class, config object, a synchronous throw).
        it('a promise-form call through the callback form: the caller sees what raw pg gives', async () => {
          const info = network(backend().connection);
          const config = { host: info.host, port: info.port, user: info.user, password: info.password, database: info.database };
          const raw = new pg.Client(config);
          const other = new pg.Client(config);
          // pg's `Promise` option (deprecated for pg 9): the caller gets that class, wrapped or not.
          class OwnPromise<T> extends Promise<T> {}
          const withOwn = { ...config, Promise: OwnPromise } as pg.ClientConfig;
          const rawOwn = new pg.Client(withOwn);
          const otherOwn = new pg.Client(withOwn);
          await Promise.all([raw, other, rawOwn, otherOwn].map((c) => c.connect()));
          const tally = new DriverTally();
          const wrapped = wrapPg(other, tally);
          try {
            for (const client of [rawOwn, wrapPg(otherOwn, new DriverTally())]) {
              const result = client.query('SELECT 1 AS one');
              expect(result).toBeInstanceOf(OwnPromise);
              expect((await result).rows).toEqual([{ one: 1 }]);
            }
            const observe = async (client: pg.Client) => {
              const reused = { text: 'SELECT $1::int AS n', values: [1] };
              const rows = [(await client.query(reused)).rows, (await client.query(reused)).rows];
              const valuesApart: { text: string; values?: unknown[] } = { text: 'SELECT $1::int AS n' };
              rows.push((await client.query(valuesApart, [2])).rows);
              const error = (await rejectionOf(client.query('SELECT no_such_column'))) as Error & { code?: string };
              let thrown: unknown;
              try {
                void client.query(null as never);
              } catch (e) {
                thrown = e;
              }
              return {
                rows,
                configs: [Object.keys(reused), Object.keys(valuesApart)],
                error: [error instanceof Error, error.code],
                // pg takes the stack again where the caller awaits, so it leads back here, not to the socket.
                stackLeadsHere: error.stack?.includes('driver-wrap.test.ts'),
                thrown: thrown instanceof TypeError,
              };
            };
            const seen = await observe(raw);
            expect(seen).toMatchObject({ rows: [[{ n: 1 }], [{ n: 1 }], [{ n: 2 }]], error: [true, '42703'], stackLeadsHere: true, thrown: true });
            expect(await observe(wrapped)).toEqual(seen);
            expect(tally.events.map((e) => `${e.statementClass}/b${e.bindValues}/${e.error === null ? 'ok' : 'error'}`)).toEqual([
              'select/b1/ok',
              'select/b1/ok',
              'select/b1/ok',
              'select/b0/error',
              'other/b0/error',
            ]);
            expect(tally.events.slice(0, 3).every((e) => e.connectionId === (other as unknown as { processID: number }).processID && e.durationNs > 0)).toBe(
              true,
            );
          } finally {
            await Promise.all([raw, other, rawOwn, otherOwn].map((c) => c.end()));
          }
        });

        it('a failed promise-form call nobody handles is still reported as unhandled (a child process: Jest hides it)', async () => {
          const info = network(backend().connection);
          const code = `
            const pg = require('pg');
            const { DriverTally } = require('./src/driver/driver-layer');
            const { wrapPg } = require('./src/driver/pg');
            const info = ${JSON.stringify({ host: info.host, port: info.port, user: info.user, password: info.password, database: info.database })};
            process.on('unhandledRejection', (e) => { console.log('unhandled ' + e.code); process.exit(0); });
            (async () => {
              const client = new pg.Client(info);
              await client.connect();
              const tally = new DriverTally();
              wrapPg(client, tally).query('SELECT no_such_column');
              setTimeout(() => { console.log('none after ' + tally.events.length + ' events'); process.exit(1); }, 5000);
            })();`;
          const { stdout, status } = spawnSync(process.execPath, [...tsChild(), '-e', code], {
            cwd: path.resolve(__dirname, '..'),
            encoding: 'utf8',
            timeout: 30_000,
          });
          expect(stdout.trim()).toBe('unhandled 42703');
          expect(status).toBe(0);
        });

        it('counts once when wrapped twice, and counts pool queries and pool clients', async () => {
          const info = network(backend().connection);
          const tally = new DriverTally();
          const conn = await openRawConnection('pg', info);
          try {
            const once = wrapPg(conn.handle, tally);
            const twice = wrapPg(once, tally);
            expect(twice).toBe(once);
            expect(wrapPg(conn.handle, tally)).toBe(once);
            await twice.query('SELECT 1');
            expect(tally.size).toBe(1);
          } finally {
            await conn.close();
          }

          const poolTally = new DriverTally();
          const pool = wrapPg(
            new pg.Pool({ host: info.host, port: info.port, user: info.user, password: info.password, database: info.database, max: 2 }),
            poolTally,
          );
          try {
            await pool.query('SELECT 1');
            const client = await pool.connect();
            const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
            client.release();
            await new Promise<void>((resolve, reject) =>
              pool.connect((err, c, release) => {
                if (err || !c) return reject(err ?? new Error('no client'));
                c.query('SELECT 2', (qerr: Error | null) => {
                  release();
                  return qerr ? reject(qerr) : resolve();
                });
              }),
            );
            expect(poolTally.events.map((e) => e.sql)).toEqual(['SELECT 1', 'SELECT pg_backend_pid() AS pid', 'SELECT 2']);
            // The pool does not say which client ran pool.query; a checked-out client does.
            expect(poolTally.events[0]!.connectionId).toBeNull();
            expect(poolTally.events[1]!.connectionId).toBe(pid);
            expect(poolTally.events[2]!.connectionId).not.toBeNull();
          } finally {
            await pool.end();
          }
        });
      });
      return;
    }

    describe('mysql2', () => {
      it('counts query, execute, prepare and transaction control with expanded bind values', async () => {
        const tally = new DriverTally();
        const conn = await openCountedConnection('mysql2', backend().connection, tally);
        try {
          const c = conn.handle;
          await c.query('DROP TABLE IF EXISTS wrap_m2');
          await c.query('CREATE TABLE wrap_m2 (id INT PRIMARY KEY, label VARCHAR(40), score DOUBLE)');
          const mark = tally.mark();
          await c.beginTransaction();
          const [header] = await c.query('INSERT INTO wrap_m2 (id, label, score) VALUES ?', [rows(7)]);
          expect((header as mysql2.ResultSetHeader).affectedRows).toBe(7);
          await c.execute('INSERT INTO wrap_m2 VALUES (?, ?, ?), (?, ?, ?)', rows(2, 7).flat());
          const statement = await c.prepare('INSERT INTO wrap_m2 VALUES (?, ?, ?)');
          await statement.execute(rows(1, 9)[0]);
          await statement.close();
          await c.commit();
          const [counted] = await c.query('SELECT COUNT(*) AS n FROM wrap_m2');
          // BIGINT comes back as a string (openCountedConnection sets bigNumberStrings on both MySQL drivers).
          expect(counted).toEqual([{ n: '10' }]);
          const [[{ id }]] = (await c.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
          expect(brief(tally.since(mark))).toEqual([
            'beginTransaction/query/begin/b0/p1/rnull',
            `query/query/insert/b${7 * COLUMNS}/p1/r7`,
            `execute/execute/insert/b${2 * COLUMNS}/p1/r2`,
            'prepare/prepare/insert/b0/p0/rnull',
            `execute/execute/insert/b${COLUMNS}/p1/r1`,
            'commit/query/commit/b0/p1/rnull',
            'query/query/select/b0/p1/rnull',
            'query/query/select/b0/p1/rnull',
          ]);
          expect(conn.connectionId).toBe(Number(id));
          expect(tally.since(mark).every((e) => e.connectionId === Number(id))).toBe(true);
        } finally {
          await conn.close();
        }
      });

      it('returns the same results and rethrows the driver’s own error instance', async () => {
        const info = backend().connection;
        const raw = await openRawConnection('mysql2', info);
        const other = await openRawConnection('mysql2', info);
        const spy = rememberRejection(other.handle, 'execute');
        const tally = new DriverTally();
        const wrapped = wrapMysql2(other.handle, tally);
        try {
          await raw.handle.query('CREATE TABLE IF NOT EXISTS wrap_m2_same (id INT PRIMARY KEY, label VARCHAR(40))');
          await raw.handle.query('DELETE FROM wrap_m2_same');
          const [fromWrappedInsert] = await wrapped.query('INSERT INTO wrap_m2_same VALUES ?', [
            [
              [1, 'a'],
              [2, 'b'],
            ],
          ]);
          const [fromRawInsert] = await raw.handle.query('INSERT INTO wrap_m2_same VALUES ?', [
            [
              [3, 'c'],
              [4, 'd'],
            ],
          ]);
          expect({ ...(fromWrappedInsert as object) }).toEqual({ ...(fromRawInsert as object) });
          const [rawRows, rawFields] = await raw.handle.query('SELECT * FROM wrap_m2_same ORDER BY id');
          const [wrappedRows, wrappedFields] = await wrapped.query('SELECT * FROM wrap_m2_same ORDER BY id');
          expect(wrappedRows).toEqual(rawRows);
          expect(wrappedFields.map((f) => f.name)).toEqual(rawFields.map((f) => f.name));
          expect(wrapped.threadId).toBe(other.connectionId);

          const error = await rejectionOf(wrapped.execute('INSERT INTO wrap_m2_same VALUES (?, ?)', [1, 'dup']));
          expect(error).toBe(spy.seen());
          expect((error as { code?: string }).code).toBe('ER_DUP_ENTRY');
          expect(tally.events.at(-1)).toMatchObject({ method: 'execute', error: (error as Error).message, rowsAffected: null });
        } finally {
          await raw.close();
          await other.close();
        }
      });

      // The promise API's query and execute run on a view of the callback connection underneath whose query and
      // execute are counted, so counting adds no promise. What the caller can observe must be mysql2's.
      it('promise query and execute through the counted callback core: the caller sees what raw mysql2 gives', async () => {
        const info = network(backend().connection);
        const config = { host: info.host, port: info.port, user: info.user, password: info.password, database: info.database };
        class OwnPromise<T> extends Promise<T> {}
        const raw = await mysql2.createConnection({ ...config, Promise: OwnPromise });
        const other = await mysql2.createConnection({ ...config, Promise: OwnPromise });
        const rawPool = mysql2.createPool({ ...config, connectionLimit: 1, Promise: OwnPromise });
        const otherPool = mysql2.createPool({ ...config, connectionLimit: 1, Promise: OwnPromise });
        const tally = new DriverTally();
        const wrapped = wrapMysql2(other, tally);
        const wrappedPool = wrapMysql2(otherPool, tally);
        try {
          await raw.query('CREATE TABLE IF NOT EXISTS wrap_m2_core (id INT PRIMARY KEY, label VARCHAR(40))');
          await raw.query('DELETE FROM wrap_m2_core');
          const observe = async (c: mysql2.Connection | mysql2.Pool, first: number) => {
            const inserting = c.query('INSERT INTO wrap_m2_core VALUES ?', [
              [
                [first, 'a'],
                [first + 1, 'b'],
              ],
            ]);
            const ownClass = inserting instanceof OwnPromise;
            const [header] = await inserting;
            const [rowsRead, fields] = await c.execute('SELECT label FROM wrap_m2_core WHERE id >= ? ORDER BY id', [first]);
            const error = (await rejectionOf(c.execute('INSERT INTO wrap_m2_core VALUES (?, ?)', [first, 'dup']))) as Error & { code?: string };
            const noTable = (await rejectionOf(c.query('SELECT * FROM no_such_table'))) as Error & { code?: string };
            return {
              ownClass,
              affected: (header as mysql2.ResultSetHeader).affectedRows,
              rows: rowsRead,
              fields: fields.map((f) => f.name),
              errors: [error.code, noTable.code, error instanceof Error],
              // mysql2 (trace on) puts the caller's stack under the server's error: it leads back here.
              stacksLeadHere: [error.stack?.includes('driver-wrap.test.ts'), noTable.stack?.includes('driver-wrap.test.ts')],
            };
          };
          const seen = await observe(raw, 1);
          expect(seen).toMatchObject({ ownClass: true, affected: 2, errors: ['ER_DUP_ENTRY', 'ER_NO_SUCH_TABLE', true], stacksLeadHere: [true, true] });
          expect(await observe(wrapped, 11)).toEqual({ ...seen, rows: [{ label: 'a' }, { label: 'b' }] });
          expect(await observe(rawPool, 21)).toEqual({ ...seen, rows: [{ label: 'a' }, { label: 'b' }] });
          expect(await observe(wrappedPool, 31)).toEqual({ ...seen, rows: [{ label: 'a' }, { label: 'b' }] });
          // A prepared statement's execute goes through the callback statement underneath the same way.
          const prepared = async (c: mysql2.Connection, id: number) => {
            const statement = await c.prepare('INSERT INTO wrap_m2_core VALUES (?, ?)');
            const executing = statement.execute([id, 'p']);
            const ownClass = executing instanceof OwnPromise;
            const [header] = await executing;
            const error = (await rejectionOf(statement.execute([id, 'dup']))) as Error & { code?: string };
            statement.close();
            return {
              ownClass,
              affected: (header as mysql2.ResultSetHeader).affectedRows,
              error: error.code,
              stackLeadsHere: error.stack?.includes('driver-wrap.test.ts'),
            };
          };
          const rawPrepared = await prepared(raw, 41);
          expect(rawPrepared).toEqual({ ownClass: true, affected: 1, error: 'ER_DUP_ENTRY', stackLeadsHere: true });
          expect(await prepared(wrapped, 42)).toEqual(rawPrepared);
          // Each call once, on the connection that ran it (the pool's without an id: the pool does not say which).
          expect(
            tally.events.map(
              (e) =>
                `${e.method}/${e.statementClass}/b${e.bindValues}/r${e.rowsAffected}/${e.error === null ? 'ok' : 'error'}/${e.connectionId === null ? 'pool' : e.connectionId === other.threadId ? 'conn' : '?'}`,
            ),
          ).toEqual([
            'query/insert/b4/r2/ok/conn',
            'execute/select/b1/rnull/ok/conn',
            'execute/insert/b2/rnull/error/conn',
            'query/select/b0/rnull/error/conn',
            'query/insert/b4/r2/ok/pool',
            'execute/select/b1/rnull/ok/pool',
            'execute/insert/b2/rnull/error/pool',
            'query/select/b0/rnull/error/pool',
            'prepare/insert/b0/rnull/ok/conn',
            'execute/insert/b2/r1/ok/conn',
            'execute/insert/b2/rnull/error/conn',
          ]);
        } finally {
          await Promise.all([raw.end(), other.end(), rawPool.end(), otherPool.end()]);
        }
      });

      it('counts the callback API and pool paths once, even when wrapped twice', async () => {
        const info = network(backend().connection);
        const options = { host: info.host, port: info.port, user: info.user, password: info.password, database: info.database };
        const tally = new DriverTally();
        const core = mysql2Callback.createConnection(options);
        const once = wrapMysql2(core, tally);
        const c = wrapMysql2(once, tally);
        expect(c).toBe(once);
        try {
          const id = await new Promise<number>((resolve, reject) =>
            c.query('SELECT CONNECTION_ID() AS id', (err, result) => (err ? reject(err) : resolve((result as { id: number }[])[0]!.id))),
          );
          await new Promise<void>((resolve, reject) => c.execute('SELECT ? AS v', [1], (err) => (err ? reject(err) : resolve())));
          await new Promise<void>((resolve) => c.query('SELECT 2').on('end', () => resolve()));
          // promise() on a wrapped callback connection hands back a counted promise connection.
          await c.promise().query('SELECT 3');
          expect(tally.events.map((e) => `${e.kind}:${e.sql}:${e.connectionId}`)).toEqual([
            `query:SELECT CONNECTION_ID() AS id:${id}`,
            `execute:SELECT ? AS v:${id}`,
            `query:SELECT 2:${id}`,
            `query:SELECT 3:${id}`,
          ]);
        } finally {
          await new Promise<void>((resolve) => core.end(() => resolve()));
        }

        const poolTally = new DriverTally();
        const pool = wrapMysql2(mysql2.createPool({ ...options, connectionLimit: 2 }), poolTally);
        try {
          await pool.query('SELECT 1');
          await pool.execute('SELECT ? AS v', [2]);
          const pc = await pool.getConnection();
          const [[{ id }]] = (await pc.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
          pc.release();
          expect(poolTally.events.map((e) => `${e.kind}:${e.connectionId === null ? 'pool' : e.connectionId}`)).toEqual([
            'query:pool',
            'execute:pool',
            `query:${id}`,
          ]);
        } finally {
          await pool.end();
        }
      });

      it("tells a callback-API prepared statement's executes apart by their values, and counts each on the server", async () => {
        const info = network(backend().connection);
        const core = mysql2Callback.createConnection({ host: info.host, port: info.port, user: info.user, password: info.password, database: info.database });
        const recorder = new DriverRecorder();
        const c = wrapMysql2(core, recorder);
        const run = <R>(f: (cb: (err: unknown, result?: R) => void) => void): Promise<R> =>
          new Promise((resolve, reject) => f((err, result) => (err ? reject(err) : resolve(result as R))));
        try {
          await run((cb) => c.query('CREATE TEMPORARY TABLE wrap_m2_cb (id INT)', cb));
          const statement = await run<mysql2Callback.PrepareStatementInfo>((cb) => c.prepare('INSERT INTO wrap_m2_cb VALUES (?)', cb));
          recorder.begin();
          for (const id of [1, 2, 2]) await run((cb) => statement.execute([id], cb));
          const window = recorder.end();
          statement.close();
          const [row] = await run<Array<{ n: number }>>((cb) =>
            c.query('SELECT COUNT(*) AS n FROM wrap_m2_cb', (err: unknown, result: unknown) => cb(err, result as Array<{ n: number }>)),
          );
          expect(Number(row!.n)).toBe(3);
          const execute = window.layer.shapes.find((shape) => shape.kind === 'execute');
          // Values 1, 2, 2: a repeat of one set, not three; the window used to see an empty list for every call.
          expect(execute).toMatchObject({ calls: 3, parameterSets: 3, rows: 3, distinctParameterSets: 2, distinctOf: 3 });
          expect(window.layer.bindValues).toBe(3);
        } finally {
          await new Promise<void>((resolve) => core.end(() => resolve()));
        }
      });

      it('agrees with mysql2’s own diagnostics_channel on query and execute counts', async () => {
        const seen = { query: 0, execute: 0 };
        const handlers = (name: keyof typeof seen) => ({
          start: () => {
            seen[name]++;
          },
          end: () => undefined,
          asyncStart: () => undefined,
          asyncEnd: () => undefined,
          error: () => undefined,
        });
        const queryHandlers = handlers('query');
        const executeHandlers = handlers('execute');
        const queryChannel = dc.tracingChannel('mysql2:query');
        const executeChannel = dc.tracingChannel('mysql2:execute');
        const tally = new DriverTally();
        const conn = await openCountedConnection('mysql2', backend().connection, tally);
        queryChannel.subscribe(queryHandlers);
        executeChannel.subscribe(executeHandlers);
        try {
          const c = conn.handle;
          await c.query('CREATE TEMPORARY TABLE wrap_dc (id INT PRIMARY KEY, label VARCHAR(40), score DOUBLE)');
          await c.query('INSERT INTO wrap_dc VALUES ?', [rows(20)]);
          for (const r of rows(5, 20)) await c.execute('INSERT INTO wrap_dc VALUES (?, ?, ?)', r);
          await c.beginTransaction();
          await c.query('SELECT * FROM wrap_dc');
          await c.rollback();
          await rejectionOf(c.query('SELECT * FROM no_such_table'));
          // The callback connection underneath is handed out counted too (typings omit `.connection`).
          const core = (c as unknown as { connection: mysql2Callback.Connection }).connection;
          await new Promise<void>((resolve) => core.query('SELECT 1', () => resolve()));
        } finally {
          queryChannel.unsubscribe(queryHandlers);
          executeChannel.unsubscribe(executeHandlers);
          await conn.close();
        }
        const events = tally.events;
        expect(events.filter((e) => e.kind === 'query')).toHaveLength(seen.query);
        expect(events.filter((e) => e.kind === 'execute')).toHaveLength(seen.execute);
        expect(seen).toEqual({ query: 7, execute: 5 });
      });
    });

    describe('mariadb', () => {
      for (const bulk of [true, false]) {
        it(`records batch() as one event with N parameter sets (bulk ${bulk ? 'on' : 'off'})`, async () => {
          const tally = new DriverTally();
          const conn = await openCountedConnection('mariadb', backend().connection, tally, { driverOptions: { bulk } });
          try {
            const c = conn.handle;
            await c.query('DROP TABLE IF EXISTS wrap_mdb');
            await c.query('CREATE TABLE wrap_mdb (id INT PRIMARY KEY, label VARCHAR(40), score DOUBLE)');
            const mark = tally.mark();
            const n = 250;
            const result = await c.batch('INSERT INTO wrap_mdb VALUES (?, ?, ?)', rows(n));
            const count = await c.query('SELECT COUNT(*) AS n FROM wrap_mdb');
            const threadId = await c.query('SELECT CONNECTION_ID() AS id');
            expect(Number((count as { n: bigint }[])[0]!.n)).toBe(n);
            // One OK packet, or one per row (no bulk, or a server sending bulk unit results): rows add up either way.
            const packets = (Array.isArray(result) ? result : [result]) as { affectedRows: number }[];
            expect(packets.reduce((sum, p) => sum + Number(p.affectedRows), 0)).toBe(n);
            expect(brief(tally.since(mark))).toEqual([
              `batch/batch/insert/b${n * COLUMNS}/p${n}/r${n}`,
              'query/query/select/b0/p1/rnull',
              'query/query/select/b0/p1/rnull',
            ]);
            const id = Number((threadId as { id: number }[])[0]!.id);
            expect(conn.connectionId).toBe(id);
            expect(tally.since(mark).every((e) => e.connectionId === id)).toBe(true);
          } finally {
            await conn.close();
          }
        });
      }

      it('counts query, execute, prepare and transaction control, with the same results and errors', async () => {
        const info = backend().connection;
        const raw = await openRawConnection('mariadb', info);
        const other = await openRawConnection('mariadb', info);
        const tally = new DriverTally();
        const spy = rememberRejection(other.handle, 'query');
        const c = wrapMariadb(other.handle, tally);
        expect(wrapMariadb(c, tally)).toBe(c);
        try {
          await raw.handle.query('CREATE TABLE IF NOT EXISTS wrap_mdb_same (id INT PRIMARY KEY, label VARCHAR(40))');
          await raw.handle.query('DELETE FROM wrap_mdb_same');
          const mark = tally.mark();
          await c.beginTransaction();
          // The connector expands an array parameter to a value list: `(?)` with [1, 'a'] becomes `(1,'a')`.
          await c.query('INSERT INTO wrap_mdb_same VALUES (?), (?)', [
            [1, 'a'],
            [2, 'b'],
          ]);
          await c.execute('INSERT INTO wrap_mdb_same VALUES (?, ?)', [3, 'c']);
          const prepared = await c.prepare('INSERT INTO wrap_mdb_same VALUES (?, ?)');
          await prepared.execute([4, 'd']);
          prepared.close();
          await c.commit();
          expect(await c.query('SELECT * FROM wrap_mdb_same ORDER BY id')).toEqual(await raw.handle.query('SELECT * FROM wrap_mdb_same ORDER BY id'));
          expect(brief(tally.since(mark))).toEqual([
            'beginTransaction/query/begin/b0/p1/rnull',
            'query/query/insert/b4/p1/r2',
            'execute/execute/insert/b2/p1/r1',
            'prepare/prepare/insert/b0/p0/rnull',
            'execute/execute/insert/b2/p1/r1',
            'commit/query/commit/b0/p1/rnull',
            'query/query/select/b0/p1/rnull',
          ]);
          expect(c.threadId).toBe(other.connectionId);

          const error = await rejectionOf(c.query('INSERT INTO wrap_mdb_same VALUES (1, "dup")'));
          expect(error).toBe(spy.seen());
          expect((error as { code?: string }).code).toBe('ER_DUP_ENTRY');
          expect(tally.events.at(-1)).toMatchObject({ error: (error as Error).message });
        } finally {
          await raw.close();
          await other.close();
        }
      });

      it('counts pool queries and pool connections', async () => {
        const info = network(backend().connection);
        const tally = new DriverTally();
        const pool = wrapMariadb(
          mariadb.createPool({ host: info.host, port: info.port, user: info.user, password: info.password, database: info.database, connectionLimit: 2 }),
          tally,
        );
        try {
          await pool.query('CREATE TABLE IF NOT EXISTS wrap_mdb_pool (id INT)');
          await pool.batch('INSERT INTO wrap_mdb_pool VALUES (?)', [[1], [2]]);
          const pc = await pool.getConnection();
          const [{ id }] = (await pc.query('SELECT CONNECTION_ID() AS id')) as [{ id: number }];
          await pc.release();
          expect(tally.events.map((e) => `${e.kind}:${e.parameterSets}:${e.connectionId === null ? 'pool' : e.connectionId}`)).toEqual([
            'query:1:pool',
            'batch:2:pool',
            `query:1:${Number(id)}`,
          ]);
        } finally {
          await pool.end();
        }
      });
    });
  },
  (b) => NETWORK_BACKENDS.has(b.id),
);
