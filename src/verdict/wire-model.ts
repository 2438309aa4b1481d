import { rangeText } from '../driver/module';
import { wireModelOf } from '../server';
import type { ServerLayer } from '../server/types';
import type { WireCounts } from '../wire/types';

/** What the wire model predicts for the server and how the layers line up, in the shape the verdict reads. */
export interface WireReconciliation {
  reconciliation: string[];
  discrepancies: string[];
  /** The most statements the wire's requests explain: what `beyondWindow` weighs the server's statement count with. */
  explainedStatements: number | undefined;
}

/**
 * The wire as a model of its own, for a window whose work no counted driver explains (a client in another language,
 * an ORM's own pool): what the server's answers said it ran, statement by statement, against what the server's
 * counters say, both ways. A server that did less than the wire carried is a discrepancy too, unless the model
 * explains it (pg_stat_statements skipping a utility statement re-run from a named statement).
 */
export function reconcileWire(wire: WireCounts, server: ServerLayer | null): WireReconciliation {
  const s = wire.statements;
  if (!s) {
    return {
      reconciliation: ['the wire layer has no statement-by-statement counts: the server is not compared with it'],
      discrepancies: [],
      explainedStatements: undefined,
    };
  }
  const lines: string[] = [];
  const repeats =
    s.namedRepeats > 0
      ? `, of which ${s.namedRepeats} utility statement(s) re-run from a named prepared statement (${words(s.namedRepeatsByClass)}), which pg_stat_statements counts only at their first run on the connection`
      : '';
  lines.push(
    `wire model: ${s.completed} statement(s) finished (${words(s.completedByClass) || 'none'})${s.failed > 0 ? `, ${s.failed} failed (${words(s.failedByClass)})` : ''}${repeats}; rows ${s.rowsInserted} inserted, ${s.rowsUpdated} updated, ${s.rowsDeleted} deleted`,
  );
  if (s.connectStatements > 0) {
    lines.push(`connection set-up: ${s.connectStatements} statement(s) the clients ran as they connected, counted with the rest: ${s.connectTexts.join('; ')}`);
  }
  const gaps: string[] = [];
  if (s.textsUnread > 0)
    gaps.push(`${s.textsUnread} request text(s) longer than the proxy keeps: their statements are counted from the answers, their classes may be unknown`);
  if (s.rowsUnsplit > 0)
    gaps.push(
      `${s.rowsUnsplit} statement(s) (MERGE, an upsert, bulk unit results) changed rows the answers do not split into inserted, updated and deleted: rows are not compared`,
    );
  if (s.suspended > 0) gaps.push(`${s.suspended} Execute(s) suspended by a row limit: their statements count on the server when they end`);
  const model = wireModelOf(wire.protocol);
  const explained = model.explained(wire, s);
  if (!server) return { reconciliation: [...lines, ...gaps.map((g) => `not modelled: ${g}`)], discrepancies: [], explainedStatements: explained };

  const expectations = model.expectations(wire, s, server);
  const parts: string[] = [];
  const discrepancies: string[] = [];
  for (const e of expectations) {
    if (e.actual === null || e.actual === undefined || !e.range) continue;
    // Texts not read whole may hide statements of any class: only the total is still bounded.
    const range = s.textsUnread > 0 && !e.what.includes('(statements)') ? null : e.range;
    if (!range) continue;
    parts.push(`${e.what} ${e.actual} (wire: ${rangeText(range)})`);
    if (e.actual < range.min || e.actual > range.max) {
      discrepancies.push(
        `server layer: ${e.what} ${e.actual}, the wire's answers account for ${rangeText(range)}: ${
          e.actual > range.max
            ? `${e.actual - range.max} more than the statements the window's connections ran (a client around the proxy, a trigger or stored code)`
            : `${range.min - e.actual} fewer than the statements the window's connections ran: the server did not count all of the wire's work (statistics not settled, entries evicted, or a counting rule the wire model does not know)`
        }`,
      );
    }
  }
  if (parts.length > 0) lines.push(`server against the wire: ${parts.join(', ')}`);
  return { reconciliation: [...lines, ...gaps.map((g) => `not modelled: ${g}`)], discrepancies, explainedStatements: explained };
}

function words(record: Record<string, number>): string {
  return Object.entries(record)
    .filter(([, n]) => n !== 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
}
