import { CaptureSession, type Captured } from '../capture/capture';
import { runSql, type DriverHandle } from '../counters/driver/open';
import { SqltallyError } from '../containers/errors';
import { listBackends, parseBackendId, resolveBackend } from '../containers/registry';
import { BACKEND_NAMES, type BackendDescription, type Resolution, type StartedBackend, type Unavailable } from '../containers/types';
import type { DriverName } from '../counters/driver/names';
import { EventLoopDelayRecorder } from '../capture/event-loop';
import { timingsFromSamples } from '../reports/timings';
import { checkDistinctServers, checkPlan, type RunPlan } from './plan';
import { finishReport } from './summary';
import { collectEnvironment, packageVersion } from '../reports/environment';
import { installedReleases, releaseVersion } from '../counters/driver/releases';
import { cellFromTally } from '../reports/cell';
import { countsOf, type Cell, type Environment, type Matrix, type SkippedBackend } from '../reports/schema';
import { failureOf, type ReportInput } from '../reports/output';
import type { Report } from '../reports/schema';
import { makeRows } from '../workload/rows';
import { findStrategy, strategiesFor, type AnyInsertStrategy, type ExpectedDriverCounts, type InsertStrategy } from '../workload/strategies';
import { createTableSql, dropTableSql, workloadTable } from '../workload/table';
import { verifyRows } from '../workload/verify';
import type { Verdict } from '../verdict/types';

export { DEFAULT_HOT_ROWS, DEFAULT_REPEATS, DEFAULT_ROWS, DEFAULT_WARMUPS, MAX_ROWS_PER_CELL, MAX_ROWS_PER_STRATEGY, RunPlanSchema } from './plan';
export type { RunPlan } from './plan';

