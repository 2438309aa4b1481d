import type { Tally } from '../capture/tally';
import type { VerdictKind } from '../verdict/types';
import { checkCounts, describeChecks, describeEvidence, type Comparison, type CountSpec } from './expectations';

type MatcherResult = { pass: boolean; message: () => string };

function isTally(value: unknown): value is Tally {
  return !!value && typeof value === 'object' && 'layers' in value && 'verdict' in value && 'backend' in value;
}

function notATally(name: string, received: unknown): MatcherResult {
  return {
    pass: false,
    message: () => `${name}: expected a sqltally Tally (from capture()), received ${typeof received}`,
  };
}

// When the captured code itself threw, the counts are beside the point: show that error first.
function workloadFailure(name: string, tally: Tally): MatcherResult | null {
  if (!tally.workloadError) return null;
  const e = tally.workloadError;
  return {
    pass: false,
    message: () =>
      `${name}: the captured code threw, so its counts are not checked.\n` +
      `  phase ${e.phase}: ${e.message}${e.statement ? `\n  statement: ${e.statement}` : ''}\n\n${describeEvidence(tally)}`,
  };
}

function countsMatcher(name: string, comparison: Comparison) {
  return function (this: jest.MatcherContext, received: unknown, spec: CountSpec): MatcherResult {
    if (!isTally(received)) return notATally(name, received);
    const failed = workloadFailure(name, received);
    if (failed) return failed;
    const checks = checkCounts(received, spec, comparison);
    if (checks.length === 0) {
      return { pass: false, message: () => `${name}: the spec names no count to check` };
    }
    const pass = checks.every((c) => c.ok);
    const backend = `${received.backend.id} (${received.backend.serverVersion}) via ${received.driver}`;
    return {
      pass,
      message: () =>
        `${name} on ${backend}: ${pass ? 'all counts matched, but .not was used' : 'counts differ'}\n` +
        `${describeChecks(checks, comparison)}\n\n${describeEvidence(received)}`,
    };
  };
}

export const sqltallyMatchers = {
  /** Exact counts per layer: `expect(tally).toHaveCounts({ driver: { calls: 1 }, server: { rowsInserted: 5000 } })`. */
  toHaveCounts: countsMatcher('toHaveCounts', 'exact'),
  /** Upper bounds per layer, for "no more than N statements" guards. */
  toHaveCountsAtMost: countsMatcher('toHaveCountsAtMost', 'atMost'),
  /** The verdict kind, with its reason shown on failure. */
  toHaveVerdict(this: jest.MatcherContext, received: unknown, kind: VerdictKind): MatcherResult {
    if (!isTally(received)) return notATally('toHaveVerdict', received);
    const pass = received.verdict.kind === kind;
    return {
      pass,
      message: () =>
        `toHaveVerdict: expected ${this.isNot ? 'not ' : ''}${kind}, got ${received.verdict.kind}: ${received.verdict.reason}\n\n${describeEvidence(received)}`,
    };
  },
};

/** Registers the matchers: `import 'sqltally/jest'` style, or call from a setup file. */
export function installSqltallyMatchers(expectFn: jest.Expect = expect): void {
  expectFn.extend(sqltallyMatchers);
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace jest {
    interface Matchers<R> {
      toHaveCounts(spec: CountSpec): R;
      toHaveCountsAtMost(spec: CountSpec): R;
      toHaveVerdict(kind: VerdictKind): R;
    }
  }
}
