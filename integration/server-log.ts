import fs from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { NetworkConnection, ProviderKind, StartedBackend } from '../src/backends/types';
import { isProbeConnection } from '../src/server/own-connections';

/**
 * The servers' own statement logs between two marks, an independent truth: MySQL's general log to a FILE (a TABLE moves
 * the Handler_write checked), PostgreSQL's with `log_statement = 'all'`; restored by `close()` for the pool.
 */

/**
 * Which providers leave the server's log where this process can read it, or why not (NOT_SUPPORTED): a private server's
 * is under its data directory, lent with it (`lentPart`); SQLite's reading is the handle's own `verbose` callback.
 */
export const SERVER_LOG_NOT_SUPPORTED = {
  local: null,
  embedded: null,
  testcontainers: 'the server runs in a container: its log file is inside the container, not on this machine, so there is no server log to read',
  external: "an external server: its log (if any) is on that server's machine, and reading it would mean reconfiguring a server sqltally does not own",
} satisfies Record<ProviderKind, string | null>;

const MARK_TIMEOUT_MS = 15_000;
/** What the wire proxy sends on a PostgreSQL window connection to flush its statistics: sqltally's own, set aside. */
export const PG_SETTLE_SQL = 'SELECT pg_stat_force_next_flush()';

export type Command =
  // MySQL protocol, as the general log names them.
  | 'Query'
  | 'Prepare'
  | 'Execute'
  | 'Close stmt'
  | 'Reset stmt'
  // PostgreSQL extended protocol, as log_min_duration_statement names them.
  | 'Parse'
  | 'Bind'
  | string;

/** One command a window connection sent, as the server's log has it. */
export interface LogEntry {
  connection: number;
  command: Command;
  text: string;
  /** The prepared statement's name, where the log gives one (PostgreSQL `execute <name>:`). */
  name?: string;
}

/** A reader of the server's own log, positioned between two points in time. */
export interface ServerLog {
  /** Everything logged until now has reached the log: the position after it. */
  mark(): Promise<number>;
  /** The entries logged from `from` until now, of every connection but the oracle's own and sqltally's probes'. */
  since(from: number): Promise<LogEntry[]>;
  /** Rows in the table, read through the oracle's own connection. */
  rows(table: string): Promise<number>;
  close(): Promise<void>;
}

