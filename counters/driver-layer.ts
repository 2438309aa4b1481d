import { truncateStatement } from '../containers/errors';
import type { CallGroup } from './driver/module';
import type { DriverName } from './driver/names';
import { CallKindSchema, STATEMENT_CLASSES } from './events';
import type { CallKind, CallShape, DriverLayer, StatementClass, StatementEvent, StatementSink } from './events';

const DEFAULT_MAX_EVENTS = 200;
const SQL_SHOWN_CHARS = 200;
/**
 * Distinct SQL texts a window groups calls by. Beyond it (a workload of unique texts, literals inlined) the calls
 * still count in every total, and the driver model is told its groups are incomplete.
 */
const DEFAULT_MAX_TEXTS = 10_000;

/** How much of the window's calls a {@link DriverLayer} keeps. */
export interface SummarizeOptions {
  /** Events kept in `events`, first ones first; the rest only count in `eventsOmitted`. Default 200. */
  maxEvents?: number;
  /** Characters of SQL kept per event. Default 200. */
  maxSqlChars?: number;
  /** Distinct SQL texts grouped for the driver model; default 10000. */
  maxTexts?: number;
}

function zeroes<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

function errorMessage(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(error);
}

/** Integer ns from a `performance.now()` reading (ms since the process's time origin). */
function toNs(ms: number): number {
  return Math.max(0, Math.round(ms * 1e6));
}

/** Rows the INSERT calls of a group said they inserted, for the model's row prediction. */
interface GroupRows {
  rows: number;
  /** False once an INSERT call of the group settled without a row count. */
  known: boolean;
}

type Group = CallGroup & GroupRows;

/** What a closed window holds: the layer for the report, and the groups the driver model reasons about. */
export interface DriverWindow {
  layer: DriverLayer;
  /** By kind, connection and SQL text, in the order each first appeared. */
  groups: CallGroup[];
  /** Rows the window's INSERT calls reported, or null when some INSERT call did not say. */
  insertedRows: number | null;
  /** Why `groups` does not cover every call (too many distinct texts), or null. */
  groupsIncomplete: string | null;
}

/**
 * Totals of one window, built call by call in constant time per call: counters by kind and class, a capped list of
 * events for the report, and groups by kind, connection and text for the driver model (capped too). Nothing grows
 * with the number of calls beyond those caps, so a window of a million calls costs what a window of a thousand does.
 */
export class WindowTotals {
  readonly #maxEvents: number;
  readonly #maxSql: number;
  readonly #maxTexts: number;
  readonly #byKind = zeroes<CallKind>(CallKindSchema.options);
  readonly #byClass = zeroes<StatementClass>(STATEMENT_CLASSES);
  readonly #events: StatementEvent[] = [];
  // Keyed by text, then by kind and connection: a map per text keeps the per-call lookup a single hash of the text.
  readonly #texts = new Map<string, Group[]>();
  #textsOmitted = 0;
  #calls = 0;
  #parameterSets = 0;
  #bindValues = 0;
  #maxBindValuesPerCall = 0;
  #rowsAffected = 0;
  #errors = 0;
  #insertedRows = 0;
  #insertedRowsKnown = true;

  constructor(opts: SummarizeOptions = {}) {
    this.#maxEvents = Math.max(0, opts.maxEvents ?? DEFAULT_MAX_EVENTS);
    this.#maxSql = opts.maxSqlChars ?? SQL_SHOWN_CHARS;
    this.#maxTexts = opts.maxTexts ?? DEFAULT_MAX_TEXTS;
  }

  add(
    driver: DriverName,
    shape: CallShape,
    startMs: number,
    endMs: number,
    rowsAffected: number | null,
    error: unknown,
    connectionId: number | null,
  ): void {
    this.#calls++;
    const kind = shape.kind;
    this.#byKind[kind]++;
    // A prepare is not a statement executed: statement classes count executions only, the same on every driver.
    if (kind !== 'prepare') this.#byClass[shape.statementClass]++;
    this.#parameterSets += shape.parameterSets;
    const bind = shape.bindValues;
    this.#bindValues += bind;
    if (bind > this.#maxBindValuesPerCall) this.#maxBindValuesPerCall = bind;
    const failed = error !== null && error !== undefined;
    if (failed) this.#errors++;
    else if (rowsAffected !== null) this.#rowsAffected += rowsAffected;
    if (shape.statementClass === 'insert' && kind !== 'prepare' && !failed) {
      if (rowsAffected !== null) this.#insertedRows += rowsAffected;
      else this.#insertedRowsKnown = false;
    }
    this.#group(shape, connectionId);
    if (this.#events.length < this.#maxEvents) {
      this.#events.push({
        driver,
        method: shape.method,
        kind,
        sql: truncateStatement(shape.sql, this.#maxSql),
        statementClass: shape.statementClass,
        bindValues: bind,
        parameterSets: shape.parameterSets,
        rowsAffected: failed ? null : rowsAffected,
        startNs: toNs(startMs),
        durationNs: toNs(endMs - startMs),
        error: failed ? truncateStatement(errorMessage(error), this.#maxSql * 2) : null,
        connectionId,
      });
    }
  }

  /** Whether the next call's event will be kept (and so needs its times). */
  get keepsEvents(): boolean {
    return this.#events.length < this.#maxEvents;
  }

  /** Adds an event already built (tests, tools that hold event lists). */
  addEvent(e: StatementEvent): void {
    const startMs = e.startNs / 1e6;
    this.add(e.driver, e, startMs, startMs + e.durationNs / 1e6, e.rowsAffected, e.error, e.connectionId);
  }

  #group(shape: CallShape, connectionId: number | null): void {
    let groups = this.#texts.get(shape.sql);
    if (!groups) {
      if (this.#texts.size >= this.#maxTexts) {
        this.#textsOmitted++;
        return;
      }
      groups = [];
      this.#texts.set(shape.sql, groups);
    }
    let group: Group | undefined;
    for (const g of groups) {
      if (g.kind === shape.kind && g.connectionId === connectionId) {
        group = g;
        break;
      }
    }
    if (!group) {
      group = {
        kind: shape.kind,
        sql: shape.sql,
        statementClass: shape.statementClass,
        connectionId,
        calls: 0,
        parameterSets: 0,
        callsWithParameterSets: 0,
        callsWithValues: 0,
        rows: 0,
        known: true,
      };
      groups.push(group);
    }
    group.calls++;
    group.parameterSets += shape.parameterSets;
    if (shape.parameterSets > 0) group.callsWithParameterSets++;
    if (shape.bindValues > 0) group.callsWithValues++;
  }

