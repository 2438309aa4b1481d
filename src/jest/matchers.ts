import type { Tally } from '../capture/tally';
import type { VerdictKind } from '../verdict/types';
import { COUNT_SNAPSHOT_FORMAT, COUNT_SNAPSHOT_VERSION, countSnapshotOf, countedVia, storedSnapshotFormat, type CountSnapshotOptions } from './count-snapshot';
import { checkCounts, countSpecProblems, describeChecks, describeEvidence, type Comparison, type CountSpec } from './expectations';
import { describeRepeatedShapes, judgeRepeatedShapes, type RepeatedShapesOptions } from './repeated-shapes';
import {
  describePerRow,
  describeUnindexed,
  describeWorkChecks,
  judgeServerWork,
  judgeUseIndexes,
  judgeWriteInBatches,
  type ServerWorkBudget,
  type ServerWorkScope,
  type UseIndexesOptions,
  type WriteInBatchesOptions,
} from './server-work';

/**
 * What a matcher is called with as `this`, in Jest and in Vitest alike: only `isNot` is read here; the rest is
 * handed, untouched, to the framework's own snapshot matcher.
 */
export interface SqltallyMatcherContext {
  isNot?: boolean;
}

/** What every matcher returns; `actual`/`expected` let the framework draw a diff (snapshots). */
export interface SqltallyMatcherResult {
  pass: boolean;
  message: () => string;
  actual?: unknown;
  expected?: unknown;
}

/**
 * The framework's own snapshot matcher, called with the matcher's `this`: jest-snapshot's `toMatchSnapshot` in
 * Jest, `Snapshots.toMatchSnapshot` from 'vitest' in Vitest. It stores, compares and updates (`-u`, `--ci`).
 */
export type SnapshotMatcher = (this: unknown, received: unknown, hint?: string) => SqltallyMatcherResult;

/** The matchers' signatures, for a framework's type augmentation (`R` is what an assertion returns). */
export interface SqltallyMatchers<R> {
  /** Exact counts per layer: `expect(tally).toHaveCounts({ driver: { calls: 1 }, server: { rowsInserted: 5000 } })`. */
  toHaveCounts(spec: CountSpec): R;
  /** Upper bounds per layer, for "no more than N statements" guards. */
  toHaveCountsAtMost(spec: CountSpec): R;
  /** The verdict kind, with its reason shown on failure. */
  toHaveVerdict(kind: VerdictKind): R;
  /**
   * The deterministic counts and statement shapes, against the test file's snapshot: written on the first run,
   * compared exactly afterwards, updated with `-u`, missing fails under `--ci`. `{ serverWork: true }` adds the
   * server-work figures the server gives exactly, and names the ones it cannot give.
   */
  toMatchCountSnapshot(hint?: string): R;
  toMatchCountSnapshot(options: CountSnapshotOptions, hint?: string): R;
  /** No statement shape ran `threshold` (default 2) or more times: N+1 loops and duplicates fail, with their lines. */
  toHaveNoRepeatedShapes(options?: RepeatedShapesOptions): R;
  /**
   * The window's numbers showed nothing about the code worth a look (`tally.findings` is empty): a mariadb batch the
   * connector sent as one command per row, work of a previous window that ran after it ended. Each is listed on failure.
   */
  toHaveNoFindings(): R;
  /**
   * What the server did, within budget: `toHaveServerWork({ rowsExamined: { max: 100 }, fullScans: 0 })` for the
   * window, `{ shape }` or `{ eachShape: true }` for statements. A figure the backend cannot give fails, with why.
   */
  toHaveServerWork(budget: ServerWorkBudget, scope?: ServerWorkScope): R;
  /** No statement scanned a table of `minTableRows` rows or more without an index (default 0: none at all). */
  toUseIndexes(options?: UseIndexesOptions): R;
  /** No INSERT, UPDATE or DELETE shape ran once per row (`threshold`, default 2, single-row calls or more). */
  toWriteInBatches(options?: WriteInBatchesOptions): R;
}

function isTally(value: unknown): value is Tally {
  return !!value && typeof value === 'object' && 'layers' in value && 'verdict' in value && 'backend' in value;
}

/**
 * A check that cannot be made fails whether or not `.not` was used: `pass` equal to `isNot` is a failure in both
 * Jest and Vitest, where throwing would lose the message formatting and Vitest's `expect.soft`.
 */
function cannotCheck(context: SqltallyMatcherContext | undefined, name: string, why: string, evidence?: Tally): SqltallyMatcherResult {
  const negated = context?.isNot === true;
  return {
    pass: negated,
    message: () => `${name}: cannot check, so this fails with and without .not: ${why}${evidence ? `\n\n${describeEvidence(evidence)}` : ''}`,
  };
}

