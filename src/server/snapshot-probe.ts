import type { BackendDescription } from '../backends/types';
import { connectionIdsOf, type Goodbye, type OpenWindow, type ProbeCost, type ProbeOptions, type ServerProbe, type WindowContext } from './probe';
import type { ServerLayer, ServerSummary } from './types';
import {
  statementWorkDeltas,
  tableDeltas,
  type ServerWork,
  type ServerWorkCapabilities,
  type UnindexedScan,
  type WorkDeltas,
  type WorkFigures,
  type WorkReading,
} from './server-work';
import { costFromEmptyWindows, delta, describeCounters, nonZero, subtractCost, type Counters } from './window';

const DEFAULT_CALIBRATION_PAIRS = 3;
/**
 * How long `begin` waits for connections the workload closed before the window to leave the server. A backend that
 * read its Terminate exits within milliseconds on an idle machine; two busy cores have been seen to take longer
 * than one reading (main job, postgres-js.unnest: the previous sample's connection still listed, idle after the
 * proxy's settle, and the cell reported as work around the proxy).
 */
export const DEPARTURE_WAIT_MS = 2_000;
const DEPARTURE_POLL_MS = 10;
/** pg_stat_statements entries and query text kept in a layer: enough to read, not a dump. */
const MAX_STATEMENTS_SHOWN = 50;
const STATEMENT_TEXT_CHARS = 200;

/** A session seen by a snapshot, already sorted into foreign client or named background thread. */
export interface SeenSessions {
  foreign: ServerLayer['foreignSessions'];
  background: ServerLayer['backgroundSessions'];
  canSeeOtherSessions: boolean;
}

/** One prepared statement the server keeps for a connection, with its executions so far. */
export interface PreparedInstance {
  connectionId: number;
  statementClass: string;
  executes: number;
}

/** One reading of everything a backend can tell, taken by the same code every time so its cost is constant. */
export interface Snapshot {
  /** Server-wide counters (MySQL status, pg_stat_database, the user tables' pg_stat_user_tables rows). */
  global: Counters;
  /** Counters of each requested window connection the server knows, by its id; null when it cannot attribute. */
  perConnection: Map<number, Counters> | null;
  /** Prepared statements of the requested connections by a stable key; null when the server has no such table. */
  prepared?: Map<string, PreparedInstance> | null;
  /**
   * Objects whose counters `global` sums (PostgreSQL's user tables, by relid): one present at the start and gone at
   * the end took its counts with it, so a sum over them is no longer the whole story.
   */
  objects?: Set<string>;
  /** Per-statement counters by a stable key (pg_stat_statements queryid); null when not available. */
  statements: Map<string, { query: string; calls: number; rows: number; statementClass: string }> | null;
  sessions: SeenSessions;
  notes: string[];
  /** A read that failed: the window cannot be complete. */
  failures: string[];
  /** When this snapshot had to wait for statistics to become visible (PostgreSQL), how long, and whether it got there. */
  settle?: { ns: number; settled: boolean; detail: string };
  /** The server-work counters (rows examined, scans...); absent where the source reads none. */
  work?: WorkReading;
}

/** What a source makes of one window's work deltas (see {@link SnapshotSource.summarizeWork}). */
export interface WorkSummary {
  figures: WorkFigures;
  /** Figures this window cannot give, with the reason; the capability table's reasons are added by the caller. */
  unknown: Record<string, string>;
  unindexedScans: UnindexedScan[] | null;
  scansUnknown: string | null;
  notes: string[];
}

/** Per-connection facts a summary may use beyond the summed counters (MySQL prepared executes by class). */
export interface WindowExtras {
  /** Prepared executes in the window by statement class, over the instances the server still knew at the end. */
  preparedExecutes: Record<string, number> | null;
  /** Why some prepared executes could not be given a class (statements closed before the reading), or null. */
  preparedUnknown: string | null;
  /** Objects summed in `global` that were there at the start and gone at the end (see `Snapshot.objects`). */
  droppedObjects?: string[];
}

/**
 * The backend-specific part of a probe: how to read one snapshot and how its counters map onto the common
 * summary. Everything else (calibration, control window, cost subtraction) is shared and lives in {@link SnapshotProbe}.
 */
