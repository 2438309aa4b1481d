// @waits 39: the main job on every backend, and a second run gated against the baseline approved from the first.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../src/cli/main';
import { baselineFromReport, compareWithBaseline, renderGateResult } from '../src/report/gate';
import { readReportFile } from '../src/report/schema';
import { runMatrix } from '../src/run/matrix';
import { BACKEND_NAMES, type BackendName } from '../src/backends/types';
import type { Cell, Report } from '../src/report/schema';
import { integrationBackends } from './harness';
import { reportFiles } from './report-files';

// The real main job, on what this machine has: one private server per backend, a small matrix, the written report
// read back through the schema. Every count below comes from those servers.
const ROWS = 200;
const selected = integrationBackends().filter((b) => !b.id.includes('@'));
const available = selected.filter((b) => b.available);
const ids = available.map((b) => b.id);

/**
 * What each backend's cells must show, per strategy. Keyed by every backend name, so a new backend does not compile
 * until it says what its main job shows; a backend this run cannot reach becomes a visible skip with its reason.
 */
type CellExpectation = (c: Cell) => void;
const EXPECTED: Record<BackendName, Record<string, CellExpectation>> = {
  sqlite: {
    // BEGIN + 200 inserts + COMMIT, plus the one prepare of the insert.
    'better-sqlite3.per-row-tx': (c) => {
      expect(c.layers.driver?.calls).toBe(ROWS + 3);
      expect(c.layers.server?.summary.rowsInserted).toBe(ROWS);
    },
    'better-sqlite3.multirow': (c) => {
      expect(c.layers.driver?.byKind).toMatchObject({ execute: 1 });
      expect(c.layers.server?.summary.rowsInserted).toBe(ROWS);
    },
    // node-sqlite3 in the same run, on the same file: its rows are reset, checked and read back through its own copy
    // of SQLite, never better-sqlite3's.
    'sqlite3.per-row-tx': (c) => {
      expect(c.layers.driver?.calls).toBe(ROWS + 3);
      expect(c.layers.driver?.byKind).toMatchObject({ prepare: 1, query: 2, execute: ROWS });
      expect(c.layers.server?.summary.rowsInserted).toBe(ROWS);
    },
    'sqlite3.multirow': (c) => {
      expect(c.layers.driver?.byKind).toMatchObject({ prepare: 1, execute: 1 });
      expect(c.layers.server?.summary.rowsInserted).toBe(ROWS);
    },
  },
  mariadb: {
    'mariadb.batch': (c) => {
      expect(c.layers.driver?.byKind.batch).toBe(1);
      expect(c.layers.wire?.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 });
      expect(c.layers.server?.summary).toMatchObject({ executes: 1, bulkExecutes: 1, rowsInserted: ROWS });
    },
    'mariadb.batch-nobulk': (c) => {
      expect(c.layers.driver?.byKind.batch).toBe(1);
      expect(c.layers.wire?.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: ROWS });
      expect(c.layers.server?.summary).toMatchObject({ executes: ROWS, rowsInserted: ROWS });
    },
    'mysql2.query-multirow': (c) => {
      expect(c.layers.wire?.commands).toEqual({ COM_QUERY: 1 });
      expect(c.layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: ROWS });
    },
  },
  mysql: {
    // The connector's bulk protocol is MariaDB's: on MySQL one batch() goes out as one execute per row.
    'mariadb.batch': (c) => {
      expect(c.layers.driver?.byKind.batch).toBe(1);
      expect(c.layers.wire?.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: ROWS });
      expect(c.layers.server?.summary).toMatchObject({ executes: ROWS, rowsInserted: ROWS });
      expect(c.verdict.reconciliation.join('\n')).toMatch(/does not advertise COM_STMT_BULK_EXECUTE/);
      expect(c.verdict.discrepancies).toEqual([]);
    },
    'mysql2.execute-per-row-tx': (c) => {
      expect(c.layers.driver?.byKind).toMatchObject({ query: 2, execute: ROWS });
      expect(c.layers.wire?.commands).toEqual({ COM_QUERY: 2, COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: ROWS });
      expect(c.layers.server?.summary).toMatchObject({ statements: ROWS + 2, prepares: 1, executes: ROWS, commits: 1, rowsInserted: ROWS });
    },
  },
  postgres: {
    'pg.unnest': (c) => {
      expect(c.layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: ROWS });
    },
    // BEGIN + 200 inserts + COMMIT, each one round trip.
    'pg.per-row-tx': (c) => {
      expect(c.layers.wire?.roundTrips).toBe(ROWS + 2);
      expect(c.layers.server?.summary).toMatchObject({ statements: ROWS + 2, commits: 1, rowsInserted: ROWS });
    },
    // One extended-protocol statement carrying every row: Parse/Describe answered with one Flush, then Bind/Execute/Sync.
    'postgres-js.multirow': (c) => {
      expect(c.layers.driver?.byKind).toMatchObject({ query: 1 });
      expect(c.layers.wire?.commands).toMatchObject({ Parse: 1, Bind: 1, Execute: 1, Sync: 1 });
      expect(c.layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: ROWS });
    },
    'postgres-js.unnest': (c) => {
      expect(c.layers.wire?.roundTrips).toBe(1);
      expect(c.layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: ROWS });
    },
    // BEGIN goes out as a simple query; the insert and COMMIT are prepared once and bound per call.
    'postgres-js.pipelined-tx': (c) => {
      expect(c.layers.driver?.calls).toBe(ROWS + 2);
      expect(c.layers.wire?.commands).toMatchObject({ Query: 1, Bind: ROWS + 1, Execute: ROWS + 1 });
      expect(c.layers.server?.summary).toMatchObject({ statements: ROWS + 2, inserts: ROWS, commits: 1, rowsInserted: ROWS });
    },
  },
};

