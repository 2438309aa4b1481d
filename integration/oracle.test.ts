// @waits 10: every layer against the servers' own statement logs.
import fs from 'node:fs';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { bulkTextLine } from '../src/workload/bulk-text';
import { CaptureSession, type Captured } from '../src/capture/capture';
import { withSqlClient } from '../src/backends/sql-client';
import type { BackendName, NetworkConnection, StartedBackend } from '../src/backends/types';
import type { DriverName } from '../src/shared/driver-names';
import { describeEachBackend, withBackend } from './harness';
import { PG_SETTLE_SQL, SERVER_LOG_NOT_SUPPORTED, mysqlFamilyLog, postgresLog, type LogEntry, type ServerLog } from './server-log';

/**
 * An oracle for sqltally's counts: the server's own statement log (on SQLite, better-sqlite3's native `verbose`), compared
 * with each layer; it classifies by first keyword, never sqltally's tokenizer, and counts rows on its own connection.
 */

const ROWS = 24;
// No types ship with it: the part used here.
const { from: copyFrom } = require('pg-copy-streams') as { from: (text: string) => pg.Submittable & NodeJS.WritableStream };
const POOL_SIZE = 4;
const TABLE = 'oracle_items';
// ---------------------------------------------------------------------------------------------------------------
// What the oracle derives from the log, and what it compares
// ---------------------------------------------------------------------------------------------------------------

/** The statement's class by its first keyword: the oracle's own reading, independent of sqltally's tokenizer. */
function classOf(text: string): string {
  const word = /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toLowerCase() ?? '';
  if (word === 'start' || word === 'begin') return 'begin';
  return ['insert', 'select', 'update', 'delete', 'commit', 'rollback', 'set'].includes(word) ? word : 'other';
}

/** The log's counts for a set of entries, in the terms each layer uses. */
interface LogCounts {
  connections: number[];
  commands: Record<string, number>;
  /** Statements executed (a text query or an execute of a prepared one), by class. */
  executedByClass: Record<string, number>;
  /** Statements sent as text (MySQL COM_QUERY, PostgreSQL simple Query), by class. */
  textByClass: Record<string, number>;
  executed: number;
  /** LOAD DATA statements (MySQL's Com_load). */
  loads: number;
  /** COPY statements sent as a simple Query. */
  copies: number;
}

function countLog(entries: LogEntry[]): LogCounts {
  const commands: Record<string, number> = {};
  const executedByClass: Record<string, number> = {};
  const textByClass: Record<string, number> = {};
  let executed = 0;
  let loads = 0;
  let copies = 0;
  for (const e of entries) {
    if (e.command === 'Query' && /^\s*LOAD\b/i.test(e.text)) loads += 1;
    if (e.command === 'Query' && /^\s*COPY\b/i.test(e.text)) copies += 1;
    commands[e.command] = (commands[e.command] ?? 0) + 1;
    if (e.command === 'Query' || e.command === 'Execute') {
      executed += 1;
      const c = classOf(e.text);
      executedByClass[c] = (executedByClass[c] ?? 0) + 1;
      if (e.command === 'Query') textByClass[c] = (textByClass[c] ?? 0) + 1;
    }
  }
  return { connections: [...new Set(entries.map((e) => e.connection))].sort((a, b) => a - b), commands, executedByClass, textByClass, executed, loads, copies };
}

/**
 * What the log says each of the server layer's global and per-connection counters must be, by key. A key the tally
 * prints that is in neither this table nor {@link UNCHECKED_KEYS} fails the cell: no counter goes unexamined.
 */
