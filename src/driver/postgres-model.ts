import { countStatements } from '../sql/tokenizer';
import { bulkLoadOf } from '../sql/bulk-load';
import { classCounts, UNBOUNDED, type CallGroup, type Contribution, type Range } from './module';

/*
 * What node-postgres and postgres.js share on the server side: what pg_stat_statements counts for a group of calls
 * whose protocol each call went out with is known.
 */

/** Calls of a group by how they went out: a simple Query, the unnamed statement, a named (cached) statement. */
export interface ByProtocol {
  simple: number;
  unnamed: number;
  named: number;
}

/**
 * pg_stat_statements counts a COMMIT, ROLLBACK or SAVEPOINT re-executed from a named prepared statement only the first
 * time it runs on its connection (as a Query or unnamed, every time); every other statement at every execution.
 */
const COUNTED_ONCE_FROM_NAMED = new Set<string>(['commit', 'rollback', 'savepoint']);

/**
 * The server's counts for a group whose every call's protocol is known. `namedFirstRuns`: how many of its named
 * calls may be the first run of their statement on their connection (the named statements parsed in the window);
 * `notRun`: calls that run nothing (a postgres.js `describe()`).
 */
export function postgresServerCounts(group: CallGroup, n: ByProtocol, namedFirstRuns: Range, notRun = 0): Pick<Contribution, 'server' | 'serverWords'> {
  // A simple Query may carry several statements (`SELECT 1; SELECT 2`), each one counted; the other protocols one.
  const perQuery = n.simple > 0 ? countStatements(group.sql, 'postgres') : 1;
  if (n.named === 0 || !COUNTED_ONCE_FROM_NAMED.has(group.statementClass)) {
    const run = group.calls - notRun + n.simple * (perQuery - 1);
    const all = { min: run, max: run };
    const words =
      notRun === group.calls
        ? 'nothing run on the server'
        : perQuery > 1
          ? `a pg_stat_statements call for each of the ${perQuery} statements of a Query`
          : '1 pg_stat_statements call';
    // A text of several statements has its first one's class: the others' are not known, so no class is predicted.
    return { server: { statements: all, ...(perQuery === 1 ? classCounts(group, all) : {}) }, serverWords: words };
  }
  const everyTime = n.simple * perQuery + n.unnamed;
  const counted = { min: everyTime + namedFirstRuns.min, max: everyTime + namedFirstRuns.max };
  return {
    server: { statements: counted, ...classCounts(group, counted) },
    serverWords: `${everyTime > 0 ? 'as a Query or unnamed: 1 pg_stat_statements call; ' : ''}from a named statement: counted by pg_stat_statements only at its first execution on the connection`,
  };
}

/** The same fact for a group whose protocols are not known (events rebuilt from a report): a statement class that may be counted once. */
export function mayBeCountedOnce(statementClass: string): boolean {
  return COUNTED_ONCE_FROM_NAMED.has(statementClass);
}

/**
 * The messages a `COPY ... FROM STDIN` call sends after its Query: CopyData, as many as the code wrote (the driver
 * call does not say how many: the strategy's plan does), then CopyDone, or CopyFail when the code's stream failed.
 * A call that failed may have ended either way or neither. postgres.js (3.4) also sends a CopyFail after every
 * CopyDone (its Writable is destroyed once finished, and its destroy sends one), which the server ignores outside
 * COPY mode. Null for any other statement.
 */
export function copyInWire(group: CallGroup, copyFailAfterDone: boolean): { wire: Record<string, Range>; words: string } | null {
  if (group.kind === 'prepare' || bulkLoadOf(group.sql) !== 'copy-from-stdin') return null;
  const ok = Math.max(0, group.calls - group.errors);
  return {
    wire: {
      CopyData: { min: 0, max: UNBOUNDED },
      CopyDone: { min: ok, max: group.calls },
      CopyFail: copyFailAfterDone ? { min: ok, max: group.calls } : { min: 0, max: group.errors },
    },
    words: copyFailAfterDone ? 'CopyData per write, CopyDone, CopyFail' : 'CopyData per write, CopyDone (CopyFail if the stream failed)',
  };
}

/** A model's contribution with the COPY FROM STDIN messages added, where the group is one. */
export function withCopyIn(c: Contribution, group: CallGroup, copyFailAfterDone: boolean): Contribution {
  const copy = copyInWire(group, copyFailAfterDone);
  if (copy === null) return c;
  return { ...c, wire: { ...c.wire, ...copy.wire }, wireWords: `${c.wireWords} + ${copy.words}` };
}
