// Measures comments per folder: share of characters, blocks past a line or two, blocks with figures or stories.
// `npx tsx scripts/comment-stats.ts [--list long|figures] [folders...]`; src/comments.test.ts holds src/ to the rules.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export interface CommentBlock {
  file: string;
  /** 1-based line of the block's first comment. */
  line: number;
  /** Lines that carry words (delimiter-only lines such as a lone `/**` or ` *\/` are not counted). */
  lines: number;
  chars: number;
  text: string;
  /** A `/** ... *\/` comment right above an exported declaration or a member of one: what a user's editor shows. */
  apiDoc: boolean;
}

/**
 * Patterns of measured figures and the stories around them: timings with a unit, ratios, percentages, instruction
 * counts, dates, benchmark rounds and the words that introduce a measurement or a past incident.
 */
export const FIGURE_PATTERNS: { name: string; re: RegExp }[] = [
  { name: 'timing', re: /\b\d+(?:\.\d+)?\s?(?:ns|us|µs)\b|\b\d+(?:\.\d+)?-\d+(?:\.\d+)?\s?(?:ms|s)\b|\b\d+\.\d+\s?(?:ms|s)\b/ },
  { name: 'cost', re: /\b(?:about|took|takes|cost|costs|saved|saves|was|were|from)\s+(?:about\s+)?\d+(?:\.\d+)?\s?(?:ms|s|x|%|KB|MB)(?![\w])/ },
  { name: 'ratio', re: /\b\d+\.\d+x\b|\b\d+(?:\.\d+)?-\d+(?:\.\d+)?x\b/ },
  { name: 'percent', re: /\b\d+(?:\.\d+)?\s?%/ },
  { name: 'instructions', re: /\d[\d.,k]*\s+(?:more\s+|fewer\s+)?instructions\b|\bcallgrind\b/i },
  { name: 'date', re: /\b20\d\d-\d\d(?:-\d\d)?\b/ },
  {
    name: 'measured',
    re: /\b(?:measured|profiled) (?:on|over|here)\b(?! (?:this|the|each|every|its own) (?:server|connection|window))|\bbenchmarked\b|\bbisected\b/i,
  },
  { name: 'story', re: /\b(?:round \d+|last session|an earlier session|flaked|flaky|was red|CI failed|before (?:this|the) (?:fix|change))\b/i },
  { name: 'load', re: /\bload \d|\bon (?:two|2) cores\b|\b\d+ of \d+ runs\b/i },
];

export function figureKinds(text: string): string[] {
  return [...new Set(FIGURE_PATTERNS.filter((p) => p.re.test(text)).map((p) => p.name))];
}

/** Lines with words, not counting JSDoc type tags (`@param {string} x`: a JavaScript file's types, not prose). */
function wordLines(text: string): number {
  const words = (l: string) => l.replace(/^\s*(?:\/\/+|\/\*+|\*+\/?)/, '').replace(/\*\/\s*$/, '');
  return text.split('\n').filter((l) => /[\p{L}\p{N}]/u.test(words(l)) && !/^\s*@(?:param|returns?|type|typedef|template)\b/.test(words(l))).length;
}

function isExported(node: ts.Node): boolean {
  for (let n: ts.Node | undefined = node; n && !ts.isSourceFile(n); n = n.parent) {
    if (ts.isBlock(n)) return false;
    const mods = ts.canHaveModifiers(n) ? ts.getModifiers(n) : undefined;
    if (mods?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword || m.kind === ts.SyntaxKind.ProtectedKeyword)) return false;
    if (ts.isClassElement(n) && n.name && ts.isPrivateIdentifier(n.name)) return false;
    if (mods?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) return true;
    if (ts.isExportAssignment(n) || ts.isExportDeclaration(n)) return true;
  }
  return false;
}

