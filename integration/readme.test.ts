// @waits 45: the README's first test, run three times by a Jest of its own, each starting a private PostgreSQL.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { START_TIMEOUT_MS, describeEachBackend } from './harness';
import { forcedPlain } from '../src/driver/compat/path';

/**
 * The README's first test as a user copies it, beside a `saveOrder` that passes and one writing an INSERT per line, whose
 * failure output must hold every line of the README's failure example (` ...` ends a prefix).
 */
jest.setTimeout(START_TIMEOUT_MS);

const ROOT = path.join(__dirname, '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** The first block of `lang` after the heading. */
function block(heading: string, lang: string, after = 0): string {
  const at = README.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README.md has no heading "${heading}"`);
  const fence = '```' + lang + '\n';
  const start = README.indexOf(fence, at + after);
  if (start < 0) throw new Error(`no \`\`\`${lang} block under "${heading}" in README.md`);
  const end = README.indexOf('\n```', start + fence.length);
  return README.slice(start + fence.length, end);
}

const PER_LINE = `import type pg from 'pg';
import type { Order } from './orders.fixture';
export { createOrderTables } from './orders.fixture';

/** The regression the README's failure example shows: one INSERT per line. */
export async function saveOrder(pool: pg.Pool, order: Order): Promise<void> {
  for (const l of order.lines) await pool.query('INSERT INTO order_lines (order_id, sku, quantity) VALUES ($1, $2, $3)', [order.id, l.sku, l.quantity]);
}
`;

/**
 * Runs the README's first test. `app`: a folder where the packed package is installed (`node_modules/sqltally`), which
 * the test then imports as a user's would; else `sqltally` is mapped to the sources.
 */
function runFirstTest(orders: 'fixture' | 'per-line', app?: string): { status: number | null; output: string } {
  const dir = fs.mkdtempSync(path.join(app ?? os.tmpdir(), 'sqltally-readme-'));
  try {
    fs.copyFileSync(path.join(ROOT, 'docs', 'fixtures', 'orders.ts'), path.join(dir, 'orders.fixture.ts'));
    fs.writeFileSync(path.join(dir, 'orders.ts'), orders === 'fixture' ? "export * from './orders.fixture';\n" : PER_LINE);
    fs.writeFileSync(path.join(dir, 'first.test.ts'), block('## A first test', 'ts'));
    const config = {
      rootDir: dir,
      testEnvironment: 'node',
      testMatch: ['<rootDir>/first.test.ts'],
      transform: { '^.+\\.ts$': path.join(ROOT, 'integration', 'esbuild-transform.js') },
      moduleNameMapper: app ? {} : { '^sqltally$': path.join(ROOT, 'src', 'index.ts'), '^sqltally/jest$': path.join(ROOT, 'src', 'jest', 'index.ts') },
      moduleDirectories: ['node_modules', path.join(ROOT, 'node_modules')],
      testTimeout: START_TIMEOUT_MS,
    };
    const r = spawnSync(
      process.execPath,
      [path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), '--config', JSON.stringify(config), '--ci', '--colors=false'],
      {
        cwd: dir,
        encoding: 'utf8',
        env: { ...process.env, FORCE_COLOR: '0' },
        timeout: START_TIMEOUT_MS,
      },
    );
    return { status: r.status, output: `${r.stdout}\n${r.stderr}` };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describeEachBackend(
  () => {
    it('passes as written, with the fixture orders code (one statement per order)', () => {
      const { status, output } = runFirstTest('fixture');
      expect({ status, output: status === 0 ? '' : output }).toEqual({ status: 0, output: '' });
    });

    it("fails on a one-INSERT-per-line saveOrder with every line of the README's failure example", () => {
      const { status, output } = runFirstTest('per-line');
      expect(status).toBe(1);
      const example = block('## A first test', 'text');
      const printed = output.split('\n').map((l) => l.trim());
      const missing = example
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '' && l !== '...')
        .filter((line) => {
          // The server's version in the first line is this machine's; a line ending in ' ...' is the start of one.
          const cut = line.endsWith(' ...') ? line.slice(0, -4) : line;
          const escaped = cut.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/postgres@\d+ \\\(.*?\\\)\\\) via/, 'postgres@\\d+ \\(.*\\) via');
          // The example names the fast path; forced onto the plain one, the message names that path and why instead.
          const onPath = forcedPlain() ? escaped.replace(/\\\(fast path\\\)/, '\\(plain path: [^)]*\\)') : escaped;
          const pattern = new RegExp(`^${onPath}${cut === line ? '$' : ''}`);
          return !printed.some((p) => pattern.test(p));
        });
      expect({ missing, output: missing.length ? output : '' }).toEqual({ missing: [], output: '' });
    });
  },
  (b) => b.backend === 'postgres',
);

