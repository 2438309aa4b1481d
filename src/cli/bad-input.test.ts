import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { baselineFromReport } from '../report/gate';
import { fixtureReport, sqliteCell } from '../report/report.fixture';
import { ReportSchema, toJson } from '../report/schema';
import { main } from './main';

/**
 * Bad input to every command, as one table: what was typed or set, the exit code, the message naming it, and proof
 * that nothing was written. Cases needing a server are in integration/bad-input.test.ts.
 */

/** Files each case finds in its scratch directory. */
const REPORT = fixtureReport([sqliteCell(100)]);
const SCRATCH_FILES: Record<string, string> = {
  'report/report.json': toJson(REPORT),
  'baseline.json': toJson(baselineFromReport(REPORT, new Date('2026-01-02T03:04:05.000Z'))),
  'corrupt-baseline.json': '{"schemaVersion": 1, "kind": "baseline", "cells": [',
  'not-json.json': 'this is not JSON',
  'old-schema/report.json': JSON.stringify({ ...JSON.parse(toJson(REPORT)), schemaVersion: 0 }),
  'newer-baseline.json': JSON.stringify({ ...JSON.parse(toJson(baselineFromReport(REPORT, new Date('2026-01-02T03:04:05.000Z')))), schemaVersion: 99 }),
  'full/notes.txt': 'a person keeps notes here',
  'a-file': 'a file where a directory would have to be',
};

interface Case {
  argv: (scratch: string) => string[];
  env?: Record<string, string>;
  code: number;
  /** Every one must appear in stderr (or stdout, for commands that report there). */
  says: (string | RegExp)[];
  /** Checked on a `--json` report on stdout, when the run got that far. */
  report?: { status: 'failed'; phase: string; backend?: string };
}

const S = (p: string) => (scratch: string) => path.join(scratch, p);
const OUT = 'out';
/** A `run` that would write into scratch/out, so a case proves that out/ never appears. */
const run =
  (...args: string[]) =>
  (scratch: string) => ['run', '--out', path.join(scratch, OUT), ...args];
const runNoWrite =
  (...args: string[]) =>
  () => ['run', '--json', '--no-write', ...args];

