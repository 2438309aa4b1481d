import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { Client } from 'pg';
import { CaptureSession, type Captured } from '../src/capture/capture';
import type { Tally } from '../src/capture/tally';
import type { NetworkConnection, StartedBackend } from '../src/backends/types';
import { describeEachBackend, withBackend } from './harness';
import { PG_SETTLE_SQL, SERVER_LOG_NOT_SUPPORTED, countStatements, mysqlFamilyLog, postgresLog, type LogStatements, type ServerLog } from './server-log';

/**
 * Clients nobody on this team wrote, spawned in `session.measure()` with no driver counted (the wire is the model),
 * each held to truths of its own: fresh row counts, the client's own report and the server's statement log.
 */

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? '');
  });
}

/** Whether a client program is installed: a missing one skips its test visibly, naming the Debian package. */
function installed(program: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${program}`]).status === 0;
}

/** Debian's python3, with its python3-psycopg2 / python3-mysqldb: a python3 earlier on PATH (pyenv) lacks them. */
const DEBIAN_PYTHON = '/usr/bin/python3';
function pythonHas(module: string): boolean {
  return spawnSync(DEBIAN_PYTHON, ['-c', `import ${module}`]).status === 0;
}

/** A Python client's script: connects from the environment, inserts ROWS rows with executemany, commits, prints rowcount. */
const PY_ROWS = 500;

/** A JDBC program run as a single source file: one PreparedStatement, addBatch per row, one executeBatch, commit. */
const JDBC_ROWS = 5000;
const JDBC_SOURCE = `
import java.sql.*;
public class Batch {
  public static void main(String[] args) throws Exception {
    try (Connection conn = DriverManager.getConnection(System.getenv("JDBC_URL"), System.getenv("DB_USER"), System.getenv("DB_PASSWORD"))) {
      conn.setAutoCommit(false);
      try (PreparedStatement ps = conn.prepareStatement("INSERT INTO jdbc_items (a) VALUES (?)")) {
        for (int i = 0; i < ${JDBC_ROWS}; i++) { ps.setInt(1, i); ps.addBatch(); }
        int[] counts = ps.executeBatch();
        long rows = 0, noInfo = 0;
        for (int c : counts) { if (c >= 0) rows += c; else noInfo++; }
        System.out.println(counts.length + " " + rows + " " + noInfo);
      }
      conn.commit();
    }
  }
}
`;
const JARS = { postgres: '/usr/share/java/postgresql.jar', mariadb: '/usr/share/java/mariadb-java-client.jar' } as const;

function jdbcAvailable(backend: keyof typeof JARS): boolean {
  return installed('java') && fs.existsSync(JARS[backend]);
}

/** Runs the batch program against `url`; prints "batch entries, rows reported, entries with no count". */
async function runJdbc(backend: keyof typeof JARS, url: string, c: NetworkConnection): Promise<Ran> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-jdbc-'));
  try {
    fs.writeFileSync(path.join(dir, 'Batch.java'), JDBC_SOURCE);
    return await run('java', ['-cp', JARS[backend], path.join(dir, 'Batch.java')], { JDBC_URL: url, DB_USER: c.user, DB_PASSWORD: c.password ?? '' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One line of the JDBC table: what a setting sent and what the server executed, measured. */
function jdbcLine(label: string, t: Tally, out: Ran): string {
  const w = t.layers.wire;
  const commands = Object.entries(w?.commands ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return `${label}: client "${out.stdout.trim()}"; wire ${commands}; round trips ${w?.roundTrips}; statements ${JSON.stringify(w?.statements?.completedByClass)}; server ${JSON.stringify(t.layers.server?.summary)}; verdict ${t.verdict.kind}`;
}

function network(c: { kind: string }): NetworkConnection {
  if (c.kind !== 'network') throw new Error('not a network connection');
  return c as NetworkConnection;
}

/** libpq's environment for a connection (through the proxy, or straight to the server). */
function pgEnv(c: NetworkConnection): NodeJS.ProcessEnv {
  return { PGHOST: c.host, PGPORT: String(c.port), PGUSER: c.user, PGPASSWORD: c.password ?? '', PGDATABASE: c.database };
}

function mariadbArgs(c: NetworkConnection): string[] {
  return ['--protocol=TCP', '-h', c.host, '-P', String(c.port), '-u', c.user, c.database ?? ''];
}

async function pgScalar(b: StartedBackend, sql: string): Promise<number> {
  const c = network(b.connection);
  const client = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
  await client.connect();
  try {
    const res = await client.query<{ n: string }>(sql);
    return Number(res.rows[0]?.n);
  } finally {
    await client.end();
  }
}

async function mysqlScalar(b: StartedBackend, sql: string): Promise<number> {
  const c = network(b.connection);
  const conn = await mysql.createConnection({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
  try {
    const [rows] = await conn.query(sql);
    return Number(Object.values((rows as Record<string, unknown>[])[0] ?? {})[0]);
  } finally {
    await conn.end();
  }
}

/** The figures a test asserts on, in one object, so a failure shows them all beside the verdict. */
function figures(t: Tally): Record<string, unknown> {
  return {
    verdict: t.verdict.kind,
    reason: t.verdict.reason,
    discrepancies: t.verdict.discrepancies,
    wire: t.layers.wire?.commands,
    statements: t.layers.wire?.statements,
    server: t.layers.server?.summary,
  };
}

/** The wire's command counts each log command stands for, by protocol family (MariaDB logs a bulk command as Execute). */
const WIRE_COMMANDS_PER_LOG_COMMAND: Record<'postgres' | 'mysql', Record<string, string[]>> = {
  postgres: { Query: ['Query'], Parse: ['Parse'], Bind: ['Bind'], Execute: ['Execute'] },
  mysql: {
    Query: ['COM_QUERY'],
    Prepare: ['COM_STMT_PREPARE'],
    Execute: ['COM_STMT_EXECUTE', 'COM_STMT_BULK_EXECUTE'],
    'Close stmt': ['COM_STMT_CLOSE'],
    'Init DB': ['COM_INIT_DB'],
  },
};

/** Statement classes compared one by one between the log and the wire. */
const LOG_CLASSES = ['insert', 'update', 'delete', 'select', 'begin', 'commit', 'rollback', 'set'] as const;

interface LogCheck {
  what: string;
  log: number;
  sqltally: number | null | undefined;
}

/**
 * Every count of the window held against the server's log of it; where the server counts less than ran (transaction
 * control re-run from a named statement, in pg_stat_statements), the log says how much less.
 */
function logChecks(family: 'postgres' | 'mysql', t: Tally, log: LogStatements): LogCheck[] {
  const s = t.layers.wire?.statements;
  const commands = t.layers.wire?.commands ?? {};
  const checks: LogCheck[] = [
    { what: 'wire statements completed = statements in the log', log: log.statements, sqltally: s?.completed },
    { what: 'wire connections = connections in the log', log: log.connections, sqltally: t.layers.wire?.connections },
  ];
  for (const cls of LOG_CLASSES) {
    checks.push({ what: `wire statements of class ${cls} = the log's`, log: log.byClass[cls] ?? 0, sqltally: s?.completedByClass[cls] ?? 0 });
  }
  for (const [logCommand, wireCommands] of Object.entries(WIRE_COMMANDS_PER_LOG_COMMAND[family])) {
    checks.push({
      what: `wire ${wireCommands.join(' + ')} = ${logCommand} entries in the log`,
      log: log.commands[logCommand] ?? 0,
      sqltally: wireCommands.reduce((sum, c) => sum + (commands[c] ?? 0), 0),
    });
  }
  const initDb = log.commands['Init DB'] ?? 0;
  checks.push({
    what: 'server statements = statements in the log (+ Init DB, - transaction control re-run from a named statement)',
    log: log.statements + initDb - log.namedTransactionRepeats,
    sqltally: t.layers.server?.summary.statements,
  });
  checks.push({
    what: 'wire namedRepeats = transaction control re-run from a named statement in the log',
    log: family === 'postgres' ? log.namedTransactionRepeats : 0,
    sqltally: s?.namedRepeats ?? 0,
  });
  return checks;
}

