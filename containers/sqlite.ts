import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, leadingVersion, startedBackend } from './backend';
import type { BackendModule, InstallSearch, StartOptions } from './backend';
import { SqltallyError } from './errors';
import { makePrivateDir } from './local-process';
import type { StartedBackend } from './types';

const DATABASE_FILE = 'sqltally.db';
const LIBRARY = 'better-sqlite3';

/** The embedded engine: a fresh database file in a private folder; "stopping" removes the folder. */
async function startEmbedded(options: StartOptions): Promise<StartedBackend> {
  const spawnedAt = process.hrtime.bigint();
  const dir = makePrivateDir('sqlite', options.env);
  const filename = path.join(dir.path, DATABASE_FILE);
  let version: string;
  try {
    const db = new Database(filename);
    try {
      // WAL keeps the file usable by a second connection (the probe) while the workload writes.
      db.pragma('journal_mode = WAL');
      version = String((db.prepare('SELECT sqlite_version() AS version').get() as { version: string }).version);
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
      hint: 'set TMPDIR to a writable directory; check that better-sqlite3 built for this Node version (npm rebuild better-sqlite3)',
    });
  }
  const readyAt = process.hrtime.bigint();
  return startedBackend(
    describe(SQLITE, { flavour: 'sqlite', serverVersion: version, refined: {} }, 'embedded', LIBRARY, readyAt - spawnedAt, true),
    { kind: 'file', filename },
    () => dir.remove(),
    { dataDir: dir.path },
  );
}

async function findEmbedded(): Promise<InstallSearch> {
  try {
    const db = new Database(':memory:');
    const version = String((db.prepare('SELECT sqlite_version() AS version').get() as { version: string }).version);
    db.close();
    return {
      installs: [{ backend: 'sqlite', provider: 'embedded', version, label: SQLITE.variantLabel(version), origin: LIBRARY, start: startEmbedded }],
      missing: [],
    };
  } catch (err) {
    return { installs: [], missing: [`${LIBRARY} does not load (${err instanceof Error ? err.message : String(err)})`] };
  }
}

export const SQLITE = {
  name: 'sqlite',
  providers: ['embedded'],
  urlSchemes: [],
  defaultPort: null,
  defaultImage: null,
  unavailableHint: 'run npm ci (or npm rebuild better-sqlite3) so the native module matches this Node',
  installFinders: [findEmbedded],
  variantLabel: (version: string) => leadingVersion(version, 2),
} satisfies BackendModule;
