import { sqlClientDrivers } from './sql-client';

describe('sqlClientDrivers', () => {
  it('lists the network drivers of each protocol that run own SQL, in the order they are tried', () => {
    expect(sqlClientDrivers('mysql')).toEqual(['mysql2', 'mariadb']);
    expect(sqlClientDrivers('postgres')).toEqual(['pg', 'postgres-js']);
  });
});
