import { CaptureSession } from '../../src/capture/capture';
import { DRIVERS } from '../../src/driver/registry';
import type { Captured } from '../../src/capture/capture';
import type { BackendName } from '../../src/backends/types';
import type { DriverName } from '../../src/shared/driver-names';
import type { CallKind } from '../../src/sql/events';
import type { CountSpec } from '../../src/jest/expectations';
import { installSqltallyMatchers } from '../../src/jest/matchers';
import { describeEachBackend, withBackend } from '../harness';
import { bulkRows, BULK_PARENT_ID_SUM, BULK_ROWS, checkBulk, childrenOfParents, createTables, PARENTS } from './fixture';
import type { ChildRow } from './fixture';

installSqltallyMatchers();

/** An ORM (or a plain pool) built on a session the way its recipe in docs/counting-your-code.md says, warmed, ready for windows. */
export interface OrmUnderTest {
  /** The ORM's own bulk API, over every row given. */
  bulkInsert(rows: ChildRow[]): Promise<void>;
  /** Loads PARENTS parents, then the children of each one, one query at a time (the N+1 shape); children read. */
  readLoop(): Promise<number>;
  /** Ends the ORM and its pool: before the session closes. */
  end(): Promise<void>;
}

/** One ORM on one backend: its recipe and every count it must show, exactly, as read from the real server. */
export interface OrmCase {
  /** The driver package the ORM talks through on this backend. */
  driver: DriverName;
  /**
   * `counted`: the recipe hands the ORM a driver object counted with `session.count()`, so the driver layer is
   * there. Otherwise why it cannot be counted without private hacks: the driver layer is then null (wire and
   * server layers only).
   */
  driverLayer: 'counted' | { absent: string };
  /** Builds the ORM on the session and warms it (its start-up queries run here, outside every window). */
  open(session: CaptureSession): Promise<OrmUnderTest>;
  bulk: Expected;
  read: Expected & {
    /** The driver layer's shapes of the read loop, in order: fingerprint, kind and calls (counted cases only). */
    shapes?: [fingerprint: string, kind: CallKind, calls: number][];
    /**
     * Why the loop's shape names no caller (counted cases): the test then checks it stays null, so a change that
     * finds one shows. Without it, the shape must name the ORM call's line in the test file.
     */
    callerUnknown?: string;
  };
}

/**
 * `assert`: exact counts; a layer left out of them must be null in the tally (driver not counted, no wire on SQLite).
 * `report`: nothing can be asserted; the reason, which layers there are and the rows the server layer gives.
 */
type Expected =
  | { verdict: 'assert'; counts: CountSpec }
  | { verdict: 'report'; reason: RegExp; layers: { driver: boolean; wire: boolean; server: boolean }; rowsInserted: number | null };

/** A backend an ORM does not run on here, and why: shown as a skipped test, never silent. */
export interface NotSupported {
  notSupported: string;
}

export type OrmCases = Record<BackendName, OrmCase | NotSupported>;

function isNotSupported(c: OrmCase | NotSupported): c is NotSupported {
  return 'notSupported' in c;
}

/** The verdict, the layers there are (a layer left out must be null, not merely unchecked) and every count. */
function expectTally(tally: Captured<unknown>, expected: Expected): void {
  const layers = { driver: tally.layers.driver !== null, wire: tally.layers.wire !== null, server: tally.layers.server !== null };
  if (expected.verdict === 'report') {
    expect({ kind: tally.verdict.kind, reason: tally.verdict.reason, workloadError: tally.workloadError?.message ?? null, layers }).toEqual({
      kind: 'report',
      reason: expect.stringMatching(expected.reason),
      workloadError: null,
      layers: expected.layers,
    });
    expect(tally.layers.server?.summary.rowsInserted ?? null).toBe(expected.rowsInserted);
    if (!layers.driver) expect(tally.driverAbsent).toMatch(/no driver object was counted in this session/);
    return;
  }
  const { counts } = expected;
  // The diff below would hide the reason (any string matches): name it when the verdict is not the one expected.
  if (tally.verdict.kind !== 'assert') throw new Error(`verdict ${tally.verdict.kind}, not assert: ${tally.verdict.reason}`);
  expect({ kind: tally.verdict.kind, reason: tally.verdict.reason, workloadError: tally.workloadError?.message ?? null, layers }).toEqual({
    kind: 'assert',
    reason: expect.any(String),
    workloadError: null,
    layers: { driver: counts.driver !== undefined, wire: counts.wire !== undefined, server: counts.server !== undefined },
  });
  if (!counts.driver) expect(tally.driverAbsent).toMatch(/no driver object was counted in this session/);
  expect(tally).toHaveCounts(counts);
}

