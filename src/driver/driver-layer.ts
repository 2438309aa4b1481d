import { truncateStatement } from '../shared/errors';
import { bulkLoadOf } from '../sql/bulk-load';
import { captureCaller } from '../shared/caller';
import type { CallGroup } from './module';
import type { DriverName } from '../shared/driver-names';
import { DRIVERS } from './registry';
import { CallKindSchema, shownFingerprintText, STATEMENT_CLASSES } from '../sql/events';
import type { CallKind, CallShape, DriverLayer, ShapeStat, StatementClass, StatementEvent, StatementSink, SteadyCounter } from '../sql/events';
import { fingerprintCached } from '../sql/statement-cache';
import { DateClass, isArray, mathMax, mathRound, objectEntries } from '../shared/intrinsics';
import { PathLedger } from './compat/path';

const DEFAULT_MAX_EVENTS = 200;
const SQL_SHOWN_CHARS = 200;
/**
 * Distinct SQL texts a window groups calls by. Beyond it (a workload of unique texts, literals inlined) the calls
 * still count in every total, and the driver model is told its groups are incomplete.
 */
const DEFAULT_MAX_TEXTS = 10_000;
/** New texts of a window whose caller is captured: capturing a stack is tens of microseconds, fine once per shape. */
const MAX_CALLERS = 256;
/** Calls per text whose bound values are compared, for duplicate-vs-N+1: the first ones tell, and it stays cheap. */
const MAX_TRACKED_CALLS = 64;
/** A call binding more values than this is not compared (a multi-row INSERT is not an N+1 candidate). */
const MAX_TRACKED_VALUES = 32;

/** How much of the window's calls a {@link DriverLayer} keeps. */
export interface SummarizeOptions {
  /** Events kept in `events`, first ones first; the rest only count in `eventsOmitted`. Default 200. */
  maxEvents?: number;
  /** Characters of SQL kept per event. Default 200. */
  maxSqlChars?: number;
  /** Distinct SQL texts grouped for the driver model; default 10000. */
  maxTexts?: number;
  /** Shapes to leave out of every total, listed as ignored (see {@link ShapeFilter}). */
  ignore?: ShapeFilter | null;
}

/** Decides from a statement's shape whether a session ignores it (its own ignore list). */
export type ShapeFilter = (shape: { fingerprint: string; id: string; sql: string }) => boolean;

function zeroes<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

// Templates copied by spread for every window (one opens per test): cheaper than building the maps key by key, and
// copies of one literal share a hidden class, keeping the per-call `byKind[kind]++` a monomorphic store.
const NO_KINDS: Readonly<Record<CallKind, number>> = zeroes(CallKindSchema.options);
const NO_CLASSES: Readonly<Record<StatementClass, number>> = zeroes(STATEMENT_CLASSES);

function errorMessage(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(error);
}

/** The code path a caller capture comes from: the frames between the user and the driver depend on it (caller.ts). */
function callerPath(driver: DriverName, method: string): string {
  return `${driver}.${method}`;
}

/** DriverTally's "keep the whole text", compared on every call. */
const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;

/** Integer ns from a `performance.now()` reading (ms since the process's time origin). */
function toNs(ms: number): number {
  return mathMax(0, mathRound(ms * 1e6));
}

/**
 * A group as the window counts it: the model's {@link CallGroup} plus every total of the layer, kept per group so
 * that a call touches one object only (the layer's totals are sums over the groups, made when the window closes).
 */
interface Group extends CallGroup {
  bindValues: number;
  maxBindValues: number;
  /** Rows the calls that settled without an error reported. */
  rowsAffected: number;
  /** False once a call of the group (not a prepare) settled without an error and without a row count. */
  known: boolean;
  errors: number;
  /** Bound values compared for this group's text and kind, shared by its connections; null for prepares. */
  distinct: DistinctValues | null;
  /** Its text is on the window's ignore list: listed as ignored, in none of the totals. */
  ignored: boolean;
  /** A text beyond the window's cap: in every total, in neither the model's groups nor the shapes. */
  overflow: boolean;
  /** Its text's record (null beyond the cap), for the events it keeps. */
  info: TextInfo | null;
}

/** Bound values compared across one text's calls of one kind (on any connection). */
interface DistinctValues {
  /** The distinct value lists among the first calls; null once a call could not be compared. */
  sets: unknown[][] | null;
  /** Parameter sets compared so far (at most MAX_TRACKED_CALLS). */
  tracked: number;
}

