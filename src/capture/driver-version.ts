import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The version of a driver package as the app installed it: looked up from the working directory first (the app's
 * own node_modules), then from sqltally's own location. The drivers are peer dependencies, so both normally find the
 * same copy; when they do not, the app's is the one its code loaded.
 */
export function driverVersionOf(pkg: string): string | null {
  const starts = [process.cwd(), __dirname];
  for (const start of starts) {
    const paths = require.resolve.paths(pkg);
    const dirs = [...new Set([...nodeModulesUp(start), ...(paths ?? [])])];
    for (const dir of dirs) {
      const file = join(dir, pkg, 'package.json');
      if (!existsSync(file)) continue;
      try {
        const version = (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;
        if (typeof version === 'string') return version;
      } catch {
        // An unreadable manifest: try the next place.
      }
    }
  }
  return null;
}

function nodeModulesUp(start: string): string[] {
  const out: string[] = [];
  let dir = start;
  for (;;) {
    out.push(join(dir, 'node_modules'));
    const parent = join(dir, '..');
    if (parent === dir) return out;
    dir = parent;
  }
}
