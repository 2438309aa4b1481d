import { itOnFastPath } from './compat/path.fixture';
import postgres from 'postgres';
import { DriverTally } from './driver-layer';
import { wrapPostgresJs } from './postgres-js';
import { freePort } from '../backends/local-process';

type Built = Record<PropertyKey, unknown> & { handler: ((q: unknown) => unknown) & { debug?: unknown } };

describe('wrapPostgresJs: a query is counted through its handler, when it runs', () => {
  let port: number;
  beforeAll(async () => {
    port = await freePort();
  });

  const open = (debug = false) => postgres({ host: '127.0.0.1', port, max: 1, debug, connect_timeout: 2, onnotice: () => undefined });
  type Raw = ReturnType<typeof open>;
  /** A raw `sql` and the same one counted into a tally, ended after `body`. */
  const withCounted = async (body: (sql: Raw, raw: Raw, tally: DriverTally) => Promise<void>): Promise<void> => {
    const raw = open();
    const tally = new DriverTally();
    try {
      await body(wrapPostgresJs(raw, tally), raw, tally);
    } finally {
      await raw.end({ timeout: 0 });
    }
  };
  const failureOf = (query: Promise<unknown>): Promise<(Error & { code?: string }) | null> =>
    query.then(
      () => null,
      (e: unknown) => e as Error & { code?: string },
    );

  itOnFastPath('leaves a query built and never run with the properties raw postgres.js gives it, and records nothing', () =>
    withCounted(async (sql, raw, tally) => {
      const shape = (q: object): PropertyKey[] => Reflect.ownKeys(q).sort((a, b) => String(a).localeCompare(String(b)));
      const built = sql`SELECT ${1}::int AS n` as unknown as Built;
      const plain = raw`SELECT ${1}::int AS n` as unknown as Built;
      expect(shape(built)).toEqual(shape(plain));
      // The one field written: the handler postgres.js calls when the query runs, shared by the queries of one method.
      expect(built.handler).not.toBe(plain.handler);
      expect((sql`SELECT ${2}::int AS m` as unknown as Built).handler).toBe(built.handler);
      const unsafe = sql.unsafe('SELECT 1') as unknown as Built;
      expect(unsafe.handler).not.toBe(built.handler);
      expect((sql.unsafe('SELECT 2') as unknown as Built).handler).toBe(unsafe.handler);
      expect(tally.events).toEqual([]);
    }),
  );

  it.each([false, true])('keeps the debug flag postgres.js reads off the handler to explain an error (debug %s)', async (debug) => {
    const raw = open(debug);
    try {
      const plain = raw`SELECT 1` as unknown as Built;
      const built = wrapPostgresJs(raw, new DriverTally())`SELECT 1` as unknown as Built;
      expect(built.handler.debug).toBe(plain.handler.debug);
      expect(built.handler.debug).toBe(debug);
    } finally {
      await raw.end({ timeout: 0 });
    }
  });

  it('counts a query that runs and fails once, with its error, and rejects it as raw postgres.js does', () =>
    withCounted(async (sql, raw, tally) => {
      const rawError = await failureOf(raw`SELECT ${1}::int AS n`);
      const error = await failureOf(sql`SELECT ${1}::int AS n`);
      expect(rawError?.code).toBe('ECONNREFUSED');
      expect(error?.code).toBe(rawError?.code);
      const events = tally.events;
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ driver: 'postgres-js', method: 'sql', kind: 'query', statementClass: 'select' });
      expect(events[0]?.error).toMatch(/ECONNREFUSED/);
    }));

  it.each([
    ['returns call sites, not a string', (_e: Error, sites: unknown[]) => sites],
    [
      'throws',
      () => {
        throw new Error('prepareStackTrace failed');
      },
    ],
  ])("builds and counts a query when a prepareStackTrace of the user's %s", (_what, prepare) =>
    withCounted(async (sql, _raw, tally) => {
      const before = Error.prepareStackTrace;
      // A template this file builds nowhere else, so the wrapper meets it for the first time here.
      let query: Promise<unknown>;
      Error.prepareStackTrace = prepare as typeof Error.prepareStackTrace;
      try {
        query = sql`SELECT ${1}::int AS under_custom_prepare`;
      } finally {
        Error.prepareStackTrace = before;
      }
      expect((await failureOf(query))?.code).toBe('ECONNREFUSED');
      expect(tally.events.map((e) => e.method)).toEqual(['sql']);
    }),
  );

  it('counts a fragment only as part of the query that runs it', () =>
    withCounted(async (sql, _raw, tally) => {
      const where = sql`WHERE n > ${2}`;
      await failureOf(sql`SELECT n FROM t ${where}`);
      // Never connected, so postgres.js built no text to send: the event carries the template's; one event, not two.
      expect(tally.events.map((e) => e.method)).toEqual(['sql']);
    }));
});