/**
 * The same tests for every ORM, on every backend: a bulk insert of BULK_ROWS rows through the ORM's own bulk API
 * and an N+1 read loop, each with exact counts on every layer the recipe has, rows checked through a fresh,
 * uncounted connection; and two windows on an ORM built once, with its start-up queries in neither.
 */
export function describeOrm(orm: string, cases: OrmCases): void {
  describeEachBackend((b) => {
    const c = cases[b.backend];
    if (isNotSupported(c)) {
      it.skip(`${orm} on ${b.backend}: not supported here: ${c.notSupported}`, () => undefined);
      return;
    }
    let session: CaptureSession | undefined;
    let under: OrmUnderTest | undefined;
    let tag = 0;
    // Declared before withBackend, as afterAll hooks run in order: the server must be up while the ORM ends its pool,
    // and the ORM closes first since the session refuses to close over connections still open through its proxy.
    afterAll(async () => {
      await under?.end();
      await session?.close();
    });
    const backend = withBackend(b.id);

    beforeAll(async () => {
      await createTables(backend(), c.driver);
      // An in-process engine's driver is the session's too: two SQLite copies must not hold one file open at once.
      const own = DRIVERS[c.driver].embedded ? { driver: c.driver } : {};
      session = await CaptureSession.open({
        backend: backend(),
        ...own,
        table: { name: 'children', ...(b.backend === 'postgres' ? { schema: 'public' } : {}) },
      });
      under = await c.open(session);
    });

    const what = c.driverLayer === 'counted' ? `${c.driver} counted` : `${c.driver} not counted: wire and server layers`;

    it(`${orm} (${what}): a bulk insert of ${BULK_ROWS} rows through its bulk API, exact on every layer, rows checked through a fresh connection`, async () => {
      const rows = bulkRows(`t${++tag}`);
      const tally = await session!.measure(() => under!.bulkInsert(rows));
      expectTally(tally, c.bulk);
      expect(await checkBulk(backend(), `t${tag}`, c.driver)).toEqual({ rows: BULK_ROWS, parentIdSum: BULK_PARENT_ID_SUM, distinctNames: BULK_ROWS });
    });

    it(`${orm} (${what}): an N+1 read loop (${PARENTS} parents, then the children of each), exact on every layer, one shape of ${PARENTS} calls`, async () => {
      let read = 0;
      const tally = await session!.measure(async () => {
        read = await under!.readLoop();
      });
      expectTally(tally, c.read);
      expect(read).toBe(await childrenOfParents(backend(), c.driver));
      if (c.driverLayer === 'counted') {
        const shapes = tally.layers.driver?.shapes.map((s) => [s.fingerprint, s.kind, s.calls]);
        expect(shapes).toEqual(c.read.shapes);
        // The SELECT's shape: an ORM may run a statement of its own beside each (Sequelize's PRAGMA table_info on SQLite).
        const loop = tally.layers.driver?.shapes.find((s) => s.calls === PARENTS && s.kind !== 'prepare' && s.statementClass === 'select');
        // Different parameters each time: an N+1, which the repeated-shapes matcher names.
        expect(loop).toMatchObject({ distinctParameterSets: PARENTS });
        // The line of the ORM call that made the shape, as the N+1 message names it: captured when the call is handed
        // to the driver (a callback API, knex and kysely on mysql2, gave none when it was captured on settling).
        if (c.read.callerUnknown === undefined) expect(loop?.caller).toMatch(/^integration\/orms\/[\w.-]+\.ts:\d+:\d+$/);
        else expect(loop?.caller).toBeNull();
        expect(() => expect(tally).toHaveNoRepeatedShapes()).toThrow(/N\+1/);
      } else {
        expect(c.read.shapes).toBeUndefined();
      }
    });

    it(`${orm}: built once in beforeAll and measured in two windows, its start-up queries are in neither`, async () => {
      const first = await session!.measure(() => under!.readLoop());
      const second = await session!.measure(() => under!.readLoop());
      for (const tally of [first, second]) {
        expectTally(tally, c.read);
        // No connection was opened in either window: a pool that opens one brings its set-up (and an ORM's
        // per-connection statements) into the window.
        if (tally.layers.wire) expect(tally.layers.wire.setup?.connectionsOpened).toBe(0);
      }
    });
  });
}
