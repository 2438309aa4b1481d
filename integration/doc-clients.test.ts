// @waits 120: pytest, a JUnit 5 run (javac, a JVM) and a Django project under sqltally exec, on private servers.
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
 * The pytest fixture, JUnit 5 extension and Django recipe of docs/exec.md, run as written under `sqltally exec
 * --named-windows` with tests inserting known rows: one window per name, its statements and rows on every layer.
 */
jest.setTimeout(START_TIMEOUT_MS);

const DOC = path.join(__dirname, '..', 'docs', 'exec.md');
const PYTHON = '/usr/bin/python3';
const JAVA_DIR = '/usr/share/java';
const JUNIT_STANDALONE = path.join(JAVA_DIR, 'junit-platform-console-standalone.jar');
const JUNIT_API = path.join(JAVA_DIR, 'junit-jupiter-api.jar');
/** The client each case connects with, per backend: the ones docs/exec.md names under each recipe. */
const CLIENTS = {
  postgres: {
    pythonModule: 'psycopg2',
    pythonPackage: 'python3-psycopg2',
    pythonConnect: "psycopg2.connect(os.environ['DATABASE_URL'])",
    pythonAutocommit: 'c.autocommit = True',
    jdbcJar: path.join(JAVA_DIR, 'postgresql.jar'),
    jdbcPackage: 'libpostgresql-jdbc-java',
  },
  mariadb: {
    pythonModule: 'MySQLdb',
    pythonPackage: 'python3-mysqldb',
    pythonConnect:
      "MySQLdb.connect(host=os.environ['MYSQL_HOST'], port=int(os.environ['MYSQL_TCP_PORT']), user=os.environ['MYSQL_USER'], passwd=os.environ['MYSQL_PWD'], db=os.environ['MYSQL_DATABASE'])",
    pythonAutocommit: 'c.autocommit(True)',
    jdbcJar: path.join(JAVA_DIR, 'mariadb-java-client.jar'),
    jdbcPackage: 'libmariadb-java',
  },
  mysql: {
    pythonModule: 'MySQLdb',
    pythonPackage: 'python3-mysqldb',
    pythonConnect:
      "MySQLdb.connect(host=os.environ['MYSQL_HOST'], port=int(os.environ['MYSQL_TCP_PORT']), user=os.environ['MYSQL_USER'], passwd=os.environ['MYSQL_PWD'], db=os.environ['MYSQL_DATABASE'])",
    pythonAutocommit: 'c.autocommit(True)',
    jdbcJar: path.join(JAVA_DIR, 'mariadb-java-client.jar'),
    jdbcPackage: 'libmariadb-java',
  },
} as const;

/** The `nth` (from 0) code block of `lang` under the heading `heading` of docs/exec.md. */
function docBlock(markdown: string, heading: string, lang: string, nth = 0): string {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`docs/exec.md has no heading "${heading}"`);
  const blocks = [...markdown.slice(at).matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```', 'g'))];
  const block = blocks[nth]?.[1];
  if (block === undefined) throw new Error(`no \`\`\`${lang} block number ${nth + 1} under "${heading}" in docs/exec.md`);
  return block;
}

function missing(checks: [boolean, string][]): string | null {
  const absent = checks.filter(([ok]) => !ok).map(([, what]) => what);
  return absent.length > 0 ? absent.join('; ') : null;
}

const pytestMissing = (name: keyof typeof CLIENTS): string | null =>
  missing([
    [spawnSync(PYTHON, ['-c', 'import pytest']).status === 0, 'pytest not installed: apt-get install python3-pytest'],
    [
      spawnSync(PYTHON, ['-c', `import ${CLIENTS[name].pythonModule}`]).status === 0,
      `${CLIENTS[name].pythonModule} not installed: apt-get install ${CLIENTS[name].pythonPackage}`,
    ],
  ]);
