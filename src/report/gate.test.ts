import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { command as gateCommand } from '../cli/gate';
import { ASSERT, batchCell, fixtureEnvironment, fixtureReport, perRowLayers, sqliteCell, wireCounts } from './report.fixture';
import { baselineFromReport, compareWithBaseline, renderGateResult } from './gate';
import { makeCell, toJson } from './schema';
import type { Cell, Report } from './schema';

const LABELS = { report: 'out/report.json', baseline: 'sqltally-baseline.json' };

function baselineOf(cells: Cell[], over: Parameters<typeof fixtureReport>[1] = {}) {
  return baselineFromReport(fixtureReport(cells, over), new Date('2026-01-01T00:00:00Z'));
}

/** The same cell with some fields changed, key recomputed. */
function variant(cell: Cell, over: Partial<Cell>): Cell {
  const { key: _key, ...rest } = { ...cell, ...over };
  return makeCell(rest);
}

describe('compareWithBaseline', () => {
  const cells = () => [sqliteCell(100), sqliteCell(1000), batchCell(5000)];

  it('passes when every count is the same', () => {
    const result = compareWithBaseline(fixtureReport(cells()), baselineOf(cells()));
    expect(result.pass).toBe(true);
    expect(result.totals).toMatchObject({ same: 3, increased: 0, missing: 0, new: 0 });
    expect(renderGateResult(result, LABELS)).toMatch(/^sqltally gate: PASS/);
  });

  it('fails when one cell turns from one batch into one call per row, with a diff a person can read', () => {
    const baseline = baselineOf(cells());
    const perRow = variant(batchCell(5000), { layers: perRowLayers(5000) });
    const report = fixtureReport([sqliteCell(100), sqliteCell(1000), perRow]);
    const result = compareWithBaseline(report, baseline);
    expect(result.pass).toBe(false);
    const cell = result.cells.find((c) => c.key === perRow.key)!;
    expect(cell.failures).toContain('driver.calls increased 1 -> 5000 (+4999)');
    expect(cell.failures).toContain('wire.roundTrips increased 2 -> 5001 (+4999)');
    expect(cell.failures).toContain('server.statements increased 1 -> 5000 (+4999)');
    const text = renderGateResult(result, LABELS);
    expect(text).toMatch(/^sqltally gate: FAIL/);
    expect(text).toContain(`FAIL ${perRow.key}`);
    expect(text).toMatch(/driver\.calls +1 -> 5000 \(\+4999\) +<- FAIL/);
    expect(text).toMatch(/driver\.byKind\.batch +1 -> 0 \(-1\)/);
    expect(text).toMatch(/driver\.byKind\.execute +0 -> 5000 \(\+5000\)/);
    expect(text).toMatch(/wire\.commands\.COM_STMT_BULK_EXECUTE +1 -> 0 \(-1\)/);
    expect(text).toMatch(/wire\.commands\.COM_STMT_EXECUTE +0 -> 5000 \(\+5000\)/);
    expect(text).toContain('sqltally gate --report <report> --baseline <file> --update');
  });

  it('passes a decrease with a notice to approve it', () => {
    // Before: the batch was split into two bulk commands; now it goes in one.
    const layers = batchCell(5000).layers;
    const split = variant(batchCell(5000), {
      layers: {
        ...layers,
        wire: wireCounts({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 2 }, 3),
        server: { ...layers.server!, summary: { ...layers.server!.summary, statements: 2, executes: 2, bulkExecutes: 2 } },
      },
    });
    const result = compareWithBaseline(fixtureReport([batchCell(5000)]), baselineOf([split]));
    expect(result.pass).toBe(true);
    expect(result.totals.decreased).toBe(1);
    const text = renderGateResult(result, LABELS);
    expect(text).toMatch(/wire\.roundTrips +3 -> 2 \(-1\) +decrease: approve with --update/);
    expect(text).toMatch(/server\.bulkExecutes +2 -> 1 \(-1\) +decrease: approve with --update/);
    expect(text).toContain('counts went down: approve them with --update');
    expect(text).toContain('Passed with changes to approve');
  });

  it('fails a mixed change (fewer calls, but a new kind of command) until it is approved', () => {
    const baseline = baselineOf([variant(batchCell(5000), { layers: perRowLayers(5000) })]);
    const result = compareWithBaseline(fixtureReport([batchCell(5000)]), baseline);
    expect(result.pass).toBe(false);
    const cell = result.cells[0]!;
    expect(cell.failures).toContain('driver.byKind.batch increased 0 -> 1 (+1)');
    expect(cell.failures).toContain('wire.commands.COM_STMT_BULK_EXECUTE increased 0 -> 1 (+1)');
    expect(cell.failures).not.toContainEqual(expect.stringContaining('driver.calls'));
  });

  it('fails on a baseline cell the report lacks, naming the skipped backend', () => {
    const baseline = baselineOf(cells());
    const report = fixtureReport([sqliteCell(100), sqliteCell(1000)], {
      matrix: { ...baseline.matrix },
      skipped: [{ backend: 'mariadb', reason: 'no mariadbd binary and no Docker', environment: 'local' }],
    });
    const result = compareWithBaseline(report, baseline);
    expect(result.pass).toBe(false);
    expect(result.totals.missing).toBe(1);
    expect(renderGateResult(result, LABELS)).toContain('baseline cell missing from the report: backend mariadb was skipped: no mariadbd binary and no Docker');
  });

  it('fails on an incomplete verdict even when the counts are equal', () => {
    const baseline = baselineOf(cells());
    const incomplete = variant(batchCell(5000), {
      verdict: { ...ASSERT, kind: 'incomplete', reason: 'wire: connection 1 could not be parsed (TLS)' },
    });
    const result = compareWithBaseline(fixtureReport([sqliteCell(100), sqliteCell(1000), incomplete]), baseline);
    expect(result.pass).toBe(false);
    expect(result.totals.incomplete).toBe(1);
    expect(renderGateResult(result, LABELS)).toContain('verdict incomplete: wire: connection 1 could not be parsed (TLS)');
  });

  it('fails on a cell whose workload threw, showing that error', () => {
    const baseline = baselineOf(cells());
    const errored = variant(batchCell(5000), { error: { message: 'ER_NET_PACKET_TOO_LARGE', phase: 'workload' } });
    const result = compareWithBaseline(fixtureReport([sqliteCell(100), sqliteCell(1000), errored]), baseline);
    expect(result.pass).toBe(false);
    expect(renderGateResult(result, LABELS)).toContain('the workload failed in phase workload: ER_NET_PACKET_TOO_LARGE');
  });

  it('fails a report from a different matrix and says how it differs', () => {
    const baseline = baselineOf(cells());
    const report = fixtureReport([sqliteCell(100), sqliteCell(2500), batchCell(5000)]);
    const result = compareWithBaseline(report, baseline);
    expect(result.pass).toBe(false);
    expect(result.matrixDifferences).toEqual([
      'rows: baseline [100, 1000, 5000], report [100, 2500, 5000] (missing from the report: 1000; not in the baseline: 2500)',
    ]);
    expect(renderGateResult(result, LABELS)).toContain('the report comes from a different matrix than the baseline');
  });

  it('reports a new cell as new without failing', () => {
    const baseline = baselineOf([sqliteCell(100)], { matrix: fixtureReport([sqliteCell(100), sqliteCell(1000)]).matrix });
    const result = compareWithBaseline(fixtureReport([sqliteCell(100), sqliteCell(1000)]), baseline);
    expect(result.pass).toBe(true);
    expect(result.totals.new).toBe(1);
    expect(renderGateResult(result, LABELS)).toContain('new cell, not in the baseline: approve it with --update');
  });

  it('pairs a cell across a driver and server upgrade and says what else changed', () => {
    const baseline = baselineOf(cells());
    const upgraded = variant(batchCell(5000), { driverVersion: '3.5.5', serverVersion: '11.4.2-MariaDB', layers: perRowLayers(5000) });
    const report = fixtureReport([sqliteCell(100), sqliteCell(1000), upgraded], {
      environments: [fixtureEnvironment({ node: 'v22.1.0', drivers: { ...fixtureEnvironment().drivers, mariadb: '3.5.5' } })],
    });
    const result = compareWithBaseline(report, baseline);
    expect(result.pass).toBe(false);
    const text = renderGateResult(result, LABELS);
    expect(text).toContain(`now ${upgraded.key}`);
    expect(text).toContain(
      'what else changed: driver mariadb 3.5.4 -> 3.5.5; server mariadb@10.11 10.11.14-MariaDB -> 11.4.2-MariaDB; node v20.20.2 -> v22.1.0',
    );
    expect(text).toMatch(/driver\.calls +1 -> 5000 \(\+4999\)/);
    expect(result.environmentChanges).toContain('node v20.20.2 -> v22.1.0');
  });

  it('shows but does not gate server counters when the verdict is report-only', () => {
    const baseline = baselineOf([batchCell(5000)]);
    const layers = batchCell(5000).layers;
    const noisy = variant(batchCell(5000), {
      verdict: { ...ASSERT, kind: 'report', reason: 'global counters only: performance_schema is off' },
      layers: { ...layers, server: { ...layers.server!, summary: { ...layers.server!.summary, statements: 3 } } },
    });
    const result = compareWithBaseline(fixtureReport([noisy]), baseline);
    expect(result.pass).toBe(true);
    const text = renderGateResult(result, LABELS);
    expect(text).toMatch(/server\.statements +1 -> 3 \(\+2\) +not gated/);
    expect(text).toContain('server counters are shown, not gated, because the verdict is report: global counters only');
  });

  it('fails a run that failed, whatever its cells say', () => {
    const baseline = baselineOf(cells());
    const report = fixtureReport(cells(), { status: 'failed', failure: { message: 'mariadb: server went away', phase: 'workload' } });
    const result = compareWithBaseline(report, baseline);
    expect(result.pass).toBe(false);
    expect(result.failures).toContain('the run failed: mariadb: server went away');
    const short = fixtureReport([sqliteCell(100)], { status: 'failed', failure: { message: 'interrupted' }, matrix: baseline.matrix });
    expect(renderGateResult(compareWithBaseline(short, baseline), LABELS)).toContain(
      'baseline cell missing from the report: the run failed before it was measured',
    );
  });

  it('fails when a gated layer is no longer measured', () => {
    const baseline = baselineOf([batchCell(5000)]);
    const noWire = variant(batchCell(5000), { layers: { ...batchCell(5000).layers, wire: null } });
    const result = compareWithBaseline(fixtureReport([noWire]), baseline);
    expect(result.pass).toBe(false);
    expect(result.cells[0]!.failures).toContain('wire.roundTrips is no longer measured (baseline 2)');
    expect(renderGateResult(result, LABELS)).toMatch(/wire\.roundTrips +2 -> not measured +<- FAIL/);
  });
});

