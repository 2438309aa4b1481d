import type { StartedBackend } from '../src/backends/types';
import type { DriverName } from '../src/shared/driver-names';
import { canPing, openRawConnection, pingConnection, wrapConnection, type DriverHandle } from '../src/driver/open';
import { DriverTally, windowOfEvents } from '../src/driver/driver-layer';
import { createProbe, type ServerProbe, type WindowContext } from '../src/server';
import type { DriverOptions } from '../src/verdict/reconcile';
import { decideVerdict } from '../src/verdict/verdict';
import { describeEachBackend, withBackend } from './harness';

/**
 * The driver model against real drivers and servers: driver layer, server layer and reconciliation line up for every
 * modelled strategy, and a model told the wrong thing (bulk on, connection off) names the difference.
 */

const ROWS = 200;
let seq = 0;
const tableName = () => `h4_verdict_${process.pid}_${++seq}`;
const data = (n: number): [number, string][] => Array.from({ length: n }, (_, i) => [i, `v-${i}`]);

interface Strategy<D extends DriverName> {
  name: string;
  driverOptions?: DriverOptions;
  /** What the verdict's model is told; defaults to `driverOptions`. */
  declaredOptions?: DriverOptions;
  run(handle: DriverHandle<D>, table: string): Promise<void>;
  /** Discrepancies the model must report (substrings), or none. */
  discrepancies?: string[];
}

async function runWindow<D extends DriverName>(
  backend: StartedBackend,
  probe: ServerProbe,
  driver: D,
  strategy: Strategy<D>,
  createTable: (raw: DriverHandle<D>, table: string) => Promise<void>,
  raw: (handle: DriverHandle<D>, sql: string) => Promise<unknown[]>,
) {
  const tally = new DriverTally();
  const opened = await openRawConnection(driver, backend.connection, {
    driverOptions: strategy.driverOptions as Record<string, unknown> | undefined,
    backend: backend.description.id,
  });
  // The probe's own SQL (PostgreSQL's forced flush) goes through the raw handle, so it never enters the driver layer.
  const counted = wrapConnection(driver, opened.handle, tally);
  const table = tableName();
  try {
    await createTable(opened.handle, table);
    const ctx: WindowContext = {
      workloadConnectionIds: [opened.connectionId ?? 0],
      table: { schema: backend.description.flavour === 'postgres' ? 'public' : undefined, name: table },
      onWorkloadConnection: (sql) => raw(opened.handle, sql),
      // MySQL files a statement in performance_schema after answering it: a ping answered on the same connection
      // before each reading waits that out (the probe refuses exact per-connection counts without it).
      ...(canPing(driver)
        ? {
            settle: async () => {
              await pingConnection(driver, opened.handle);
              return [];
            },
          }
        : {}),
    };
    const win = await probe.begin(ctx);
    const mark = tally.mark();
    await strategy.run(counted, table);
    const driverLayer = tally.summarize(mark);
    const server = await win.end();
    return decideVerdict({
      backend: backend.description,
      driverName: driver,
      driverOptions: strategy.declaredOptions ?? strategy.driverOptions,
      driver: driverLayer,
      driverWindow: windowOfEvents(tally.since(mark)),
      wire: null,
      server,
    });
  } finally {
    await opened.close();
  }
}

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    let probe: ServerProbe;
    beforeAll(async () => {
      probe = await createProbe(get());
    });
    afterAll(async () => probe?.close());

    const mysqlRaw = async (h: DriverHandle<'mysql2'>, sql: string) => (await h.query(sql))[0] as unknown[];
    const mysqlTable = async (h: DriverHandle<'mysql2'>, t: string) => {
      await mysqlRaw(h, `CREATE TABLE ${t} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40) NOT NULL)`);
    };
    const mariaRaw = async (h: DriverHandle<'mariadb'>, sql: string) => (await h.query(sql)) as unknown[];
    const mariaTable = async (h: DriverHandle<'mariadb'>, t: string) => {
      await mariaRaw(h, `CREATE TABLE ${t} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40) NOT NULL)`);
    };

    const mysql2Strategies: Strategy<'mysql2'>[] = [
      { name: 'mysql2 multi-row query', run: async (h, t) => void (await h.query(`INSERT INTO ${t} (a, b) VALUES ?`, [data(ROWS)])) },
      {
        name: 'mysql2 execute per row',
        run: async (h, t) => {
          for (const [a, s] of data(ROWS)) await h.execute(`INSERT INTO ${t} (a, b) VALUES (?, ?)`, [a, s]);
        },
      },
    ];
    for (const s of mysql2Strategies) {
      it(`${s.name}: layers reconcile with no unexplained discrepancy, verdict assert`, async () => {
        const v = await runWindow(get(), probe, 'mysql2', s, mysqlTable, mysqlRaw);
        expect({ kind: v.kind, discrepancies: v.discrepancies }).toEqual({ kind: 'assert', discrepancies: [] });
        expect(v.reconciliation.some((l) => l.startsWith('server: statements'))).toBe(true);
      });
    }

    const batch = (h: DriverHandle<'mariadb'>, t: string) => h.batch(`INSERT INTO ${t} (a, b) VALUES (?, ?)`, data(ROWS)).then(() => undefined);
    const mariadbStrategies: Strategy<'mariadb'>[] = [
      { name: 'mariadb batch (bulk default)', run: batch },
      { name: 'mariadb batch with bulk off', driverOptions: { bulk: false }, run: batch },
      {
        name: 'mariadb batch with bulk off, model told bulk on',
        driverOptions: { bulk: false },
        declaredOptions: { bulk: true },
        run: batch,
        // Only a server that has bulk can show the fallback: on MySQL, bulk-on and bulk-off are the same.
        discrepancies: b.backend === 'mariadb' ? ['the connector fell back from bulk'] : [],
      },
    ];
    for (const s of mariadbStrategies) {
      it(`${s.name}: ${s.discrepancies?.length ? 'the model names the fallback, and layers that disagree are not assert' : 'layers reconcile, verdict assert'}`, async () => {
        const v = await runWindow(get(), probe, 'mariadb', s, mariaTable, mariaRaw);
        expect(v.kind).toBe(s.discrepancies?.length ? 'report' : 'assert');
        if (s.discrepancies?.length) expect(v.reason).toMatch(/^the layers disagree where the driver model cannot explain it: /);
        const wanted = s.discrepancies ?? [];
        if (wanted.length === 0) expect(v.discrepancies).toEqual([]);
        for (const w of wanted) expect(v.discrepancies.some((d) => d.includes(w))).toBe(true);
      });
    }
  },
  (b) => b.backend === 'mariadb' || b.backend === 'mysql',
);

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    let probe: ServerProbe;
    beforeAll(async () => {
      probe = await createProbe(get());
    });
    afterAll(async () => probe?.close());

    const raw = async (h: DriverHandle<'pg'>, sql: string) => (await h.query(sql)).rows as unknown[];
    const table = async (h: DriverHandle<'pg'>, t: string) => {
      await h.query(`CREATE TABLE public.${t} (id serial PRIMARY KEY, a int NOT NULL, b text NOT NULL) WITH (autovacuum_enabled = false)`);
    };
    const strategies: Strategy<'pg'>[] = [
      {
        name: 'pg multi-row parameterised INSERT',
        run: async (h, t) => {
          const ph = data(ROWS)
            .map((_, i) => `($${2 * i + 1}, $${2 * i + 2})`)
            .join(', ');
          await h.query(`INSERT INTO public.${t} (a, b) VALUES ${ph}`, data(ROWS).flat());
        },
      },
      {
        name: 'pg unnest INSERT',
        run: async (h, t) => {
          const rows = data(ROWS);
          await h.query(`INSERT INTO public.${t} (a, b) SELECT * FROM unnest($1::int[], $2::text[])`, [rows.map((r) => r[0]), rows.map((r) => r[1])]);
        },
      },
    ];
    for (const s of strategies) {
      it(`${s.name}: layers reconcile, verdict assert`, async () => {
        const v = await runWindow(get(), probe, 'pg', s, table, raw);
        expect({ kind: v.kind, discrepancies: v.discrepancies }).toEqual({ kind: 'assert', discrepancies: [] });
      });
    }
  },
  (b) => b.backend === 'postgres',
);

