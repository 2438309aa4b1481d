import { DriverLayerSchema, STATEMENT_CLASSES } from '../sql/events';
import type { StatementEvent } from '../sql/events';
import { DriverRecorder, DriverTally, summarizeDriverEvents, WindowTotals } from './driver-layer';
import type { CallShape } from '../sql/events';

function event(over: Partial<StatementEvent>): StatementEvent {
  return {
    driver: 'mysql2',
    method: 'query',
    kind: 'query',
    sql: 'INSERT INTO t VALUES (?)',
    statementClass: 'insert',
    bindValues: 1,
    parameterSets: 1,
    rowsAffected: 1,
    startNs: 1,
    durationNs: 2,
    error: null,
    connectionId: 5,
    ...over,
  };
}

describe('summarizeDriverEvents', () => {
  it('sums calls, kinds, classes, parameter sets, bind values, rows and errors', () => {
    const layer = summarizeDriverEvents([
      event({ kind: 'prepare', parameterSets: 0, bindValues: 0, rowsAffected: null }),
      event({ kind: 'batch', parameterSets: 5000, bindValues: 30000, rowsAffected: 5000 }),
      event({ kind: 'execute', bindValues: 6, rowsAffected: 1 }),
      event({ statementClass: 'commit', bindValues: 0, rowsAffected: 0 }),
      event({ error: 'Duplicate entry', rowsAffected: null, bindValues: 6 }),
    ]);
    expect(DriverLayerSchema.parse(layer)).toEqual(layer);
    expect(layer).toMatchObject({
      calls: 5,
      parameterSets: 5003,
      bindValues: 30012,
      maxBindValuesPerCall: 30000,
      rowsAffected: 5001,
      errors: 1,
      eventsOmitted: 0,
    });
    expect(layer.byKind).toEqual({ query: 2, execute: 1, batch: 1, prepare: 1 });
    // Statement classes count statements executed: the prepare is a call (byKind.prepare), not an INSERT run.
    expect(layer.byClass).toMatchObject({ insert: 3, commit: 1, select: 0, other: 0 });
    expect(Object.keys(layer.byClass)).toHaveLength(STATEMENT_CLASSES.length);
  });

  it('counts the same statements whether a driver prepares each call or not (knex on SQLite prepares, then runs)', () => {
    const prepared = summarizeDriverEvents(
      Array.from({ length: 10 }, () => [event({ kind: 'prepare', parameterSets: 0, bindValues: 0, rowsAffected: null }), event({ kind: 'execute' })]).flat(),
    );
    const direct = summarizeDriverEvents(Array.from({ length: 10 }, () => event({ kind: 'query' })));
    expect(prepared.byClass.insert).toBe(10);
    expect(direct.byClass.insert).toBe(10);
    expect(prepared).toMatchObject({ calls: 20, byKind: { prepare: 10, execute: 10 } });
  });

  it('is all zeroes for an empty window', () => {
    const layer = summarizeDriverEvents([]);
    expect(layer.calls).toBe(0);
    expect(layer.maxBindValuesPerCall).toBe(0);
    expect(Object.values(layer.byKind).every((n) => n === 0)).toBe(true);
    expect(DriverLayerSchema.parse(layer)).toEqual(layer);
  });

  it('caps the kept events and truncates their SQL, but counts every event', () => {
    const long = `INSERT INTO t VALUES ${'(?, ?),'.repeat(1000)}(?, ?)`;
    const events = Array.from({ length: 250 }, (_, i) => event({ sql: long, startNs: i }));
    const layer = summarizeDriverEvents(events);
    expect(layer.calls).toBe(250);
    expect(layer.events).toHaveLength(200);
    expect(layer.eventsOmitted).toBe(50);
    expect(layer.events[199]!.startNs).toBe(199);
    expect(layer.events[0]!.sql.length).toBeLessThan(260);
    expect(layer.events[0]!.sql).toContain(`(${long.length} chars)`);
    expect(events[0]!.sql).toBe(long);

    const small = summarizeDriverEvents(events, { maxEvents: 3, maxSqlChars: 10 });
    expect(small.events.map((e) => e.sql.slice(0, 10))).toEqual(Array(3).fill('INSERT INT'));
    expect(small.eventsOmitted).toBe(247);
  });
});

