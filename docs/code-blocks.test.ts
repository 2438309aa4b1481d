import { existsSync, readFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import ts from 'typescript';
import { PAGES, ROOT } from './pages';

/**
 * Every TypeScript block in README.md, CONTRIBUTING.md and docs/*.md compiles as a module against sqltally's sources
 * (`sqltally`, `sqltally/jest` and `sqltally/vitest` mapped to them), with the project's compiler options. A block's
 * relative imports (`./orders`) resolve from `docs/fixtures/`, or from the folder an HTML comment
 * `<!-- compile-in: integration -->` right above the block names. What a page's fragments take as given (the reader's
 * `session`, `pool`, a recipe defined further down) is declared in `docs/fixtures/<page>.d.ts`, one per page.
 */
const BLOCK = /(?:<!-- compile-in: (\S+) -->\n)?```ts\n([\s\S]*?)\n```/g;

interface Block {
  page: string;
  line: number;
  dir: string;
  text: string;
}

function blocks(): Block[] {
  return PAGES.flatMap((page) => {
    const md = readFileSync(join(ROOT, page), 'utf8');
    return [...md.matchAll(BLOCK)].map((m) => ({
      page,
      line: md.slice(0, m.index).split('\n').length + (m[1] ? 1 : 0),
      dir: join(ROOT, m[1] ?? 'docs/fixtures'),
      text: m[2]!,
    }));
  });
}

function compile(all: Block[], page: string): Map<Block, string[]> {
  const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
  if (!config) throw new Error('tsconfig.json could not be read');
  const options: ts.CompilerOptions = {
    ...config.options,
    noEmit: true,
    baseUrl: ROOT,
    paths: {
      sqltally: ['src/index.ts'],
      'sqltally/jest': ['src/jest/index.ts'],
      'sqltally/vitest': ['src/jest/vitest.ts'],
      'sqltally/backends': ['src/backends/public.ts'],
      'sqltally/report': ['src/run/public.ts'],
    },
  };
  const files = new Map(all.map((b, i) => [join(b.dir, `__doc_block_${i}.ts`), b] as const));
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  // Each block is a module of its own, even one without an import.
  host.readFile = (f) => {
    const b = files.get(f);
    return b ? `${b.text}\nexport {};\n` : read(f);
  };
  const exists = host.fileExists.bind(host);
  host.fileExists = (f) => files.has(f) || exists(f);
  const given = join(ROOT, 'docs', 'fixtures', `${basename(page, '.md').toLowerCase()}.d.ts`);
  const program = ts.createProgram([...files.keys(), ...(existsSync(given) ? [given] : [])], options, host);
  const errors = new Map<Block, string[]>(all.map((b) => [b, []]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const block = d.file ? files.get(d.file.fileName) : undefined;
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (block) errors.get(block)!.push(`line ${block.line + 1 + (where?.line ?? 0)}: TS${d.code} ${text}`);
    else if (d.file && !d.file.fileName.includes('node_modules')) throw new Error(`${relative(ROOT, d.file.fileName)}: TS${d.code} ${text}`);
  }
  return errors;
}

describe('code blocks in the README and docs', () => {
  const all = blocks();
  const errors = new Map<Block, string[]>();
  for (const page of new Set(all.map((b) => b.page))) {
    for (const [b, e] of compile(
      all.filter((x) => x.page === page),
      page,
    ))
      errors.set(b, e);
  }

  it('there are blocks to check on every page that shows TypeScript', () => {
    expect(all.length).toBeGreaterThanOrEqual(10);
  });

  it.each(all.map((b) => [`${b.page}:${b.line}`, b] as const))('%s compiles', (_where, b) => {
    expect({ compiledIn: relative(ROOT, b.dir), errors: errors.get(b) }).toEqual({ compiledIn: expect.any(String), errors: [] });
  });
});
