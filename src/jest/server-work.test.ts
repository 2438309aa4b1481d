import type { ServerWork } from '../server/server-work';
import { ServerLayerSchema } from '../server/types';
import { countSnapshotOf } from './count-snapshot';
import { createSqltallyMatchers, type SqltallyMatcherResult } from './matchers';
import { asTally, serverWorkFixture, shapeOf, tallyFixture, withShapes, withWork, type ShapedTally } from './tally.fixture';

const matchers = createSqltallyMatchers();
const SELECT_UNINDEXED = 'SELECT a FROM t WHERE b = ?';
const SELECT_INDEXED = 'SELECT b FROM t WHERE a = ?';

const mariadbWork = serverWorkFixture;

function tallyWithWork(
  work: ServerWork | undefined,
  shapes = [
    shapeOf(SELECT_UNINDEXED, { statementClass: 'select', caller: 'test/app.test.ts:20:5' }),
    shapeOf(SELECT_INDEXED, { statementClass: 'select', caller: 'test/app.test.ts:21:5' }),
  ],
): ShapedTally {
  return withWork(withShapes(tallyFixture(), shapes), work);
}

function run(name: 'toHaveServerWork' | 'toUseIndexes' | 'toWriteInBatches', tally: unknown, isNot: boolean, ...args: unknown[]): SqltallyMatcherResult {
  const fn = matchers[name] as (this: { isNot: boolean }, received: unknown, ...rest: unknown[]) => SqltallyMatcherResult;
  return fn.call({ isNot }, tally, ...args);
}

describe('the server-work section', () => {
  it('is additive in the server layer schema: a layer without it still parses, one with it parses', () => {
    const layer = tallyFixture().layers.server!;
    expect(ServerLayerSchema.safeParse(layer).success).toBe(true);
    expect(ServerLayerSchema.safeParse({ ...layer, work: mariadbWork() }).success).toBe(true);
  });
});

describe('toHaveServerWork', () => {
  it('passes within budget and fails over it, naming figure, budget and actual', () => {
    const tally = tallyWithWork(mariadbWork());
    expect(run('toHaveServerWork', tally, false, { rowsExamined: { max: 30000 }, tempDiskTables: 0 }).pass).toBe(true);
    const over = run('toHaveServerWork', tally, false, { rowsExamined: { max: 100 }, fullScans: 0 });
    expect(over.pass).toBe(false);
    expect(over.message()).toContain('✗ rowsExamined: expected at most 100, actual 20001');
    expect(over.message()).toContain('✗ fullScans: expected 0, actual 1');
  });

  it('judges each statement entry, with its driver shape and caller line', () => {
    const tally = tallyWithWork(mariadbWork());
    const each = run('toHaveServerWork', tally, false, { rowsExamined: { max: 100 } }, { eachShape: true });
    expect(each.pass).toBe(false);
    expect(each.message()).toMatch(
      /1× SELECT `a` FROM `t` WHERE `b` = \? \(shape [0-9a-f]{12}, called from test\/app\.test\.ts:20:5\):\n {4}✗ rowsExamined: expected at most 100, actual 20000/,
    );
    const indexed = shapeOf(SELECT_INDEXED).id;
    expect(run('toHaveServerWork', tally, false, { rowsExamined: 1, fullScans: 0 }, { shape: indexed }).pass).toBe(true);
    expect(run('toHaveServerWork', tally, false, { rowsExamined: 1 }, { shape: /WHERE b = / }).pass).toBe(false);
  });

  it('refuses an unknown budget key, listing the known keys, with and without .not', () => {
    const tally = tallyWithWork(mariadbWork());
    for (const isNot of [false, true]) {
      const r = run('toHaveServerWork', tally, isNot, { rowsScanned: 0 });
      expect(r.pass).toBe(isNot);
      expect(r.message()).toContain('unknown budget key "rowsScanned": the known keys are rowsExamined, rowsSent,');
    }
  });

  it('refuses thresholds that are not numbers', () => {
    const tally = tallyWithWork(mariadbWork());
    expect(run('toHaveServerWork', tally, false, { rowsExamined: '10' }).message()).toContain(
      'rowsExamined must be a number or { max, min } of numbers, received "10"',
    );
    expect(run('toHaveServerWork', tally, false, { rowsExamined: { max: NaN } }).message()).toContain('rowsExamined.max must be a number, received NaN');
    expect(run('toHaveServerWork', tally, false, { rowsExamined: { maximum: 3 } }).message()).toContain(
      'unknown key in rowsExamined "maximum": the known keys are max, min',
    );
    expect(run('toHaveServerWork', tally, false, {}).message()).toContain('the budget names no figure');
  });

  it('fails, never passes, on a figure the backend cannot give, also under .not, saying why', () => {
    const tally = tallyWithWork(mariadbWork());
    for (const isNot of [false, true]) {
      const r = run('toHaveServerWork', tally, isNot, { seqRowsRead: 0 });
      expect(r.pass).toBe(isNot);
      expect(r.message()).toContain('seqRowsRead: expected 0, unknown: MySQL and MariaDB keep no per-table scan counters');
    }
    // Kept per window only on this server.
    const perShape = run('toHaveServerWork', tally, false, { lockTimeNs: { max: 1 } }, { eachShape: true });
    expect(perShape.pass).toBe(false);
    expect(perShape.message()).toContain('this server keeps lockTimeNs per window only');
  });

  it('fails when the layer has no work section or is incomplete', () => {
    expect(run('toHaveServerWork', tallyWithWork(undefined), true, { rowsExamined: 0 }).message()).toContain('has no server-work section');
    const t = tallyWithWork(mariadbWork());
    const incomplete = { ...t, layers: { ...t.layers, server: { ...t.layers.server!, incomplete: true, incompleteReasons: ['probe lost'] } } };
    const r = run('toHaveServerWork', incomplete, true, { rowsExamined: 0 });
    expect(r.pass).toBe(true);
    expect(r.message()).toContain('the server layer is incomplete: probe lost');
  });

  it('per statement: no entries is a failure with the reason', () => {
    const r = run(
      'toHaveServerWork',
      tallyWithWork(mariadbWork({ statements: null, statementsUnknown: 'performance_schema_digests_size is 0' })),
      false,
      { rowsExamined: 0 },
      { eachShape: true },
    );
    expect(r.pass).toBe(false);
    expect(r.message()).toContain('no per-statement figures in this window: performance_schema_digests_size is 0');
  });
});