describe('DriverTally', () => {
  it('keeps events in order and windows them by mark', () => {
    const tally = new DriverTally();
    tally.push(event({ sql: 'SET NAMES utf8mb4', statementClass: 'set' }));
    const start = tally.mark();
    tally.push(event({ sql: 'INSERT 1' }));
    tally.push(event({ sql: 'INSERT 2' }));
    const end = tally.mark();
    tally.push(event({ sql: 'SELECT count(*)', statementClass: 'select' }));
    expect(tally.size).toBe(4);
    expect(tally.since(start).map((e) => e.sql)).toEqual(['INSERT 1', 'INSERT 2', 'SELECT count(*)']);
    expect(tally.between(start, end).map((e) => e.sql)).toEqual(['INSERT 1', 'INSERT 2']);
    expect(tally.since().length).toBe(4);
    expect(tally.summarize(end).byClass.select).toBe(1);
    // `events` is a copy: a caller cannot rewrite history.
    tally.events.pop();
    expect(tally.size).toBe(4);
  });
});

describe('WindowTotals shapes', () => {
  // knex on better-sqlite3 prepares every query anew, then runs it: each text has a prepare and an execute group.
  const prepare = (sql: string): CallShape => ({ method: 'prepare', kind: 'prepare', sql, statementClass: 'select', bindValues: 0, parameterSets: 0 });
  const run = (sql: string, statementClass: CallShape['statementClass']): CallShape => ({
    method: 'all',
    kind: 'execute',
    sql,
    statementClass,
    bindValues: 1,
    parameterSets: 1,
  });

  it('gives the distinct parameter sets and rows of a prepared-then-run text to the executions, not to the prepare', () => {
    const totals = new WindowTotals();
    const select = 'SELECT id FROM children WHERE parent_id = ?';
    const insert = 'INSERT INTO children (parent_id) VALUES (?)';
    for (let i = 0; i < 20; i++) {
      totals.add('better-sqlite3', prepare(select), 0, 0, null, null, null);
      totals.add('better-sqlite3', run(select, 'select'), 0, 0, null, null, null, [i]);
      totals.add('better-sqlite3', { ...prepare(insert), statementClass: 'insert' }, 0, 0, null, null, null);
      totals.add('better-sqlite3', { ...run(insert, 'insert'), method: 'run' }, 0, 0, 1, null, null, [i % 2]);
    }
    const shapes = totals.finish().layer.shapes.map((s) => [s.kind, s.statementClass, s.calls, s.parameterSets, s.distinctParameterSets, s.rows]);
    expect(shapes).toEqual([
      ['prepare', 'select', 20, 0, 0, 0],
      // Different parameters each time: an N+1 on the executions.
      ['execute', 'select', 20, 20, 20, null],
      ['prepare', 'insert', 20, 0, 0, 0],
      // Two value sets over 20 runs, one row each.
      ['execute', 'insert', 20, 20, 2, 20],
    ]);
  });

  it('keeps the distinct parameter sets of two kinds on one text apart (mysql2 query and execute of the same SQL)', () => {
    const totals = new WindowTotals();
    const sql = 'SELECT id FROM children WHERE parent_id = ?';
    for (let i = 0; i < 3; i++) totals.add('mysql2', { ...run(sql, 'select'), method: 'query', kind: 'query' }, 0, 0, null, null, null, [1]);
    for (let i = 0; i < 3; i++) totals.add('mysql2', { ...run(sql, 'select'), method: 'execute' }, 0, 0, null, null, null, [i]);
    const shapes = totals.finish().layer.shapes.map((s) => [s.kind, s.calls, s.distinctParameterSets]);
    expect(shapes).toEqual([
      ['query', 3, 1],
      ['execute', 3, 3],
    ]);
  });

  it('compares the values of the first 64 calls of a text and says so (distinctOf), so a long loop is still an N+1', () => {
    const totals = new WindowTotals();
    const sql = 'SELECT id FROM children WHERE parent_id = ?';
    for (let i = 0; i < 100; i++) totals.add('pg', run(sql, 'select'), 0, 0, null, null, 7, [i]);
    const [shape] = totals.finish().layer.shapes;
    expect(shape).toMatchObject({ calls: 100, parameterSets: 100, distinctParameterSets: 64, distinctOf: 64 });
  });

  it('tells values apart by type and compares a reused array by what it held at each call', () => {
    const totals = new WindowTotals();
    const sql = 'SELECT id FROM t WHERE a = ? AND b = ?';
    const reused: unknown[] = [];
    // 1, '1', 1n and true are four sets; NaN equals NaN and 0 equals -0, as the server sees them; null is undefined.
    for (const v of [1, '1', 1n, true, Number.NaN, Number.NaN, 0, -0, null, undefined]) {
      reused[0] = v;
      reused[1] = 'x';
      totals.add('mysql2', { ...run(sql, 'select'), method: 'execute', bindValues: 2 }, 0, 0, null, null, 1, reused);
    }
    const [shape] = totals.finish().layer.shapes;
    expect(shape).toMatchObject({ calls: 10, distinctParameterSets: 7, distinctOf: 10 });
  });

  it('does not compare calls whose wrapper handed over no values while binding some, and says it cannot tell', () => {
    const totals = new WindowTotals();
    const sql = 'INSERT INTO t (a) VALUES (?)';
    for (let i = 0; i < 3; i++) totals.add('better-sqlite3', { ...run(sql, 'insert'), method: 'run' }, 0, 0, 1, null, null);
    const [shape] = totals.finish().layer.shapes;
    expect(shape).toMatchObject({ calls: 3, distinctParameterSets: null, distinctOf: null });
  });

  it('says it cannot tell when a wrapper hands over a function as the values, instead of reading it as an empty list', () => {
    const totals = new WindowTotals();
    const sql = 'INSERT INTO t (a) VALUES (?)';
    for (let i = 0; i < 3; i++) totals.add('mysql2', { ...run(sql, 'insert'), method: 'execute' }, 0, 0, 1, null, null, [i].values);
    const [shape] = totals.finish().layer.shapes;
    expect(shape).toMatchObject({ calls: 3, distinctParameterSets: null, distinctOf: null });
  });
});

