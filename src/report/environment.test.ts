import { readFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collectEnvironment, gitState, packageVersion } from './environment';
import { EnvironmentSchema } from './schema';
import { DRIVER_NAMES } from '../shared/driver-names';
import { driverModule } from '../driver/registry';

const installed = (pkg: string) =>
  (JSON.parse(readFileSync(join(__dirname, '..', '..', 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;

describe('collectEnvironment', () => {
  it('reads the machine, Node, every driver version and git state, and passes the schema', () => {
    const env = collectEnvironment({ env: {}, cwd: join(__dirname, '..', '..'), now: new Date('2026-01-01T00:00:00Z') });
    expect(EnvironmentSchema.parse(env)).toEqual(env);
    expect(env.id).toBe('local');
    expect(env.node).toBe(process.version);
    // Every driver of the registry, by name, with the version of its package as installed here.
    expect(env.drivers).toEqual(Object.fromEntries(DRIVER_NAMES.map((d) => [d, installed(driverModule(d).packageName)])));
    expect(env.sqltallyVersion).toBe('0.1.0');
    expect(env.git.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(typeof env.git.dirty).toBe('boolean');
    expect(env.cpu.cores).toBeGreaterThan(0);
    expect(env.collectedAt).toBe('2026-01-01T00:00:00.000Z');
    expect(env.ci).toBeNull();
  });

  it('tolerates a directory outside any git repository', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sqltally-nogit-'));
    try {
      expect(gitState(dir)).toEqual({ commit: null, dirty: null });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says null for a package that is not installed', () => {
    expect(packageVersion('sqltally-no-such-package')).toBeNull();
  });

  it('names a GitHub Actions job and strips any URL password from what it read', () => {
    const env = collectEnvironment({
      env: { GITHUB_ACTIONS: 'true', GITHUB_JOB: 'run', SQLTALLY_JOB: 'run mysql://ci:s3cret@db:3306/x', GITHUB_RUN_ID: '7', RUNNER_NAME: 'gh-1' },
    });
    expect(env.ci).toEqual({ provider: 'github-actions', job: 'run mysql://ci:***@db:3306/x', runId: '7', runner: 'gh-1' });
    expect(JSON.stringify(env)).not.toContain('s3cret');
  });
});
