import type { VerdictKind } from '../verdict/types';
import {
  BaselineSchema,
  GateResultSchema,
  LAYER_NAMES,
  SCHEMA_VERSION,
  counterAbsentMeansZero,
  cellLineage,
  countsOf,
  countsOfWindow,
  parseValue,
  windowLineage,
} from './schema';
import type {
  Baseline,
  BaselineCell,
  BaselineWindow,
  Cell,
  CellComparison,
  CounterDiff,
  CounterMap,
  Counts,
  Environment,
  GateResult,
  LayerName,
  Matrix,
  Report,
  Window,
} from './schema';

/**
 * Which layers a verdict lets the gate fail on. `report` means the server's counters could not be attributed to
 * the workload alone (global counters, a foreign session), so they are shown but not gated; the driver and wire
 * layers are counted in-process on the workload's own calls and connections and stay exact.
 */
export const GATED_LAYERS: Record<VerdictKind, readonly LayerName[]> = {
  assert: ['driver', 'wire', 'server'],
  report: ['driver', 'wire'],
  incomplete: [],
};

/** Builds the baseline that approves a report's counts exactly as they are. */
export function baselineFromReport(report: Report, now: Date = new Date()): Baseline {
  return parseValue(
    BaselineSchema,
    {
      schemaVersion: SCHEMA_VERSION,
      kind: 'baseline',
      approvedAt: now.toISOString(),
      matrix: report.matrix,
      environments: report.environments,
      cells: report.cells.map((c) => ({
        key: c.key,
        backend: c.backend,
        backendName: c.backendName,
        serverVersion: c.serverVersion,
        flavour: c.flavour,
        driver: c.driver,
        driverVersion: c.driverVersion,
        strategy: c.strategy,
        rows: c.rows,
        hot: c.hot,
        environment: c.environment,
        verdict: c.verdict.kind,
        counts: countsOf(c),
      })),
      ...(report.windows
        ? {
            windows: report.windows.map((w) => ({
              key: w.key,
              backend: w.backend,
              backendName: w.backendName,
              serverVersion: w.serverVersion,
              flavour: w.flavour,
              name: w.name,
              environment: w.environment,
              verdict: w.verdict.kind,
              counts: countsOfWindow(w),
            })),
          }
        : {}),
    },
    'baseline',
  );
}

/** Why a report cannot be approved as a baseline; empty when it can. */
export function approvalBlockers(report: Report): string[] {
  const out: string[] = [];
  if (report.status === 'failed') out.push(`the run failed: ${report.failure?.message ?? 'no message'}`);
  for (const c of report.cells) {
    if (c.error) out.push(`cell ${c.key} failed: ${c.error.message}`);
    else if (c.verdict.kind === 'incomplete') out.push(`cell ${c.key} is incomplete: ${c.verdict.reason}`);
  }
  for (const w of report.windows ?? []) {
    if (w.error) out.push(`window ${w.key} failed: ${w.error.message}`);
    else if (w.verdict.kind === 'incomplete') out.push(`window ${w.key} is incomplete: ${w.verdict.reason}`);
  }
  return out;
}

function setDiff(label: string, baseline: readonly (string | number)[], report: readonly (string | number)[]): string[] {
  const b = new Set(baseline.map(String));
  const r = new Set(report.map(String));
  const gone = [...b].filter((x) => !r.has(x));
  const added = [...r].filter((x) => !b.has(x));
  if (gone.length === 0 && added.length === 0) return [];
  const parts = [gone.length ? `missing from the report: ${gone.join(', ')}` : '', added.length ? `not in the baseline: ${added.join(', ')}` : ''];
  return [`${label}: baseline [${[...b].join(', ')}], report [${[...r].join(', ')}] (${parts.filter(Boolean).join('; ')})`];
}

/** How two matrices differ in what they ask for (repeats and warm-ups do not change counts). */
export function matrixDifferences(baseline: Matrix, report: Matrix): string[] {
  return [
    ...setDiff('backends', baseline.backends, report.backends),
    ...setDiff('strategies', baseline.strategies, report.strategies),
    ...setDiff('rows', baseline.rows, report.rows),
    ...setDiff('hot rows', baseline.hotRows, report.hotRows),
  ];
}