const STRATEGIES = [...new Set(available.flatMap((b) => Object.keys(EXPECTED[b.backend])))];

function cell(report: Report, backendName: string, strategy: string): Cell {
  const found = report.cells.find((c) => c.backendName === backendName && c.strategy === strategy && !c.hot);
  if (!found) throw new Error(`no ${backendName} ${strategy} cell in ${report.cells.map((c) => c.key).join(', ')}`);
  return found;
}

async function runJob(dir: string, repeats: number, warmups: number): Promise<{ code: number; report: Report }> {
  const code = await main([
    'run',
    '--backends',
    ids.join(','),
    '--strategies',
    STRATEGIES.join(','),
    '--rows',
    String(ROWS),
    '--hot-rows',
    String(ROWS),
    '--repeats',
    String(repeats),
    '--warmups',
    String(warmups),
    '--out',
    dir,
  ]);
  return { code, report: readReportFile(dir) };
}

describe('sqltally run (the main job)', () => {
  const out = mkdtempSync(join(tmpdir(), 'sqltally-main-job-'));
  const dir = join(out, 'report');
  let report: Report;
  let code: number;

  beforeAll(async () => {
    ({ code, report } = await runJob(dir, 5, 1));
  }, 900_000);
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('exits 0 and writes report.json, events.json, report.md and bench.json that validate against the schema', () => {
    expect(code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(reportFiles(report));
    expect(report.status).toBe('ok');
    expect(report.backends.map((b) => b.name).sort()).toEqual(available.map((b) => b.backend).sort());
  });

  it('verifies every row and asserts every cell on private servers', () => {
    for (const c of report.cells) {
      // The reason and the server layer's notes (whose other sessions were listed) ride along only when the verdict
      // is not assert, so a failure shows why.
      const why = c.verdict.kind === 'assert' ? {} : { reason: c.verdict.reason, serverNotes: c.layers.server?.notes };
      expect({ key: c.key, verifiedRows: c.verifiedRows, verdict: c.verdict.kind, ...why }).toEqual({ key: c.key, verifiedRows: ROWS, verdict: 'assert' });
      expect(c.timings?.samplesNs).toHaveLength(5);
      expect(c.timings?.warmupNs).toHaveLength(1);
    }
  });

  it('times every cell a second way, with counting off, alternated with the counted repeats', () => {
    for (const c of report.cells) {
      const u = c.uninstrumented;
      expect({ key: c.key, error: u?.error, samples: u?.timings?.samplesNs.length }).toEqual({ key: c.key, error: undefined, samples: 5 });
      // The instrument's cost per round trip exists exactly where there is a wire layer with round trips.
      expect({ key: c.key, perRoundTrip: typeof u?.instrumentCost?.perRoundTripNs }).toEqual({
        key: c.key,
        perRoundTrip: (c.layers.wire?.roundTrips ?? 0) > 0 ? 'number' : 'object',
      });
    }
    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    expect(md).toContain("p50 is the strategy's own time: runs with counting off");
    const bench = JSON.parse(readFileSync(join(dir, 'bench.json'), 'utf8')) as { name: string }[];
    for (const c of report.cells)
      expect(bench.map((e) => e.name)).toContainEqual(
        expect.stringMatching(new RegExp(`${c.strategy.replace(/\./g, '\\.')} ${c.rows} rows${c.hot ? ' hot' : ''}( \\(.*\\))? p50 uninstrumented$`)),
      );
  });

  for (const name of BACKEND_NAMES) {
    const b = selected.find((s) => s.backend === name);
    for (const [strategy, expectation] of Object.entries(EXPECTED[name])) {
      const title = `${name} ${strategy}: every layer shows what the path sent`;
      if (!b) it.skip(`${title} (skipped: not in SQLTALLY_BACKENDS)`, () => undefined);
      else if (!b.available) it.skip(`${title} (skipped: ${b.reason})`, () => undefined);
      else it(title, () => expectation(cell(report, name, strategy)));
    }
  }

  it('passes the gate when a second run is compared with the baseline approved from the first', async () => {
    const baselineFile = join(out, 'baseline.json');
    expect(await main(['gate', '--report', dir, '--baseline', baselineFile, '--update'])).toBe(0);
    // Repeats and warm-ups do not change counts, so the second run can be short; every count must come out the same.
    const second = await runJob(join(out, 'second'), 5, 0);
    expect(second.code).toBe(0);
    expect(await main(['gate', '--report', join(out, 'second'), '--baseline', baselineFile])).toBe(0);
  }, 900_000);

  it('fails the gate with a readable diff when a batched cell becomes one row per call', () => {
    // The baseline was approved while the path batched; the same cell now carries the per-row path's real counts.
    const [batched, perRow] = ids.includes('mariadb')
      ? [cell(report, 'mariadb', 'mariadb.batch'), cell(report, 'mariadb', 'mariadb.batch-nobulk')]
      : [cell(report, 'sqlite', 'better-sqlite3.multirow'), cell(report, 'sqlite', 'better-sqlite3.per-row-tx')];
    const approved: Report = { ...report, cells: report.cells.map((c) => (c.key === perRow.key ? { ...c, layers: batched.layers } : c)) };
    const result = compareWithBaseline(report, baselineFromReport(approved));
    expect(result.pass).toBe(false);
    const text = renderGateResult(result, { report: 'report.json', baseline: 'baseline.json' });
    expect(text).toContain(perRow.key);
    expect(text).toMatch(/\d+ -> \d+ \(\+\d+\)\s+<- FAIL/);
  });

  it('refuses to write into the now non-empty output directory, leaving it as it was', async () => {
    const before = readdirSync(dir).sort();
    expect(await main(['run', '--backends', 'sqlite', '--rows', '10', '--out', dir])).not.toBe(0);
    expect(readdirSync(dir).sort()).toEqual(before);
  });
});

describe('sqltally run on a machine with only SQLite', () => {
  it('runs SQLite, skips every server backend with a reason a person can act on, and still reports ok', async () => {
    // Forcing the external provider with no URL set makes every server backend unavailable, as on a bare machine.
    const env = { ...process.env, SQLTALLY_PROVIDER: 'external' };
    const report = await runMatrix({ backends: [], strategies: ['better-sqlite3.multirow'], rows: [50], hotRows: [], warmups: 0, repeats: 5 }, { env });
    expect(report.status).toBe('ok');
    expect(report.backends.map((b) => b.name)).toEqual(['sqlite']);
    expect(report.skipped.map((s) => s.backend).sort()).toEqual(['mariadb', 'mysql', 'postgres']);
    for (const s of report.skipped) expect(s.reason).toMatch(/SQLTALLY_[A-Z]+_URL/);
    expect(report.cells).toHaveLength(1);
    expect(report.cells[0]).toMatchObject({ backendName: 'sqlite', verifiedRows: 50, verdict: { kind: 'assert' } });
  });
});
