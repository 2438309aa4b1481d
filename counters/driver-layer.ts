import { truncateStatement } from '../containers/errors';
import { CallKindSchema, STATEMENT_CLASSES } from './events';
import type { CallKind, DriverLayer, StatementClass, StatementEvent, StatementSink } from './events';
import type { CallGroup } from './driver/module';

const DEFAULT_MAX_EVENTS = 200;
const SQL_SHOWN_CHARS = 200;

/** How much of the window's events a {@link DriverLayer} keeps. */
export interface SummarizeOptions {
  /** Events kept in `events`, first ones first; the rest only count in `eventsOmitted`. Default 200. */
  maxEvents?: number;
  /** Characters of SQL kept per event. Default 200. */
  maxSqlChars?: number;
}

function zeroes<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

/**
 * Totals over a window of driver events. Every kind and class is present (0 when unseen), so a report can
 * compare two layers key by key; `rowsAffected` sums only what drivers reported (null counts as nothing).
 */
export function summarizeDriverEvents(events: readonly StatementEvent[], opts: SummarizeOptions = {}): DriverLayer {
  const maxEvents = opts.maxEvents ?? DEFAULT_MAX_EVENTS;
  const maxSql = opts.maxSqlChars ?? SQL_SHOWN_CHARS;
  const byKind = zeroes<CallKind>(CallKindSchema.options);
  const byClass = zeroes<StatementClass>(STATEMENT_CLASSES);
  let parameterSets = 0;
  let bindValues = 0;
  let maxBindValuesPerCall = 0;
  let rowsAffected = 0;
  let errors = 0;
  for (const e of events) {
    byKind[e.kind]++;
    byClass[e.statementClass]++;
    parameterSets += e.parameterSets;
    bindValues += e.bindValues;
    if (e.bindValues > maxBindValuesPerCall) maxBindValuesPerCall = e.bindValues;
    if (e.rowsAffected !== null) rowsAffected += e.rowsAffected;
    if (e.error !== null) errors++;
  }
  const kept = events.slice(0, Math.max(0, maxEvents)).map((e) => ({ ...e, sql: truncateStatement(e.sql, maxSql) }));
  return {
    calls: events.length,
    byKind,
    byClass,
    parameterSets,
    bindValues,
    maxBindValuesPerCall,
    rowsAffected,
    errors,
    events: kept,
    eventsOmitted: events.length - kept.length,
  };
}

/**
 * The calls of a window grouped the way a driver model reasons about them: by kind, connection and SQL text, in the
 * order each group first appears (a driver prepares once per connection and text, at the first call that needs it).
 */
export function groupCalls(events: readonly StatementEvent[]): CallGroup[] {
  const groups = new Map<string, CallGroup>();
  for (const e of events) {
    const key = `${e.kind}\u0000${e.connectionId ?? '?'}\u0000${e.sql}`;
    let g = groups.get(key);
    if (!g) {
      g = { kind: e.kind, sql: e.sql, statementClass: e.statementClass, connectionId: e.connectionId, calls: 0, parameterSets: 0, callsWithParameterSets: 0, callsWithValues: 0 };
      groups.set(key, g);
    }
    g.calls += 1;
    g.parameterSets += e.parameterSets;
    if (e.parameterSets > 0) g.callsWithParameterSets += 1;
    if (e.bindValues > 0) g.callsWithValues += 1;
  }
  return [...groups.values()];
}

/** A position in a {@link DriverTally}'s event list, from {@link DriverTally.mark}. */
export interface TallyMark {
  readonly index: number;
}

/**
 * A sink that keeps every event in order, with windows: take a `mark()` after warm-up and connection set-up,
 * run the workload, then `since(mark)` holds only the workload's calls.
 */
export class DriverTally implements StatementSink {
  readonly #events: StatementEvent[] = [];

  record(event: StatementEvent): void {
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