function change(label: string, before: string | null | undefined, after: string | null | undefined): string[] {
  return (before ?? null) === (after ?? null) ? [] : [`${label} ${before ?? 'unknown'} -> ${after ?? 'unknown'}`];
}

/** "What else changed": versions of the cell's own driver and server, then the machine it ran on. */
export function environmentChanges(
  b: { driver: string; driverVersion: string; serverVersion: string; backend: string },
  r: { driver: string; driverVersion: string; serverVersion: string; backend: string },
  be: Environment | undefined,
  re: Environment | undefined,
): string[] {
  const out = [...change(`driver ${r.driver}`, b.driverVersion, r.driverVersion), ...change(`server ${r.backend}`, b.serverVersion, r.serverVersion)];
  if (be && re) {
    out.push(
      ...change('node', be.node, re.node),
      ...change('os', be.os.prettyName ?? be.os.platform, re.os.prettyName ?? re.os.platform),
      ...change('kernel', be.os.release, re.os.release),
      ...change('arch', be.arch, re.arch),
      ...change('cpu', be.cpu.model, re.cpu.model),
      ...change('sqltally', be.sqltallyVersion, re.sqltallyVersion),
    );
  }
  return out;
}

function compareLayer(layer: LayerName, baseline: CounterMap | null, actual: CounterMap | null, gated: boolean): CounterDiff[] {
  if (baseline === null && actual === null) return [];
  const names = new Set([...Object.keys(baseline ?? {}), ...Object.keys(actual ?? {})]);
  const diffs: CounterDiff[] = [];
  for (const counter of [...names].sort()) {
    const zero = counterAbsentMeansZero(counter) ? 0 : null;
    const b = baseline === null ? null : (baseline[counter] ?? zero);
    const a = actual === null ? null : (actual[counter] ?? zero);
    if (b !== a) diffs.push({ layer, counter, baseline: b, actual: a, gated });
  }
  return diffs;
}

/** An increase, or a gated counter the report no longer measures: both fail. */
function failsGate(d: CounterDiff): boolean {
  if (!d.gated) return false;
  if (d.baseline !== null && d.actual === null) return true;
  return d.baseline !== null && d.actual !== null && d.actual > d.baseline;
}

function isIncrease(d: CounterDiff): boolean {
  return d.baseline !== null && d.actual !== null && d.actual > d.baseline;
}

function isDecrease(d: CounterDiff): boolean {
  return d.baseline !== null && d.actual !== null && d.actual < d.baseline;
}

/** `+4999`, `-3`. */
export function signed(n: number): string {
  return n > 0 ? `+${n}` : String(n);
}

/** What the gate compares of a cell or a window. */
interface Compared {
  key: string;
  error?: Cell['error'];
  verdict: Cell['verdict'];
  counts: Counts;
}

function compareCell(b: BaselineCell, cell: Cell, baseline: Baseline, report: Report): CellComparison {
  const envOf = (envs: readonly Environment[], id: string) => envs.find((e) => e.id === id) ?? (envs.length === 1 ? envs[0] : undefined);
  const changes = environmentChanges(b, cell, envOf(baseline.environments, b.environment), envOf(report.environments, cell.environment));
  return compareEntry(b, { key: cell.key, ...(cell.error ? { error: cell.error } : {}), verdict: cell.verdict, counts: countsOf(cell) }, changes);
}

function compareWindow(b: BaselineWindow, w: Window): CellComparison {
  const changes = change(`server ${w.backend}`, b.serverVersion, w.serverVersion);
  return compareEntry(b, { key: w.key, ...(w.error ? { error: w.error } : {}), verdict: w.verdict, counts: countsOfWindow(w) }, changes);
}

