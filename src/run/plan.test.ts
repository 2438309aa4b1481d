import { SqltallyError } from '../shared/errors';
import type { Resolution } from '../backends/types';
import {
  DEFAULT_CELL_TIMEOUT_MS,
  MAX_CELL_TIMEOUT_MS,
  MAX_ROWS_PER_CELL,
  MAX_ROWS_PER_STRATEGY,
  checkDistinctServers,
  checkPlan,
  planProblems,
  rowsPerStrategy,
} from './plan';
import type { ValidPlan } from './plan';

const PLAN: ValidPlan = {
  backends: [],
  strategies: [],
  rows: [100, 5000],
  hotRows: [5000],
  warmups: 1,
  repeats: 5,
  driverReleases: 'all',
  cellTimeoutMs: DEFAULT_CELL_TIMEOUT_MS,
};

describe('planProblems', () => {
  it('accepts the default curve and the documented maximum', () => {
    expect(planProblems(PLAN)).toEqual([]);
    expect(planProblems({ ...PLAN, rows: [MAX_ROWS_PER_CELL], hotRows: [] })).toEqual([]);
    expect(rowsPerStrategy({ ...PLAN, rows: [MAX_ROWS_PER_CELL], hotRows: [] })).toBe(MAX_ROWS_PER_STRATEGY);
  });

  it.each([
    [{ rows: [MAX_ROWS_PER_CELL + 1] }, 'rows', '500,001 rows is more than sqltally can hold in one cell (at most 500,000)'],
    [{ hotRows: [1e9] }, 'hotRows', '1,000,000,000 rows is more than sqltally can hold in one cell'],
    [{ rows: [100, 100] }, 'rows', 'names 100 more than once'],
    [{ cellTimeoutMs: MAX_CELL_TIMEOUT_MS + 1 }, 'cellTimeoutMs', '86,400,001 ms is longer than the 86,400,000 ms (one day) a cell may wait'],
    [{ backends: ['sqlite', ' sqlite'] }, 'backends', 'names sqlite more than once'],
    [{ backends: ['all', 'mariadb'] }, 'backends', '"all" already means every backend'],
    [{ strategies: ['pg.unnest', 'pg.unnest'] }, 'strategies', 'names pg.unnest more than once'],
    [{ rows: [400_000], hotRows: [], repeats: 10 }, 'rows', 'inserts 4,400,000 rows per strategy, more than the 3,000,000'],
  ] as [Partial<ValidPlan>, string, string][])('%j: %s', (over, field, message) => {
    const problems = planProblems({ ...PLAN, ...over });
    expect(problems).toHaveLength(1);
    expect(problems[0]?.field).toBe(field);
    expect(problems[0]?.message).toContain(message);
  });
});

describe('checkPlan', () => {
  it('says which field is wrong in words, not as a zod dump', () => {
    const err = (() => {
      try {
        checkPlan({ ...PLAN, warmups: -1 });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).phase).toBe('config');
    expect((err as Error).message).toContain('plan: warmups: Too small: expected number to be >=0');
  });
});

describe('checkDistinctServers', () => {
  const local = (id: string, origin = '/usr/sbin/mariadbd'): Resolution => ({
    available: true,
    backend: 'mariadb',
    id,
    provider: 'local',
    origin,
    expectedVersion: '10.11.14-MariaDB',
    tried: [],
    start: () => Promise.reject(new Error('not in a unit test')),
  });
  it('refuses two ids that resolve to one server, naming both', () => {
    expect(() => checkDistinctServers([local('mariadb'), local('mariadb@10.11')])).toThrow(
      '--backends mariadb and mariadb@10.11 are the same server here (local /usr/sbin/mariadbd (10.11.14-MariaDB)): name it once',
    );
  });
  it('lets different servers and unavailable ids through', () => {
    expect(() =>
      checkDistinctServers([
        local('mariadb'),
        local('mariadb@11.8', 'chroot /var/cache/x /usr/sbin/mariadbd'),
        { available: false, backend: 'mariadb', id: 'mariadb@12', reason: 'none', tried: [] },
      ]),
    ).not.toThrow();
  });
});
