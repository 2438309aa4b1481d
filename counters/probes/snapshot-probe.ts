import type { BackendDescription } from '../../containers/types';
import type { OpenWindow, ProbeCost, ProbeOptions, ServerProbe, WindowContext } from './probe';
import type { ServerLayer, ServerSummary } from './types';
import { costFromEmptyWindows, delta, describeCounters, nonZero, subtractCost, type Counters } from './window';

const DEFAULT_CALIBRATION_PAIRS = 3;
/** pg_stat_statements entries and query text kept in a layer: enough to read, not a dump. */
const MAX_STATEMENTS_SHOWN = 50;
const STATEMENT_TEXT_CHARS = 200;

/** A session seen by a snapshot, already sorted into foreign client or named background thread. */
export interface SeenSessions {
  foreign: ServerLayer['foreignSessions'];
  background: ServerLayer['backgroundSessions'];
  canSeeOtherSessions: boolean;
}

/** One reading of everything a backend can tell, taken by the same code every time so its cost is constant. */
export interface Snapshot {
  /** Server-wide counters (MySQL status, pg_stat_database, the table's pg_stat_user_tables row). */
  global: Counters;
  /** Counters of the workload's own connections, summed; null when the server cannot attribute. */
  perConnection: Counters | null;
  /** Workload connection ids the per-connection source found. */
  attributed: number[];
  /** Per-statement counters by a stable key (pg_stat_statements queryid); null when not available. */
  statements: Map<string, { query: string; calls: number; rows: number }> | null;
  sessions: SeenSessions;
  notes: string[];
  /** A read that failed: the window cannot be complete. */
  failures: string[];
  /** When this snapshot had to wait for statistics to become visible (PostgreSQL), how long, and whether it got there. */
  settle?: { ns: number; settled: boolean; detail: string };
}

/**
 * The backend-specific part of a probe: how to read one snapshot and how its counters map onto the common
 * summary. Everything else (calibration, control window, cost subtraction) is shared and lives in {@link SnapshotProbe}.
 */
export interface SnapshotSource {
  readonly description: BackendDescription;
  /** Opens the probe's own connection, reads versions and privileges once; called before any snapshot. */
  open(): Promise<void>;
  snapshot(ctx: WindowContext, purpose: 'calibrate' | 'control' | 'begin' | 'end'): Promise<Snapshot>;
  summarize(global: Counters, perConnection: Counters | null): { summary: ServerSummary; source: 'perConnection' | 'global'; notes: string[] };
  /** Global key and the per-connection key meaning the same thing. */
  readonly comparable: { global: string; perConnection: string }[];
  readonly attributionMethod: 'performance_schema' | 'total_changes' | null;
  /** The global counter of accepted client connections, if the server has one. */
  readonly connectionsKey: string | null;
  /** Sources found unreadable at open (see `ServerLayer.degraded`). */
  readonly degraded: string[];
  close(): Promise<void>;
}

function mergeSessions(a: SeenSessions, b: SeenSessions): SeenSessions {
  const foreign = new Map(a.foreign.map((s) => [s.id, s]));
  for (const s of b.foreign) foreign.set(s.id, s);
  const background = new Map(a.background.map((s) => [s.id, s]));
  for (const s of b.background) background.set(s.id, s);
  return {
    foreign: [...foreign.values()],
    background: [...background.values()],
    canSeeOtherSessions: a.canSeeOtherSessions && b.canSeeOtherSessions,
  };
}

function prefixed(prefix: string, counters: Counters): Counters {
  return Object.fromEntries(Object.entries(counters).map(([k, v]) => [`${prefix}${k}`, v]));
}

/**
 * A {@link ServerProbe} built from snapshots: calibration takes N+1 snapshots back to back and keeps their common
 * delta as the cost; every window is preceded by an empty control window whose residue (raw minus cost) must be 0.
 */
export class SnapshotProbe implements ServerProbe {
  readonly #source: SnapshotSource;
  readonly #pairs: number;
  #cost: ProbeCost | null = null;
  /** pg_stat_statements keys that moved during calibration: the probe's own statements, kept out of the list. */
  #probeStatementKeys = new Set<string>();
  #closed = false;

  /** `source` must already be open (see `createProbe`). */
  constructor(source: SnapshotSource, opts: ProbeOptions = {}) {
    this.#source = source;
    this.#pairs = Math.max(2, opts.calibrationPairs ?? DEFAULT_CALIBRATION_PAIRS);
  }

  get cost(): ProbeCost | null {
    return this.#cost;
  }