/** Every comment of one file, line comments on consecutive lines joined into one block. */
export function commentBlocks(file: string, text: string): CommentBlock[] {
  const kind = file.endsWith('.js') ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const ranges = new Map<number, { pos: number; end: number; line: boolean; api: boolean }>();
  const visit = (node: ts.Node): void => {
    const children = node.getChildren(source);
    if (children.length === 0 || node.kind === ts.SyntaxKind.EndOfFileToken) {
      // Comments are the trivia in front of a token; the declaration that owns them is the token's outermost node
      // starting at the same place.
      let owner: ts.Node = node;
      while (owner.parent && !ts.isSourceFile(owner.parent) && owner.parent.getStart(source) === node.getStart(source)) owner = owner.parent;
      const found = [...(ts.getLeadingCommentRanges(text, node.pos) ?? []), ...(ts.getTrailingCommentRanges(text, node.end) ?? [])];
      for (const r of found) {
        const api = text.startsWith('/**', r.pos) && isExported(owner);
        ranges.set(r.pos, { pos: r.pos, end: r.end, line: r.kind === ts.SyntaxKind.SingleLineCommentTrivia, api });
      }
    }
    children.forEach(visit);
  };
  visit(source);
  const sorted = [...ranges.values()].sort((a, b) => a.pos - b.pos);
  const blocks: { pos: number; end: number; api: boolean; chars: number }[] = [];
  let previousLine = false;
  for (const r of sorted) {
    const last = blocks[blocks.length - 1];
    const gap = last ? text.slice(last.end, r.pos) : '';
    const ownLine = /\n[ \t]*$/.test(text.slice(0, r.pos)) || r.pos === 0;
    if (last && previousLine && r.line && ownLine && /^[ \t]*\r?\n[ \t]*$/.test(gap)) {
      last.end = r.end;
      last.chars += r.end - r.pos;
    } else blocks.push({ pos: r.pos, end: r.end, api: r.api, chars: r.end - r.pos });
    previousLine = r.line;
  }
  return blocks.map((b) => {
    const body = text.slice(b.pos, b.end);
    return { file, line: source.getLineAndCharacterOfPosition(b.pos).line + 1, lines: wordLines(body), chars: b.chars, text: body, apiDoc: b.api };
  });
}

export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'fixtures' ? [] : sourceFiles(path);
    return /\.(ts|js)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** A block longer than this many lines of words is reported as long (API docs get `API_DOC_LINES`). */
export const MAX_LINES = 2;
export const API_DOC_LINES = 6;

export function isLong(b: CommentBlock): boolean {
  return b.lines > (b.apiDoc ? API_DOC_LINES : MAX_LINES);
}

function main(): void {
  const args = process.argv.slice(2);
  const listAt = args.indexOf('--list');
  const list = listAt >= 0 ? args.splice(listAt, 2)[1] : undefined;
  const root = join(__dirname, '..');
  const folders = args.length ? args : ['src', 'integration', 'bench', 'scripts'];
  for (const folder of folders) {
    const groups = new Map<string, { chars: number; comment: number; blocks: CommentBlock[] }>();
    for (const path of sourceFiles(join(root, folder))) {
      const text = readFileSync(path, 'utf8');
      const name = relative(root, path);
      const group = folder === 'src' ? (/\.test\.ts$/.test(name) ? 'src (tests)' : 'src (code)') : folder;
      const g = groups.get(group) ?? { chars: 0, comment: 0, blocks: [] };
      const blocks = commentBlocks(name, text);
      g.chars += text.length;
      g.comment += blocks.reduce((s, b) => s + b.chars, 0);
      g.blocks.push(...blocks);
      groups.set(group, g);
    }
    for (const [group, g] of groups) {
      const long = g.blocks.filter(isLong);
      const overTwo = g.blocks.filter((b) => b.lines > 2).length;
      const figures = g.blocks.filter((b) => figureKinds(b.text).length > 0);
      const longest = [...g.blocks].sort((a, b) => b.lines - a.lines).slice(0, 3);
      console.log(
        `${group}: comments ${((100 * g.comment) / g.chars).toFixed(1)}% of ${g.chars} characters; ${g.blocks.length} blocks, ` +
          `${overTwo} longer than 2 lines, ${long.length} past the rule (over ${MAX_LINES}, API docs over ${API_DOC_LINES}), ${figures.length} with figures or stories; ` +
          `longest ${longest.map((b) => `${b.lines} (${b.file}:${b.line})`).join(', ')}`,
      );
      const shown = list === 'long' ? long : list === 'figures' ? figures : [];
      for (const b of shown) {
        const hits = FIGURE_PATTERNS.map((p) => b.text.replace(/\s+/g, ' ').match(p.re)?.[0]).filter(Boolean);
        console.log(`  ${b.file}:${b.line} ${b.lines} lines${b.apiDoc ? ' (api)' : ''} [${figureKinds(b.text).join(',')}] ${hits.join(' | ')}`);
      }
    }
  }
}

if (require.main === module) main();
