// @waits 20: every driver of each backend, each installed release, one workload on the fast and on the plain path.
import { CaptureSession } from '../src/capture/capture';
import type { Tally } from '../src/capture/tally';
import { DRIVER_PATH_ENV, pathLabel } from '../src/driver/compat/path';
import type { DriverName } from '../src/shared/driver-names';
import { DRIVERS, driversFor } from '../src/driver/registry';
import { compatReleases, releaseVersion } from '../src/driver/releases';
import { countSnapshotOf } from '../src/jest/count-snapshot';
import { describeEachBackend, withBackend } from './harness';

const TABLE = 'dp_items';

/**
 * One workload per driver that goes through every fast path it has (promise methods, a prepared statement, a
 * transaction, templates and `unsafe`), the same on both paths. Keyed by driver, so a new driver must say its own.
 */
const WORKLOADS: { [D in DriverName]: (h: any) => Promise<void> } = {
  mysql2: async (c) => {
    await c.beginTransaction();
    await c.query(`INSERT INTO ${TABLE} (id, label) VALUES ?`, [
      [
        [1, 'a'],
        [2, 'b'],
      ],
    ]);
    await c.execute(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`, [3, 'c']);
    const statement = await c.prepare(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`);
    await statement.execute([4, 'd']);
    await statement.close();
    await c.commit();
  },
  mariadb: async (c) => {
    await c.beginTransaction();
    await c.query(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`, [1, 'a']);
    await c.batch(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`, [
      [2, 'b'],
      [3, 'c'],
      [4, 'd'],
    ]);
    await c.commit();
  },
  pg: async (c) => {
    await c.query('BEGIN');
    await c.query(`INSERT INTO ${TABLE} (id, label) VALUES ($1, $2), ($3, $4)`, [1, 'a', 2, 'b']);
    await c.query({ text: `INSERT INTO ${TABLE} (id, label) VALUES ($1, $2)`, values: [3, 'c'], name: 'dp_insert' });
    await new Promise<void>((resolve, reject) => c.query(`INSERT INTO ${TABLE} (id, label) VALUES (4, 'd')`, (e: unknown) => (e ? reject(e) : resolve())));
    await c.query('COMMIT');
  },
  'better-sqlite3': async (db) => {
    const insert = db.prepare(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`);
    db.transaction(() => {
      insert.run(1, 'a');
      insert.run(2, 'b');
    })();
    db.prepare(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`).bind(3, 'c').run();
    db.prepare(`INSERT INTO ${TABLE} (id, label) VALUES (@id, @label)`).run({ id: 4, label: 'd' });
    db.prepare(`SELECT count(*) AS n FROM ${TABLE}`).get();
  },
  sqlite3: async (db) => {
    const run = (sql: string, ...params: unknown[]) =>
      new Promise<void>((resolve, reject) => db.run(sql, ...params, (e: unknown) => (e ? reject(e) : resolve())));
    await run('BEGIN');
    await run(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?), (?, ?)`, 1, 'a', 2, 'b');
    const insert = db.prepare(`INSERT INTO ${TABLE} (id, label) VALUES (?, ?)`);
    await new Promise<void>((resolve, reject) => insert.run(3, 'c', (e: unknown) => (e ? reject(e) : resolve())));
    await new Promise<void>((resolve, reject) => insert.finalize((e: unknown) => (e ? reject(e) : resolve())));
    await run('COMMIT');
    await run(`INSERT INTO ${TABLE} (id, label) VALUES ($id, $label)`, { $id: 4, $label: 'd' });
  },
  'postgres-js': async (sql) => {
    await sql.begin(async (tx: any) => {
      await tx`INSERT INTO ${tx(TABLE)} ${tx(
        [
          { id: 1, label: 'a' },
          { id: 2, label: 'b' },
        ],
        'id',
        'label',
      )}`;
      await tx`INSERT INTO ${tx(TABLE)} (id, label) VALUES (${3}, ${'c'})`;
    });
    await sql.unsafe(`INSERT INTO ${TABLE} (id, label) VALUES ($1, $2)`, [4, 'd']);
    await sql.unsafe(`SELECT count(*) AS n FROM ${TABLE}`);
    // A cursor read to its end and one left after its first batch, and describe(): none of them awaits the query itself.
    for await (const rows of sql`SELECT id FROM ${sql(TABLE)} WHERE id > ${0}`.cursor(3)) expect(rows.length).toBeGreaterThan(0);
    for await (const rows of sql`SELECT label FROM ${sql(TABLE)} WHERE id > ${0}`.cursor(1)) if (rows.length > 0) break;
    await sql`SELECT id FROM ${sql(TABLE)} WHERE id = ${1}`.describe();
  },
};

/**
 * Releases whose counts the driver model does not explain on this workload, on either path (so not a path's doing):
 * their verdict is `report`, with this reason in it. Keyed `driver@version`, or `backend:driver@version` where one server only.
 */
const MODEL_GAPS: Record<string, RegExp> = {};

async function setup(driver: DriverName, handle: any): Promise<void> {
  for (const sql of [`DROP TABLE IF EXISTS ${TABLE}`, `CREATE TABLE ${TABLE} (id int PRIMARY KEY, label varchar(40))`]) {
    await (DRIVERS[driver].runSql as (h: unknown, sql: string) => Promise<unknown>)(handle, sql);
  }
}

/** One session on `pkg` with the driver path switch as given; the workload measured hot, after its table is made. */
async function counted(backend: ReturnType<ReturnType<typeof withBackend>>, driver: DriverName, pkg: string, path: 'auto' | 'plain'): Promise<Tally> {
  const before = process.env[DRIVER_PATH_ENV];
  process.env[DRIVER_PATH_ENV] = path;
  try {
    await using session = await CaptureSession.open({
      backend,
      driver,
      driverPackage: pkg === DRIVERS[driver].packageName ? undefined : pkg,
      table: { name: TABLE },
    });
    await session.prepare((h) => setup(driver, h), { hot: true });
    const { result: _result, ...tally } = await session.measure((h) => WORKLOADS[driver](h), { hot: true });
    return tally;
  } finally {
    if (before === undefined) delete process.env[DRIVER_PATH_ENV];
    else process.env[DRIVER_PATH_ENV] = before;
  }
}

describeEachBackend((b) => {
  const backend = withBackend(b.id);
  for (const driver of driversFor(b.backend)) {
    for (const pkg of compatReleases(driver)) {
      it(`${driver} ${releaseVersion(pkg)} (${pkg}): the same counts on every layer on the fast and the plain path`, async () => {
        const fast = await counted(backend(), driver, pkg, 'auto');
        const plain = await counted(backend(), driver, pkg, 'plain');
        const fastPath = fast.drivers.find((d) => d.name === driver)?.path;
        const plainPath = plain.drivers.find((d) => d.name === driver)?.path;
        // The path each took, in the test log: an older or newer release may take the plain path by itself.
        console.log(`${b.id} ${driver} ${releaseVersion(pkg)}: auto -> ${pathLabel(fastPath)}; forced -> ${pathLabel(plainPath)}`);
        const gap = MODEL_GAPS[`${b.backend}:${driver}@${releaseVersion(pkg)}`] ?? MODEL_GAPS[`${driver}@${releaseVersion(pkg)}`];
        if (gap) expect(fast.verdict).toMatchObject({ kind: 'report', reason: expect.stringMatching(gap) });
        else
          expect({ verdict: fast.verdict.kind, reason: fast.verdict.kind === 'assert' ? null : fast.verdict.reason }).toEqual({
            verdict: 'assert',
            reason: null,
          });
        expect(plain.verdict.kind).toBe(fast.verdict.kind);
        const fastSnapshot = countSnapshotOf(fast);
        expect(fastSnapshot.ok).toBe(true);
        expect(countSnapshotOf(plain)).toEqual(fastSnapshot);
        expect(plain.layers.driver?.calls).toBe(fast.layers.driver?.calls);
        expect(plain.layers.server?.summary).toEqual(fast.layers.server?.summary);
        // Drivers counted through their public API only have no path to name.
        if (driver === 'mariadb' || driver === 'sqlite3') {
          expect(fastPath).toBeUndefined();
        } else {
          expect(plainPath?.fast).toEqual([]);
          expect(plainPath?.plain.length).toBeGreaterThan(0);
          // The pinned release must take the fast path: a driver upgrade that moves it to the plain one shows here.
          if (pkg === DRIVERS[driver].packageName) expect(pathLabel(fastPath)).toBe('fast path');
        }
      });
    }
  }
});
