import path from 'node:path';
import { parseBackendId } from '../backends/registry';
import { BACKEND_NAMES } from '../backends/types';
import { WINDOW_NAME_MAX_CHARS } from '../report/schema';
import { WIRE_REQUESTS } from '../capture/wire-choice';
import type { WireRequest } from '../capture/wire-choice';
import { UsageError, parseFlags } from './usage';
import type { TableName } from './windows';

export const DEFAULT_BACKEND = 'postgres';
export const DEFAULT_KILL_GRACE_MS = 2_000;
const MAX_MS = 24 * 3600 * 1000;

/** What `sqltally exec` and `sqltally proxy` share: where, what table, where the report goes, what to gate. */
export interface WindowRunOptions {
  backend: string;
  /**
   * How the wire layer is read: through the proxy, a passive capture of the loopback traffic, or `auto` (exec's
   * default): passive where it counts what the proxy would, else the proxy.
   */
  wire: WireRequest;
  table: TableName | undefined;
  out: string | undefined;
  force: boolean;
  write: boolean;
  json: boolean;
  baseline: string | undefined;
}

export interface ExecOptions extends WindowRunOptions {
  /** The command and its arguments, after `--`. */
  argv: string[];
  /** The name of the window around the command (default: the command's file name). */
  name: string;
  /** The command opens its own windows through the control endpoint; none is measured around it. */
  named: boolean;
  timeoutMs: number | undefined;
  killGraceMs: number;
}

export interface ProxyOptions extends WindowRunOptions {
  /** Where the full environment (password included) is written, mode 0600. */
  envFile: string | undefined;
  showPassword: boolean;
}

const SHARED_FLAGS = {
  backend: { type: 'string' },
  wire: { type: 'string' },
  table: { type: 'string' },
  out: { type: 'string' },
  force: { type: 'boolean', default: false },
  'no-write': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  baseline: { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

function ms(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  const n = /^\d+$/.test(value.trim()) ? Number(value.trim()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > MAX_MS) throw new UsageError(`${flag} takes whole milliseconds from ${min} to ${MAX_MS}, got "${value}"`);
  return n;
}

/** `name` or `schema.name`, identifiers only: it is quoted into sqltally's own row count. */
export function tableName(value: string | undefined): TableName | undefined {
  if (value === undefined) return undefined;
  const parts = value.split('.');
  const ident = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;
  if (parts.length > 2 || !parts.every((p) => ident.test(p)))
    throw new UsageError(`--table takes a table name or schema.name (letters, digits, _), got "${value}"`);
  return parts.length === 2 ? { schema: parts[0]!, name: parts[1]! } : { name: parts[0]! };
}

function shared(
  v: {
    backend?: string | undefined;
    wire?: string | undefined;
    table?: string | undefined;
    out?: string | undefined;
    force: boolean;
    'no-write': boolean;
    json: boolean;
    baseline?: string | undefined;
  },
  defaultWire: WireRequest,
): WindowRunOptions {
  const backend = v.backend ?? DEFAULT_BACKEND;
  try {
    parseBackendId(backend);
  } catch {
    throw new UsageError(`--backend "${backend}": unknown backend; use ${BACKEND_NAMES.join(', ')} (optionally with a version: mariadb@10.11, postgres@15)`);
  }
  if (v.out !== undefined && v.out.trim() === '') throw new UsageError('--out is empty: name a directory, or leave --out out for sqltally-report/<timestamp>');
  if (v.out !== undefined && v['no-write']) throw new UsageError(`--out "${v.out}" and --no-write contradict each other: drop one`);
  if (v.baseline !== undefined && v.baseline.trim() === '') throw new UsageError('--baseline is empty: name the baseline file to gate against');
  const wire = v.wire ?? defaultWire;
  if (!(WIRE_REQUESTS as readonly string[]).includes(wire)) throw new UsageError(`--wire takes auto, proxy or passive, got "${wire}"`);
  return {
    backend,
    wire: wire as WireRequest,
    table: tableName(v.table),
    out: v.out,
    force: v.force,
    write: !v['no-write'],
    json: v.json,
    baseline: v.baseline,
  };
}

/**
 * `sqltally exec [options] -- COMMAND [ARGS...]`: everything before `--` is sqltally's, everything after it the
 * command's, untouched. Null for `--help`.
 */
export function parseExecArgs(argv: readonly string[]): ExecOptions | null {
  const dash = argv.indexOf('--');
  const ours = dash >= 0 ? argv.slice(0, dash) : [...argv];
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  const { values: v, positionals } = parseFlags(
    ours,
    {
      ...SHARED_FLAGS,
      name: { type: 'string' },
      'named-windows': { type: 'boolean', default: false },
      'timeout-ms': { type: 'string' },
      'kill-grace-ms': { type: 'string' },
    },
    true,
  );
  if (v.help) return null;
  if (positionals.length > 0)
    throw new UsageError(`"${positionals[0]}" before --: put the command after --, as in sqltally exec --backend postgres -- psql -f load.sql`);
  if (command.length === 0) throw new UsageError('no command: name it after --, as in sqltally exec --backend postgres -- psql -f load.sql');
  const named = v['named-windows'];
  if (named && v.name !== undefined)
    throw new UsageError(`--name "${v.name}" and --named-windows contradict each other: with --named-windows the command names its own windows`);
  const name = v.name ?? path.basename(command[0]!);
  if (name.trim() === '' || name.length > WINDOW_NAME_MAX_CHARS) throw new UsageError(`--name takes 1 to ${WINDOW_NAME_MAX_CHARS} characters, got "${name}"`);
  return {
    ...shared(v, 'auto'),
    argv: command,
    name,
    named,
    timeoutMs: ms('--timeout-ms', v['timeout-ms'], 1),
    killGraceMs: ms('--kill-grace-ms', v['kill-grace-ms'], 0) ?? DEFAULT_KILL_GRACE_MS,
  };
}

/** `sqltally proxy [options]`. Null for `--help`. */
export function parseProxyArgs(argv: readonly string[]): ProxyOptions | null {
  const { values: v } = parseFlags([...argv], { ...SHARED_FLAGS, 'env-file': { type: 'string' }, 'show-password': { type: 'boolean', default: false } });
  if (v.help) return null;
  if (v['env-file'] !== undefined && v['env-file'].trim() === '') throw new UsageError('--env-file is empty: name the file to write the environment to');
  // Long-lived, its clients' connections open across windows: the proxy unless passive is asked for by name.
  return { ...shared(v, 'proxy'), envFile: v['env-file'], showPassword: v['show-password'] };
}