describe('toUseIndexes', () => {
  it('fails on a scan without an index, with the shape and its caller; passes with minTableRows above the table', () => {
    const tally = tallyWithWork(mariadbWork());
    const r = run('toUseIndexes', tally, false);
    expect(r.pass).toBe(false);
    expect(r.message()).toContain('✗ statement SELECT `a` FROM `t` WHERE `b` = ?: 1 scan(s) without an index, 20000 rows read');
    expect(r.message()).toMatch(/shape [0-9a-f]{12} \[select\] SELECT a FROM t WHERE b = \?, called from test\/app\.test\.ts:20:5/);
    expect(run('toUseIndexes', tally, false, { minTableRows: 20001 }).pass).toBe(true);
    expect(run('toUseIndexes', tallyWithWork(mariadbWork({ unindexedScans: [] })), false).pass).toBe(true);
  });

  it('ties a PostgreSQL table scan to the shapes naming that table', () => {
    const work = mariadbWork({
      unindexedScans: [{ table: 'public.t', statement: null, scans: 1, rowsRead: 20000, basis: 'rows read by sequential scans of the table' }],
    });
    const r = run(
      'toUseIndexes',
      tallyWithWork(work, [
        shapeOf('SELECT a FROM t WHERE b = $1', { statementClass: 'select', caller: 'x.test.ts:3:1' }, 'postgres'),
        shapeOf('SELECT 1 FROM tt', { statementClass: 'select' }, 'postgres'),
      ]),
      false,
    );
    expect(r.message()).toContain('✗ table public.t: 1 scan(s) without an index');
    expect(r.message()).toContain('SELECT a FROM t WHERE b = ?, called from x.test.ts:3:1');
    expect(r.message()).not.toContain('FROM tt');
  });

  it('fails, with and without .not, when scans cannot be told, and refuses bad options', () => {
    const unknown = tallyWithWork(mariadbWork({ unindexedScans: null, scansUnknown: 'better-sqlite3 does not expose them' }));
    for (const isNot of [false, true]) expect(run('toUseIndexes', unknown, isNot).pass).toBe(isNot);
    expect(run('toUseIndexes', unknown, false).message()).toContain('better-sqlite3 does not expose them');
    const tally = tallyWithWork(mariadbWork());
    expect(run('toUseIndexes', tally, false, { minTableRows: '1000' }).message()).toContain('minTableRows must be a number of at least 0, received "1000"');
    expect(run('toUseIndexes', tally, false, { minRows: 3 }).message()).toContain('unknown option "minRows": the known keys are minTableRows');
  });
});

