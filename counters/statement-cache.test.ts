import { classifyCached, fingerprintCached } from './statement-cache';

describe('classifyCached', () => {
  it('classifies long texts from their first words and a long WITH by the statement after its CTEs', () => {
    const rows = Array.from({ length: 2000 }, () => '(?, ?, ?)').join(', ');
    expect(classifyCached(`INSERT INTO t (a, b, c) VALUES ${rows}`, 'sqlite')).toBe('insert');
    expect(classifyCached(`  WITH v (a, b, c) AS (VALUES ${rows}) INSERT INTO t SELECT * FROM v`, 'postgres')).toBe('insert');
    expect(classifyCached(`WITH v (a, b, c) AS (VALUES ${rows}) SELECT * FROM v`, 'postgres')).toBe('select');
    expect(classifyCached('DELETE FROM t', 'mysql')).toBe('delete');
  });

  it('gives the same fingerprint for a text and a copy of it', () => {
    const sql = 'SELECT * FROM t WHERE a = 1';
    expect(fingerprintCached((' ' + sql).slice(1), 'mysql')).toEqual(fingerprintCached(sql, 'mysql'));
  });
});
