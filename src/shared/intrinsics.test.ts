import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * Functions run per call, packet, value or row, by file: each takes its built-ins from `src/shared/intrinsics.ts`
 * (a global lookup under Jest is dear). Nested functions are checked with their holder; `throw` and `catch` are not.
 */
const PER_CALL: Record<string, readonly string[]> = {
  'src/driver/counted.ts': [
    'emit',
    'callStart',
    'callEnd',
    'track',
    'trackCallback',
    'isThenable',
    'countExpandedValues',
    'countList',
    'countObject',
    'callerAtCall',
    'memoShape',
    'countParameterValues',
    'isPlainObject',
    'toCount',
    'get',
  ],
  'src/driver/compat/path.ts': ['sourceOf'],
  'src/driver/better-sqlite3.ts': [
    'countSqliteParams',
    'firstOf',
    'scalar',
    'objectParams',
    'countedExecution',
    'countedBind',
    'objectAmong',
    'runChanges',
    'askSteady',
    'callerFor',
  ],
  'src/driver/mysql2.ts': [
    'mysql2RowsAffected',
    'isResultSetHeader',
    'promiseRows',
    'promiseCalls',
    'viewHooks',
    'callbackCalls',
    'callbackCall',
    'callbackStatementExecute',
    'valuesOf',
    'queryShape',
    'executeShape',
    'wrapPromiseStatement',
    'wrapCallbackStatement',
    'sqlOf',
  ],
  'src/driver/compat/mysql2.ts': ['readsCore'],
  'src/driver/mariadb.ts': ['mariadbRowsAffected', 'isOkPacket', 'countBatch', 'commonHooks', 'wrapStatement', 'valuesOf', 'sqlOf'],
  'src/driver/pg.ts': ['pgRowsAffected', 'queryShape', 'countedQuery', 'pgProtocol', 'callbackInConfig', 'throughCallback', 'restack'],
  'src/driver/postgres-js.ts': ['isPromiseLike'],
  'src/driver/compat/postgres-js.ts': [
    'callerAtBuild',
    'askedText',
    'countWhenRun',
    'countingHandler',
    'startRun',
    'settle',
    'protocolOf',
    'rowsOf',
    'keepOrigin',
    'originKey',
    'templateOrigin',
    'templateOf',
  ],
  'src/driver/driver-layer.ts': [
    'toNs',
    'comparableValues',
    'scalarList',
    'comparable',
    'sameValues',
    'add',
    '#keep',
    'record',
    'inFlight',
    'letGo',
    'needsCaller',
    'askAnswered',
    'steadyCounter',
    'count',
    'open',
  ],
  'src/capture/deferred-work.ts': [
    '#settled',
    'init',
    'before',
    'after',
    'onSettled',
    '#entry',
    '#followPromise',
    '#enter',
    '#leave',
    '#keepCarried',
    '#keep',
    '#sweep',
    '#captureUncaptured',
  ],
  'src/shared/caller.ts': ['captureCaller', 'structuredSites', 'userFrameIndex', 'fileOf', 'isLibraryFile', 'captureText', 'rememberDepth'],
  'src/wire/mysql-protocol.ts': [
    'parse',
    'fromClient',
    'fromServer',
    '#clientFrame',
    '#command',
    '#serverFrame',
    '#reply',
    '#firstPacket',
    '#row',
    '#columnUntilEof',
    '#intermediateEof',
    '#endOfResult',
    '#nextStep',
    '#finish',
    '#checkClientSeq',
    '#checkServerSeq',
  ],
  'src/server/mysql-family.ts': ['#readGlobalStatus'],
  'src/wire/pg-protocol.ts': [
    'parse',
    '#record',
    'fromClient',
    'fromServer',
    '#release',
    '#clientFrame',
    '#frontendMessage',
    '#serverFrame',
    '#backendMessage',
    '#checkFrontendType',
    '#checkBackendType',
  ],
  'src/wire/pg-statements.ts': ['readCommandTag', 'nulAt', 'decode', 'query', 'parse', 'bind', 'execute', '#readTag', 'commandComplete', '#rows'],
  'src/wire/last-text.ts': ['isDigit', 'match', 'keep'],
  'src/workload/rows.ts': ['mix32', 'codePoints', 'rowAt', 'textC3', 'textC6', 'doubleC4', 'bigintC5', 'checksumOf', 'columnProblem', 'assertRows'],
  'src/workload/read.ts': ['toInteger', 'toBigint', 'toText', 'toRow'],
  'src/workload/verify.ts': ['asBigint', 'sameRow'],
};

