import { sqlClientDrivers } from './sql-client';

describe('sqlClientDrivers', () => {
  it('lists the network drivers of each protocol that run own SQL, in the order they are tried', () => {
    expect(sqlClientDrivers('mysql')).toEqual(['mysql2', 'mariadb']);
    expect(sqlClientDrivers('postgres')).toEqual(['pg', 'postgres-js']);
  });
});

describe('openSqlClient', () => {
  // A fresh module registry each time, so the mock below reaches sql-client and departures is the one it notes in.
  beforeEach(() => jest.resetModules());
  afterEach(() => jest.dontMock('../driver/registry'));

  it("notes a connection the driver module closed while opening, and the client's own on close, as sqltally's departures", async () => {
    const server = { kind: 'network' as const, host: '127.0.0.1', port: 1, user: 'root', password: '', database: '' };
    // A module that, like mariadb's, opens and closes a first connection (server id 11) before the one it returns (12).
    const fake = {
      backends: ['mariadb'],
      packageName: 'fake',
      ownSql: () => async () => [],
      open: async () => ({ handle: {}, connectionId: 12, closedWhileOpening: [11], close: async () => undefined }),
    };
    jest.doMock('../driver/registry', () => ({ driverModule: () => fake }));
    const { openSqlClient } = await import('./sql-client');
    const { departedBefore } = await import('../shared/departures');
    const now = () => Number(process.hrtime.bigint());
    const client = await openSqlClient('mysql', server);
    expect(departedBefore(server, now())).toEqual([11]);
    await client.close();
    expect(departedBefore(server, now())).toEqual([11, 12]);
  });
});
