import { DriverLayerSchema, STATEMENT_CLASSES } from './events';
import type { StatementEvent } from './events';
import { DriverTally, summarizeDriverEvents } from './driver-layer';

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
