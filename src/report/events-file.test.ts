import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StatementEvent } from '../sql/events';
import { mergeReports } from './merge';
import { writeReport } from './output';
import { ASSERT, fixtureReport, sqliteCell } from './report.fixture';
import { EVENTS_FILE, joinEvents, parseEventsText, parseReportText, readReportFile, splitEvents, toJson, toLinesJson } from './schema';
import type { Cell } from './schema';

function event(i: number): StatementEvent {
  return {
    driver: 'better-sqlite3',
    method: 'run',
    kind: 'execute',
    sql: 'INSERT INTO t (a) VALUES (?)',
    statementClass: 'insert',
    bindValues: 1,
    parameterSets: 1,
    rowsAffected: 1,
    startNs: 1000 + i,
    durationNs: 10 + i,
    error: null,
    connectionId: null,
  };
}

/** A cell whose driver layer kept `n` events. */
function withEvents(cell: Cell, n: number, over: Partial<Cell> = {}): Cell {
  const driver = cell.layers.driver!;
  const events = Array.from({ length: n }, (_, i) => event(i));
  return { ...cell, ...over, layers: { ...cell.layers, driver: { ...driver, events, eventsOmitted: driver.calls - n } } };
}

const REPORT_WRONG = { kind: 'report' as const, reason: 'the server counted other connections too', reconciliation: [], discrepancies: [] };

describe('events beside the report', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqltally-events-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const passing = withEvents(sqliteCell(100), 100);
  const failing = withEvents(sqliteCell(200, { verdict: REPORT_WRONG }), 150);
  const threw = withEvents(sqliteCell(300, { verdict: ASSERT, error: { message: 'disk full', phase: 'workload' } }), 3);
  const report = fixtureReport([passing, failing, threw]);

  it("moves only passing cells' events, and joining gives the report back exactly", () => {
    const split = splitEvents(report);
    expect(split.report.eventsFile).toBe(EVENTS_FILE);
    const [a, b, c] = split.report.cells;
    expect(a!.layers.driver!.events).toEqual([]);
    expect(a!.movedEvents).toBe(100);
    // Counts are untouched: eventsOmitted still says what the window did not keep.
    expect(a!.layers.driver!.eventsOmitted).toBe(passing.layers.driver!.eventsOmitted);
    expect(b!.layers.driver!.events).toHaveLength(150);
    expect(b!.movedEvents).toBeUndefined();
    expect(c!.layers.driver!.events).toHaveLength(3);
    expect(split.events!.cells.map((x) => x.key)).toEqual([passing.key]);
    // Both halves survive their own schemas as written.
    const back = parseReportText(toJson(split.report), 'report.json');
    const events = parseEventsText(toJson(split.events), 'events.json');
    expect(joinEvents(back, events, 'events.json')).toEqual(report);
  });

  it('leaves a report with nothing to move as it is', () => {
    const none = fixtureReport([failing]);
    expect(splitEvents(none)).toEqual({ report: none, events: null });
  });

  it('writes events.json beside report.json and reads the whole report back from the directory', async () => {
    const out = join(dir, 'out');
    await writeReport(out, report);
    const raw = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { cells: Cell[]; eventsFile?: string };
    expect(raw.eventsFile).toBe('events.json');
    expect(raw.cells[0]!.layers.driver!.events).toEqual([]);
    expect(readReportFile(out)).toEqual(report);
    // The gate reads counts only: report.json alone is enough with events: 'skip'.
    rmSync(join(out, EVENTS_FILE));
    expect(readReportFile(out, { events: 'skip' }).cells[0]!.movedEvents).toBe(100);
    expect(() => readReportFile(out)).toThrow(/events\.json: cannot read events: no such file/);
  });

  it("refuses another run's events file, and one that lost a cell's events", async () => {
    const out = join(dir, 'out');
    await writeReport(out, report);
    const file = join(out, EVENTS_FILE);
    const events = JSON.parse(readFileSync(file, 'utf8')) as { reportStartedAt: string; cells: { key: string; events: unknown[] }[] };
    writeFileSync(file, JSON.stringify({ ...events, reportStartedAt: '2026-01-01T00:00:00.000Z' }));
    expect(() => readReportFile(out)).toThrow(/does not belong to its report: written for a report started at 2026-01-01T00:00:00.000Z/);
    writeFileSync(file, JSON.stringify({ ...events, cells: [{ ...events.cells[0]!, events: events.cells[0]!.events.slice(1) }] }));
    expect(() => readReportFile(out)).toThrow(/99 events for cell .* the report says 100/);
    writeFileSync(file, JSON.stringify({ ...events, schemaVersion: 1 }));
    expect(() => readReportFile(out)).toThrow(/written by sqltally schema 1; this is 2/);
  });

  it('merge keeps every event of every source', async () => {
    const one = join(dir, 'one');
    const two = join(dir, 'two');
    await writeReport(one, fixtureReport([passing]));
    await writeReport(two, fixtureReport([withEvents(sqliteCell(500), 7), failing]));
    const merged = mergeReports([one, two].map((p) => ({ label: p, report: readReportFile(p) })));
    const out = join(dir, 'merged');
    await writeReport(out, merged);
    const back = readReportFile(out);
    expect(back.cells.map((c) => c.layers.driver!.events.length)).toEqual([100, 7, 150]);
    expect(back.cells.every((c) => c.movedEvents === undefined)).toBe(true);
  });
});

describe('toLinesJson', () => {
  it('puts each cell on a line of its own and reads back to the same report', () => {
    const report = fixtureReport([withEvents(sqliteCell(100), 2), sqliteCell(200)]);
    const text = toLinesJson(report, ['cells']);
    expect(parseReportText(text, 'report.json')).toEqual(report);
    const lines = text.split('\n');
    expect(lines.filter((l) => l.startsWith('    {"backend":'))).toHaveLength(2);
    expect(lines[0]).toBe('{');
    expect(lines).toContain('  "status": "ok",');
    expect(toLinesJson({ cells: [], a: undefined, b: { c: 1 } }, ['cells'])).toBe('{\n  "cells": [],\n  "b": {\n    "c": 1\n  }\n}\n');
  });
});
