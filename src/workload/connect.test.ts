import { SqltallyError } from '../shared/errors';
import type { NetworkConnection } from '../backends/types';
import { BACKEND_NAMES } from '../backends/types';
import { openPlainConnection, readDriverFor } from './connect';
import { freePort } from '../backends/local-process';

describe('openPlainConnection', () => {
  it('refuses a file connection for a network driver, and a network one for better-sqlite3', async () => {
    await expect(openPlainConnection('pg', { kind: 'file', filename: '/tmp/x.db' }, {}, 'postgres')).rejects.toThrow(
      /pg needs a network server, got a file connection/,
    );
    const network: NetworkConnection = { kind: 'network', host: '127.0.0.1', port: 1, user: 'u', password: 'p', database: 'd' };
    await expect(openPlainConnection('better-sqlite3', network)).rejects.toThrow(/better-sqlite3 opens a file, got a network connection/);
  });

  it.each(['mysql2', 'mariadb', 'pg'] as const)('%s: an unreachable server is a connect-phase error without the password', async (driver) => {
    const port = await freePort();
    const secret = 's3cr3t-pw';
    const error = await openPlainConnection(
      driver,
      { kind: 'network', host: '127.0.0.1', port, user: 'root', password: secret, database: 'x' },
      { connectTimeout: 2_000 },
      'mariadb',
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SqltallyError);
    expect((error as SqltallyError).phase).toBe('connect');
    expect((error as Error).message).toContain(`127.0.0.1:${port}`);
    expect((error as Error).message).not.toContain(secret);
  });

  it("reads back with one driver per backend, and an in-process engine's cell through its own driver", () => {
    expect(Object.fromEntries(BACKEND_NAMES.map((b) => [b, readDriverFor(b)]))).toEqual({
      sqlite: 'better-sqlite3',
      mariadb: 'mysql2',
      mysql: 'mysql2',
      postgres: 'pg',
    });
    expect(readDriverFor('sqlite')).toBe('better-sqlite3');
    expect(readDriverFor('sqlite', 'sqlite3')).toBe('sqlite3');
    expect(readDriverFor('sqlite', 'better-sqlite3')).toBe('better-sqlite3');
    expect(readDriverFor('postgres', 'postgres-js')).toBe('pg');
    expect(readDriverFor('mariadb', 'mariadb')).toBe('mysql2');
  });
});
