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

function installed(pkg: string): boolean {
  try {
    require.resolve(`${pkg}/package.json`);
    return true;
  } catch {
    return false;
  }
}

/** The packages to load for `driver`: its own name first, then each extra release that is installed here. */
export function installedReleases(driver: DriverName): string[] {
  return [driver, ...EXTRA_RELEASES[driver].filter(installed)];
}

/** The version an installed release declares; an alias's package.json keeps the real package's name. */
export function releaseVersion(pkg: string): string | null {
  try {
    const json = require(`${pkg}/package.json`) as { version?: unknown };
    return typeof json.version === 'string' ? json.version : null;
  } catch {
    return null;
  }
}