/** Globals a per-call function might reach for; intrinsics.ts holds what the code needs of them. */
const GLOBALS = new Set([
  'Math',
  'Number',
  'Array',
  'Object',
  'Reflect',
  'Date',
  'BigInt',
  'Buffer',
  'String',
  'Boolean',
  'Symbol',
  'JSON',
  'performance',
  'process',
  'Error',
  'Map',
  'Set',
  'WeakMap',
  'Promise',
  'parseInt',
  'parseFloat',
  'isNaN',
  'isFinite',
]);

function nameOf(node: ts.Node, sf: ts.SourceFile): string | null {
  if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isFunctionExpression(node)) {
    if (node.name) return node.name.getText(sf);
  }
  if ((ts.isArrowFunction(node) || ts.isFunctionExpression(node)) && ts.isVariableDeclaration(node.parent)) return node.parent.name.getText(sf);
  return null;
}

/** An identifier read as a value: not a property name, a declaration's name or part of a type. */
function readsValue(id: ts.Identifier): boolean {
  const parent = id.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === id) return false;
  if ((ts.isPropertyAssignment(parent) || ts.isMethodDeclaration(parent) || ts.isPropertyDeclaration(parent)) && parent.name === id) return false;
  // Their names only: `const m = Math` reads the global in its initializer.
  if ((ts.isVariableDeclaration(parent) || ts.isParameter(parent) || ts.isBindingElement(parent)) && parent.name === id) return false;
  for (let p: ts.Node | undefined = parent; p; p = p.parent) if (ts.isTypeNode(p)) return false;
  return true;
}

/** `name: Global` for every global read inside the named functions; the names of the functions found. */
export function globalReads(file: string, text: string, functions: readonly string[]): { reads: string[]; found: Set<string> } {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const reads: string[] = [];
  const found = new Set<string>();
  const visit = (node: ts.Node, inside: string | null): void => {
    if (ts.isThrowStatement(node) || ts.isCatchClause(node)) return;
    const name = nameOf(node, sf);
    const here = inside ?? (name !== null && functions.includes(name) ? name : null);
    if (here !== null && inside === null) found.add(here);
    if (here !== null && ts.isIdentifier(node) && GLOBALS.has(node.text) && readsValue(node)) {
      reads.push(`${file}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1} ${here}: ${node.text}`);
    }
    ts.forEachChild(node, (child) => visit(child, here));
  };
  visit(sf, null);
  return { reads, found };
}

describe('per-call functions read no globals (src/shared/intrinsics.ts)', () => {
  it.each(Object.entries(PER_CALL))('%s', (file, functions) => {
    const { reads, found } = globalReads(file, fs.readFileSync(path.join(ROOT, file), 'utf8'), functions);
    // A renamed function must be renamed here too, or the check would pass over nothing.
    expect([...found].sort()).toEqual([...functions].sort());
    expect(reads).toEqual([]);
  });

  it('finds a global read in a listed function, nested or not, and not in a throw or elsewhere', () => {
    const text = [
      'const max = Math.max;',
      'function hot(a: number): number {',
      '  const inner = () => Math.min(a, 1);',
      '  const alias = Math, { floor } = Math;',
      '  if (a < 0) throw new Error(String(a));',
      '  const b: Array<number> = [];',
      '  return inner() + b.length + max(a, 2) + alias.abs(floor(a)) + Number.MAX_SAFE_INTEGER;',
      '}',
      'function cold(): number { return Math.random(); }',
    ].join('\n');
    const { reads, found } = globalReads('x.ts', text, ['hot']);
    expect([...found]).toEqual(['hot']);
    expect(reads).toEqual(['x.ts:3 hot: Math', 'x.ts:4 hot: Math', 'x.ts:4 hot: Math', 'x.ts:7 hot: Number']);
  });
});
