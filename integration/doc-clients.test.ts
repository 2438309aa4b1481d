// @waits 40: pytest and a JUnit 5 run (javac, a JVM) under sqltally exec, on a private PostgreSQL.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runExec, type ExecIo } from '../src/cli/exec';
import { parseExecArgs } from '../src/cli/exec-options';
import { withSqlClient } from '../src/backends/sql-client';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import type { Window } from '../src/report/schema';
import { START_TIMEOUT_MS, describeEachBackend, withBackend } from './harness';

/**
 * The pytest fixture and the JUnit 5 extension of docs/exec.md, taken from the page as written and run: each under
 * `sqltally exec --named-windows` against a private PostgreSQL, with test files of our own that insert a known number
 * of rows per test. Each test must come back as one window, named as the page says, with its rows on every layer.
 */
jest.setTimeout(START_TIMEOUT_MS);

const DOC = path.join(__dirname, '..', 'docs', 'exec.md');
const PYTHON = '/usr/bin/python3';
const JAVA_DIR = '/usr/share/java';
const JUNIT_STANDALONE = path.join(JAVA_DIR, 'junit-platform-console-standalone.jar');
const JUNIT_API = path.join(JAVA_DIR, 'junit-jupiter-api.jar');
const PG_JDBC = path.join(JAVA_DIR, 'postgresql.jar');

/** The first code block of `lang` under the heading `heading` of docs/exec.md. */
function docBlock(markdown: string, heading: string, lang: string): string {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`docs/exec.md has no heading "${heading}"`);
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```').exec(markdown.slice(at));
  if (!m) throw new Error(`no \`\`\`${lang} block under "${heading}" in docs/exec.md`);
  return m[1]!;
}

function missing(checks: [boolean, string][]): string | null {
  const absent = checks.filter(([ok]) => !ok).map(([, what]) => what);
  return absent.length > 0 ? absent.join('; ') : null;
}

const pytestMissing = missing([
  [spawnSync(PYTHON, ['-c', 'import pytest']).status === 0, 'pytest not installed: apt-get install python3-pytest'],
  [spawnSync(PYTHON, ['-c', 'import psycopg2']).status === 0, 'psycopg2 not installed: apt-get install python3-psycopg2'],
]);
const junitMissing = missing([
  [spawnSync('sh', ['-c', 'command -v javac && command -v java']).status === 0, 'no JDK: apt-get install default-jdk-headless'],
  [fs.existsSync(JUNIT_STANDALONE) && fs.existsSync(JUNIT_API), 'JUnit 5 not installed: apt-get install junit5'],
  [fs.existsSync(PG_JDBC), 'PgJDBC not installed: apt-get install libpostgresql-jdbc-java'],
]);

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

async function sql(b: StartedBackend, text: string): Promise<Record<string, unknown>[]> {
  return withSqlClient('postgres', network(b), { backend: b.description.id }, (c) => c.query<Record<string, unknown>>(text));
}

function execOptions(argv: string[]) {
  const opts = parseExecArgs(argv);
  if (!opts) throw new Error('help');
  return opts;
}

function io(log: string): ExecIo {
  const fd = fs.openSync(log, 'a');
  return { env: process.env, stdio: ['ignore', fd, fd], progress: () => undefined };
}

/** Name, verdict and the rows each layer saw, per window. */
function figures(windows: readonly Window[]) {
  return windows.map((w) => ({
    name: w.name,
    source: w.source,
    verdict: w.verdict.kind,
    wireRows: w.layers.wire?.rowsAffected,
    serverRows: w.layers.server?.summary.rowsInserted,
    serverInserts: w.layers.server?.summary.inserts,
  }));
}

