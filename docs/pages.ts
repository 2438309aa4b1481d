import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/** The repository's root, and the pages whose code blocks the docs tests check. */
export const ROOT = join(__dirname, '..');
export const PAGES = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
