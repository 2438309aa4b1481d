import Database from 'better-sqlite3';
import { SqltallyError } from '../shared/errors';
import { CaptureSession, workloadErrorOf } from './capture';

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

describe('a session on SQLite refuses bad input by name, before anything runs', () => {
  let session: CaptureSession;
  beforeAll(async () => {
    session = await CaptureSession.open({ backend: 'sqlite' });
  });
  afterAll(async () => {
    await session?.close();
  });

  const configError = async (work: () => unknown): Promise<SqltallyError> => {
    let err: unknown;
    try {
      await work();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SqltallyError);
    expect((err as SqltallyError).phase).toMatch(/^(config|wrap)$/);
    return err as SqltallyError;
  };

  it('open(): options missing, backend missing or not a started backend, otherConnections unknown', async () => {
    expect((await configError(() => CaptureSession.open(undefined as never))).message).toContain('was given undefined, not options');
    expect((await configError(() => CaptureSession.open({} as never))).message).toContain('backend is missing');
    expect((await configError(() => CaptureSession.open({ backend: {} } as never))).message).toContain('backend is an object (Object)');
    expect((await configError(() => CaptureSession.open({ backend: 'sqlite', otherConnections: 'bogus' as never }))).message).toContain(
      'otherConnections is "bogus"',
    );
    expect((await configError(() => CaptureSession.open({ backend: 'sqlite', tcpdump: '' }))).message).toContain('tcpdump is ""');
    expect((await configError(() => CaptureSession.open({ backend: 'sqlite', tcpdump: 7 as never }))).message).toContain('tcpdump is number 7');
  });

  it('count(undefined) and measure(undefined) name what they were given', async () => {
    expect((await configError(() => session.count(undefined as never))).message).toContain('session.count() was given undefined');
    expect((await configError(() => session.count(42 as never))).message).toContain('session.count() was given number 42');
    expect((await configError(() => session.measure(undefined as never))).message).toContain('measure() was given undefined, not a function');
  });

  it.each([-5, 0, NaN, Infinity, 'abc', 1e12])("measure() refuses timeoutMs %p (1e12 overflows Node's timer to 1 ms)", async (timeoutMs) => {
    const err = await configError(() => session.measure(async () => 1, { timeoutMs: timeoutMs as never }));
    expect(err.message).toContain('measure(): timeoutMs is');
  });

  it('a thrown object whose message getter throws gives an incomplete tally, not a rejection', async () => {
    const hostile = {
      get message(): string {
        throw new Error('no message for you');
      },
      get cause(): unknown {
        throw new Error('nor a cause');
      },
    };
    const tally = await session.measure(() => {
      throw hostile;
    });
    expect(tally.verdict.kind).toBe('incomplete');
    expect(tally.workloadError?.message).toBe('[object Object]');
  });

  it('a Database counted per test and closed after it leaves later windows as good as before', async () => {
    const c = session.connection;
    if (c.kind !== 'file') throw new Error('SQLite gives a file');
    const setup = new Database(c.filename);
    setup.exec('CREATE TABLE IF NOT EXISTS closed_each_test (a INTEGER)');
    setup.close();
    for (let test = 0; test < 3; test++) {
      const db = session.count(new Database(c.filename));
      const tally = await session.measure(() => {
        db.prepare('INSERT INTO closed_each_test (a) VALUES (?)').run(test);
      });
      expect(tally.verdict.kind).toBe('assert');
      db.close();
    }
  });
});
