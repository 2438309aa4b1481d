import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { PAGES, ROOT } from './pages';

/**
 * Every ```sh block in README.md, CONTRIBUTING.md and docs/*.md is checked, command by command, without the minutes
 * a documented command can take: `npx sqltally ...` runs the built CLI (bin/sqltally.js) with
 * SQLTALLY_CLI_CHECK_ARGS=1, which parses and checks the arguments and starts nothing; `npx jest ...` runs with
 * `--listTests`, so the files it would run are known; `npm run`, `npm start` and `npm test` name a script of
 * package.json; `npm install` names sqltally and its peer dependencies; `npx tsx <file>` names a file that declares
 * each flag given. A command with no rule fails. A block that is not to be checked says why on the line above it:
 * `<!-- sh: not run: <reason> -->`, and shows as a skipped test with that reason. The GitHub Actions workflows of the
 * docs (```yaml) are checked the same way, for their `run:` steps that call sqltally, npm or jest.
 */
const BLOCK = /(?:<!-- sh: not run: (.*?) -->\n)?```sh\n([\s\S]*?)\n```/g;
const CLI = join(ROOT, 'bin', 'sqltally.js');
const RUN_TIMEOUT_MS = 120_000;
const run = promisify(execFile);

interface ShBlock {
  where: string;
  text: string;
  notRun: string | undefined;
}

function shBlocks(): ShBlock[] {
  return PAGES.flatMap((page) => {
    const md = readFileSync(join(ROOT, page), 'utf8');
    return [...md.matchAll(BLOCK)].map((m) => ({
      where: `${page}:${md.slice(0, m.index).split('\n').length + (m[1] !== undefined ? 1 : 0)}`,
      text: m[2]!,
      notRun: m[1],
    }));
  });
}

const YAML_BLOCK = /```yaml\n([\s\S]*?)\n```/g;
/** The tools a workflow's `run:` step is checked for; its other steps (`cat ... >> $GITHUB_STEP_SUMMARY`) are the CI's. */
const WORKFLOW_TOOLS = /^(npx sqltally|npm|npx jest) /;

/**
 * The `run:` steps of the GitHub Actions workflows in the docs that call sqltally, npm or jest, as one sh block per
 * workflow, `${{ matrix.<name> }}` replaced by each value the matrix lists.
 */
function workflowBlocks(): ShBlock[] {
  return PAGES.flatMap((page) => {
    const md = readFileSync(join(ROOT, page), 'utf8');
    return [...md.matchAll(YAML_BLOCK)].map((m) => {
      const yaml = m[1]!;
      const matrix = new Map([...yaml.matchAll(/^\s+(\w+): \[(.*)\]$/gm)].map((v) => [v[1]!, v[2]!.split(',').map((x) => x.trim())]));
      const steps = [...yaml.matchAll(/^\s+(?:- )?run: (.+)$/gm)].map((r) => r[1]!.trim()).filter((r) => WORKFLOW_TOOLS.test(r));
      const expanded = steps.flatMap((step) => {
        const name = /\$\{\{ matrix\.(\w+) \}\}/.exec(step)?.[1];
        const values = name ? (matrix.get(name) ?? [`(no matrix value for ${name})`]) : [undefined];
        return values.map((v) => (name ? step.replaceAll(`\${{ matrix.${name} }}`, v!) : step));
      });
      return { where: `${page}:${md.slice(0, m.index).split('\n').length} (workflow run: steps)`, text: expanded.join('\n'), notRun: undefined };
    });
  });
}

/** One simple command of a block: its variable assignments, its words, and the line it starts on. */
interface Command {
  line: number;
  env: Record<string, string>;
  words: string[];
}

/**
 * Splits a block into simple commands as sh would (quotes, backslashes, comments, `&&`, `||`, `;`, `|`, newlines),
 * expanding nothing. Redirections and substitutions at the top level are refused: no rule here checks them.
 */
