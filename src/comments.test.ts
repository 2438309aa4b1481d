import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { commentBlocks, figureKinds, isLong, sourceFiles, API_DOC_LINES, MAX_LINES, type CommentBlock } from '../scripts/comment-stats';

/**
 * Comments say why in a line or two; doc comments of exported API may take a few more. Figures, benchmark rounds and
 * incident stories belong in commit messages and bench/ docs, where they can carry their command and date.
 */
const ROOT = join(__dirname, '..');

/** Blocks that may stay as they are, each with why. `start` is the block's first words; an unused entry fails too. */
const ALLOWED: { file: string; start: string; why: string }[] = [];

function blocks(): CommentBlock[] {
  return sourceFiles(__dirname).flatMap((path) => commentBlocks(relative(ROOT, path), readFileSync(path, 'utf8')));
}

function allowed(b: CommentBlock): boolean {
  return ALLOWED.some((a) => a.file === b.file && b.text.replace(/\s+/g, ' ').includes(a.start));
}

function where(b: CommentBlock, what: string): string {
  const words = b.text.split('\n').find((l) => /\w/.test(l)) ?? '';
  return `${b.file}:${b.line} ${what}: ${words.trim().slice(0, 100)}`;
}

describe('comments in src/', () => {
  const all = blocks();

  it(`no block is longer than ${MAX_LINES} lines (${API_DOC_LINES} for a doc comment of exported API)`, () => {
    expect(all.filter((b) => isLong(b) && !allowed(b)).map((b) => where(b, `${b.lines} lines`))).toEqual([]);
  });

  it('no block carries measured figures or incident stories', () => {
    expect(all.filter((b) => figureKinds(b.text).length > 0 && !allowed(b)).map((b) => where(b, figureKinds(b.text).join(',')))).toEqual([]);
  });

  it('every allowance still matches a block', () => {
    expect(ALLOWED.filter((a) => !all.some((b) => a.file === b.file && b.text.replace(/\s+/g, ' ').includes(a.start)))).toEqual([]);
  });
});

describe('the comment measures', () => {
  it('join line comments on consecutive lines into one block and count lines with words', () => {
    const text = ['// one', '// two', '//', 'const a = 1; // three', '/**', ' * four', ' */', 'export const b = 2;', ''].join('\n');
    const found = commentBlocks('x.ts', text);
    expect(found.map((b) => [b.line, b.lines, b.apiDoc])).toEqual([
      [1, 2, false],
      [4, 1, false],
      [5, 1, true],
    ]);
  });

  it.each([
    ['takes 1.3 s to start', 'timing'],
    ['about 60 ms a call', 'cost'],
    ['1.55x the direct time', 'ratio'],
    ['11% fewer', 'percent'],
    ['+2391 instructions a call', 'instructions'],
    ['checked 2026-12-05', 'date'],
    ['measured on PostgreSQL 15', 'measured'],
    ['flaky under load', 'story'],
    ['the stats flush bisected to 2b89226', 'measured'],
  ])('see a figure in %j', (text, kind) => {
    expect(figureKinds(`// ${text}`)).toContain(kind);
  });

  it.each([
    'the measured window',
    'a 16-bit length',
    'waits 500 ms for the server',
    'PostgreSQL 15+ only',
    'the session that wrote',
    'what a window costs, measured on this server',
  ])('see none in %j', (text) => {
    expect(figureKinds(`// ${text}`)).toEqual([]);
  });
});
