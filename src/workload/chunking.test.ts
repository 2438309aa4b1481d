import { SqltallyError } from '../shared/errors';
import { DEFAULT_BIND_BUDGET, planChunks, planTextChunks, sliceBySizes, TEXT_ROWS_PER_STATEMENT } from './chunking';

const plan = (rows: number, budget?: number, limit = 65_535) => planChunks({ rows, columns: 6, budget, limit });

describe('planChunks at the default budget (30000 values = 5000 rows of 6)', () => {
  it.each([
    [1, [1]],
    [4_999, [4_999]],
    [5_000, [5_000]],
    [5_001, [5_000, 1]],
    [9_999, [5_000, 4_999]],
    [10_000, [5_000, 5_000]],
    [10_001, [5_000, 5_000, 1]],
  ])('%i rows -> %j', (rows, expected) => {
    const result = plan(rows);
    expect(result.statementRows).toEqual(expected);
    expect(result.budget).toBe(DEFAULT_BIND_BUDGET);
    expect(Math.max(...result.statementRows) * 6).toBeLessThanOrEqual(DEFAULT_BIND_BUDGET);
  });
});

describe('planChunks budgets around the limits', () => {
  it.each([
    ['postgres/mysql/mariadb', 65_535],
    ['sqlite', 32_766],
  ])('%s: a budget at the limit is accepted, one above is refused', (_name, limit) => {
    expect(plan(20_000, limit, limit).rowsPerStatement).toBe(Math.floor(limit / 6));
    expect(plan(20_000, limit - 1, limit).rowsPerStatement).toBe(Math.floor((limit - 1) / 6));
    expect(() => plan(20_000, limit + 1, limit)).toThrow(`bind-value budget ${limit + 1} is above this backend's limit of ${limit}`);
  });

  it('never puts more than 65535 values in a statement, whatever the row count', () => {
    const result = plan(1_000_000, 65_535);
    expect(result.rowsPerStatement).toBe(10_922);
    expect(result.rowsPerStatement * 6).toBeLessThanOrEqual(65_535);
    expect(result.statementRows.reduce((a, b) => a + b, 0)).toBe(1_000_000);
  });

  it('cuts at a budget that is not a multiple of 6 by whole rows', () => {
    expect(plan(10, 17).statementRows).toEqual([2, 2, 2, 2, 2]);
    expect(plan(2, 6).statementRows).toEqual([1, 1]);
  });

  it.each([
    ['zero', 0, /budget must be a positive integer, got 0/],
    ['negative', -6, /budget must be a positive integer, got -6/],
    ['fractional', 30_000.5, /budget must be a positive integer, got 30000.5/],
    ['NaN', Number.NaN, /budget must be a positive integer, got NaN/],
    ['smaller than one row', 5, /budget 5 cannot hold one row of 6 values/],
  ])('refuses a %s budget with a config error', (_name, budget, message) => {
    let error: unknown;
    try {
      planChunks({ rows: 10, columns: 6, budget, limit: 65_535, backend: 'postgres', statement: 'INSERT' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SqltallyError);
    expect((error as SqltallyError).phase).toBe('config');
    expect((error as SqltallyError).backend).toBe('postgres');
    expect((error as Error).message).toMatch(message);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses row count %p', (rows) => {
    expect(() => plan(rows)).toThrow(/row count must be a positive integer/);
  });
});

describe('planTextChunks and sliceBySizes', () => {
  it('cuts text statements at 10000 rows', () => {
    expect(TEXT_ROWS_PER_STATEMENT).toBe(10_000);
    expect(planTextChunks(9_999)).toEqual([9_999]);
    expect(planTextChunks(10_000)).toEqual([10_000]);
    expect(planTextChunks(10_001)).toEqual([10_000, 1]);
    expect(() => planTextChunks(10, 0)).toThrow(/rows per text statement/);
  });

  it('slices items by sizes and refuses sizes that do not add up', () => {
    expect(sliceBySizes([1, 2, 3, 4, 5], [2, 2, 1])).toEqual([[1, 2], [3, 4], [5]]);
    expect(() => sliceBySizes([1, 2], [3])).toThrow(/add up to 3 but there are 2/);
  });
});