describe('sqltally gate (CLI)', () => {
  let dir: string;
  let out: string[];
  let err: string[];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqltally-gate-'));
    out = [];
    err = [];
    jest.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
    jest.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  });
  afterEach(() => {
    jest.restoreAllMocks();
    rmSync(dir, { recursive: true, force: true });
  });

  const write = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const reportFile = (r: Report) => write('report.json', toJson(r));
  const gate = (...argv: string[]) => gateCommand.run(argv);

  it('exits 0 on equal counts and 1 on an increase', async () => {
    const baseline = write('baseline.json', toJson(baselineOf([batchCell(5000)])));
    expect(await gate('--report', reportFile(fixtureReport([batchCell(5000)])), '--baseline', baseline)).toBe(0);
    const worse = fixtureReport([variant(batchCell(5000), { layers: perRowLayers(5000) })]);
    expect(await gate('--report', reportFile(worse), '--baseline', baseline)).toBe(1);
    expect(out.join('\n')).toMatch(/driver\.calls +1 -> 5000 \(\+4999\)/);
  });

  it('reads a run directory as well as report.json, and prints JSON on request', async () => {
    const baseline = write('baseline.json', toJson(baselineOf([batchCell(5000)])));
    reportFile(fixtureReport([batchCell(5000)]));
    expect(await gate('--report', dir, '--baseline', baseline, '--json')).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({ kind: 'gate-result', pass: true });
  });

  it('exits 2 on a corrupt baseline and leaves it untouched, even with --update', async () => {
    const corrupt = '{"schemaVersion": 1, "kind": "baseline", "cells": [ <<<<<<< HEAD';
    const baseline = write('baseline.json', corrupt);
    const report = reportFile(fixtureReport([batchCell(5000)]));
    expect(await gate('--report', report, '--baseline', baseline)).toBe(2);
    expect(await gate('--report', report, '--baseline', baseline, '--update')).toBe(2);
    expect(readFileSync(baseline, 'utf8')).toBe(corrupt);
    expect(err.join('\n')).toContain('not valid JSON');
    expect(err.join('\n')).toContain('nothing was written');
  });

  it('exits 2 on an older-schema baseline with the way out; --update replaces it and says so', async () => {
    const old = JSON.parse(toJson(baselineOf([batchCell(5000)])));
    old.schemaVersion = 0;
    const baseline = write('baseline.json', JSON.stringify(old));
    const report = reportFile(fixtureReport([batchCell(5000)]));
    expect(await gate('--report', report, '--baseline', baseline)).toBe(2);
    expect(err.join('\n')).toContain('written by sqltally schema 0; this is 2: regenerate with sqltally gate --update');
    expect(JSON.parse(readFileSync(baseline, 'utf8')).schemaVersion).toBe(0);
    expect(await gate('--report', report, '--baseline', baseline, '--update')).toBe(0);
    expect(JSON.parse(readFileSync(baseline, 'utf8')).schemaVersion).toBe(2);
    expect(err.join('\n')).toContain('replacing it');
  });

  it('exits 2 on a missing baseline unless --update creates it', async () => {
    const report = reportFile(fixtureReport([batchCell(5000)]));
    const baseline = join(dir, 'baseline.json');
    expect(await gate('--report', report, '--baseline', baseline)).toBe(2);
    expect(err.join('\n')).toContain('--update');
    expect(await gate('--report', report, '--baseline', baseline, '--update')).toBe(0);
    expect(out.join('\n')).toContain(`+ ${batchCell(5000).key}`);
    expect(await gate('--report', report, '--baseline', baseline)).toBe(0);
  });

  it('--update prints every approved change and writes the new counts', async () => {
    const baseline = write('baseline.json', toJson(baselineOf([batchCell(5000)])));
    const report = reportFile(fixtureReport([variant(batchCell(5000), { layers: perRowLayers(5000) })]));
    expect(await gate('--report', report, '--baseline', baseline, '--update')).toBe(0);
    expect(out.join('\n')).toContain('driver.calls: 1 -> 5000');
    expect(await gate('--report', report, '--baseline', baseline)).toBe(0);
  });

  it('--update refuses a failed run or an incomplete cell and writes nothing', async () => {
    const text = toJson(baselineOf([batchCell(5000)]));
    const baseline = write('baseline.json', text);
    const failed = reportFile(fixtureReport([batchCell(5000)], { status: 'failed', failure: { message: 'interrupted' } }));
    expect(await gate('--report', failed, '--baseline', baseline, '--update')).toBe(1);
    const incomplete = reportFile(fixtureReport([variant(batchCell(5000), { verdict: { ...ASSERT, kind: 'incomplete', reason: 'probe could not read' } })]));
    expect(await gate('--report', incomplete, '--baseline', baseline, '--update')).toBe(1);
    expect(readFileSync(baseline, 'utf8')).toBe(text);
    expect(err.join('\n')).toContain('refusing to approve');
    expect(err.join('\n')).toContain('is incomplete: probe could not read');
  });

  it('exits 2 on bad options or an unreadable report', async () => {
    expect(await gate('--report', join(dir, 'nope'))).toBe(2);
    expect(await gate('--bogus')).toBe(2);
    const baseline = write('baseline.json', toJson(baselineOf([batchCell(5000)])));
    expect(await gate('--report', join(dir, 'nope'), '--baseline', baseline)).toBe(2);
    expect(err.join('\n')).toContain('no such file');
  });
});

describe('version upgrades with equal counts', () => {
  it('pass, and still show the paired cell with a reminder to re-key the baseline', () => {
    const baseline = baselineFromReport(fixtureReport([batchCell(5000)]));
    const { key: _k, ...rest } = batchCell(5000);
    const upgraded = makeCell({ ...rest, driverVersion: '3.5.5' });
    const result = compareWithBaseline(fixtureReport([upgraded]), baseline);
    expect(result.pass).toBe(true);
    const text = renderGateResult(result, LABELS);
    expect(text).toContain(`now ${upgraded.key}`);
    expect(text).toContain('what else changed: driver mariadb 3.5.4 -> 3.5.5');
    expect(text).toContain('Passed with changes to approve');
  });
});
