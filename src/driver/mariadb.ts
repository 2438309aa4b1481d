import { messageOf, SqltallyError } from '../shared/errors';
import type { StatementSink } from '../sql/events';
import { countPlaceholders } from '../sql/tokenizer';
import { classifyCached } from '../sql/statement-cache';
import type { CallShape, CallSite, MethodHooks, ShapeMemo, WrapOptions, WrapperMark } from './counted';
import { countedProxy, countExpandedValues, countParameterValues, isPlainObject, memoShape, toCount, track, wrapOnce } from './counted';
import { loadDriverPackage, networkTarget } from './load';
import type { DriverModule } from './module';
import { mysqlProtocolModel } from './mysql-model';
import { MYSQL_NUMBER_OPTIONS } from './mysql2';
import { isArray, objectKeys, toText } from '../shared/intrinsics';

const DRIVER = 'mariadb';
/** The connector gives up on a connect after 1 s by default: too short for a loaded CI machine. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The subset of the mariadb connector's promise `Connection` (also what `pool.getConnection()` returns) that is
 * counted: `query` (text protocol, arrays expanded on the client), `execute` (binary protocol), `batch` (ONE
 * event of kind `batch` whatever the connector sends: bulk command, or one execute per row), `prepare` (the
 * returned statement's `execute` is counted), and `beginTransaction`/`commit`/`rollback`. Note `commit` and
 * `rollback` send nothing when no transaction is open; they are still one driver call. Not counted:
 * `queryStream`, statement `executeStream`, `importFile`, `ping`, `reset`, `changeUser`, `end`.
 */
export interface MariadbConnection {
  query(sql: unknown, values?: unknown): Promise<unknown>;
  execute(sql: unknown, values?: unknown): Promise<unknown>;
  batch(sql: unknown, values?: unknown): Promise<unknown>;
  prepare(sql: unknown): Promise<unknown>;
  beginTransaction(): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  readonly threadId: number | null;
}

/**
 * The subset of the mariadb promise `Pool` that is counted: `query`, `execute`, `batch` (without a connection
 * id: the pool does not say which connection ran them) and `getConnection`, whose connection is wrapped.
 */
export interface MariadbPool {
  query(sql: unknown, values?: unknown): Promise<unknown>;
  execute(sql: unknown, values?: unknown): Promise<unknown>;
  batch(sql: unknown, values?: unknown): Promise<unknown>;
  getConnection(): Promise<unknown>;
}

type Loose = Record<string, unknown>;

const TRANSACTION_CONTROL = {
  beginTransaction: 'START TRANSACTION',
  commit: 'COMMIT',
  rollback: 'ROLLBACK',
} as const;

/** `affectedRows` of an OkPacket (number or bigint), or the sum over an array of them; null for row sets. */
export function mariadbRowsAffected(result: unknown): number | null {
  if (isOkPacket(result)) return toCount(result.affectedRows);
  if (!isArray(result)) return null;
  let sum: number | null = null;
  for (const part of result) {
    if (isOkPacket(part)) sum = (sum ?? 0) + (toCount(part.affectedRows) ?? 0);
  }
  return sum;
}

/** Structural: the connector's bundled build minifies class names, so `constructor.name` is not `OkPacket`. */
function isOkPacket(value: unknown): value is { affectedRows: unknown } {
  return value !== null && typeof value === 'object' && !isArray(value) && 'affectedRows' in value && 'insertId' in value && 'warningStatus' in value;
}

/**
 * Rows and values of a `batch` call, shaped the way the connector shapes them (`formatBatchValues`): an array of
 * arrays or of named-parameter objects is one row each; a flat array is one row per value when the statement
 * has exactly one placeholder, else a single row; a lone value is one row of one value.
 */
export function countBatch(sql: string, values: unknown): { parameterSets: number; bindValues: number } {
  if (!isArray(values)) return values === undefined ? { parameterSets: 0, bindValues: 0 } : { parameterSets: 1, bindValues: 1 };
  if (values.length === 0) return { parameterSets: 0, bindValues: 0 };
  const first: unknown = values[0];
  if (isArray(first) || isPlainObject(first)) {
    let bindValues = 0;
    for (const row of values) bindValues += isArray(row) ? row.length : isPlainObject(row) ? objectKeys(row).length : 1;
    return { parameterSets: values.length, bindValues };
  }
  if (countPlaceholders(sql, 'mysql') === 1) return { parameterSets: values.length, bindValues: values.length };
  return { parameterSets: 1, bindValues: values.length };
}

