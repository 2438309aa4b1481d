/**
 * sqltally's matchers for Vitest: `installSqltallyVitestMatchers(expect, Snapshots)` with Vitest's own exports, since
 * this CommonJS package cannot `require` Vitest. Importing it also types the matchers on Vitest's `Assertion`.
 */
import type { ExpectStatic, Snapshots } from 'vitest';
import { createSqltallyMatchers } from './matchers';
import type { SnapshotMatcher, SqltallyMatchers } from './matchers';

/** The part of Vitest's `Snapshots` used here: its composable `toMatchSnapshot`. */
export type VitestSnapshots = Pick<typeof Snapshots, 'toMatchSnapshot'>;

/** The matchers, with count snapshots stored by Vitest's own snapshot machinery (`-u`, CI) when `snapshots` is given. */
export function sqltallyVitestMatchers(snapshots?: VitestSnapshots) {
  return createSqltallyMatchers(() => {
    if (!snapshots) {
      throw new Error(
        "count snapshots under Vitest need Vitest's Snapshots helpers: installSqltallyVitestMatchers(expect, Snapshots), with both imported from 'vitest' (4.1 or later)",
      );
    }
    return snapshots.toMatchSnapshot as unknown as SnapshotMatcher;
  });
}

/** Registers the matchers on Vitest's `expect`; pass `Snapshots` from 'vitest' for `toMatchCountSnapshot`. */
export function installSqltallyVitestMatchers(expect: ExpectStatic, snapshots?: VitestSnapshots): void {
  expect.extend(sqltallyVitestMatchers(snapshots));
}

declare module 'vitest' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type, @typescript-eslint/no-unused-vars, @typescript-eslint/no-explicit-any
  interface Assertion<T = any> extends SqltallyMatchers<void> {}
}