describeEachBackend(
  (b) => {
    const server = withBackend(b.id);
    const markdown = fs.readFileSync(DOC, 'utf8');
    let scratch = '';
    beforeAll(() => {
      scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-doc-clients-'));
    });
    afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));
    const log = (): string => path.join(scratch, 'command.log');
    const failedWith = (): string => (fs.existsSync(log()) ? fs.readFileSync(log(), 'utf8').slice(-3000) : '');

    (pytestMissing ? it.skip : it)(`the pytest fixture of docs/exec.md: one window per test, named after it, with its rows${pytestMissing ? ` (skipped: ${pytestMissing})` : ''}`, async () => {
      const dir = path.join(scratch, 'pytest');
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'conftest.py'), `${docBlock(markdown, '### A pytest fixture', 'python')}\n`);
      const table = `doc_py_${process.pid}`;
      await sql(server(), `DROP TABLE IF EXISTS ${table}; CREATE TABLE ${table} (a int)`);
      fs.writeFileSync(
        path.join(dir, 'test_items.py'),
        [
          'import os, psycopg2, pytest',
          '',
          '# Connected before the window begins (fixtures set up in the order named), closed after it ends.',
          '@pytest.fixture',
          'def conn():',
          "    c = psycopg2.connect(os.environ['DATABASE_URL'])",
          '    c.autocommit = True',
          '    yield c',
          '    c.close()',
          '',
          'def test_insert_one(conn, sqltally_window):',
          `    conn.cursor().execute("INSERT INTO ${table} VALUES (1)")`,
          '',
          'def test_insert_three(conn, sqltally_window):',
          `    conn.cursor().execute("INSERT INTO ${table} VALUES (1), (2), (3)")`,
          '',
        ].join('\n'),
      );
      const out = path.join(scratch, 'pytest-report');
      const argv = ['--named-windows', '--out', out, '--', PYTHON, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '--rootdir', dir, dir];
      const result = await runExec(execOptions(argv), server(), io(log()));
      expect({ exitCode: result.exitCode, log: result.exitCode === 0 ? '' : failedWith() }).toEqual({ exitCode: 0, log: '' });
      expect(figures(result.report?.windows ?? [])).toEqual([
        { name: 'test_insert_one', source: 'control', verdict: 'assert', wireRows: 1, serverRows: 1, serverInserts: 1 },
        { name: 'test_insert_three', source: 'control', verdict: 'assert', wireRows: 3, serverRows: 3, serverInserts: 1 },
      ]);
      const [row] = await sql(server(), `SELECT count(*) AS n FROM ${table}`);
      expect(Number(row?.n)).toBe(4);
    });

    (junitMissing ? it.skip : it)(`the JUnit 5 extension of docs/exec.md: one window per test, named after it, with its rows${junitMissing ? ` (skipped: ${junitMissing})` : ''}`, async () => {
      const dir = path.join(scratch, 'junit');
      const classes = path.join(dir, 'classes');
      fs.mkdirSync(classes, { recursive: true });
      // The page shows the class without its imports; these are the ones its code needs, nothing else is added.
      const imports = [
        'import java.net.URI;',
        'import java.net.URLEncoder;',
        'import java.net.http.HttpClient;',
        'import java.net.http.HttpRequest;',
        'import java.net.http.HttpResponse;',
        'import java.nio.charset.StandardCharsets;',
        'import org.junit.jupiter.api.extension.AfterEachCallback;',
        'import org.junit.jupiter.api.extension.BeforeEachCallback;',
        'import org.junit.jupiter.api.extension.ExtensionContext;',
      ];
      fs.writeFileSync(path.join(dir, 'SqltallyWindow.java'), `${imports.join('\n')}\n\n${docBlock(markdown, '### A JUnit 5 extension', 'java')}\n`);
      const table = `doc_junit_${process.pid}`;
      await sql(server(), `DROP TABLE IF EXISTS ${table}; CREATE TABLE ${table} (a int)`);
      fs.writeFileSync(
        path.join(dir, 'ItemsTest.java'),
        [
          'import java.sql.Connection;',
          'import java.sql.DriverManager;',
          'import java.sql.Statement;',
          'import org.junit.jupiter.api.AfterAll;',
          'import org.junit.jupiter.api.BeforeAll;',
          'import org.junit.jupiter.api.MethodOrderer;',
          'import org.junit.jupiter.api.Order;',
          'import org.junit.jupiter.api.Test;',
          'import org.junit.jupiter.api.TestMethodOrder;',
          'import org.junit.jupiter.api.extension.ExtendWith;',
          '',
          '@ExtendWith(SqltallyWindow.class)',
          '@TestMethodOrder(MethodOrderer.OrderAnnotation.class)',
          'public class ItemsTest {',
          '  // Connected once, before the first window begins.',
          '  static Connection conn;',
          '  @BeforeAll static void open() throws Exception {',
          '    conn = DriverManager.getConnection(System.getenv("SQLTALLY_JDBC_URL"), System.getenv("SQLTALLY_USER"), System.getenv("SQLTALLY_PASSWORD"));',
          '  }',
          '  @AfterAll static void close() throws Exception { conn.close(); }',
          `  @Test @Order(1) void insertOne() throws Exception { try (Statement s = conn.createStatement()) { s.executeUpdate("INSERT INTO ${table} VALUES (1)"); } }`,
          `  @Test @Order(2) void insertThree() throws Exception { try (Statement s = conn.createStatement()) { s.executeUpdate("INSERT INTO ${table} VALUES (1), (2), (3)"); } }`,
          '}',
          '',
        ].join('\n'),
      );
      const javac = spawnSync('javac', ['-cp', JUNIT_API, '-d', classes, path.join(dir, 'SqltallyWindow.java'), path.join(dir, 'ItemsTest.java')], { encoding: 'utf8' });
      expect({ status: javac.status, stderr: javac.stderr }).toEqual({ status: 0, stderr: '' });
      const out = path.join(scratch, 'junit-report');
      const argv = ['--named-windows', '--out', out, '--', 'java', '-jar', JUNIT_STANDALONE, '--disable-banner', '--fail-if-no-tests', '-cp', `${classes}:${PG_JDBC}`, '--select-class', 'ItemsTest'];
      const result = await runExec(execOptions(argv), server(), io(log()));
      expect({ exitCode: result.exitCode, log: result.exitCode === 0 ? '' : failedWith() }).toEqual({ exitCode: 0, log: '' });
      expect(figures(result.report?.windows ?? [])).toEqual([
        { name: 'insertOne()', source: 'control', verdict: 'assert', wireRows: 1, serverRows: 1, serverInserts: 1 },
        { name: 'insertThree()', source: 'control', verdict: 'assert', wireRows: 3, serverRows: 3, serverInserts: 1 },
      ]);
      const [row] = await sql(server(), `SELECT count(*) AS n FROM ${table}`);
      expect(Number(row?.n)).toBe(4);
    });
  },
  (b) => b.backend === 'postgres',
);
