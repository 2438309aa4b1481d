import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BackendDescription } from '../backends/types';
import { SqliteSource } from './sqlite';

const DESCRIPTION = { name: 'sqlite', id: 'sqlite', flavour: 'sqlite' } as BackendDescription;

describe('SqliteSource', () => {
  let dir: string;
  let db: Database.Database;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqltally-unit-sqlite-'));
    db = new Database(join(dir, 'db.sqlite'));
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const on = (sql: string) => Promise.resolve(db.prepare(sql).all());

  it('sees writers beside exactly one counted handle: its data_version is the check', async () => {
    const snap = await new SqliteSource(DESCRIPTION).snapshot({ workloadConnectionIds: [1], onWorkloadConnection: on }, 'test', [1]);
    expect(snap.sessions.canSeeOtherSessions).toBe(true);
    expect(snap.global.data_version).toEqual(expect.any(Number));
  });

  it('cannot see any writer when no handle is counted (an ORM that opened its own Database): never isolated', async () => {
    const snap = await new SqliteSource(DESCRIPTION).snapshot({ workloadConnectionIds: [], onWorkloadConnection: on }, 'test', []);
    expect(snap.sessions.canSeeOtherSessions).toBe(false);
  });

  it('cannot tell writers apart beside several counted handles', async () => {
    const snap = await new SqliteSource(DESCRIPTION).snapshot({ workloadConnectionIds: [1, 2], onWorkloadConnection: on }, 'test', [1, 2]);
    expect(snap.sessions.canSeeOtherSessions).toBe(false);
  });

  it('gives rows as unknown, not 0, when no handle was read', () => {
    const source = new SqliteSource(DESCRIPTION);
    expect(source.summarize({}, {}).summary.rowsInserted).toBeNull();
    expect(source.summarize({}, { total_changes: 0 }).summary.rowsInserted).toBe(0);
    expect(source.summarize({}, { total_changes: 5000 }).summary.rowsInserted).toBe(5000);
  });
});
