import vm from 'node:vm';

const { transformTs } = require('./esbuild-transform.js') as {
  transformTs: (source: string, filename: string, sourcemap: 'external' | 'inline') => { code: string };
};

const SOURCE = ['export let count = 1;', 'export function bump(): void {', '  count++;', '}', 'export const imul = Math.imul;', ''].join('\n');

function load(code: string): Record<string, unknown> {
  const module = { exports: {} as Record<string, unknown> };
  vm.runInThisContext(`(function (module, exports, require) {\n${code}\n})`)(module, module.exports, require);
  return module.exports;
}

describe('the test transform (esbuild)', () => {
  const { code } = transformTs(SOURCE, '/virtual/counter.ts', 'external');

  it("hands over the module's own export object rather than esbuild's copy of it (a getter through a computed key per access)", () => {
    // esbuild's helper text changing would leave the copy in place, silently: this is what says so.
    expect(code).toContain('var __toCommonJS = (mod) => __defProp(mod, "__esModule", { value: true });');
    expect(code).not.toContain('__copyProps(__defProp({}');
  });

  it('keeps what CommonJS importers see: the names, the __esModule mark, live bindings', () => {
    const exported = load(code);
    expect(Object.keys(exported).sort()).toEqual(['bump', 'count', 'imul']);
    expect(exported['__esModule']).toBe(true);
    expect((exported['imul'] as (a: number, b: number) => number)(3, 4)).toBe(12);
    expect(exported['count']).toBe(1);
    (exported['bump'] as () => void)();
    expect(exported['count']).toBe(2);
  });
});