const CASES: Record<string, Case> = {
  // run: flags
  'run --rows ""': { argv: run('--rows', ''), code: 2, says: ['sqltally run: --rows is empty (got "")'] },
  'run --rows ,': { argv: run('--rows', ','), code: 2, says: ['--rows is empty (got ",")'] },
  'run --warmups=-1': { argv: run('--warmups=-1'), code: 2, says: ['sqltally run: --warmups takes a whole number of at least 0, got "-1"'] },
  'run --warmups -1': { argv: run('--warmups', '-1'), code: 2, says: ['--warmups got "-1", which looks like an option'] },
  'run --repeats 4': { argv: run('--repeats', '4'), code: 2, says: ['--repeats takes a whole number of at least 5, got "4"'] },
  'run --repeats 2.5': { argv: run('--repeats', '2.5'), code: 2, says: ['--repeats takes a whole number of at least 5, got "2.5"'] },
  'run --rows 1e9': {
    argv: run('--rows', '1e9'),
    code: 2,
    says: ['--rows "1e9": 1,000,000,000 rows is more than sqltally can hold in one cell (at most 500,000)'],
  },
  'run --rows 0x10': { argv: run('--rows', '0x10'), code: 2, says: ['--rows takes positive whole numbers such as 100,5000, got "0x10"'] },
  'run --rows 100,0': { argv: run('--rows', '100,0'), code: 2, says: ['--rows takes positive whole numbers such as 100,5000, got "0"'] },
  'run --rows 100,100': { argv: run('--rows', '100,100'), code: 2, says: ['--rows "100,100": names 100 more than once'] },
  'run --rows 400000,300000': {
    argv: run('--rows', '400000,300000', '--hot-rows', ''),
    code: 2,
    says: ['inserts 4,200,000 rows per strategy, more than the 3,000,000'],
  },
  'run --hot-rows 5000,5000': { argv: run('--hot-rows', '5000,5000'), code: 2, says: ['--hot-rows "5000,5000": names 5000 more than once'] },
  'run --backends " sqlite , sqlite "': {
    argv: run('--backends', ' sqlite , sqlite '),
    code: 2,
    says: ['--backends " sqlite , sqlite ": names sqlite more than once'],
  },
  'run --cell-timeout-ms 0': {
    argv: run('--cell-timeout-ms', '0'),
    code: 2,
    says: ['sqltally run: --cell-timeout-ms takes a whole number of at least 10, got "0"'],
  },
  'run --cell-timeout-ms 5s': { argv: run('--cell-timeout-ms', '5s'), code: 2, says: ['--cell-timeout-ms takes a whole number of at least 10, got "5s"'] },
  'run --cell-timeout-ms 1e9': {
    argv: run('--cell-timeout-ms', '1e9'),
    code: 2,
    says: ['--cell-timeout-ms "1e9": 1,000,000,000 ms is longer than the 86,400,000 ms (one day) a cell may wait'],
  },
  'run --backends ,': { argv: run('--backends', ','), code: 2, says: ['--backends is empty (got ",")'] },
  'run --backends oracle': { argv: run('--backends', 'oracle'), code: 2, says: ['--backends "oracle": unknown backend "oracle"'] },
  'run --backends all,sqlite': { argv: run('--backends', 'all,sqlite'), code: 2, says: ['--backends "all,sqlite": "all" already means every backend'] },
  'run --strategies nope': { argv: run('--strategies', 'nope'), code: 2, says: ['--strategies "nope": unknown strategy "nope"'] },
  'run --strategies pg.unnest --backends sqlite': {
    argv: run('--strategies', 'pg.unnest', '--backends', 'sqlite'),
    code: 2,
    says: ['[backend sqlite, phase config] strategy "pg.unnest" does not run on sqlite'],
  },
  'run --driver-releases newest': { argv: run('--driver-releases', 'newest'), code: 2, says: ['--driver-releases takes "all" or "default", got "newest"'] },
  'run --bogus': { argv: run('--bogus'), code: 2, says: ['sqltally run: unknown option --bogus', 'sqltally run --help'] },
  'run --force=yes': { argv: run('--force=yes'), code: 2, says: ['--force takes no value, got "yes"'] },
  'run positional': { argv: run('sqlite'), code: 2, says: ['unexpected argument "sqlite"'] },
  'run --out <dangling symbolic link>': {
    argv: (s) => ['run', '--out', path.join(s, 'dangling')],
    code: 2,
    says: [/--out: .*output path .*dangling is a symbolic link to .*nowhere.*, which does not exist/],
  },
  'run --rows 100 --rows --no-write': {
    argv: run('--rows', '100', '--rows', '--no-write'),
    code: 2,
    says: ['--rows got "--no-write", which looks like an option'],
  },
  'run --out ""': { argv: () => ['run', '--out', ''], code: 2, says: ['--out is empty'] },
  'run --out x --no-write': { argv: run('--no-write'), code: 2, says: ['and --no-write contradict each other'] },
  'run --out <non-empty dir>': {
    argv: (s) => ['run', '--out', path.join(s, 'full')],
    code: 2,
    says: [/--out: .*output directory .*full already exists and is not empty \(notes\.txt\)/],
  },
  'run --out <below a file>': {
    argv: (s) => ['run', '--out', path.join(s, 'a-file', 'run')],
    code: 2,
    says: [/--out: .*a-file\/run.*a part of the path is a file/],
  },

  // run: environment
  'SQLTALLY_MARIADB_URL=notaurl': {
    argv: runNoWrite('--backends', 'mariadb', '--rows', '100'),
    env: { SQLTALLY_MARIADB_URL: 'notaurl' },
    code: 1,
    says: ['[backend mariadb, provider external, phase config] SQLTALLY_MARIADB_URL is not a usable URL: cannot parse "notaurl"', 'nothing was started'],
    report: { status: 'failed', phase: 'config', backend: 'mariadb' },
  },
  'SQLTALLY_MARIADB_URL with port 99999': {
    argv: runNoWrite('--backends', 'mariadb'),
    env: { SQLTALLY_MARIADB_URL: 'mysql://u:hunter2@127.0.0.1:99999/d' },
    code: 1,
    says: ['SQLTALLY_MARIADB_URL is not a usable URL: cannot parse "mysql://u:***@127.0.0.1:99999/d"'],
    report: { status: 'failed', phase: 'config', backend: 'mariadb' },
  },
  'SQLTALLY_MARIADB_URL=http://...': {
    argv: runNoWrite('--backends', 'mariadb'),
    env: { SQLTALLY_MARIADB_URL: 'http://db.internal/bench' },
    code: 1,
    says: ['SQLTALLY_MARIADB_URL is not a usable URL: scheme "http" is not one of mariadb://, mysql://'],
    report: { status: 'failed', phase: 'config', backend: 'mariadb' },
  },
  'SQLTALLY_POSTGRES_URL with port abc and ?password=': {
    argv: runNoWrite('--backends', 'postgres'),
    env: { SQLTALLY_POSTGRES_URL: 'postgres://u@127.0.0.1:abc/d?password=hunter2' },
    code: 1,
    says: [
      '[backend postgres, provider external, phase config] SQLTALLY_POSTGRES_URL is not a usable URL: cannot parse "postgres://u@127.0.0.1:abc/d?password=***"',
    ],
    report: { status: 'failed', phase: 'config', backend: 'postgres' },
  },
  'a bad URL among good backends fails before sqlite starts': {
    argv: runNoWrite('--backends', 'sqlite,postgres', '--rows', '10'),
    env: { SQLTALLY_POSTGRES_URL: 'postgresql://' },
    code: 1,
    says: ['SQLTALLY_POSTGRES_URL is not a usable URL'],
    report: { status: 'failed', phase: 'config', backend: 'postgres' },
  },
  'SQLTALLY_PROVIDER=bogus': {
    argv: run('--backends', 'mariadb'),
    env: { SQLTALLY_PROVIDER: 'bogus' },
    code: 2,
    says: ['[backend mariadb, phase config] SQLTALLY_PROVIDER="bogus" is not a provider'],
  },
  'only unreachable backends: nothing measured': {
    argv: runNoWrite('--backends', 'mariadb'),
    env: { SQLTALLY_MARIADB_PROVIDER: 'external' },
    code: 1,
    says: ['nothing was measured: 0 cells, because every requested backend was skipped (mariadb: SQLTALLY_MARIADB_PROVIDER=external', '0 cell(s)'],
    report: { status: 'failed', phase: 'provision', backend: 'mariadb' },
  },

  // gate
  'gate without options': { argv: () => ['gate'], code: 2, says: ['sqltally gate: --report and --baseline are required'] },
  'gate --bogus': { argv: () => ['gate', '--bogus'], code: 2, says: ['sqltally gate: unknown option --bogus'] },
  'gate --report <missing>': {
    argv: (s) => ['gate', '--report', S('nope')(s), '--baseline', S('baseline.json')(s)],
    code: 2,
    says: [/nope: cannot read report: no such file/],
  },
  'gate --report <not JSON>': {
    argv: (s) => ['gate', '--report', S('not-json.json')(s), '--baseline', S('baseline.json')(s)],
    code: 2,
    says: [/not-json\.json: not valid JSON/],
  },
  'gate --report <schema 0>': {
    argv: (s) => ['gate', '--report', S('old-schema')(s), '--baseline', S('baseline.json')(s)],
    code: 2,
    says: ['written by sqltally schema 0; this is 2'],
  },
  'gate --report <a baseline>': {
    argv: (s) => ['gate', '--report', S('baseline.json')(s), '--baseline', S('baseline.json')(s)],
    code: 2,
    says: ['is a sqltally "baseline", not a report'],
  },
  'gate --baseline <a report>': {
    argv: (s) => ['gate', '--report', S('report')(s), '--baseline', S('report/report.json')(s)],
    code: 2,
    says: ['is a sqltally "report", not a baseline', 'nothing was written'],
  },
  'gate --baseline <corrupt> --update': {
    argv: (s) => ['gate', '--report', S('report')(s), '--baseline', S('corrupt-baseline.json')(s), '--update'],
    code: 2,
    says: [/corrupt-baseline\.json: not valid JSON/, 'nothing was written'],
  },
  'gate --baseline <schema 99> --update': {
    argv: (s) => ['gate', '--report', S('report')(s), '--baseline', S('newer-baseline.json')(s), '--update'],
    code: 2,
    says: [/newer-baseline\.json: written by sqltally schema 99, newer than this one \(2\)/, 'nothing was written'],
  },
  'gate --baseline <missing> without --update': {
    argv: (s) => ['gate', '--report', S('report')(s), '--baseline', S('new-baseline.json')(s)],
    code: 2,
    says: ['cannot read baseline: no such file', 'create it with: sqltally gate'],
  },

  // merge
  'merge without options': { argv: () => ['merge'], code: 2, says: ['sqltally merge: --out is required'] },
  'merge --out o (no reports)': { argv: (s) => ['merge', '--out', S(OUT)(s)], code: 2, says: ['sqltally merge: no reports to merge'] },
  'merge a missing report': {
    argv: (s) => ['merge', '--out', S(OUT)(s), S('nope.json')(s)],
    code: 2,
    says: [/nope\.json: cannot read report: no such file/, 'nothing was written'],
  },
  'merge a report of schema 0': { argv: (s) => ['merge', '--out', S(OUT)(s), S('old-schema')(s)], code: 2, says: ['written by sqltally schema 0'] },
  'merge one report twice': { argv: (s) => ['merge', '--out', S(OUT)(s), S('report')(s), S('report/report.json')(s)], code: 2, says: ['nothing was written'] },
  'merge into a non-empty directory': {
    argv: (s) => ['merge', '--out', S('full')(s), S('report')(s)],
    code: 2,
    says: [/full already exists and is not empty/, 'nothing was written'],
  },

  // backends and the CLI itself
  'backends --bogus': { argv: () => ['backends', '--bogus'], code: 2, says: ['sqltally backends: unknown option --bogus'] },
  'backends oracle': { argv: () => ['backends', 'oracle'], code: 2, says: ['[backend oracle, phase config] unknown backend "oracle"'] },
  'backends with a set but unusable URL': {
    argv: () => ['backends', 'mariadb'],
    env: { SQLTALLY_MARIADB_URL: 'mysql://u:hunter2@h:notaport/d' },
    code: 1,
    says: ['SQLTALLY_MARIADB_URL is set but unusable', 'mysql://u:***@h:notaport/d'],
  },
  'an unknown command': { argv: () => ['runn'], code: 2, says: ['sqltally: unknown command "runn"'] },
};