describe('toWriteInBatches', () => {
  const loop = shapeOf('INSERT INTO t (a) VALUES (?)', { calls: 50, parameterSets: 50, distinctParameterSets: 50, rows: 50, caller: 'src/import.ts:42:11' });
  const multi = shapeOf('INSERT INTO t (a) VALUES (?), (?), (?)', { calls: 1, parameterSets: 1, rows: 3 });

  it('fails on a per-row insert loop, printing the shape, the count and the line', () => {
    const r = run('toWriteInBatches', asTally(withShapes(tallyFixture(), [loop])), false);
    expect(r.pass).toBe(false);
    expect(r.message()).toContain('✗ 50 INSERT calls of one row each (50 rows)');
    expect(r.message()).toContain('called from src/import.ts:42:11');
  });

  it('passes on one multi-row insert, a batch call, an UPDATE touching many rows per call, and writes below the threshold', () => {
    expect(run('toWriteInBatches', withShapes(tallyFixture(), [multi]), false).pass).toBe(true);
    expect(run('toWriteInBatches', withShapes(tallyFixture(), [{ ...loop, kind: 'batch', calls: 1, parameterSets: 50 }]), false).pass).toBe(true);
    expect(
      run(
        'toWriteInBatches',
        withShapes(tallyFixture(), [shapeOf('UPDATE t SET a = ? WHERE b > ?', { statementClass: 'update', calls: 3, parameterSets: 3, rows: 300 })]),
        false,
      ).pass,
    ).toBe(true);
    expect(run('toWriteInBatches', withShapes(tallyFixture(), [loop]), false, { threshold: 51 }).pass).toBe(true);
  });

  it('refuses a bad threshold and fails without shapes, with and without .not', () => {
    const tally = withShapes(tallyFixture(), [loop]);
    expect(run('toWriteInBatches', tally, true, { threshold: 1 }).pass).toBe(true);
    expect(run('toWriteInBatches', tally, false, { threshold: 1 }).message()).toContain('threshold must be an integer of at least 2, received 1');
    const noDriver = { ...tally, layers: { ...tally.layers, driver: null } };
    expect(run('toWriteInBatches', noDriver, true).pass).toBe(true);
    expect(run('toWriteInBatches', noDriver, true).message()).toContain('the driver layer was not captured');
  });
});

