import { UNBOUNDED, type Range } from '../driver/module';
import type { WireCounts, WireStatements } from '../wire/types';
import type { ServerLayer } from './types';

/** One counter the wire's statements predict: its words, what the server said, and the range the wire allows. */
export interface WireExpectation {
  what: string;
  actual: number | null | undefined;
  range: Range | null;
}

/**
 * What one protocol's statements, as the wire proxy saw them answered, predict for the server's counters: declared by
 * the probe sources of the protocol's servers (they know the counters), asked by the verdict's wire model.
 */
export interface WireModel {
  /** The most statements the wire's requests explain: what the verdict weighs the server's statement count with. */
  explained(wire: WireCounts, s: WireStatements): number;
  expectations(wire: WireCounts, s: WireStatements, server: ServerLayer): WireExpectation[];
}

export const exact = (n: number): Range => ({ min: n, max: n });
export const between = (min: number, max: number): Range => ({ min, max });
export const widen = (r: Range, by: number): Range => ({ min: r.min, max: r.max + by });
export const countOf = (record: Record<string, number>, key: string): number => record[key] ?? 0;

/** Statements of these classes write rows the wire reports with no count (DDL that copies, CALL, LOAD DATA, DO). */
function otherWriters(s: WireStatements): number {
  return countOf(s.completedByClass, 'ddl') + countOf(s.completedByClass, 'other');
}

/** Rows changed, from the answers: exact unless a statement failed part-way or something wrote rows no answer counts. */
export function rowsRange(rows: number, s: WireStatements): Range | null {
  if (s.rowsUnsplit > 0) return null;
  return s.failed > 0 || otherWriters(s) > 0 ? { min: rows, max: UNBOUNDED } : exact(rows);
}
