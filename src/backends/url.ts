import { SqltallyError, redactSecrets } from '../shared/errors';
import type { BackendModule } from './backend';
import type { NetworkConnection } from './types';

/** Database used when an external URL names none: the same one private servers create. */
export const DEFAULT_DATABASE = 'sqltally';
const DEFAULT_USERS: Record<string, string> = { mysql: 'root', mariadb: 'root', postgres: 'postgres', postgresql: 'postgres' };

/**
 * The URL with its password and every secret-bearing query parameter (`password`, `sslpassword`, ...) replaced by
 * `***`, safe for logs, reports and error messages.
 */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw.trim());
    if (url.password) url.password = '***';
    return redactSecrets(url.toString());
  } catch {
    return redactUnparsed(raw);
  }
}

/**
 * Text the URL parser rejected: everything between `://` and the last `@` is credentials, however oddly written
 * (an unencoded `/` or `#` in a password makes the parser give up, and would end a pattern's idea of a password).
 */
function redactUnparsed(raw: string): string {
  const text = raw.trim();
  const start = text.indexOf('://');
  const at = text.lastIndexOf('@');
  if (start < 0 || at <= start) return redactSecrets(text);
  const userinfo = text.slice(start + 3, at);
  const colon = userinfo.indexOf(':');
  const shown = colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***`;
  return redactSecrets(`${text.slice(0, start + 3)}${shown}${text.slice(at)}`);
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
    return fail(`cannot parse "${redactUrl(raw)}"`);
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