function notATally(context: SqltallyMatcherContext | undefined, name: string, received: unknown): SqltallyMatcherResult {
  const what = received === null ? 'null' : Array.isArray(received) ? 'an array' : typeof received;
  return cannotCheck(context, name, `expected a sqltally Tally (from capture()), received ${what}`);
}

// When the captured code itself threw, the counts are beside the point: show that error first.
function workloadFailure(context: SqltallyMatcherContext | undefined, name: string, tally: Tally): SqltallyMatcherResult | null {
  const e = tally.workloadError;
  if (!e) return null;
  return cannotCheck(
    context,
    name,
    `the captured code threw, so its counts are not checked.\n  phase ${e.phase}: ${e.message}${e.statement ? `\n  statement: ${e.statement}` : ''}`,
    tally,
  );
}

function countsMatcher(name: string, comparison: Comparison) {
  return function (this: SqltallyMatcherContext | undefined, received: unknown, spec: CountSpec): SqltallyMatcherResult {
    if (!isTally(received)) return notATally(this, name, received);
    const failed = workloadFailure(this, name, received);
    if (failed) return failed;
    const problems = countSpecProblems(spec ?? {});
    if (problems) return cannotCheck(this, name, `the spec is not a count spec: ${problems}`);
    const checks = checkCounts(received, spec ?? {}, comparison);
    if (checks.length === 0) return cannotCheck(this, name, 'the spec names no count to check');
    const blocked = checks.filter((c) => c.blocked !== null);
    if (blocked.length > 0) {
      return cannotCheck(this, name, `${blocked.length} of the counts cannot be read\n${describeChecks(checks, comparison)}`, received);
    }
    const pass = checks.every((c) => c.ok);
    const backend = `${received.backend.id} (${received.backend.serverVersion}) via ${countedVia(received, { paths: true })}`;
    return {
      pass,
      message: () =>
        `${name} on ${backend}: ${pass ? 'all counts matched, but .not was used' : 'counts differ'}\n` +
        `${describeChecks(checks, comparison)}\n\n${describeEvidence(received)}`,
    };
  };
}

const VERDICT_KINDS: readonly string[] = ['assert', 'report', 'incomplete'];
const SNAPSHOT_OPTIONS: readonly string[] = ['serverWork'];

/** `toMatchCountSnapshot(hint?)` or `toMatchCountSnapshot(options, hint?)`, checked. */
function snapshotArguments(
  first: unknown,
  second: unknown,
): { ok: true; options: CountSnapshotOptions; hint: string | undefined } | { ok: false; reason: string } {
  const hintProblem = (h: unknown): string | null => (h === undefined || typeof h === 'string' ? null : `the hint must be a string, received ${typeof h}`);
  if (first === undefined || typeof first === 'string') {
    if (second !== undefined) return { ok: false, reason: 'a hint comes last: toMatchCountSnapshot(hint) or toMatchCountSnapshot({ serverWork }, hint)' };
    return { ok: true, options: {}, hint: first };
  }
  if (first === null || typeof first !== 'object' || Array.isArray(first)) {
    return {
      ok: false,
      reason: `the first argument must be a hint (string) or options { serverWork?: boolean }, received ${first === null ? 'null' : Array.isArray(first) ? 'an array' : typeof first}`,
    };
  }
  const unknown = Object.keys(first).filter((k) => !SNAPSHOT_OPTIONS.includes(k));
  if (unknown.length > 0)
    return { ok: false, reason: `unknown option ${unknown.map((k) => JSON.stringify(k)).join(', ')}: the known options are ${SNAPSHOT_OPTIONS.join(', ')}` };
  const serverWork = (first as { serverWork?: unknown }).serverWork;
  if (serverWork !== undefined && typeof serverWork !== 'boolean') return { ok: false, reason: `serverWork must be a boolean, received ${typeof serverWork}` };
  const problem = hintProblem(second);
  if (problem) return { ok: false, reason: problem };
  return { ok: true, options: serverWork === undefined ? {} : { serverWork }, hint: second as string | undefined };
}
const SNAPSHOT_NAME = 'toMatchCountSnapshot';

/** jest-snapshot, loaded only when a count snapshot is taken under Jest, so Vitest users never need it. */
function jestSnapshotMatcher(): SnapshotMatcher {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('jest-snapshot') as { toMatchSnapshot: SnapshotMatcher }).toMatchSnapshot;
}

/**
 * The matchers, wired to a framework's snapshot matcher. `snapshotMatcher` is called lazily, on the first
 * `toMatchCountSnapshot`; give one that throws a clear error where snapshots are not supported.
 */
