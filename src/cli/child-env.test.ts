import { PROTOCOLS } from '../backends/protocols';
import { childEnvironment, connectionEnv, exportLines } from './child-env';

const NETWORK = {
  kind: 'network' as const,
  host: '127.0.0.1',
  port: 40001,
  user: 'sqltally',
  password: 'p@ss w0rd',
  database: 'test db',
  url: 'postgres://sqltally:p%40ss%20w0rd@127.0.0.1:40001/test%20db',
};
const CONTROL = { url: 'http://127.0.0.1:40002', token: 'f'.repeat(64) };

describe('the child environment', () => {
  it('names a PostgreSQL connection for libpq, URLs, JDBC and SQLTALLY_*', () => {
    expect(connectionEnv({ id: 'postgres@15', name: 'postgres' }, NETWORK, CONTROL)).toEqual({
      SQLTALLY_BACKEND: 'postgres@15',
      SQLTALLY_CONTROL_URL: CONTROL.url,
      SQLTALLY_CONTROL_TOKEN: CONTROL.token,
      SQLTALLY_HOST: '127.0.0.1',
      SQLTALLY_PORT: '40001',
      SQLTALLY_USER: 'sqltally',
      SQLTALLY_PASSWORD: 'p@ss w0rd',
      SQLTALLY_DATABASE: 'test db',
      SQLTALLY_URL: NETWORK.url,
      SQLTALLY_JDBC_URL: 'jdbc:postgresql://127.0.0.1:40001/test%20db',
      DATABASE_URL: NETWORK.url,
      PGHOST: '127.0.0.1',
      PGPORT: '40001',
      PGUSER: 'sqltally',
      PGPASSWORD: 'p@ss w0rd',
      PGDATABASE: 'test db',
    });
  });

  it('names a MariaDB or MySQL connection for their clients, and no PG* variable', () => {
    const maria = connectionEnv({ id: 'mariadb@10.11', name: 'mariadb' }, { ...NETWORK, url: 'mysql://x' });
    expect(maria).toMatchObject({
      MYSQL_HOST: '127.0.0.1',
      MYSQL_TCP_PORT: '40001',
      MYSQL_PWD: 'p@ss w0rd',
      MYSQL_USER: 'sqltally',
      MYSQL_DATABASE: 'test db',
      SQLTALLY_JDBC_URL: 'jdbc:mariadb://127.0.0.1:40001/test%20db',
    });
    expect(Object.keys(maria).filter((k) => k.startsWith('PG'))).toEqual([]);
    expect(maria['SQLTALLY_CONTROL_URL']).toBeUndefined();
    expect(connectionEnv({ id: 'mysql', name: 'mysql' }, NETWORK)['SQLTALLY_JDBC_URL']).toBe('jdbc:mysql://127.0.0.1:40001/test%20db');
  });

  it('gives SQLite the database file', () => {
    expect(connectionEnv({ id: 'sqlite@3.50', name: 'sqlite' }, { kind: 'file', filename: '/tmp/x/sqltally.db' })).toEqual({
      SQLTALLY_BACKEND: 'sqlite@3.50',
      SQLTALLY_SQLITE_PATH: '/tmp/x/sqltally.db',
      SQLTALLY_DATABASE: '/tmp/x/sqltally.db',
      SQLTALLY_URL: 'file:/tmp/x/sqltally.db',
      DATABASE_URL: 'file:/tmp/x/sqltally.db',
      SQLTALLY_JDBC_URL: 'jdbc:sqlite:/tmp/x/sqltally.db',
    });
  });

  it("takes out the caller's own client settings, so nothing points the command elsewhere", () => {
    const parent = {
      PATH: '/bin',
      HOME: '/root',
      PGHOST: 'prod.example',
      PGSERVICE: 'prod',
      PGSSLMODE: 'require',
      MYSQL_PWD: 'old',
      DATABASE_URL: 'postgres://prod',
      SQLTALLY_CONTROL_TOKEN: 'outer',
      SQLTALLY_RUN_ID: 'keep',
    };
    const env = childEnvironment(parent, connectionEnv({ id: 'postgres', name: 'postgres' }, NETWORK));
    expect(env).toMatchObject({ PATH: '/bin', HOME: '/root', PGHOST: '127.0.0.1', DATABASE_URL: NETWORK.url, SQLTALLY_RUN_ID: 'keep' });
    for (const gone of ['PGSERVICE', 'PGSSLMODE', 'MYSQL_PWD', 'SQLTALLY_CONTROL_TOKEN']) expect(env[gone]).toBeUndefined();
  });

  it("takes out every variable of each protocol's own connection environment, whatever the backend", () => {
    for (const protocol of Object.values(PROTOCOLS)) {
      const parent = Object.fromEntries(Object.keys(protocol.clientEnv({ ...NETWORK, host: 'prod.example' })).map((k) => [k, 'outer']));
      const env = childEnvironment(parent, {});
      expect(Object.keys(env)).toEqual([]);
    }
  });

  it('prints export lines with the password and token masked, URLs keeping where they point', () => {
    const env = connectionEnv({ id: 'postgres', name: 'postgres' }, NETWORK, CONTROL);
    const masked = exportLines(env, { maskSecrets: true }).join('\n');
    expect(masked).not.toContain('p@ss');
    expect(masked).not.toContain('p%40ss');
    expect(masked).not.toContain(CONTROL.token);
    expect(masked).toContain("export PGPASSWORD='***'");
    expect(masked).toContain("export DATABASE_URL='postgres://sqltally:***@127.0.0.1:40001/test%20db'");
    expect(masked).toContain("export SQLTALLY_CONTROL_TOKEN='***'");
    const full = exportLines({ A: "it's" }, { maskSecrets: false });
    expect(full).toEqual(["export A='it'\\''s'"]);
  });
});