function compareEntry(b: { key: string; counts: Counts }, entry: Compared, changes: string[]): CellComparison {
  const result: CellComparison = {
    key: b.key,
    reportKey: entry.key === b.key ? null : entry.key,
    status: 'same',
    diffs: [],
    environmentChanges: changes,
    notes: [],
    failures: [],
  };
  if (result.reportKey) result.notes.push('paired across a version change: approve with --update to record the new versions in the baseline');
  if (entry.error) {
    result.status = 'errored';
    result.failures.push(`the workload failed in phase ${entry.error.phase}: ${entry.error.message}`);
    return result;
  }
  if (entry.verdict.kind === 'incomplete') {
    result.status = 'incomplete';
    result.failures.push(`verdict incomplete: ${entry.verdict.reason}`);
    return result;
  }
  const gated = GATED_LAYERS[entry.verdict.kind];
  const actual = entry.counts;
  for (const layer of LAYER_NAMES) {
    const layerDiffs = compareLayer(layer, b.counts[layer], actual[layer], gated.includes(layer));
    result.diffs.push(...layerDiffs);
    if (b.counts[layer] === null && actual[layer] !== null) result.notes.push(`the ${layer} layer is measured now and was not in the baseline`);
    if (layerDiffs.length > 0 && !gated.includes(layer)) {
      result.notes.push(`${layer} counters are shown, not gated, because the verdict is ${entry.verdict.kind}: ${entry.verdict.reason}`);
    }
  }
  if (result.diffs.length > 0) result.status = 'changed';
  for (const d of result.diffs.filter(failsGate)) {
    result.failures.push(
      d.actual === null
        ? `${d.layer}.${d.counter} is no longer measured (baseline ${d.baseline})`
        : `${d.layer}.${d.counter} increased ${d.baseline} -> ${d.actual} (${signed(d.actual - d.baseline!)})`,
    );
  }
  if (result.diffs.some(isDecrease)) result.notes.push('counts went down: approve them with --update so they cannot creep back up');
  return result;
}

/** Windows paired by key, then across a server upgrade by lineage; the rest missing or new, as cells are. */
/** A cell or window of the baseline the report does not have, and why. */
function missingFromReport(key: string, what: 'cell' | 'window', why: string): CellComparison {
  return {
    key,
    reportKey: null,
    status: 'missing',
    diffs: [],
    environmentChanges: [],
    notes: [],
    failures: [`baseline ${what} missing from the report: ${why}`],
  };
}

/** A cell or window the baseline does not have: new, to approve with --update; failing if its workload failed or it is incomplete. */
function notInBaseline(item: Pick<Report['cells'][number], 'key' | 'error' | 'verdict'>, what: 'cell' | 'window'): CellComparison {
  const entry: CellComparison = {
    key: item.key,
    reportKey: null,
    status: 'new',
    diffs: [],
    environmentChanges: [],
    notes: [`new ${what}, not in the baseline: approve it with --update`],
    failures: [],
  };
  if (item.error) entry.failures.push(`the workload failed in phase ${item.error.phase}: ${item.error.message}`);
  else if (item.verdict.kind === 'incomplete') entry.failures.push(`verdict incomplete: ${item.verdict.reason}`);
  return entry;
}

function compareWindows(report: Report, baseline: Baseline): { comparisons: CellComparison[]; incomplete: number; errored: number } {
  const reported = report.windows ?? [];
  const unmatched = new Map(reported.map((w) => [w.key, w]));
  const comparisons: CellComparison[] = [];
  const lost: BaselineWindow[] = [];
  for (const b of baseline.windows ?? []) {
    const exact = unmatched.get(b.key);
    if (exact) {
      comparisons.push(compareWindow(b, exact));
      unmatched.delete(b.key);
    } else lost.push(b);
  }
  for (const b of lost) {
    const candidates = [...unmatched.values()].filter((w) => windowLineage(w) === windowLineage(b));
    if (candidates.length === 1 && lost.filter((o) => windowLineage(o) === windowLineage(b)).length === 1) {
      comparisons.push(compareWindow(b, candidates[0]!));
      unmatched.delete(candidates[0]!.key);
      continue;
    }
    const why = report.status === 'failed' ? 'the run failed before it was measured' : 'the report has no window of that name';
    comparisons.push(missingFromReport(b.key, 'window', why));
  }
  for (const w of unmatched.values()) comparisons.push(notInBaseline(w, 'window'));
  return {
    comparisons,
    incomplete: reported.filter((w) => !w.error && w.verdict.kind === 'incomplete').length,
    errored: reported.filter((w) => w.error).length,
  };
}