export function createSqltallyMatchers(snapshotMatcher: () => SnapshotMatcher = jestSnapshotMatcher) {
  return {
    toHaveCounts: countsMatcher('toHaveCounts', 'exact'),
    toHaveCountsAtMost: countsMatcher('toHaveCountsAtMost', 'atMost'),

    toHaveVerdict(this: SqltallyMatcherContext | undefined, received: unknown, kind: VerdictKind): SqltallyMatcherResult {
      const name = 'toHaveVerdict';
      if (!isTally(received)) return notATally(this, name, received);
      if (!VERDICT_KINDS.includes(kind)) return cannotCheck(this, name, `${JSON.stringify(kind)} is not a verdict kind: ${VERDICT_KINDS.join(', ')}`);
      const failed = workloadFailure(this, name, received);
      if (failed) return failed;
      const pass = received.verdict.kind === kind;
      return {
        pass,
        message: () =>
          `${name}: expected ${this?.isNot ? 'not ' : ''}${kind}, got ${received.verdict.kind}: ${received.verdict.reason}\n\n${describeEvidence(received)}`,
      };
    },

    toMatchCountSnapshot(
      this: SqltallyMatcherContext | undefined,
      received: unknown,
      optionsOrHint?: unknown,
      hintAfterOptions?: unknown,
    ): SqltallyMatcherResult {
      if (!isTally(received)) return notATally(this, SNAPSHOT_NAME, received);
      const args = snapshotArguments(optionsOrHint, hintAfterOptions);
      if (!args.ok) return cannotCheck(this, SNAPSHOT_NAME, args.reason);
      const { options, hint } = args;
      const failed = workloadFailure(this, SNAPSHOT_NAME, received);
      if (failed) return failed;
      const snapshot = countSnapshotOf(received, options);
      if (!snapshot.ok) return cannotCheck(this, SNAPSHOT_NAME, snapshot.reason, received);
      if (this?.isNot) return cannotCheck(this, SNAPSHOT_NAME, 'a snapshot cannot be matched with .not: there is no "any other counts" to store');
      let match: SnapshotMatcher;
      try {
        match = snapshotMatcher();
      } catch (err) {
        return cannotCheck(this, SNAPSHOT_NAME, `no snapshot machinery: ${err instanceof Error ? err.message : String(err)}`);
      }
      // jest-snapshot reads its arguments by count: an explicit undefined would be taken for "properties".
      const result = hint === undefined ? match.call(this, snapshot.text) : match.call(this, snapshot.text, hint);
      if (result.pass) return result;
      if (result.expected === undefined) {
        return {
          ...result,
          message: () =>
            `${SNAPSHOT_NAME}: no snapshot is stored for this test, and this run writes none (--ci, or CI set): run the tests once outside CI, or with -u, and commit the snapshot\n\n${result.message()}`,
        };
      }
      const stored = storedSnapshotFormat(result.expected);
      if (stored !== COUNT_SNAPSHOT_VERSION) {
        const found =
          stored === null ? 'is not a sqltally count snapshot (no "sqltally-count-snapshot" line)' : `was written as sqltally-count-snapshot ${stored}`;
        return {
          ...result,
          message: () =>
            `${SNAPSHOT_NAME}: the stored snapshot ${found}; this sqltally reads and writes ${COUNT_SNAPSHOT_FORMAT}, so the ` +
            `two cannot be compared line by line. Check the counts below, then rewrite the snapshot with \`jest -u\` ` +
            `(or \`vitest -u\`).\n\n${result.message()}`,
        };
      }
      return {
        ...result,
        message: () =>
          `${SNAPSHOT_NAME}: the counts differ from the snapshot (if the change is meant, rewrite it with -u: \`jest -u\`, \`vitest -u\`)\n\n${result.message()}`,
      };
    },

    toHaveNoRepeatedShapes(this: SqltallyMatcherContext | undefined, received: unknown, options?: RepeatedShapesOptions): SqltallyMatcherResult {
      const name = 'toHaveNoRepeatedShapes';
      if (!isTally(received)) return notATally(this, name, received);
      const failed = workloadFailure(this, name, received);
      if (failed) return failed;
      const judgement = judgeRepeatedShapes(received, options);
      if (!judgement.ok) return cannotCheck(this, name, judgement.reason);
      const count = judgement.repeated.length;
      const pass = count === 0;
      const details = describeRepeatedShapes(judgement);
      return {
        pass,
        message: () =>
          pass
            ? `${name}: no shape ran ${judgement.threshold} or more times, but .not was used (${judgement.judged.length} shapes judged)${details ? `\n${details}` : ''}`
            : `${name}: ${count} shape${count === 1 ? '' : 's'} ran ${judgement.threshold} or more times in this window\n${details}`,
      };
    },

    toHaveNoFindings(this: SqltallyMatcherContext | undefined, received: unknown): SqltallyMatcherResult {
      const name = 'toHaveNoFindings';
      if (!isTally(received)) return notATally(this, name, received);
      const failed = workloadFailure(this, name, received);
      if (failed) return failed;
      // A report.json of an older sqltally has no findings: absent is none, not unknown.
      const findings = received.findings ?? [];
      const pass = findings.length === 0;
      return {
        pass,
        message: () =>
          pass
            ? `${name}: the window has no findings, but .not was used (verdict ${received.verdict.kind})`
            : `${name}: ${findings.length} finding${findings.length === 1 ? '' : 's'} in this window (verdict ${received.verdict.kind})\n${findings.map((f) => `  - ${f.kind}: ${f.message}`).join('\n')}`,
      };
    },
    ...serverWorkMatchers(),
  };
}

