import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tsChild } from './ts-child';

// The hook plain Node children of the tests load TypeScript with (register-ts.js): its outputs are cached by
// content, so a child must never run a stale output of a file that changed.
describe('register-ts.js (TypeScript for plain Node children)', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'register-ts-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  function runChild(file: string): { out: string; cached: string[] } {
    const cache = path.join(dir, 'cache');
    const r = spawnSync(process.execPath, [...tsChild(), '-e', `console.log(require(${JSON.stringify(file)}).answer())`], {
      encoding: 'utf8',
      env: { ...process.env, SQLTALLY_TS_CACHE: cache },
    });
    if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
    return { out: r.stdout.trim(), cached: fs.existsSync(cache) ? fs.readdirSync(cache).sort() : [] };
  }

  it('caches each output by content: a file seen before loads from the cache, a changed one is transformed again', () => {
    const file = path.join(dir, 'answer.ts');
    fs.writeFileSync(file, 'export function answer(): number {\n  return 41 as number;\n}\n');
    const first = runChild(file);
    expect(first.out).toBe('41');
    expect(first.cached).toHaveLength(1);
    expect(first.cached[0]).toMatch(/^[0-9a-f]{64}\.js$/);

    // The same source again: the one entry serves it.
    expect(runChild(file)).toEqual(first);

    // A changed source gets an entry of its own and runs as changed, never as the cached output of the old text.
    fs.writeFileSync(file, 'export function answer(): number {\n  return 42 as number;\n}\n');
    const second = runChild(file);
    expect(second.out).toBe('42');
    expect(second.cached).toHaveLength(2);
  });

  it('a cached output is what esbuild made: stacks still show the TypeScript line', () => {
    const file = path.join(dir, 'thrower.ts');
    fs.writeFileSync(file, 'type N = number;\n\nexport function answer(): N {\n  throw new Error("from line 4");\n}\n');
    for (let i = 0; i < 2; i++) {
      const r = spawnSync(process.execPath, [...tsChild(), '-e', `require(${JSON.stringify(file)}).answer()`], {
        encoding: 'utf8',
        env: { ...process.env, SQLTALLY_TS_CACHE: path.join(dir, 'cache') },
      });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(`${file}:4:`);
    }
  });
});