/**
 * Compares a report with a baseline, cell by cell, exactly, on counts only. Fails on any increase of a gated
 * counter, any baseline cell the report lacks, any incomplete or errored cell, a failed run, or a different
 * matrix. A decrease or a new cell passes with a notice to approve it.
 */
export function compareWithBaseline(report: Report, baseline: Baseline): GateResult {
  const failures: string[] = [];
  if (report.status === 'failed') failures.push(`the run failed: ${report.failure?.message ?? 'no message recorded'}`);
  const matrixDiffs = matrixDifferences(baseline.matrix, report.matrix);
  if (matrixDiffs.length > 0) {
    failures.push(
      'the report comes from a different matrix than the baseline, so its cells cannot all be compared (approve the new matrix with --update if it is intended)',
    );
  }

  const unmatched = new Map(report.cells.map((c) => [c.key, c]));
  const pairs: [BaselineCell, Cell][] = [];
  const lost: BaselineCell[] = [];
  for (const b of baseline.cells) {
    const exact = unmatched.get(b.key);
    if (exact) {
      pairs.push([b, exact]);
      unmatched.delete(b.key);
    } else lost.push(b);
  }
  // Second pass: the same backend/driver/strategy/rows under new versions, only when the pairing is unambiguous.
  const cells: CellComparison[] = [];
  for (const b of lost) {
    const candidates = [...unmatched.values()].filter((c) => cellLineage(c) === cellLineage(b));
    const rivals = lost.filter((o) => cellLineage(o) === cellLineage(b));
    if (candidates.length === 1 && rivals.length === 1) {
      pairs.push([b, candidates[0]!]);
      unmatched.delete(candidates[0]!.key);
      continue;
    }
    const skipped = report.skipped.find((s) => s.backend === b.backendName || s.backend === b.backend);
    const why = skipped
      ? `backend ${skipped.backend} was skipped: ${skipped.reason}`
      : report.status === 'failed'
        ? 'the run failed before it was measured'
        : 'the report has no such cell';
    cells.push(missingFromReport(b.key, 'cell', why));
  }
  for (const [b, c] of pairs) cells.push(compareCell(b, c, baseline, report));
  const windows = compareWindows(report, baseline);
  cells.push(...windows.comparisons);
  for (const c of unmatched.values()) cells.push(notInBaseline(c, 'cell'));
  cells.sort((x, y) => x.key.localeCompare(y.key));

  const envChanges = [...new Set(cells.flatMap((c) => c.environmentChanges))];
  const totals = {
    same: cells.filter((c) => c.status === 'same').length,
    increased: cells.filter((c) => c.diffs.some(isIncrease)).length,
    decreased: cells.filter((c) => c.diffs.some(isDecrease)).length,
    missing: cells.filter((c) => c.status === 'missing').length,
    new: cells.filter((c) => c.status === 'new').length,
    incomplete: report.cells.filter((c) => !c.error && c.verdict.kind === 'incomplete').length + windows.incomplete,
    errored: report.cells.filter((c) => c.error).length + windows.errored,
  };
  const pass = failures.length === 0 && cells.every((c) => c.failures.length === 0);
  return GateResultSchema.parse({
    schemaVersion: SCHEMA_VERSION,
    kind: 'gate-result',
    pass,
    failures,
    matrixDifferences: matrixDiffs,
    environmentChanges: envChanges,
    cells,
    totals,
  });
}

function diffLine(d: CounterDiff, width: number): string {
  const name = `${d.layer}.${d.counter}`.padEnd(width);
  const b = d.baseline === null ? 'not measured' : String(d.baseline);
  const a = d.actual === null ? 'not measured' : String(d.actual);
  const delta = d.baseline !== null && d.actual !== null ? ` (${signed(d.actual - d.baseline)})` : '';
  const flag = failsGate(d) ? '   <- FAIL' : isDecrease(d) ? '   decrease: approve with --update' : d.gated ? '' : '   not gated';
  return `    ${name}  ${b} -> ${a}${delta}${flag}`;
}

