import { checkCounts } from './expectations';
import { countSnapshotOf, countedVia } from './count-snapshot';
import { createSqltallyMatchers, sqltallyMatchers } from './matchers';
import { asTally, nPlusOneTally, shapeOf, tallyFixture, withShapes } from './tally.fixture';
import type { ShapedTally } from './tally.fixture';

expect.extend(sqltallyMatchers);

function tally(overrides: Partial<ShapedTally> = {}): ShapedTally {
  return tallyFixture(overrides);
}

function messageOf(fn: () => void): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected the assertion to fail');
}

describe('toHaveCounts', () => {
  it('passes on exact counts across the three layers', () => {
    expect(tally()).toHaveCounts({
      driver: { calls: 2, byClass: { insert: 2, select: 0 } },
      wire: { commands: { COM_QUERY: 2, COM_STMT_EXECUTE: 0 }, roundTrips: 2 },
      server: { statements: 2, rowsInserted: 2, global: { Com_insert: 2 } },
    });
  });

  it('fails with expected vs actual and the numbered statements', () => {
    const message = messageOf(() => expect(tally()).toHaveCounts({ driver: { calls: 1 } }));
    expect(message).toContain('driver.calls: expected 1, actual 2');
    expect(message).toContain('1. mysql2.query [insert, 6 values] INSERT INTO t VALUES (1)');
    expect(message).toContain('2. mysql2.query');
  });

  it('shows the workload error instead of a count mismatch', () => {
    const failed = tally({ workloadError: { message: "Table 't' doesn't exist", phase: 'workload', statement: 'INSERT INTO t', causes: [] } });
    expect(() => expect(failed).toHaveCounts({ driver: { calls: 2 } })).toThrow(/the captured code threw[\s\S]*Table 't' doesn't exist/);
  });

  it('refuses server counts when the verdict is report-only, naming the reason', () => {
    const reported = tally({
      verdict: { kind: 'report', reason: '1 other client connection (id 12, root@localhost, INSERT)', reconciliation: [], discrepancies: [] },
    });
    const checks = checkCounts(asTally(reported), { server: { statements: 2 }, driver: { calls: 2 } }, 'exact');
    expect(checks[0]).toMatchObject({ ok: false, blocked: expect.stringContaining('report-only') });
    expect(checks[1]).toMatchObject({ ok: true });
    // Per-connection attribution stays checkable under a report verdict: that is what it is for.
    expect(reported).toHaveCounts({ server: { perConnection: { 'statement/sql/insert': 2 } } });
    expect(() => expect(reported).toHaveCounts({ server: { statements: 2 } })).toThrow(/report-only here: 1 other client connection/);
  });

  it('never passes an incomplete layer', () => {
    const base = tally();
    const cut = tally({
      layers: { ...base.layers, wire: { ...base.layers.wire!, incomplete: true, incompleteReasons: ['TLS'] } },
    });
    expect(() => expect(cut).toHaveCounts({ wire: { roundTrips: 2 } })).toThrow(/wire layer incomplete: TLS/);
  });

  it('rejects an empty spec rather than passing vacuously', () => {
    expect(() => expect(tally()).toHaveCounts({})).toThrow(/names no count/);
  });
});

describe('toHaveCountsAtMost', () => {
  it('checks upper bounds', () => {
    expect(tally()).toHaveCountsAtMost({ driver: { calls: 3 }, server: { statements: 2 } });
    expect(() => expect(tally()).toHaveCountsAtMost({ driver: { calls: 1 } })).toThrow(/at most 1, actual 2/);
  });
});

describe('toHaveVerdict', () => {
  it('shows the reason when the kind differs', () => {
    expect(tally()).toHaveVerdict('assert');
    expect(tally()).not.toHaveVerdict('report');
    expect(() => expect(tally()).toHaveVerdict('report')).toThrow(/got assert: private server/);
  });

  it('can say that a window is incomplete: that is its answer, not an error', () => {
    const incomplete = tally({ verdict: { kind: 'incomplete', reason: 'wire: TLS', reconciliation: [], discrepancies: [] } });
    expect(incomplete).toHaveVerdict('incomplete');
    expect(incomplete).not.toHaveVerdict('assert');
  });
});

describe('error states fail with and without .not', () => {
  const base = tally();
  const threw = tally({ workloadError: { message: 'boom', phase: 'workload', statement: null, causes: [] } });
  const wireCut = tally({ layers: { ...base.layers, wire: { ...base.layers.wire!, incomplete: true, incompleteReasons: ['TLS'] } } });
  const incomplete = tally({
    layers: { ...base.layers, wire: { ...base.layers.wire!, incomplete: true, incompleteReasons: ['TLS'] } },
    verdict: { kind: 'incomplete', reason: 'wire: TLS', reconciliation: [], discrepancies: [] },
  });
  const noShapes = tally({ layers: { ...base.layers, driver: { ...base.layers.driver!, shapes: undefined as never } } });
  const noDriver = tally({ layers: { ...base.layers, driver: null } });

  type Check = [label: string, received: unknown, run: (e: jest.Matchers<void, unknown>) => void, error: RegExp];
  const cases: Check[] = [
    ['toHaveCounts: not a tally', { calls: 2 }, (e) => e.toHaveCounts({ driver: { calls: 2 } }), /expected a sqltally Tally/],
    ['toHaveCounts: null', null, (e) => e.toHaveCounts({ driver: { calls: 2 } }), /received null/],
    ['toHaveCounts: the code threw', threw, (e) => e.toHaveCounts({ driver: { calls: 2 } }), /the captured code threw[\s\S]*boom/],
    ['toHaveCounts: layer incomplete', wireCut, (e) => e.toHaveCounts({ wire: { roundTrips: 5 } }), /wire layer incomplete: TLS/],
    ['toHaveCounts: empty spec', base, (e) => e.toHaveCounts({}), /names no count/],
    ['toHaveCounts: a misspelled key', base, (e) => e.toHaveCounts({ driver: { callz: 2 } } as never), /not a count spec: driver: Unrecognized key.*callz/],
    ['toHaveCounts: a misspelled layer', base, (e) => e.toHaveCounts({ drivers: { calls: 2 } } as never), /not a count spec: .*Unrecognized key.*drivers/],
    ['toHaveCounts: a count that is not a whole number', base, (e) => e.toHaveCounts({ driver: { calls: 1.5 } }), /not a count spec: driver\.calls/],
    ['toHaveCountsAtMost: NaN', base, (e) => e.toHaveCountsAtMost({ driver: { calls: NaN } }), /not a count spec: driver\.calls/],
    [
      'toHaveCountsAtMost: a negative bound',
      base,
      (e) => e.toHaveCountsAtMost({ wire: { commands: { COM_QUERY: -1 } } }),
      /not a count spec: wire\.commands\.COM_QUERY/,
    ],
    ['toHaveCountsAtMost: not a tally', 'tally', (e) => e.toHaveCountsAtMost({ driver: { calls: 2 } }), /received string/],
    ['toHaveCountsAtMost: the code threw', threw, (e) => e.toHaveCountsAtMost({ driver: { calls: 2 } }), /the captured code threw/],
    ['toHaveCountsAtMost: layer incomplete', wireCut, (e) => e.toHaveCountsAtMost({ wire: { roundTrips: 5 } }), /wire layer incomplete/],
    ['toHaveVerdict: not a tally', undefined, (e) => e.toHaveVerdict('assert'), /received undefined/],
    ['toHaveVerdict: the code threw', threw, (e) => e.toHaveVerdict('assert'), /the captured code threw/],
    ['toHaveVerdict: not a verdict kind', base, (e) => e.toHaveVerdict('passed' as never), /"passed" is not a verdict kind/],
    ['toMatchCountSnapshot: not a tally', [1, 2], (e) => e.toMatchCountSnapshot(), /received an array/],
    ['toMatchCountSnapshot: the code threw', threw, (e) => e.toMatchCountSnapshot(), /the captured code threw/],
    ['toMatchCountSnapshot: layer incomplete', incomplete, (e) => e.toMatchCountSnapshot(), /wire layer is incomplete: TLS/],
    ['toHaveNoRepeatedShapes: not a tally', 42, (e) => e.toHaveNoRepeatedShapes(), /received number/],
    ['toHaveNoRepeatedShapes: the code threw', threw, (e) => e.toHaveNoRepeatedShapes(), /the captured code threw/],
    ['toHaveNoRepeatedShapes: no shapes recorded', noShapes, (e) => e.toHaveNoRepeatedShapes(), /records no statement shapes/],
    ['toHaveNoRepeatedShapes: no driver layer', noDriver, (e) => e.toHaveNoRepeatedShapes(), /driver layer was not captured/],
  ];

  it.each(cases)('%s', (_label, received, run, error) => {
    const plain = messageOf(() => run(expect(received)));
    const negated = messageOf(() => run(expect(received).not));
    for (const message of [plain, negated]) {
      expect(message).toMatch(error);
      expect(message).toContain('fails with and without .not');
    }
  });
});

describe('toHaveNoRepeatedShapes', () => {
  it('fails the classic N+1 loop of 20, naming the shape, its count and its line', () => {
    const message = messageOf(() => expect(nPlusOneTally(20)).toHaveNoRepeatedShapes());
    expect(message).toContain('1 shape ran 2 or more times');
    expect(message).toContain('N+1 (different parameters each time): 20 calls of');
    expect(message).toContain('SELECT * FROM order_lines WHERE order_id = ?');
    expect(message).toContain('called from test/orders.test.ts:14:7');
    // The list query ran once: it is shown below the threshold, not as an offender.
    expect(message).toMatch(/below the threshold \(1\):\n {4}1× \w{12} \[select\/execute\] SELECT id FROM orders/);
    expect(nPlusOneTally(20)).not.toHaveNoRepeatedShapes();
  });

  it('tells duplicates (the same parameters) from an N+1, and says when parameters were not tracked', () => {
    const repeated = withShapes(tallyFixture(), [
      shapeOf('SELECT * FROM settings WHERE k = ?', { statementClass: 'select', calls: 5, parameterSets: 5, distinctParameterSets: 1 }),
      shapeOf('SELECT * FROM users WHERE id = ?', { statementClass: 'select', calls: 4, parameterSets: 4, distinctParameterSets: 3, caller: null }),
      shapeOf('SELECT now()', { statementClass: 'select', calls: 3, parameterSets: 3, distinctParameterSets: null }),
    ]);
    const message = messageOf(() => expect(repeated).toHaveNoRepeatedShapes());
    expect(message).toContain('3 shapes ran 2 or more times');
    expect(message).toContain('duplicate (the same parameters every time): 5 calls');
    expect(message).toContain('N+1 with duplicates (3 distinct of 4 parameter sets): 4 calls');
    expect(message).toContain('repeated (parameters not tracked): 3 calls');
    expect(message).toContain('caller unknown');
    // Most calls first.
    expect(message.indexOf('5 calls')).toBeLessThan(message.indexOf('4 calls'));
  });

  it('judges a long loop by the values it compared (the first 64), and says so', () => {
    const loop = withShapes(tallyFixture(), [
      shapeOf('SELECT * FROM users WHERE id = ?', { statementClass: 'select', calls: 500, parameterSets: 500, distinctParameterSets: 64, distinctOf: 64 }),
      shapeOf('SELECT * FROM settings WHERE k = ?', { statementClass: 'select', calls: 300, parameterSets: 300, distinctParameterSets: 1, distinctOf: 64 }),
    ]);
    const message = messageOf(() => expect(loop).toHaveNoRepeatedShapes());
    expect(message).toContain('N+1 (different parameters each time (values compared over the first 64 of 500)): 500 calls');
    expect(message).toContain('duplicate (the same parameters every time (values compared over the first 64 of 300)): 300 calls');
  });

  it('passes when every shape ran once, and a batch of many rows is one call', () => {
    const batch = withShapes(tallyFixture(), [
      shapeOf('INSERT INTO t (a, b) VALUES (?, ?)', { kind: 'batch', calls: 1, parameterSets: 5000, distinctParameterSets: 5000 }),
      shapeOf('SELECT count(*) FROM t', { statementClass: 'select' }),
    ]);
    expect(batch).toHaveNoRepeatedShapes();
    const message = messageOf(() => expect(batch).not.toHaveNoRepeatedShapes());
    expect(message).toContain('no shape ran 2 or more times, but .not was used (2 shapes judged)');
  });

  it('takes a threshold, and refuses one that is not an integer of at least 2', () => {
    expect(nPlusOneTally(20)).toHaveNoRepeatedShapes({ threshold: 21 });
    expect(() => expect(nPlusOneTally(20)).toHaveNoRepeatedShapes({ threshold: 20 })).toThrow(/ran 20 or more times/);
    for (const threshold of [1, 0, -3, 2.5, Number.NaN, '3']) {
      const options = { threshold } as never;
      for (const message of [
        messageOf(() => expect(nPlusOneTally()).toHaveNoRepeatedShapes(options)),
        messageOf(() => expect(nPlusOneTally()).not.toHaveNoRepeatedShapes(options)),
      ]) {
        expect(message).toMatch(/threshold must be an integer of at least 2/);
        expect(message).toContain('fails with and without .not');
      }
    }
    expect(() => expect(nPlusOneTally()).toHaveNoRepeatedShapes({ treshold: 3 } as never)).toThrow(/unknown option treshold/);
  });

  it('ignores shapes by RegExp, id or fingerprint, and lists them as ignored', () => {
    const t = nPlusOneTally(20);
    const lines = t.layers.driver!.shapes![1]!;
    const byRegExp = /order_lines/g;
    // Twice with the same /g pattern: lastIndex must not make the second call miss.
    expect(t).toHaveNoRepeatedShapes({ ignore: [byRegExp] });
    expect(t).toHaveNoRepeatedShapes({ ignore: [byRegExp] });
    expect(t).toHaveNoRepeatedShapes({ ignore: [lines.id] });
    expect(t).toHaveNoRepeatedShapes({ ignore: [lines.fingerprint] });
    const message = messageOf(() => expect(t).not.toHaveNoRepeatedShapes({ ignore: [lines.id] }));
    expect(message).toContain(
      `ignored (1):\n    20× ${lines.id} [select/execute] SELECT * FROM order_lines WHERE order_id = ? (matched ignore[0] id ${lines.id})`,
    );
  });

  it('refuses ignore entries that are not a RegExp, an id or a fingerprint, naming the entry', () => {
    for (const [entry, shown] of [
      [42, '42 (number)'],
      [null, 'null'],
      ['', '""'],
      [{}, '[object Object] (object)'],
    ] as const) {
      for (const message of [
        messageOf(() => expect(nPlusOneTally()).toHaveNoRepeatedShapes({ ignore: [/x/, entry] } as never)),
        messageOf(() => expect(nPlusOneTally()).not.toHaveNoRepeatedShapes({ ignore: [/x/, entry] } as never)),
      ]) {
        expect(message).toContain(`ignore[1] is ${shown}`);
      }
    }
    expect(() => expect(nPlusOneTally()).toHaveNoRepeatedShapes({ ignore: 'x' } as never)).toThrow(/ignore must be an array/);
  });

  it('lists shapes the capture marked ignored, and does not judge them', () => {
    const t = withShapes(tallyFixture(), [
      shapeOf('SET autocommit = 0', { statementClass: 'set', calls: 7, parameterSets: 7, distinctParameterSets: 1, ignored: true }),
      shapeOf('INSERT INTO t VALUES (?)', { calls: 3, parameterSets: 3, distinctParameterSets: 3 }),
    ]);
    const message = messageOf(() => expect(t).toHaveNoRepeatedShapes());
    expect(message).toContain('1 shape ran 2 or more times');
    expect(message).toMatch(/ignored \(1\):\n {4}7× \w{12} \[set\/query\] SET autocommit = \? \(marked ignored by the capture\)/);
  });

  it('refuses shapes that do not parse, rather than judging garbage', () => {
    const bad = withShapes(tallyFixture(), [{ ...shapeOf('SELECT 1'), id: 'not-an-id' }]);
    expect(() => expect(bad).toHaveNoRepeatedShapes()).toThrow(/shapes do not parse: 0.id: a shape id is 12 lower-case hex characters/);
  });
});

describe('count snapshot text', () => {
  it('names the drivers counted, not the session default: an ORM on its own connector, or none at all', () => {
    const base = tallyFixture();
    expect(countedVia({ ...base, drivers: [{ name: 'mariadb', version: '3.5.4' }] })).toBe('mariadb');
    expect(countedVia({ ...base, drivers: [], layers: { ...base.layers, driver: null } })).toBe('no counted driver');
    expect(countedVia({ ...base, drivers: [] })).toBe('mysql2');
  });

  it('says which path counted each driver in a message, and leaves it out of the snapshot (the same counts on both)', () => {
    const base = tallyFixture();
    const drivers = [
      { name: 'mysql2' as const, version: '3.24.6', path: { fast: ['promise-view connection.query'], plain: [] } },
      {
        name: 'pg' as const,
        version: '8.23.1',
        path: { fast: [], plain: [{ feature: 'own-promise Client.query', reason: 'forced by SQLTALLY_DRIVER_PATH=plain' }] },
      },
      { name: 'mariadb' as const, version: '3.5.4' },
    ];
    expect(countedVia({ ...base, drivers }, { paths: true })).toBe(
      'mysql2 (fast path), pg (plain path: own-promise Client.query: forced by SQLTALLY_DRIVER_PATH=plain), mariadb (public API)',
    );
    expect(countedVia({ ...base, drivers })).toBe('mysql2, pg, mariadb');
  });

  it('has the format line, one line per counter, and the shapes without callers', () => {
    const snapshot = countSnapshotOf(asTally(nPlusOneTally(3)));
    expect(snapshot.ok).toBe(true);
    const text = snapshot.ok ? snapshot.text : '';
    const [list, lines] = nPlusOneTally(3).layers.driver!.shapes!;
    expect(text).toBe(
      [
        'sqltally-count-snapshot v1',
        'backend: mariadb via mysql2',
        'verdict: assert',
        'driver.calls: 4',
        'driver.byKind.query: 2',
        'driver.byClass.insert: 2',
        'driver.parameterSets: 2',
        'driver.bindValues: 12',
        'driver.rowsAffected: 2',
        'driver.errors: 0',
        'wire.commands.COM_QUERY: 2',
        'wire.commandsTotal: 2',
        'wire.roundTrips: 2',
        'wire.connections: 1',
        'wire.rowsAffected: 2',
        'server.statements: 2',
        'server.inserts: 2',
        'server.prepares: 0',
        'server.executes: 0',
        'server.bulkExecutes: 0',
        'server.commits: 0',
        'server.rowsInserted: 2',
        'shapes: 2',
        `  ${lines!.id} select/execute calls=3 parameterSets=3: SELECT * FROM order_lines WHERE order_id = ?`,
        `  ${list!.id} select/execute calls=1 parameterSets=1: SELECT id FROM orders WHERE customer_id = ?`,
      ].join('\n'),
    );
    expect(text).not.toContain('orders.test.ts');
    expect(text).not.toContain('10.11');
  });

  it('leaves the server out, saying so, when the verdict is not assert; says what was not captured', () => {
    const base = tallyFixture();
    const reported = tallyFixture({
      layers: { ...base.layers, wire: null, driver: { ...base.layers.driver!, shapes: undefined as never } },
      verdict: { kind: 'report', reason: 'other client connection 12', reconciliation: [], discrepancies: [] },
    });
    const snapshot = countSnapshotOf(asTally(reported));
    const text = snapshot.ok ? snapshot.text : snapshot.reason;
    expect(text).toContain('wire: not captured (in-process backend, or the wire proxy was off)');
    expect(text).toContain('server: left out, the verdict is report, not assert');
    expect(text).toContain('shapes: not recorded by this driver layer');
    // The reason can carry connection ids: it is not in the snapshot.
    expect(text).not.toContain('connection 12');
  });

  it('does not depend on the order shapes were first seen in', () => {
    const t = nPlusOneTally(3);
    const reversed = withShapes(t, [...t.layers.driver!.shapes!].reverse());
    expect(countSnapshotOf(asTally(reversed))).toEqual(countSnapshotOf(asTally(t)));
  });
});

describe('createSqltallyMatchers', () => {
  it('hands the snapshot text to the given snapshot matcher and words a version mismatch', () => {
    const seen: unknown[] = [];
    const matchers = createSqltallyMatchers(
      () =>
        function (this: unknown, received: unknown) {
          seen.push(received);
          return { pass: false, message: () => 'stored differs', actual: received, expected: '"sqltally-count-snapshot v0\ndriver.calls: 1"' };
        },
    );
    const result = matchers.toMatchCountSnapshot.call({ isNot: false }, tallyFixture());
    expect(seen[0]).toEqual(expect.stringMatching(/^sqltally-count-snapshot v1\nbackend: mariadb via mysql2\n/));
    expect(result.pass).toBe(false);
    expect(result.message()).toMatch(
      /the stored snapshot was written as sqltally-count-snapshot v0; this sqltally reads and writes sqltally-count-snapshot v1[\s\S]*jest -u/,
    );
  });
});
