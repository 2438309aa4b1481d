import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The README's recipes are the functions the ORM tests run: every `// README recipe:` function in these test files
 * appears in the README's "Counting your own code" section exactly as written, and the section shows no other.
 */
const ROOT = join(__dirname, '..', '..');
const RECIPE = /\/\/ README recipe: (.+)\n((?:async )?function [\s\S]*?\n}\n)/g;

function section(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Counting your own code\n');
  const end = readme.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error('README.md has no "## Counting your own code" section');
  return readme.slice(start, end);
}

function recipes(): { name: string; file: string; text: string }[] {
  const dir = __dirname;
  return readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .flatMap((file) => [...readFileSync(join(dir, file), 'utf8').matchAll(RECIPE)].map((m) => ({ name: m[1]!, file, text: m[2]! })));
}

describe('README recipes', () => {
  const all = recipes();

  it('there is one per client and backend family the tests run', () => {
    expect(all.map((r) => r.name)).toHaveLength(17);
  });

  it.each(all.map((r) => [r.name, r] as const))('%s: the README shows the function the tests run, as written', (_name, recipe) => {
    expect(section()).toContain(recipe.text);
  });

  it('the README shows no recipe function the tests do not run', () => {
    const shown = [...section().matchAll(/^(?:async )?function (\w+)\(/gm)].map((m) => m[1]);
    const run = all.map((r) => /function (\w+)\(/.exec(r.text)?.[1]);
    expect(shown.sort()).toEqual(run.sort());
  });
});
