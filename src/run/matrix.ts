import { CaptureSession, type Captured } from '../capture/capture';
import { runSql, type DriverHandle } from '../driver/open';
import { messageOf, SqltallyError } from '../shared/errors';
import { listBackends, parseBackendId, resolveBackend } from '../backends/registry';
import { BACKEND_NAMES, type BackendDescription, type Resolution, type StartedBackend, type Unavailable } from '../backends/types';
import type { DriverName } from '../shared/driver-names';
import { EventLoopDelayRecorder } from '../capture/event-loop';
import { instrumentCost, MIN_MEASURED_REPEATS, timingsFromSamples } from '../report/timings';
import { checkDistinctServers, checkPlan, type RunPlan, type ValidPlan } from './plan';
import { truncateStatement } from '../shared/errors';
import { finishReport } from './summary';
import { collectEnvironment, packageVersion } from '../report/environment';
import { installedReleases, releaseVersion } from '../driver/releases';
import { DRIVERS } from '../driver/registry';
import { cellFromTally, readBackFromTally } from '../report/cell';
import { countsOf, type Cell, type Environment, type Matrix, type ReadBack, type SkippedBackend, type Timings, type Uninstrumented } from '../report/schema';
import { failureOf, type ReportInput } from '../report/output';
import type { Report } from '../report/schema';
import { makeRows } from '../workload/rows';
import { findStrategy, strategiesFor, type AnyInsertStrategy, type ExpectedDriverCounts, type InsertStrategy } from '../workload/strategies';
import { createTableSql, dropTableSql, workloadTable, type WorkloadTable } from '../workload/table';
import { verifyRows } from '../workload/verify';
import { rowSource } from '../workload/connect';
import { READ_LIMIT, readRowsFrom, readSql } from '../workload/read';
import type { Verdict } from '../verdict/types';

/** The workload table as a capture names it: schema-qualified where the server has schemas. */
function tableOf(table: WorkloadTable): { schema?: string; name: string } {
  return { ...(table.dialect.defaultSchema ? { schema: table.dialect.defaultSchema } : {}), name: table.name };
}

export { DEFAULT_HOT_ROWS, DEFAULT_REPEATS, DEFAULT_ROWS, DEFAULT_WARMUPS, MAX_ROWS_PER_CELL, MAX_ROWS_PER_STRATEGY, RunPlanSchema } from './plan';
export type { RunPlan } from './plan';

export interface RunHooks {
  /** One line per finished cell or event, for a person watching. */
  progress?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
  /**
   * Stops the run (Ctrl-C): the window in flight gives up as on a cell timeout, nothing more starts, and the report
   * (status failed, the reason the signal's) keeps every cell measured before.
   */
  signal?: AbortSignal;
  /** Called with each backend once it is up: the fault suite uses it to kill or freeze the server under the run. */
  started?: (backend: StartedBackend) => void;
}

/**
 * After a window gave up, how long closing the session may take: a frozen server answers neither the driver's
 * goodbye nor the probe's, and the run must still stop the server and write its report.
 */
const CLOSE_AFTER_GIVING_UP_MS = 10_000;
/**
 * Beyond the cell timeout, how long the capture's own steps around the window (probe readings, cancelling and counting
 * late commits, which are bounded themselves) may take before the run stops waiting for the window altogether.
 */
const WINDOW_GRACE_MS = 60_000;

/** The work, or a SqltallyError from `onTimeout` once `ms` have passed; the work itself is left to settle. */
async function bounded<T>(work: Promise<T>, ms: number, onTimeout: () => SqltallyError): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  // The losing promise must not become an unhandled rejection later.
  work.catch(() => undefined);
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Every named strategy must run on at least one requested backend; findStrategy words the error (unknown name, or
 * which backends it is for). Checked before any backend is resolved or started.
 */
