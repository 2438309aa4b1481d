import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { BACKEND_NAMES, FlavourSchema } from './backends/types';
import { DRIVER_NAMES } from './shared/driver-names';
import { driverModule } from './driver/registry';
import { PROTOCOLS } from './backends/protocols';
import { SQL_DIALECTS } from './sql/dialects';

/**
 * The registries are closed: the shared steps ask the modules, so none may name a driver in a string, compare with,
 * switch on or default to one (`?? 'mysql'` sends a third protocol down MySQL's path unseen). Comments may name them.
 */
const SHARED = ['capture', 'verdict', 'report', 'cli', 'run', 'jest', 'workload'];
const ROOT = __dirname;

/**
 * Folders of shared code that hold one module per driver or dialect, and the registry (`index.ts`) that lists them:
 * a named module there states its own facts, and only files of the folder import it.
 */
const MODULE_FOLDERS: { folder: string; why: string }[] = [
  { folder: 'workload/strategies', why: 'the insert strategies of one driver per file (`pg.ts`), listed in STRATEGIES' },
  { folder: 'workload/dialects', why: 'the workload SQL of one dialect per file (`mysql.ts`), listed by dialect name' },
];

/** Whether `file` (relative to src/) is the module of one name inside a module folder. */
function isOwnModule(file: string): boolean {
  return MODULE_FOLDERS.some((m) => dirname(file) === m.folder) && isNamedModule(file);
}

/** Whether `spec`, imported by `file`, is a named module beside it in a module folder (its registry listing it). */
function importsOwnFolder(file: string, spec: string): boolean {
  const target = relative(ROOT, resolve(ROOT, dirname(file), spec));
  return dirname(target) === dirname(file) && isOwnModule(target);
}

/**
 * What truly must stay, each with why. `file` relative to src/, `text` the offending source text. An entry that
 * no longer matches anything fails the test too, so the list cannot rot.
 */
const ALLOWED: { file: string; text: string; why: string }[] = [];

const DRIVER_WORDS = new Set<string>([...DRIVER_NAMES, ...DRIVER_NAMES.map((d) => driverModule(d).packageName)]);
const PLACE_WORDS = new Set<string>([...BACKEND_NAMES, ...FlavourSchema.options, ...Object.keys(PROTOCOLS)]);
const ALL_WORDS = new Set<string>([...DRIVER_WORDS, ...PLACE_WORDS]);
/** Names that are both a driver and a backend (`mariadb`) or package and backend (`postgres`): only comparisons count. */
const DRIVER_ONLY = new Set([...DRIVER_WORDS].filter((w) => !PLACE_WORDS.has(w)));

interface Finding {
  file: string;
  line: number;
  text: string;
  rule: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.fixture.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

function literalText(node: ts.Node): string | null {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) ? node.text : null;
}

/** The type of a table with one entry per driver, backend, flavour or protocol. */
const KEYED_BY_NAME = /Record<\s*(BackendName|Flavour|WireProtocol|DriverName)\b|\bin (BackendName|Flavour|WireProtocol|DriverName)\]/;

/** What counts as naming one of them: the names, and the types of a table keyed by them. */
interface NameRules {
  words: ReadonlySet<string>;
  keyedBy: RegExp;
  /** Whether a name as a literal type (`flavour: 'mysql' | 'mariadb'`) counts too. */
  literalTypes: boolean;
}
const SHARED_RULES: NameRules = { words: ALL_WORDS, keyedBy: KEYED_BY_NAME, literalTypes: false };

const COMPARISONS = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);