/** Holds the window to the log: a failure names every check that differs, with both sides. Null: no log here (skipped visibly). */
function expectLogAgrees(family: 'postgres' | 'mysql', t: Tally, log: LogStatements | null): void {
  if (!log) return;
  const checks = logChecks(family, t, log);
  const report = process.env['SQLTALLY_FOREIGN_REPORT'];
  // For the closing note's table (client, mode, wire, server, truth, verdict): one JSON line per window, when asked for.
  if (report) fs.appendFileSync(report, `${JSON.stringify({ test: expect.getState().currentTestName, verdict: t.verdict.kind, log, checks })}\n`);
  const failed = checks.filter((c) => c.log !== c.sqltally);
  expect({ failed, log }).toEqual({ failed: [], log });
}

/**
 * Runs `work` in a window and reads the server's log of the same stretch, sqltally's own flush query set aside.
 * `log` null: this provider leaves no log to read (see {@link logSkip}); the window's other truths still hold.
 */
async function measureLogged<T>(
  session: CaptureSession,
  log: ServerLog | undefined | null,
  work: () => Promise<T>,
): Promise<{ tally: Captured<T>; logged: LogStatements | null }> {
  if (log === null) return { tally: await session.measure(work), logged: null };
  if (!log) throw new Error('the server log was not set up (beforeAll failed)');
  const from = await log.mark();
  const tally = await session.measure(work);
  const entries = (await log.since(from)).filter((e) => e.text !== PG_SETTLE_SQL);
  return { tally, logged: countStatements(entries) };
}

