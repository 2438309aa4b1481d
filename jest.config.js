// @ts-check
// Plain JavaScript, so Jest loads it with Node's own require: a jest.config.ts goes through ts-node, which
// type-checks it before any worker starts. `npm run typecheck` still checks it (// @ts-check, allowJs).
// Two projects so `--selectProjects unit` runs in seconds without servers, while the default run does both.
// TypeScript is stripped by esbuild (integration/esbuild-transform.js says why); `npm run typecheck` checks the types.
/** @type {import('jest').Config['transform']} */
const esbuild = {
  '^.+\\.ts$': '<rootDir>/integration/esbuild-transform.js',
};
// The examples are what a user writes, so they run under what most users' TypeScript suites use: callers captured
// through ts-jest's source maps stay tested.
/** @type {import('jest').Config['transform']} */
const tsJest = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }],
};

/** @type {import('jest').Config} */
const config = {
  // A root option (Jest ignores it inside a project): real servers on two shared cores can take tens of seconds.
  testTimeout: 180_000,
  // Root options too. Integration files mostly wait on their servers, so more workers than cores keep both busy
  // (Jest's default, cores - 1, would run everything in one process). Each worker keeps its own pooled servers
  // (integration/pool.ts); `--maxWorkers` on the command line overrides.
  maxWorkers: 5,
  // Files that declare long waits (`@waits <seconds>` in their head) first when Jest has no timings of its own.
  testSequencer: '<rootDir>/integration/sequencer.js',
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform: esbuild,
      testMatch: ['<rootDir>/{src,docs}/**/*.test.ts'],
    },
    {
      // Small apps a user would write, under the matchers the README shows; SQLite only, so always runnable.
      displayName: 'examples',
      testEnvironment: 'node',
      transform: tsJest,
      testMatch: ['<rootDir>/examples/**/*.test.ts'],
    },
    {
      displayName: 'integration',
      transform: esbuild,
      testMatch: ['<rootDir>/integration/**/*.test.ts'],
      // Lends each worker's pooled servers to one file after another and checks them between files (harness.ts).
      testEnvironment: '<rootDir>/integration/environment.ts',
      // Resolves the backends once for all files and enforces SQLTALLY_REQUIRE; teardown fails the run on leaks.
      globalSetup: '<rootDir>/integration/global-setup.ts',
      globalTeardown: '<rootDir>/integration/global-teardown.ts',
    },
  ],
};

module.exports = config;