/** What a window knows about one SQL text beyond its groups: for shapes. */
interface TextInfo {
  dialect: import('../sql/tokenizer').SqlDialect;
  groups: Group[];
  distinct: Partial<Record<CallKind, DistinctValues>>;
  caller: string | null;
  ignored: boolean;
  /** The text as events show it, cut once per text (a regex pass per kept event was a tenth of a per-row call). */
  shown: string | null;
}

/**
 * One call's bound values as a copied list {@link sameValues} can compare (a caller may reuse its array), or null when
 * not cheaply comparable. Lists, not a string key per call, spare converting every number to text.
 */
function comparableValues(values: unknown): unknown[] | null {
  if (values === undefined || values === null) return [];
  // No driver binds a function: a wrapper that hands one over has picked the wrong argument, and its `length` would
  // read as an empty list, the same set on every call.
  if (typeof values === 'function') return null;
  let list: unknown = values;
  // better-sqlite3 hands over its arguments: one array or named object, or the values themselves.
  if (typeof (values as { length?: unknown }).length === 'number' && !isArray(values) && typeof values !== 'string') {
    const args = values as ArrayLike<unknown>;
    if (args.length === 1 && typeof args[0] === 'object' && args[0] !== null) list = args[0];
    else return scalarList(args);
  }
  if (isArray(list)) return scalarList(list);
  if (typeof list === 'object') {
    const entries = objectEntries(list as object);
    if (entries.length > MAX_TRACKED_VALUES) return null;
    // Names and values, after a marker, so named and positional sets never compare equal.
    const out: unknown[] = [NAMED];
    for (const [k, v] of entries) {
      const c = comparable(v);
      if (c === NOT_COMPARABLE) return null;
      out.push(k, c);
    }
    return out;
  }
  const c = comparable(list);
  return c === NOT_COMPARABLE ? null : [c];
}

const NAMED = Symbol('named parameters');
const NOT_COMPARABLE = Symbol('not comparable');

function scalarList(list: ArrayLike<unknown>): unknown[] | null {
  const n = list.length;
  if (n > MAX_TRACKED_VALUES) return null;
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const c = comparable(list[i]);
    if (c === NOT_COMPARABLE) return null;
    out.push(c);
  }
  return out;
}

/** A value as it is compared: scalars as they are (so `1`, `'1'`, `1n` and `true` stay apart), a Date by its time. */
function comparable(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  switch (typeof v) {
    case 'string':
      return v.length > 256 ? NOT_COMPARABLE : v;
    case 'number':
    case 'bigint':
    case 'boolean':
      return v;
    default:
      return v instanceof DateClass ? `\u0000Date ${v.getTime()}` : NOT_COMPARABLE;
  }
}

/** Whether two lists from {@link comparableValues} bind the same values (NaN is NaN, 0 is -0, as the driver sends them). */
function sameValues(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x !== y && !(x !== x && y !== y)) return false;
  }
  return true;
}

/** What a closed window holds: the layer for the report, and the groups the driver model reasons about. */
export interface DriverWindow {
  layer: DriverLayer;
  /** By kind, connection and SQL text, in the order each first appeared. */
  groups: CallGroup[];
  /** Rows the window's INSERT calls reported, or null when some INSERT call did not say. */
  insertedRows: number | null;
  /** Why `groups` does not cover every call (too many distinct texts), or null. */
  groupsIncomplete: string | null;
  /**
   * The calls an ignore list left out of every total, grouped the same way: the wire and the server still saw them,
   * so the model needs them to line the layers up, and to say how much of each layer was theirs.
   */
  ignored: { groups: CallGroup[]; insertedRows: number | null };
}

/**
 * Totals of one window, built call by call in constant time per call: groups by kind, connection and text, each
 * holding its share of every total, and a capped list of events for the report. A call updates its group alone (the
 * last call's group is at hand, so a loop finds it without a lookup); the layer's counters by kind and class and its
 * totals are sums over the groups, made once when the window closes. Nothing grows with the number of calls beyond
 * the caps, so a window of a million calls costs what a window of a thousand does.
 */