/** `npm pack` of the dist/ that .ci/run builds, installed into a fresh app with npm's own `install`. */
const built = fs.existsSync(path.join(ROOT, 'dist', 'cli', 'main.js'));
const packedDescribe = built ? describe : describe.skip;
packedDescribe(built ? 'the packed package' : 'the packed package: skipped: dist/ is not built (npm run build)', () =>
  describeEachBackend(
    () => {
      let app: string;
      let install = '';
      beforeAll(() => {
        app = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-packed-'));
        const packed = execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', app], { cwd: ROOT, encoding: 'utf8' }).trim();
        // zod is put in place first, so npm installs offline from an empty cache: no test reaches the registry.
        const zod = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', 'zod', 'package.json'), 'utf8')) as { version: string };
        fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, dependencies: { zod: zod.version } }));
        fs.mkdirSync(path.join(app, 'node_modules'));
        fs.cpSync(path.join(ROOT, 'node_modules', 'zod'), path.join(app, 'node_modules', 'zod'), { recursive: true });
        const args = ['install', '--offline', '--cache', path.join(app, '.npm-cache'), '--no-audit', '--no-fund', path.join(app, packed)];
        const r = spawnSync('npm', args, { cwd: app, encoding: 'utf8', env: { ...process.env, npm_config_loglevel: 'warn' } });
        install = `${r.stdout}\n${r.stderr}`;
        if (r.status !== 0) throw new Error(`npm install of ${packed} failed:\n${install}`);
        // The user's own driver, as `npm install --save-dev sqltally pg` adds it.
        fs.symlinkSync(path.join(ROOT, 'node_modules', 'pg'), path.join(app, 'node_modules', 'pg'), 'dir');
      });
      afterAll(() => fs.rmSync(app, { recursive: true, force: true }));

      it('installs with no warning about sqltally, at the size the README says', () => {
        const warnings = install.split('\n').filter((l) => /warn/i.test(l) && /sqltally/i.test(l));
        expect({ warnings, install: warnings.length ? install : '' }).toEqual({ warnings: [], install: '' });
        const size = (dir: string): number =>
          fs.readdirSync(dir, { withFileTypes: true }).reduce((n, e) => {
            const p = path.join(dir, e.name);
            return n + (e.isDirectory() ? size(p) : fs.statSync(p).size);
          }, 0);
        const said = /The package unpacks to about ([\d.]+) MB/.exec(README);
        expect(said).not.toBeNull();
        const mb = size(path.join(app, 'node_modules', 'sqltally')) / 1e6;
        expect({ mb: Math.abs(mb - Number(said![1])) / Number(said![1]) <= 0.25 ? 'as said' : mb }).toEqual({ mb: 'as said' });
      });

      it("passes the README's first test importing the installed package", () => {
        const { status, output } = runFirstTest('fixture', app);
        expect({ status, output: status === 0 ? '' : output }).toEqual({ status: 0, output: '' });
      });
    },
    (b) => b.backend === 'postgres',
  ),
);
