import { workloadErrorOf } from './capture';

describe('workloadErrorOf', () => {
  it('keeps the end of a long message, where knex puts the reason after the whole statement', () => {
    const sql = `insert into children (name) ${Array.from({ length: 2000 }, (_, i) => `select 'c${i}' as name`).join(' union all ')}`;
    const error = new Error(`${sql} - SQLITE_ERROR: too many terms in compound SELECT`);
    const kept = workloadErrorOf(Object.assign(error, { sql }));
    expect(kept.message).toMatch(/^insert into children \(name\) select 'c0' as name/);
    expect(kept.message).toMatch(/ - SQLITE_ERROR: too many terms in compound SELECT$/);
    expect(kept.message).toContain(`(${error.message.length} chars)`);
    expect(kept.message.length).toBeLessThan(2100);
    // The statement itself is cut at its start only, as before.
    expect(kept.statement).toMatch(/^insert into children/);
  });

  it('keeps the end of each long cause too, and short messages whole', () => {
    const cause = new Error(`${'x'.repeat(5000)} - the real reason`);
    const kept = workloadErrorOf(new Error('query failed', { cause }));
    expect(kept.message).toBe('query failed');
    expect(kept.causes).toHaveLength(1);
    expect(kept.causes[0]).toMatch(/ - the real reason$/);
  });
});
