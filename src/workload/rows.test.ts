import { SqltallyError } from '../shared/errors';
import { assertRows, checksumOf, COLUMN_COUNT, makeRows, rowAt, sampleIndexes, TEXT_MAX_CHARS } from './rows';
import type { Row } from './rows';

const TWO_53 = 2n ** 53n;

describe('makeRows', () => {
  it('is a pure function of index and seed', () => {
    expect(makeRows(500)).toEqual(makeRows(500));
    expect(makeRows(300)).toEqual(makeRows(500).slice(0, 300));
    expect(rowAt(1234)).toEqual(makeRows(1235)[1234]);
    expect(makeRows(50, { seed: 7 })).not.toEqual(makeRows(50));
  });

  it('pins the first rows, so a change to the generator is a visible change', () => {
    expect(rowAt(0)).toEqual([0, -147592532, "O'Brien ''0", 1.5e-300, 2n ** 63n - 1n, 'havz6rw']);
    expect(rowAt(1)[4]).toBeLessThan(-TWO_53);
    expect(rowAt(2)[4]).toBeGreaterThan(TWO_53);
  });

  const rows = makeRows(20_000);

  it('puts values beyond 2^53 in c5, within BIGINT', () => {
    expect(rows.every((r) => r[4] > TWO_53 || r[4] < -TWO_53)).toBe(true);
    expect(rows.every((r) => r[4] <= 2n ** 63n - 1n && r[4] >= -(2n ** 63n))).toBe(true);
  });

  it('never makes c4 an int32-range integer (the mariadb batch would change parameter type mid-batch)', () => {
    expect(rows.filter((r) => Number.isInteger(r[3]) && Math.abs(r[3]) < 2 ** 31)).toEqual([]);
    expect(rows.every((r) => Number.isFinite(r[3]))).toBe(true);
  });

  it('keeps c1 the index and c2 a plain INT below 2^31 - 1', () => {
    rows.forEach((r, i) => expect(r[0]).toBe(i));
    expect(rows.every((r) => Number.isInteger(r[1]) && r[1] >= -2_147_483_648 && r[1] < 2_147_483_647)).toBe(true);
  });

  it('keeps text within 32 bytes and includes the cases escaping gets wrong', () => {
    const texts = rows.flatMap((r) => [r[2], r[5]]);
    expect(texts.every((t) => Buffer.byteLength(t, 'utf8') <= TEXT_MAX_CHARS)).toBe(true);
    for (const needle of ["'", '\\', '?', '$1', '"', '🚀', 'é', '\t', '--']) expect(texts.some((t) => t.includes(needle))).toBe(true);
    expect(texts).toContain('');
  });

  it('passes its own row check', () => {
    expect(() => assertRows(rows)).not.toThrow();
  });

  it('refuses a count that is not a non-negative integer', () => {
    expect(() => makeRows(-1)).toThrow(SqltallyError);
    expect(() => makeRows(1.5)).toThrow(/row count/);
  });
});

describe('checksumOf', () => {
  it('sums exactly, with c5 split by 10^9 truncating toward zero', () => {
    const rows: Row[] = [
      [1, 2, 'ab', 0.5, -1_500_000_001n, 'é'],
      [3, -4, '', 0.5, 2_000_000_003n, 'x'],
    ];
    expect(checksumOf(rows)).toEqual({ count: 2n, sumC1: 4n, sumC2: -2n, sumC5Hi: 1n, sumC5Lo: -500_000_001n + 3n, textBytes: 5n });
  });
});

describe('sampleIndexes', () => {
  it('stays inside the table and includes the first and last row', () => {
    expect(sampleIndexes(0)).toEqual([]);
    expect(sampleIndexes(1)).toEqual([0]);
    expect(sampleIndexes(10_000)).toEqual(expect.arrayContaining([0, 7, 11, 9_999]));
    expect(sampleIndexes(20).every((i) => i < 20)).toBe(true);
  });
});

describe('assertRows (bad input, before anything is sent)', () => {
  const good: Row = [1, 2, 'a', 1.5, 10n, 'b'];
  const withColumn = (column: number, value: unknown): unknown[] => {
    const row: unknown[] = [...good];
    row[column] = value;
    return [good, row];
  };
  const cases: [string, unknown[], RegExp][] = [
    ['too few columns', [[1, 2, 'a', 1.5, 10n]], /row 0 has 5 columns, the table has 6/],
    ['too many columns', [[...good, 'extra']], /row 0 has 7 columns/],
    ['a row that is not an array', [good, { c1: 1 }], /row 1 must be an array of 6 values, got an object/],
    ['an object value', withColumn(2, { a: 1 }), /row 1 column c3 must be a string: got an object/],
    ['a function value', withColumn(5, () => 1), /column c6 must be a string: got a function/],
    ['NaN for an integer column', withColumn(0, Number.NaN), /column c1 must be an integer number: got NaN/],
    ['a fraction for an integer column', withColumn(1, 1.5), /column c2 must be an integer number: got 1.5/],
    ['an INT overflow', withColumn(1, 2 ** 31), /column c2 is outside the INT range/],
    ['Infinity for the double', withColumn(3, Number.POSITIVE_INFINITY), /column c4 must be finite/],
    ['a string for the double', withColumn(3, '1.5'), /column c4 must be a number/],
    ['a number for the bigint', withColumn(4, 2 ** 60), /column c5 must be a bigint/],
    ['a bigint beyond BIGINT', withColumn(4, 2n ** 63n), /column c5 is outside the BIGINT range/],
    ['text too long for VARCHAR(32)', withColumn(2, 'x'.repeat(33)), /column c3 is longer than VARCHAR\(32\)/],
    ['a NUL in text', withColumn(5, 'a\u0000b'), /column c6 contains a NUL/],
    ['a lone surrogate', withColumn(5, 'a\ud800'), /not well-formed Unicode/],
    ['null', withColumn(0, null), /column c1 must be an integer number: got null/],
    ['undefined', withColumn(4, undefined), /column c5 must be a bigint .*: got undefined/],
  ];
  it.each(cases)('%s', (_name, rows, message) => {
    let error: unknown;
    try {
      assertRows(rows, { backend: 'postgres', statement: 'INSERT INTO t' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SqltallyError);
    const e = error as SqltallyError;
    expect(e.message).toMatch(message);
    expect(e.phase).toBe('workload');
    expect(e.backend).toBe('postgres');
    expect(e.statement).toBe('INSERT INTO t');
  });

  it('accepts 32 characters of 4-byte text (the limit is in characters)', () => {
    expect(() => assertRows(withColumn(2, '🚀'.repeat(32)))).not.toThrow();
    expect(() => assertRows(withColumn(2, '🚀'.repeat(33)))).toThrow(/VARCHAR/);
    // 33 UTF-16 units, 32 characters: counted as characters, not units; lone surrogates count one each.
    expect(() => assertRows(withColumn(2, `${'a'.repeat(31)}🚀`))).not.toThrow();
    expect(() => assertRows(withColumn(2, `${'a'.repeat(31)}\ud800\ud800`))).toThrow(/VARCHAR/);
    expect(() => assertRows(withColumn(2, `${'a'.repeat(32)}\udc00`))).toThrow(/VARCHAR/);
  });

  it('names the column count it expects', () => {
    expect(COLUMN_COUNT).toBe(6);
  });
});