function serverKeyOracle(
  backend: BackendName,
  log: LogCounts,
  rows: number,
  sqlite: SqliteReading | null,
): { global: Record<string, number>; perConnection: Record<string, number> } {
  const cls = (c: string) => n(log.executedByClass, c);
  const text = (c: string) => n(log.textByClass, c);
  const cmd = (c: string) => n(log.commands, c);
  switch (backend) {
    case 'mariadb':
    case 'mysql':
      return {
        global: {
          Questions: log.executed,
          // A prepared execute moves its statement's own Com_ counter too; a bulk command once, whatever its rows.
          Com_insert: cls('insert'),
          Com_insert_select: 0,
          Com_replace: 0,
          Com_update: cls('update'),
          Com_delete: cls('delete'),
          Com_select: cls('select'),
          Com_set_option: cls('set'),
          Com_stmt_prepare: cmd('Prepare'),
          Com_stmt_execute: cmd('Execute'),
          Com_stmt_close: cmd('Close stmt'),
          Com_stmt_reset: cmd('Reset stmt'),
          Com_stmt_send_long_data: cmd('Long Data'),
          Com_stmt_fetch: cmd('Fetch'),
          Com_begin: cls('begin'),
          Com_commit: cls('commit'),
          Com_rollback: cls('rollback'),
          Com_load: log.loads,
          Connections: cmd('Connect'),
          Innodb_rows_inserted: rows,
          Handler_write: rows,
        },
        perConnection: {
          Questions: log.executed,
          Handler_write: rows,
          'statement/sql/insert': text('insert'),
          'statement/sql/select': text('select'),
          'statement/sql/set_option': text('set'),
          'statement/sql/begin': text('begin'),
          'statement/sql/commit': text('commit'),
          'statement/sql/rollback': text('rollback'),
          'statement/sql/load': log.loads,
          'statement/com/Prepare': cmd('Prepare'),
          // MariaDB logs a bulk command as Execute: the two events are checked as one sum.
          'statement/com/Execute+statement/com/Bulk_execute': cmd('Execute'),
          'statement/com/Close stmt': cmd('Close stmt'),
          'statement/com/Reset stmt': cmd('Reset stmt'),
        },
      };
    case 'postgres':
      return {
        global: {
          'db.sessions': cmd('Connect'),
          'tables.n_tup_ins': rows,
          'tables.n_tup_upd': 0,
          'tables.n_tup_del': 0,
          'table.n_tup_ins': rows,
          'table.n_tup_upd': 0,
          'table.n_tup_del': 0,
          'statements.calls': log.executed,
          // Rows each statement affected or returned: only the INSERTs and COPYs have any in these cells.
          'statements.rows': rows,
          'statements.insert_calls': cls('insert'),
          'statements.begin_calls': cls('begin'),
          'statements.commit_calls': cls('commit'),
        },
        perConnection: {},
      };
    case 'sqlite':
      return {
        global: {
          'table.rows': rows,
          // Read only with one handle: it moves when a connection other than that handle commits, and none did.
          data_version: 0,
          page_count: sqlite?.pages ?? Number.NaN,
        },
        perConnection: { total_changes: rows },
      };
  }
}

/** Server counters the oracle cannot check from a log, and why (each also goes into the closing note's table). */
const UNCHECKED_KEYS: Record<string, string> = {
  // Checked against an ALTER TABLE between prepare and execute in integration/probes.test.ts instead.
  Com_stmt_reprepare: 'a statement the server prepares again by itself is no command a client sent: the general log has no line for it',
};

/** One comparison: what the oracle read, what sqltally counted. */
interface Check {
  what: string;
  oracle: number | string | null;
  sqltally: number | string | null | undefined;
}

const n = (record: Record<string, number> | undefined | null, key: string): number => record?.[key] ?? 0;

/** The driver layer's statements by class, executions only (`prepare` calls are not statements). */
function driverByClass(tally: Captured<unknown>, cls: string): number {
  return n(tally.layers.driver?.byClass as Record<string, number> | undefined, cls);
}