/** Every file under `dir` with a hash of its bytes: equal before and after means nothing was written. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name);
      if (entry.isSymbolicLink()) out[path.relative(dir, full)] = `-> ${fs.readlinkSync(full)}`;
      else if (entry.isDirectory()) {
        out[`${path.relative(dir, full)}/`] = 'dir';
        walk(full);
      } else out[path.relative(dir, full)] = createHash('sha256').update(fs.readFileSync(full)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

describe('bad input to the sqltally CLI', () => {
  let scratch: string;
  const savedEnv = { ...process.env };
  const repoEntries = fs.readdirSync(path.resolve(__dirname, '..', '..')).sort();

  beforeEach(() => {
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-bad-input-'));
    for (const [name, content] of Object.entries(SCRATCH_FILES)) {
      fs.mkdirSync(path.dirname(path.join(scratch, name)), { recursive: true });
      fs.writeFileSync(path.join(scratch, name), content);
    }
    // Hermetic: private directories (and the sweep of stale ones) under scratch, no root filesystems, no engine.
    fs.symlinkSync(path.join(scratch, 'nowhere', 'run'), path.join(scratch, 'dangling'));
    fs.mkdirSync(path.join(scratch, 'tmp'));
    process.env['TMPDIR'] = path.join(scratch, 'tmp');
    process.env['SQLTALLY_ROOTFS_CACHE'] = path.join(scratch, 'no-rootfs');
    process.env['DOCKER_HOST'] = 'unix:///nonexistent/docker.sock';
    for (const key of Object.keys(process.env)) if (/^SQLTALLY_.*_(URL|PROVIDER)$|^SQLTALLY_PROVIDER$/.test(key)) delete process.env[key];
  });
  afterEach(() => {
    jest.restoreAllMocks();
    for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
    Object.assign(process.env, savedEnv);
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('has at least 25 cases', () => {
    expect(Object.keys(CASES).length).toBeGreaterThanOrEqual(25);
  });

  it.each(Object.entries(CASES))('%s', async (_name, c) => {
    Object.assign(process.env, c.env ?? {});
    const out: string[] = [];
    const err: string[] = [];
    jest.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
    jest.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
    jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => out.push(String(chunk)) > 0);
    jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => err.push(String(chunk)) > 0);
    const before = tree(scratch);

    const code = await main(c.argv(scratch));

    const stdout = out.join('\n');
    const stderr = err.join('\n');
    const said = `${stderr}\n${stdout}`;
    expect({ code, said }).toEqual({ code: c.code, said: expect.any(String) });
    for (const s of c.says) {
      if (typeof s === 'string') expect(said).toContain(s);
      else expect(said).toMatch(s);
    }
    // Secrets set in the environment never come back out.
    expect(said).not.toContain('hunter2');
    // A usage error is one line, then where the help is: never a stack or a dump.
    if (c.code === 2) expect(stderr).not.toMatch(/\n\s+at |ZodError|"code":/);
    if (c.report) {
      const report = ReportSchema.parse(JSON.parse(out.find((o) => o.trimStart().startsWith('{')) ?? 'null'));
      expect({
        status: report.status,
        phase: report.failure?.phase,
        backend: report.failure?.backend,
        cells: report.cells.length,
        backends: report.backends,
      }).toEqual({
        status: c.report.status,
        phase: c.report.phase,
        backend: c.report.backend,
        cells: 0,
        backends: [],
      });
      expect(report.failure?.message).not.toContain('hunter2');
    }
    // Nothing written: every file as it was, no output directory, nothing left in TMPDIR, nothing in the checkout.
    expect(tree(scratch)).toEqual(before);
    expect(fs.existsSync(path.join(scratch, OUT))).toBe(false);
    expect(fs.readdirSync(path.join(scratch, 'tmp'))).toEqual([]);
    expect(fs.readdirSync(path.resolve(__dirname, '..', '..')).sort()).toEqual(repoEntries);
  });
});