/** What in `text` (a TypeScript file) names a driver, backend, flavour or protocol in code. */
export function findNameChecks(file: string, text: string, rules: NameRules = SHARED_RULES): Finding[] {
  const { words } = rules;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Finding[] = [];
  const report = (node: ts.Node, rule: string): void => {
    out.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text: node.getText(source), rule });
  };
  const visit = (node: ts.Node): void => {
    const literal = literalText(node);
    if (literal !== null && DRIVER_ONLY.has(literal)) report(node, 'driver name');
    if (ts.isBinaryExpression(node)) {
      const left = literalText(node.left);
      const right = literalText(node.right);
      const named = (s: string | null): boolean => s !== null && words.has(s);
      if (COMPARISONS.has(node.operatorToken.kind) && (named(left) || named(right))) report(node, 'comparison with a name');
      if (node.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken && named(right)) report(node, 'default to a name');
    }
    // A table literal keyed by names (`{ mysql: ..., postgres: ... } satisfies Record<Flavour, ...>`) is a fact per name.
    const typed = ts.isSatisfiesExpression(node) || ts.isAsExpression(node) ? node : ts.isVariableDeclaration(node) && node.type ? node : null;
    if (typed?.type && rules.keyedBy.test(typed.type.getText(source))) {
      let value: ts.Node | undefined = ts.isVariableDeclaration(typed) ? typed.initializer : typed.expression;
      while (value && (ts.isAsExpression(value) || ts.isSatisfiesExpression(value) || ts.isParenthesizedExpression(value))) value = value.expression;
      if (value && ts.isObjectLiteralExpression(value)) report(typed.type, 'table keyed by names');
    }
    if (ts.isCaseClause(node)) {
      const label = literalText(node.expression);
      if (label !== null && words.has(label)) report(node.expression, 'case on a name');
    }
    if (rules.literalTypes && ts.isLiteralTypeNode(node) && ts.isStringLiteral(node.literal) && words.has(node.literal.text)) report(node, 'name as a type');
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

describe('closed registries', () => {
  const findings = SHARED.flatMap((folder) =>
    sourceFiles(join(ROOT, folder))
      .filter((path) => !isOwnModule(relative(ROOT, path)))
      .flatMap((path) => findNameChecks(relative(ROOT, path), readFileSync(path, 'utf8'))),
  );
  const allowed = (f: Finding): boolean => ALLOWED.some((a) => a.file === f.file && f.text.includes(a.text));

  it('shared code names no driver and branches on no backend, flavour or protocol name', () => {
    expect(findings.filter((f) => !allowed(f)).map((f) => `${f.file}:${f.line} ${f.rule}: ${f.text}`)).toEqual([]);
  });

  it('every allowance still matches something', () => {
    expect(ALLOWED.filter((a) => !findings.some((f) => f.file === a.file && f.text.includes(a.text)))).toEqual([]);
  });

  it('finds what it is meant to find', () => {
    const found = findNameChecks(
      'x.ts',
      [
        "import Database from 'better-sqlite3';",
        "const q = protocol === 'mysql' ? '`' : '\"';",
        "const p = capabilities.wireProtocol ?? 'mysql';",
        "switch (flavour) { case 'postgres': break; }",
        "if ('sqlite' !== backend.name) {}",
        '// a comment naming pg and mysql2 is fine',
        'const d = DRIVERS[name];',
        "const DIALECTS = { mysql: 'mysql', postgres: 'postgres' } as const satisfies Record<Flavour, string>;",
        'const built = Object.fromEntries(DRIVER_NAMES.map((d) => [d, 1])) as Record<DriverName, number>;',
      ].join('\n'),
    ).map((f) => [f.line, f.rule]);
    expect(found).toEqual([
      [1, 'driver name'],
      [2, 'comparison with a name'],
      [3, 'default to a name'],
      [4, 'case on a name'],
      [5, 'comparison with a name'],
      [8, 'table keyed by names'],
    ]);
  });
});

/**
 * sql/ and backends/ hold one module per dialect or backend beside files that serve every one of them: those may
 * name none, not even as a type. A registry here states facts per name by design, each with why.
 */
const BELOW_SHARED = ['sql', 'backends'];
const REGISTRIES: { file: string; why: string }[] = [
  { file: 'sql/dialects.ts', why: 'DIALECTS: the lexical and naming rules of each SQL dialect' },
  { file: 'backends/registry.ts', why: 'BACKENDS: the module of each backend' },
  { file: 'backends/capabilities.ts', why: 'CAPABILITIES: what a server of each flavour can give' },
  { file: 'backends/protocols.ts', why: 'PROTOCOLS: the module of each wire protocol' },
];
const BELOW_SHARED_RULES: NameRules = {
  words: new Set([...ALL_WORDS, ...SQL_DIALECTS]),
  keyedBy: new RegExp(`${KEYED_BY_NAME.source}|Record<\\s*(SqlDialect|ServerDialect)\\b`),
  literalTypes: true,
};

describe('modules that serve every dialect and backend', () => {
  const findings = BELOW_SHARED.flatMap((folder) =>
    sourceFiles(join(ROOT, folder))
      .map((path) => relative(ROOT, path))
      .filter((file) => !isNamedModule(file) && !REGISTRIES.some((r) => r.file === file))
      .flatMap((file) => findNameChecks(file, readFileSync(join(ROOT, file), 'utf8'), BELOW_SHARED_RULES)),
  );

  it('name no dialect, backend, flavour or protocol (each states its facts in its own module or a registry)', () => {
    expect(findings.map((f) => `${f.file}:${f.line} ${f.rule}: ${f.text}`)).toEqual([]);
  });

  it('lists registries that exist', () => {
    expect(REGISTRIES.filter((r) => !sourceFiles(join(ROOT, dirname(r.file))).includes(join(ROOT, r.file)))).toEqual([]);
  });

  it.each([
    ["const quote = dialect === 'mysql' ? '`' : '\"';", ['comparison with a name']],
    ["if (word === 'VALUE' && dialect !== 'generic') {}", ['comparison with a name']],
    ["interface Layout { flavour: 'mysql' | 'mariadb' }", ['name as a type', 'name as a type']],
    ["const OPTIONS: Record<'mariadb' | 'mysql', string[]> = { mariadb: [], mysql: [] };", ['name as a type', 'name as a type']],
    ['const CACHES: Record<SqlDialect, number> = { mysql: 1, postgres: 2, sqlite: 3, generic: 4 };', ['table keyed by names']],
    ['const rules = DIALECTS[dialect];', []],
  ])('finds what it is meant to find in %s', (line, rules) => {
    expect(findNameChecks('x.ts', line, BELOW_SHARED_RULES).map((f) => f.rule)).toEqual(rules);
  });
});

/**
 * How a driver package is loaded and opened is a fact about the driver: only its module in driver/ loads it. An
 * entry here is a file that must load one itself, with why.
 */
const PACKAGE_LOADERS: { file: string; pkg: string; why: string }[] = [
  { file: 'backends/sqlite.ts', pkg: 'better-sqlite3', why: 'the embedded backend creates and identifies its database file with the engine it ships on' },
];

/** Every driver package a file loads at run time (`import ... from`, `import()`, `require`); `import type` is free. */
export function packagesLoaded(file: string, text: string, packages: readonly string[]): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const note = (spec: string): void => {
    const pkg = packages.find((p) => spec === p || spec.startsWith(`${p}/`));
    if (pkg) out.push(pkg);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier)) note(node.moduleSpecifier.text);
    if (
      ts.isCallExpression(node) &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0]) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))
    )
      note(node.arguments[0].text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

describe('driver packages', () => {
  const packages = DRIVER_NAMES.map((d) => driverModule(d).packageName);
  const loads = readdirSync(ROOT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name !== 'driver')
    .flatMap((e) => sourceFiles(join(ROOT, e.name)))
    .flatMap((path) => packagesLoaded(relative(ROOT, path), readFileSync(path, 'utf8'), packages).map((pkg) => ({ file: relative(ROOT, path), pkg })));

  it('are loaded by their driver module only', () => {
    const allowed = (l: { file: string; pkg: string }): boolean => PACKAGE_LOADERS.some((a) => a.file === l.file && a.pkg === l.pkg);
    expect(loads.filter((l) => !allowed(l)).map((l) => `${l.file} loads ${l.pkg}`)).toEqual([]);
    expect(PACKAGE_LOADERS.filter((a) => !loads.some((l) => l.file === a.file && l.pkg === a.pkg))).toEqual([]);
  });

  it('finds what it is meant to find', () => {
    const text = [
      "import type { Pool } from 'pg';",
      "import mysql from 'mysql2/promise';",
      "const m = await import('mariadb');",
      "const p = require('postgres');",
      "import x from 'pg-protocol';",
    ].join('\n');
    expect(packagesLoaded('x.ts', text, packages)).toEqual(['mysql2', 'mariadb', 'postgres']);
  });
});

/** A module of one driver, backend, flavour or protocol: its file is named after it (`server/mysql-family.ts` too). */
function isNamedModule(target: string): boolean {
  const base = target.replace(/\.ts$/, '').split('/').pop() ?? '';
  return ALL_WORDS.has(base) || (DRIVER_NAMES as readonly string[]).includes(base) || base.endsWith('-family');
}

/** The relative imports of a file that land on a named module. */
export function namedModuleImports(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const spec = node.moduleSpecifier.text;
      if (spec.startsWith('.') && isNamedModule(spec)) out.push(spec);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

describe('shared code asks the registries', () => {
  it('imports no module of one driver, backend, flavour or protocol (what one of them declares, it reads through a registry)', () => {
    const found = SHARED.flatMap((folder) =>
      sourceFiles(join(ROOT, folder)).flatMap((path) =>
        namedModuleImports(relative(ROOT, path), readFileSync(path, 'utf8'))
          .filter((s) => !importsOwnFolder(relative(ROOT, path), s))
          .map((s) => `${relative(ROOT, path)} imports ${s}`),
      ),
    );
    expect(found).toEqual([]);
  });

  it('lists module folders that exist and hold named modules', () => {
    for (const { folder } of MODULE_FOLDERS) {
      expect(sourceFiles(join(ROOT, folder)).filter((path) => isOwnModule(relative(ROOT, path))).length).toBeGreaterThan(1);
    }
  });

  it('finds what it is meant to find', () => {
    const text = [
      "import { REPREPARE } from '../server/mysql-family';",
      "import { x } from '../driver/pg';",
      "import { y } from '../server';",
      "import z from 'pg';",
    ].join('\n');
    expect(namedModuleImports('x.ts', text)).toEqual(['../server/mysql-family', '../driver/pg']);
  });
});
