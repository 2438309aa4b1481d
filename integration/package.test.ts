import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
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
    for (const f of [
      'bin/sqltally.js',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/main.js',
      'dist/jest/index.js',
      'dist/jest/vitest.js',
      'dist/backends/public.js',
      'dist/run/public.js',
      'dist/report/viewer/viewer.js',
      'README.md',
      'LICENSE',
      'docs/capture-api.md',
    ]) {
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

  describe('entry points by audience', () => {
    const ENTRIES: Record<string, string[]> = {
      sqltally: ['CaptureSession', 'capture', 'SqltallyError'],
      'sqltally/jest': ['installSqltallyMatchers', 'sqltallyMatchers', 'windowPerTest', 'checkCounts'],
      'sqltally/vitest': ['installSqltallyVitestMatchers'],
      'sqltally/backends': ['startBackend', 'listBackends', 'resolveBackend'],
      'sqltally/report': ['runMatrix', 'readReportFile', 'compareWithBaseline'],
    };
    /** The server types a user writes, from both entries that export them (listed once in src/backends/public-types.ts). */
    const SERVER_TYPES = ['BackendName', 'BackendDescription', 'Capabilities', 'ConnectionInfo', 'Flavour', 'NetworkConnection', 'ProviderKind'];
    const TYPES: Record<string, string[]> = {
      sqltally: [...SERVER_TYPES, 'SqliteConnection', 'StartedBackend', 'Tally'],
      'sqltally/backends': [...SERVER_TYPES, 'SqliteConnection', 'StartedBackend', 'Resolution'],
    };
    let app: string;
    beforeAll(() => {
      app = mkdtempSync(join(os.tmpdir(), 'sqltally-entries-'));
      mkdirSync(join(app, 'node_modules'));
      symlinkSync(ROOT, join(app, 'node_modules', 'sqltally'), 'dir');
    });
    afterAll(() => rmSync(app, { recursive: true, force: true }));

    it('each loads from the package name and exports what its audience uses, and no zod schema or matcher twice', () => {
      const script = `const out = {}; for (const e of ${JSON.stringify(Object.keys(ENTRIES))}) out[e] = Object.keys(require(e)); console.log(JSON.stringify(out));`;
      const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8' })) as Record<string, string[]>;
      for (const [entry, names] of Object.entries(ENTRIES))
        expect({ entry, missing: names.filter((n) => !loaded[entry]!.includes(n)) }).toEqual({ entry, missing: [] });
      const all = Object.values(loaded).flat();
      expect(all.filter((n) => /Schema$/.test(n))).toEqual([]);
      expect(loaded['sqltally']!.filter((n) => /Matchers$/.test(n))).toEqual([]);
    });

    it.each([
      ['commonjs', 'node10'],
      ['node16', 'node16'],
      ['esnext', 'bundler'],
    ])('type-check from an app under module %s, moduleResolution %s', (module, resolution) => {
      const imports = Object.entries(ENTRIES)
        .map(([entry, names], i) => `import { ${names[0]} as n${i} } from '${entry}';`)
        .join('\n');
      const types = Object.entries(TYPES)
        .map(([entry, names], i) => `import type * as t${i} from '${entry}';\nexport type Types${i} = [${names.map((n) => `t${i}.${n}`).join(', ')}];`)
        .join('\n');
      writeFileSync(
        join(app, 'entries.ts'),
        `${imports}\n${types}\nexport const used = [${Object.keys(ENTRIES)
          .map((_, i) => `n${i}`)
          .join(', ')}];\n`,
      );
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      const args = [
        tsc,
        '--noEmit',
        '--strict',
        '--skipLibCheck',
        '--module',
        module,
        '--moduleResolution',
        resolution,
        '--types',
        'node',
        '--typeRoots',
        join(ROOT, 'node_modules', '@types'),
        join(app, 'entries.ts'),
      ];
      let output = '';
      try {
        execFileSync(process.execPath, args, { cwd: app, encoding: 'utf8' });
      } catch (err) {
        output = String((err as { stdout?: string }).stdout ?? err);
      }
      expect(output).toBe('');
    });
  });
});
