import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DriverName } from '../shared/driver-names';
import { DRIVERS } from './registry';

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

/**
 * The packages to load for `driver` that are installed here: its own package first, then each further release its
 * module knows (npm aliases). The matrix runs them side by side, so a batching change between releases shows in one
 * report as two cells that differ only in driver version. Empty when the driver is not installed at all (every
 * driver is an optional peer dependency).
 */
export function installedReleases(driver: DriverName): string[] {
  const module = DRIVERS[driver];
  return [module.packageName, ...module.releases].filter(installed);
}

/** Every installed release of `driver` the project lists: the matrix's, then those installed for the compat tests. */
export function compatReleases(driver: DriverName): string[] {
  return [...installedReleases(driver), ...DRIVERS[driver].compatReleases.filter(installed)];
}

/** The version an installed release declares; an alias's package.json keeps the real package's name. */
export function releaseVersion(pkg: string): string | null {
  const file = manifestOf(pkg);
  if (!file) return null;
  const json = JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown };
  return typeof json.version === 'string' ? json.version : null;
}