describe('count snapshots with serverWork', () => {
  const snapshotOf = (tally: ShapedTally, options?: { serverWork?: boolean }): string => {
    const s = countSnapshotOf(asTally(tally), options);
    if (!s.ok) throw new Error(s.reason);
    return s.text;
  };
  /** Hands back what the snapshot machinery was given, as a stored snapshot that always matches. */
  function capturing(): { seen: unknown[]; matchers: ReturnType<typeof createSqltallyMatchers> } {
    const seen: unknown[] = [];
    const m = createSqltallyMatchers(
      () =>
        function (this: unknown, received: unknown, hint?: string) {
          seen.push(hint === undefined ? [received] : [received, hint]);
          return { pass: true, message: () => '' };
        },
    );
    return { seen, matchers: m };
  }

  it('is opt-in: without it the snapshot is the v1 text it always was', () => {
    const tally = tallyWithWork(mariadbWork());
    expect(snapshotOf(tally)).toBe(snapshotOf(tallyWithWork(undefined)));
    expect(snapshotOf(tally)).not.toContain('server.work');
    expect(snapshotOf(tally, { serverWork: false })).toBe(snapshotOf(tally));
  });

  it('has every figure: exact ones with their value, unknown ones named with the reason, unreproducible ones named as left out', () => {
    const text = snapshotOf(tallyWithWork(mariadbWork()), { serverWork: true });
    const work = text.slice(text.indexOf('server.work.'), text.indexOf('\nshapes:')).split('\n');
    expect(work).toEqual([
      'server.work.rowsExamined: 20001',
      'server.work.rowsSent: 2',
      'server.work.statementRows: unknown (not read in this window)',
      'server.work.fullScans: 1',
      'server.work.noGoodIndex: 0',
      'server.work.fullJoins: 0',
      'server.work.sortRows: 0',
      'server.work.sortMergePasses: 0',
      'server.work.tempTables: 0',
      'server.work.tempDiskTables: 0',
      'server.work.lockTimeNs: left out (a time, not a count: it differs on every run)',
      'server.work.seqRowsRead: unknown (MySQL and MariaDB keep no per-table scan counters)',
      'server.work.indexScans: unknown (not read in this window)',
      'server.work.indexRowsFetched: unknown (not read in this window)',
      // Left out only where the server gave it: a figure it cannot give is unknown, whatever it is.
      'server.work.sharedBlocksHit: unknown (not read in this window)',
      'server.work.sharedBlocksRead: unknown (not read in this window)',
      'server.work.tempBlocksWritten: unknown (not read in this window)',
      'server.work.statements: 2',
      // By fingerprint, as the driver layer's shapes are: the server's quoting is not part of the counts.
      '  SELECT a FROM t WHERE b = ? calls=1 rowsExamined=20000 fullScans=1 tempDiskTables=0',
      '  SELECT b FROM t WHERE a = ? calls=1 rowsExamined=1 fullScans=0 tempDiskTables=0',
    ]);
    // A figure the window does not have never reads as 0.
    expect(text).not.toMatch(/statementRows: 0/);
  });

  it('masks ids and run figures in reasons, sorts statements and tables, and says why statements are unknown', () => {
    const a = mariadbWork({
      unknown: { seqRowsRead: 'window connection(s) #4711 sat in an open transaction' },
      statements: null,
      statementsUnknown: '2 other client session(s) were on the server',
      tables: [
        { table: 'public.u', seqScans: 1, seqRowsRead: 10, indexScans: 0, indexRowsFetched: 0 },
        { table: 'public.t', seqScans: 1, seqRowsRead: 20000, indexScans: 2, indexRowsFetched: 2 },
      ],
    });
    const b = { ...a, unknown: { seqRowsRead: 'window connection(s) #12 sat in an open transaction' }, tables: [...a.tables!].reverse() };
    const text = snapshotOf(tallyWithWork(a), { serverWork: true });
    expect(text).toContain('server.work.seqRowsRead: unknown (window connection(s) #N sat in an open transaction)');
    expect(text).toContain('server.work.statements: unknown (N other client session(s) were on the server)');
    expect(text).toContain('server.work.tables: 2\n  public.t seqScans=1 seqRowsRead=20000 indexScans=2 indexRowsFetched=2\n  public.u seqScans=1');
    expect(snapshotOf(tallyWithWork(b), { serverWork: true })).toBe(text);
    // A figure that moved shows as its own line.
    const more = mariadbWork({ figures: { ...mariadbWork().figures, rowsExamined: 20002 } });
    expect(snapshotOf(tallyWithWork(more), { serverWork: true })).toContain('server.work.rowsExamined: 20002');
    // Digits inside names stay.
    const named = mariadbWork({ unknown: { seqRowsRead: 'better-sqlite3 does not expose them' } });
    expect(snapshotOf(tallyWithWork(named), { serverWork: true })).toContain('server.work.seqRowsRead: unknown (better-sqlite3 does not expose them)');
  });

  it('leaves the section out, saying why, when the verdict is not assert or the layer has none', () => {
    const reported = { ...tallyWithWork(mariadbWork()), verdict: { kind: 'report' as const, reason: 'x', reconciliation: [], discrepancies: [] } };
    expect(snapshotOf(reported, { serverWork: true })).toContain('server.work: left out, the verdict is report, not assert');
    expect(snapshotOf(tallyWithWork(undefined), { serverWork: true })).toContain('server.work: not read (this server layer has no server-work section)');
    const noServer = tallyWithWork(undefined);
    expect(snapshotOf({ ...noServer, layers: { ...noServer.layers, server: null } }, { serverWork: true })).toContain('server.work: not captured');
  });

  it('toMatchCountSnapshot takes { serverWork } with or without a hint, and a hint alone as before', () => {
    const { seen, matchers: m } = capturing();
    const tally = tallyWithWork(mariadbWork());
    expect(m.toMatchCountSnapshot.call({ isNot: false }, tally, { serverWork: true }).pass).toBe(true);
    expect(m.toMatchCountSnapshot.call({ isNot: false }, tally, { serverWork: true }, 'after import').pass).toBe(true);
    expect(m.toMatchCountSnapshot.call({ isNot: false }, tally, 'plain').pass).toBe(true);
    expect(seen[0]).toEqual([expect.stringContaining('server.work.rowsExamined: 20001')]);
    expect(seen[1]).toEqual([expect.stringContaining('server.work.rowsExamined: 20001'), 'after import']);
    expect(seen[2]).toEqual([expect.not.stringContaining('server.work'), 'plain']);
  });

  it.each([
    ['an unknown option, listing the known ones', [{ serverwork: true }], /unknown option "serverwork": the known options are serverWork/],
    ['serverWork not a boolean', [{ serverWork: 'yes' }], /serverWork must be a boolean, received string/],
    ['a hint that is not a string', [{ serverWork: true }, 3], /the hint must be a string, received number/],
    ['a number in place of options', [3], /a hint \(string\) or options \{ serverWork\?: boolean \}, received number/],
    ['a hint before options', ['hint', { serverWork: true }], /a hint comes last/],
  ])('fails with and without .not on bad input: %s', (_name, args, why) => {
    const { seen, matchers: m } = capturing();
    for (const isNot of [false, true]) {
      const r = (m.toMatchCountSnapshot as (this: unknown, ...a: unknown[]) => SqltallyMatcherResult).call({ isNot }, tallyWithWork(mariadbWork()), ...args);
      expect(r.pass).toBe(isNot);
      expect(r.message()).toMatch(why);
    }
    expect(seen).toEqual([]);
  });
});