/**
 * Where the provider leaves the server's log out of reach, the block's log checks are one visible skip and every other
 * truth is still checked. Returns the log to use: null when there is none here.
 */
function logSkip(provider: keyof typeof SERVER_LOG_NOT_SUPPORTED): null | undefined {
  const why = SERVER_LOG_NOT_SUPPORTED[provider];
  if (!why) return undefined;
  it.skip(`every window held to the server's own statement log: NOT_SUPPORTED: ${why}`, () => undefined);
  return null;
}

const PGBENCH_CLIENTS = 2;
const PGBENCH_TRANSACTIONS = 50;
/** pgbench's start-up queries on its own first connection: the scale check and the partition query. */
const PGBENCH_STARTUP_QUERIES = 2;

describeEachBackend(
  (b) => {
    let log: ServerLog | undefined | null = logSkip(b.provider);
    // Declared before withBackend: afterAll hooks run in the order declared, so the log is turned off while the server is up.
    afterAll(async () => {
      await log?.close();
    });
    const backend = withBackend(b.id);
    let session: CaptureSession;
    beforeAll(async () => {
      session = await CaptureSession.open({ backend: backend(), table: { schema: 'public', name: 'pgbench_history' } });
      if (log !== null) log = await postgresLog(backend());
      if (!installed('pgbench')) return;
      const init = await run('pgbench', ['-i', '-s', '1', '-q'], pgEnv(network(backend().connection)));
      if (init.code !== 0) throw new Error(`pgbench -i failed: ${init.stderr}`);
    }, 180_000);
    afterAll(async () => {
      await session?.close();
    });

    const pgbench = installed('pgbench') ? it : it.skip;
    for (const mode of ['simple', 'extended', 'prepared'] as const) {
      pgbench(
        `pgbench TPC-B -M ${mode}: 7 statements and 1 history row per transaction, exact on the wire and the server, assert`,
        async () => {
          const before = await pgScalar(backend(), 'SELECT count(*) AS n FROM pgbench_history');
          const args = ['-n', '-c', String(PGBENCH_CLIENTS), '-t', String(PGBENCH_TRANSACTIONS), '-M', mode];
          const { tally, logged } = await measureLogged(session, log, () => run('pgbench', args, pgEnv(network(session.connection))));
          const out = tally.result as Ran;
          expect(out.code).toBe(0);
          // The client's own report, and the rows through a fresh connection: the truths the layers are held to.
          const n = PGBENCH_CLIENTS * PGBENCH_TRANSACTIONS;
          expect(out.stdout).toContain(`number of transactions actually processed: ${n}/${n}`);
          expect((await pgScalar(backend(), 'SELECT count(*) AS n FROM pgbench_history')) - before).toBe(n);
          const s = tally.layers.wire?.statements;
          const repeats = mode === 'prepared' ? 2 * PGBENCH_CLIENTS * (PGBENCH_TRANSACTIONS - 1) : 0;
          expect(figures(tally)).toMatchObject({
            verdict: 'assert',
            discrepancies: [],
            statements: {
              completed: 7 * n + PGBENCH_STARTUP_QUERIES,
              completedByClass: { begin: n, update: 3 * n, insert: n, commit: n },
              failed: 0,
              namedRepeats: repeats,
              rowsInserted: n,
              rowsUpdated: 3 * n,
            },
            server: { statements: 7 * n + PGBENCH_STARTUP_QUERIES - repeats, inserts: n, commits: mode === 'prepared' ? PGBENCH_CLIENTS : n, rowsInserted: n },
          });
          expect(tally.layers.wire?.commands).toMatchObject(mode === 'simple' ? { Query: 7 * n + PGBENCH_STARTUP_QUERIES } : { Execute: 7 * n });
          expect(tally.layers.server?.global['statements.begin_calls']).toBe(mode === 'prepared' ? PGBENCH_CLIENTS : n);
          expect(s?.rowsUpdated).toBe(tally.layers.server?.global['tables.n_tup_upd']);
          expectLogAgrees('postgres', tally, logged);
        },
        300_000,
      );
    }

    const psql = installed('psql') ? it : it.skip;
    psql(
      'psql with two INSERTs on one line (\\;): one Query, two statements on the server, assert',
      async () => {
        const direct = pgEnv(network(backend().connection));
        await run('psql', ['-v', 'ON_ERROR_STOP=1', '-c', 'DROP TABLE IF EXISTS psql_items; CREATE TABLE psql_items (a int)'], direct);
        const lines = Array.from({ length: 10 }, (_, i) => `INSERT INTO psql_items VALUES (${2 * i})\\; INSERT INTO psql_items VALUES (${2 * i + 1});`).join(
          '\n',
        );
        const { tally, logged } = await measureLogged(session, log, () =>
          run('psql', ['-v', 'ON_ERROR_STOP=1', '-X', '-q'], pgEnv(network(session.connection)), `${lines}\n`),
        );
        expect((tally.result as Ran).code).toBe(0);
        expect(await pgScalar(backend(), 'SELECT count(*) AS n FROM psql_items')).toBe(20);
        expect(figures(tally)).toMatchObject({
          verdict: 'assert',
          discrepancies: [],
          wire: { Query: 10 },
          statements: { completed: 20, completedByClass: { insert: 20 }, rowsInserted: 20 },
          server: { statements: 20, inserts: 20, rowsInserted: 20 },
        });
        expectLogAgrees('postgres', tally, logged);
      },
      120_000,
    );

    const psycopg2 = pythonHas('psycopg2') ? it : it.skip;
    psycopg2(
      `Python with psycopg2: executemany of ${PY_ROWS} rows in its own transaction, one Query each, assert`,
      async () => {
        await run('psql', ['-c', 'DROP TABLE IF EXISTS py_items; CREATE TABLE py_items (a int)'], pgEnv(network(backend().connection)));
        const script = [
          'import psycopg2',
          'conn = psycopg2.connect("")',
          'cur = conn.cursor()',
          `cur.executemany("INSERT INTO py_items (a) VALUES (%s)", [(i,) for i in range(${PY_ROWS})])`,
          'print(cur.rowcount)',
          'conn.commit()',
          'conn.close()',
        ].join('\n');
        const { tally, logged } = await measureLogged(session, log, () => run(DEBIAN_PYTHON, ['-c', script], pgEnv(network(session.connection))));
        const out = tally.result as Ran;
        expect(out.stderr).toBe('');
        expect(out.stdout.trim()).toBe(String(PY_ROWS));
        expect(await pgScalar(backend(), 'SELECT count(*) AS n FROM py_items')).toBe(PY_ROWS);
        expect(figures(tally)).toMatchObject({
          verdict: 'assert',
          discrepancies: [],
          // psycopg2 opens the transaction itself (autocommit off): BEGIN, one Query per row, COMMIT.
          wire: { Query: PY_ROWS + 2 },
          statements: { completed: PY_ROWS + 2, completedByClass: { begin: 1, insert: PY_ROWS, commit: 1 }, rowsInserted: PY_ROWS },
          server: { statements: PY_ROWS + 2, inserts: PY_ROWS, commits: 1, rowsInserted: PY_ROWS },
        });
        expectLogAgrees('postgres', tally, logged);
      },
      120_000,
    );

    const jdbc = jdbcAvailable('postgres') ? it : it.skip;
    for (const rewrite of [false, true]) {
      jdbc(
        `JDBC (PgJDBC) addBatch x ${JDBC_ROWS}, reWriteBatchedInserts=${rewrite}: every layer agrees, assert`,
        async () => {
          await run('psql', ['-c', 'DROP TABLE IF EXISTS jdbc_items; CREATE TABLE jdbc_items (a int)'], pgEnv(network(backend().connection)));
          const c = network(session.connection);
          const url = `jdbc:postgresql://${c.host}:${c.port}/${c.database}?sslmode=disable&reWriteBatchedInserts=${rewrite}`;
          const { tally, logged } = await measureLogged(session, log, () => runJdbc('postgres', url, c));
          const out = tally.result as Ran;
          expect(out.code).toBe(0);
          expect(await pgScalar(backend(), 'SELECT count(*) AS n FROM jdbc_items')).toBe(JDBC_ROWS);
          process.stdout.write(`${jdbcLine(`PgJDBC reWriteBatchedInserts=${rewrite}`, tally, out)}\n`);
          expect(figures(tally)).toMatchObject({
            verdict: 'assert',
            discrepancies: [],
            statements: { rowsInserted: JDBC_ROWS },
            server: { rowsInserted: JDBC_ROWS },
          });
          expectLogAgrees('postgres', tally, logged);
        },
        180_000,
      );
    }

    const answerWait = it;
    answerWait(
      'a request still unanswered when the function returns, from a client that is not counted, is waited for: the window is whole',
      async () => {
        const c = network(session.connection);
        const client = new Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
        await client.connect();
        try {
          let sleeping: Promise<unknown> = Promise.resolve();
          const { tally, logged } = await measureLogged(session, log, async () => {
            sleeping = client.query('SELECT pg_sleep(0.4)');
            // Long enough for the proxy to have read the Query, far shorter than the sleep.
            await new Promise((r) => setTimeout(r, 100));
          });
          await sleeping;
          expect(figures(tally)).toMatchObject({ verdict: 'assert', statements: { completed: 1, completedByClass: { select: 1 } }, server: { statements: 1 } });
          expectLogAgrees('postgres', tally, logged);
        } finally {
          await client.end();
        }
      },
      120_000,
    );
  },
  (b) => b.backend === 'postgres',
);

