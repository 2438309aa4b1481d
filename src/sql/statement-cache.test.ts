import { MAX_CACHED_CHARS, classifyCached, fingerprintCacheHeld, fingerprintCached } from './statement-cache';

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

describe('the caches hold their texts alive, so they are bounded by characters too', () => {
  const rows = (n: number): string => Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?)').join(', ');

  it('keeps no more than MAX_CACHED_CHARS of text however many distinct long texts come by', () => {
    const head = `INSERT INTO t (a, b, c, d, e, f) VALUES ${rows(5000)}`;
    let most = 0;
    for (let i = 0; i < 400; i++) {
      fingerprintCached(`${head}${', (?, ?, ?, ?, ?, ?)'.repeat(i)}`, 'generic');
      most = Math.max(most, fingerprintCacheHeld('generic').chars);
    }
    // 400 long texts went by, far over the budget, and never more than the budget was held.
    expect(most).toBeGreaterThan(MAX_CACHED_CHARS / 2);
    expect(most).toBeLessThanOrEqual(MAX_CACHED_CHARS);
    expect(fingerprintCacheHeld('generic').texts).toBeLessThan(400);
  });

  it('still serves a repeated text, a copy of it included, from one entry', () => {
    const sql = `INSERT INTO u (a, b, c, d, e, f) VALUES ${rows(3000)}`;
    const first = fingerprintCached(sql, 'sqlite');
    const held = fingerprintCacheHeld('sqlite').texts;
    expect(fingerprintCached((' ' + sql).slice(1), 'sqlite')).toBe(first);
    expect(fingerprintCacheHeld('sqlite').texts).toBe(held);
  });

  it('computes a text longer than the whole budget each time rather than emptying the cache for it', () => {
    fingerprintCached('SELECT 1', 'mysql');
    const before = fingerprintCacheHeld('mysql');
    const huge = `INSERT INTO t (a) VALUES ${Array.from({ length: MAX_CACHED_CHARS / 4 }, () => '(?)').join(',')}`;
    expect(fingerprintCached(huge, 'mysql').fingerprint).toMatch(/^INSERT INTO t/i);
    expect(fingerprintCacheHeld('mysql')).toEqual(before);
  });
});