const djangoMissing = missing([
  [spawnSync(PYTHON, ['-c', 'import django']).status === 0, 'Django not installed: apt-get install python3-django'],
  [spawnSync(PYTHON, ['-c', 'import psycopg2']).status === 0, 'psycopg2 not installed: apt-get install python3-psycopg2'],
  [spawnSync(PYTHON, ['-c', 'import MySQLdb']).status === 0, 'mysqlclient not installed: apt-get install python3-mysqldb'],
]);
const junitMissing = (name: keyof typeof CLIENTS): string | null =>
  missing([
    [spawnSync('sh', ['-c', 'command -v javac && command -v java']).status === 0, 'no JDK: apt-get install default-jdk-headless'],
    [fs.existsSync(JUNIT_STANDALONE) && fs.existsSync(JUNIT_API), 'JUnit 5 not installed: apt-get install junit5'],
    [fs.existsSync(CLIENTS[name].jdbcJar), `the JDBC driver is not installed: apt-get install ${CLIENTS[name].jdbcPackage}`],
  ]);

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

/** The client library each backend's own statements go through (outside any window). */
const SQL_PROTOCOL = { postgres: 'postgres', mariadb: 'mysql', mysql: 'mysql' } as const;

async function sql(b: StartedBackend, text: string): Promise<Record<string, unknown>[]> {
  const name = b.description.name;
  if (name === 'sqlite') throw new Error('doc clients run on network backends only');
  return withSqlClient(SQL_PROTOCOL[name], network(b), { backend: b.description.id }, (c) => c.query<Record<string, unknown>>(text));
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

const DJANGO_ROWS = 200;

/** The load script of the Django test: the project's own code, beside the two blocks taken from docs/exec.md. */
const DJANGO_LOAD = `
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
import django
django.setup()
from django.db import connection
from items.models import Item
from sqltally_window import window

N = ${DJANGO_ROWS}
with connection.schema_editor() as editor:
    editor.create_model(Item)
verdicts = {}
with window("bulk_create") as tally:
    made = Item.objects.bulk_create([Item(a=i) for i in range(N)])
verdicts["bulk_create"] = tally["verdict"]["kind"]
with window("save per row") as tally:
    for i in range(N):
        Item(a=i).save()
verdicts["save per row"] = tally["verdict"]["kind"]
connection.close()
with window("connect") as tally:
    count = Item.objects.count()
verdicts["connect"] = tally["verdict"]["kind"]
print(json.dumps({"count": count, "bulk_ids": sum(1 for m in made if m.pk is not None), "verdicts": verdicts}))
`;

/** One window of the Django run, as the test holds it. */
interface DjangoWindow {
  name: string;
  verdict: string;
  statements: Record<string, number>;
  wireRows: number;
  serverStatements: number;
  serverInserts: number;
  serverRows: number;
}

/** The session set-up Django's database backend sends on a fresh connection, per backend (listed apart by sqltally). */
const DJANGO_CONNECT: Record<'postgres' | 'mariadb' | 'mysql', RegExp[]> = {
  // Only when the server's own zone is not UTC, which a private server's may be.
  postgres: [/^#\d+ SET TIME ZONE 'UTC'$/],
  mariadb: [/^#\d+ SET NAMES utf8mb3$/, /^#\d+ SET autocommit=0$/, /^#\d+ SET autocommit=1$/, /^#\d+ SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED$/],
  mysql: [/^#\d+ SET NAMES utf8mb3$/, /^#\d+ SET autocommit=0$/, /^#\d+ SET autocommit=1$/, /^#\d+ SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED$/],
};

/**
 * What each window carries per backend (N rows), docs/exec.md's Django table: psycopg2 begins with BEGIN, mysqlclient
 * with autocommit switches; MariaDB answers `INSERT ... RETURNING` with a result set, whence the wire's row count.
 */
const DJANGO_WORK: Record<'postgres' | 'mariadb' | 'mysql', { bulk: Record<string, number>; bulkIds: number }> = {
  postgres: { bulk: { begin: 1, insert: 1, commit: 1 }, bulkIds: DJANGO_ROWS },
  mariadb: { bulk: { set: 2, insert: 1, commit: 1 }, bulkIds: DJANGO_ROWS },
  // MySQL has no RETURNING: Django leaves the primary keys of bulk_create's objects unset there.
  mysql: { bulk: { set: 2, insert: 1, commit: 1 }, bulkIds: 0 },
};

function djangoWindows(windows: readonly Window[]): DjangoWindow[] {
  return windows.map((w) => ({
    name: w.name,
    verdict: w.verdict.kind,
    statements: w.layers.wire?.statements?.completedByClass ?? {},
    wireRows: w.layers.wire?.rowsAffected ?? -1,
    serverStatements: w.layers.server?.summary.statements ?? -1,
    serverInserts: w.layers.server?.summary.inserts ?? -1,
    serverRows: w.layers.server?.summary.rowsInserted ?? -1,
  }));
}

const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);

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
    /** Runs the test suite under `sqltally exec --named-windows` and checks its two windows: one row, then three. */
    const expectOneAndThree = async (argv: string[], table: string, names: [string, string]): Promise<void> => {
      const result = await runExec(execOptions(argv), server(), io(log()));
      expect({ exitCode: result.exitCode, log: result.exitCode === 0 ? '' : failedWith() }).toEqual({ exitCode: 0, log: '' });
      expect(figures(result.report?.windows ?? [])).toEqual([
        { name: names[0], source: 'control', verdict: 'assert', wireRows: 1, serverRows: 1, serverInserts: 1 },
        { name: names[1], source: 'control', verdict: 'assert', wireRows: 3, serverRows: 3, serverInserts: 1 },
      ]);
      const [row] = await sql(server(), `SELECT count(*) AS n FROM ${table}`);
      expect(Number(row?.n)).toBe(4);
    };

    const clients = CLIENTS[b.backend as keyof typeof CLIENTS];
    const pytestSkip = pytestMissing(b.backend as keyof typeof CLIENTS);
    const junitSkip = junitMissing(b.backend as keyof typeof CLIENTS);
    const createTable = async (table: string): Promise<void> => {
      await sql(server(), `DROP TABLE IF EXISTS ${table}`);
      await sql(server(), `CREATE TABLE ${table} (a int)`);
    };
    (pytestSkip ? it.skip : it)(
      `the pytest fixture of docs/exec.md: one window per test, named after it, with its rows${pytestSkip ? ` (skipped: ${pytestSkip})` : ''}`,
      async () => {
        const dir = path.join(scratch, 'pytest');
        fs.mkdirSync(dir);
        fs.writeFileSync(path.join(dir, 'conftest.py'), `${docBlock(markdown, '### A pytest fixture', 'python')}\n`);
        const table = `doc_py_${process.pid}`;
        await createTable(table);
        fs.writeFileSync(
          path.join(dir, 'test_items.py'),
          [
            `import os, ${clients.pythonModule}, pytest`,
            '',
            '# Connected before the window begins (fixtures set up in the order named), closed after it ends.',
            '@pytest.fixture',
            'def conn():',
            `    c = ${clients.pythonConnect}`,
            `    ${clients.pythonAutocommit}`,
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
        await expectOneAndThree(argv, table, ['test_insert_one', 'test_insert_three']);
      },
    );

    (junitSkip ? it.skip : it)(
      `the JUnit 5 extension of docs/exec.md: one window per test, named after it, with its rows${junitSkip ? ` (skipped: ${junitSkip})` : ''}`,
      async () => {
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
        await createTable(table);
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
        const javac = spawnSync('javac', ['-cp', JUNIT_API, '-d', classes, path.join(dir, 'SqltallyWindow.java'), path.join(dir, 'ItemsTest.java')], {
          encoding: 'utf8',
        });
        expect({ status: javac.status, stderr: javac.stderr }).toEqual({ status: 0, stderr: '' });
        const out = path.join(scratch, 'junit-report');
        const argv = [
          '--named-windows',
          '--out',
          out,
          '--',
          'java',
          '-jar',
          JUNIT_STANDALONE,
          '--disable-banner',
          '--fail-if-no-tests',
          '-cp',
          `${classes}:${clients.jdbcJar}`,
          '--select-class',
          'ItemsTest',
        ];
        await expectOneAndThree(argv, table, ['insertOne()', 'insertThree()']);
      },
    );

    (djangoMissing ? it.skip : it)(
      `the Django recipe of docs/exec.md: bulk_create, save() per row and a fresh connection, each window exact on the wire and the server${djangoMissing ? ` (skipped: ${djangoMissing})` : ''}`,
      async () => {
        const name = b.backend as 'postgres' | 'mariadb' | 'mysql';
        const dir = path.join(scratch, 'django');
        fs.mkdirSync(path.join(dir, 'items'), { recursive: true });
        // The page's settings block, and what any Django project has besides.
        const settings = docBlock(markdown, '### Django', 'python', 0);
        fs.writeFileSync(
          path.join(dir, 'settings.py'),
          `${settings}\nINSTALLED_APPS = ["items"]\nUSE_TZ = True\nSECRET_KEY = "test"\nDEFAULT_AUTO_FIELD = "django.db.models.AutoField"\n`,
        );
        fs.writeFileSync(path.join(dir, 'sqltally_window.py'), `${docBlock(markdown, '### Django', 'python', 1)}\n`);
        fs.writeFileSync(path.join(dir, 'items', '__init__.py'), '');
        fs.writeFileSync(path.join(dir, 'items', 'models.py'), 'from django.db import models\n\nclass Item(models.Model):\n    a = models.IntegerField()\n');
        fs.writeFileSync(path.join(dir, 'load.py'), DJANGO_LOAD);
        await sql(server(), 'DROP TABLE IF EXISTS items_item');
        const out = path.join(scratch, 'django-report');
        const stdout = path.join(scratch, 'django.out');
        const fd = fs.openSync(stdout, 'w');
        const result = await runExec(execOptions(['--named-windows', '--out', out, '--', PYTHON, path.join(dir, 'load.py')]), server(), {
          env: process.env,
          stdio: ['ignore', fd, fs.openSync(log(), 'a')],
          progress: () => undefined,
        });
        fs.closeSync(fd);
        expect({ exitCode: result.exitCode, log: result.exitCode === 0 ? '' : failedWith() }).toEqual({ exitCode: 0, log: '' });
        // Django's own view: the rows it counts, the keys bulk_create set, and the verdicts the context manager got.
        const own = JSON.parse(fs.readFileSync(stdout, 'utf8').trim().split('\n').pop() ?? '{}') as {
          count: number;
          bulk_ids: number;
          verdicts: Record<string, string>;
        };
        expect(own).toEqual({
          count: 2 * DJANGO_ROWS,
          bulk_ids: DJANGO_WORK[name].bulkIds,
          verdicts: { bulk_create: 'assert', 'save per row': 'assert', connect: 'assert' },
        });
        const [row] = await sql(server(), 'SELECT count(*) AS n FROM items_item');
        expect(Number(Object.values(row ?? {})[0])).toBe(2 * DJANGO_ROWS);

        const windows = result.report?.windows ?? [];
        const connect = windows.find((w) => w.name === 'connect')?.layers.wire?.statements;
        const setUp = connect?.connectTexts ?? [];
        // Every set-up statement is one Django sends on this backend, none twice; PostgreSQL's is there only off UTC.
        expect({ setUp, unknown: setUp.filter((t) => !DJANGO_CONNECT[name].some((re) => re.test(t))) }).toEqual({ setUp, unknown: [] });
        if (name !== 'postgres') expect(setUp).toHaveLength(DJANGO_CONNECT[name].length);
        const bulk = DJANGO_WORK[name].bulk;
        const setUpByClass = setUp.length > 0 ? { set: setUp.length } : {};
        expect(djangoWindows(windows)).toEqual([
          {
            name: 'bulk_create',
            verdict: 'assert',
            statements: bulk,
            wireRows: DJANGO_ROWS,
            serverStatements: sum(bulk),
            serverInserts: 1,
            serverRows: DJANGO_ROWS,
          },
          {
            name: 'save per row',
            verdict: 'assert',
            statements: { insert: DJANGO_ROWS },
            wireRows: DJANGO_ROWS,
            serverStatements: DJANGO_ROWS,
            serverInserts: DJANGO_ROWS,
            serverRows: DJANGO_ROWS,
          },
          {
            name: 'connect',
            verdict: 'assert',
            statements: { ...setUpByClass, select: 1 },
            wireRows: 0,
            serverStatements: setUp.length + 1,
            serverInserts: 0,
            serverRows: 0,
          },
        ]);
        expect(connect?.connectStatements).toBe(setUp.length);
      },
    );
  },
  (b) => b.backend === 'postgres' || b.backend === 'mariadb' || b.backend === 'mysql',
);