function sqlOf(sql: unknown): string {
  if (typeof sql === 'string') return sql;
  if (sql !== null && typeof sql === 'object' && typeof (sql as Loose).sql === 'string') return (sql as Loose).sql as string;
  return toText(sql);
}

/** The connector's `paramSetter`: values in the options object win over the second argument. */
function valuesOf(sql: unknown, values: unknown): unknown {
  if (sql !== null && typeof sql === 'object' && (sql as Loose).values !== undefined) return (sql as Loose).values;
  return values;
}

function shape(method: string, kind: CallShape['kind'], sql: string, bindValues: number, parameterSets = 1): CallShape {
  return { method, kind, sql, statementClass: classifyCached(sql, 'mysql'), bindValues, parameterSets };
}

const noRows = (): null => null;

function commonHooks<T>(site: CallSite): MethodHooks<T> {
  const memo: ShapeMemo = { last: null };
  return {
    query: (original) =>
      function query(...args: unknown[]) {
        const values = valuesOf(args[0], args[1]);
        // The connector writes an object among the values as one JSON string; `permitSetMultiParamEntries` (pairs
        // instead) is a connection option it does not honour per query, and under it this counts one too.
        const bound = countExpandedValues(values, 'one');
        return track(site, memoShape(memo, 'query', 'query', sqlOf(args[0]), bound, 1, 'mysql'), () => original(...args), mariadbRowsAffected, values);
      },
    execute: (original) =>
      function execute(...args: unknown[]) {
        const values = valuesOf(args[0], args[1]);
        return track(
          site,
          memoShape(memo, 'execute', 'execute', sqlOf(args[0]), countParameterValues(values), 1, 'mysql'),
          () => original(...args),
          mariadbRowsAffected,
          values,
        );
      },
    batch: (original) =>
      function batch(...args: unknown[]) {
        const sql = sqlOf(args[0]);
        const { parameterSets, bindValues } = countBatch(sql, valuesOf(args[0], args[1]));
        return track(site, shape('batch', 'batch', sql, bindValues, parameterSets), () => original(...args), mariadbRowsAffected);
      },
  };
}

/** Counts every call on a mariadb promise connection or pool into `sink`; same type and behaviour out. */
export function wrapMariadb<T extends object>(target: T, sink: StatementSink, _opts?: WrapOptions): T {
  return wrapOnce(DRIVER, target, sink, () => {
    const o = target as Loose;
    if (typeof o.query !== 'function' || typeof o.batch !== 'function') {
      throw new SqltallyError('not a mariadb promise connection or pool', {
        phase: 'wrap',
        hint: "pass what require('mariadb').createConnection/createPool returned (the promise API)",
      });
    }
    const mark: WrapperMark = { driver: DRIVER, sink, target };
    const isPool = typeof o.getConnection === 'function';
    const site: CallSite = {
      driver: DRIVER,
      sink,
      connectionId: isPool
        ? () => null
        : () => {
            const id = (target as Loose).threadId;
            return typeof id === 'number' ? id : null;
          },
    };
    const hooks = commonHooks<T>(site);
    if (isPool) {
      hooks.getConnection = (original) =>
        function getConnection(...args: unknown[]) {
          return (original(...args) as Promise<object>).then((connection) => wrapMariadb(connection, sink));
        };
    } else {
      hooks.prepare = (original) =>
        function prepare(...args: unknown[]) {
          const sql = sqlOf(args[0]);
          const prepared = track(site, shape('prepare', 'prepare', sql, 0, 0), () => original(...args), noRows) as Promise<object>;
          return prepared.then((statement) => wrapStatement(statement, sink, site, sql));
        };
      for (const [method, sql] of Object.entries(TRANSACTION_CONTROL)) {
        hooks[method] = (original) =>
          function transactionControl(...args: unknown[]) {
            return track(site, shape(method, 'query', sql, 0), () => original(...args), noRows);
          };
      }
    }
    return countedProxy(target, mark, hooks);
  });
}