function checkStrategies(names: readonly string[], backends: readonly string[]): void {
  const requested = backends.map((id) => parseBackendId(id).name);
  for (const name of names) {
    if (!requested.some((b) => strategiesFor(b).some((s) => s.name === name))) findStrategy(name, requested[0] ?? BACKEND_NAMES[0]);
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
  /** The same insert timed with counting off, alternated with the measured repeats; or why those runs failed. */
  uninstrumentedNs: number[];
  uninstrumentedError: string | null;
  /** Set when a window gave up (cell timeout, interrupt): why, and the statement the strategy had in flight. */
  gaveUp: { message: string; statement: string | null } | null;
  warmupNs: number[];
  verifiedRows: number | null;
  eventLoop: ReturnType<EventLoopDelayRecorder['result']> | null;
  /** The read cap path after the inserts, at READ_LIMIT rows only. */
  readBack: ReadBack | null;
}

/**
 * Runs one strategy at one row count: warm-ups, then repeats, each on a fresh connection and table (no statement cache
 * hides a prepare) or, for the hot point, on one warm connection; every run's rows verified through a fresh one.
 */
async function runCell<D extends DriverName>(
  session: CaptureSession<D>,
  backend: StartedBackend,
  strategy: InsertStrategy<D>,
  rows: number,
  plan: ValidPlan,
  hot: boolean,
  signal: AbortSignal | undefined,
): Promise<CellRun> {
  const table = workloadTable(backend.description.name);
  const insertPlan = strategy.plan(rows, backend.description.capabilities, { backend: backend.description.name });
  const input = strategy.prepare(makeRows(rows), table, insertPlan);
  const id = backend.description.id;
  const timeoutMs = plan.cellTimeoutMs;
  // Every step that talks to the server is bounded: a frozen server must fail the cell, not hang the run.
  const step = <T>(work: Promise<T>, phase: 'setup' | 'verify' | 'workload', statement: string, what: string): Promise<T> =>
    bounded(
      work,
      phase === 'workload' ? timeoutMs + WINDOW_GRACE_MS : timeoutMs,
      () =>
        new SqltallyError(
          `${what} did not finish within ${phase === 'workload' ? `${timeoutMs} ms (--cell-timeout-ms) and ${WINDOW_GRACE_MS} ms for the readings around it` : `${timeoutMs} ms (--cell-timeout-ms)`}: the server stopped answering`,
          {
            backend: id,
            phase,
            statement,
          },
        ),
    );
  const recreate = async (handle: DriverHandle<D>) => {
    await runSql(session.driver, handle, dropTableSql(table));
    await runSql(session.driver, handle, createTableSql(table));
  };
  // Emptied with DELETE, not DDL: dropping or truncating the table would invalidate the statements the hot point
  // keeps prepared, and MariaDB would re-prepare them behind the driver's back.
  const empty = async (handle: DriverHandle<D>) => {
    await runSql(session.driver, handle, `DELETE FROM ${table.quoted}`);
  };
  const firstStatement = truncateStatement(input.steps[0]?.sql ?? `INSERT INTO ${table.quoted}`);
  const result: CellRun = {
    tallies: [],
    uninstrumentedNs: [],
    uninstrumentedError: null,
    gaveUp: null,
    warmupNs: [],
    verifiedRows: null,
    eventLoop: null,
    readBack: null,
  };
  const loop = new EventLoopDelayRecorder();
  const measure = async (extra: Parameters<CaptureSession<D>['measure']>[1]): Promise<Captured<void> | null> => {
    const tally = await step(
      session.measure((h) => strategy.run(h, input), { hot: true, timeoutMs, ...(signal ? { signal } : {}), ...extra }),
      'workload',
      firstStatement,
      `the ${strategy.name} window at ${rows} rows`,
    );
    if (!tally.lateCommits) return tally;
    // The window gave up: the cell keeps this tally (incomplete, with what committed after) and stops here.
    const why = signal?.aborted ? `interrupted (${String(signal.reason ?? 'aborted')})` : `gave up after ${timeoutMs} ms (--cell-timeout-ms)`;
    result.tallies = [tally];
    result.gaveUp = { message: `${strategy.name} at ${rows} rows ${why}: ${tally.lateCommits.summary}`, statement: firstStatement };
    return null;
  };
  const reset = (how: (handle: DriverHandle<D>) => Promise<void>, opts?: { hot: boolean }) =>
    step(session.prepare(how, opts), 'setup', how === empty ? `DELETE FROM ${table.quoted}` : dropTableSql(table), `resetting ${table.name} before the window`);
  // The strategy's own time: the same insert on a direct connection of the raw driver, nothing counted. A failure
  // here costs the cell its uninstrumented timing, never its counts.
  const timeUninstrumented = async (): Promise<void> => {
    if (result.uninstrumentedError !== null) return;
    try {
      const times = await step(
        session.time((h) => strategy.run(h, input), { repeats: 1, connection: hot ? 'hot' : 'fresh', before: hot ? empty : recreate, timeoutMs }),
        'workload',
        firstStatement,
        `the uninstrumented ${strategy.name} run at ${rows} rows`,
      );
      const found = await step(
        verifyRows(backend, table, rows, { cellDriver: strategy.driver }),
        'verify',
        `SELECT count(*) FROM ${table.quoted}`,
        `counting the rows of ${table.name}`,
      );
      if (found !== rows) throw new Error(`a fresh connection found ${found} rows after it, the plan inserts ${rows}`);
      result.uninstrumentedNs.push(...times.samplesNs);
    } catch (err) {
      result.uninstrumentedError = `the uninstrumented run failed: ${messageOf(err)}`;
    }
  };
  if (hot) {
    // The hot point reuses the connection that just ran the same insert: prepared statements are cached.
    await reset(recreate);
    if (!(await measure({}))) return result;
  }
  for (let i = 0; i < plan.warmups + plan.repeats; i++) {
    if (signal?.aborted) throw signal.reason;
    const measured = i >= plan.warmups;
    // Counted and uninstrumented runs take turns going first, so drift falls on both alike.
    const uninstrumentedFirst = measured && (i - plan.warmups) % 2 === 1;
    if (uninstrumentedFirst) await timeUninstrumented();
    await reset(hot ? empty : recreate, { hot });
    const tally = await measure(measured ? { around: <R>(work: () => Promise<R>) => loop.around(work) } : {});
    if (!tally) return result;
    if (tally.workloadError) {
      // A connection lost mid-command (the server killed) comes without the SQL in the driver's error: the statement
      // in flight was the strategy's insert (one text for every chunk), so the cell names that one.
      result.tallies = [tally.workloadError.statement ? tally : { ...tally, workloadError: { ...tally.workloadError, statement: firstStatement } }];
      return result;
    }
    result.verifiedRows = await step(
      verifyRows(backend, table, rows, { cellDriver: strategy.driver }),
      'verify',
      `SELECT count(*) FROM ${table.quoted}`,
      `counting the rows of ${table.name}`,
    );
    if (measured) result.tallies.push(tally);
    else result.warmupNs.push(tally.durationNs);
    if (measured && !uninstrumentedFirst) await timeUninstrumented();
  }
  result.eventLoop = loop.result();
  // The read cap path, once per cell where the table holds exactly the cap: what reading it all back costs the server.
  if (rows === READ_LIMIT && !signal?.aborted) {
    const sql = readSql(table, READ_LIMIT);
    let rowsRead: number | null = null;
    const tally = await step(
      session.measure(
        async (h) => {
          rowsRead = (await readRowsFrom(rowSource(session.driver, h), table)).length;
        },
        { timeoutMs, ...(signal ? { signal } : {}) },
      ),
      'workload',
      sql,
      `the read back of ${table.name} at ${rows} rows`,
    );
    result.readBack = readBackFromTally(tally, rowsRead);
  }
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
    check(
      'bind values',
      driver.bindValues,
      expected.bindValuesPerCall.reduce((a, b) => a + b, 0),
    );
    for (const [kind, n] of Object.entries(expected.byKind)) check(`${kind} calls`, driver.byKind[kind as keyof typeof driver.byKind] ?? 0, n ?? 0);
    const planned = { ...expected.byClass };
    // Classes count executions: a planned prepare is a call, not a statement of its class.
    for (const call of expected.sequence) if (call.kind === 'prepare') planned[call.statementClass] = (planned[call.statementClass] ?? 0) - 1;
    for (const [cls, n] of Object.entries(planned)) check(`${cls} statements`, driver.byClass[cls as keyof typeof driver.byClass] ?? 0, n ?? 0);
  }
  const wire = cell.layers.wire;
  if (wire && expected.wire) {
    for (const [command, n] of Object.entries(expected.wire)) {
      const actual = wire.commands[command] ?? 0;
      if (actual !== n) out.push(`wire ${command} ${actual}, the plan sends ${n}`);
    }
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
  if (run.gaveUp) return cellFromTally(first, { ...place, verifiedRows: null, timings: null, gaveUp: run.gaveUp });
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
    verdict = {
      ...verdict,
      kind: 'report',
      reason: `the cell differs from its strategy's plan: ${[...new Set(differences)].slice(0, 10).join('; ')}; ${verdict.reason}`,
    };
  }
  const timings = timingsFromSamples(
    run.warmupNs,
    run.tallies.map((t) => t.durationNs),
    run.eventLoop,
  );
  return cellFromTally(
    { ...first, verdict },
    { ...place, timings, uninstrumented: uninstrumentedOf(run, first, timings), ...(run.readBack ? { readBack: run.readBack } : {}) },
  );
}

