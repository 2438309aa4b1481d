import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What `npm pack` puts in the package, from the dist/ that .ci/run builds: what users run and read, nothing of the
 * tests, no source maps pointing at sources the package does not ship, and the size the README states.
 */
const ROOT = join(__dirname, '..');
const built = existsSync(join(ROOT, 'dist', 'cli', 'main.js'));

(built ? describe : describe.skip)(built ? 'the package' : 'the package: skipped: dist/ is not built (npm run build)', () => {
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' })) as {
    unpackedSize: number;
    files: { path: string }[];
  }[];
  const files = packed!.files.map((f) => f.path);

  it('ships the CLI, the library, the report viewer, the README, the docs and the licence', () => {
    for (const f of ['bin/sqltally.js', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/jest/matchers.js', 'dist/jest/vitest.js', 'dist/report/viewer/viewer.js', 'README.md', 'LICENSE', 'docs/capture-api.md']) {
      expect(files).toContain(f);
    }
  });

  it('ships no tests, fixtures, source maps or TypeScript sources', () => {
    expect(files.filter((f) => /\.map$|\.test\.|fixture|^integration\/|^bench\/|(?<!\.d)\.ts$/.test(f))).toEqual([]);
  });

  it('is the size the README says, within 25%', () => {
    const said = /The package unpacks to about ([\d.]+) MB/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(said).not.toBeNull();
    const mb = packed!.unpackedSize / 1e6;
    expect(Math.abs(mb - Number(said![1])) / Number(said![1])).toBeLessThanOrEqual(0.25);
  });
});