export class WindowTotals {
  readonly #maxEvents: number;
  readonly #maxSql: number;
  readonly #maxTexts: number;
  readonly #events: StatementEvent[] = [];
  // maxEvents - events.length, kept apart: `keepsEvents` is read on every call (StatementSink.timed), so one field read, not two.
  #eventsLeft: number;
  // Keyed by text, then by kind and connection: a map per text keeps the per-call lookup a single hash of the text.
  readonly #texts = new Map<string, TextInfo>();
  /** Groups of texts beyond the cap, by kind and class: they count in the totals only. */
  readonly #overflow: Group[] = [];
  readonly #ignore: ShapeFilter | null;
  // The last call's shape and connection, and the group they led to: a loop sends one shape again and again.
  #lastShape: CallShape | null = null;
  #lastConnection: number | null = null;
  #lastGroup: Group | null = null;
  #textsOmitted = 0;
  #callersTaken = 0;
  /** Texts a wrapper was told to capture the caller of (needsCaller) and that no call has been recorded of yet. */
  readonly #callersPending = new Set<string>();
  /**
   * Texts asked about and answered under another (askAnswered): their caller is taken, so a later ask is no, or a
   * looped postgres.js template would use up the window's captures. At most MAX_CALLERS of them.
   */
  readonly #asksAnswered = new Set<string>();
  /** Shared with the counters handed out (steadyCounter), which count while it is open. */
  readonly #state: WindowState = { open: true };

  constructor(opts: SummarizeOptions = {}) {
    this.#maxEvents = Math.max(0, opts.maxEvents ?? DEFAULT_MAX_EVENTS);
    this.#eventsLeft = this.#maxEvents;
    this.#maxSql = opts.maxSqlChars ?? SQL_SHOWN_CHARS;
    this.#maxTexts = opts.maxTexts ?? DEFAULT_MAX_TEXTS;
    this.#ignore = opts.ignore ?? null;
  }