function serverWorkMatchers() {
  return {
    toHaveServerWork(this: SqltallyMatcherContext | undefined, received: unknown, budget: ServerWorkBudget, scope?: ServerWorkScope): SqltallyMatcherResult {
      const name = 'toHaveServerWork';
      if (!isTally(received)) return notATally(this, name, received);
      const failed = workloadFailure(this, name, received);
      if (failed) return failed;
      const judged = judgeServerWork(received, budget, scope);
      if (!judged.ok) return cannotCheck(this, name, judged.reason);
      const checks = judged.value;
      const blocked = checks.filter((c) => c.blocked !== null);
      if (blocked.length > 0) {
        return cannotCheck(this, name, `${blocked.length} of the figures cannot be known on ${received.backend.id}\n${describeWorkChecks(checks)}`);
      }
      const pass = checks.every((c) => c.ok);
      return {
        pass,
        message: () =>
          `${name} on ${received.backend.id} (${received.backend.serverVersion}): ${pass ? 'every figure within budget, but .not was used' : 'server work over budget'}\n${describeWorkChecks(checks)}`,
      };
    },

    toUseIndexes(this: SqltallyMatcherContext | undefined, received: unknown, options?: UseIndexesOptions): SqltallyMatcherResult {
      const name = 'toUseIndexes';
      if (!isTally(received)) return notATally(this, name, received);
      const failed = workloadFailure(this, name, received);
      if (failed) return failed;
      const judged = judgeUseIndexes(received, options);
      if (!judged.ok) return cannotCheck(this, name, judged.reason);
      const { offenders, minTableRows } = judged.value;
      const pass = offenders.length === 0;
      return {
        pass,
        message: () =>
          pass
            ? `${name}: no scan without an index of a table of ${minTableRows} rows or more, but .not was used (${judged.value.judged} smaller scan(s) without an index)`
            : `${name} on ${received.backend.id}: ${offenders.length} scan(s) without an index of a table of ${minTableRows} rows or more\n${describeUnindexed(offenders)}`,
      };
    },

    toWriteInBatches(this: SqltallyMatcherContext | undefined, received: unknown, options?: WriteInBatchesOptions): SqltallyMatcherResult {
      const name = 'toWriteInBatches';
      if (!isTally(received)) return notATally(this, name, received);
      const failed = workloadFailure(this, name, received);
      if (failed) return failed;
      const judged = judgeWriteInBatches(received, options);
      if (!judged.ok) return cannotCheck(this, name, judged.reason);
      const { perRow, threshold, writes } = judged.value;
      const pass = perRow.length === 0;
      return {
        pass,
        message: () =>
          pass
            ? `${name}: none of ${writes} write shape(s) ran once per row ${threshold} or more times, but .not was used`
            : `${name}: ${perRow.length} write shape(s) ran once per row; send the rows in one statement or batch\n${describePerRow(perRow)}`,
      };
    },
  };
}

/** The matchers for Jest: `expect.extend(sqltallyMatchers)`. Count snapshots go through jest-snapshot. */
export const sqltallyMatchers = createSqltallyMatchers();

/** The part of `expect` that registering needs; Jest's and Vitest's both fit. */
export interface ExpectWithExtend {
  extend(matchers: ReturnType<typeof createSqltallyMatchers>): void;
}

/** Registers the matchers on Jest's `expect` (the global one by default), from a setup file or a test. */
export function installSqltallyMatchers(expectFn?: ExpectWithExtend): void {
  const target = expectFn ?? (globalThis as { expect?: ExpectWithExtend }).expect;
  if (!target) throw new Error('installSqltallyMatchers: no expect given and no global expect: pass the one your test framework exports');
  target.extend(sqltallyMatchers);
}

declare global {
  // Jest's types, for @types/jest users; without them this declares an unused namespace and needs nothing.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace jest {
    // eslint-disable-next-line @typescript-eslint/no-empty-object-type
    interface Matchers<R> extends SqltallyMatchers<R> {}
  }
}
