import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../cli/main';
import { baselineFromReport, compareWithBaseline, renderGateResult } from '../reports/gate';
import { readReportFile } from '../reports/schema';
import { runMatrix } from '../run/matrix';
import { strategiesFor } from '../workload/strategies';
import type { Cell, Report } from '../reports/schema';
import { integrationBackends } from './harness';

// The real main job, on what this machine has: one private server per backend, a small matrix, the written report
// read back through the schema. Every count below comes from those servers.
const available = integrationBackends().filter((b) => b.available && !b.id.includes('@'));
const ids = available.map((b) => b.id);

const STRATEGIES = [
  'better-sqlite3.per-row-tx',
  'better-sqlite3.multirow',
  'mysql2.query-multirow',
  'mariadb.batch',
  'mariadb.batch-nobulk',
  'pg.unnest',
  'pg.per-row-tx',
].filter((name) => ids.some((id) => strategiesFor(id).some((s) => s.name === name)));

function cell(report: Report, backendName: string, strategy: string): Cell {
  const found = report.cells.find((c) => c.backendName === backendName && c.strategy === strategy && !c.hot);
  if (!found) throw new Error(`no ${backendName} ${strategy} cell in ${report.cells.map((c) => c.key).join(', ')}`);
  return found;
}

describe('sqltally run (the main job)', () => {
  const out = mkdtempSync(join(tmpdir(), 'sqltally-main-job-'));
  const dir = join(out, 'report');
  let report: Report;
  let code: number;

  beforeAll(async () => {
    code = await main(['run', '--backends', ids.join(','), '--strategies', STRATEGIES.join(','), '--rows', '200', '--hot-rows', '200', '--repeats', '5', '--warmups', '1', '--out', dir]);
    report = readReportFile(dir);
  }, 900_000);
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('exits 0 and writes report.json, report.md and bench.json that validate against the schema', () => {
    expect(code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(['bench.json', 'report.json', 'report.md']);
    expect(report.status).toBe('ok');
    expect(report.backends.map((b) => b.name).sort()).toEqual(available.map((b) => b.backend).sort());
  });

  it('verifies every row and asserts every cell on private servers', () => {
    for (const c of report.cells) {
      // The reason rides along only when the verdict is not assert, so a failure shows why.
      const why = c.verdict.kind === 'assert' ? {} : { reason: c.verdict.reason };
      expect({ key: c.key, verifiedRows: c.verifiedRows, verdict: c.verdict.kind, ...why }).toEqual({ key: c.key, verifiedRows: 200, verdict: 'assert' });
      expect(c.timings?.samplesNs).toHaveLength(5);
      expect(c.timings?.warmupNs).toHaveLength(1);
    }
  });

  it('shows on every layer that a per-row path sends N statements where a batched one sends 1', () => {
    if (ids.includes('sqlite')) {
      expect(cell(report, 'sqlite', 'better-sqlite3.per-row-tx').layers.driver?.calls).toBe(203);
      expect(cell(report, 'sqlite', 'better-sqlite3.multirow').layers.server?.summary.rowsInserted).toBe(200);
    }
    if (ids.includes('mariadb')) {
      const bulk = cell(report, 'mariadb', 'mariadb.batch');
      const noBulk = cell(report, 'mariadb', 'mariadb.batch-nobulk');
      expect(bulk.layers.driver?.byKind.batch).toBe(1);
      expect(noBulk.layers.driver?.byKind.batch).toBe(1);
      expect(bulk.layers.wire?.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_BULK_EXECUTE: 1 });
      expect(noBulk.layers.wire?.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 200 });
      expect(noBulk.layers.server?.summary.executes).toBe(200);
      expect(bulk.layers.server?.summary.executes).toBe(1);
      expect(cell(report, 'mariadb', 'mysql2.query-multirow').layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: 200 });
    }
    if (ids.includes('mysql')) {
      // The connector's bulk protocol is MariaDB's: on MySQL one batch() goes out as one execute per row.
      const onMysql = cell(report, 'mysql', 'mariadb.batch');
      expect(onMysql.layers.driver?.byKind.batch).toBe(1);
      expect(onMysql.layers.wire?.commands).toEqual({ COM_STMT_PREPARE: 1, COM_STMT_EXECUTE: 200 });
      expect(onMysql.layers.server?.summary).toMatchObject({ executes: 200, rowsInserted: 200 });
      expect(onMysql.verdict.reconciliation.join('\n')).toMatch(/does not advertise COM_STMT_BULK_EXECUTE/);
      expect(onMysql.verdict.discrepancies).toEqual([]);
    }
    if (ids.includes('postgres')) {
      expect(cell(report, 'postgres', 'pg.unnest').layers.server?.summary).toMatchObject({ statements: 1, rowsInserted: 200 });
      // BEGIN + 200 inserts + COMMIT, each one round trip.
      expect(cell(report, 'postgres', 'pg.per-row-tx').layers.wire?.roundTrips).toBe(202);
    }
  });

  it('passes the gate against a baseline made from itself', async () => {
    const baselineFile = join(out, 'baseline.json');
    writeFileSync(baselineFile, JSON.stringify(baselineFromReport(report)));
    expect(await main(['gate', '--report', dir, '--baseline', baselineFile])).toBe(0);
  });

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
    const report = await runMatrix(
      { backends: [], strategies: ['better-sqlite3.multirow'], rows: [50], hotRows: [], warmups: 0, repeats: 5 },
      { env },
    );
    expect(report.status).toBe('ok');
    expect(report.backends.map((b) => b.name)).toEqual(['sqlite']);
    expect(report.skipped.map((s) => s.backend).sort()).toEqual(['mariadb', 'mysql', 'postgres']);
    for (const s of report.skipped) expect(s.reason).toMatch(/SQLTALLY_[A-Z]+_URL/);
    expect(report.cells).toHaveLength(1);
    expect(report.cells[0]).toMatchObject({ backendName: 'sqlite', verifiedRows: 50, verdict: { kind: 'assert' } });
  });
});