describe('WindowTotals callers and steady counters', () => {
  const runShape = (sql: string, bindValues = 2): CallShape => ({
    method: 'run',
    kind: 'execute',
    sql,
    statementClass: 'insert',
    bindValues,
    parameterSets: 1,
  });
  const insert = 'INSERT INTO t (a, b) VALUES (?, ?)';

  it('says which texts would capture a caller, and takes a caller the wrapper captured instead of its own', () => {
    const totals = new WindowTotals();
    expect(totals.needsCaller(insert)).toBe(true);
    totals.add('better-sqlite3', runShape(insert), 0, 0, 1, null, null, [1, 2], 'app/seed.ts:12:3');
    expect(totals.needsCaller(insert)).toBe(false);
    expect(totals.needsCaller('COMMIT')).toBe(true);
    // A text the window has seen keeps its first caller, whatever a later call hands over.
    totals.add('better-sqlite3', runShape(insert), 0, 0, 1, null, null, [3, 4], 'app/other.ts:1:1');
    // null is a caller too (no user frame on the stack): taken as given, not captured again.
    totals.add('better-sqlite3', { ...runShape('COMMIT', 0), kind: 'query', statementClass: 'commit' }, 0, 0, null, null, null, undefined, null);
    expect(totals.finish().layer.shapes.map((s) => s.caller)).toEqual(['app/seed.ts:12:3', null]);
  });

  it('tells one asker per text to capture, until a call of the text is recorded', () => {
    const totals = new WindowTotals();
    expect(totals.needsCaller(insert)).toBe(true);
    // Asked again before that call settles (a pipeline, a Promise.all): the first asker's capture serves.
    expect(totals.needsCaller(insert)).toBe(false);
    // Another call of the text settles first, without a caller: the window captures one itself, here.
    totals.add('mysql2', runShape(insert), 0, 0, 1, null, null, [1, 2]);
    // The asker's call lands after it: the text keeps the caller it has.
    totals.add('mysql2', runShape(insert), 0, 0, 1, null, null, [3, 4], 'app/late.ts:1:1');
    expect(totals.needsCaller(insert)).toBe(false);
    const [shape] = totals.finish().layer.shapes;
    expect(shape).toMatchObject({ calls: 2 });
    expect(shape!.caller).toMatch(/^src\/driver\/driver-layer\.test\.ts:\d+:\d+$/);
  });

  it('bounds its captures at 256, an ask under a key the record does not use (a postgres.js template) counting once', () => {
    const totals = new WindowTotals();
    const select = (sql: string): CallShape => ({ method: 'sql', kind: 'query', sql, statementClass: 'select', bindValues: 1, parameterSets: 1 });
    // postgres.js asks about a template's strings joined with `?`; the text it runs says `$1`.
    for (let i = 0; i < 200; i++) {
      expect(totals.needsCaller(`SELECT ? AS c${i}`)).toBe(true);
      totals.add('postgres-js', select(`SELECT $1 AS c${i}`), 0, 0, null, null, null, [i], `app/q.ts:${i + 1}:1`);
    }
    // 200 captures taken: 56 more fit, then no more.
    expect(Array.from({ length: 100 }, (_, i) => totals.needsCaller(`SELECT ${i} AS d`)).filter(Boolean)).toHaveLength(56);
    const callers = totals.finish().layer.shapes.map((s) => s.caller);
    expect(callers).toEqual(Array.from({ length: 200 }, (_, i) => `app/q.ts:${i + 1}:1`));
  });

  it('counts a template asked about under its strings once against the text cap, once its ask is answered', () => {
    const totals = new WindowTotals({ maxTexts: 4 });
    const select = (sql: string): CallShape => ({ method: 'sql', kind: 'query', sql, statementClass: 'select', bindValues: 1, parameterSets: 1 });
    for (let i = 0; i < 3; i++) {
      expect(totals.needsCaller(`SELECT ? AS c${i}`)).toBe(true);
      totals.askAnswered(`SELECT ? AS c${i}`);
      totals.add('postgres-js', select(`SELECT $1 AS c${i}`), 0, 0, null, null, null, [i], `app/q.ts:${i + 1}:1`);
    }
    // Three texts recorded, no ask left pending: a fourth text still gets its caller captured (the cap is 4). With
    // the three asks pending it would be 3 + 3 >= 4 already.
    expect(totals.needsCaller('SELECT ? AS c3')).toBe(true);
    // An answer for a text never asked about (another window's ask) changes nothing.
    totals.askAnswered('SELECT ? AS never');
    expect(totals.needsCaller('SELECT ? AS c3')).toBe(false);
  });

  it('asks about a template once a window: an ask answered under another text stays answered', () => {
    const totals = new WindowTotals();
    const select: CallShape = { method: 'sql', kind: 'query', sql: 'SELECT $1 AS n', statementClass: 'select', bindValues: 1, parameterSets: 1 };
    expect(totals.needsCaller('SELECT ? AS n')).toBe(true);
    totals.askAnswered('SELECT ? AS n');
    totals.add('postgres-js', select, 0, 0, null, null, null, [1], 'app/q.ts:1:1');
    // The loop's next builds: their caller is the one taken, so no capture (and none of the window's 256 spent).
    for (let i = 0; i < 300; i++) expect(totals.needsCaller('SELECT ? AS n')).toBe(false);
    expect(totals.needsCaller('SELECT ? AS later')).toBe(true);
  });

  it("needs no caller beyond the window's text cap", () => {
    const totals = new WindowTotals({ maxTexts: 1 });
    totals.add('better-sqlite3', runShape(insert), 0, 0, 1, null, null, [1, 2], null);
    expect(totals.needsCaller('SELECT 1')).toBe(false);
  });

  /** The counts of a window, events and shapes aside (their times and callers are not what a counter changes). */
  function counts(totals: WindowTotals): unknown {
    const { layer, ...rest } = totals.finish();
    const { events, shapes, ...totalsOnly } = layer;
    return { ...totalsOnly, rest, shapes: shapes.map(({ caller, ...shape }) => shape), events: events.length };
  }

  it('hands out a counter only when nothing but the count of the calls is kept, and it counts as add does', () => {
    const viaAdd = new WindowTotals({ maxEvents: 10 });
    const viaCounter = new WindowTotals({ maxEvents: 10 });
    const shape = runShape(insert);
    let counter: ReturnType<WindowTotals['steadyCounter']> = null;
    for (let i = 0; i < 100; i++) {
      const rows = i === 99 ? null : 1;
      viaAdd.add('better-sqlite3', shape, 0, 0, rows, null, null, i < 64 ? [i, 'x'] : undefined, null);
      if (counter !== null) {
        counter.count(rows);
        continue;
      }
      viaCounter.add('better-sqlite3', shape, 0, 0, rows, null, null, i < 64 ? [i, 'x'] : undefined, null);
      counter = viaCounter.steadyCounter(shape, null);
      // Not before the window's events are kept (10) and the text's first 64 value lists compared.
      expect(counter === null).toBe(i < 63);
    }
    expect(counts(viaCounter)).toEqual(counts(viaAdd));
    expect(counts(viaAdd)).toMatchObject({ calls: 100, rowsAffected: 99, shapes: [{ calls: 100, distinctParameterSets: 64, distinctOf: 64, rows: 99 }] });
    // The window is closed: its counter says so, and the caller goes back to record.
    expect(counter?.open).toBe(false);
  });

  it("refuses a counter for any shape but the last call's, a text beyond the cap or a per-call protocol", () => {
    const totals = new WindowTotals({ maxEvents: 0, maxTexts: 1 });
    const shape = runShape(insert, 0);
    // No values bound: compared (as an empty list) on every call up to 64, handed over or not.
    for (let i = 0; i < 64; i++) totals.add('better-sqlite3', shape, 0, 0, 1, null, null);
    expect(totals.steadyCounter(shape, null)).not.toBeNull();
    expect(totals.steadyCounter({ ...shape }, null)).toBeNull();
    expect(totals.steadyCounter(shape, 3)).toBeNull();
    const beyond = runShape('INSERT INTO u (a) VALUES (?)', 1);
    for (let i = 0; i < 64; i++) totals.add('better-sqlite3', beyond, 0, 0, 1, null, null, [i]);
    expect(totals.steadyCounter(beyond, null)).toBeNull();
    const pg = new WindowTotals({ maxEvents: 0 });
    const named: CallShape = { ...runShape('SELECT $1', 1), statementClass: 'select', protocol: 'named' };
    pg.add('pg', named, 0, 0, null, null, 1, [1]);
    expect(pg.steadyCounter(named, 1)).toBeNull();
  });
});