function parseShell(text: string): Command[] {
  const commands: Command[] = [];
  let words: string[] = [];
  let word: string | null = null;
  let line = 1;
  let start = 1;
  const endWord = (): void => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endCommand = (): void => {
    endWord();
    if (words.length > 0) {
      const env: Record<string, string> = {};
      while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
        const [name, ...value] = words.shift()!.split('=');
        env[name!] = value.join('=');
      }
      commands.push({ line: start, env, words });
    }
    words = [];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (words.length === 0 && word === null && /\S/.test(c)) start = line;
    if (c === '\n') line++;
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new Error(`line ${line}: unterminated '`);
      const quoted = text.slice(i + 1, end);
      line += quoted.split('\n').length - 1;
      word = (word ?? '') + quoted;
      i = end;
    } else if (c === '"') {
      let quoted = '';
      for (i++; i < text.length && text[i] !== '"'; i++) {
        if (text[i] === '\\' && /["\\$`\n]/.test(text[i + 1] ?? '')) i++;
        if (text[i] === '\n') line++;
        quoted += text[i];
      }
      if (i >= text.length) throw new Error(`line ${line}: unterminated "`);
      word = (word ?? '') + quoted;
    } else if (c === '\\') {
      const next = text[++i];
      if (next === '\n') line++;
      else if (next !== undefined) word = (word ?? '') + next;
    } else if (c === '#' && word === null) {
      while (i + 1 < text.length && text[i + 1] !== '\n') i++;
    } else if (c === '\n' || c === ';' || c === '|' || c === '&') {
      if ((c === '|' || c === '&') && text[i + 1] === c) i++;
      endCommand();
    } else if (c === ' ' || c === '\t') {
      endWord();
    } else if ((c === '>' || c === '<' || c === '`' || (c === '$' && text[i + 1] === '(')) && word === null) {
      throw new Error(`line ${line}: a redirection or substitution ("${c}") at the top level: give it a rule or mark the block not run`);
    } else {
      word = (word ?? '') + c;
    }
  }
  endCommand();
  return commands;
}

const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  scripts: Record<string, string>;
  peerDependencies: Record<string, string>;
};

/** What `sqltally` says to a command line in check-arguments mode: '' when it accepted it, else why not. */
async function checkSqltally(args: string[], env: Record<string, string>): Promise<string> {
  const executable = args.indexOf('--');
  // `exec ... -- sh -c '<script>'`: the script is checked for syntax too.
  const child = executable >= 0 ? args.slice(executable + 1) : [];
  if (/^(ba)?sh$/.test(child[0] ?? '') && child[1] === '-c') {
    const syntax = spawnSync(child[0]!, ['-n', '-c', child[2] ?? ''], { encoding: 'utf8' });
    if (syntax.status !== 0) return `the ${child[0]} -c script does not parse: ${syntax.stderr.trim()}`;
  }
  try {
    const { stderr } = await run(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env, SQLTALLY_CLI_CHECK_ARGS: '1' },
      timeout: RUN_TIMEOUT_MS,
    });
    return /arguments accepted/.test(stderr) ? '' : `exit 0 without checking its arguments: ${stderr.trim() || '(nothing on stderr)'}`;
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string; message: string };
    return `exit ${String(e.code)}: ${(e.stderr ?? e.message).trim()}`;
  }
}

/** Path patterns among jest's arguments: the words that name a folder or a file (option values such as a project name do not). */
const JEST_PATH = /\/|\.test\.ts$/;

async function checkJest(args: string[], env: Record<string, string>): Promise<string> {
  let listed: string[];
  try {
    // --listTests first: after the command's own `--` it would be a path pattern, and the files would run.
    const { stdout } = await run(process.execPath, [join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), '--listTests', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      timeout: RUN_TIMEOUT_MS,
    });
    listed = stdout
      .split('\n')
      .filter((l) => l.startsWith('/'))
      .map((l) => relative(ROOT, l));
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string; message: string };
    return `jest exit ${String(e.code)}: ${(e.stderr ?? e.message).trim().split('\n').slice(-3).join(' / ')}`;
  }
  if (listed.length === 0) return 'jest would run no test file';
  const patterns = args.filter((a) => !a.startsWith('-') && JEST_PATH.test(a));
  const unmatched = patterns.filter((p) => !listed.some((f) => f.includes(p)));
  if (unmatched.length > 0) return `no test file matches ${unmatched.join(', ')}`;
  const extra = patterns.length > 0 ? listed.filter((f) => !patterns.some((p) => f.includes(p))) : [];
  if (extra.length > 0)
    return `jest would run ${listed.length} files, not only ${patterns.join(', ')} (a path taken as an option's value?): ${extra.slice(0, 3).join(', ')}, ...`;
  return '';
}

function checkTsx(args: string[]): string {
  const [file, ...flags] = args;
  if (!file || !existsSync(join(ROOT, file))) return `no file ${file ?? '(none)'}`;
  const source = readFileSync(join(ROOT, file), 'utf8');
  const missing = flags
    .filter((f) => f.startsWith('--'))
    .map((f) => f.slice(2).split('=')[0]!)
    .filter((name) => !new RegExp(`['"]?${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}['"]?\\s*:\\s*\\{\\s*type\\s*:`).test(source));
  return missing.length > 0 ? `${file} declares no option ${missing.map((m) => `--${m}`).join(', ')}` : '';
}