/** A prepared statement: `execute(values)` is counted, and `executeBatch` too where a connector version has it. */
function wrapStatement(statement: object, sink: StatementSink, site: CallSite, sql: string): object {
  return wrapOnce(DRIVER, statement, sink, () => {
    const statementClass = classifyCached(sql, 'mysql');
    // A loop of executes hands the window one shape: found by identity, its text asked about once per window.
    const memo: ShapeMemo = { last: null };
    const hooks: MethodHooks<object> = {
      execute: (original) =>
        function execute(...args: unknown[]) {
          const callShape = memoShape(memo, 'execute', 'execute', sql, countParameterValues(args[0]), 1, 'mysql');
          return track(site, callShape, () => original(...args), mariadbRowsAffected, args[0]);
        },
      executeBatch: (original) =>
        function executeBatch(...args: unknown[]) {
          const { parameterSets, bindValues } = countBatch(sql, args[0]);
          const callShape: CallShape = { method: 'executeBatch', kind: 'batch', sql, statementClass, bindValues, parameterSets };
          return track(site, callShape, () => original(...args), mariadbRowsAffected);
        },
    };
    return countedProxy(statement, { driver: DRIVER, sink, target: statement }, hooks);
  });
}

type MariadbModule = typeof import('mariadb');

/** The mariadb connector (promise API): connections and pools, `batch` included. */
export const MARIADB_DRIVER: DriverModule<'mariadb', import('mariadb').Connection> = {
  name: 'mariadb',
  packageName: 'mariadb',
  backends: ['mariadb', 'mysql'],
  dialect: 'mysql',
  embedded: false,
  isClosed: () => false,
  releases: ['mariadb-3.3'],
  compatReleases: [],
  accepts: "a mariadb promise connection or pool (require('mariadb').createConnection/createPool)",
  recognises: (value: unknown) =>
    value !== null && typeof value === 'object' && typeof (value as Loose).query === 'function' && typeof (value as Loose).batch === 'function',
  wrap: (target, sink) => wrapMariadb(target, sink),
  async open(connection, opts) {
    const net = networkTarget('mariadb', connection, opts);
    const mariadb = await loadDriverPackage<MariadbModule>(opts.driverPackage ?? 'mariadb', 'mariadb', opts.backend);
    const config: import('mariadb').ConnectionConfig = {
      host: net.host,
      port: net.port,
      user: net.user,
      password: net.password,
      ...(net.database ? { database: net.database } : {}),
      connectTimeout: opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      ...MYSQL_NUMBER_OPTIONS,
      ...opts.driverOptions,
    };
    let handle = await mariadb.createConnection(config);
    const closedWhileOpening: number[] = [];
    // The connector does not learn the server's max_allowed_packet; it assumes up to 1 GiB and sizes bulk
    // commands by that, so a big batch would be refused by the server. Reopen with the server's value.
    if (opts.driverOptions?.maxAllowedPacket === undefined) {
      const rows: { packet: number | bigint | string }[] = await handle.query('SELECT @@max_allowed_packet AS packet');
      const serverPacket = Number(rows[0]?.packet);
      if (Number.isFinite(serverPacket) && serverPacket > 0) {
        const first = handle.threadId;
        // end() resolves once COM_QUIT is written, not when the server has dropped the session: the caller is told.
        await handle.end();
        if (typeof first === 'number') closedWhileOpening.push(first);
        handle = await mariadb.createConnection({ ...config, maxAllowedPacket: serverPacket });
      }
    }
    const opened = handle;
    // A server that goes away under an idle connection emits 'error'; unheard, that takes the process down.
    opened.on('error', () => undefined);
    return { handle: opened, connectionId: opened.threadId, closedWhileOpening, close: () => opened.end() };
  },
  // The connector takes a stream returned from its callback-style option, and leaves its connecting state on 'connect'.
  streamOptions: (open) => ({ stream: () => open().connect() }),
  ownSql: (h, onLost) => {
    h.on('error', (error: unknown) => onLost(messageOf(error)));
    return async (sql, params) => [...((await h.query(sql, params ? [...params] : undefined)) as Record<string, unknown>[])];
  },
  runSql: async (h, sql) => Array.from((await h.query(sql)) as unknown[]),
  ping: (h) => h.ping(),
  rowSource: (h) => ({ all: async (sql, params = []) => [...((await h.execute(sql, [...params])) as Record<string, unknown>[])] }),
  model: mysqlProtocolModel,
  stableWireBytes: true,
};