/** The diff a person reads: what failed, per cell, per layer, counter: baseline -> actual (+delta), and why. */
export function renderGateResult(result: GateResult, labels: { report: string; baseline: string }): string {
  const t = result.totals;
  const out: string[] = [
    `sqltally gate: ${result.pass ? 'PASS' : 'FAIL'}`,
    `  report ${labels.report} vs baseline ${labels.baseline}`,
    `  ${t.same} same, ${t.increased} increased, ${t.decreased} decreased, ${t.missing} missing, ${t.new} new, ${t.incomplete} incomplete, ${t.errored} errored`,
    '',
  ];
  for (const f of result.failures) out.push(`FAIL ${f}`);
  for (const m of result.matrixDifferences) out.push(`  matrix ${m}`);
  if (result.failures.length > 0) out.push('');
  const order: Record<CellComparison['status'], number> = { errored: 0, incomplete: 1, missing: 2, changed: 3, new: 4, same: 5 };
  const shown = result.cells
    .filter((c) => c.status !== 'same' || c.reportKey !== null)
    .sort((a, b) => order[a.status] - order[b.status] || a.key.localeCompare(b.key));
  for (const c of shown) {
    const head = c.failures.length > 0 ? 'FAIL' : c.status === 'new' ? 'NEW ' : 'note';
    out.push(`${head} ${c.key}${c.reportKey ? `\n     now ${c.reportKey}` : ''}`);
    // Counter failures are the diff lines marked FAIL below; list only the others here.
    const counterFailures = c.diffs.filter(failsGate).length;
    if (counterFailures > 0) out.push(`  - ${counterFailures} gated counter(s) went up or are no longer measured`);
    else for (const f of c.failures) out.push(`  - ${f}`);
    const width = Math.max(0, ...c.diffs.map((d) => d.layer.length + 1 + d.counter.length));
    for (const layer of LAYER_NAMES) {
      const ds = c.diffs.filter((d) => d.layer === layer);
      if (ds.length === 0) continue;
      out.push(`  ${layer}:`);
      for (const d of ds) out.push(diffLine(d, width));
    }
    if (c.environmentChanges.length > 0) out.push(`  what else changed: ${c.environmentChanges.join('; ')}`);
    for (const n of c.notes) out.push(`  (${n})`);
    out.push('');
  }
  if (result.environmentChanges.length > 0) out.push(`Environment changes since the baseline: ${result.environmentChanges.join('; ')}`, '');
  if (!result.pass) out.push('If these counts are intended, approve them: sqltally gate --report <report> --baseline <file> --update');
  else if (t.decreased > 0 || t.new > 0 || result.cells.some((c) => c.reportKey !== null)) {
    out.push('Passed with changes to approve: run with --update to record them in the baseline.');
  }
  return out.join('\n').trimEnd();
}

/** What `--update` approves, spelled out: nothing is written silently. */
export function renderApproval(result: GateResult | null, baseline: Baseline): string {
  const lines = [`approved ${baseline.cells.length} cell(s) into the baseline (schema ${baseline.schemaVersion})`];
  if (result === null) {
    for (const c of baseline.cells) lines.push(`  + ${c.key}`);
    return lines.join('\n');
  }
  for (const c of result.cells) {
    if (c.status === 'same') continue;
    if (c.status === 'missing') lines.push(`  - dropped ${c.key}`);
    else if (c.status === 'new') lines.push(`  + added ${c.key}`);
    else {
      lines.push(`  ~ ${c.reportKey ?? c.key}`);
      for (const d of c.diffs) lines.push(`      ${d.layer}.${d.counter}: ${d.baseline ?? 'not measured'} -> ${d.actual ?? 'not measured'}`);
    }
  }
  for (const m of result.matrixDifferences) lines.push(`  matrix ${m}`);
  if (lines.length === 1) lines.push('  (no count changed)');
  return lines.join('\n');
}
