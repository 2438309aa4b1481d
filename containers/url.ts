import { SqltallyError, redactSecrets } from './errors';
import type { BackendModule } from './backend';
import type { NetworkConnection } from './types';

/** Database used when an external URL names none: the same one private servers create. */
export const DEFAULT_DATABASE = 'sqltally';
const DEFAULT_USERS: Record<string, string> = { mysql: 'root', mariadb: 'root', postgres: 'postgres', postgresql: 'postgres' };

/** The URL with its password replaced by `***`, safe for logs, reports and error messages. */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return redactSecrets(raw);
  }
}

/**
 * Parses `SQLTALLY_<BACKEND>_URL` (`mysql://user:pass@host:3306/db`, `postgres://...`) into connection options.
 * Throws a config-phase SqltallyError naming the variable and what is wrong; the password never appears.
 */
export function parseExternalUrl(module: BackendModule, raw: string, variable: string, id: string): NetworkConnection {
  const fail = (what: string): never => {
    throw new SqltallyError(`${variable} is not a usable URL: ${what}`, {
      backend: id,
      phase: 'config',
      provider: 'external',
      // Written so the redaction of URLs in messages leaves the example readable.
      hint: `set ${variable} to ${module.urlSchemes[0] ?? module.name}://USER@HOST:${module.defaultPort ?? 0}/DATABASE (with a password: USER:PASSWORD@HOST)`,
    });
  };
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return fail(`cannot parse "${redactSecrets(raw)}"`);
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (!module.urlSchemes.includes(scheme)) {
    return fail(`scheme "${scheme}" is not one of ${module.urlSchemes.map((s) => `${s}://`).join(', ') || '(none: this backend takes no URL)'}`);
  }
  if (!url.hostname) return fail('no host');
  const port = url.port ? Number(url.port) : module.defaultPort;
  if (port === null || !Number.isInteger(port) || port < 1 || port > 65_535) return fail(`bad port "${url.port}"`);
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || DEFAULT_DATABASE;
  if (database.includes('/')) return fail(`database name "${database}" contains "/"`);
  return {
    kind: 'network',
    // URL keeps IPv6 literals bracketed; drivers want them bare.
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    user: decodeURIComponent(url.username) || DEFAULT_USERS[scheme] || 'root',
    password: decodeURIComponent(url.password),
    database,
  };
}