/** The uninstrumented timings beside the counted ones, with what counting added per call and per round trip. */
function uninstrumentedOf(run: CellRun, first: Captured<void>, counted: Timings): Uninstrumented {
  if (run.uninstrumentedError !== null || run.uninstrumentedNs.length < MIN_MEASURED_REPEATS) {
    return { timings: null, instrumentCost: null, error: run.uninstrumentedError ?? `only ${run.uninstrumentedNs.length} uninstrumented run(s)` };
  }
  const timings = timingsFromSamples([], run.uninstrumentedNs);
  const cost = instrumentCost(counted, timings, first.layers.driver?.calls ?? null, first.layers.wire?.roundTrips ?? null);
  return { timings, instrumentCost: cost };
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
  /** The report of what the run has so far: failed when `why` is given. */
  const reportOf = (why: ReportInput['failure']): Report =>
    finishReport({
      status: why ? 'failed' : 'ok',
      ...(why ? { failure: why } : {}),
      matrix,
      environments: [environment],
      backends,
      skipped,
      cells,
      startedAt,
      finishedAt: new Date().toISOString(),
    });

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
    return reportOf({
      message: `${misconfigured.map((r) => r.reason).join('; ')}\n  nothing was started`,
      backend: first.id ?? first.backend,
      phase: 'config',
    });
  }

  const signal = hooks.signal;
  const interrupted = (): string => `interrupted (${messageOf(signal?.reason ?? 'aborted')}) after ${cells.length} cell(s): the cells measured before are kept`;
  // What the run was doing when the signal came, so the failure names it even when the signal falls between two
  // cells (making the next cell's rows and SQL, resetting its table), where nothing that fails carries a backend.
  let doing: { backend: string; phase: string } | undefined;
  let doingAtSignal: { backend: string; phase: string } | undefined;
  const noteSignal = (): void => {
    doingAtSignal ??= doing;
  };
  signal?.addEventListener('abort', noteSignal, { once: true });
  for (const resolution of resolutions) {
    if (!resolution.available) {
      skipped.push({ backend: resolution.id ?? resolution.backend, reason: resolution.reason, environment: environment.id });
      progress(`skip ${resolution.id ?? resolution.backend}: ${resolution.reason}`);
      continue;
    }
    if (signal?.aborted) {
      skipped.push({ backend: resolution.id ?? resolution.backend, reason: `not started: ${interrupted()}`, environment: environment.id });
      continue;
    }
    let started: StartedBackend | undefined;
    try {
      progress(`start ${resolution.id ?? resolution.backend} (${resolution.provider}: ${resolution.origin})`);
      doing = { backend: resolution.id ?? resolution.backend, phase: 'start' };
      started = await resolution.start();
      const description = started.description;
      doing = { backend: description.id, phase: 'setup' };
      backends.push(description);
      progress(`ready ${description.id} ${description.serverVersion} in ${Math.round(description.readyMs)} ms`);
      hooks.started?.(started);
      const runs = strategiesOn(description, plan.strategies).flatMap((strategy) => {
        const releases = installedReleases(strategy.driver);
        if (releases.length === 0) {
          // An optional peer dependency the app did not install: its strategies are skipped, by name, not failed.
          const pkg = DRIVERS[strategy.driver].packageName;
          const reason = `strategy ${strategy.name} not run: the ${strategy.driver} driver package "${pkg}" is not installed (npm install ${pkg})`;
          progress(`skip ${description.id} ${reason}`);
          skipped.push({ backend: description.id, reason, environment: environment.id });
        }
        return (plan.driverReleases === 'all' ? releases : releases.slice(0, 1)).map((release, i) => ({ strategy, release, pinned: i === 0 }));
      });
      // A window that gave up leaves the server in an unknown state (frozen, still working): nothing more runs on it.
      let gaveUp = false;
      for (const { strategy, release, pinned } of runs) {
        if (gaveUp || signal?.aborted) break;
        const driverVersion = releaseVersion(release) ?? packageVersion(release) ?? 'unknown';
        const session = await CaptureSession.open({
          backend: started,
          driver: strategy.driver,
          ...(pinned ? {} : { driverPackage: release }),
          driverOptions: strategy.connectionOptions as Record<string, unknown> | undefined,
          table: tableOf(workloadTable(description.name)),
        });
        try {
          const points: [number, boolean][] = [
            ...plan.rows.map((r): [number, boolean] => [r, false]),
            ...plan.hotRows.map((r): [number, boolean] => [r, true]),
          ];
          for (const [rows, hot] of points) {
            if (signal?.aborted) break;
            let run: CellRun;
            doing = { backend: description.id, phase: 'workload' };
            try {
              run = await runCell(session, started, strategy, rows, plan, hot, signal);
            } catch (err) {
              gaveUp = true;
              throw err;
            }
            const expected = strategy.expectedDriverCounts(rows, description.capabilities, { backend: description.name });
            const cell = cellFrom(run, strategy, rows, hot, environment, driverVersion, expected);
            cells.push(cell);
            const p50 = cell.timings ? `p50 ${(cell.timings.summary.p50Ns / 1e6).toFixed(3)} ms (n=${cell.timings.summary.n})` : 'no timing';
            progress(
              `${description.id} ${strategy.name}${pinned ? '' : ` (${release}@${driverVersion})`} ${rows}${hot ? ' hot' : ''}: ${cell.verdict.kind}, ${p50}${cell.error ? `, FAILED: ${cell.error.message}` : ''}`,
            );
            if (cell.error && !failure)
              failure = {
                message: `${strategy.name} at ${rows} rows failed: ${cell.error.message}`,
                backend: description.id,
                phase: cell.error.phase,
                ...(cell.error.statement ? { statement: cell.error.statement } : {}),
              };
            if (run.gaveUp) {
              gaveUp = true;
              break;
            }
          }
        } finally {
          if (gaveUp || signal?.aborted) {
            await bounded(
              session.close(),
              CLOSE_AFTER_GIVING_UP_MS,
              () => new SqltallyError('closing the session after giving up took too long', { backend: description.id, phase: 'stop' }),
            ).catch((err: unknown) => progress(`${description.id}: ${messageOf(err)}; the server is stopped anyway`));
          } else await session.close();
        }
      }
    } catch (err) {
      failure ??= failureOf(err);
      progress(`FAILED ${resolution.id ?? resolution.backend}: ${failureOf(err).message}`);
    } finally {
      if (doing) doing = { backend: doing.backend, phase: 'stop' };
      await started?.stop();
      doing = undefined;
    }
  }
  signal?.removeEventListener('abort', noteSignal);
  if (signal?.aborted) {
    // The signal is why the run stopped; whatever broke in its wake (a connection cut as the servers went) is not.
    // Where it came: a failure it caused says best (its statement too), else what the run was doing then.
    const backend = failure?.backend ?? doingAtSignal?.backend;
    const phase = failure?.phase ?? doingAtSignal?.phase ?? 'workload';
    failure = { message: interrupted(), ...(backend ? { backend } : {}), phase, ...(failure?.statement ? { statement: failure.statement } : {}) };
  }

  return reportOf(failure);
}
