// @ts-check
// Lint for mistakes, not layout: typescript-eslint's recommended rules, without the type-aware ones (they need the
// whole program per file: minutes on two cores).
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');

module.exports = tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'test-artifacts/', 'sqltally-report/', 'scratch/', 'docs/report-example/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', __filename: 'readonly', process: 'readonly', console: 'readonly', Buffer: 'readonly' },
    },
    rules: {
      // `_`-prefixed names and destructured leftovers are deliberate.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
    },
  },
  {
    // The wrappers forward `arguments` as they came: no array is made per call on the counted path.
    files: ['src/driver/**/*.ts'],
    rules: { 'prefer-rest-params': 'off', 'prefer-spread': 'off' },
  },
  {
    // Tests and benches read driver results and load modules afresh (require in a fresh registry) on purpose.
    files: ['**/*.test.ts', 'integration/**/*.ts', 'bench/**/*.ts', '**/*.js'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Jest's sequencer API is a class whose methods call each other through the instance.
    files: ['integration/sequencer.js'],
    rules: { '@typescript-eslint/no-this-alias': 'off' },
  },
);
