/**
 * The measured side of bench/driver-cpu.ts, bundled and run under callgrind:
 *   node driver-cpu-child.js <select|per-row|per-row-spread|prepare-run|window|bind|bind-open|pg-call|mysql2-call|mysql2-callback-call|mysql2-prepared-call|mysql2-values|postgres-js-call> <raw|counted> <warm-up units> <measured units>
 * Prints the calls the counted side's windows counted (0 for raw).
 */
import Database from 'better-sqlite3';
// The build's code, as an installed sqltally runs it (see shipped.ts); the bundle keeps its require at run time.
import { createTableSql, DriverRecorder, insertHead, placeholderRows, workloadTable, wrapBetterSqlite3, wrapMysql2, wrapPg, wrapPostgresJs } from './shipped';
import { mysql2CallbackStandIn, mysql2StandIn, pgStandIn, postgresJsStandIn, STAND_IN_INSERT, type PgStandIn } from './stand-ins';

const PER_ROW_WINDOW = 5_000;

/** The child: runs `warmup` then `measured` units of the scenario; prints what the window counted. */
async function child(scenario: string, side: string, warmup: number, measured: number): Promise<void> {
  const raw = new Database(':memory:');
  const recorder = new DriverRecorder();
  const db = side === 'raw' ? raw : wrapBetterSqlite3(raw, recorder);
  const table = workloadTable('sqlite', 'bench_cpu');
  raw.exec(createTableSql(table));
  let calls = 0;
  const open = (): void => {
    if (side === 'counted') recorder.begin();
  };
  const close = (): void => {
    if (side === 'counted') calls += recorder.end().layer.calls;
  };
  if (scenario === 'select') {
    const st = db.prepare('SELECT 1');
    open();
    for (let i = 0; i < warmup + measured; i++) st.get();
    close();
  } else if (scenario === 'per-row' || scenario === 'per-row-spread') {
    const st = db.prepare(`${insertHead(table)} VALUES ${placeholderRows(table, 1)}`);
    const rows = scenario === 'per-row' ? [] : Array.from({ length: PER_ROW_WINDOW }, (_, i) => [i, i, i * 0.5, `t${i % 97}`, 'text', null]);
    const insert =
      scenario === 'per-row'
        ? db.transaction((from: number, n: number) => {
            for (let i = from; i < from + n; i++) st.run(i, i, i * 0.5, `t${i % 97}`, 'text', null);
          })
        : db.transaction((_from: number, n: number) => {
            for (let i = 0; i < n; i++) st.run(...rows[i]!);
          });
    for (let done = 0; done < warmup + measured; done += PER_ROW_WINDOW) {
      raw.exec(`DELETE FROM ${table.quoted}`);
      open();
      insert(done, Math.min(PER_ROW_WINDOW, warmup + measured - done));
      close();
    }
  } else if (scenario === 'prepare-run') {
    const sql = `${insertHead(table)} VALUES ${placeholderRows(table, 1)}`;
    open();
    for (let i = 0; i < warmup + measured; i++) db.prepare(sql).run(i, i, i * 0.5, `t${i % 97}`, 'text', null);
    close();
  } else if (scenario === 'pg-call' || scenario === 'mysql2-call') {
    // Awaited 2-value INSERTs of one text on a stand-in that settles at once (as bench/driver-overhead.ts's
    // own-network per-call figure), one window for all: a network driver's per-call path.
    const standIn = scenario === 'pg-call' ? pgStandIn() : mysql2StandIn();
    const client = (
      side === 'raw' ? standIn : scenario === 'pg-call' ? wrapPg(standIn as never, recorder) : wrapMysql2(standIn as never, recorder)
    ) as PgStandIn;
    const sql = scenario === 'pg-call' ? STAND_IN_INSERT.pg : STAND_IN_INSERT.mysql2;
    open();
    for (let i = 0; i < warmup + measured; i++) await client.query(sql, [i, 'x']);
    close();
  } else if (scenario === 'postgres-js-call') {
    // Awaited 2-value tagged INSERTs on a real postgres.js over an in-process socket that answers the protocol (no
    // server, no network): what counting adds to an executed postgres.js query, the driver's own work on both sides.
    const standIn = postgresJsStandIn();
    const sql = side === 'raw' ? standIn : wrapPostgresJs(standIn, recorder);
    open();
    for (let i = 0; i < warmup + measured; i++) await sql`INSERT INTO t (a, b) VALUES (${i}, ${'x'})`;
    close();
    await standIn.end();
  } else if (scenario === 'mysql2-values') {
    // One `VALUES ?` call of 5000 rows x 6 on mysql2's promise API (a stand-in that settles at once, formats nothing),
    // one window for all: what counting the values mysql2 would expand costs, 30000 of them a call.
    const standIn = mysql2StandIn();
    const client = side === 'raw' ? standIn : wrapMysql2(standIn as never, recorder);
    const rows = Array.from({ length: 5000 }, (_, r) => [r, r, r * 0.5, `t${r % 97}`, 'text', null]);
    open();
    for (let i = 0; i < warmup + measured; i++) await client.query('INSERT INTO t VALUES ?', [rows]);
    close();
  } else if (scenario === 'mysql2-prepared-call') {
    // A statement prepared once on mysql2's promise API, then executed in a loop of awaited calls.
    const standIn = mysql2StandIn();
    const client = side === 'raw' ? standIn : wrapMysql2(standIn as never, recorder);
    const prepared = await client.prepare(STAND_IN_INSERT.mysql2);
    open();
    for (let i = 0; i < warmup + measured; i++) await prepared.execute([i, 'x']);
    close();
  } else if (scenario === 'mysql2-callback-call') {
    // mysql2's callback API, as knex and kysely call it: the stand-in calls back on the next microtask.
    const standIn = mysql2CallbackStandIn();
    const client = side === 'raw' ? standIn : wrapMysql2(standIn as never, recorder);
    const call = (i: number): Promise<unknown> =>
      new Promise((resolve, reject) => client.query(STAND_IN_INSERT.mysql2, [i, 'x'], (e, r) => (e ? reject(e) : resolve(r))));
    open();
    for (let i = 0; i < warmup + measured; i++) await call(i);
    close();
  } else if (scenario === 'window') {
    // What the per-row-tx strategy's window holds, with two rows instead of thousands: what a window costs by itself.
    const sql = `${insertHead(table)} VALUES ${placeholderRows(table, 1)}`;
    for (let i = 0; i < warmup + measured; i++) {
      raw.exec(`DELETE FROM ${table.quoted}`);
      open();
      const st = db.prepare((' ' + sql).slice(1));
      const insert = db.transaction(() => {
        st.run(i, i, i * 0.5, `t${i % 97}`, 'text', null);
        st.run(i + 1, i, i * 0.5, `t${i % 97}`, 'text', null);
      });
      insert();
      close();
    }
  } else {
    const sql = `${insertHead(table)} VALUES ${placeholderRows(table, 5000)}`;
    const values: unknown[] = [];
    for (let r = 0; r < 5000; r++) values.push(r, r, r * 0.5, `t${r % 97}`, 'text', null);
    for (let i = 0; i < warmup + measured; i++) {
      raw.exec(`DELETE FROM ${table.quoted}`);
      const text = (' ' + sql).slice(1);
      open();
      db.prepare(text).run(values);
      if (scenario === 'bind') close();
    }
  }
  console.log(String(calls));
}

const [, , scenario, side, warmup, measured] = process.argv;
void child(scenario!, side!, Number(warmup), Number(measured));