function checkScript(name: string | undefined): string {
  return name && PACKAGE.scripts[name] !== undefined ? '' : `package.json has no script "${name ?? ''}"`;
}

/** How each command is checked, by its first words. */
async function check(c: Command): Promise<string> {
  const [first, second, ...rest] = c.words;
  const tool = first === 'npx' ? second : first;
  const args = first === 'npx' ? rest : [second!, ...rest].filter((w) => w !== undefined);
  if (tool === 'sqltally') return checkSqltally(args, c.env);
  if (tool === 'jest') return checkJest(args, c.env);
  if (first === 'npx' && tool === 'tsx') return checkTsx(args);
  if (first === 'npm') {
    if (second === 'ci') return rest.length === 0 ? '' : `npm ci ${rest.join(' ')}: no rule for its arguments`;
    if (second === 'start' || second === 'test') return checkScript(second);
    if (second === 'run') return checkScript(rest[0]);
    if (second === 'install' || second === 'i') {
      const packages = rest.filter((w) => !w.startsWith('-')).map((p) => p.replace(/(.)@.*$/, '$1'));
      const unknown = packages.filter((p) => p !== PACKAGE.name && PACKAGE.peerDependencies[p] === undefined);
      return unknown.length > 0 ? `npm install names ${unknown.join(', ')}: neither ${PACKAGE.name} nor one of its peer dependencies` : '';
    }
  }
  return `no rule checks "${c.words.slice(0, 2).join(' ')}": give it one here, or mark the block <!-- sh: not run: <reason> -->`;
}

async function failures(text: string): Promise<string[]> {
  const found: string[] = [];
  for (const c of parseShell(text)) {
    const why = await check(c);
    if (why) found.push(`line ${c.line}: ${c.words.join(' ')}: ${why}`);
  }
  return found;
}

describe('shell blocks in the README and docs', () => {
  beforeAll(() => {
    // The CLI checked is the built one, as `npx sqltally` runs it: built afresh when a source is newer.
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'ensure-built.js')], { cwd: ROOT, stdio: 'inherit' });
  }, 300_000);

  const all = [...shBlocks(), ...workflowBlocks()];

  it('there are blocks to check', () => {
    expect(all.filter((b) => b.notRun === undefined).length).toBeGreaterThanOrEqual(10);
  });

  for (const b of all) {
    if (b.notRun !== undefined) {
      it.skip(`${b.where}: not run: ${b.notRun || '(no reason given)'}`, () => undefined);
      continue;
    }
    it(
      `${b.where}: every command is accepted`,
      async () => {
        expect(await failures(b.text)).toEqual([]);
      },
      RUN_TIMEOUT_MS * 4,
    );
  }

  it('a not-run mark gives its reason', () => {
    expect(all.filter((b) => b.notRun !== undefined && b.notRun.trim() === '').map((b) => b.where)).toEqual([]);
  });

  // The checks themselves can fail: a renamed flag, an unknown command, a path jest would take for a project name.
  it.each([
    ['npx sqltally exec --backend postgres --named-window -- pytest -q', /unknown option --named-window/],
    ['npx sqltally run --strategies mariadb.no-such-strategy --no-write', /exit 2: sqltally run: --strategies/],
    ['npx sqltally backends --check nosuch', /unknown backend "nosuch"/],
    ["npx sqltally exec --backend postgres -- sh -c 'if true; then'", /does not parse/],
    ['npx jest --selectProjects integration integration/probes.test.ts', /not only integration\/probes\.test\.ts/],
    ['npm run no-such-script', /no script "no-such-script"/],
    ['npm install --save-dev sqltally left-pad', /names left-pad/],
    ['npx tsx bench/driver-paths.ts --pairs 9 --call 10000', /declares no option --call/],
    ['psql -f load.sql', /no rule checks "psql -f"/],
  ])(
    'a wrong line fails: %s',
    async (line, why) => {
      const found = await failures(line);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(why);
    },
    RUN_TIMEOUT_MS,
  );

  it('splits a block as sh does', () => {
    expect(parseShell("A=1 B='x y' npx sqltally run --rows 5 \\\n  --json   # note\nnpm ci && npm start; echo \"a\\\"b\" 'c\nd'")).toEqual([
      { line: 1, env: { A: '1', B: 'x y' }, words: ['npx', 'sqltally', 'run', '--rows', '5', '--json'] },
      { line: 3, env: {}, words: ['npm', 'ci'] },
      { line: 3, env: {}, words: ['npm', 'start'] },
      { line: 3, env: {}, words: ['echo', 'a"b', 'c\nd'] },
    ]);
    expect(() => parseShell('npx sqltally run > out.txt')).toThrow(/redirection/);
  });
});