  add(
    driver: DriverName,
    shape: CallShape,
    startMs: number,
    endMs: number,
    rowsAffected: number | null,
    error: unknown,
    connectionId: number | null,
    values?: unknown,
    caller?: string | null,
  ): void {
    let group: Group;
    if (shape === this.#lastShape && connectionId === this.#lastConnection) group = this.#lastGroup as Group;
    else {
      group = this.#groupOf(driver, shape, connectionId, caller);
      this.#lastShape = shape;
      this.#lastConnection = connectionId;
      this.#lastGroup = group;
    }
    group.calls++;
    const sets = shape.parameterSets;
    if (sets > 0) {
      group.parameterSets += sets;
      group.callsWithParameterSets++;
    }
    const bind = shape.bindValues;
    if (bind > 0) {
      group.callsWithValues++;
      group.bindValues += bind;
      if (bind > group.maxBindValues) group.maxBindValues = bind;
    }
    if (shape.protocol !== undefined) group.byProtocol[shape.protocol]++;
    const failed = error !== null && error !== undefined;
    if (failed) group.errors++;
    else if (rowsAffected !== null) group.rowsAffected += rowsAffected;
    else group.known = false;
    // A text beyond the cap counts its calls as omitted, each time.
    if (group.overflow) this.#textsOmitted++;
    const distinct = group.distinct;
    // A call whose wrapper handed over no values while binding some is not compared (StatementSink.epoch).
    if (distinct !== null && distinct.sets !== null && distinct.tracked < MAX_TRACKED_CALLS && (values !== undefined || bind === 0)) {
      distinct.tracked++;
      const list = bind > MAX_TRACKED_VALUES ? null : comparableValues(values);
      if (list === null) distinct.sets = null;
      else if (!distinct.sets.some((seen) => sameValues(seen, list))) distinct.sets.push(list);
    }
    if (this.#eventsLeft > 0 && !group.ignored)
      this.#keep(driver, shape, startMs, endMs, failed ? null : rowsAffected, failed ? error : null, connectionId, group);
  }

  #keep(
    driver: DriverName,
    shape: CallShape,
    startMs: number,
    endMs: number,
    rowsAffected: number | null,
    error: unknown,
    connectionId: number | null,
    group: Group,
  ): void {
    this.#eventsLeft--;
    const info = group.info;
    this.#events.push({
      driver,
      method: shape.method,
      kind: shape.kind,
      sql: info ? (info.shown ??= truncateStatement(shape.sql, this.#maxSql)) : truncateStatement(shape.sql, this.#maxSql),
      statementClass: shape.statementClass,
      bindValues: shape.bindValues,
      parameterSets: shape.parameterSets,
      rowsAffected,
      startNs: toNs(startMs),
      durationNs: toNs(endMs - startMs),
      error: error === null ? null : truncateStatement(errorMessage(error), this.#maxSql * 2),
      connectionId,
    });
  }

  /** The group of a call: by text, then kind and connection, made at its first call. */
  #groupOf(driver: DriverName, shape: CallShape, connectionId: number | null, caller: string | null | undefined): Group {
    const info = this.#text(driver, shape, caller);
    if (info === null) {
      // Beyond the text cap: one group per kind and class, with no connection and no text of its own.
      for (const g of this.#overflow) if (g.kind === shape.kind && g.statementClass === shape.statementClass) return g;
      const group = newGroup(shape, null, null, null, true);
      this.#overflow.push(group);
      return group;
    }
    // The class too: it follows from the text for a wrapper's calls, not always for events built elsewhere.
    for (const g of info.groups) if (g.kind === shape.kind && g.connectionId === connectionId && g.statementClass === shape.statementClass) return g;
    // A prepare binds nothing and returns no rows: 0 distinct sets and 0 rows on its shape; whether its repeats are
    // N+1 or duplicates is the executions' question (knex on better-sqlite3 prepares before every run).
    const distinct = shape.kind === 'prepare' ? null : (info.distinct[shape.kind] ??= { sets: [], tracked: 0 });
    const group = newGroup(shape, connectionId, distinct, info, false);
    info.groups.push(group);
    return group;
  }

  /**
   * The window's record of a text, made at its first call (caller captured unless the wrapper `given` it, ignore
   * decided); null beyond the cap.
   */
  #text(driver: DriverName, shape: CallShape, given: string | null | undefined): TextInfo | null {
    const sql = shape.sql;
    const known = this.#texts.get(sql);
    if (known) return known;
    if (this.#texts.size >= this.#maxTexts) return null;
    const dialect = DRIVERS[driver].dialect;
    let ignored = false;
    if (this.#ignore) {
      const { fingerprint, id } = fingerprintCached(sql, dialect);
      ignored = this.#ignore({ fingerprint, id, sql });
    }
    // MAX_CALLERS bounds captures: an asked one (needsCaller) counts as pending from the ask and moves to taken here;
    // one handed over unasked was captured for another text and costs nothing. Without one, the window captures itself.
    let caller: string | null = null;
    if (this.#callersPending.size > 0 && this.#callersPending.delete(sql)) {
      this.#callersTaken++;
      caller = given !== undefined ? given : captureCaller(callerPath(driver, shape.method));
    } else if (given !== undefined) caller = given;
    else if (this.#callersTaken + this.#callersPending.size < MAX_CALLERS) {
      this.#callersTaken++;
      caller = captureCaller(callerPath(driver, shape.method));
    }
    const info: TextInfo = { dialect, groups: [], distinct: {}, caller, ignored, shown: null };
    this.#texts.set(sql, info);
    return info;
  }

  /**
   * Whether a first call of `sql` now would capture its caller (StatementSink.needsCaller): true once per text until
   * a call of it is recorded, so calls of one text handed to the driver before the first settles (a pipeline, a
   * `Promise.all`) are captured once, not each.
   */
  needsCaller(sql: string): boolean {
    const pending = this.#callersPending;
    if (this.#callersTaken + pending.size >= MAX_CALLERS || this.#texts.size + pending.size >= this.#maxTexts) return false;
    if (this.#texts.has(sql) || pending.has(sql) || this.#asksAnswered.has(sql)) return false;
    pending.add(sql);
    return true;
  }

  /** An ask about `sql` was answered under another text (StatementSink.askAnswered): its capture is a taken one. */
  askAnswered(sql: string): void {
    if (this.#callersPending.delete(sql)) {
      this.#callersTaken++;
      this.#asksAnswered.add(sql);
    }
  }

  /**
   * A counter for more calls of the shape just added on the same connection, when nothing about them is kept but
   * their count (StatementSink.steadyCounter): no events left to keep, its values compared as far as they are, and a
   * group of its own (a text beyond the cap counts each call as omitted, and the driver's protocol is per call).
   */
  steadyCounter(shape: CallShape, connectionId: number | null): SteadyCounter | null {
    if (this.#eventsLeft > 0 || shape !== this.#lastShape || connectionId !== this.#lastConnection || shape.protocol !== undefined) return null;
    const group = this.#lastGroup as Group;
    if (group.overflow) return null;
    const distinct = group.distinct;
    if (distinct !== null && distinct.sets !== null && distinct.tracked < MAX_TRACKED_CALLS) return null;
    return new GroupCounter(group, shape, this.#state);
  }

  /** Ends the counters it handed out: a call after this one goes to a sink's `record` again. */
  close(): void {
    this.#state.open = false;
  }

  /** Whether the next call's event will be kept (and so needs its times). */
  get keepsEvents(): boolean {
    return this.#eventsLeft > 0;
  }

  /** Adds an event already built (tests, tools that hold event lists). */
  addEvent(e: StatementEvent): void {
    const startMs = e.startNs / 1e6;
    this.add(e.driver, e, startMs, startMs + e.durationNs / 1e6, e.rowsAffected, e.error, e.connectionId);
  }

  /** Calls grouped by statement shape and kind, first seen first: texts that differ only by values are one shape. */
  #shapes(): ShapeStat[] {
    const byShape = new Map<string, ShapeStat & { distinctKnown: boolean; rowsKnown: boolean }>();
    for (const [sql, info] of this.#texts) {
      const { fingerprint, id } = fingerprintCached(sql, info.dialect);
      for (const g of info.groups) {
        const key = `${id}\u0000${g.kind}`;
        let shape = byShape.get(key);
        if (!shape) {
          shape = {
            id,
            fingerprint: shownFingerprintText(fingerprint),
            statementClass: g.statementClass,
            kind: g.kind,
            calls: 0,
            parameterSets: 0,
            distinctParameterSets: 0,
            distinctOf: 0,
            rows: 0,
            caller: info.caller,
            ignored: info.ignored,
            distinctKnown: true,
            rowsKnown: true,
          };
          byShape.set(key, shape);
        }
        shape.calls += g.calls;
        shape.parameterSets += g.parameterSets;
        shape.caller ??= info.caller;
        // A prepare returns no rows (see #groupOf).
        if (g.kind !== 'prepare') {
          shape.rows = (shape.rows ?? 0) + g.rowsAffected;
          if (!g.known) shape.rowsKnown = false;
        }
      }
      // Values are compared per text and kind: distinct sets of different texts differ anyway, so they add up.
      for (const [kind, d] of Object.entries(info.distinct) as [CallKind, DistinctValues][]) {
        const shape = byShape.get(`${id}\u0000${kind}`);
        if (!shape) continue;
        if (d.sets && d.tracked > 0) {
          shape.distinctParameterSets = (shape.distinctParameterSets ?? 0) + d.sets.length;
          shape.distinctOf = (shape.distinctOf ?? 0) + d.tracked;
        } else shape.distinctKnown = false;
      }
    }
    return [...byShape.values()].map(({ distinctKnown, rowsKnown, ...shape }) => ({
      ...shape,
      distinctParameterSets: distinctKnown ? shape.distinctParameterSets : null,
      distinctOf: distinctKnown ? shape.distinctOf : null,
      rows: rowsKnown || (shape.rows ?? 0) > 0 ? shape.rows : null,
    }));
  }

  finish(): DriverWindow {
    this.close();
    const byKind: Record<CallKind, number> = { ...NO_KINDS };
    const byClass: Record<StatementClass, number> = { ...NO_CLASSES };
    let calls = 0;
    let parameterSets = 0;
    let bindValues = 0;
    let maxBindValuesPerCall = 0;
    let rowsAffected = 0;
    let errors = 0;
    let ignoredCalls = 0;
    let insertedRows: number | null = 0;
    const groups: CallGroup[] = [];
    const ignoredGroups: CallGroup[] = [];
    let ignoredRows: number | null = 0;
    const count = (g: Group): void => {
      calls += g.calls;
      byKind[g.kind] += g.calls;
      // A prepare is not a statement executed: statement classes count executions only, the same on every driver.
      if (g.kind !== 'prepare') byClass[g.statementClass] += g.calls;
      parameterSets += g.parameterSets;
      bindValues += g.bindValues;
      if (g.maxBindValues > maxBindValuesPerCall) maxBindValuesPerCall = g.maxBindValues;
      rowsAffected += g.rowsAffected;
      errors += g.errors;
      insertedRows = withInsertedRows(insertedRows, g);
    };
    // Text by text in first-seen order, and within a text kind by kind: the order a driver prepares in.
    for (const info of this.#texts.values()) {
      for (const g of info.groups) {
        if (info.ignored) {
          ignoredCalls += g.calls;
          ignoredGroups.push(callGroupOf(g));
          ignoredRows = withInsertedRows(ignoredRows, g);
          continue;
        }
        count(g);
        groups.push(callGroupOf(g));
      }
    }
    for (const g of this.#overflow) count(g);
    return {
      layer: {
        calls,
        byKind,
        byClass,
        parameterSets,
        bindValues,
        maxBindValuesPerCall,
        rowsAffected,
        errors,
        events: this.#events.slice(),
        eventsOmitted: calls - this.#events.length,
        shapes: this.#shapes(),
        shapesOmitted: this.#textsOmitted,
        ignoredCalls,
      },
      groups,
      insertedRows,
      ignored: { groups: ignoredGroups, insertedRows: ignoredRows },
      groupsIncomplete:
        this.#textsOmitted > 0
          ? `${this.#textsOmitted} calls had SQL texts beyond the first ${this.#maxTexts} distinct ones of the window: they count in every total but the driver model did not see them`
          : null,
    };
  }
}

/** A running count of inserted rows plus the group's, if it is an INSERT execution; null once one did not say. */
function withInsertedRows(total: number | null, g: Group): number | null {
  // A COPY FROM STDIN / LOAD DATA LOCAL reports the rows it loaded as an INSERT does.
  if ((g.statementClass !== 'insert' && (g.statementClass !== 'other' || bulkLoadOf(g.sql) === null)) || g.kind === 'prepare' || total === null) return total;
  return g.known ? total + g.rowsAffected : null;
}

function newGroup(shape: CallShape, connectionId: number | null, distinct: DistinctValues | null, info: TextInfo | null, overflow: boolean): Group {
  return {
    kind: shape.kind,
    sql: shape.sql,
    statementClass: shape.statementClass,
    connectionId,
    calls: 0,
    parameterSets: 0,
    callsWithParameterSets: 0,
    callsWithValues: 0,
    byProtocol: { simple: 0, extended: 0, named: 0, cursor: 0, describe: 0 },
    bindValues: 0,
    maxBindValues: 0,
    rowsAffected: 0,
    known: true,
    errors: 0,
    distinct,
    ignored: info?.ignored ?? false,
    overflow,
    info,
  };
}

/** Whether a window still counts: read by the counters it handed out. */
interface WindowState {
  open: boolean;
}

/**
 * A group's count of one shape's calls, handed to a wrapper once nothing but that count is kept: what `add` does for
 * such a call (no error, no event, no values compared, its values already in `maxBindValues`).
 */
class GroupCounter implements SteadyCounter {
  readonly #group: Group;
  readonly #sets: number;
  readonly #bind: number;
  readonly #state: WindowState;

  constructor(group: Group, shape: CallShape, state: WindowState) {
    this.#group = group;
    this.#sets = shape.parameterSets;
    this.#bind = shape.bindValues;
    this.#state = state;
  }

  get open(): boolean {
    return this.#state.open;
  }

  count(rowsAffected: number | null): void {
    const group = this.#group;
    group.calls++;
    const sets = this.#sets;
    if (sets > 0) {
      group.parameterSets += sets;
      group.callsWithParameterSets++;
    }
    const bind = this.#bind;
    if (bind > 0) {
      group.callsWithValues++;
      group.bindValues += bind;
    }
    if (rowsAffected !== null) group.rowsAffected += rowsAffected;
    else group.known = false;
  }
}

/** The model's view of a group: its {@link CallGroup} fields only. */
function callGroupOf(g: Group): CallGroup {
  return {
    kind: g.kind,
    sql: g.sql,
    statementClass: g.statementClass,
    connectionId: g.connectionId,
    calls: g.calls,
    parameterSets: g.parameterSets,
    callsWithParameterSets: g.callsWithParameterSets,
    callsWithValues: g.callsWithValues,
    errors: g.errors,
    byProtocol: { ...g.byProtocol },
  };
}

/**
 * Totals over a list of driver events (the report's capped list, a test's events). Every kind and class is present
 * (0 when unseen); statement classes count executions only, never prepares.
 */
export function summarizeDriverEvents(events: readonly StatementEvent[], opts: SummarizeOptions = {}): DriverLayer {
  return windowOfEvents(events, opts).layer;
}

/** A {@link DriverWindow} over a list of events. */
export function windowOfEvents(events: readonly StatementEvent[], opts: SummarizeOptions = {}): DriverWindow {
  const totals = new WindowTotals(opts);
  for (const e of events) totals.addEvent(e);
  return totals.finish();
}

/** A position in a {@link DriverTally}'s event list, from {@link DriverTally.mark}. */
export interface TallyMark {
  readonly index: number;
}

/**
 * A sink that keeps every event in order, with marks: take a `mark()` after set-up, run the code, and `since(mark)`
 * holds only its calls. Unbounded by design (tests and tools that want the calls themselves); capture windows use
 * a {@link DriverRecorder}, whose cost does not grow with the number of calls.
 */
export class DriverTally implements StatementSink {
  readonly #events: StatementEvent[] = [];
  readonly #maxSql: number;

  constructor(opts: { maxSqlChars?: number } = {}) {
    this.#maxSql = opts.maxSqlChars ?? MAX_SAFE_INTEGER;
  }

  record(driver: DriverName, shape: CallShape, startMs: number, endMs: number, rowsAffected: number | null, error: unknown, connectionId: number | null): void {
    const failed = error !== null && error !== undefined;
    this.#events.push({
      driver,
      method: shape.method,
      kind: shape.kind,
      sql: this.#maxSql === MAX_SAFE_INTEGER ? shape.sql : truncateStatement(shape.sql, this.#maxSql),
      statementClass: shape.statementClass,
      bindValues: shape.bindValues,
      parameterSets: shape.parameterSets,
      rowsAffected: failed ? null : rowsAffected,
      startNs: toNs(startMs),
      durationNs: toNs(endMs - startMs),
      error: failed ? errorMessage(error) : null,
      connectionId,
    });
  }

  /** Appends an already built event (tests). */
  push(event: StatementEvent): void {
    this.#events.push(event);
  }

  /** Every event recorded so far (a copy). */
  get events(): StatementEvent[] {
    return this.#events.slice();
  }

  get size(): number {
    return this.#events.length;
  }

  mark(): TallyMark {
    return { index: this.#events.length };
  }

  /** Events recorded after `mark` (all of them without one). */
  since(mark?: TallyMark): StatementEvent[] {
    return this.#events.slice(mark?.index ?? 0);
  }

  /** Events between two marks, `from` inclusive, `to` exclusive. */
  between(from: TallyMark, to: TallyMark): StatementEvent[] {
    return this.#events.slice(from.index, to.index);
  }

  /** The driver layer of the window after `mark`. */
  summarize(mark?: TallyMark, opts?: SummarizeOptions): DriverLayer {
    return summarizeDriverEvents(this.since(mark), opts);
  }
}

/**
 * The sink of a capture session: every counted object records here, calls settling in an open window count into its
 * {@link WindowTotals}, and calls in flight are known, so a window sees code that returned with a query running.
 */
/** Statements of late calls kept to name them. */
const LATE_SQL_SHOWN = 3;

export class DriverRecorder implements StatementSink {
  readonly #opts: SummarizeOptions;
  #window: WindowTotals | null = null;
  #epoch = 0;
  #inFlight = 0;
  #inFlightInWindow = 0;
  #letGoInWindow = 0;
  /** Drivers that recorded calls in the current window. */
  readonly #drivers = new Set<DriverName>();
  /** The driver of the last call recorded: the set is only touched when it changes. */
  #lastDriver: DriverName | null = null;
  /** Calls the last window left in flight that have not settled yet (counted down as calls settle outside a window). */
  #lateLeft = 0;
  #recordedInWindow = 0;
  /** The last window left work running: every call settling before the next window is its late work. */
  #lateOpen = false;
  /** Of those, the ones that settled after the window closed, with the first few statements. */
  #late = { calls: 0, sql: [] as string[] };
  /** Server ids of the connections counted calls ran on, in or out of a window; the last one kept beside the set. */
  readonly #connections = new Set<number>();
  #lastConnection: number | null = null;

  constructor(opts: SummarizeOptions = {}) {
    this.#opts = opts;
  }

  /** Which path counted each driver (see counters/driver/compat/path.ts), over the whole session. */
  readonly paths = new PathLedger();

  notePath(driver: DriverName, feature: string, reason: string | null): void {
    this.paths.note(driver, feature, reason);
  }

  record(
    driver: DriverName,
    shape: CallShape,
    startMs: number,
    endMs: number,
    rowsAffected: number | null,
    error: unknown,
    connectionId: number | null,
    values?: unknown,
    caller?: string | null,
  ): void {
    if (connectionId !== this.#lastConnection) {
      if (connectionId !== null) this.#connections.add(connectionId);
      this.#lastConnection = connectionId;
    }
    const window = this.#window;
    if (window === null) {
      // A call the last window started, settling after it closed: late work of that window, counted in none.
      if (this.#lateLeft > 0 || this.#lateOpen) {
        if (this.#lateLeft > 0) this.#lateLeft--;
        this.#late.calls++;
        if (this.#late.sql.length < LATE_SQL_SHOWN) this.#late.sql.push(shape.sql);
      }
      return;
    }
    this.#recordedInWindow++;
    if (driver !== this.#lastDriver) {
      this.#drivers.add(driver);
      this.#lastDriver = driver;
    }
    window.add(driver, shape, startMs, endMs, rowsAffected, error, connectionId, values, caller);
  }

  needsCaller(sql: string): boolean {
    const window = this.#window;
    return window !== null && window.needsCaller(sql);
  }

  askAnswered(sql: string): void {
    this.#window?.askAnswered(sql);
  }

  // The driver is in `#drivers` already: the counter is for the shape of the call it just recorded.
  steadyCounter(_driver: DriverName, shape: CallShape, connectionId: number | null): SteadyCounter | null {
    const window = this.#window;
    return window === null ? null : window.steadyCounter(shape, connectionId);
  }

  inFlight(delta: 1 | -1): void {
    this.#inFlight += delta;
    // Calls started in the window and not settled; a call from before the window that settles in it is not one
    // (the count never goes below 0 for it).
    if (this.#window !== null) this.#inFlightInWindow = mathMax(0, this.#inFlightInWindow + delta);
  }

  /**
   * The connections counted calls ran on in this session (server ids, where the driver named one): wire traffic on
   * one of them in a window with no counted call is a counted object's call the driver layer missed.
   */
  get countedConnections(): ReadonlySet<number> {
    return this.#connections;
  }

  /** Calls recorded in the current window so far (ignored ones included). */
  get recordedInWindow(): number {
    return this.#recordedInWindow;
  }

  /** Calls started while the current (or last) window was open and not settled when it closed. */
  get callsInFlightInWindow(): number {
    return this.#inFlightInWindow;
  }

  letGo(delta: 1 | -1): void {
    if (this.#window !== null) this.#letGoInWindow = mathMax(0, this.#letGoInWindow + delta);
  }

  /** Of the calls in flight in the window, those the user's code let go of and the driver finishes by itself (StatementSink.letGo). */
  get callsLetGoInWindow(): number {
    return this.#letGoInWindow;
  }

  get timed(): boolean {
    return this.#window !== null && this.#window.keepsEvents;
  }

  /** Moves on at every `begin()`: wrappers hand values over for the first calls of each window (StatementSink.epoch). */
  get epoch(): number {
    return this.#epoch;
  }

  /** Calls handed to a driver and not settled yet. */
  get callsInFlight(): number {
    return this.#inFlight;
  }

  get windowOpen(): boolean {
    return this.#window !== null;
  }

  /** Opens a window: calls that settle from now on count in it. */
  begin(opts: Pick<SummarizeOptions, 'ignore'> = {}): void {
    this.#drivers.clear();
    this.#lastDriver = null;
    this.#inFlightInWindow = 0;
    this.#letGoInWindow = 0;
    this.#lateOpen = false;
    this.#lateLeft = 0;
    this.#recordedInWindow = 0;
    this.#epoch++;
    // A window replaced unread: its counters must stop counting into it.
    this.#window?.close();
    this.#window = new WindowTotals({ ...this.#opts, ...opts });
  }

  /** The window just closed left work running (a timer, a promise): calls that settle before the next window are its. */
  expectLate(): void {
    this.#lateOpen = true;
  }

  /**
   * Calls the last closed window had started that settled after it closed, and their first statements; taking them
   * starts the count again.
   */
  takeLate(): { calls: number; sql: string[] } {
    const late = this.#late;
    this.#late = { calls: 0, sql: [] };
    return late;
  }

  /** Closes the window and returns what it counted; `drivers` are those whose calls it saw. */
  end(): DriverWindow & { drivers: DriverName[] } {
    const window = this.#window ?? new WindowTotals(this.#opts);
    this.#window = null;
    this.#lateLeft = this.#inFlightInWindow;
    this.#lateOpen = false;
    this.#late = { calls: 0, sql: [] };
    return { ...window.finish(), drivers: [...this.#drivers] };
  }
}