  finish(): DriverWindow {
    const groups: CallGroup[] = [];
    for (const list of this.#texts.values()) {
      for (const g of list) {
        const { rows: _rows, known: _known, ...group } = g;
        groups.push(group);
      }
    }
    // Text by text in first-seen order, and within a text kind by kind: the order a driver prepares in.
    return {
      layer: {
        calls: this.#calls,
        byKind: { ...this.#byKind },
        byClass: { ...this.#byClass },
        parameterSets: this.#parameterSets,
        bindValues: this.#bindValues,
        maxBindValuesPerCall: this.#maxBindValuesPerCall,
        rowsAffected: this.#rowsAffected,
        errors: this.#errors,
        events: this.#events.slice(),
        eventsOmitted: this.#calls - this.#events.length,
      },
      groups,
      insertedRows: this.#insertedRowsKnown ? this.#insertedRows : null,
      groupsIncomplete:
        this.#textsOmitted > 0
          ? `${this.#textsOmitted} calls had SQL texts beyond the first ${this.#maxTexts} distinct ones of the window: they count in every total but the driver model did not see them`
          : null,
    };
  }
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
    this.#maxSql = opts.maxSqlChars ?? Number.MAX_SAFE_INTEGER;
  }

  record(driver: DriverName, shape: CallShape, startMs: number, endMs: number, rowsAffected: number | null, error: unknown, connectionId: number | null): void {
    const failed = error !== null && error !== undefined;
    this.#events.push({
      driver,
      method: shape.method,
      kind: shape.kind,
      sql: this.#maxSql === Number.MAX_SAFE_INTEGER ? shape.sql : truncateStatement(shape.sql, this.#maxSql),
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
 * The sink of a capture session: every object the session counts records here, and only calls that settle while a
 * window is open are counted, into that window's {@link WindowTotals}. It also knows how many calls are in flight,
 * so a window can tell that the user's code returned with a query still running.
 */
export class DriverRecorder implements StatementSink {
  readonly #opts: SummarizeOptions;
  #window: WindowTotals | null = null;
  #inFlight = 0;
  #inFlightInWindow = 0;
  /** Drivers that recorded calls in the current window. */
  readonly #drivers = new Set<DriverName>();

  constructor(opts: SummarizeOptions = {}) {
    this.#opts = opts;
  }

  record(driver: DriverName, shape: CallShape, startMs: number, endMs: number, rowsAffected: number | null, error: unknown, connectionId: number | null): void {
    const window = this.#window;
    if (window === null) return;
    this.#drivers.add(driver);
    window.add(driver, shape, startMs, endMs, rowsAffected, error, connectionId);
  }

  inFlight(delta: 1 | -1): void {
    this.#inFlight += delta;
    // Calls started in the window and not settled; a call from before the window that settles in it is not one
    // (the count never goes below 0 for it).
    if (this.#window !== null) this.#inFlightInWindow = Math.max(0, this.#inFlightInWindow + delta);
  }

  /** Calls started while the current (or last) window was open and not settled when it closed. */
  get callsInFlightInWindow(): number {
    return this.#inFlightInWindow;
  }

  get timed(): boolean {
    return this.#window !== null && this.#window.keepsEvents;
  }

  /** Calls handed to a driver and not settled yet. */
  get callsInFlight(): number {
    return this.#inFlight;
  }

  get windowOpen(): boolean {
    return this.#window !== null;
  }

  /** Opens a window: calls that settle from now on count in it. */
  begin(): void {
    this.#drivers.clear();
    this.#inFlightInWindow = 0;
    this.#window = new WindowTotals(this.#opts);
  }

  /** Closes the window and returns what it counted; `drivers` are those whose calls it saw. */
  end(): DriverWindow & { drivers: DriverName[] } {
    const window = this.#window ?? new WindowTotals(this.#opts);
    this.#window = null;
    return { ...window.finish(), drivers: [...this.#drivers] };
  }
}