describe('DriverRecorder steady counters', () => {
  const shape: CallShape = { method: 'run', kind: 'execute', sql: 'INSERT INTO t (a) VALUES (?)', statementClass: 'insert', bindValues: 1, parameterSets: 1 };

  it('closes the counters of a window at end() and when begin() replaces it, and has none without a window', () => {
    const recorder = new DriverRecorder({ maxEvents: 0 });
    expect(recorder.steadyCounter('better-sqlite3', shape, null)).toBeNull();
    expect(recorder.needsCaller(shape.sql)).toBe(false);
    const fill = (): void => {
      for (let i = 0; i < 64; i++) recorder.record('better-sqlite3', shape, 0, 0, 1, null, null, [i], null);
    };
    recorder.begin();
    expect(recorder.needsCaller(shape.sql)).toBe(true);
    fill();
    const first = recorder.steadyCounter('better-sqlite3', shape, null)!;
    first.count(1);
    recorder.begin();
    expect(first.open).toBe(false);
    fill();
    const second = recorder.steadyCounter('better-sqlite3', shape, null)!;
    second.count(1);
    second.count(1);
    const { layer, drivers } = recorder.end();
    expect(second.open).toBe(false);
    expect([layer.calls, layer.rowsAffected, layer.bindValues, drivers]).toEqual([66, 66, 66, ['better-sqlite3']]);
  });
});

describe('DriverRecorder calls in flight', () => {
  it('counts the calls the code let go of apart from the others, in the window only, and starts each window at 0', () => {
    const recorder = new DriverRecorder();
    recorder.letGo(1);
    expect(recorder.callsLetGoInWindow).toBe(0);
    recorder.begin();
    recorder.inFlight(1);
    recorder.inFlight(1);
    recorder.letGo(1);
    expect([recorder.callsInFlightInWindow, recorder.callsLetGoInWindow]).toEqual([2, 1]);
    recorder.inFlight(-1);
    recorder.letGo(-1);
    expect([recorder.callsInFlightInWindow, recorder.callsLetGoInWindow]).toEqual([1, 0]);
    recorder.letGo(1);
    recorder.end();
    recorder.begin();
    expect(recorder.callsLetGoInWindow).toBe(0);
  });
});