export interface RunHooks {
  /** One line per finished cell or event, for a person watching. */
  progress?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/**
 * Every named strategy must run on at least one requested backend; findStrategy words the error (unknown name, or
 * which backends it is for). Checked before any backend is resolved or started.
 */
function checkStrategies(names: readonly string[], backends: readonly string[]): void {
  const requested = backends.map((id) => parseBackendId(id).name);
  for (const name of names) {
    if (!requested.some((b) => strategiesFor(b).some((s) => s.name === name))) findStrategy(name, requested[0] ?? 'sqlite');
  }
}

function strategiesOn(backend: BackendDescription, wanted: readonly string[]): AnyInsertStrategy[] {
  if (wanted.length === 0) return strategiesFor(backend.name);
  return strategiesFor(backend.name).filter((s) => wanted.includes(s.name));
}

/** Counts a rerun must reproduce exactly; if two measured repeats differ, something else touched the server. */
function countsKey(cell: Cell): string {
  return JSON.stringify(countsOf(cell));
}


interface CellRun {
  tallies: Captured<void>[];
  warmupNs: number[];
  verifiedRows: number | null;
  eventLoop: ReturnType<EventLoopDelayRecorder['result']> | null;
}

/**
 * Runs one strategy at one row count: warm-ups, then measured repeats, each on a fresh connection with a fresh
 * table (so a statement cache never hides a prepare), or, for the hot point, all on one warm connection.
 * Every run's rows are verified through a fresh connection.
 */
async function runCell<D extends DriverName>(
  session: CaptureSession<D>,
  backend: StartedBackend,
  strategy: InsertStrategy<D>,
  rows: number,
  plan: RunPlan,
  hot: boolean,
): Promise<CellRun> {
  const table = workloadTable(backend.description.name);
  const insertPlan = strategy.plan(rows, backend.description.capabilities, { backend: backend.description.name });
  const input = strategy.prepare(makeRows(rows), table, insertPlan);
  const recreate = async (handle: DriverHandle<D>) => {
    await runSql(session.driver, handle, dropTableSql(table));
    await runSql(session.driver, handle, createTableSql(table));
  };
  // Emptied with DELETE, not DDL: dropping or truncating the table would invalidate the statements the hot point
  // keeps prepared, and MariaDB would re-prepare them behind the driver's back.
  const empty = async (handle: DriverHandle<D>) => {
    await runSql(session.driver, handle, `DELETE FROM ${table.quoted}`);
  };
  const result: CellRun = { tallies: [], warmupNs: [], verifiedRows: null, eventLoop: null };
  const loop = new EventLoopDelayRecorder();
  if (hot) {
    // The hot point reuses the connection that just ran the same insert: prepared statements are cached.
    await session.prepare(recreate);
    await session.measure((h) => strategy.run(h, input), { hot: true });
  }
  for (let i = 0; i < plan.warmups + plan.repeats; i++) {
    const measured = i >= plan.warmups;
    await session.prepare(hot ? empty : recreate, { hot });
    const tally = await session.measure((h) => strategy.run(h, input), {
      hot: true,
      ...(measured ? { around: <R>(work: () => Promise<R>) => loop.around(work) } : {}),
    });
    if (tally.workloadError) {
      result.tallies = [tally];
      return result;
    }
    result.verifiedRows = await verifyRows(backend, table, rows);
    if (measured) result.tallies.push(tally);
    else result.warmupNs.push(tally.durationNs);
  }
  result.eventLoop = loop.result();
  return result;
}

/**
 * How a cell differs from its strategy's own plan: the driver calls it should have made (derived from the same plan
 * that ran), the rows a fresh connection found, and the rows the server says it inserted. Empty when it matches.
 */
export function planDifferences(cell: Pick<Cell, 'layers' | 'verifiedRows' | 'verdict'>, expected: ExpectedDriverCounts, rows: number): string[] {
  const out: string[] = [];
  const driver = cell.layers.driver;
  if (driver) {
    const check = (what: string, actual: number, wanted: number) => {
      if (actual !== wanted) out.push(`driver ${what} ${actual}, the plan makes ${wanted}`);
    };
    check('calls', driver.calls, expected.calls);
    check('parameter sets', driver.parameterSets, expected.parameterSets);
    check('bind values', driver.bindValues, expected.bindValuesPerCall.reduce((a, b) => a + b, 0));
    for (const [kind, n] of Object.entries(expected.byKind)) check(`${kind} calls`, driver.byKind[kind as keyof typeof driver.byKind] ?? 0, n ?? 0);
    const planned = { ...expected.byClass };
    // Classes count executions: a planned prepare is a call, not a statement of its class.
    for (const call of expected.sequence) if (call.kind === 'prepare') planned[call.statementClass] = (planned[call.statementClass] ?? 0) - 1;
    for (const [cls, n] of Object.entries(planned)) check(`${cls} statements`, driver.byClass[cls as keyof typeof driver.byClass] ?? 0, n ?? 0);
  }
  if (cell.verifiedRows !== null && cell.verifiedRows !== rows) out.push(`a fresh connection found ${cell.verifiedRows} rows, the plan inserts ${rows}`);
  const serverRows = cell.layers.server?.summary.rowsInserted;
  if (cell.verdict.kind === 'assert' && serverRows !== null && serverRows !== undefined && serverRows !== rows) {
    out.push(`the server counted ${serverRows} rows inserted, the plan inserts ${rows}`);
  }
  return out;
}

function cellFrom(
  run: CellRun,
  strategy: AnyInsertStrategy,
  rows: number,
  hot: boolean,
  environment: Environment,
  driverVersion: string,
  expected: ExpectedDriverCounts,
): Cell {
  const first = run.tallies[0]!;
  const place = { strategy: strategy.name, rows, hot, environment, driverVersion, verifiedRows: run.verifiedRows };
  if (first.workloadError) return cellFromTally(first, { ...place, verifiedRows: null, timings: null });
  let verdict: Verdict = first.verdict;
  const worst = run.tallies.find((t) => t.verdict.kind === 'incomplete') ?? run.tallies.find((t) => t.verdict.kind === 'report');
  if (worst && worst.verdict.kind !== verdict.kind) verdict = worst.verdict;
  const keys = run.tallies.map((t) => countsKey(cellFromTally(t, { ...place, timings: null })));
  const differing = keys.findIndex((k) => k !== keys[0]);
  if (differing > 0 && verdict.kind === 'assert') {
    verdict = {
      ...verdict,
      kind: 'report',
      reason: `counts differed between measured repeats (repeat 1 vs repeat ${differing + 1}): a rerun must reproduce them exactly, so something else moved them; ${verdict.reason}`,
    };
  }
  // An assert means the layers agree with each other AND with what the strategy planned: a cell that differs from
  // its plan names each difference and is not assert.
  const differences = run.tallies.flatMap((t, i) =>
    planDifferences(cellFromTally({ ...t, verdict }, { ...place, timings: null }), expected, rows).map((d) => `repeat ${i + 1}: ${d}`),
  );
  if (differences.length > 0 && verdict.kind === 'assert') {
    verdict = { ...verdict, kind: 'report', reason: `the cell differs from its strategy's plan: ${[...new Set(differences)].slice(0, 10).join('; ')}; ${verdict.reason}` };
  }
  const timings = timingsFromSamples(run.warmupNs, run.tallies.map((t) => t.durationNs), run.eventLoop);
  return cellFromTally({ ...first, verdict }, { ...place, timings });
}

/**
 * The main job: every requested backend that is reachable here, every strategy, every row count, with the three
 * layers and a verdict per cell. Never throws for a backend or cell that fails: the report says it failed.
 * Throws only for bad input, before anything starts.
 */
export async function runMatrix(planInput: RunPlan, hooks: RunHooks = {}): Promise<Report> {
  const plan = checkPlan(planInput);
  const env = hooks.env ?? process.env;
  const progress = hooks.progress ?? (() => undefined);
  // Default: each backend's default variant (what `sqltally backends` lists first); `all`: every variant installed.
  const everyVariant = plan.backends.length === 1 && plan.backends[0] === 'all';
  const ids = everyVariant ? [] : plan.backends.length > 0 ? plan.backends : [...BACKEND_NAMES];
  checkStrategies(plan.strategies, everyVariant ? BACKEND_NAMES : ids);
  const startedAt = new Date().toISOString();
  const environment = collectEnvironment();

  const resolutions: Resolution[] = everyVariant ? await listBackends(env) : await Promise.all(ids.map((id) => resolveBackend(id, env)));
  const matrix: Matrix = {
    backends: resolutions.map((r) => r.id ?? r.backend),
    strategies: plan.strategies,
    rows: plan.rows,
    hotRows: plan.hotRows,
    warmups: plan.warmups,
    repeats: plan.repeats,
  };
  const skipped: SkippedBackend[] = [];
  const backends: BackendDescription[] = [];
  const cells: Cell[] = [];
  let failure: ReturnType<typeof failureOf> | undefined;

  checkDistinctServers(resolutions);
  // A URL a person set but sqltally cannot use fails the run before anything starts: skipping it would let a CI job
  // without a gate go green having measured nothing.
  const misconfigured = resolutions.filter((r): r is Unavailable => !r.available && r.misconfigured !== undefined);
  if (misconfigured.length > 0) {
    for (const r of resolutions) {
      if (!r.available) skipped.push({ backend: r.id ?? r.backend, reason: r.reason, environment: environment.id });
    }
    for (const r of misconfigured) progress(`FAILED ${r.id ?? r.backend}: ${r.reason}`);
    const first = misconfigured[0]!;
    return finishReport({
      status: 'failed',
      failure: {
        message: `${misconfigured.map((r) => r.reason).join('; ')}\n  nothing was started`,
        backend: first.id ?? first.backend,
        phase: 'config',
      },
      matrix,
      environments: [environment],
      backends,
      skipped,
      cells,
      startedAt,
      finishedAt: new Date().toISOString(),
    });
  }

  for (const resolution of resolutions) {
    if (!resolution.available) {
      skipped.push({ backend: resolution.id ?? resolution.backend, reason: resolution.reason, environment: environment.id });
      progress(`skip ${resolution.id ?? resolution.backend}: ${resolution.reason}`);
      continue;
    }
    let started: StartedBackend | undefined;
    try {
      progress(`start ${resolution.id ?? resolution.backend} (${resolution.provider}: ${resolution.origin})`);
      started = await resolution.start();
      const description = started.description;
      backends.push(description);
      progress(`ready ${description.id} ${description.serverVersion} in ${Math.round(description.readyMs)} ms`);
      const runs = strategiesOn(description, plan.strategies).flatMap((strategy) => {
        const releases = installedReleases(strategy.driver);
        return (plan.driverReleases === 'all' ? releases : releases.slice(0, 1)).map((release, i) => ({ strategy, release, pinned: i === 0 }));
      });
      for (const { strategy, release, pinned } of runs) {
        const driverVersion = releaseVersion(release) ?? packageVersion(release) ?? 'unknown';
        const session = await CaptureSession.open({
          backend: started,
          driver: strategy.driver,
          ...(pinned ? {} : { driverPackage: release }),
          driverOptions: strategy.connectionOptions as Record<string, unknown> | undefined,
          table: { ...(description.name === 'postgres' ? { schema: 'public' } : {}), name: workloadTable(description.name).name },
        });
        try {
          const points: [number, boolean][] = [
            ...plan.rows.map((r): [number, boolean] => [r, false]),
            ...plan.hotRows.map((r): [number, boolean] => [r, true]),
          ];
          for (const [rows, hot] of points) {
            const run = await runCell(session, started, strategy, rows, plan, hot);
            const expected = strategy.expectedDriverCounts(rows, description.capabilities, { backend: description.name });
            const cell = cellFrom(run, strategy, rows, hot, environment, driverVersion, expected);
            cells.push(cell);
            const p50 = cell.timings ? `p50 ${(cell.timings.summary.p50Ns / 1e6).toFixed(3)} ms (n=${cell.timings.summary.n})` : 'no timing';
            progress(`${description.id} ${strategy.name}${pinned ? '' : ` (${release}@${driverVersion})`} ${rows}${hot ? ' hot' : ''}: ${cell.verdict.kind}, ${p50}${cell.error ? `, FAILED: ${cell.error.message}` : ''}`);
            if (cell.error && !failure) failure = { message: `${strategy.name} at ${rows} rows failed: ${cell.error.message}`, backend: description.id, phase: cell.error.phase, ...(cell.error.statement ? { statement: cell.error.statement } : {}) };
          }
        } finally {
          await session.close();
        }
      }
    } catch (err) {
      failure ??= failureOf(err);
      progress(`FAILED ${resolution.id ?? resolution.backend}: ${failureOf(err).message}`);
    } finally {
      await started?.stop();
    }
  }

  const report: ReportInput = {
    status: failure ? 'failed' : 'ok',
    ...(failure ? { failure } : {}),
    matrix,
    environments: [environment],
    backends,
    skipped,
    cells,
    startedAt,
    finishedAt: new Date().toISOString(),
  };
  return finishReport(report);
}