/** Every check of one cell, per backend family. A batch is one driver call for many rows: no per-class check there. */
function checksFor(backend: BackendName, tally: Captured<unknown>, log: LogCounts, rows: number, cell: Cell, sqlite: SqliteReading | null): Check[] {
  const driver = tally.layers.driver;
  const wire = tally.layers.wire;
  const server = tally.layers.server;
  const checks: Check[] = [];
  const classes = ['insert', 'begin', 'commit', 'select', 'other'];
  if (!cell.batch) {
    for (const cls of classes)
      checks.push({
        what: `driver.byClass.${cls} = statements of that class in the log`,
        oracle: n(log.executedByClass, cls),
        sqltally: driverByClass(tally, cls),
      });
  } else {
    checks.push({ what: 'driver.parameterSets = rows the table gained', oracle: rows, sqltally: driver?.parameterSets });
  }
  checks.push({ what: 'driver.rowsAffected = rows the table gained', oracle: rows, sqltally: driver?.rowsAffected });
  checks.push({ what: 'driver.errors', oracle: 0, sqltally: driver?.errors });
  const keys = serverKeyOracle(backend, log, rows, sqlite);
  for (const [key, value] of Object.entries(server?.global ?? {})) {
    if (key in UNCHECKED_KEYS) continue;
    checks.push({ what: `server.global.${key}`, oracle: key in keys.global ? keys.global[key]! : 'no oracle for this key', sqltally: value });
  }
  const perConnection = { ...(server?.perConnection ?? {}) };
  const sum = (a: string, b: string) => {
    if (!(a in perConnection) && !(b in perConnection)) return;
    perConnection[`${a}+${b}`] = (perConnection[a] ?? 0) + (perConnection[b] ?? 0);
    delete perConnection[a];
    delete perConnection[b];
  };
  sum('statement/com/Execute', 'statement/com/Bulk_execute');
  for (const [key, value] of Object.entries(perConnection)) {
    if (key in UNCHECKED_KEYS) continue;
    checks.push({
      what: `server.perConnection.${key}`,
      oracle: key in keys.perConnection ? keys.perConnection[key]! : 'no oracle for this key',
      sqltally: value,
    });
  }
  if (!cell.batch && backend !== 'sqlite') {
    const c = (k: string) => n(driver?.byKind, k);
    if (backend === 'postgres')
      checks.push({ what: 'driver.byKind.query = statement: + execute lines', oracle: log.executed, sqltally: c('query') + c('execute') });
    else
      checks.push(
        { what: 'driver.byKind.query = Query lines', oracle: n(log.commands, 'Query'), sqltally: c('query') },
        { what: 'driver.byKind.execute = Execute lines', oracle: n(log.commands, 'Execute'), sqltally: c('execute') },
      );
  }
  switch (backend) {
    case 'mariadb':
    case 'mysql': {
      const c = wire?.commands ?? {};
      checks.push(
        { what: 'wire COM_QUERY = Query lines', oracle: n(log.commands, 'Query'), sqltally: n(c, 'COM_QUERY') },
        { what: 'wire COM_STMT_PREPARE = Prepare lines', oracle: n(log.commands, 'Prepare'), sqltally: n(c, 'COM_STMT_PREPARE') },
        // MariaDB logs a bulk command as one Execute line: the log cannot tell the two apart, their sum it can.
        {
          what: 'wire COM_STMT_EXECUTE + COM_STMT_BULK_EXECUTE = Execute lines',
          oracle: n(log.commands, 'Execute'),
          sqltally: n(c, 'COM_STMT_EXECUTE') + n(c, 'COM_STMT_BULK_EXECUTE'),
        },
        { what: 'wire COM_STMT_CLOSE = Close stmt lines', oracle: n(log.commands, 'Close stmt'), sqltally: n(c, 'COM_STMT_CLOSE') },
        { what: 'wire COM_STMT_RESET = Reset stmt lines', oracle: n(log.commands, 'Reset stmt'), sqltally: n(c, 'COM_STMT_RESET') },
        // Each LOAD DATA LOCAL is asked for its file once and ends it with one empty packet.
        { what: 'wire LocalInfileRequest = LOAD lines', oracle: log.loads, sqltally: n(wire?.serverMessages, 'LocalInfileRequest') },
        { what: 'wire LocalInfileEnd = LOAD lines', oracle: log.loads, sqltally: n(c, 'LocalInfileEnd') },
        // mysql2 sends each chunk of the stream as a packet: the cell's stream gives one row per chunk.
        { what: 'wire LocalInfileData = rows streamed, one per chunk', oracle: log.loads > 0 ? rows : 0, sqltally: n(c, 'LocalInfileData') },
        { what: 'wire connections = connections in the log', oracle: log.connections.length, sqltally: wire?.connections },
        { what: 'server.summary.statements (Questions) = Query + Execute lines', oracle: log.executed, sqltally: server?.summary.statements },
        { what: 'server.summary.prepares = Prepare lines', oracle: n(log.commands, 'Prepare'), sqltally: server?.summary.prepares },
        { what: 'server.summary.executes = Execute lines', oracle: n(log.commands, 'Execute'), sqltally: server?.summary.executes },
        { what: 'server.summary.inserts = INSERT statements executed', oracle: n(log.executedByClass, 'insert'), sqltally: server?.summary.inserts },
        { what: 'server.summary.commits = COMMIT statements', oracle: n(log.executedByClass, 'commit'), sqltally: server?.summary.commits },
        { what: 'server.summary.rowsInserted = rows the table gained', oracle: rows, sqltally: server?.summary.rowsInserted },
        { what: 'server.perConnection Questions = Query + Execute lines', oracle: log.executed, sqltally: server?.perConnection?.Questions },
        {
          what: 'server.perConnection statement/com/Prepare = Prepare lines',
          oracle: n(log.commands, 'Prepare'),
          sqltally: n(server?.perConnection, 'statement/com/Prepare'),
        },
        {
          what: 'server.perConnection statement/com/Execute + Bulk_execute = Execute lines',
          oracle: n(log.commands, 'Execute'),
          sqltally: n(server?.perConnection, 'statement/com/Execute') + n(server?.perConnection, 'statement/com/Bulk_execute'),
        },
        {
          what: 'server.perConnection statement/sql/insert = text INSERTs',
          oracle: n(log.textByClass, 'insert'),
          sqltally: n(server?.perConnection, 'statement/sql/insert'),
        },
        {
          what: 'server.perConnection statement/sql/commit = COMMIT statements',
          oracle: n(log.executedByClass, 'commit'),
          sqltally: n(server?.perConnection, 'statement/sql/commit'),
        },
        { what: 'server.perConnection Handler_write = rows the table gained', oracle: rows, sqltally: server?.perConnection?.Handler_write },
        { what: 'server.attribution.found = connections in the log', oracle: log.connections.join(','), sqltally: server?.attribution?.found.join(',') },
        { what: 'server.attribution.exact', oracle: 'true', sqltally: String(server?.attribution?.exact) },
      );
      break;
    }
    case 'postgres': {
      const c = wire?.commands ?? {};
      checks.push(
        // The proxy's own settle query is swallowed by the proxy and never counted on the wire; the oracle sets it aside.
        { what: 'wire Query = statement: lines', oracle: n(log.commands, 'Query'), sqltally: n(c, 'Query') },
        { what: 'wire Parse = parse lines', oracle: n(log.commands, 'Parse'), sqltally: n(c, 'Parse') },
        { what: 'wire Bind = bind lines', oracle: n(log.commands, 'Bind'), sqltally: n(c, 'Bind') },
        { what: 'wire Execute = execute lines', oracle: n(log.commands, 'Execute'), sqltally: n(c, 'Execute') },
        // Each COPY FROM STDIN that loaded its rows ends with one CopyDone and no CopyFail.
        { what: 'wire CopyDone = COPY statement: lines', oracle: log.copies, sqltally: n(c, 'CopyDone') },
        { what: 'wire CopyFail', oracle: 0, sqltally: n(c, 'CopyFail') },
        { what: 'wire connections = connections in the log', oracle: log.connections.length, sqltally: wire?.connections },
        {
          what: 'server.summary.statements (pg_stat_statements calls) = statement: + execute lines',
          oracle: log.executed,
          sqltally: server?.summary.statements,
        },
        { what: 'server.summary.inserts = INSERT statements executed', oracle: n(log.executedByClass, 'insert'), sqltally: server?.summary.inserts },
        { what: 'server.summary.commits = COMMIT statements', oracle: n(log.executedByClass, 'commit'), sqltally: server?.summary.commits },
        { what: 'server.summary.rowsInserted = rows the table gained', oracle: rows, sqltally: server?.summary.rowsInserted },
        {
          what: 'server.statements calls (pg_stat_statements rows) = statement: + execute lines',
          oracle: log.executed,
          sqltally: server?.statements?.reduce((a, s) => a + s.calls, 0),
        },
      );
      break;
    }
    case 'sqlite':
      checks.push(
        {
          what: 'driver executions (query/execute calls) = statements the native binding ran',
          oracle: log.executed,
          sqltally: n(driver?.byKind, 'query') + n(driver?.byKind, 'execute'),
        },
        { what: 'server.summary.rowsInserted (total_changes) = rows the table gained', oracle: rows, sqltally: server?.summary.rowsInserted },
      );
      break;
  }
  return checks;
}