export interface SnapshotSource {
  readonly description: BackendDescription;
  /** Opens the probe's own connection, reads versions and privileges once; called before any snapshot. */
  open(): Promise<void>;
  /** Reads one snapshot; per-connection counters for `connectionIds` only. */
  snapshot(ctx: WindowContext, purpose: 'calibrate' | 'control' | 'begin' | 'end', connectionIds: readonly number[]): Promise<Snapshot>;
  /**
   * Reads only the per-connection counters of one connection (a connection about to close), or null when this
   * server has none; its prepared statements keyed as `Snapshot.prepared` keys them. Its global cost is measured at
   * calibration like a snapshot's.
   */
  readConnection?(
    ctx: WindowContext,
    connectionId: number,
  ): Promise<{ counters: Counters | null; prepared: Map<string, PreparedInstance> | null; work?: Counters | null }>;
  /**
   * What a connection's quit command costs in the global counters, counted by the server after that connection's
   * last read (`readConnection`): subtracted once per connection that quit inside the window, like a probe cost.
   */
  readonly quitCost?: Counters;
  summarize(
    global: Counters,
    perConnection: Counters | null,
    extras: WindowExtras,
  ): { summary: ServerSummary; source: 'perConnection' | 'global'; notes: string[] };
  /** Global key and the per-connection key meaning the same thing. */
  readonly comparable: { global: string; perConnection: string }[];
  readonly attributionMethod: 'performance_schema' | 'total_changes' | null;
  /** The global counter of accepted client connections, if the server has one. */
  readonly connectionsKey: string | null;
  /** Sources found unreadable at open (see `ServerLayer.degraded`). */
  readonly degraded: string[];
  /**
   * Statement texts (as `Snapshot.statements` has them) that are sqltally's own on whichever connection they run:
   * never the workload's, even when they first move inside a window.
   */
  readonly ownStatements?: readonly string[];
  /** What this source can say about server work (see src/server/server-work.ts); absent: no work section. */
  readonly work?: ServerWorkCapabilities;
  /**
   * Parts of a work reading that a session's open transaction holds back (PostgreSQL flushes its table counters only
   * when idle outside a transaction): unknown for a window whose connections sat in a transaction at either end.
   */
  readonly workHeldInTransaction?: readonly ('perConnection' | 'tables' | 'statements')[];
  /** Parts of a work reading summed over every session on the server, not only the window's connections. */
  readonly workServerWide?: readonly ('tables' | 'statements')[];
  /** Maps one window's deltas onto figures; a part that is null is unknown, with its reason in `missing`. */
  summarizeWork?(deltas: WorkDeltas, missing: { perConnection?: string; tables?: string; statements?: string }): WorkSummary;
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

function add(into: Counters, counters: Counters, sign = 1): void {
  for (const [k, v] of Object.entries(counters)) into[k] = (into[k] ?? 0) + sign * v;
}

/** What the window connections' own counters moved between two readings, summed, and which connections were read. */
interface PerConnectionWindow {
  counters: Counters;
  requested: number[];
  found: number[];
  /** Words for each connection that could not be read at both ends. */
  missing: string[];
  /** Those of them that closed inside the window unread. */
  closedUnread: number[];
}

/**
 * Window connections' counters between two snapshots: one opened after the first counts from 0; one read as it closed
 * counts with that reading (the second may catch its teardown, status gone), or is missing if it closed unread.
 */
function perConnectionWindow(
  ids: readonly number[],
  first: Snapshot,
  second: Snapshot,
  openedBefore: ReadonlySet<number>,
  retired: ReadonlyMap<number, Counters>,
): PerConnectionWindow | null {
  if (!first.perConnection || !second.perConnection) return null;
  const counters: Counters = {};
  const found: number[] = [];
  const missing: string[] = [];
  const closedUnread: number[] = [];
  for (const id of ids) {
    const end = retired.get(id) ?? second.perConnection.get(id);
    const start = first.perConnection.get(id);
    if (!start && openedBefore.has(id)) {
      missing.push(`#${id} was not found at the start of the window`);
      continue;
    }
    if (!end) {
      missing.push(`#${id} closed inside the window before its counters could be read`);
      closedUnread.push(id);
      continue;
    }
    found.push(id);
    add(counters, end);
    if (start) add(counters, start, -1);
  }
  return { counters, requested: [...ids], found, missing, closedUnread };
}

/**
 * Prepared executes between two readings by class, over instances known at the end; closed ones are reported. A
 * connection read when it closed counts with that reading only (`retiredIds`), as in {@link perConnectionWindow}.
 */
function preparedWindow(first: Snapshot, second: Snapshot, retired: ReadonlyMap<string, PreparedInstance>, retiredIds: ReadonlySet<number>): WindowExtras {
  if (!first.prepared || !second.prepared) return { preparedExecutes: null, preparedUnknown: null };
  const byClass: Record<string, number> = {};
  let closed = 0;
  const atEnd = new Map([...second.prepared].filter(([, p]) => !retiredIds.has(p.connectionId)));
  for (const [key, end] of retired) atEnd.set(key, end);
  for (const [key, end] of atEnd) {
    const moved = end.executes - (first.prepared.get(key)?.executes ?? 0);
    if (moved !== 0) byClass[end.statementClass] = (byClass[end.statementClass] ?? 0) + moved;
  }
  for (const key of first.prepared.keys()) if (!atEnd.has(key)) closed++;
  return {
    preparedExecutes: byClass,
    preparedUnknown: closed > 0 ? `${closed} prepared statement(s) were closed during the window, so their executes there have no class` : null,
  };
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
  /** Server-work statement entries that moved during calibration: the probe's own. */
  #probeWorkKeys = new Set<string>();
  /** What an empty window moves in each work figure, and the figures whose cost was not stable. */
  #workCost: { figures: Counters; unstable: Record<string, number[]> } = { figures: {}, unstable: {} };
  #closed = false;
  readonly #serverWork: boolean;

  /** `source` must already be open (see `createProbe`). */
  constructor(source: SnapshotSource, opts: ProbeOptions = {}) {
    this.#source = source;
    this.#pairs = Math.max(2, opts.calibrationPairs ?? DEFAULT_CALIBRATION_PAIRS);
    this.#serverWork = opts.serverWork !== false;
  }

  get cost(): ProbeCost | null {
    return this.#cost;
  }

  async #snapshot(ctx: WindowContext, purpose: 'calibrate' | 'control' | 'begin' | 'end', ids: readonly number[]): Promise<Snapshot> {
    const unsettled = (await ctx.settle?.()) ?? [];
    const snap = await this.#source.snapshot(ctx, purpose, ids);
    const own = this.#source.ownStatements;
    if (own && snap.statements) for (const [key, s] of snap.statements) if (own.includes(s.query.trim())) this.#probeStatementKeys.add(key);
    if (unsettled.length > 0) snap.failures.push(`could not settle the server's bookkeeping before the reading: ${unsettled.join('; ')}`);
    return snap;
  }

