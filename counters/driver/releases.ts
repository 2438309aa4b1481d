import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DriverName } from '../../containers/types';

/**
 * Further releases of a driver installed beside the default one under npm aliases (package.json:
 * `"mariadb-3.3": "npm:mariadb@3.3.2"`). The matrix runs each installed one side by side, so a batching change
 * between releases shows in one report as two cells that differ only in driver version.
 */
export const EXTRA_RELEASES = {
  mysql2: [],
  mariadb: ['mariadb-3.3'],
  pg: [],
  'better-sqlite3': [],
} as const satisfies Record<DriverName, readonly string[]>;

/** The package.json of an installed package, found on the module paths: `exports` maps may hide it from require. */
function manifestOf(pkg: string): string | null {
  for (const dir of require.resolve.paths(pkg) ?? []) {
    const file = join(dir, pkg, 'package.json');
    if (existsSync(file)) return file;
  }
  return null;
}

function installed(pkg: string): boolean {
  return manifestOf(pkg) !== null;
}

/** The packages to load for `driver`: its own name first, then each extra release that is installed here. */
export function installedReleases(driver: DriverName): string[] {
  return [driver, ...EXTRA_RELEASES[driver].filter(installed)];
}

/** The version an installed release declares; an alias's package.json keeps the real package's name. */
export function releaseVersion(pkg: string): string | null {
  const file = manifestOf(pkg);
  if (!file) return null;
  const json = JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown };
  return typeof json.version === 'string' ? json.version : null;
}