/**
 * mysqlslap creates its table inside the window: on MySQL the DDL's data-dictionary rows move Handler_write, not
 * Innodb_rows_inserted, so the window's per-connection rows are not its statements' rows, which the verdict must say.
 */
const SLAP = {
  mariadb: {
    title: 'statements and rows on the wire and the server agree, the rows match a fresh count, assert',
    verdict: 'assert',
    discrepancies: [],
    serverRowsAreTableRows: true,
  },
  mysql: {
    title: "the data dictionary's rows in the connections' Handler_write are named, report",
    verdict: 'report',
    discrepancies: [
      expect.stringMatching(
        /^server layer: Innodb_rows_inserted \(rows inserted\) moved by \d+ server-wide, less than the window's own \d+: .*data dictionary/,
      ),
    ],
    serverRowsAreTableRows: false,
  },
} as const;

describeEachBackend(
  (b) => {
    let log: ServerLog | undefined | null = logSkip(b.provider);
    afterAll(async () => {
      await log?.close();
    });
    const backend = withBackend(b.id);
    let session: CaptureSession;
    beforeAll(async () => {
      session = await CaptureSession.open({ backend: backend() });
      if (log !== null) log = await mysqlFamilyLog(backend());
    }, 180_000);
    afterAll(async () => {
      await session?.close();
    });
    const mariadbCli = installed('mariadb') ? it : it.skip;
    const slap = installed('mysqlslap') ? it : it.skip;

    async function table(name: string): Promise<void> {
      const c = network(backend().connection);
      const ran = await run(
        'mariadb',
        mariadbArgs(c),
        { MYSQL_PWD: c.password ?? '' },
        `DROP TABLE IF EXISTS ${name}; CREATE TABLE ${name} (id INT AUTO_INCREMENT PRIMARY KEY, a INT);\n`,
      );
      if (ran.code !== 0) throw new Error(ran.stderr);
    }

    mariadbCli(
      'the mariadb CLI piping a file of INSERTs: its connect query set apart, every INSERT and row exact, assert',
      async () => {
        await table('cli_items');
        const c = network(session.connection);
        const file = `${Array.from({ length: 200 }, (_, i) => `INSERT INTO cli_items (a) VALUES (${i});`).join('\n')}\n`;
        // --init-command is what an ORM's connection set-up looks like on the wire: a statement right after the handshake.
        const { tally, logged } = await measureLogged(session, log, () =>
          run('mariadb', ['--init-command=SET NAMES utf8mb4', ...mariadbArgs(c)], { MYSQL_PWD: c.password ?? '' }, file),
        );
        expect((tally.result as Ran).code).toBe(0);
        expect(await mysqlScalar(backend(), 'SELECT count(*) FROM cli_items')).toBe(200);
        expect(figures(tally)).toMatchObject({
          verdict: 'assert',
          discrepancies: [],
          statements: { completed: 201, completedByClass: { insert: 200, set: 1 }, rowsInserted: 200, connectStatements: 1 },
          server: { statements: 201, inserts: 200, rowsInserted: 200 },
        });
        expect(tally.layers.wire?.statements?.connectTexts).toEqual([expect.stringMatching(/^#\d+ SET NAMES utf8mb4$/)]);
        expect(tally.verdict.reconciliation.join('\n')).toMatch(/connection set-up: 1 statement/);
        expectLogAgrees('mysql', tally, logged);
      },
      120_000,
    );

    // MySQL has no INSERT ... RETURNING: the statement is a syntax error there.
    const returning = b.backend === 'mariadb' ? mariadbCli : it.skip;
    returning(
      `INSERT ... RETURNING through the mariadb CLI: the rows come as a result set with no OK packet, and are counted${b.backend === 'mariadb' ? '' : ` (NOT_SUPPORTED on ${b.backend}: no RETURNING)`}`,
      async () => {
        await table('returning_items');
        const c = network(session.connection);
        const values = Array.from({ length: 500 }, (_, i) => `(${i})`).join(', ');
        const { tally, logged } = await measureLogged(session, log, () =>
          run('mariadb', [...mariadbArgs(c), '-N', '-B'], { MYSQL_PWD: c.password ?? '' }, `INSERT INTO returning_items (a) VALUES ${values} RETURNING id;\n`),
        );
        const out = tally.result as Ran;
        expect(out.code).toBe(0);
        // The client's own output: one returned id per line.
        expect(out.stdout.trim().split('\n')).toHaveLength(500);
        expect(await mysqlScalar(backend(), 'SELECT count(*) FROM returning_items')).toBe(500);
        expect(tally.layers.wire?.rowsAffected).toBe(500);
        expect(figures(tally)).toMatchObject({
          verdict: 'assert',
          discrepancies: [],
          statements: { completedByClass: { insert: 1 }, rowsInserted: 500 },
          server: { inserts: 1, rowsInserted: 500 },
        });
        expectLogAgrees('mysql', tally, logged);
      },
      120_000,
    );

    const mysqldb = pythonHas('MySQLdb') ? it : it.skip;
    mysqldb(
      `Python with MySQLdb: executemany of ${PY_ROWS} rows is rewritten into one multi-row INSERT, assert`,
      async () => {
        await table('py_items');
        const c = network(session.connection);
        const script = [
          'import os, MySQLdb',
          "conn = MySQLdb.connect(host=os.environ['MYSQL_HOST'], port=int(os.environ['MYSQL_TCP_PORT']), user=os.environ['MYSQL_USER'], passwd=os.environ.get('MYSQL_PWD', ''), db=os.environ['MYSQL_DATABASE'])",
          'cur = conn.cursor()',
          `cur.executemany("INSERT INTO py_items (a) VALUES (%s)", [(i,) for i in range(${PY_ROWS})])`,
          'print(cur.rowcount)',
          'conn.commit()',
          'conn.close()',
        ].join('\n');
        const env = { MYSQL_HOST: c.host, MYSQL_TCP_PORT: String(c.port), MYSQL_USER: c.user, MYSQL_PWD: c.password ?? '', MYSQL_DATABASE: c.database ?? '' };
        const { tally, logged } = await measureLogged(session, log, () => run(DEBIAN_PYTHON, ['-c', script], env));
        const out = tally.result as Ran;
        expect(out.stderr).toBe('');
        expect(out.stdout.trim()).toBe(String(PY_ROWS));
        expect(await mysqlScalar(backend(), 'SELECT count(*) FROM py_items')).toBe(PY_ROWS);
        expect(figures(tally)).toMatchObject({
          verdict: 'assert',
          discrepancies: [],
          statements: { completedByClass: { insert: 1, commit: 1 }, rowsInserted: PY_ROWS },
          server: { inserts: 1, commits: 1, rowsInserted: PY_ROWS },
        });
        // MySQLdb turns autocommit off as it connects: connection set-up, listed apart.
        expect(tally.layers.wire?.statements?.connectTexts).toEqual([expect.stringMatching(/^#\d+ SET autocommit=0$/)]);
        expectLogAgrees('mysql', tally, logged);
      },
      120_000,
    );

    const jdbc = jdbcAvailable('mariadb') ? it : it.skip;
    for (const options of ['useBulkStmts=false&rewriteBatchedStatements=false', 'useBulkStmts=true', 'useBulkStmts=false&rewriteBatchedStatements=true']) {
      jdbc(
        `JDBC (MariaDB Connector/J) addBatch x ${JDBC_ROWS}, ${options}: every layer agrees, assert`,
        async () => {
          await table('jdbc_items');
          const c = network(session.connection);
          const url = `jdbc:mariadb://${c.host}:${c.port}/${c.database}?${options}`;
          const { tally, logged } = await measureLogged(session, log, () => runJdbc('mariadb', url, c));
          const out = tally.result as Ran;
          expect(out.code).toBe(0);
          expect(await mysqlScalar(backend(), 'SELECT count(*) FROM jdbc_items')).toBe(JDBC_ROWS);
          process.stdout.write(`${jdbcLine(`Connector/J ${options}`, tally, out)}\n`);
          expect(figures(tally)).toMatchObject({ verdict: 'assert', discrepancies: [], server: { rowsInserted: JDBC_ROWS } });
          expectLogAgrees('mysql', tally, logged);
        },
        180_000,
      );
    }

    slap(
      `mysqlslap with a write load (its schema and table created inside the window): ${SLAP[b.backend as keyof typeof SLAP].title}`,
      async () => {
        const c = network(session.connection);
        const args = [
          '--protocol=TCP',
          '-h',
          c.host,
          '-P',
          String(c.port),
          '-u',
          c.user,
          '--auto-generate-sql',
          '--auto-generate-sql-load-type=write',
          '--number-of-queries=200',
          '--concurrency=2',
          '--iterations=1',
          '--create-schema=slap',
          '--no-drop',
        ];
        const { tally, logged } = await measureLogged(session, log, () => run('mysqlslap', args, { MYSQL_PWD: c.password ?? '' }));
        const out = tally.result as Ran;
        expect(out.code).toBe(0);
        const rows = await mysqlScalar(backend(), 'SELECT count(*) FROM slap.t1');
        await mysqlScalar(backend(), 'DROP SCHEMA slap');
        const s = tally.layers.wire?.statements;
        const expected = SLAP[b.backend as keyof typeof SLAP];
        expect(figures(tally)).toMatchObject({
          verdict: expected.verdict,
          discrepancies: expected.discrepancies,
          statements: { rowsInserted: rows, failed: 0 },
          server: { inserts: s?.completedByClass.insert, ...(expected.serverRowsAreTableRows ? { rowsInserted: rows } : {}) },
        });
        if (!expected.serverRowsAreTableRows) {
          // The server-wide row counter holds the table's rows exactly; the window connections' Handler_write is more.
          expect(tally.layers.server?.globalSummary?.rowsInserted).toBe(rows);
          expect(tally.layers.server?.summary.rowsInserted).toBeGreaterThan(rows);
        }
        // Questions: every COM_QUERY statement, and the COM_INIT_DB that picks the schema.
        expect(tally.layers.server?.summary.statements).toBe((s?.completed ?? 0) + (tally.layers.wire?.commands.COM_INIT_DB ?? 0));
        expectLogAgrees('mysql', tally, logged);
      },
      180_000,
    );
  },
  (b) => b.backend === 'mariadb' || b.backend === 'mysql',
);
