import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The recipes of docs/counting-your-code.md are the functions the ORM tests run: every `// docs recipe:` function in
 * these test files appears on that page exactly as written, and the page shows no other.
 */
const ROOT = join(__dirname, '..', '..');
const RECIPE = /\/\/ docs recipe: (.+)\n((?:async )?function [\s\S]*?\n}\n)/g;

function section(): string {
  return readFileSync(join(ROOT, 'docs', 'counting-your-code.md'), 'utf8');
}

function recipes(): { name: string; file: string; text: string }[] {
  const dir = __dirname;
  return readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .flatMap((file) => [...readFileSync(join(dir, file), 'utf8').matchAll(RECIPE)].map((m) => ({ name: m[1]!, file, text: m[2]! })));
}

describe('docs recipes', () => {
  const all = recipes();

  it('there is one per client and backend family the tests run', () => {
    expect(all.map((r) => r.name)).toHaveLength(18);
  });

  it.each(all.map((r) => [r.name, r] as const))('%s: the page shows the function the tests run, as written', (_name, recipe) => {
    expect(section()).toContain(recipe.text);
  });

  it('the page shows no recipe function the tests do not run', () => {
    const shown = [...section().matchAll(/^(?:async )?function (\w+)\(/gm)].map((m) => m[1]);
    const run = all.map((r) => /function (\w+)\(/.exec(r.text)?.[1]);
    expect(shown.sort()).toEqual(run.sort());
  });
});