  async calibrate(ctx: WindowContext): Promise<ProbeCost> {
    // A first, discarded snapshot absorbs whatever was pending before (statistics not yet flushed, a first read that
    // creates a pg_stat_statements entry), so the pairs measure the steady cost only.
    await this.#source.snapshot(ctx, 'calibrate');
    const snapshots: Snapshot[] = [];
    for (let i = 0; i <= this.#pairs; i++) snapshots.push(await this.#source.snapshot(ctx, 'calibrate'));
    const windows: Counters[] = [];
    const perConnectionWindows: Counters[] = [];
    for (let i = 1; i < snapshots.length; i++) {
      const before = snapshots[i - 1]!;
      const after = snapshots[i]!;
      windows.push(delta(before.global, after.global));
      if (before.perConnection && after.perConnection) perConnectionWindows.push(delta(before.perConnection, after.perConnection));
      for (const key of movedStatements(before.statements, after.statements)) this.#probeStatementKeys.add(key);
    }
    const cost = costFromEmptyWindows(windows);
    if (perConnectionWindows.length === windows.length) {
      const own = costFromEmptyWindows(perConnectionWindows);
      cost.perConnection = own.counters;
      for (const [key, values] of Object.entries(own.unstable)) cost.unstable[`perConnection.${key}`] = values;
      cost.stable = cost.stable && own.stable;
    }
    this.#cost = cost;
    return this.#cost;
  }

  async begin(ctx: WindowContext): Promise<OpenWindow> {
    const cost = this.#cost ?? (await this.calibrate(ctx));
    const controlStart = await this.#source.snapshot(ctx, 'control');
    const start = await this.#source.snapshot(ctx, 'begin');
    const control = subtractCost(delta(controlStart.global, start.global), cost.counters);
    const perConnectionControl =
      controlStart.perConnection && start.perConnection
        ? subtractCost(delta(controlStart.perConnection, start.perConnection), cost.perConnection ?? {})
        : {};
    const controlAll = { ...control, ...prefixed('perConnection.', perConnectionControl) };
    return { end: async () => this.#finish(ctx, cost, controlAll, controlStart, start) };
  }

  async #finish(ctx: WindowContext, cost: ProbeCost, control: Counters, controlStart: Snapshot, start: Snapshot): Promise<ServerLayer> {
    const end = await this.#source.snapshot(ctx, 'end');
    const global = subtractCost(delta(start.global, end.global), cost.counters);
    const perConnection =
      start.perConnection && end.perConnection ? subtractCost(delta(start.perConnection, end.perConnection), cost.perConnection ?? {}) : null;
    const { summary, source, notes: summaryNotes } = this.#source.summarize(global, perConnection);
    const sessions = mergeSessions(start.sessions, end.sessions);

    const incompleteReasons = [...new Set([...controlStart.failures, ...start.failures, ...end.failures])];
    if (!cost.stable) {
      incompleteReasons.push(
        `probe cost was not stable over ${cost.pairs} empty windows (${Object.entries(cost.unstable)
          .map(([k, v]) => `${k}: ${v.join('/')}`)
          .join('; ')}), so it cannot be subtracted`,
      );
    }
    if (end.settle && !end.settle.settled) incompleteReasons.push(`statistics did not settle: ${end.settle.detail}`);

    const notes = [...new Set([...start.notes, ...end.notes, ...summaryNotes])];
    const residue = nonZero(control);
    if (Object.keys(residue).length > 0) notes.push(`control window moved: ${describeCounters(residue)}`);

    const requested = [...ctx.workloadConnectionIds].sort((a, b) => a - b);
    const found = [...new Set([...start.attributed, ...end.attributed])].sort((a, b) => a - b);
    const method = this.#source.attributionMethod;
    const attribution =
      method && perConnection
        ? {
            method,
            requested,
            found,
            exact: requested.length > 0 && requested.length === found.length && requested.every((id, i) => id === found[i]),
          }
        : null;

    return {
      global,
      perConnection,
      summary,
      summarySource: source,
      statements: statementDeltas(start.statements, end.statements, this.#probeStatementKeys),
      probeCost: cost.counters,
      control,
      settleNs: end.settle ? end.settle.ns : null,
      foreignSessions: sessions.foreign,
      backgroundSessions: sessions.background,
      canSeeOtherSessions: sessions.canSeeOtherSessions,
      notes,
      incomplete: incompleteReasons.length > 0,
      incompleteReasons,
      attribution,
      comparable: this.#source.comparable,
      degraded: this.#source.degraded,
      connectionsOpened: this.#source.connectionsKey ? (global[this.#source.connectionsKey] ?? null) : null,
      calibrationPairs: cost.pairs,
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#source.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function movedStatements(before: Snapshot['statements'], after: Snapshot['statements']): string[] {
  if (!before || !after) return [];
  return [...after.entries()].filter(([key, s]) => s.calls !== (before.get(key)?.calls ?? 0)).map(([key]) => key);
}

function statementDeltas(
  before: Snapshot['statements'],
  after: Snapshot['statements'],
  probeKeys: ReadonlySet<string>,
): ServerLayer['statements'] {
  if (!before || !after) return null;
  const out: NonNullable<ServerLayer['statements']> = [];
  for (const [key, s] of after) {
    if (probeKeys.has(key)) continue;
    const prev = before.get(key);
    const calls = s.calls - (prev?.calls ?? 0);
    if (calls === 0) continue;
    const flat = s.query.replace(/\s+/g, ' ').trim();
    const query = flat.length <= STATEMENT_TEXT_CHARS ? flat : `${flat.slice(0, STATEMENT_TEXT_CHARS)}… (${flat.length} chars)`;
    out.push({ query, calls, rows: s.rows - (prev?.rows ?? 0) });
  }
  out.sort((a, b) => b.calls - a.calls);
  return out.slice(0, MAX_STATEMENTS_SHOWN);
}