function network(b: StartedBackend): NetworkConnection {
  if (b.connection.kind !== 'network') throw new Error(`${b.description.id} is not a network backend`);
  return b.connection;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Reads `file` from byte `from` on, in whole lines (a line still being written is left for the next read). */
function readFrom(file: string, from: number): { text: string; end: number } {
  const size = fs.statSync(file).size;
  if (size <= from) return { text: '', end: from };
  const fd = fs.openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(size - from);
    fs.readSync(fd, buffer, 0, buffer.length, from);
    const lastNewline = buffer.lastIndexOf(0x0a);
    if (lastNewline < 0) return { text: '', end: from };
    return { text: buffer.subarray(0, lastNewline + 1).toString('utf8'), end: from + lastNewline + 1 };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Sends a marker statement on the oracle's connection and waits for it in the log, where every statement answered before
 * it already is (logged before run, through one writer in order). Returns the offset just after the marker's line.
 */
async function waitForMarker(
  file: string,
  from: number,
  send: (marker: string) => Promise<void>,
  isMarker: (line: string, marker: string) => boolean,
): Promise<number> {
  const deadline = Date.now() + MARK_TIMEOUT_MS;
  let attempt = 0;
  for (;;) {
    attempt += 1;
    const marker = `sqltally-oracle-mark-${process.pid}-${Date.now()}-${attempt}`;
    await send(marker);
    // PostgreSQL applies a reloaded setting at each backend's next command: a marker sent before that is not logged.
    const resendAt = Date.now() + 1000;
    while (Date.now() < resendAt) {
      const { text } = readFrom(file, from);
      let offset = from;
      for (const line of text.split('\n')) {
        offset += Buffer.byteLength(line, 'utf8') + 1;
        if (isMarker(line, marker)) return offset;
      }
      if (Date.now() > deadline) throw new Error(`marker ${marker} never reached the server log ${file}`);
      await sleep(5);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// MySQL and MariaDB: the general query log, to a file
// ---------------------------------------------------------------------------------------------------------------

const GENERAL_LOG_NAME = 'sqltally-oracle-general.log';
/** `[time]\t[ ...]id command\targument`: MariaDB leaves the time out when it did not change, MySQL always writes it. */
const GENERAL_LOG_LINE = /^[^\t]*\t+ *(\d+) ([^\t]+?)(?:\t(.*))?$/;

export async function mysqlFamilyLog(b: StartedBackend): Promise<ServerLog> {
  const at = network(b);
  // Checked before the server's settings are touched: a lent server must go back to the pool as it came.
  if (!b.dataDir)
    throw new Error(
      `${b.description.id} (provider ${b.description.provider}) came without its data directory (StartedBackend.dataDir), where its general log is written`,
    );
  const connect = () => mysql.createConnection({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
  // A connection of the oracle's own for each step: none of them is open while a window runs.
  const withAdmin = async <T>(fn: (c: mysql.Connection, id: number) => Promise<T>): Promise<T> => {
    const c = await connect();
    try {
      return await fn(c, c.threadId);
    } finally {
      await c.end();
    }
  };
  const ownIds = new Set<number>();
  // The pooled server goes back to the next test file as it came: its log settings are restored on close.
  const original = await withAdmin(async (c) => {
    const [rows] = await c.query('SELECT @@GLOBAL.log_output AS output, @@GLOBAL.general_log_file AS file, @@GLOBAL.general_log AS enabled');
    return (rows as { output: string; file: string; enabled: number }[])[0]!;
  });
  await withAdmin(async (c) => {
    await c.query("SET GLOBAL log_output = 'FILE'");
    // Relative to the data directory: the same place whether the server runs here or chrooted.
    await c.query(`SET GLOBAL general_log_file = '${GENERAL_LOG_NAME}'`);
    await c.query('SET GLOBAL general_log = 1');
  });
  const dataDir = b.dataDir;
  const file = [path.join(dataDir, GENERAL_LOG_NAME), path.join(dataDir, 'data', GENERAL_LOG_NAME)].find((f) => fs.existsSync(f));
  if (!file) throw new Error(`the general log ${GENERAL_LOG_NAME} was not found under ${b.dataDir}`);

  const mark = () =>
    withAdmin(async (c, id) => {
      ownIds.add(id);
      return waitForMarker(
        file,
        0,
        async (marker) => void (await c.query(`SELECT '${marker}' AS mark`)),
        (line, marker) => line.includes(marker),
      );
    });
  return {
    mark,
    since: async (from) => {
      const to = await mark();
      const text = fs.readFileSync(file).subarray(from, to).toString('utf8');
      const entries: LogEntry[] = [];
      for (const line of text.split('\n')) {
        const m = GENERAL_LOG_LINE.exec(line);
        if (!m) {
          // A statement spanning lines continues the entry before it.
          const last = entries[entries.length - 1];
          if (last && line.length > 0) last.text += `\n${line}`;
          continue;
        }
        const connection = Number(m[1]);
        if (ownIds.has(connection) || isProbeConnection(at, connection)) continue;
        entries.push({ connection, command: m[2]!.trim(), text: (m[3] ?? '').trim() });
      }
      return entries;
    },
    rows: (table) =>
      withAdmin(async (c, id) => {
        ownIds.add(id);
        const [r] = await c.query(`SELECT COUNT(*) AS n FROM ${table}`);
        return Number((r as { n: number }[])[0]?.n);
      }),
    close: () =>
      withAdmin(async (c) => {
        await c.query('SET GLOBAL general_log = 0');
        await c.query('SET GLOBAL general_log_file = ?', [original.file]);
        await c.query('SET GLOBAL log_output = ?', [original.output]);
        if (Number(original.enabled) === 1) await c.query('SET GLOBAL general_log = 1');
      }),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL: the server's own log file
// ---------------------------------------------------------------------------------------------------------------

/** `<date> <time> UTC [<pid>] LOG:  message`; a line without the prefix continues the message before it. */
const PG_LOG_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] ([A-Z]+): {2}(.*)$/;

export async function postgresLog(b: StartedBackend): Promise<ServerLog> {
  const at = network(b);
  const file = b.logFile;
  if (!file) throw new Error(`${b.description.id} was started without a log file of its own (StartedBackend.logFile)`);
  const withAdmin = async <T>(fn: (c: pg.Client, pid: number) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ host: at.host, port: at.port, user: at.user, password: at.password, database: at.database });
    await c.connect();
    try {
      return await fn(c, (c as unknown as { processID: number }).processID);
    } finally {
      await c.end();
    }
  };
  const ownPids = new Set<number>();
  await withAdmin(async (c) => {
    await c.query("ALTER SYSTEM SET log_statement = 'all'");
    await c.query('ALTER SYSTEM SET log_min_duration_statement = 0');
    await c.query('ALTER SYSTEM SET log_connections = on');
    await c.query('SELECT pg_reload_conf()');
  });
  const mark = () =>
    withAdmin(async (c, pid) => {
      ownPids.add(pid);
      return waitForMarker(
        file,
        0,
        async (marker) => void (await c.query(`SELECT '${marker}' AS mark`)),
        (line, marker) => line.includes(`[${pid}] LOG:  statement: SELECT '${marker}'`),
      );
    });
  return {
    mark,
    since: async (from) => {
      const to = await mark();
      const text = fs.readFileSync(file).subarray(from, to).toString('utf8');
      const messages: { pid: number; level: string; message: string }[] = [];
      for (const line of text.split('\n')) {
        const m = PG_LOG_LINE.exec(line);
        if (m) messages.push({ pid: Number(m[1]), level: m[2]!, message: m[3]! });
        else if (line.length > 0 && messages.length > 0) messages[messages.length - 1]!.message += `\n${line}`;
      }
      const entries: LogEntry[] = [];
      for (const { pid, level, message } of messages) {
        if (level !== 'LOG' || ownPids.has(pid) || isProbeConnection(at, pid)) continue;
        let m: RegExpExecArray | null;
        if ((m = /^statement: ([\s\S]*)$/.exec(message))) entries.push({ connection: pid, command: 'Query', text: m[1]!.trim() });
        else if ((m = /^execute ([^:]+): ([\s\S]*)$/.exec(message))) entries.push({ connection: pid, command: 'Execute', text: m[2]!.trim(), name: m[1]! });
        else if ((m = /^duration: [\d.]+ ms {2}(parse|bind) ([^:]+): ([\s\S]*)$/.exec(message)))
          entries.push({ connection: pid, command: m[1] === 'parse' ? 'Parse' : 'Bind', text: m[3]!.trim() });
        // A connection's handshake: received, then (with a password, as private servers ask one) authenticated.
        else if (/^duration: [\d.]+ ms$/.test(message) || /^connection (received|authenticated): /.test(message)) continue;
        else if (/^connection authorized: /.test(message)) entries.push({ connection: pid, command: 'Connect', text: message });
        else entries.push({ connection: pid, command: `LOG ${message.slice(0, 40)}`, text: message });
      }
      return entries;
    },
    rows: (table) =>
      withAdmin(async (c, pid) => {
        ownPids.add(pid);
        return Number((await c.query(`SELECT COUNT(*) AS n FROM ${table}`)).rows[0]?.n);
      }),
    close: () =>
      withAdmin(async (c) => {
        await c.query('ALTER SYSTEM RESET log_statement');
        await c.query('ALTER SYSTEM RESET log_min_duration_statement');
        await c.query('ALTER SYSTEM RESET log_connections');
        await c.query('SELECT pg_reload_conf()');
      }),
  };
}

/**
 * Splits a statement text on the semicolons between statements (outside quotes and comments): a simple Query or a
 * COM_QUERY may carry several. The log's own reading, deliberately not sqltally's tokenizer.
 */
export function splitStatements(text: string): string[] {
  const out: string[] = [];
  let current = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    const two = text.slice(i, i + 2);
    if (ch === "'" || ch === '"' || ch === '`') {
      const close = text.indexOf(ch, i + 1);
      const end = close < 0 ? text.length : close + 1;
      current += text.slice(i, end);
      i = end;
    } else if (two === '--') {
      const close = text.indexOf('\n', i);
      i = close < 0 ? text.length : close + 1;
    } else if (two === '/*') {
      const close = text.indexOf('*/', i + 2);
      i = close < 0 ? text.length : close + 2;
    } else if (ch === ';') {
      if (current.trim()) out.push(current.trim());
      current = '';
      i += 1;
    } else {
      current += ch;
      i += 1;
    }
  }
  if (current.trim()) out.push(current.trim());
  return out;
}

/** A statement's class by its first keyword, in the classes sqltally's tallies name. */
export function logClassOf(text: string): string {
  const word = /^\s*\(?\s*([A-Za-z]+)/.exec(text)?.[1]?.toLowerCase() ?? '';
  const aliases: Record<string, string> = { start: 'begin', begin: 'begin', end: 'commit', commit: 'commit', abort: 'rollback', rollback: 'rollback' };
  if (word in aliases) return aliases[word]!;
  return ['insert', 'select', 'update', 'delete', 'set', 'create', 'drop', 'show'].includes(word) ? word : 'other';
}

/** What a stretch of the log holds, counted in the terms of sqltally's wire and server layers. */
export interface LogStatements {
  /** Distinct connections with at least one entry. */
  connections: number;
  /** Entries per command (Query, Execute, Parse, Bind, Prepare, Close stmt, Init DB, Connect, Quit, ...). */
  commands: Record<string, number>;
  /** Statements executed: each statement of a text query (split on its semicolons) and each Execute. */
  statements: number;
  byClass: Record<string, number>;
  /**
   * Transaction control (BEGIN, END/COMMIT, ROLLBACK) executed again from a named prepared statement on the same
   * connection: pg_stat_statements counts such a statement at its first run on a connection only.
   */
  namedTransactionRepeats: number;
}

const TRANSACTION_CONTROL = new Set(['begin', 'commit', 'rollback']);

export function countStatements(entries: LogEntry[]): LogStatements {
  const commands: Record<string, number> = {};
  const byClass: Record<string, number> = {};
  const seenNamed = new Set<string>();
  let statements = 0;
  let namedTransactionRepeats = 0;
  const add = (cls: string) => {
    statements += 1;
    byClass[cls] = (byClass[cls] ?? 0) + 1;
  };
  for (const e of entries) {
    commands[e.command] = (commands[e.command] ?? 0) + 1;
    if (e.command === 'Query') for (const s of splitStatements(e.text)) add(logClassOf(s));
    if (e.command === 'Execute') {
      const cls = logClassOf(e.text);
      add(cls);
      if (e.name !== undefined && e.name !== '<unnamed>' && TRANSACTION_CONTROL.has(cls)) {
        const key = `${e.connection}/${e.name}`;
        if (seenNamed.has(key)) namedTransactionRepeats += 1;
        else seenNamed.add(key);
      }
    }
  }
  return { connections: new Set(entries.map((e) => e.connection)).size, commands, statements, byClass, namedTransactionRepeats };
}
