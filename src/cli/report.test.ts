import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { batchCell, fixtureReport } from '../report/report.fixture';
import { writeReport } from '../report/output';
import { main } from './main';

describe('sqltally report', () => {
  let dir: string;
  let errors: string[];
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-report-cli-'));
    errors = [];
    jest.spyOn(console, 'error').mockImplementation((m: unknown) => void errors.push(String(m)));
    jest.spyOn(console, 'log').mockImplementation(() => undefined);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const listing = (d: string) => Object.fromEntries(fs.readdirSync(d).map((f) => [f, fs.readFileSync(path.join(d, f), 'utf8')]));

  it('renders the views again from report.json and leaves report.json, events.json and bench.json as they were', async () => {
    const run = path.join(dir, 'run');
    await writeReport(run, fixtureReport([batchCell(5000)]));
    fs.writeFileSync(path.join(run, 'report.md'), 'stale');
    fs.rmSync(path.join(run, 'report.html'));
    const before = listing(run);
    expect(await main(['report', run])).toBe(0);
    const after = listing(run);
    expect(after['report.md']).toMatch(/^# sqltally report/);
    expect(after['report.html']).toContain('id="report-data"');
    for (const kept of ['report.json', 'events.json', 'bench.json']) expect(after[kept]).toBe(before[kept]);
  });

  it.each([
    ['a directory without report.json', (d: string) => fs.mkdirSync(path.join(d, 'run')), /report\.json/],
    [
      'a truncated report.json',
      (d: string) => (
        fs.mkdirSync(path.join(d, 'run')),
        fs.writeFileSync(path.join(d, 'run', 'report.json'), '{"schemaVersion": 2, "kind": "report", "cells": [')
      ),
      /not valid JSON|JSON/,
    ],
  ])('refuses %s with a message and writes nothing', async (_, make, says) => {
    make(dir);
    const before = listing(path.join(dir, 'run'));
    expect(await main(['report', path.join(dir, 'run')])).toBe(1);
    expect(errors.join('\n')).toMatch(says);
    expect(errors.join('\n')).toContain('nothing was written');
    expect(listing(path.join(dir, 'run'))).toEqual(before);
  });

  it('needs exactly one directory', async () => {
    expect(await main(['report'])).toBe(2);
    expect(errors.join('\n')).toContain('name one report directory');
  });
});
