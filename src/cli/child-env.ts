import type { SessionConnection } from '../capture/connection';
import { CAPABILITIES } from '../backends/capabilities';
import { BACKENDS } from '../backends/registry';
import type { BackendName } from '../backends/types';
import { PROTOCOLS } from '../backends/protocols';

/** The variables that carry a secret: masked whenever the environment is printed. */
export const SECRET_VARIABLES: ReadonlySet<string> = new Set([
  'DATABASE_URL',
  'SQLTALLY_URL',
  'SQLTALLY_PASSWORD',
  ...Object.values(PROTOCOLS).map((p) => p.clientPasswordVariable),
  'SQLTALLY_CONTROL_TOKEN',
]);

const MASK = '***';

/** The control endpoint a child may drive windows through (see src/capture/control.ts). */
export interface ControlAddress {
  url: string;
  token: string;
}

/**
 * Where a child process connects, in each ecosystem's own names: `DATABASE_URL`, libpq's `PG*`, the MySQL/MariaDB
 * clients' `MYSQL_*`, a JDBC URL (without credentials: JDBC takes user and password apart, and URLs end up in logs),
 * and `SQLTALLY_*` for all of it. Only the variables of the backend's own protocol are set; see
 * {@link childEnvironment} for what is taken out of the caller's environment.
 */
export function connectionEnv(backend: { id: string; name: BackendName }, connection: SessionConnection, control?: ControlAddress): Record<string, string> {
  const env: Record<string, string> = { SQLTALLY_BACKEND: backend.id };
  const jdbc = `jdbc:${BACKENDS[backend.name].jdbcScheme}:`;
  if (control) {
    env['SQLTALLY_CONTROL_URL'] = control.url;
    env['SQLTALLY_CONTROL_TOKEN'] = control.token;
  }
  if (connection.kind === 'file') {
    const url = `file:${connection.filename}`;
    return {
      ...env,
      SQLTALLY_SQLITE_PATH: connection.filename,
      SQLTALLY_DATABASE: connection.filename,
      SQLTALLY_URL: url,
      DATABASE_URL: url,
      SQLTALLY_JDBC_URL: `${jdbc}${connection.filename}`,
    };
  }
  const host = connection.host.includes(':') ? `[${connection.host}]` : connection.host;
  Object.assign(env, {
    SQLTALLY_HOST: connection.host,
    SQLTALLY_PORT: String(connection.port),
    SQLTALLY_USER: connection.user,
    SQLTALLY_PASSWORD: connection.password,
    SQLTALLY_DATABASE: connection.database,
    SQLTALLY_URL: connection.url,
    SQLTALLY_JDBC_URL: `${jdbc}//${host}:${connection.port}/${encodeURIComponent(connection.database)}`,
    DATABASE_URL: connection.url,
  });
  const protocol = CAPABILITIES[backend.name].wireProtocol;
  if (protocol) Object.assign(env, PROTOCOLS[protocol].clientEnv(connection));
  return env;
}

/** sqltally's own variables (see {@link connectionEnv}): a caller's would point the child at another server. */
const SQLTALLY_VARIABLES = /^SQLTALLY_(HOST|PORT|USER|PASSWORD|DATABASE|URL|JDBC_URL|SQLITE_PATH|BACKEND|CONTROL_URL|CONTROL_TOKEN)$/;

/**
 * Variables of the caller's environment that would point a client somewhere else than `connectionEnv` does, or make
 * a protocol's clients read other settings (each protocol lists its own): removed from the child's environment.
 */
function otherClientVariable(name: string): boolean {
  return name === 'DATABASE_URL' || SQLTALLY_VARIABLES.test(name) || Object.values(PROTOCOLS).some((p) => p.clientVariables.test(name));
}

/** The child's whole environment: the caller's, without other clients' settings, plus the connection. */
export function childEnvironment(parent: NodeJS.ProcessEnv, connection: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(parent)) if (!otherClientVariable(k)) env[k] = v;
  return { ...env, ...connection };
}

/** `export NAME='value'` lines a shell can source; values single-quoted. */
export function exportLines(env: Record<string, string>, options: { maskSecrets: boolean }): string[] {
  return Object.entries(env).map(([k, v]) => {
    const value = options.maskSecrets && SECRET_VARIABLES.has(k) ? maskedValue(k, v) : v;
    return `export ${k}='${value.replace(/'/g, `'\\''`)}'`;
  });
}

/** A secret with its password (or whole value) replaced by `***`; a URL keeps its host so it still says where. */
function maskedValue(name: string, value: string): string {
  if (name === 'DATABASE_URL' || name === 'SQLTALLY_URL') {
    return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/]*):[^@/]*@/i, `$1:${MASK}@`);
  }
  return value === '' ? '' : MASK;
}