  /**
   * The control window's first reading, retaken until no connection closed before it is still listed
   * ({@link WindowContext.departedConnectionIds}); one staying past the wait is left, with a note saying whose it was.
   */
  async #afterDepartures(ctx: WindowContext, ids: readonly number[], first: Snapshot): Promise<{ snap: Snapshot; note: string | null }> {
    const departed = ctx.departedConnectionIds?.();
    if (!departed || departed.length === 0) return { snap: first, note: null };
    const gone = new Set(departed);
    const lingering = (snap: Snapshot): number[] => snap.sessions.foreign.filter((s) => gone.has(s.id)).map((s) => s.id);
    let snap = first;
    const deadline = Date.now() + DEPARTURE_WAIT_MS;
    while (lingering(snap).length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, DEPARTURE_POLL_MS));
      snap = await this.#snapshot(ctx, 'control', ids);
    }
    const still = lingering(snap);
    const note =
      still.length > 0
        ? `connection(s) ${still.map((id) => `#${id}`).join(', ')} closed before the window (by sqltally or through its proxy) were still on the server after ${DEPARTURE_WAIT_MS} ms`
        : null;
    return { snap, note };
  }

  async calibrate(ctx: WindowContext): Promise<ProbeCost> {
    const ids = connectionIdsOf(ctx);
    // A first, discarded snapshot absorbs whatever was pending before (statistics not yet flushed, a first read that
    // creates a pg_stat_statements entry), so the pairs measure the steady cost only.
    await this.#snapshot(ctx, 'calibrate', ids);
    const snapshots: Snapshot[] = [];
    for (let i = 0; i <= this.#pairs; i++) snapshots.push(await this.#snapshot(ctx, 'calibrate', ids));
    const windows: Counters[] = [];
    const perConnectionWindows: Counters[] = [];
    for (let i = 1; i < snapshots.length; i++) {
      const before = snapshots[i - 1]!;
      const after = snapshots[i]!;
      windows.push(delta(before.global, after.global));
      const own = perConnectionWindow(ids, before, after, new Set(ids), new Map());
      if (own) perConnectionWindows.push(own.counters);
      for (const key of movedStatements(before.statements, after.statements)) this.#probeStatementKeys.add(key);
      for (const key of movedWorkStatements(before.work, after.work)) this.#probeWorkKeys.add(key);
    }
    const workWindows: Counters[] = [];
    for (let i = 1; i < snapshots.length; i++) {
      const work = this.#workBetween(snapshots[i - 1]!, snapshots[i]!, ids, new Set(ids), new Map(), null);
      if (work) workWindows.push(work.figures as Counters);
    }
    const workCost = costFromEmptyWindows(workWindows);
    this.#workCost = { figures: workCost.counters, unstable: workCost.unstable };
    const cost = costFromEmptyWindows(windows);
    if (perConnectionWindows.length === windows.length && perConnectionWindows.length > 0) {
      const own = costFromEmptyWindows(perConnectionWindows);
      cost.perConnection = own.counters;
      for (const [key, values] of Object.entries(own.unstable)) cost.unstable[`perConnection.${key}`] = values;
      cost.stable = cost.stable && own.stable;
    }
    const readConnection = this.#source.readConnection?.bind(this.#source);
    // What a read runs does not depend on the connection read, so a session with no window connection yet measures its
    // cost on id 0, which no thread has: else a connection closing in a later window left its read as foreign work.
    const sample = ids[0] ?? 0;
    if (readConnection) {
      // What one read of a closing connection costs globally: two readings around it, minus one snapshot's cost.
      const retireWindows: Counters[] = [];
      for (let i = 0; i < 2; i++) {
        const a = await this.#snapshot(ctx, 'calibrate', ids);
        await readConnection(ctx, sample);
        const b = await this.#snapshot(ctx, 'calibrate', ids);
        retireWindows.push(subtractCost(delta(a.global, b.global), cost.counters));
      }
      const retire = costFromEmptyWindows(retireWindows);
      cost.retireRead = retire.counters;
      for (const [key, values] of Object.entries(retire.unstable)) cost.unstable[`retireRead.${key}`] = values;
      cost.stable = cost.stable && retire.stable;
    }
    this.#cost = cost;
    return this.#cost;
  }

  async begin(ctx: WindowContext): Promise<OpenWindow> {
    const cost = this.#cost ?? (await this.calibrate(ctx));
    const ids = connectionIdsOf(ctx);
    const departures = await this.#afterDepartures(ctx, ids, await this.#snapshot(ctx, 'control', ids));
    const controlStart = departures.snap;
    const start = await this.#snapshot(ctx, 'begin', ids);
    // The window's notes are its start's and end's: a session that would not leave is named with them.
    if (departures.note) start.notes.push(departures.note);
    const control = { ...subtractCost(delta(controlStart.global, start.global), cost.counters), ...this.#statementTotals(controlStart, start) };
    const own = perConnectionWindow(ids, controlStart, start, new Set(ids), new Map());
    const perConnectionControl = own ? subtractCost(own.counters, cost.perConnection ?? {}) : {};
    const controlAll = { ...control, ...prefixed('perConnection.', perConnectionControl) };
    const retired = new Map<number, Counters>();
    const retiredPrepared = new Map<string, PreparedInstance>();
    const retiredWork = new Map<number, Counters>();
    const retirement = { retired, retiredPrepared, retiredWork, retireReads: 0, quits: 0, retireFailures: [] as string[] };
    // A closing connection's read, whose cost is subtracted, must land before the end snapshot's global reading: reads
    // under way at `end()` finish first, and one closing after is read by the end snapshot (its goodbye waits for it).
    const reading = new Set<Promise<void>>();
    let ending: Promise<ServerLayer> | null = null;
    const readClosing = async (connectionId: number, goodbye: Goodbye | undefined): Promise<void> => {
      const read = this.#source.readConnection;
      if (goodbye?.gone) {
        // Its goodbye reached the server before anyone could read it: only what the goodbye itself moved is known.
        if (goodbye.quit) retirement.quits += 1;
        return;
      }
      if (!read) return;
      retirement.retireReads += 1;
      if (goodbye?.quit) retirement.quits += 1;
      try {
        const got = await read.call(this.#source, ctx, connectionId);
        if (got.counters) retired.set(connectionId, got.counters);
        if (got.work) retiredWork.set(connectionId, got.work);
        for (const [key, p] of got.prepared ?? []) retiredPrepared.set(key, p);
      } catch (err) {
        retirement.retireFailures.push(`reading closing connection #${connectionId} failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    return {
      retire: async (connectionId, goodbye) => {
        if (ending) {
          await ending.catch(() => undefined);
          return;
        }
        const run = readClosing(connectionId, goodbye);
        reading.add(run);
        try {
          await run;
        } finally {
          reading.delete(run);
        }
      },
      end: () =>
        (ending ??= (async () => {
          await Promise.allSettled([...reading]);
          return this.#finish(ctx, cost, controlAll, controlStart, start, new Set(ids), retirement);
        })()),
    };
  }

  async #finish(
    ctx: WindowContext,
    cost: ProbeCost,
    control: Counters,
    controlStart: Snapshot,
    start: Snapshot,
    openedBefore: ReadonlySet<number>,
    retirement: {
      retired: Map<number, Counters>;
      retiredPrepared: Map<string, PreparedInstance>;
      retiredWork: Map<number, Counters>;
      retireReads: number;
      quits: number;
      retireFailures: string[];
    },
  ): Promise<ServerLayer> {
    const ids = [...new Set([...openedBefore, ...connectionIdsOf(ctx)])].sort((a, b) => a - b);
    const end = await this.#snapshot(ctx, 'end', ids);
    let global = subtractCost(delta(start.global, end.global), cost.counters);
    for (let i = 0; i < retirement.retireReads; i++) global = subtractCost(global, cost.retireRead ?? {});
    for (let i = 0; i < retirement.quits; i++) global = subtractCost(global, this.#source.quitCost ?? {});
    global = { ...global, ...this.#statementTotals(start, end) };
    const read = perConnectionWindow(ids, start, end, openedBefore, retirement.retired);
    // Connections that could not be held open to be read as they closed: the server-wide counters are the layer.
    const setAside = read && ctx.closingUnread && read.closedUnread.length > 0 && read.closedUnread.length === read.missing.length ? read : null;
    const own = setAside ? null : read;
    const perConnection = own ? subtractCost(own.counters, cost.perConnection ?? {}) : null;
    const extras: WindowExtras = {
      ...preparedWindow(start, end, retirement.retiredPrepared, new Set(retirement.retired.keys())),
      droppedObjects: start.objects && end.objects ? [...start.objects].filter((o) => !end.objects!.has(o)) : [],
    };
    const { summary, source, notes: summaryNotes } = this.#source.summarize(global, perConnection, extras);
    // The same fields from the server-wide counters, so a verdict can say how much the server did beyond the window.
    const globalSummary = perConnection ? this.#source.summarize(global, null, extras).summary : summary;
    const sessions = mergeSessions(start.sessions, end.sessions);
    const work = this.#workBetween(start, end, ids, openedBefore, retirement.retiredWork, sessions);

    const incompleteReasons = [...new Set([...controlStart.failures, ...start.failures, ...end.failures, ...retirement.retireFailures])];
    if (!cost.stable) {
      incompleteReasons.push(
        `probe cost was not stable over ${cost.pairs} empty windows (${Object.entries(cost.unstable)
          .map(([k, v]) => `${k}: ${v.join('/')}`)
          .join('; ')}), so it cannot be subtracted`,
      );
    }
    const ownCost = nonZero(cost.perConnection ?? {});
    if (Object.keys(ownCost).length > 0) {
      incompleteReasons.push(
        `the probe's own readings moved the window connections' counters (${describeCounters(ownCost)}): they cannot be told apart from the workload`,
      );
    }
    if (end.settle && !end.settle.settled) incompleteReasons.push(`statistics did not settle: ${end.settle.detail}`);

    const notes = [...new Set([...start.notes, ...end.notes, ...summaryNotes])];
    if (setAside) {
      notes.push(`per-connection counters set aside, the server-wide ones used: ${setAside.missing.join('; ')} (the wire could not hold its goodbye)`);
    }
    const residue = nonZero(control);
    if (Object.keys(residue).length > 0) notes.push(`control window moved: ${describeCounters(residue)}`);
    if (sessions.foreign.length > 0) notes.push(ownConnectionsNote(start.sessions, end.sessions, ids, ctx.departedConnectionIds?.() ?? []));
    if (retirement.retired.size > 0)
      notes.push(`${retirement.retired.size} window connection(s) closed inside the window; their counters were read before the server dropped them`);

    const method = this.#source.attributionMethod;
    const attribution =
      method && own
        ? {
            method,
            requested: own.requested,
            found: own.found,
            // A window with no connections of its own is exact too: they did nothing, and all the server did is beyond it.
            exact: own.missing.length === 0 && own.found.length === own.requested.length,
            missing: own.missing,
          }
        : null;

    return {
      global,
      perConnection,
      summary,
      summarySource: source,
      globalSummary,
      statements: statementDeltas(start.statements, end.statements, this.#probeStatementKeys),
      probeCost: cost.counters,
      control: residue,
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
      ...(work ? { work } : {}),
    };
  }

  /**
   * The window's server work: per-connection, table and statement deltas less the probe's own cost (`sessions` null: a
   * calibration pair, whose figures are that cost); every figure that cannot be known is in `unknown` with its reason.
   */
  #workBetween(
    start: Snapshot,
    end: Snapshot,
    ids: readonly number[],
    openedBefore: ReadonlySet<number>,
    retiredWork: ReadonlyMap<number, Counters>,
    sessions: SeenSessions | null,
  ): ServerWork | null {
    const caps = this.#source.work;
    const summarize = this.#source.summarizeWork?.bind(this.#source);
    if (!caps || !summarize || !this.#serverWork) return null;
    const missing: { perConnection?: string; tables?: string; statements?: string } = {};
    const a = start.work;
    const b = end.work;
    const deltas: WorkDeltas = { perConnection: null, tables: null, statements: null };
    if (!a || !b) {
      missing.perConnection = missing.tables = missing.statements = 'the server-work counters were not read at both ends of the window';
    } else {
      for (const part of ['perConnection', 'tables', 'statements'] as const) {
        const why = b.unreadable[part] ?? a.unreadable[part];
        if (why) missing[part] = why;
      }
      if (!missing.perConnection && a.perConnection && b.perConnection) {
        const own = perConnectionWindow(
          ids,
          { ...start, perConnection: a.perConnection },
          { ...end, perConnection: b.perConnection },
          openedBefore,
          retiredWork,
        );
        if (own && own.missing.length > 0) missing.perConnection = `not every window connection could be read: ${own.missing.join('; ')}`;
        else if (own) deltas.perConnection = own.counters;
      }
      if (!missing.tables && a.tables && b.tables) {
        const tables = tableDeltas(a.tables, b.tables);
        if (typeof tables === 'string') missing.tables = tables;
        else deltas.tables = tables;
      }
      if (!missing.statements && a.statements && b.statements) {
        const own = new Set(this.#probeWorkKeys);
        const ownTexts = this.#source.ownStatements ?? [];
        for (const [key, s] of b.statements) if (ownTexts.includes(s.text.trim())) own.add(key);
        deltas.statements = statementWorkDeltas(a.statements, b.statements, own, caps.statementFigures);
      }
      // Server-wide parts hold other sessions' work too: exact only when no other client was there to do any.
      for (const part of this.#source.workServerWide ?? []) {
        if (!sessions || missing[part]) continue;
        if (sessions.foreign.length > 0)
          missing[part] = `${sessions.foreign.length} other client session(s) were on the server, and these counters are server-wide`;
        else if (!sessions.canSeeOtherSessions) missing[part] = 'this account cannot see other sessions, and these counters are server-wide';
        if (missing[part]) deltas[part] = null;
      }
      const inTransaction = [...new Set([...a.openTransactions, ...b.openTransactions])];
      if (inTransaction.length > 0) {
        for (const part of this.#source.workHeldInTransaction ?? []) {
          missing[part] = `window connection(s) ${inTransaction.map((id) => `#${id}`).join(', ')} sat in an open transaction at ${
            b.openTransactions.length > 0 ? 'the end' : 'the start'
          } of the window, and the server publishes these counters only when a session is idle outside a transaction`;
          deltas[part] = null;
        }
      }
    }
    const summary = summarize(deltas, missing);
    const figures: WorkFigures = {};
    const unknown: Record<string, string> = {};
    for (const [figure, why] of Object.entries(caps.figures)) if (why !== null) unknown[figure] = why;
    Object.assign(unknown, summary.unknown);
    for (const [figure, value] of Object.entries(summary.figures) as [keyof WorkFigures, number][]) {
      if (figure in unknown) continue;
      if (sessions && figure in this.#workCost.unstable) {
        unknown[figure] =
          `the probe's own cost in ${figure} was not the same in every empty window (${this.#workCost.unstable[figure]!.join('/')}), so it cannot be subtracted`;
        continue;
      }
      figures[figure] = sessions ? value - (this.#workCost.figures[figure] ?? 0) : value;
    }
    const notes = [...summary.notes];
    const residue = nonZero(this.#workCost.figures);
    if (sessions && Object.keys(residue).length > 0) notes.push(`the probe's own readings cost ${describeCounters(residue)} in each window: subtracted`);
    return {
      figures,
      unknown,
      tables: deltas.tables,
      statements: deltas.statements,
      statementsUnknown: deltas.statements
        ? null
        : caps.statementFigures.length === 0
          ? 'this server keeps no per-statement figures'
          : (missing.statements ?? 'the statement entries were not read'),
      statementFigures: [...caps.statementFigures],
      unindexedScans: summary.unindexedScans,
      scansUnknown: summary.scansUnknown,
      notes,
    };
  }

  /**
   * Totals over the per-statement counters between two readings, the probe's own statements left out by key (their
   * number depends on how many connections the proxy settled, so they cannot be subtracted as a cost).
   */
  #statementTotals(before: Snapshot, after: Snapshot): Counters {
    if (!before.statements || !after.statements) return {};
    const totals: Counters = {
      'statements.calls': 0,
      'statements.rows': 0,
      'statements.insert_calls': 0,
      'statements.begin_calls': 0,
      'statements.commit_calls': 0,
    };
    for (const [key, s] of after.statements) {
      if (this.#probeStatementKeys.has(key)) continue;
      const prev = before.statements.get(key);
      const calls = s.calls - (prev?.calls ?? 0);
      const rows = s.rows - (prev?.rows ?? 0);
      if (calls === 0 && rows === 0) continue;
      totals['statements.calls']! += calls;
      totals['statements.rows']! += rows;
      const classKey = `statements.${s.statementClass}_calls`;
      if (classKey in totals) totals[classKey]! += calls;
    }
    return totals;
  }

  /** The probe's own statements (by pg_stat_statements key) found at calibration: never the workload's. */
  get probeStatementKeys(): ReadonlySet<string> {
    return this.#probeStatementKeys;
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

const idList = (list: readonly number[]): string => (list.length > 0 ? list.map((id) => `#${id}`).join(', ') : 'none');

/**
 * Which listed sessions sqltally had closed itself, and at which end of the window each was: what tells a leftover of
 * its own (one it never noted, or one that outstayed the wait) from a real other client.
 */
function ownConnectionsNote(atStart: SeenSessions, atEnd: SeenSessions, window: readonly number[], departed: readonly number[]): string {
  const gone = new Set(departed);
  const foreign = [...new Set([...atStart.foreign, ...atEnd.foreign].map((s) => s.id))].sort((a, b) => a - b);
  const known = foreign.filter((id) => gone.has(id));
  const unknown = foreign.filter((id) => !gone.has(id));
  const parts = [
    ...(known.length > 0 ? [`${idList(known)} closed by sqltally shortly before the window`] : []),
    ...(unknown.length > 0 ? [`${idList(unknown)} not among the connections sqltally noted closing shortly before it`] : []),
  ];
  const closed = [...gone].sort((a, b) => a - b);
  return (
    `other sessions listed: ${parts.join('; ')}; at the window's start ${idList(atStart.foreign.map((s) => s.id))}, at its end ${idList(atEnd.foreign.map((s) => s.id))} ` +
    `(sqltally's own then: the window's ${idList(window)}; closed before it ${idList(closed)}; its probes are set aside by id)`
  );
}

function movedWorkStatements(before: WorkReading | undefined, after: WorkReading | undefined): string[] {
  if (!before?.statements || !after?.statements) return [];
  return [...after.statements.entries()].filter(([key, s]) => s.calls !== (before.statements!.get(key)?.calls ?? 0)).map(([key]) => key);
}

function movedStatements(before: Snapshot['statements'], after: Snapshot['statements']): string[] {
  if (!before || !after) return [];
  return [...after.entries()].filter(([key, s]) => s.calls !== (before.get(key)?.calls ?? 0)).map(([key]) => key);
}

function statementDeltas(before: Snapshot['statements'], after: Snapshot['statements'], probeKeys: ReadonlySet<string>): ServerLayer['statements'] {
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