function describeFailure(cell: string, failed: Check[], entries: LogEntry[], tally: Captured<unknown>): string {
  const lines = [
    `${cell}: sqltally and the server's own log disagree on ${failed.length} count(s):`,
    ...failed.map((c) => `  ${c.what}: log ${c.oracle}, sqltally ${c.sqltally}`),
    `verdict: ${tally.verdict.kind}: ${tally.verdict.reason}`,
    `the log (${entries.length} entries of the window's connections):`,
    ...entries.slice(0, 80).map((e, i) => `  ${i + 1}. #${e.connection} ${e.command}: ${e.text.slice(0, 120)}`),
    ...(entries.length > 80 ? [`  ... ${entries.length - 80} more`] : []),
    `sqltally driver events (${tally.layers.driver?.events.length ?? 0}):`,
    ...(tally.layers.driver?.events ?? [])
      .slice(0, 40)
      .map((e, i) => `  ${i + 1}. #${e.connectionId ?? '?'} ${e.kind} ${e.method} [${e.statementClass}] x${e.parameterSets}: ${e.sql.slice(0, 100)}`),
    `sqltally wire: ${JSON.stringify(tally.layers.wire?.commands ?? null)}, connections ${tally.layers.wire?.connections ?? null}`,
    `sqltally server summary: ${JSON.stringify(tally.layers.server?.summary ?? null)}`,
    `sqltally server perConnection: ${JSON.stringify(tally.layers.server?.perConnection ?? null)}, attribution ${JSON.stringify(tally.layers.server?.attribution ?? null)}`,
    `sqltally server statements: ${JSON.stringify(tally.layers.server?.statements ?? null)}`,
  ];
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// The cells
// ---------------------------------------------------------------------------------------------------------------

/** A workload run through a CaptureSession the way users run it. */
interface Cell {
  name: string;
  /** The session's driver (the connection a measured function is handed). */
  driver: DriverName;
  /** A batch call carries many rows: statement classes are compared as rows, not calls. */
  batch?: boolean;
  /**
   * Where sqltally cannot assert on this cell by design although every count is right, the verdict it gives and the
   * words of its reason. Absent: counts the oracle agrees with, on a private server, must assert.
   */
  verdict?: { kind: 'report'; reason: RegExp };
  /**
   * Opens what the cell needs (the session's connection, the user's pool object) before the oracle's first mark, then
   * runs the window. A connection's set-up statements (the mariadb connector's `SET NAMES`) are not the window's.
   */
  run(session: CaptureSession, log: VerboseLog | null, marked: () => Promise<void>): Promise<Captured<unknown>>;
}

/** `NOT_SUPPORTED`: this backend has no such cell, and why. */
type CellOrReason = Cell | { notSupported: string };

const values = (i: number): [number, number] => [i, i];
const alternating = (i: number): [number, number] => [i, i % 2 === 0 ? i : i + 0.5];
const range = (count: number) => Array.from({ length: count }, (_, i) => i);

/** A window on the session's connection, opened (with its set-up) before the oracle's mark. */
async function hot(s: CaptureSession, marked: () => Promise<void>, fn: (c: any) => Promise<unknown>): Promise<Captured<unknown>> {
  await s.prepare(async () => undefined);
  await marked();
  return s.measure(fn, { hot: true });
}

function at(session: CaptureSession): NetworkConnection {
  const c = session.connection;
  if (c.kind !== 'network') throw new Error('expected a network connection');
  return { kind: 'network', host: c.host, port: c.port, user: c.user, password: c.password, database: c.database };
}

const MYSQL_FAMILY_CELLS: Record<string, CellOrReason> = {
  text: {
    name: 'text: one multi-row INSERT (mysql2 query)',
    driver: 'mysql2',
    run: (s, _l, marked) => hot(s, marked, (c: any) => c.query(`INSERT INTO ${TABLE} (a, b) VALUES ?`, [range(ROWS).map(values)])),
  },
  prepared: {
    name: 'prepared: one execute per row (mysql2 execute)',
    driver: 'mysql2',
    run: (s, _l, marked) =>
      hot(s, marked, async (c: any) => {
        for (const i of range(ROWS)) await c.execute(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`, values(i));
      }),
  },
  batchStable: {
    name: 'batch, stable value types (mariadb connector batch)',
    driver: 'mariadb',
    batch: true,
    run: (s, _l, marked) => hot(s, marked, (c: any) => c.batch(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`, range(ROWS).map(values))),
  },
  batchAlternating: {
    name: 'batch, int and double alternating in one column (mariadb connector batch)',
    driver: 'mariadb',
    batch: true,
    run: (s, _l, marked) => hot(s, marked, (c: any) => c.batch(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`, range(ROWS).map(alternating))),
  },
  transaction: {
    name: 'per row in a transaction (mysql2 beginTransaction, execute per row, commit)',
    driver: 'mysql2',
    run: (s, _l, marked) =>
      hot(s, marked, async (c: any) => {
        await c.beginTransaction();
        for (const i of range(ROWS)) await c.execute(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`, values(i));
        await c.commit();
      }),
  },
  pooled: {
    name: `pooled: a mysql2 pool of ${POOL_SIZE} through session.connection, counted with session.count`,
    driver: 'mysql2',
    run: async (s, _l, marked) => {
      const c = at(s);
      const own = mysql.createPool({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database, connectionLimit: POOL_SIZE });
      try {
        const pool = s.count(own);
        await marked();
        return await s.measure(async () => {
          await Promise.all(
            range(POOL_SIZE).map(async (w) => {
              for (let i = w; i < ROWS; i += POOL_SIZE) await pool.execute(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`, values(i));
            }),
          );
        });
      } finally {
        await own.end();
      }
    },
  },
};

/** The rows of the oracle table as the bulk paths send them: `a\tb\n` lines, each row its own line. */
function bulkRows(): Readable {
  return Readable.from(range(ROWS).map((i) => Buffer.from(bulkTextLine(values(i)))));
}

MYSQL_FAMILY_CELLS.loadData = {
  name: 'LOAD DATA LOCAL INFILE of a stream (mysql2 query with infileStreamFactory)',
  driver: 'mysql2',
  run: (s, _l, marked) =>
    hot(s, marked, (c: any) => c.query({ sql: `LOAD DATA LOCAL INFILE 'oracle.tsv' INTO TABLE ${TABLE} (a, b)`, infileStreamFactory: bulkRows })),
};

const NO_BATCH = { notSupported: 'this backend has no driver with a batch call (pg and postgres.js send one statement per call)' };

const POSTGRES_CELLS: Record<string, CellOrReason> = {
  text: {
    name: 'text: one multi-row INSERT with bound values (pg query)',
    driver: 'pg',
    run: (s, _l, marked) =>
      hot(s, marked, (c: any) =>
        c.query(
          `INSERT INTO ${TABLE} (a, b) VALUES ${range(ROWS)
            .map((i) => `($${2 * i + 1}, $${2 * i + 2})`)
            .join(', ')}`,
          range(ROWS).flatMap(values),
        ),
      ),
  },
  prepared: {
    name: 'prepared: a named statement executed per row (pg query { name })',
    driver: 'pg',
    run: (s, _l, marked) =>
      hot(s, marked, async (c: any) => {
        for (const i of range(ROWS)) await c.query({ name: 'oracle_insert', text: `INSERT INTO ${TABLE} (a, b) VALUES ($1, $2)`, values: values(i) });
      }),
  },
  batchStable: NO_BATCH,
  batchAlternating: NO_BATCH,
  loadData: {
    name: 'COPY FROM STDIN of a stream (pg-copy-streams)',
    driver: 'pg',
    run: (s, _l, marked) => hot(s, marked, (c: any) => pipeline(bulkRows(), c.query(copyFrom(`COPY ${TABLE} (a, b) FROM STDIN`)))),
  },
  transaction: {
    name: 'per row in a transaction (pg BEGIN, query per row, COMMIT)',
    driver: 'pg',
    run: (s, _l, marked) =>
      hot(s, marked, async (c: any) => {
        await c.query('BEGIN');
        for (const i of range(ROWS)) await c.query(`INSERT INTO ${TABLE} (a, b) VALUES ($1, $2)`, values(i));
        await c.query('COMMIT');
      }),
  },
  pooled: {
    name: `pooled: a pg Pool of ${POOL_SIZE} through session.connection, counted with session.count`,
    driver: 'pg',
    run: async (s, _l, marked) => {
      const c = at(s);
      const own = new pg.Pool({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database, max: POOL_SIZE });
      own.on('error', () => undefined);
      try {
        const pool = s.count(own);
        await marked();
        return await s.measure(async () => {
          await Promise.all(
            range(POOL_SIZE).map(async (w) => {
              for (let i = w; i < ROWS; i += POOL_SIZE) await pool.query(`INSERT INTO ${TABLE} (a, b) VALUES ($1, $2)`, values(i));
            }),
          );
        });
      } finally {
        await own.end();
      }
    },
  },
};

/**
 * better-sqlite3's `verbose` callback on the user's handles: the statements the native binding ran, in order, while
 * the user's own code runs (sqltally's probe reads the same handles before and after it; those are its own).
 */
interface VerboseLog {
  entries: LogEntry[];
  open(filename: string, handle: number): Database.Database;
  /** Runs the user's code with recording on. */
  during<T>(work: () => T): T;
}

function verboseLog(): VerboseLog {
  const entries: LogEntry[] = [];
  let recording = false;
  return {
    entries,
    open: (filename, handle) =>
      new Database(filename, {
        verbose: (message?: unknown) => {
          if (recording) entries.push({ connection: handle, command: 'Query', text: String(message ?? '') });
        },
      }),
    during: (work) => {
      recording = true;
      try {
        return work();
      } finally {
        recording = false;
      }
    },
  };
}

function sqliteFile(s: CaptureSession): string {
  const c = s.connection;
  if (c.kind !== 'file') throw new Error('expected a file connection');
  return c.filename;
}

/** On SQLite the user's own handles are counted into the session, so that `verbose` can be attached to them. */
function sqliteCell(name: string, work: (db: Database.Database) => void): Cell {
  return {
    name,
    driver: 'better-sqlite3',
    run: async (s, log, marked) => {
      const own = log!.open(sqliteFile(s), 1);
      try {
        const db = s.count(own);
        await marked();
        return await s.measure(() => log!.during(() => work(db)));
      } finally {
        own.close();
      }
    },
  };
}

const SQLITE_CELLS: Record<string, CellOrReason> = {
  text: sqliteCell('text: one multi-row INSERT (prepare, run)', (db) => {
    db.prepare(
      `INSERT INTO ${TABLE} (a, b) VALUES ${range(ROWS)
        .map(() => '(?, ?)')
        .join(', ')}`,
    ).run(...range(ROWS).flatMap(values));
  }),
  prepared: sqliteCell('prepared: one statement run per row', (db) => {
    const insert = db.prepare(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`);
    for (const i of range(ROWS)) insert.run(...values(i));
  }),
  batchStable: { notSupported: 'better-sqlite3 has no batch call: its bulk insert is a prepared statement run per row in a transaction' },
  batchAlternating: { notSupported: 'better-sqlite3 has no batch call' },
  loadData: { notSupported: 'SQLite has no COPY or LOAD DATA: its bulk path is a prepared statement run per row in a transaction' },
  transaction: sqliteCell('per row in a transaction (db.transaction)', (db) => {
    const insert = db.prepare(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`);
    db.transaction(() => {
      for (const i of range(ROWS)) insert.run(...values(i));
    })();
  }),
  pooled: {
    name: `pooled: ${POOL_SIZE} handles on the file, each counted with session.count`,
    driver: 'better-sqlite3',
    // PRAGMA data_version of one handle moves when any other handle commits: with several, a writer beside them hides.
    verdict: { kind: 'report', reason: /with several SQLite handles a writer beside them cannot be seen/ },
    run: async (s, log, marked) => {
      const own = range(POOL_SIZE).map((h) => log!.open(sqliteFile(s), h + 1));
      try {
        const handles = own.map((d) => s.count(d));
        await marked();
        return await s.measure(() =>
          log!.during(() =>
            handles.forEach((db, w) => {
              const insert = db.prepare(`INSERT INTO ${TABLE} (a, b) VALUES (?, ?)`);
              for (let i = w; i < ROWS; i += POOL_SIZE) insert.run(...values(i));
            }),
          ),
        );
      } finally {
        for (const d of own) d.close();
      }
    },
  },
};

const CELLS = {
  mariadb: MYSQL_FAMILY_CELLS,
  mysql: MYSQL_FAMILY_CELLS,
  postgres: POSTGRES_CELLS,
  sqlite: SQLITE_CELLS,
} satisfies Record<BackendName, Record<string, CellOrReason>>;

const CREATE = {
  mariadb: `CREATE TABLE ${TABLE} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, b DOUBLE NOT NULL)`,
  mysql: `CREATE TABLE ${TABLE} (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, b DOUBLE NOT NULL)`,
  postgres: `CREATE TABLE ${TABLE} (id serial PRIMARY KEY, a int NOT NULL, b double precision NOT NULL)`,
  sqlite: `CREATE TABLE ${TABLE} (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b REAL NOT NULL)`,
} satisfies Record<BackendName, string>;

async function createTable(b: StartedBackend): Promise<void> {
  const sql = CREATE[b.description.name];
  if (b.connection.kind === 'file') {
    const db = new Database(b.connection.filename);
    try {
      db.exec(`DROP TABLE IF EXISTS ${TABLE}`);
      db.exec(sql);
    } finally {
      db.close();
    }
    return;
  }
  await withSqlClient(b.description.name === 'postgres' ? 'postgres' : 'mysql', b.connection, { backend: b.description.id }, async (client) => {
    await client.query(`DROP TABLE IF EXISTS ${TABLE}`);
    await client.query(sql);
  });
}

/** What a second handle, which sqltally does not count, reads of the SQLite file. */
interface SqliteReading {
  rows: number;
  pages: number;
}

function sqliteReading(b: StartedBackend): SqliteReading {
  if (b.connection.kind !== 'file') throw new Error('expected a file backend');
  const db = new Database(b.connection.filename, { readonly: true });
  try {
    return {
      rows: Number((db.prepare(`SELECT COUNT(*) AS n FROM ${TABLE}`).get() as { n: number }).n),
      pages: Number(db.pragma('page_count', { simple: true })),
    };
  } finally {
    db.close();
  }
}

describeEachBackend((b) => {
  const noLog = SERVER_LOG_NOT_SUPPORTED[b.provider];
  if (noLog) {
    for (const key of Object.keys(CELLS[b.backend])) it.skip(`${key}: NOT_SUPPORTED: ${noLog}`, () => undefined);
    return;
  }
  let log: ServerLog | null = null;
  // Declared before withBackend: afterAll hooks run in the order declared, so the log is turned off while the server is up.
  afterAll(async () => {
    await log?.close();
  });
  const backend = withBackend(b.id);
  const cells = CELLS[b.backend];

  beforeAll(async () => {
    await createTable(backend());
    if (b.backend === 'mariadb' || b.backend === 'mysql') log = await mysqlFamilyLog(backend());
    if (b.backend === 'postgres') log = await postgresLog(backend());
  });

  for (const [key, cell] of Object.entries(cells)) {
    if ('notSupported' in cell) {
      it.skip(`${key}: NOT_SUPPORTED: ${cell.notSupported}`, () => undefined);
      continue;
    }
    it(`${cell.name}: every count agrees with the server's own log, statement by statement`, async () => {
      const started = backend();
      await using session = await CaptureSession.open({
        backend: started,
        driver: cell.driver,
        table: { name: TABLE, ...(b.backend === 'postgres' ? { schema: 'public' } : {}) },
      });
      const verbose = b.backend === 'sqlite' ? verboseLog() : null;
      let rowsBefore = 0;
      let sqliteBefore: SqliteReading | null = null;
      let from = 0;
      const tally = await cell.run(session, verbose, async () => {
        if (log) rowsBefore = await log.rows(TABLE);
        else rowsBefore = (sqliteBefore = sqliteReading(started)).rows;
        from = log ? await log.mark() : 0;
      });
      const entries = log ? await log.since(from) : verbose!.entries;
      const sqliteAfter = log ? null : sqliteReading(started);
      const rows = (log ? await log.rows(TABLE) : sqliteAfter!.rows) - rowsBefore;
      const sqliteDelta = sqliteBefore && sqliteAfter ? { rows, pages: sqliteAfter.pages - (sqliteBefore as SqliteReading).pages } : null;
      expect(tally.workloadError).toBeNull();
      expect(rows).toBe(ROWS);

      // sqltally's own statement on a window connection: the wire proxy's settle request (PostgreSQL); never the workload's.
      const own = entries.filter((e) => e.text === PG_SETTLE_SQL);
      const workload = entries.filter((e) => e.text !== PG_SETTLE_SQL);
      const counts = countLog(workload);
      const unknown = workload.filter(
        (e) => !['Query', 'Prepare', 'Execute', 'Close stmt', 'Reset stmt', 'Parse', 'Bind', 'Connect', 'Quit'].includes(e.command),
      );

      expect(counts.executed).toBeGreaterThan(0);
      const checks = checksFor(b.backend, tally, counts, rows, cell, sqliteDelta);
      checks.push({ what: 'log entries of a kind the oracle does not know', oracle: 0, sqltally: unknown.length });
      const failed = checks.filter((c) => c.oracle !== c.sqltally);
      const report = process.env['SQLTALLY_ORACLE_REPORT'];
      // For the closing note's table: every check of every cell, one JSON line each, when asked for.
      if (report)
        fs.appendFileSync(
          report,
          `${JSON.stringify({ backend: b.id, cell: key, verdict: tally.verdict.kind, checks, summary: tally.layers.server?.summary, driver: { byKind: tally.layers.driver?.byKind, calls: tally.layers.driver?.calls, parameterSets: tally.layers.driver?.parameterSets, bindValues: tally.layers.driver?.bindValues, rowsAffected: tally.layers.driver?.rowsAffected }, wire: tally.layers.wire })}\n`,
        );
      if (failed.length > 0) throw new Error(describeFailure(cell.name, failed, entries, tally));
      // Counts the oracle agrees with, on a private server where every connection is the test's own: nothing keeps
      // the verdict from asserting, unless the cell says why sqltally cannot know it.
      const verdict = `${tally.verdict.kind}: ${tally.verdict.reason}`;
      if (cell.verdict) {
        expect(verdict).toMatch(new RegExp(`^${cell.verdict.kind}: `));
        expect(verdict).toMatch(cell.verdict.reason);
      } else expect(verdict).toMatch(/^assert: /);
      // The wire proxy settled each window connection before the end reading (PostgreSQL: one flush query each).
      if (b.backend === 'postgres') expect(own.length).toBeGreaterThanOrEqual(tally.layers.wire?.connections ?? 0);
    });
  }
});
