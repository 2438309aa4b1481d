import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * The folders of src/ in the order the data flows, lowest first: a folder imports only from folders before it (and
 * from itself), type-only imports included, so no arrow of the import graph points back up.
 */
const LAYERS = ['shared', 'sql', 'driver', 'backends', 'wire', 'server', 'verdict', 'capture', 'jest', 'workload', 'report', 'run', 'cli'] as const;
const SRC = __dirname;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return /\.ts$/.test(e.name) && !/\.(test|fixture)\.ts$/.test(e.name) && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The top folder of src/ a file is in, or '.' for a file at the root of src/ (the entry point). */
function folderOf(file: string): string {
  const rel = path.relative(SRC, file).split(path.sep);
  return rel.length > 1 || fs.statSync(file, { throwIfNoEntry: false })?.isDirectory() ? rel[0]! : '.';
}

function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, false);
  const specs: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier))
      specs.push(node.moduleSpecifier.text);
    else if (
      ts.isCallExpression(node) &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0]) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))
    )
      specs.push(node.arguments[0].text);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal))
      specs.push(node.argument.literal.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specs.filter((s) => s.startsWith('.')).map((s) => path.resolve(path.dirname(file), s));
}

function arrowsUp(): string[] {
  const rank = new Map<string, number>(LAYERS.map((l, i) => [l, i]));
  const wrong: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file);
    if (from === '.') continue;
    for (const target of importsOf(file)) {
      if (!target.startsWith(SRC + path.sep)) {
        wrong.push(`${path.relative(SRC, file)} imports ${path.relative(SRC, target)}, outside src/`);
        continue;
      }
      const to = folderOf(target);
      if (to === from) continue;
      if (to === '.') wrong.push(`${path.relative(SRC, file)} imports the entry point`);
      else if ((rank.get(to) ?? Infinity) > (rank.get(from) ?? -1))
        wrong.push(`${path.relative(SRC, file)} (${from}) imports ${path.relative(SRC, target)} (${to}), a later layer`);
    }
  }
  return wrong;
}

describe('the import graph of src/', () => {
  it('names every folder of src/ in its layer order', () => {
    const folders = fs
      .readdirSync(SRC, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect(folders).toEqual([...LAYERS].sort());
  });

  it('has no arrow back up: each folder imports only from itself and the folders before it', () => {
    expect(arrowsUp()).toEqual([]);
  });
});
