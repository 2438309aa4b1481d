/** `sqltally/jest`: the matchers, count checks and a window per test, for Jest (and any runner with Jest's `expect`). */
export { createSqltallyMatchers, installSqltallyMatchers, sqltallyMatchers } from './matchers';
export type { SqltallyMatchers } from './matchers';
export type { RepeatedShapesOptions } from './repeated-shapes';
export { windowPerTest } from './window';
export type { TestHooks, TestWindows, WindowPerTestOptions } from './window';
export { checkCounts } from './expectations';
export type { CountSpec, CountCheck } from './expectations';
