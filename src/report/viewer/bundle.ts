import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The viewer's bundle as `npm run build` writes it beside this module (dist/report/viewer/viewer.js). */
export const VIEWER_BUNDLE = 'viewer.js';

let cached: string | null = null;

/**
 * The script report.html runs, as one self-contained string. A built package reads the bundle written at build
 * time; running from the TypeScript sources (tests, tsx) bundles it on the spot with esbuild, a dev dependency.
 */
export function viewerScript(): string {
  if (cached !== null) return cached;
  const built = join(__dirname, VIEWER_BUNDLE);
  if (existsSync(built)) return (cached = readFileSync(built, 'utf8'));
  const source = join(__dirname, 'main.ts');
  if (!existsSync(source)) throw new Error(`the report viewer is missing: neither ${built} nor ${source} exists (reinstall sqltally)`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const esbuild = require('esbuild') as typeof import('esbuild');
  return (cached = bundleViewer(esbuild, source));
}

/** One IIFE for the browser, minified; shared by the build script and the source fallback. */
export function bundleViewer(esbuild: typeof import('esbuild'), entry: string): string {
  const out = esbuild.buildSync({
    entryPoints: [entry],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    minify: true,
    write: false,
    legalComments: 'none',
  });
  const text = out.outputFiles[0]?.text;
  if (!text) throw new Error('esbuild produced no viewer bundle');
  return text;
}
