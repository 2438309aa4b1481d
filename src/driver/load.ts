import type { ConnectionInfo, NetworkConnection } from '../shared/servers';
import { SqltallyError } from '../shared/errors';
import type { OpenOptions } from './module';

/**
 * Loads a driver package on first use. The drivers are optional peer dependencies: an app that counts only pg
 * does not install mysql2, and the copy loaded is the app's own, so its version is the one in the tally.
 */
export async function loadDriverPackage<T>(specifier: string, driver: string, backend?: string): Promise<T> {
  try {
    return (await import(specifier)) as T;
  } catch (cause) {
    const code = (cause as { code?: unknown } | null)?.code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') {
      const pkg = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : (specifier.split('/')[0] ?? specifier);
      throw new SqltallyError(`the ${driver} driver package "${pkg}" is not installed`, {
        backend,
        phase: 'connect',
        cause,
        hint: `npm install ${pkg} (sqltally counts the copy your app installs; it is an optional peer dependency)`,
      });
    }
    throw cause;
  }
}

/** The network address a driver connects to: the wire proxy's when given, else the backend's own. */
export function networkTarget(driver: string, connection: ConnectionInfo, opts: OpenOptions): NetworkConnection {
  if (connection.kind !== 'network') {
    throw new SqltallyError(`${driver} needs a network server, got a ${connection.kind} connection`, {
      phase: 'connect',
      backend: opts.backend,
    });
  }
  return { ...connection, host: opts.host ?? connection.host, port: opts.port ?? connection.port };
}
