import path from 'node:path';
import type { Database as SqliteDatabase } from 'better-sqlite3';
import { describeBackend, leadingVersion, startedBackend } from './backend';
import type { BackendModule, InstallSearch, ServerIdentity, StartOptions } from './backend';
import { SqltallyError } from '../shared/errors';
import { makePrivateDir } from './local-process';
import type { StartedBackend } from './types';

const DATABASE_FILE = 'sqltally.db';
const LIBRARY = 'better-sqlite3';

/** better-sqlite3 is an optional peer dependency: loaded on first use, so an app without it can still use the rest. */
async function loadLibrary(): Promise<typeof import('better-sqlite3')> {
  return (await import('better-sqlite3')).default;
}

/**
 * SQLite's variable limit as compiled into this build (`PRAGMA compile_options` lists MAX_VARIABLE_NUMBER when it
 * was set at build time, as better-sqlite3 does); absent, the declared capability (the 3.32+ default) stands.
 */
export function sqliteVariableLimit(db: Pick<SqliteDatabase, 'pragma'>): number | undefined {
  const options = db.pragma('compile_options') as { compile_options?: unknown }[];
  for (const option of Array.isArray(options) ? options : []) {
    const match = /^MAX_VARIABLE_NUMBER=(\d+)$/.exec(String(option.compile_options ?? ''));
    if (match?.[1]) return Number(match[1]);
  }
  return undefined;
}

function identify(db: SqliteDatabase): ServerIdentity {
  const version = String((db.prepare('SELECT sqlite_version() AS version').get() as { version: string }).version);
  const maxBindValues = sqliteVariableLimit(db);
  return { flavour: 'sqlite', serverVersion: version, refined: maxBindValues ? { maxBindValues } : {} };
}

/** The embedded engine: a fresh database file in a private folder; "stopping" removes the folder. */
async function startEmbedded(options: StartOptions): Promise<StartedBackend> {
  const spawnedAt = process.hrtime.bigint();
  const dir = makePrivateDir('sqlite', options.env);
  const filename = path.join(dir.path, DATABASE_FILE);
  let identity: ServerIdentity;
  try {
    const Database = await loadLibrary();
    const db = new Database(filename);
    try {
      // WAL keeps the file usable by a second connection (the probe) while the workload writes.
      db.pragma('journal_mode = WAL');
      identity = identify(db);
    } finally {
      db.close();
    }
  } catch (cause) {
    await dir.remove();
    throw new SqltallyError(`could not open a SQLite database in ${dir.path}`, {
      backend: options.id,
      phase: 'start',
      provider: 'embedded',
      statement: 'SELECT sqlite_version()',
      cause,
      hint: 'set TMPDIR to a writable directory; check that better-sqlite3 is installed and built for this Node version (npm rebuild better-sqlite3)',
    });
  }
  const readyAt = process.hrtime.bigint();
  return startedBackend(describeBackend(SQLITE, identity, 'embedded', LIBRARY, readyAt - spawnedAt, true), { kind: 'file', filename }, () => dir.remove(), {
    dataDir: dir.path,
  });
}

async function findEmbedded(): Promise<InstallSearch> {
  try {
    const Database = await loadLibrary();
    const db = new Database(':memory:');
    const { serverVersion: version } = identify(db);
    db.close();
    return {
      installs: [{ backend: 'sqlite', provider: 'embedded', version, label: SQLITE.variantLabel(version), origin: LIBRARY, start: startEmbedded }],
      missing: [],
    };
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === 'MODULE_NOT_FOUND') return { installs: [], missing: [`${LIBRARY} is not installed (npm install ${LIBRARY})`] };
    return { installs: [], missing: [`${LIBRARY} does not load (${err instanceof Error ? err.message : String(err)})`] };
  }
}

export const SQLITE = {
  name: 'sqlite',
  providers: ['embedded'],
  urlSchemes: [],
  jdbcScheme: 'sqlite',
  readDriver: 'better-sqlite3',
  defaultPort: null,
  defaultImage: null,
  unavailableHint: 'install better-sqlite3 (npm install better-sqlite3; npm rebuild better-sqlite3 if it was built for another Node)',
  installFinders: [findEmbedded],
  // In-process: no server, no network.
  plainTextOptions: [],
  variantLabel: (version: string) => leadingVersion(version, 2),
} satisfies BackendModule;