describeEachBackend(
  (b) => {
    const get = withBackend(b.id);
    let probe: ServerProbe;
    beforeAll(async () => {
      probe = await createProbe(get());
    });
    afterAll(async () => probe?.close());

    it('better-sqlite3 prepared run per row in a transaction: rows reconcile with total_changes, verdict assert', async () => {
      // The probe reads through a raw handle on the same file: total_changes() is per connection, so it must be
      // the workload's own. Open the raw handle and wrap that one.
      const rawOpened = await openRawConnection('better-sqlite3', get().connection, { backend: get().description.id });
      const tally = new DriverTally();
      const counted = wrapConnection('better-sqlite3', rawOpened.handle, tally);
      const t = tableName();
      try {
        rawOpened.handle.exec(`CREATE TABLE ${t} (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b TEXT NOT NULL)`);
        const win = await probe.begin({
          workloadConnectionIds: [0],
          table: { name: t },
          onWorkloadConnection: async (sql) => rawOpened.handle.prepare(sql).all(),
        });
        const mark = tally.mark();
        const insert = counted.prepare(`INSERT INTO ${t} (a, b) VALUES (?, ?)`);
        counted.transaction((rows: [number, string][]) => {
          for (const r of rows) insert.run(r[0], r[1]);
        })(data(ROWS));
        const driverLayer = tally.summarize(mark);
        const server = await win.end();
        const v = decideVerdict({
          backend: get().description,
          driverName: 'better-sqlite3',
          driver: driverLayer,
          driverWindow: windowOfEvents(tally.since(mark)),
          wire: null,
          server,
        });
        expect({ kind: v.kind, discrepancies: v.discrepancies }).toEqual({ kind: 'assert', discrepancies: [] });
        expect(v.reconciliation).toContain(`server: rowsInserted ${ROWS}`);
      } finally {
        await rawOpened.close();
      }
    });
  },
  (b) => b.backend === 'sqlite',
);
